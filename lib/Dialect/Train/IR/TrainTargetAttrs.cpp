//===- TrainTargetAttrs.cpp - the target's attributes ---------------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include <cmath>

using namespace mlir;
using namespace loom::train;

FailureOr<FloatAttr> loom::train::parseF64Parameter(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return FloatAttr::get(Float64Type::get(parser.getContext()), value);
}

void loom::train::printF64Parameter(AsmPrinter &printer, FloatAttr value) {
  printer.printFloat(value.getValue());
}

/// Whether `value` is an f64 of at least `least`, and finite.
static bool isF64AtLeast(FloatAttr value, double least) {
  return value && value.getType().isF64() &&
         std::isfinite(value.getValueAsDouble()) &&
         value.getValueAsDouble() >= least;
}

/// Whether `value` is a positive finite f64.
static bool isPositiveF64(FloatAttr value) {
  return isF64AtLeast(value, 0) && value.getValueAsDouble() > 0;
}

LogicalResult LinkAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringRef, std::optional<int64_t> maxRanks,
                               FloatAttr bandwidth, FloatAttr latency) {
  if (maxRanks && *maxRanks < 1)
    return emitError() << "expected max_ranks >= 1, got " << *maxRanks;
  if (!isPositiveF64(bandwidth))
    return emitError() << "expected a positive bandwidth, got " << bandwidth;
  if (!isF64AtLeast(latency, 0))
    return emitError() << "expected a non-negative latency, got " << latency;
  return success();
}

LogicalResult ProfileAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, StringRef, StringRef,
    int64_t worldSize, int64_t steps, FloatAttr stepSeconds,
    FloatAttr waitSeconds, DenseI64ArrayAttr ops, DenseF64ArrayAttr opSeconds,
    DenseI64ArrayAttr fused, DenseI64ArrayAttr fusedInto,
    DenseI64ArrayAttr collectives, DenseF64ArrayAttr collectiveSeconds) {
  if (worldSize < 0 || steps < 0)
    return emitError() << "expected a non-negative world_size and steps";
  if (!isF64AtLeast(stepSeconds, 0) || !isF64AtLeast(waitSeconds, 0))
    return emitError() << "expected non-negative step_seconds and "
                          "wait_seconds";
  for (auto [ids, idsName, values, valuesName] :
       {std::tuple{ops.asArrayRef(), "ops", opSeconds.asArrayRef(),
                   "op_seconds"},
        std::tuple{collectives.asArrayRef(), "collectives",
                   collectiveSeconds.asArrayRef(), "collective_seconds"}}) {
    if (ids.size() != values.size())
      return emitError() << "expected as many " << valuesName << " as "
                         << idsName << ", got " << values.size() << " and "
                         << ids.size();
    for (double seconds : values)
      if (!std::isfinite(seconds) || seconds < 0)
        return emitError() << "expected non-negative " << valuesName << ", got "
                           << seconds;
  }
  if (fused.size() != fusedInto.size())
    return emitError() << "expected as many fused_into as fused, got "
                       << fusedInto.size() << " and " << fused.size();
  for (ArrayRef<int64_t> ids :
       {ops.asArrayRef(), fused.asArrayRef(), fusedInto.asArrayRef(),
        collectives.asArrayRef()})
    for (int64_t id : ids)
      if (id < 0)
        return emitError() << "expected op ids >= 0, got " << id;
  return success();
}

LogicalResult
TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                   StringRef device, DictionaryAttr peakFlops,
                   FloatAttr memoryBandwidth, FloatAttr memoryBytes,
                   FloatAttr computeEfficiency, FloatAttr memoryEfficiency,
                   FloatAttr computeSlowdown, ArrayAttr links, ProfileAttr) {
  if (device.empty())
    return emitError() << "expected a device name";
  if (peakFlops.empty())
    return emitError() << "expected peak_flops for at least one type";
  for (NamedAttribute entry : peakFlops) {
    if (!isPositiveF64(dyn_cast<FloatAttr>(entry.getValue())))
      return emitError() << "expected a positive float for peak_flops."
                         << entry.getName().getValue() << ", got "
                         << entry.getValue();
  }
  for (auto [value, name] : {std::pair{memoryBandwidth, "memory_bandwidth"},
                             std::pair{memoryBytes, "memory_bytes"}})
    if (!isPositiveF64(value))
      return emitError() << "expected a positive " << name << ", got " << value;
  for (auto [value, name] : {std::pair{computeEfficiency, "compute_efficiency"},
                             std::pair{memoryEfficiency, "memory_efficiency"}})
    if (!isPositiveF64(value) || value.getValueAsDouble() > 1)
      return emitError() << "expected " << name << " in (0, 1], got " << value;
  if (!isF64AtLeast(computeSlowdown, 0))
    return emitError() << "expected a non-negative compute_slowdown, got "
                       << computeSlowdown;
  if (links.empty())
    return emitError() << "expected at least one link";
  for (auto [index, entry] : llvm::enumerate(links)) {
    auto link = dyn_cast<LinkAttr>(entry);
    if (!link)
      return emitError() << "expected links of #train.link, got " << entry;
    if (index + 1 == links.size() && link.getMaxRanks())
      return emitError() << "expected the last link to have no max_ranks "
                            "(it serves every larger communicator)";
  }
  return success();
}
