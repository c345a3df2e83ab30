//===- CostModel.cpp - op and collective time estimates -------------------===//

#include "loom/Analysis/CostModel.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Interfaces/CastInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace loom;

static llvm::Error fieldError(llvm::StringRef source, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 source + ": " + what);
}

/// Reads a positive number at `key` of `object`.
static llvm::Expected<double> getPositive(const llvm::json::Object &object,
                                          llvm::StringRef key,
                                          llvm::StringRef source) {
  std::optional<double> value = object.getNumber(key);
  if (!value)
    return fieldError(source, "expected a number for '" + key + "'");
  if (!(*value > 0))
    return fieldError(source, "expected '" + key + "' to be positive");
  return *value;
}

llvm::Expected<DeviceDescription>
DeviceDescription::parse(llvm::StringRef text, llvm::StringRef source) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return fieldError(source, "invalid JSON: " + toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return fieldError(source, "expected a JSON object");
  DeviceDescription device;
  if (std::optional<llvm::StringRef> name = root->getString("name"))
    device.name = name->str();
  else
    return fieldError(source, "expected a string for 'name'");
  const llvm::json::Object *flops = root->getObject("peak_flops");
  if (!flops || flops->empty())
    return fieldError(source,
                      "expected an object 'peak_flops' of dtype -> FLOP/s");
  for (const auto &[key, value] : *flops) {
    std::optional<double> number = value.getAsNumber();
    if (!number || !(*number > 0))
      return fieldError(source, "expected a positive number for peak_flops." +
                                    llvm::StringRef(key));
    device.peakFlops[key] = *number;
  }
  for (auto [key, slot] :
       {std::pair{"memory_bandwidth", &device.memoryBandwidth},
        std::pair{"memory_bytes", &device.memoryBytes}}) {
    llvm::Expected<double> value = getPositive(*root, key, source);
    if (!value)
      return value.takeError();
    *slot = *value;
  }
  if (const llvm::json::Object *efficiency = root->getObject("efficiency")) {
    for (auto [key, slot] : {std::pair{"compute", &device.computeEfficiency},
                             std::pair{"memory", &device.memoryEfficiency}}) {
      llvm::Expected<double> value = getPositive(*efficiency, key, source);
      if (!value)
        return value.takeError();
      if (*value > 1)
        return fieldError(source, "expected efficiency." + llvm::Twine(key) +
                                      " in (0, 1]");
      *slot = *value;
    }
  }
  const llvm::json::Array *links = root->getArray("links");
  if (!links || links->empty())
    return fieldError(source, "expected a non-empty array 'links'");
  for (const llvm::json::Value &entry : *links) {
    const llvm::json::Object *object = entry.getAsObject();
    if (!object)
      return fieldError(source, "expected each link to be an object");
    LinkDescription link;
    link.scope = object->getString("scope").value_or("").str();
    if (std::optional<int64_t> maxRanks = object->getInteger("max_ranks"))
      link.maxRanks = *maxRanks;
    llvm::Expected<double> bandwidth =
        getPositive(*object, "bandwidth", source);
    if (!bandwidth)
      return bandwidth.takeError();
    link.bandwidth = *bandwidth;
    std::optional<double> latency = object->getNumber("latency");
    if (!latency || *latency < 0)
      return fieldError(source, "expected a non-negative 'latency' for link '" +
                                    link.scope + "'");
    link.latency = *latency;
    device.links.push_back(link);
  }
  if (device.links.back().maxRanks)
    return fieldError(source, "expected the last link to have no 'max_ranks' "
                              "(it serves every larger communicator)");
  return device;
}

llvm::Expected<DeviceDescription>
DeviceDescription::load(llvm::StringRef nameOrPath) {
  llvm::SmallVector<std::string> candidates;
  if (nameOrPath.ends_with(".json")) {
    candidates.push_back(nameOrPath.str());
  } else {
    if (const char *dir = std::getenv("LOOM_DEVICE_DIR"))
      candidates.push_back(
          (llvm::Twine(dir) + "/" + nameOrPath + ".json").str());
    candidates.push_back(
        (llvm::Twine(LOOM_DEVICE_DIR) + "/" + nameOrPath + ".json").str());
  }
  for (const std::string &path : candidates) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(path);
    if (buffer)
      return parse((*buffer)->getBuffer(), path);
  }
  return fieldError(nameOrPath, "no device description found (looked in " +
                                    llvm::join(candidates, ", ") + ")");
}

const LinkDescription &DeviceDescription::getLink(int64_t ranks) const {
  for (const LinkDescription &link : links)
    if (!link.maxRanks || ranks <= *link.maxRanks)
      return link;
  return links.back();
}

double DeviceDescription::getPeakFlops(Type elementType) const {
  std::string name;
  llvm::raw_string_ostream os(name);
  elementType.print(os);
  auto it = peakFlops.find(name);
  if (it != peakFlops.end())
    return it->second;
  auto f32 = peakFlops.find("f32");
  return f32 != peakFlops.end() ? f32->second : peakFlops.begin()->second;
}

/// Bytes of every ranked tensor operand and result: each read or written once.
static double tensorBytes(Operation *op) {
  double bytes = 0;
  auto add = [&](Type type) {
    if (auto tensor = dyn_cast<RankedTensorType>(type))
      if (std::optional<int64_t> size = coll::getStaticSizeInBytes(tensor))
        bytes += double(*size);
  };
  for (Type type : op->getOperandTypes())
    add(type);
  for (Type type : op->getResultTypes())
    add(type);
  return bytes;
}

/// Float operations in a linalg body: one per arith/math op computing a
/// float, not counting constants and casts (precision changes are free on
/// the units that matter).
static double bodyFlops(Block &body) {
  double flops = 0;
  for (Operation &op : body.without_terminator())
    if (op.getNumResults() == 1 && isa<FloatType>(op.getResult(0).getType()) &&
        !isa<arith::ConstantOp, CastOpInterface>(op) && op.getDialect() &&
        (op.getDialect()->getNamespace() == "arith" ||
         op.getDialect()->getNamespace() == "math"))
      flops += 1;
  return flops;
}

OpWork CostModel::getWork(Operation *op) {
  OpWork work;
  if (isa<coll::CollectiveOpInterface, coll::WaitOp, coll::ReleaseOp>(op))
    return work;
  // Reshapes, slices and empties are views or allocations, not work.
  if (isa<tensor::EmptyOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
          tensor::CastOp, tensor::ExtractSliceOp>(op))
    return work;
  work.bytes = tensorBytes(op);
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    double points = 1;
    for (int64_t range : linalgOp.getStaticLoopRanges()) {
      if (ShapedType::isDynamic(range))
        return work;
      points *= double(range);
    }
    work.flops = points * bodyFlops(*linalgOp.getBlock());
    return work;
  }
  auto elements = [](Value v) {
    return double(cast<RankedTensorType>(v.getType()).getNumElements());
  };
  if (auto attention = dyn_cast<train::AttentionOp>(op)) {
    // q k^T and p v: 2 FLOPs per multiply-add each; causal halves them.
    auto q = attention.getQuery().getType();
    auto k = attention.getKey().getType();
    double full = 4.0 * q.getDimSize(0) * q.getDimSize(2) * q.getDimSize(1) *
                  k.getDimSize(1) * q.getDimSize(3);
    work.flops = attention.getCausal() ? full / 2 : full;
  } else if (auto grad = dyn_cast<train::AttentionGradOp>(op)) {
    // Recomputing scores plus the four backward products: 2.5x the forward.
    auto q = grad.getQuery().getType();
    auto k = grad.getKey().getType();
    double full = 10.0 * q.getDimSize(0) * q.getDimSize(2) * q.getDimSize(1) *
                  k.getDimSize(1) * q.getDimSize(3);
    work.flops = grad.getCausal() ? full / 2 : full;
  } else if (isa<train::CrossEntropyOp, train::CrossEntropyGradOp>(op)) {
    work.flops = 5.0 * elements(op->getOperand(0));
  } else if (isa<train::RMSNormOp, train::RoPEOp>(op)) {
    work.flops = 4.0 * elements(op->getOperand(0));
  }
  return work;
}

std::string CostModel::getOpId(Operation *op) {
  auto func = op->getParentOfType<FunctionOpInterface>();
  if (!func)
    return "?";
  Block &block = func.getFunctionBody().front();
  Operation *top = block.findAncestorOpInBlock(*op);
  unsigned index = 0;
  for (Operation &candidate : block) {
    if (&candidate == top)
      break;
    ++index;
  }
  return formatOpId(func.getName(), index);
}

std::string CostModel::formatOpId(llvm::StringRef function, unsigned index) {
  return (function + ":" + llvm::Twine(index)).str();
}

llvm::Error CostModel::loadProfile(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fieldError(path, "cannot open: " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return fieldError(path, "invalid JSON: " + toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  const llvm::json::Object *ops = root ? root->getObject("ops") : nullptr;
  if (!ops)
    return fieldError(path, "expected {\"ops\": {\"<op id>\": microseconds}}");
  for (const auto &[key, value] : *ops) {
    std::optional<double> us = value.getAsNumber();
    if (!us || *us < 0)
      return fieldError(path, "expected a non-negative time for op '" +
                                  llvm::StringRef(key) + "'");
    profile[key] = *us * 1e-6;
  }
  return llvm::Error::success();
}

std::optional<double> CostModel::getProfiled(Operation *op) const {
  if (profile.empty())
    return std::nullopt;
  auto it = profile.find(getOpId(op));
  if (it == profile.end())
    return std::nullopt;
  return it->second;
}

double CostModel::getComputeTime(Operation *op) const {
  if (std::optional<double> measured = getProfiled(op))
    return *measured;
  OpWork work = getWork(op);
  if (work.flops == 0 && work.bytes == 0)
    return 0;
  Type elementType;
  for (Type type : op->getOperandTypes())
    if (auto tensor = dyn_cast<RankedTensorType>(type)) {
      elementType = tensor.getElementType();
      break;
    }
  double peak = elementType ? device.getPeakFlops(elementType)
                            : device.peakFlops.begin()->second;
  double computeTime = work.flops / (peak * device.computeEfficiency);
  double memoryTime =
      work.bytes / (device.memoryBandwidth * device.memoryEfficiency);
  return std::max(computeTime, memoryTime);
}

double CostModel::getCollectiveTime(Operation *start) const {
  if (std::optional<double> measured = getProfiled(start))
    return *measured;
  auto collective = cast<coll::CollectiveOpInterface>(start);
  std::optional<coll::CollectiveTraffic> traffic = collective.getTraffic();
  std::optional<int64_t> ranks = collective.getNumRanks();
  if (!traffic || !ranks)
    return 0;
  return getCollectiveTime(*traffic, *ranks);
}

double CostModel::getCollectiveTime(const coll::CollectiveTraffic &traffic,
                                    int64_t ranks) const {
  if (ranks <= 1)
    return 0;
  const LinkDescription &link = device.getLink(ranks);
  double bytes = double(std::max(traffic.sentBytes, traffic.receivedBytes));
  return double(traffic.steps) * link.latency + bytes / link.bandwidth;
}

std::optional<CostModel> loom::loadCostModel(Operation *anchor,
                                             llvm::StringRef pass,
                                             llvm::StringRef device) {
  llvm::Expected<DeviceDescription> description =
      DeviceDescription::load(device);
  if (!description) {
    anchor->emitError() << pass << ": " << toString(description.takeError());
    return std::nullopt;
  }
  return CostModel(std::move(*description));
}
