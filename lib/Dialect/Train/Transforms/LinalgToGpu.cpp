//===- LinalgToGpu.cpp - buffer linalg ops to GPU-mapped loop nests -------===//
//
// One kernel per linalg op: the parallel iteration space, linearised with
// the innermost parallel dimension fastest, in blocks of `threads`; each
// thread runs the op's reduction loops for its element, in the order the
// CPU runs them. docs/CUDA.md has the rationale.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainPasses.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace loom::train {
#define GEN_PASS_DEF_LOOMLINALGTOGPUPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;

namespace {

/// True if `op` is already device code (inside a launch or a mapped loop).
bool onDevice(Operation *op) {
  for (Operation *parent = op->getParentOp(); parent;
       parent = parent->getParentOp())
    if (isa<gpu::LaunchOp>(parent) ||
        (isa<scf::ParallelOp>(parent) &&
         parent->hasAttr(gpu::getMappingAttrName())))
      return true;
  return false;
}

gpu::ParallelLoopDimMappingAttr mapTo(MLIRContext *ctx, gpu::Processor p) {
  AffineMap identity = AffineMap::getMultiDimIdentityMap(1, ctx);
  return gpu::ParallelLoopDimMappingAttr::get(ctx, p, identity, identity);
}

/// `memref.copy` becomes a linalg.copy (a kernel); host allocations become
/// device allocations in stream order.
void moveBuffersToDevice(func::FuncOp func) {
  IRRewriter rewriter(func.getContext());
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isa<memref::CopyOp, memref::AllocOp, memref::DeallocOp>(op) &&
        !onDevice(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    Location loc = op->getLoc();
    rewriter.setInsertionPoint(op);
    if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                  copy.getTarget());
      continue;
    }
    Type token = gpu::AsyncTokenType::get(op->getContext());
    Value start = gpu::WaitOp::create(rewriter, loc, token, ValueRange())
                      .getAsyncToken();
    Value done;
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      auto device = gpu::AllocOp::create(
          rewriter, loc, alloc.getType(), token, ValueRange{start},
          alloc.getDynamicSizes(), alloc.getSymbolOperands(),
          /*hostShared=*/false);
      rewriter.replaceAllUsesWith(alloc.getResult(), device.getMemref());
      done = device.getAsyncToken();
    } else {
      done = gpu::DeallocOp::create(rewriter, loc, token, ValueRange{start},
                                    cast<memref::DeallocOp>(op).getMemref())
                 .getAsyncToken();
    }
    gpu::WaitOp::create(rewriter, loc, Type(), ValueRange{done});
    rewriter.eraseOp(op);
  }
}

struct LinalgToGpu {
  IRRewriter &rewriter;
  int64_t threads;

  /// Builds the block x thread nest for `count` iterations before `op` and
  /// returns the linear index inside its bound check.
  Value buildNest(Operation *op, int64_t count) {
    Location loc = op->getLoc();
    MLIRContext *ctx = op->getContext();
    int64_t block = std::min<int64_t>(threads, (count + 31) / 32 * 32);
    int64_t blocks = (count + block - 1) / block;
    rewriter.setInsertionPoint(op);
    auto c = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(rewriter, loc, v);
    };
    Value zero = c(0), one = c(1);
    auto outer = scf::ParallelOp::create(rewriter, loc, ValueRange{zero},
                                         ValueRange{c(blocks)},
                                         ValueRange{one});
    (void)gpu::setMappingAttr(outer, {mapTo(ctx, gpu::Processor::BlockX)});
    rewriter.setInsertionPointToStart(outer.getBody());
    auto inner = scf::ParallelOp::create(rewriter, loc, ValueRange{zero},
                                         ValueRange{c(block)},
                                         ValueRange{one});
    (void)gpu::setMappingAttr(inner, {mapTo(ctx, gpu::Processor::ThreadX)});
    rewriter.setInsertionPointToStart(inner.getBody());
    AffineExpr b, t;
    bindDims(ctx, b, t);
    Value linear = affine::AffineApplyOp::create(
        rewriter, loc, AffineMap::get(2, 0, b * block + t),
        ValueRange{outer.getInductionVars()[0], inner.getInductionVars()[0]});
    Value inside = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                         linear, c(count));
    auto guard = scf::IfOp::create(rewriter, loc, inside);
    rewriter.setInsertionPointToStart(&guard.getThenRegion().front());
    // The op moves into the guard; its loops are built there.
    op->moveBefore(guard.getThenRegion().front().getTerminator());
    return linear;
  }

  /// Maps `op` to a kernel whose threads cover its parallel dimensions.
  /// `anchor` (the op, or a host loop around it) runs whole in each thread.
  LogicalResult map(linalg::LinalgOp op, Operation *anchor) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (llvm::any_of(ranges, ShapedType::isDynamic))
      return op.emitError("loom-linalg-to-gpu: the CUDA target needs static "
                          "loop bounds");
    // Parallel dimensions first; the reductions keep their order.
    SmallVector<unsigned> order;
    SmallVector<int64_t> parallelSizes;
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    for (unsigned d = 0; d < iterators.size(); ++d)
      if (linalg::isParallelIterator(iterators[d])) {
        order.push_back(d);
        parallelSizes.push_back(ranges[d]);
      }
    for (unsigned d = 0; d < iterators.size(); ++d)
      if (!linalg::isParallelIterator(iterators[d]))
        order.push_back(d);
    int64_t count = 1;
    for (int64_t s : parallelSizes)
      count *= s;
    if (count == 0) {
      rewriter.eraseOp(op);
      return success();
    }
    Value linear = buildNest(anchor, count);

    rewriter.setInsertionPoint(op);
    FailureOr<linalg::GenericOp> generic =
        isa<linalg::GenericOp>(op.getOperation())
            ? FailureOr<linalg::GenericOp>(cast<linalg::GenericOp>(op))
            : linalg::generalizeNamedOp(rewriter, op);
    if (failed(generic))
      return op.emitError("loom-linalg-to-gpu: cannot generalise this op");
    if (!llvm::equal(order, llvm::seq<unsigned>(0, order.size()))) {
      generic = linalg::interchangeGenericOp(rewriter, *generic, order);
      if (failed(generic))
        return op.emitError("loom-linalg-to-gpu: cannot interchange loops");
    }
    FailureOr<linalg::LinalgLoops> loops =
        linalg::linalgOpToParallelLoops(rewriter, *generic);
    if (failed(loops))
      return generic->emitError("loom-linalg-to-gpu: cannot lower to loops");
    rewriter.eraseOp(*generic);
    if (parallelSizes.empty())
      return success();
    // The outer scf.parallel over every parallel dimension: its induction
    // variables are the delinearised thread index.
    auto parallel = dyn_cast<scf::ParallelOp>(loops->front());
    if (!parallel || parallel.getNumLoops() != parallelSizes.size())
      return parallel->emitError(
          "loom-linalg-to-gpu: expected one loop over the parallel "
          "dimensions");
    rewriter.setInsertionPoint(parallel);
    // Unit dimensions index 0; the others split the linear index.
    SmallVector<int64_t> basis;
    for (int64_t size : parallelSizes)
      if (size != 1)
        basis.push_back(size);
    SmallVector<Value> split;
    if (basis.size() == 1)
      split.push_back(linear);
    else if (basis.size() > 1)
      split = affine::AffineDelinearizeIndexOp::create(
                  rewriter, parallel.getLoc(), linear, basis,
                  /*hasOuterBound=*/true)
                  .getResults();
    SmallVector<Value> indices;
    Value zero = arith::ConstantIndexOp::create(rewriter, parallel.getLoc(), 0);
    unsigned next = 0;
    for (int64_t size : parallelSizes)
      indices.push_back(size == 1 ? zero : split[next++]);
    Block *body = parallel.getBody();
    rewriter.eraseOp(body->getTerminator());
    rewriter.inlineBlockBefore(body, parallel, indices);
    rewriter.eraseOp(parallel);
    return success();
  }
};

struct LoomLinalgToGpuPass
    : public loom::train::impl::LoomLinalgToGpuPassBase<LoomLinalgToGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    IRRewriter rewriter(&getContext());
    LinalgToGpu mapper{rewriter, threads};
    if (threads < 32 || threads > 1024 || threads % 32) {
      func.emitError("loom-linalg-to-gpu: threads must be a multiple of 32 "
                     "from 32 to 1024");
      return signalPassFailure();
    }
    if (deviceBuffers)
      moveBuffersToDevice(func);
    // A host loop that reads memory (the embedding gradient's scatter-add
    // reads each token id) runs inside the kernel of the one elementwise
    // op it repeats: each thread walks the whole loop for its element, so
    // repeated ids add up in the CPU's order.
    SmallVector<scf::ForOp> hostLoops;
    func.walk([&](scf::ForOp loop) {
      if (!onDevice(loop) &&
          llvm::any_of(loop.getBody()->getOperations(), [](Operation &op) {
            return isa<memref::LoadOp, memref::StoreOp>(op);
          }))
        hostLoops.push_back(loop);
    });
    for (scf::ForOp loop : hostLoops) {
      SmallVector<linalg::LinalgOp> inner;
      loop.walk([&](linalg::LinalgOp op) { inner.push_back(op); });
      if (inner.size() != 1 ||
          inner[0].getNumParallelLoops() != inner[0].getNumLoops()) {
        loop.emitError("loom-linalg-to-gpu: a host loop that reads memory "
                       "must repeat exactly one elementwise linalg op");
        return signalPassFailure();
      }
      if (failed(mapper.map(inner[0], loop)))
        return signalPassFailure();
    }
    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) {
      if (!onDevice(op))
        ops.push_back(op);
    });
    for (linalg::LinalgOp op : ops) {
      if (!op.hasPureBufferSemantics()) {
        op.emitError("loom-linalg-to-gpu: expected a linalg op on buffers "
                     "(run bufferisation first)");
        return signalPassFailure();
      }
      if (failed(mapper.map(op, op)))
        return signalPassFailure();
    }
    // Fold the identity index maps the loop lowering leaves (only these
    // patterns: canonicalising the nests would merge block and thread
    // loops).
    RewritePatternSet patterns(&getContext());
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(func, std::move(patterns))))
      return signalPassFailure();
    // What is left on the host must not touch memory.
    WalkResult result = func.walk([&](Operation *op) {
      if (onDevice(op))
        return WalkResult::advance();
      if (!deviceBuffers)
        return WalkResult::advance();
      if (isa<memref::LoadOp, memref::StoreOp, memref::AllocaOp>(op) ||
          op->getDialect()->getNamespace() == "vector") {
        op->emitError("loom-linalg-to-gpu: this op would run on the host "
                      "against device memory");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
