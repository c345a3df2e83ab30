//===- CostModel.cpp - op and collective time estimates -------------------===//

#include "loom/Analysis/CostModel.h"
#include "loom/Analysis/OpIds.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Runtime/Symbols.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/CastInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <cmath>

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
  if (const llvm::json::Object *contention = root->getObject("contention")) {
    std::optional<double> slowdown =
        contention->getNumber("compute_while_communicating");
    if (!slowdown || !(*slowdown >= 0) || !std::isfinite(*slowdown))
      return fieldError(source, "expected a non-negative number for "
                                "contention.compute_while_communicating");
    device.computeSlowdown = *slowdown;
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
  // q k^T and p v: 2 FLOPs per multiply-add each (the forward's `factor`
  // 4); causal halves them. The gradient recomputes the scores and adds the
  // four backward products: 2.5x the forward (`factor` 10).
  auto attentionFlops = [](RankedTensorType q, RankedTensorType k, bool causal,
                           double factor) {
    double full = factor * q.getDimSize(0) * q.getDimSize(2) * q.getDimSize(1) *
                  k.getDimSize(1) * q.getDimSize(3);
    return causal ? full / 2 : full;
  };
  if (auto attention = dyn_cast<train::AttentionOp>(op)) {
    work.flops = attentionFlops(attention.getQuery().getType(),
                                attention.getKey().getType(),
                                attention.getCausal(), 4.0);
  } else if (auto grad = dyn_cast<train::AttentionGradOp>(op)) {
    work.flops =
        attentionFlops(grad.getQuery().getType(), grad.getKey().getType(),
                       grad.getCausal(), 10.0);
  } else if (auto call = dyn_cast<train::CallKernelOp>(op)) {
    // train-fuse-attention's kernels do the work of the ops they replace.
    // Their scalars are batch, seq, heads, kv heads, head dim, causal,
    // scale; a causal flag that is not a constant counts as causal.
    namespace symbols = loom::runtime::symbols;
    StringRef callee = call.getCallee();
    bool forward =
        callee == symbols::kAttentionF32 || callee == symbols::kAttentionBf16;
    bool backward = callee == symbols::kAttentionGradF32 ||
                    callee == symbols::kAttentionGradBf16;
    if ((forward || backward) && call.getInputs().size() >= 2 &&
        call.getScalars().size() == 7) {
      auto q = dyn_cast<RankedTensorType>(call.getInputs()[0].getType());
      auto k = dyn_cast<RankedTensorType>(call.getInputs()[1].getType());
      APInt causal;
      bool notCausal =
          matchPattern(call.getScalars()[5], m_ConstantInt(&causal)) &&
          causal.isZero();
      if (q && k && q.getRank() == 4 && k.getRank() == 4)
        work.flops = attentionFlops(q, k, !notCausal, forward ? 4.0 : 10.0);
    }
  } else if (isa<train::LinearCrossEntropyOp, train::LinearCrossEntropyGradOp>(
                 op)) {
    // The logits' projection (2 FLOPs per multiply-add) and the loss on
    // them; the gradient recomputes the logits and adds the two products
    // of the backward (hidden's and the weight's gradients).
    auto hidden = cast<RankedTensorType>(op->getOperand(0).getType());
    auto weight = cast<RankedTensorType>(op->getOperand(1).getType());
    double tokens = hidden.getDimSize(0), vocab = weight.getDimSize(0);
    double projection = 2.0 * tokens * hidden.getDimSize(1) * vocab;
    work.flops = isa<train::LinearCrossEntropyOp>(op)
                     ? projection + 5.0 * tokens * vocab
                     : 3.0 * projection + 5.0 * tokens * vocab;
  } else if (isa<train::CrossEntropyOp, train::CrossEntropyGradOp>(op)) {
    work.flops = 5.0 * elements(op->getOperand(0));
  } else if (isa<train::RMSNormOp, train::RoPEOp>(op)) {
    work.flops = 4.0 * elements(op->getOperand(0));
  }
  return work;
}

/// Reads the object `name` of `root` as id -> T with `read`; absent is empty.
template <typename T, typename Read>
static llvm::Error readIds(const llvm::json::Object &root, llvm::StringRef name,
                           llvm::StringRef source,
                           llvm::DenseMap<int64_t, T> &into, Read read) {
  const llvm::json::Value *value = root.get(name);
  if (!value)
    return llvm::Error::success();
  const llvm::json::Object *object = value->getAsObject();
  if (!object)
    return fieldError(source, "expected an object '" + name + "'");
  for (const auto &[key, entry] : *object) {
    int64_t id;
    if (llvm::StringRef(key).getAsInteger(10, id) || id < 0)
      return fieldError(source, "expected op ids as keys of '" + name +
                                    "', found '" + llvm::StringRef(key) + "'");
    std::optional<T> parsed = read(entry);
    if (!parsed)
      return fieldError(source, "bad entry for op " + llvm::Twine(id) +
                                    " in '" + name + "'");
    into[id] = *parsed;
  }
  return llvm::Error::success();
}

static std::optional<double> readMicros(const llvm::json::Value &value) {
  std::optional<double> us = value.getAsNumber();
  if (!us || !(*us >= 0) || !std::isfinite(*us))
    return std::nullopt;
  return *us * 1e-6;
}

llvm::Expected<Profile> Profile::parse(llvm::StringRef text,
                                       llvm::StringRef source) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return fieldError(source, "invalid JSON: " + toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root || !root->getObject("ops"))
    return fieldError(source, "expected a trainer's --profile, an object "
                              "with \"ops\": {\"<op id>\": microseconds}");
  Profile profile;
  profile.source = source.str();
  if (std::optional<llvm::StringRef> target = root->getString("target"))
    profile.target = target->str();
  profile.worldSize = root->getInteger("world_size").value_or(0);
  profile.steps = root->getInteger("steps").value_or(0);
  profile.stepSeconds = root->getNumber("step_us").value_or(0) * 1e-6;
  profile.waitSeconds = root->getNumber("waits_us").value_or(0) * 1e-6;
  if (llvm::Error error =
          readIds(*root, "ops", source, profile.runSeconds, readMicros))
    return std::move(error);
  if (llvm::Error error =
          readIds(*root, "fused", source, profile.fusedInto,
                  [](const llvm::json::Value &value) -> std::optional<int64_t> {
                    std::optional<int64_t> id = value.getAsInteger();
                    return id && *id >= 0 ? id : std::nullopt;
                  }))
    return std::move(error);
  if (llvm::Error error =
          readIds(*root, "collectives", source, profile.collectiveSeconds,
                  [](const llvm::json::Value &value) -> std::optional<double> {
                    const llvm::json::Object *entry = value.getAsObject();
                    const llvm::json::Value *us =
                        entry ? entry->get("us") : nullptr;
                    return us ? readMicros(*us) : std::nullopt;
                  }))
    return std::move(error);
  return profile;
}

llvm::Expected<Profile> Profile::load(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fieldError(path, "cannot open: " + buffer.getError().message());
  return parse((*buffer)->getBuffer(), path);
}

train::TargetAttr DeviceDescription::toAttr(MLIRContext *context,
                                            train::ProfileAttr profile) const {
  Builder builder(context);
  SmallVector<NamedAttribute> flops;
  for (const auto &entry : peakFlops)
    flops.push_back(builder.getNamedAttr(
        entry.getKey(), builder.getF64FloatAttr(entry.getValue())));
  SmallVector<Attribute> linkAttrs;
  for (const LinkDescription &link : links)
    linkAttrs.push_back(
        train::LinkAttr::get(context, link.scope, link.maxRanks,
                             builder.getF64FloatAttr(link.bandwidth),
                             builder.getF64FloatAttr(link.latency)));
  return train::TargetAttr::get(context, name, builder.getDictionaryAttr(flops),
                                builder.getF64FloatAttr(memoryBandwidth),
                                builder.getF64FloatAttr(memoryBytes),
                                builder.getF64FloatAttr(computeEfficiency),
                                builder.getF64FloatAttr(memoryEfficiency),
                                builder.getF64FloatAttr(computeSlowdown),
                                builder.getArrayAttr(linkAttrs), profile);
}

DeviceDescription DeviceDescription::fromAttr(train::TargetAttr target) {
  DeviceDescription device;
  device.name = target.getDevice().str();
  for (NamedAttribute entry : target.getPeakFlops())
    device.peakFlops[entry.getName().getValue()] =
        cast<FloatAttr>(entry.getValue()).getValueAsDouble();
  device.memoryBandwidth = target.getMemoryBandwidth().getValueAsDouble();
  device.memoryBytes = target.getMemoryBytes().getValueAsDouble();
  device.computeEfficiency = target.getComputeEfficiency().getValueAsDouble();
  device.memoryEfficiency = target.getMemoryEfficiency().getValueAsDouble();
  device.computeSlowdown = target.getComputeSlowdown().getValueAsDouble();
  for (auto link : target.getLinks().getAsRange<train::LinkAttr>())
    device.links.push_back({link.getScope().str(), link.getMaxRanks(),
                            link.getBandwidth().getValueAsDouble(),
                            link.getLatency().getValueAsDouble()});
  return device;
}

/// The map's keys in increasing order, and their values.
template <typename Value>
static std::pair<SmallVector<int64_t>, SmallVector<Value>>
sortedEntries(const llvm::DenseMap<int64_t, Value> &map) {
  SmallVector<int64_t> keys;
  for (const auto &entry : map)
    keys.push_back(entry.first);
  llvm::sort(keys);
  SmallVector<Value> values;
  for (int64_t key : keys)
    values.push_back(map.lookup(key));
  return {keys, values};
}

train::ProfileAttr Profile::toAttr(MLIRContext *context) const {
  auto [ops, opSeconds] = sortedEntries(runSeconds);
  auto [fused, into] = sortedEntries(fusedInto);
  auto [collectives, seconds] = sortedEntries(collectiveSeconds);
  Builder builder(context);
  return train::ProfileAttr::get(context, source, target, worldSize, steps,
                                 builder.getF64FloatAttr(stepSeconds),
                                 builder.getF64FloatAttr(waitSeconds),
                                 DenseI64ArrayAttr::get(context, ops),
                                 DenseF64ArrayAttr::get(context, opSeconds),
                                 DenseI64ArrayAttr::get(context, fused),
                                 DenseI64ArrayAttr::get(context, into),
                                 DenseI64ArrayAttr::get(context, collectives),
                                 DenseF64ArrayAttr::get(context, seconds));
}

Profile Profile::fromAttr(train::ProfileAttr attr) {
  Profile profile;
  profile.source = attr.getSource().str();
  profile.target = attr.getTarget().str();
  profile.worldSize = attr.getWorldSize();
  profile.steps = attr.getSteps();
  profile.stepSeconds = attr.getStepSeconds().getValueAsDouble();
  profile.waitSeconds = attr.getWaitSeconds().getValueAsDouble();
  for (auto [id, seconds] : llvm::zip_equal(attr.getOps().asArrayRef(),
                                            attr.getOpSeconds().asArrayRef()))
    profile.runSeconds[id] = seconds;
  for (auto [id, into] : llvm::zip_equal(attr.getFused().asArrayRef(),
                                         attr.getFusedInto().asArrayRef()))
    profile.fusedInto[id] = into;
  for (auto [id, seconds] :
       llvm::zip_equal(attr.getCollectives().asArrayRef(),
                       attr.getCollectiveSeconds().asArrayRef()))
    profile.collectiveSeconds[id] = seconds;
  return profile;
}

llvm::Error CostModel::bindProfile(Profile loaded, Operation *root) {
  profile.reset();
  measured.clear();
  issue.clear();
  // The ops the profile can speak of: those with one id each.
  llvm::DenseMap<int64_t, Operation *> opOf;
  int64_t worldOfCollectives = 0;
  // Outermost first: an op's id is its own, not a nested op's copy.
  root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (std::optional<int64_t> id = getOpId(op))
      opOf.try_emplace(*id, op);
    if (auto collective = dyn_cast<coll::CollectiveOpInterface>(op))
      if (std::optional<int64_t> ranks = collective.getNumRanks())
        worldOfCollectives = std::max(worldOfCollectives, *ranks);
  });
  if (opOf.empty())
    return fieldError(loaded.source,
                      "the IR has no op ids to match the profile against "
                      "(trainer-stamp-op-ids numbers them; print the IR "
                      "with -mlir-print-debuginfo to keep them in a file)");
  if (!loaded.collectiveSeconds.empty() && worldOfCollectives &&
      loaded.worldSize && loaded.worldSize != worldOfCollectives)
    return fieldError(loaded.source,
                      "measured on " + llvm::Twine(loaded.worldSize) +
                          " ranks; this step's collectives run on " +
                          llvm::Twine(worldOfCollectives));
  // A run's time goes to its ops in proportion to their estimates.
  llvm::DenseMap<int64_t, SmallVector<int64_t>> members;
  for (auto [id, seconds] : loaded.runSeconds)
    members[id].push_back(id);
  for (auto [member, first] : loaded.fusedInto)
    if (member != first && loaded.runSeconds.count(first))
      members[first].push_back(member);
  for (auto &[first, ids] : members) {
    double total = 0;
    SmallVector<std::pair<int64_t, double>> shares;
    for (int64_t id : ids)
      if (Operation *op = opOf.lookup(id)) {
        double estimate = getEstimatedComputeTime(op);
        shares.push_back({id, estimate});
        total += estimate;
      }
    for (auto [id, estimate] : shares)
      measured[id] = loaded.runSeconds.lookup(first) *
                     (total > 0 ? estimate / total : 1.0 / shares.size());
  }
  // A start's or wait's own run is its call's cost to the host; the
  // collective's time is under "collectives".
  for (auto [id, op] : opOf)
    if (isa<coll::CollectiveOpInterface, coll::WaitOp>(op)) {
      auto it = measured.find(id);
      if (it == measured.end())
        continue;
      issue[id] = it->second;
      measured.erase(it);
    }
  for (auto [id, seconds] : loaded.collectiveSeconds)
    if (opOf.count(id))
      measured[id] = seconds;
  if (measured.empty())
    return fieldError(loaded.source,
                      "matches none of the " + llvm::Twine(opOf.size()) +
                          " op ids here (a profile of another model, or of "
                          "a step numbered differently?)");
  profile = std::move(loaded);
  return llvm::Error::success();
}

std::optional<double> CostModel::getProfiled(Operation *op) const {
  if (measured.empty())
    return std::nullopt;
  SmallVector<int64_t> ids = getOpIds(op->getLoc());
  if (ids.empty())
    return std::nullopt;
  double total = 0;
  for (int64_t id : ids) {
    auto it = measured.find(id);
    if (it == measured.end())
      return std::nullopt;
    total += it->second;
  }
  return total;
}

double CostModel::getIssueTime(Operation *op) const {
  if (issue.empty())
    return 0;
  double total = 0;
  for (int64_t id : getOpIds(op->getLoc()))
    total += issue.lookup(id);
  return total;
}

double CostModel::getComputeTime(Operation *op) const {
  if (std::optional<double> seconds = getProfiled(op))
    return *seconds;
  return getEstimatedComputeTime(op);
}

double CostModel::getEstimatedComputeTime(Operation *op) const {
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
  if (std::optional<double> seconds = getProfiled(start))
    return *seconds;
  return getEstimatedCollectiveTime(start);
}

double CostModel::getEstimatedCollectiveTime(Operation *start) const {
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

std::optional<CostModel>
loom::getCostModel(Operation *anchor, llvm::StringRef pass, bool bindProfile) {
  train::TargetAttr target = train::getTarget(anchor);
  if (!target) {
    anchor->emitError() << pass
                        << ": the module has no target (train.target); run "
                           "loom-set-target{device=<name>} first";
    return std::nullopt;
  }
  CostModel model(DeviceDescription::fromAttr(target));
  if (!bindProfile || !target.getProfile())
    return model;
  // A function without collectives has nothing a profile could change (and
  // may be a helper with no ids).
  if (!isa<ModuleOp>(anchor) && !anchor
                                     ->walk([](coll::CollectiveOpInterface) {
                                       return WalkResult::interrupt();
                                     })
                                     .wasInterrupted())
    return model;
  if (llvm::Error error =
          model.bindProfile(Profile::fromAttr(target.getProfile()), anchor)) {
    anchor->emitError() << pass << ": " << toString(std::move(error));
    return std::nullopt;
  }
  return model;
}
