//===- CodegenOutlineActions.cpp - each pipeline action compiled once -----===//
//
// A pipeline stage's bufferised step, cut into its schedule's actions (the
// `loom.action.*` names pp-partition puts in locations), each action
// outlined into a function, and the functions that differ only in scalar
// constants merged, the constants becoming arguments.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/OpIds.h"
#include "loom/Codegen/Common/Passes.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENOUTLINEACTIONSPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

/// Ops that read or write a memref through its descriptor, whatever its
/// layout: a dynamic offset serves them as well as a static one.
bool takesAnyLayout(Operation *op) {
  // A structured op on buffers indexes its operands by their shapes.
  if (isa<linalg::LinalgOp>(op) && op->getNumResults() == 0)
    return true;
  return isa<memref::LoadOp, memref::StoreOp, memref::CopyOp, memref::DimOp,
             memref::ExtractAlignedPointerAsIndexOp,
             memref::ExtractStridedMetadataOp, memref::ReinterpretCastOp,
             vector::LoadOp, vector::StoreOp, vector::TransferReadOp,
             vector::TransferWriteOp, vector::MaskedLoadOp,
             vector::MaskedStoreOp>(op);
}

/// The result type a view gets from its source's current type, or null.
MemRefType inferViewType(Operation *op) {
  if (auto view = dyn_cast<memref::SubViewOp>(op)) {
    MemRefType type = view.getType();
    MemRefType source = view.getSourceType();
    if (type.getRank() != source.getRank())
      return memref::SubViewOp::inferRankReducedResultType(
          type.getShape(), source, view.getMixedOffsets(), view.getMixedSizes(),
          view.getMixedStrides());
    return memref::SubViewOp::inferResultType(source, view.getMixedOffsets(),
                                              view.getMixedSizes(),
                                              view.getMixedStrides());
  }
  if (auto collapse = dyn_cast<memref::CollapseShapeOp>(op)) {
    MemRefType source = collapse.getSrcType();
    auto groups = collapse.getReassociationIndices();
    if (!memref::CollapseShapeOp::isGuaranteedCollapsible(source, groups))
      return {};
    return memref::CollapseShapeOp::computeCollapsedType(source, groups);
  }
  if (auto expand = dyn_cast<memref::ExpandShapeOp>(op)) {
    FailureOr<MemRefType> type = memref::ExpandShapeOp::computeExpandedType(
        expand.getSrcType(), expand.getResultType().getShape(),
        expand.getReassociationIndices());
    return succeeded(type) ? *type : MemRefType();
  }
  return {};
}

/// `value`'s type changed from `oldType` (its layout's offset became
/// dynamic): its users that take any layout keep it, views are retyped in
/// turn, and any other user reads it through a cast back to `oldType`.
void adoptLayout(Value value, MemRefType oldType, int64_t &numCasts) {
  for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
    Operation *user = use.getOwner();
    if (takesAnyLayout(user))
      continue;
    if (isa<memref::SubViewOp, memref::CollapseShapeOp, memref::ExpandShapeOp>(
            user) &&
        use.getOperandNumber() == 0) {
      Value result = user->getResult(0);
      auto before = cast<MemRefType>(result.getType());
      if (MemRefType after = inferViewType(user)) {
        if (after != before) {
          result.setType(after);
          adoptLayout(result, before, numCasts);
        }
        continue;
      }
    }
    OpBuilder builder(user);
    use.set(memref::CastOp::create(builder, user->getLoc(), oldType, value));
    ++numCasts;
  }
}

/// Whether `op` allocates on the stack of the function it runs in, so it
/// must stay in the step.
bool allocatesInScope(Operation *op) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffects(instances);
  return llvm::any_of(instances, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Allocate>(e.getEffect()) &&
           e.getResource() ==
               SideEffects::AutomaticAllocationScopeResource::get();
  });
}

/// A scalar constant an outlined function may take as an argument.
bool isParameter(Operation *op) {
  auto constant = dyn_cast<arith::ConstantOp>(op);
  return constant && constant.getType().isIntOrIndexOrFloat();
}

struct Outlined {
  func::FuncOp func;
  func::CallOp call;
};

struct CodegenOutlineActionsPass
    : public loom::codegen::impl::CodegenOutlineActionsPassBase<
          CodegenOutlineActionsPass> {
  using CodegenOutlineActionsPassBase::CodegenOutlineActionsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> steps;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        steps.push_back(func);
    std::vector<Outlined> outlined;
    for (func::FuncOp func : steps)
      outlineActions(func, outlined);
    numActions += outlined.size();
    mergeEquivalent(outlined);
  }

  /// Cuts `func`'s body into actions and outlines each.
  void outlineActions(func::FuncOp func, std::vector<Outlined> &outlined) {
    Block &body = func.getBody().front();
    // The first action starts at its first op that does work (pure ops
    // are hoisted and cloned where used).
    auto first = llvm::find_if(body, [](Operation &op) {
      return !loom::getAction(op.getLoc()).empty() &&
             (op.getNumRegions() > 0 || !isPure(&op));
    });
    if (first == body.end())
      return;
    // Values every action may read from the step: its arguments and what
    // runs before the first action; pure views and constants of them are
    // cloned into the actions that use them.
    DenseSet<Value> available(body.getArguments().begin(),
                              body.getArguments().end());
    DenseSet<Operation *> rematerialised;
    auto markAvailable = [&](Operation *op) {
      available.insert(op->result_begin(), op->result_end());
    };
    auto rematerialise = [&](Operation &op) {
      if (op.getNumRegions() > 0 || !isPure(&op) ||
          !llvm::all_of(op.getOperands(),
                        [&](Value v) { return available.contains(v); }))
        return false;
      rematerialised.insert(&op);
      markAvailable(&op);
      return true;
    };
    for (Operation &op : llvm::make_range(body.begin(), first))
      if (!rematerialise(op))
        markAvailable(&op);
    SmallVector<SmallVector<Operation *>> actions;
    SmallVector<Operation *> current;
    StringRef currentAction;
    auto close = [&] {
      if (!current.empty() && !currentAction.empty())
        actions.push_back(current);
      current.clear();
      currentAction = "";
    };
    for (Operation &op : llvm::make_range(first, body.end())) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        break;
      if (rematerialise(op))
        continue;
      if (allocatesInScope(&op)) {
        close();
        markAvailable(&op);
        continue;
      }
      StringRef action = loom::getAction(op.getLoc());
      if (!action.empty() && !currentAction.empty() && action != currentAction)
        close();
      if (!action.empty())
        currentAction = action;
      current.push_back(&op);
    }
    close();

    std::string prefix = func.getSymName().str();
    if (auto stage = func->getAttrOfType<IntegerAttr>(
            loom::train::TrainDialect::kPipelineStageAttrName))
      prefix += "_stage" + std::to_string(stage.getInt());
    for (auto [index, ops] : llvm::enumerate(actions))
      outlined.push_back(outline(func, ops, rematerialised,
                                 prefix + "_action" + std::to_string(index)));
    // The rematerialised views and constants the step no longer uses.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (rematerialised.contains(&op) && op.use_empty())
        op.erase();
  }

  /// Outlines the consecutive top-level ops `ops` of `func` into a private
  /// function `name`, and calls it in their place.
  Outlined outline(func::FuncOp func, ArrayRef<Operation *> ops,
                   const DenseSet<Operation *> &rematerialised,
                   StringRef name) {
    Block &body = func.getBody().front();
    OpBuilder builder(ops.front());
    SetVector<Operation *> members(ops.begin(), ops.end());
    auto inAction = [&](Operation *op) {
      Operation *top = body.findAncestorOpInBlock(*op);
      return top && members.contains(top);
    };
    // One copy of each view and constant per use, so that every action of
    // one kind reads the same structure and differs only in constants.
    SmallVector<Operation *> copies;
    std::function<Value(Value)> copy = [&](Value value) -> Value {
      Operation *def = value.getDefiningOp();
      IRMapping mapping;
      for (Value operand : def->getOperands())
        if (Operation *source = operand.getDefiningOp();
            source && rematerialised.contains(source))
          mapping.map(operand, copy(operand));
      Operation *clone = builder.clone(*def, mapping);
      copies.push_back(clone);
      return clone->getResult(cast<OpResult>(value).getResultNumber());
    };
    for (Operation *op : ops)
      op->walk([&](Operation *nested) {
        for (OpOperand &operand : nested->getOpOperands())
          if (Operation *def = operand.get().getDefiningOp();
              def && rematerialised.contains(def))
            operand.set(copy(operand.get()));
      });
    SmallVector<Operation *> all(copies);
    all.append(ops.begin(), ops.end());
    members.insert(copies.begin(), copies.end());

    // What the action reads from the step, and what the step reads from it.
    SetVector<Value> captured;
    SetVector<Value> exported;
    for (Operation *op : all) {
      op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands()) {
          Operation *owner = operand.getDefiningOp()
                                 ? operand.getDefiningOp()
                                 : operand.getParentBlock()->getParentOp();
          if (!inAction(owner))
            captured.insert(operand);
        }
      });
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(),
                         [&](Operation *user) { return !inAction(user); }))
          exported.insert(result);
    }

    MLIRContext *ctx = func.getContext();
    OpBuilder moduleBuilder(func);
    auto type = FunctionType::get(ctx, TypeRange(captured.getArrayRef()),
                                  TypeRange(exported.getArrayRef()));
    Location loc = ops.front()->getLoc();
    auto callee = func::FuncOp::create(moduleBuilder, loc, name, type);
    callee.setPrivate();
    // One body per kind of action: LLVM compiles it once, not per call
    // (LLVM's noinline, which the LLVM dialect's function carries).
    callee->setAttr("passthrough",
                    ArrayAttr::get(ctx, {StringAttr::get(ctx, "noinline")}));
    Block *entry = callee.addEntryBlock();
    IRMapping mapping;
    for (auto [value, argument] : llvm::zip(captured, entry->getArguments()))
      mapping.map(value, argument);
    OpBuilder inner = OpBuilder::atBlockEnd(entry);
    for (Operation *op : all)
      inner.clone(*op, mapping);
    SmallVector<Value> returned;
    for (Value value : exported)
      returned.push_back(mapping.lookup(value));
    func::ReturnOp::create(inner, loc, returned);

    auto call =
        func::CallOp::create(builder, loc, callee, captured.getArrayRef());
    for (auto [index, value] : llvm::enumerate(exported))
      Value(value).replaceUsesWithIf(
          call.getResult(index),
          [&](OpOperand &use) { return !inAction(use.getOwner()); });
    for (Operation *op : llvm::reverse(all))
      op->erase();
    // Which action and microbatch an op ran in is the call's to say now.
    callee.walk([](Operation *op) {
      op->removeDiscardableAttr(loom::train::TrainDialect::kMicrobatchAttrName);
      op->removeDiscardableAttr(loom::train::TrainDialect::kActionAttrName);
    });
    generaliseOffsets(callee);
    return {callee, call};
  }

  /// A subview at static offsets (a microbatch's slice of the batch) takes
  /// them as operands, so the actions of every microbatch share one body.
  void generaliseOffsets(func::FuncOp func) {
    int64_t casts = 0;
    for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
      auto view = dyn_cast<memref::SubViewOp>(&op);
      if (!view || !view.getOffsets().empty() ||
          view.getType().getRank() != view.getSourceType().getRank())
        continue;
      OpBuilder builder(view);
      SmallVector<OpFoldResult> offsets;
      for (int64_t offset : view.getStaticOffsets())
        offsets.push_back(
            arith::ConstantIndexOp::create(builder, view.getLoc(), offset)
                .getResult());
      auto general = memref::SubViewOp::create(
          builder, view.getLoc(), view.getSource(), offsets,
          view.getMixedSizes(), view.getMixedStrides());
      MemRefType oldType = view.getType();
      view.getResult().replaceAllUsesWith(general.getResult());
      view.erase();
      if (general.getType() != oldType)
        adoptLayout(general.getResult(), oldType, casts);
    }
    numCasts += casts;
  }

  /// The function's scalar constants, in order.
  static SmallVector<Operation *> parameters(func::FuncOp func) {
    SmallVector<Operation *> result;
    for (Operation &op : func.getBody().front())
      if (isParameter(&op))
        result.push_back(&op);
    return result;
  }

  static llvm::hash_code structuralHash(func::FuncOp func) {
    llvm::hash_code hash = hash_value(func.getFunctionType());
    for (Operation &op : func.getBody().front()) {
      if (isParameter(&op))
        hash =
            llvm::hash_combine(hash, op.getName(), op.getResult(0).getType());
      else
        hash = llvm::hash_combine(
            hash, OperationEquivalence::computeHash(
                      &op, OperationEquivalence::ignoreHashValue,
                      OperationEquivalence::ignoreHashValue,
                      OperationEquivalence::IgnoreLocations));
    }
    return hash;
  }

  /// Whether `a` and `b` are the same function but for the values of their
  /// scalar constants.
  static bool equivalent(func::FuncOp a, func::FuncOp b) {
    if (a.getFunctionType() != b.getFunctionType())
      return false;
    Block &x = a.getBody().front(), &y = b.getBody().front();
    if (x.getOperations().size() != y.getOperations().size())
      return false;
    DenseMap<Value, Value> same;
    for (auto [u, v] : llvm::zip(x.getArguments(), y.getArguments()))
      same[u] = v;
    auto check = [&](Value u, Value v) { return success(same.lookup(u) == v); };
    auto mark = [&](Value u, Value v) { same[u] = v; };
    for (auto [u, v] : llvm::zip(x, y)) {
      if (isParameter(&u) || isParameter(&v)) {
        if (!isParameter(&u) || !isParameter(&v) ||
            u.getResult(0).getType() != v.getResult(0).getType())
          return false;
        mark(u.getResult(0), v.getResult(0));
        continue;
      }
      if (!OperationEquivalence::isEquivalentTo(
              &u, &v, check, mark, OperationEquivalence::IgnoreLocations))
        return false;
    }
    return true;
  }

  /// Merges the outlined functions that differ only in constants: one
  /// function per kind, its differing constants arguments of the calls.
  void mergeEquivalent(std::vector<Outlined> &outlined) {
    llvm::MapVector<size_t, SmallVector<SmallVector<Outlined>>> buckets;
    for (Outlined &item : outlined) {
      auto &classes = buckets[size_t(structuralHash(item.func))];
      auto it = llvm::find_if(classes, [&](const SmallVector<Outlined> &c) {
        return equivalent(c.front().func, item.func);
      });
      if (it == classes.end())
        classes.push_back({item});
      else
        it->push_back(item);
    }
    for (auto &[hash, classes] : buckets)
      for (SmallVector<Outlined> &members : classes) {
        ++numFunctions;
        merge(members);
      }
  }

  void merge(MutableArrayRef<Outlined> members) {
    func::FuncOp leader = members.front().func;
    MLIRContext *ctx = leader.getContext();
    SmallVector<SmallVector<Operation *>> constants;
    for (const Outlined &member : members)
      constants.push_back(parameters(member.func));
    // The constants that differ between the members, grouped by the values
    // they take (one per member): one argument per group.
    llvm::MapVector<Attribute, SmallVector<unsigned>> groups;
    for (unsigned p = 0, e = constants.front().size(); p < e; ++p) {
      SmallVector<Attribute> values;
      for (auto &list : constants)
        values.push_back(cast<arith::ConstantOp>(list[p]).getValue());
      if (!llvm::all_equal(values))
        groups[ArrayAttr::get(ctx, values)].push_back(p);
    }
    for (auto [m, item] : llvm::enumerate(members)) {
      Outlined &member = item;
      OpBuilder builder(member.call);
      SmallVector<Value> operands(member.call.getOperands());
      for (auto &[values, positions] : groups) {
        auto value = cast<TypedAttr>(cast<ArrayAttr>(values)[m]);
        operands.push_back(arith::ConstantOp::create(
            builder, member.call.getLoc(), value.getType(), value));
      }
      auto call = func::CallOp::create(builder, member.call.getLoc(),
                                       leader.getSymName(),
                                       member.call.getResultTypes(), operands);
      member.call.replaceAllUsesWith(call.getResults());
      member.call.erase();
    }
    Block &entry = leader.getBody().front();
    for (auto &[values, positions] : groups) {
      Operation *first = constants.front()[positions.front()];
      unsigned index = leader.getNumArguments();
      if (failed(leader.insertArgument(index, first->getResult(0).getType(), {},
                                       first->getLoc())))
        llvm_unreachable("an argument of a private function");
      for (unsigned p : positions) {
        Operation *constant = constants.front()[p];
        constant->getResult(0).replaceAllUsesWith(entry.getArgument(index));
        constant->erase();
      }
    }
    for (Outlined &member : members.drop_front())
      member.func.erase();
  }
};

} // namespace
