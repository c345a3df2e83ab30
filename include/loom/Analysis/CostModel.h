//===- CostModel.h - op and collective time estimates -----------*- C++ -*-===//
//
// Estimates how long each op takes on a device, from a device description
// (devices/*.json): compute ops by a roofline, collectives by NCCL's ring
// alpha-beta model. A measured profile overrides estimates op by op.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_COSTMODEL_H
#define LOOM_ANALYSIS_COSTMODEL_H

#include "loom/Dialect/Coll/CollInterfaces.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include <optional>
#include <string>
#include <vector>

namespace loom {

/// A link used by communicators up to `maxRanks` ranks.
struct LinkDescription {
  std::string scope;
  /// Ranks this link serves; nullopt for the outermost link.
  std::optional<int64_t> maxRanks;
  /// Bus bandwidth per rank and direction, bytes/s.
  double bandwidth = 0;
  /// Per ring step, seconds.
  double latency = 0;
};

/// A device and its interconnect, as read from devices/<name>.json.
struct DeviceDescription {
  std::string name;
  llvm::StringMap<double> peakFlops;
  double memoryBandwidth = 0;
  double memoryBytes = 0;
  double computeEfficiency = 1;
  double memoryEfficiency = 1;
  std::vector<LinkDescription> links;

  /// Parses a description; errors name the field.
  static llvm::Expected<DeviceDescription> parse(llvm::StringRef json,
                                                 llvm::StringRef source);
  /// Loads `nameOrPath`: a path to a .json file, or a name looked up in
  /// $LOOM_DEVICE_DIR and then the source tree's devices/.
  static llvm::Expected<DeviceDescription> load(llvm::StringRef nameOrPath);

  /// The link a communicator of `ranks` ranks uses.
  const LinkDescription &getLink(int64_t ranks) const;
  /// Peak FLOP/s for an element type (f32 when the type is unknown).
  double getPeakFlops(mlir::Type elementType) const;
};

/// The work an op does, as the roofline sees it.
struct OpWork {
  double flops = 0;
  double bytes = 0;
};

/// Time estimates for ops on one device, in seconds.
class CostModel {
public:
  explicit CostModel(DeviceDescription device) : device(std::move(device)) {}

  /// Reads a profile: {"ops": {"<op id>": <microseconds>, ...}}.
  llvm::Error loadProfile(llvm::StringRef path);

  /// The op's FLOPs and bytes moved (0 for ops that do no work, such as
  /// reshapes and collectives).
  static OpWork getWork(mlir::Operation *op);

  /// Time of a compute op: max(flops / (peak * eff), bytes / (bw * eff)),
  /// or the profile's figure for `op`.
  double getComputeTime(mlir::Operation *op) const;
  /// Time of a collective on its communicator: steps * latency +
  /// bytes sent by the busiest rank / bandwidth, or the profile's figure.
  /// Collectives with dynamic sizes cost 0.
  double getCollectiveTime(mlir::Operation *start) const;
  /// The same for a collective that is not (yet) in the IR, from its
  /// traffic and the communicator's size.
  double getCollectiveTime(const coll::CollectiveTraffic &traffic,
                           int64_t ranks) const;

  /// A stable id for `op`: "<function>:<index of its top-level op>".
  /// Finds the index by scanning the block; callers that already hold the
  /// block's ops in order should use formatOpId.
  static std::string getOpId(mlir::Operation *op);
  /// The id of the `index`-th top-level op of `function`.
  static std::string formatOpId(llvm::StringRef function, unsigned index);

  const DeviceDescription &getDevice() const { return device; }

private:
  std::optional<double> getProfiled(mlir::Operation *op) const;

  DeviceDescription device;
  llvm::StringMap<double> profile;
};

/// Loads `device` for the pass `pass`; on failure emits
/// "<pass>: <reason>" on `anchor` and returns nullopt.
std::optional<CostModel> loadCostModel(mlir::Operation *anchor,
                                       llvm::StringRef pass,
                                       llvm::StringRef device);

} // namespace loom

#endif // LOOM_ANALYSIS_COSTMODEL_H
