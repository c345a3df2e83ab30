//===- TrainDecompose.cpp - replace train ops by linalg -------------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/Utils/ShapeChecks.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace loom::train {
#define GEN_PASS_DEF_TRAINDECOMPOSEPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;
using namespace loom::train;

namespace {

struct TrainDecomposePass
    : public loom::train::impl::TrainDecomposePassBase<TrainDecomposePass> {
  using TrainDecomposePassBase::TrainDecomposePassBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    TrainDecomposePassBase::getDependentDialects(registry);
    registry.insert<scf::SCFDialect>();
  }

  void runOnOperation() override {
    // The lowering after it bufferizes what the verifiers let through.
    if (failed(loom::checkReshapes(getOperation(), "train-decompose")))
      return signalPassFailure();
    SmallVector<DecomposableOpInterface> ops;
    getOperation()->walk(
        [&](DecomposableOpInterface op) { ops.push_back(op); });
    // The decompositions build their temporaries from static shapes.
    for (DecomposableOpInterface op : ops)
      for (Type type : llvm::concat<const Type>(op->getOperandTypes(),
                                                op->getResultTypes())) {
        auto shaped = dyn_cast<ShapedType>(type);
        if (shaped && !loom::getStaticSizeInBytes(shaped)) {
          op->emitOpError("train-decompose: expected static shapes that fit "
                          "in 64 bits, got ")
              << type;
          return signalPassFailure();
        }
      }
    OpBuilder builder(&getContext());
    for (DecomposableOpInterface op : ops) {
      builder.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> replacements = op.decompose(builder);
      if (failed(replacements))
        return signalPassFailure();
      op->replaceAllUsesWith(*replacements);
      op->erase();
    }
  }
};

} // namespace
