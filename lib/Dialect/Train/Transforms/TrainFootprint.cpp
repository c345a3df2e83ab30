//===- TrainFootprint.cpp - train-footprint -------------------------------===//
//
// Each distinct train op is copied into a function of its own in a scratch
// module nested in the one the pass runs on (a pass may run a pipeline only
// on IR it owns), lowered there as the memory-plan phase lowers it, and
// measured with the memory plan's timeline; the scratch module is erased.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/ArenaPacker.h"
#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringMap.h"
#include <algorithm>

namespace loom::train {
#define GEN_PASS_DEF_TRAINFOOTPRINTPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;
using namespace loom::train;

namespace {

/// What makes two train ops lower alike: the name, the inherent and the
/// discardable attributes (less the ones that place the op in a step) and
/// the types.
std::string keyOf(Operation *op) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << op->getName() << " " << op->getPropertiesAsAttribute();
  for (NamedAttribute attr : op->getDiscardableAttrs())
    if (!llvm::is_contained({TrainDialect::kFootprintAttrName,
                             TrainDialect::kMicrobatchAttrName,
                             TrainDialect::kActionAttrName},
                            attr.getName().getValue()))
      os << " " << attr.getName().getValue() << "=" << attr.getValue();
  os << " : (" << op->getOperandTypes() << ") -> (" << op->getResultTypes()
     << ")";
  return key;
}

/// The block argument whose buffer `value` is written into by a chain of
/// destination-style writes in `block`, each the last reader of its init;
/// null if the chain starts at a new buffer (or a view).
BlockArgument writtenInto(Value value, Block &block) {
  while (auto result = dyn_cast<OpResult>(value)) {
    Operation *writer = block.findAncestorOpInBlock(*result.getOwner());
    OpOperand *tied =
        writer == result.getOwner() ? loom::getTiedInit(result) : nullptr;
    if (!tied || loom::isBufferView(writer))
      return {};
    value = tied->get();
    // Nothing after the write may read the init.
    for (Operation *user : value.getUsers()) {
      Operation *top = block.findAncestorOpInBlock(*user);
      if (top && top != writer && writer->isBeforeInBlock(top))
        return {};
    }
  }
  auto argument = dyn_cast<BlockArgument>(value);
  return argument && argument.getOwner() == &block ? argument : BlockArgument();
}

struct TrainFootprintPass
    : public loom::train::impl::TrainFootprintPassBase<TrainFootprintPass> {
  using TrainFootprintPassBase::TrainFootprintPassBase;

  /// The lowering, then eliminate-empty-tensors, on a module; a pipeline
  /// that does not parse is reported on `errors`.
  FailureOr<OpPassManager> buildLowering(raw_ostream &errors) const {
    OpPassManager pm(ModuleOp::getOperationName());
    if (lowering.empty()) {
      pm.addPass(createTrainDecomposePass());
    } else {
      FailureOr<OpPassManager> parsed = parsePassPipeline(lowering, errors);
      if (failed(parsed) ||
          parsed->getOpAnchorName() != ModuleOp::getOperationName())
        return failure();
      pm = std::move(*parsed);
    }
    pm.addPass(bufferization::createEmptyTensorEliminationPass());
    return pm;
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    TrainFootprintPassBase::getDependentDialects(registry);
    // initialize() reports a pipeline that does not parse, once.
    if (FailureOr<OpPassManager> pm = buildLowering(llvm::nulls());
        succeeded(pm))
      pm->getDependentDialects(registry);
  }

  LogicalResult initialize(MLIRContext *context) override {
    FailureOr<OpPassManager> pm = buildLowering(llvm::errs());
    if (succeeded(pm)) {
      lowerings = std::move(*pm);
      return success();
    }
    return emitError(UnknownLoc::get(context))
           << "train-footprint: 'lowering' is not a pipeline on "
              "builtin.module: "
           << lowering;
  }

  void runOnOperation() override;

private:
  OpPassManager lowerings{ModuleOp::getOperationName()};
};

void TrainFootprintPass::runOnOperation() {
  ModuleOp module = getOperation();
  // The ops to measure, grouped by what makes them lower alike. A nested
  // module (a pipeline stage) is measured when the pass runs on it.
  llvm::StringMap<unsigned> groupOf;
  SmallVector<SmallVector<Operation *>> groups;
  module.walk([&](DecomposableOpInterface op) {
    if (op->getParentOfType<ModuleOp>() != module)
      return;
    auto isStatic = [](Type type) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      return tensor && tensor.hasStaticShape();
    };
    if (!llvm::all_of(op->getOperandTypes(), isStatic) ||
        !llvm::all_of(op->getResultTypes(), isStatic))
      return;
    auto [it, added] = groupOf.try_emplace(keyOf(op), groups.size());
    if (added)
      groups.emplace_back();
    groups[it->second].push_back(op);
  });
  if (groups.empty())
    return markAllAnalysesPreserved();

  // One function per group in a scratch module: its arguments the op's
  // distinct operands, its results the op's.
  OpBuilder builder(module.getContext());
  builder.setInsertionPointToEnd(module.getBody());
  auto scratch = ModuleOp::create(builder, module.getLoc());
  builder.setInsertionPointToStart(scratch.getBody());
  SmallVector<func::FuncOp> funcs;
  SmallVector<SmallVector<unsigned>> argumentOfOperand;
  for (auto [index, group] : llvm::enumerate(groups)) {
    Operation *op = group.front();
    SmallVector<Value> distinct;
    SmallVector<unsigned> argumentOf;
    for (Value operand : op->getOperands()) {
      auto *found = llvm::find(distinct, operand);
      argumentOf.push_back(found - distinct.begin());
      if (found == distinct.end())
        distinct.push_back(operand);
    }
    auto type = builder.getFunctionType(ValueRange(distinct).getTypes(),
                                        op->getResultTypes());
    auto func = func::FuncOp::create(builder, op->getLoc(),
                                     "footprint" + std::to_string(index), type);
    Block *body = func.addEntryBlock();
    OpBuilder inner = OpBuilder::atBlockBegin(body);
    IRMapping mapping;
    mapping.map(distinct, body->getArguments());
    Operation *copy = inner.clone(*op, mapping);
    for (StringRef name :
         {TrainDialect::kFootprintAttrName, TrainDialect::kMicrobatchAttrName,
          TrainDialect::kActionAttrName})
      copy->removeAttr(name);
    func::ReturnOp::create(inner, op->getLoc(), copy->getResults());
    funcs.push_back(func);
    argumentOfOperand.push_back(std::move(argumentOf));
  }

  // The lowering's remarks (kernel fallbacks) are the memory-plan phase's
  // to make, on the step; errors pass through.
  LogicalResult lowered = success();
  {
    ScopedDiagnosticHandler quiet(&getContext(), [](Diagnostic &diag) {
      return success(diag.getSeverity() == DiagnosticSeverity::Remark);
    });
    lowered = runPipeline(lowerings, scratch);
  }
  // The nested pipeline verifies after each pass only where the outer one
  // does (loomc verifies at the end of each phase): the copy is measured
  // here and then dropped, so it is verified here.
  if (succeeded(lowered))
    lowered = mlir::verify(scratch);
  if (failed(lowered)) {
    groups.front().front()->emitError(
        "train-footprint: lowering a copy of the train ops failed (see "
        "above)");
    scratch.erase();
    return signalPassFailure();
  }

  MLIRContext *context = &getContext();
  for (auto [group, func, argumentOf] :
       llvm::zip(groups, funcs, argumentOfOperand)) {
    Block &body = func.getBody().front();
    loom::MemoryTimeline timeline(
        body, {/*callerOwnedResults=*/false, loom::kArenaAlignment});
    // The tables, which the step computes once for all the ops that need
    // them: not this op's scratch.
    SmallVector<int64_t> tables;
    std::vector<int64_t> live(timeline.getLiveBytes().begin(),
                              timeline.getLiveBytes().end());
    for (const loom::BufferInterval &buffer : timeline.getBuffers()) {
      auto table = buffer.value.getDefiningOp<linalg::GenericOp>();
      std::optional<int64_t> key =
          table ? loom::getIndexTableKey(table) : std::nullopt;
      if (!key)
        continue;
      tables.push_back(*key);
      tables.push_back(buffer.bytes);
      int64_t charged = llvm::alignTo(buffer.bytes, loom::kArenaAlignment);
      for (unsigned i = buffer.begin; i <= buffer.end && i < live.size(); ++i)
        live[i] -= charged;
    }
    // Beyond the arguments and results: the most live at once less what is
    // live at the return (the arguments and the results).
    int64_t scratchBytes =
        live.empty()
            ? 0
            : std::max<int64_t>(0, *std::max_element(live.begin(), live.end()) -
                                       live.back());
    Operation *op = group.front();
    SmallVector<int64_t> inPlace;
    SmallVector<unsigned> taken;
    for (auto [index, returned] :
         llvm::enumerate(body.getTerminator()->getOperands())) {
      int64_t operand = -1;
      if (BlockArgument argument = writtenInto(returned, body);
          argument && !llvm::is_contained(taken, argument.getArgNumber())) {
        unsigned position = llvm::find(argumentOf, argument.getArgNumber()) -
                            argumentOf.begin();
        if (op->getOperand(position).getType() ==
            op->getResult(index).getType()) {
          operand = position;
          taken.push_back(argument.getArgNumber());
        }
      }
      inPlace.push_back(operand);
    }
    auto footprint = FootprintAttr::get(
        context, scratchBytes, DenseI64ArrayAttr::get(context, inPlace),
        tables.empty() ? DenseI64ArrayAttr()
                       : DenseI64ArrayAttr::get(context, tables));
    for (Operation *member : group)
      member->setAttr(TrainDialect::kFootprintAttrName, footprint);
  }
  scratch.erase();
}

} // namespace
