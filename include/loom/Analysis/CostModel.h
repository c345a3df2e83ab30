//===- CostModel.h - op and collective time estimates -----------*- C++ -*-===//
//
// Estimates how long each op takes on a device, from a device description
// (devices/*.json): compute ops by a roofline, collectives by NCCL's ring
// alpha-beta model. A trainer's profile (trainer --profile, keyed by the op
// ids of trainer-stamp-op-ids) replaces estimates op by op.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_COSTMODEL_H
#define LOOM_ANALYSIS_COSTMODEL_H

#include "loom/Dialect/Coll/CollInterfaces.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
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
  /// How much longer compute takes while a collective is in flight on the
  /// same host ("contention": {"compute_while_communicating": s}): a
  /// fraction s means a rate of 1 / (1 + s). 0 when absent (a GPU's
  /// compute and NCCL's transfers do not share cores).
  double computeSlowdown = 0;
  std::vector<LinkDescription> links;

  /// Parses a description; errors name the field.
  static llvm::Expected<DeviceDescription> parse(llvm::StringRef json,
                                                 llvm::StringRef source);
  /// Loads `nameOrPath`: a path to a .json file, or a name looked up in
  /// $LOOM_DEVICE_DIR and then the source tree's devices/.
  static llvm::Expected<DeviceDescription> load(llvm::StringRef nameOrPath);
  /// The same figures as a #train.target (without a profile), and back.
  train::TargetAttr toAttr(mlir::MLIRContext *context,
                           train::ProfileAttr profile = {}) const;
  static DeviceDescription fromAttr(train::TargetAttr target);

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

/// What a trainer measured (trainer --profile): the mean per step over its
/// profiled steps and over its ranks, by op id (trainer-stamp-op-ids).
///
///   {"format": "loom-profile", "version": 1, "target": "cpu",
///    "world_size": 2, "steps": 4, "step_us": 5120.5, "waits_us": 80.2,
///    "ops": {"<id>": <us>, ...},
///    "fused": {"<id>": <id of the run it was timed in>, ...},
///    "collectives": {"<id>": {"kind": "all_gather", "bytes": <n>,
///                             "ranks": 2, "us": <us>,
///                             "algbw_gbps": <bytes / us / 1e3>}, ...}}
///
/// Only "ops" is required.
struct Profile {
  std::string source, target;
  int64_t worldSize = 0, steps = 0;
  /// The step, and the time it spent blocked in collective waits (on the
  /// CPU; the GPU's waits are on its streams).
  double stepSeconds = 0, waitSeconds = 0;
  /// Compute time of each run of ops the trainer timed, by its first id.
  llvm::DenseMap<int64_t, double> runSeconds;
  /// Ids timed inside another id's run (fused ops) -> that run's id.
  llvm::DenseMap<int64_t, int64_t> fusedInto;
  /// Start-to-end time of each collective.
  llvm::DenseMap<int64_t, double> collectiveSeconds;

  static llvm::Expected<Profile> parse(llvm::StringRef json,
                                       llvm::StringRef source);
  static llvm::Expected<Profile> load(llvm::StringRef path);
  /// The same figures as a #train.profile (ids in increasing order), and
  /// back.
  train::ProfileAttr toAttr(mlir::MLIRContext *context) const;
  static Profile fromAttr(train::ProfileAttr attr);
};

/// Time estimates for ops on one device, in seconds.
class CostModel {
public:
  explicit CostModel(DeviceDescription device) : device(std::move(device)) {}

  /// Binds a profile (Profile) to the ops under `root` that carry its ids.
  /// A run of fused ops is shared among them in proportion to their
  /// estimates. Errors when the profile matches none of them (another
  /// model, or IR printed without its locations), or when its collectives
  /// ran on another number of ranks than root's.
  llvm::Error bindProfile(Profile profile, mlir::Operation *root);
  /// The bound profile, or null.
  const Profile *getProfile() const { return profile ? &*profile : nullptr; }
  /// Ops under the bound root that the profile measured.
  unsigned getNumProfiledOps() const { return measured.size(); }

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
  /// What starting or waiting for a collective costs the compute side
  /// (the runtime call, a stall aside): the profile's figure for a start
  /// or a wait, else 0.
  double getIssueTime(mlir::Operation *op) const;
  /// The device model's figures, whatever the profile says.
  double getEstimatedComputeTime(mlir::Operation *op) const;
  double getEstimatedCollectiveTime(mlir::Operation *start) const;
  /// The profile's figure for `op` (the sum over its ids, when it holds
  /// several), or nullopt when the profile measured none or not all.
  std::optional<double> getProfiled(mlir::Operation *op) const;
  /// The same for a collective that is not (yet) in the IR, from its
  /// traffic and the communicator's size.
  double getCollectiveTime(const coll::CollectiveTraffic &traffic,
                           int64_t ranks) const;

  const DeviceDescription &getDevice() const { return device; }

private:
  DeviceDescription device;
  std::optional<Profile> profile;
  /// Seconds per op id, runs of fused ops shared out.
  llvm::DenseMap<int64_t, double> measured;
  /// Host seconds of the collective starts' and waits' calls, by op id.
  llvm::DenseMap<int64_t, double> issue;
};

/// The cost model of the target of the module at or above `anchor`
/// (train.target, set by loom-set-target), its profile (unless
/// `bindProfile` is false: passes that run before op ids are stamped) bound
/// to the ops under `anchor`; on failure (no target, a profile that matches
/// no op) emits "<pass>: <reason>" on `anchor` and returns nullopt.
std::optional<CostModel> getCostModel(mlir::Operation *anchor,
                                      llvm::StringRef pass,
                                      bool bindProfile = true);

} // namespace loom

#endif // LOOM_ANALYSIS_COSTMODEL_H
