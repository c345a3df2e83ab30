//===- CodegenEliminateEmptyTensors.cpp - upstream's, where it can act ----===//
//
// Upstream's eliminate-empty-tensors analyses the whole module (One-Shot
// Bufferize's analysis) before it looks for a tensor.empty to replace. A
// syntactic check first finds whether any subset insertion's source can
// start at one; only then does the analysis run.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Common/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Transforms.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/SubsetOpInterface.h"

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENELIMINATEEMPTYTENSORSPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

/// Whether upstream's search from `value` (up the chain of tensors it
/// shares a buffer with, same type or casts) may reach a `tensor.empty`.
/// Follows a destination-passing op's result to its init and a cast to its
/// source, as upstream does; stops at an op whose operands have other types
/// (an extract_slice, a reshape: not followed upstream either). What it
/// does not follow but upstream might (another op with an operand of the
/// result's type, a region op's result, a block argument of a region)
/// counts as a maybe.
bool mayStartAtEmpty(Value value) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      Operation *parent = arg.getOwner()->getParentOp();
      return !isa_and_nonnull<func::FuncOp>(parent) ||
             !arg.getOwner()->isEntryBlock();
    }
    Operation *def = value.getDefiningOp();
    if (isa<tensor::EmptyOp>(def))
      return true;
    if (auto cast = dyn_cast<tensor::CastOp>(def)) {
      value = cast.getSource();
      continue;
    }
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(def)) {
      if (!dps.hasPureTensorSemantics())
        return true;
      value = dps.getTiedOpOperand(cast<OpResult>(value))->get();
      continue;
    }
    // Another op may return a tensor equivalent to an operand of its type
    // (upstream asks the op): a maybe, as is a region op's result.
    return def->getNumRegions() > 0 ||
           llvm::is_contained(def->getOperandTypes(), value.getType());
  }
}

/// Whether `use` only reads the tensor, where it is: an input of a
/// destination-passing op on tensors, or an op free of memory effects with
/// no tensor result (a `tensor.extract`), in the block or in a region.
bool onlyReads(OpOperand &use) {
  Operation *user = use.getOwner();
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(user))
    return dps.hasPureTensorSemantics() && !dps.isDpsInit(&use);
  return user->getNumRegions() == 0 && isMemoryEffectFree(user) &&
         llvm::none_of(user->getResultTypes(),
                       [](Type type) { return isa<TensorType>(type); });
}

/// Whether every read of `buffer` (a function argument) through a
/// `bufferization.to_tensor` of it, and through what may alias that tensor,
/// comes before `writer` in its block or is `writer` itself. Only tensor
/// ops are known: a destination-passing op reading it as an input reads it
/// there, as does an op free of memory effects with no tensor result (a
/// `tensor.extract`), and a `tensor.extract` in an op's region (an
/// embedding's gather) where that op is; another such op with tensor
/// results (a slice, a reshape) may alias it and is followed; anything else
/// (a call, a collective that reads until its wait, a write into it)
/// fails.
bool readsEndAt(Value buffer, Operation *writer,
                bufferization::MaterializeInDestinationOp materialize) {
  SmallVector<Value> tensors;
  for (Operation *user : buffer.getUsers()) {
    if (user == materialize)
      continue;
    auto toTensor = dyn_cast<bufferization::ToTensorOp>(user);
    if (!toTensor || toTensor->getBlock() != writer->getBlock())
      return false;
    tensors.push_back(toTensor.getResult());
  }
  while (!tensors.empty()) {
    Value tensor = tensors.pop_back_val();
    for (OpOperand &use : tensor.getUses()) {
      Operation *user = use.getOwner();
      if (user->getBlock() != writer->getBlock()) {
        Operation *at = writer->getBlock()->findAncestorOpInBlock(*user);
        if (!at || !isa<tensor::ExtractOp>(user) ||
            (at != writer && !at->isBeforeInBlock(writer)))
          return false;
        continue;
      }
      if (onlyReads(use)) {
        if (user != writer && !user->isBeforeInBlock(writer))
          return false;
        continue;
      }
      // A view (a slice, a reshape): its tensor results may alias.
      if (isa<DestinationStyleOpInterface>(user) ||
          user->getNumRegions() != 0 || !isMemoryEffectFree(user))
        return false;
      for (Value result : user->getResults())
        if (isa<TensorType>(result.getType()))
          tensors.push_back(result);
    }
  }
  return true;
}

/// What upstream's elimination makes of a step's result written into its
/// caller's buffer (the trainer's entry point: the result materialised in a
/// function argument), made without its analysis: the result's op writes
/// into the buffer (`bufferization.to_tensor restrict writable`, where the
/// `tensor.empty` it started from was). Only where that is safe on its
/// face: the op is destination-passing on tensors, its init a
/// `tensor.empty` used by it alone, its result only read besides the
/// materialisation (AdamW's new step count is), and every read of the
/// buffer (a parameter the step updates) ends at the op. Returns how many
/// it replaced.
unsigned writeResultsIntoCallerBuffers(ModuleOp module) {
  unsigned replaced = 0;
  module.walk([&](bufferization::MaterializeInDestinationOp materialize) {
    auto buffer = dyn_cast<BlockArgument>(materialize.getDest());
    auto source = dyn_cast<OpResult>(materialize.getSource());
    if (!buffer || !isa<BaseMemRefType>(buffer.getType()) || !source ||
        !materialize.getRestrict() || !materialize.getWritable() ||
        !llvm::all_of(source.getUses(), [&](OpOperand &use) {
          return use.getOwner() == materialize || onlyReads(use);
        }))
      return;
    auto op = dyn_cast<DestinationStyleOpInterface>(source.getOwner());
    if (!op || !op.hasPureTensorSemantics() ||
        op->getBlock() != materialize->getBlock() ||
        buffer.getOwner()->getParentOp() !=
            op->getParentOfType<FunctionOpInterface>().getOperation())
      return;
    OpOperand *init = op.getTiedOpOperand(source);
    auto empty = init->get().getDefiningOp<tensor::EmptyOp>();
    if (!empty || !empty->hasOneUse() || !readsEndAt(buffer, op, materialize))
      return;
    OpBuilder builder(empty);
    auto toTensor = bufferization::ToTensorOp::create(builder, empty.getLoc(),
                                                      empty.getType(), buffer);
    toTensor.setRestrict(true);
    toTensor.setWritable(true);
    init->set(toTensor.getResult());
    empty.erase();
    // The buffer now has a tensor of its own besides the materialisation,
    // which so no longer holds its only access (as upstream leaves it).
    materialize.setRestrict(false);
    ++replaced;
  });
  return replaced;
}

struct CodegenEliminateEmptyTensorsPass
    : public loom::codegen::impl::CodegenEliminateEmptyTensorsPassBase<
          CodegenEliminateEmptyTensorsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    unsigned written = writeResultsIntoCallerBuffers(module);
    numIntoCallerBuffers += written;
    bool found = module
                     .walk([](SubsetInsertionOpInterface op) {
                       return mayStartAtEmpty(op.getSourceOperand().get())
                                  ? WalkResult::interrupt()
                                  : WalkResult::advance();
                     })
                     .wasInterrupted();
    if (!found) {
      ++numSkipped;
      if (written == 0)
        markAllAnalysesPreserved();
      return;
    }
    ++numRuns;
    // Upstream's pass, as it runs.
    bufferization::OneShotBufferizationOptions options;
    options.allowReturnAllocsFromLoops = true;
    bufferization::OneShotAnalysisState state(module, options);
    if (failed(bufferization::analyzeOp(module, state)))
      return signalPassFailure();
    IRRewriter rewriter(module.getContext());
    if (failed(bufferization::eliminateEmptyTensors(rewriter, module, state)))
      signalPassFailure();
  }
};

} // namespace
