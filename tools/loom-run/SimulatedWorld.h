//===- SimulatedWorld.h - N ranks as threads, for loom-run ------*- C++ -*-===//
//
// loom-run evaluates SPMD programs by running one thread per rank in one
// process. Collectives are lowered to calls into this small runtime, which
// exchanges buffers through shared memory between two barriers. It is a
// reference for tests, not the production runtime (that is loomrt).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_SIMULATEDWORLD_H
#define LOOM_TOOLS_LOOMRUN_SIMULATEDWORLD_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ExecutionEngine/Orc/CoreContainers.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"

namespace loom::run {

/// Replaces every coll op in `module` by calls into the simulated world:
/// each start + wait becomes one blocking call at the start; comm_rank a
/// call returning the thread's rank; releases disappear.
mlir::LogicalResult lowerCollectivesToSimulation(mlir::ModuleOp module);

/// Sets up a world of `ranks` ranks; call before starting the threads.
void initSimulatedWorld(int64_t ranks);
/// Makes the calling thread rank `rank`.
void setSimulatedRank(int64_t rank);

/// The runtime's symbols, for ExecutionEngine::registerSymbols.
llvm::orc::SymbolMap
getSimulatedWorldSymbols(llvm::orc::MangleAndInterner interner);

} // namespace loom::run

#endif // LOOM_TOOLS_LOOMRUN_SIMULATEDWORLD_H
