//===- LinalgAdjoints.cpp - derivatives of linalg ops ---------------------===//
//
// Every linalg op is differentiated through its generic form (named ops are
// generalised on a clone, so the forward keeps them). For a generic computing
//
//   out[M_o(d)] = init[M_o(d)] (+)= f(in_0[M_0(d)], ..., in_n[M_n(d)])
//
// the adjoint of input k is another generic over the same iteration domain:
//
//   din_k[M_k(d)] += df/din_k(...) * dout[M_o(d)]
//
// where dimensions absent from M_k become reductions (a broadcast input sums
// its gradient back). The body of the adjoint is the forward body followed by
// its scalar derivative. Reductions are supported in the additive form
// `out + f(inputs)`, whose derivative with respect to `init` is `dout`.
//
//===----------------------------------------------------------------------===//

#include "ReverseMode.h"
#include "loom/Utils/LinalgBodies.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace loom;
using namespace loom::autodiff;

bool loom::autodiff::isLinalgDifferentiable(Operation *op) {
  return isa<linalg::LinalgOp>(op);
}

LogicalResult loom::autodiff::differentiateLinalgOp(ReverseMode &rm,
                                                    Operation *op) {
  auto linalgOp = cast<linalg::LinalgOp>(op);
  if (!linalgOp.hasPureTensorSemantics() || op->getNumResults() != 1)
    return op->emitOpError("train-autodiff differentiates linalg ops on "
                           "tensors with one result");
  Value resultGrad = rm.getAdjoint(op->getResult(0));
  if (!resultGrad)
    return success();

  // Work on a generic form; a generalised clone is erased afterwards.
  auto generic = dyn_cast<linalg::GenericOp>(op);
  Operation *scratch = nullptr;
  if (!generic) {
    IRRewriter rewriter(op->getContext());
    rewriter.setInsertionPoint(op);
    auto clone = cast<linalg::LinalgOp>(rewriter.clone(*op));
    FailureOr<linalg::GenericOp> generalized =
        linalg::generalizeNamedOp(rewriter, clone);
    if (failed(generalized)) {
      clone->erase();
      return op->emitOpError("cannot be generalised for differentiation");
    }
    generic = *generalized;
    scratch = generic;
  }
  auto eraseScratch = llvm::make_scope_exit([&] {
    if (scratch)
      scratch->erase();
  });

  // Values read from above inside the body (a gather's table) cannot carry
  // gradient through this rule.
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(generic.getRegion(), captured);
  for (Value value : captured)
    if (rm.isActive(value))
      return op->emitOpError("reads a differentiated value from above inside "
                             "its body; train-autodiff cannot differentiate "
                             "it");

  Block &body = generic.getRegion().front();
  unsigned numInputs = generic.getNumDpsInputs();
  BlockArgument outArg = body.getArgument(numInputs);
  Value yielded = body.getTerminator()->getOperand(0);
  Value term = yielded;
  bool accumulates = false;
  if (!outArg.use_empty()) {
    term = getAccumulatedTerm(generic);
    if (!term)
      return op->emitOpError("reads its output inside the body in a form "
                             "train-autodiff cannot differentiate (expected "
                             "`out + f(inputs)`)");
    accumulates = true;
  } else if (generic.getNumReductionLoops() != 0) {
    return op->emitOpError("is a reduction whose body ignores the "
                           "accumulator; it cannot be differentiated");
  }

  if (accumulates)
    rm.accumulate(generic.getDpsInits()[0], resultGrad);

  // The body ops `term` is computed from: the adjoint recomputes these and
  // nothing else (the accumulation reads the output, whose type the
  // adjoint's accumulator does not have).
  llvm::SmallPtrSet<Operation *, 16> termSlice;
  SmallVector<Value> worklist = {term};
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != &body || !termSlice.insert(def).second)
      continue;
    llvm::append_range(worklist, def->getOperands());
  }

  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  AffineMap outputMap = maps[numInputs];
  SmallVector<Value> forwardInputs(generic.getDpsInputs());
  for (unsigned k = 0; k < numInputs; ++k) {
    Value input = forwardInputs[k];
    if (!rm.isActive(input))
      continue;
    auto inputType = dyn_cast<RankedTensorType>(input.getType());
    if (!inputType)
      return op->emitOpError("has a differentiated scalar operand #")
             << k << "; train-autodiff differentiates tensor operands only";
    if (!maps[k].isProjectedPermutation())
      return op->emitOpError("indexing map #")
             << k
             << " is not a projected permutation; train-autodiff "
                "cannot differentiate it";

    LinalgBuilder lb = rm.linalg(op->getLoc());
    SmallVector<Value> inputs = {resultGrad};
    inputs.append(forwardInputs);
    SmallVector<AffineMap> adjointMaps = {outputMap};
    adjointMaps.append(maps.begin(), maps.begin() + numInputs);
    adjointMaps.push_back(maps[k]);
    bool failedRule = false;
    Value init =
        lb.filled(inputType.getShape(), inputType.getElementType(), 0.0);
    Value adjoint = lb.generic(
        init, inputs, adjointMaps,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          IRMapping mapping;
          for (unsigned j = 0; j < numInputs; ++j)
            mapping.map(body.getArgument(j), args[1 + j]);
          for (Operation &bodyOp : body.without_terminator())
            if (termSlice.contains(&bodyOp))
              b.clone(bodyOp, mapping);
          Value derivative = differentiateScalar(b, loc, mapping.lookup(term),
                                                 args[0], args[1 + k]);
          if (!derivative) {
            failedRule = true;
            return args.back();
          }
          return arith::AddFOp::create(b, loc, args.back(), derivative);
        });
    if (failedRule)
      return failure();
    rm.accumulate(input, adjoint);
  }
  return success();
}
