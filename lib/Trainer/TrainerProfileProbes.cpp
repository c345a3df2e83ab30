//===- TrainerProfileProbes.cpp - trainer-profile-probes ------------------===//

#include "loom/Analysis/OpIds.h"
#include "loom/Conversion/CollToLoomrt.h"
#include "loom/Runtime/Symbols.h"
#include "loom/Trainer/Passes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace loom::trainer {
#define GEN_PASS_DEF_TRAINERPROFILEPROBESPASS
#include "loom/Trainer/Passes.h.inc"
} // namespace loom::trainer

using namespace mlir;
namespace symbols = loom::runtime::symbols;

namespace {

/// Whether `op` does work a probe should time: not an allocation, a
/// deallocation, a view or a constant.
bool doesWork(Operation *op) {
  if (op->getNumRegions() > 0)
    return true;
  if (isMemoryEffectFree(op))
    return false;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return true;
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffects(instances);
  return llvm::any_of(instances, [](const MemoryEffects::EffectInstance &e) {
    return !isa<MemoryEffects::Allocate, MemoryEffects::Free>(e.getEffect());
  });
}

/// Whether `op` calls the runtime's collectives (timed by the runtime).
bool isCollectiveCall(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  return call && (call.getCallee() == symbols::kCollStart ||
                  call.getCallee() == symbols::kCollWait);
}

/// A run of ops timed as one.
struct Run {
  Operation *first, *last;
  SmallVector<int64_t> ids;
};

/// The runtime function `name` of `numArgs` i64s, declared once.
func::FuncOp declare(ModuleOp module, StringRef name, unsigned numArgs) {
  Builder builder(module.getContext());
  return loom::coll::declarePrivateFunction(
      module, name,
      builder.getFunctionType(SmallVector<Type>(numArgs, builder.getI64Type()),
                              {}));
}

struct TrainerProfileProbesPass
    : public loom::trainer::impl::TrainerProfileProbesPassBase<
          TrainerProfileProbesPass> {
  using TrainerProfileProbesPassBase::TrainerProfileProbesPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Probed already: once is enough.
    if (module.lookupSymbol(symbols::kOpBegin))
      return markAllAnalysesPreserved();
    SmallVector<Run> runs;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (Block &block : func.getFunctionBody()) {
        std::optional<Run> open;
        auto close = [&] {
          if (open)
            runs.push_back(*open);
          open.reset();
        };
        for (Operation &op : block) {
          if (isCollectiveCall(&op)) {
            // A call of its own: what it costs the host to start or wait
            // for a collective (the runtime takes a stalled wait out).
            close();
            SmallVector<int64_t> ids = loom::getOpIds(op.getLoc());
            if (collectiveCalls && !ids.empty())
              runs.push_back(Run{&op, &op, {ids.front()}});
            continue;
          }
          if (op.hasTrait<OpTrait::IsTerminator>()) {
            close();
            continue;
          }
          if (!doesWork(&op))
            continue;
          SmallVector<int64_t> ids = loom::getOpIds(op.getLoc());
          if (open && open->ids == ids) {
            open->last = &op;
            continue;
          }
          close();
          if (!ids.empty())
            open = Run{&op, &op, ids};
        }
        close();
      }
    }
    if (runs.empty())
      return markAllAnalysesPreserved();

    func::FuncOp begin = declare(module, symbols::kOpBegin, 1);
    func::FuncOp end = declare(module, symbols::kOpEnd, 1);
    func::FuncOp fused;
    OpBuilder builder(&getContext());
    for (Run &run : runs) {
      Location loc = run.first->getLoc();
      auto id = [&](int64_t value) -> Value {
        return arith::ConstantIntOp::create(builder, loc, value, 64);
      };
      builder.setInsertionPoint(run.first);
      Value first = id(run.ids.front());
      for (int64_t member : llvm::drop_begin(run.ids)) {
        if (!fused)
          fused = declare(module, symbols::kOpFused, 2);
        func::CallOp::create(builder, loc, fused,
                             ValueRange{id(member), first});
      }
      func::CallOp::create(builder, loc, begin, first);
      builder.setInsertionPointAfter(run.last);
      func::CallOp::create(builder, loc, end, first);
    }
  }
};

} // namespace
