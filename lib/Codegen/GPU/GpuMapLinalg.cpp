//===- LinalgToGpu.cpp - buffer linalg ops to GPU-mapped loop nests -------===//
//
// One kernel per linalg op: the parallel iteration space, linearised with
// the innermost parallel dimension fastest, in blocks of `threads`; each
// thread runs the op's reduction loops for its element, in the order the
// CPU runs them. A long reduction along the rows' contiguous dimension
// (softmax, RMSNorm, log-sum-exp) gets a block per row instead: threads
// stride along the row and combine through a block reduction. Elementwise
// ops and reductions into contiguous columns move 16-byte vectors.
// docs/CUDA.md has the rationale.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/GPU/Passes.h"
#include "loom/Codegen/Utils/ReductionMatch.h"
#include "loom/Support/AttrNames.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace loom::codegen {
#define GEN_PASS_DEF_GPUMAPLINALGPASS
#include "loom/Codegen/GPU/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;
namespace attrs = loom::attrs;

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

/// The combiner of `op` (parallel dimensions first, one reduction last) if
/// it can be a block reduction: one result, a recognised combiner (add, mul,
/// max, min), at least `minLength` elements, and either the reduction along
/// the innermost unit-stride dimension of every input that reads it (the
/// block's loads coalesce), or so few outputs (`fewOutputs`) that a thread
/// per output would leave most of the GPU idle: a column sum over the tokens
/// (a norm's weight gradient) runs as a block per column, its loads strided
/// but spread over the whole GPU instead of a few blocks' worth of threads
/// each walking thousands of rows.
Operation *blockReduction(linalg::GenericOp op, int64_t minLength,
                          bool fewOutputs) {
  unsigned red = op.getNumLoops() - 1;
  // Several reductions (a sum over batch and sequence) run as one, their
  // indices delinearised from the thread's position along it.
  unsigned reductions = op.getNumReductionLoops();
  int64_t length = 1;
  for (unsigned d = op.getNumLoops() - reductions; d < op.getNumLoops(); ++d)
    length *= op.getStaticLoopRanges()[d];
  // Warp shuffles move 32-bit words: a 16-bit accumulator (bf16 left
  // unwidened) keeps a thread per output.
  if (minLength <= 0 || reductions == 0 ||
      (reductions > 1 && !fewOutputs) || op.getNumDpsInits() != 1 ||
      getElementTypeOrSelf(op.getDpsInits()[0].getType())
              .getIntOrFloatBitWidth() < 32 ||
      op.getNumDpsInputs() == 0 ||
      linalg::isParallelIterator(op.getIteratorTypesArray()[red]) ||
      length < minLength ||
      !op.getBlock()->getOps<linalg::IndexOp>().empty())
    return nullptr;
  Operation *combiner = loom::codegen::regroupableCombiner(op);
  if (!combiner)
    return nullptr;
  AffineExpr along = getAffineDimExpr(red, op.getContext());
  for (unsigned d = op.getNumLoops() - reductions; d < op.getNumLoops(); ++d)
    if (op.getIndexingMapsArray().back().isFunctionOfDim(d))
      return nullptr;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (!map.isFunctionOfDim(red))
      continue;
    if (fewOutputs)
      continue;
    auto type = dyn_cast<MemRefType>(input->get().getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (!type || map.getNumResults() == 0 || map.getResults().back() != along ||
        failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1)
      return nullptr;
    for (AffineExpr e : map.getResults().drop_back())
      if (e.isFunctionOfDim(red))
        return nullptr;
  }
  return combiner;
}

/// A column reduction's innermost loop is unrolled by up to this many
/// iterations, so that each thread has that many rows' loads in flight
/// (LLVM unrolls a short loop fully, but not a 32-row one).
constexpr int64_t kColumnUnroll = 8;

/// How an elementwise op's threads each take `lanes` consecutive elements
/// of its innermost dimension: per operand (inputs, then inits), whether it
/// reads that dimension (a vector load or store, `alignment` bytes) or not
/// (one scalar for every lane).
struct VectorPlan {
  int64_t lanes = 1;
  SmallVector<bool> contiguous;
  SmallVector<int64_t> alignment;
};

/// What a thread's lanes run along: an elementwise op's innermost loop, a
/// block reduction's row (its one, innermost reduction loop), or a column
/// reduction's innermost parallel loop (its reductions, after the parallel
/// loops, run whole in each thread, for every lane at once).
enum class LaneAxis { Elementwise, Row, Column };

/// The plan for `op`'s `axis` loop with `vectorBytes` of its widest
/// operand per thread, if every operand that reads that loop does so as its
/// last, unit-stride dimension, and static offsets and strides keep each
/// thread's first element a multiple of the lanes (buffers start at least
/// 16-byte aligned: cudaMalloc, the arena). An elementwise op's or a column
/// reduction's outputs must read it too; a row reduction's are left out of
/// the plan.
std::optional<VectorPlan> planVectors(linalg::GenericOp op, int64_t vectorBytes,
                                      LaneAxis axis = LaneAxis::Elementwise) {
  unsigned loops = op.getNumLoops();
  unsigned reductions = op.getNumReductionLoops();
  unsigned parallel = loops - reductions;
  bool indices = !op.getBlock()->getOps<linalg::IndexOp>().empty();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  bool fits;
  switch (axis) {
  case LaneAxis::Elementwise:
    fits = reductions == 0;
    break;
  case LaneAxis::Row:
    fits = reductions == 1 && !indices &&
           !linalg::isParallelIterator(iterators[loops - 1]);
    break;
  case LaneAxis::Column:
    // The output is carried through the loops: a body must read it.
    fits = reductions > 0 && parallel > 0 && !indices &&
           op.getNumDpsInits() == 1 &&
           !op.getRegionOutputArgs()[0].use_empty() &&
           llvm::all_of(ArrayRef(iterators).take_front(parallel),
                        linalg::isParallelIterator);
    break;
  }
  if (vectorBytes <= 0 || loops == 0 || !fits)
    return std::nullopt;
  unsigned along = axis == LaneAxis::Column ? parallel - 1 : loops - 1;
  auto operands = axis == LaneAxis::Row
                      ? op.getDpsInputOperands()
                      : llvm::map_to_vector(op->getOpOperands(),
                                            [](OpOperand &o) { return &o; });
  for (Operation &inner : op.getBlock()->without_terminator()) {
    StringRef dialect = inner.getName().getDialectNamespace();
    if ((dialect != "arith" && dialect != "math" &&
         !isa<linalg::IndexOp>(inner)) ||
        inner.getNumRegions())
      return std::nullopt;
  }
  // Scalar inputs (a fill's value) are the same for every lane.
  int64_t widest = 0;
  for (OpOperand *operand : operands) {
    Type element = getElementTypeOrSelf(operand->get().getType());
    if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 ||
        (!isa<MemRefType>(operand->get().getType()) &&
         (op.isDpsInit(operand) || !operand->get().getType().isIntOrFloat())))
      return std::nullopt;
    widest = std::max<int64_t>(widest, element.getIntOrFloatBitWidth() / 8);
  }
  VectorPlan plan;
  plan.lanes = vectorBytes / widest;
  int64_t size = op.getStaticLoopRanges()[along];
  if (plan.lanes < 2 || !llvm::isPowerOf2_64(plan.lanes) || size % plan.lanes)
    return std::nullopt;
  AffineExpr last = getAffineDimExpr(along, op.getContext());
  for (OpOperand *operand : operands) {
    auto type = dyn_cast<MemRefType>(operand->get().getType());
    AffineMap map = op.getMatchingIndexingMap(operand);
    bool reads = type && map.isFunctionOfDim(along);
    bool output = op.isDpsInit(operand);
    if (!reads) {
      if (output)
        return std::nullopt;
      plan.contiguous.push_back(false);
      plan.alignment.push_back(0);
      continue;
    }
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        ShapedType::isDynamic(offset) || map.getResults().back() != last ||
        strides.back() != 1 || offset % plan.lanes)
      return std::nullopt;
    for (auto [expr, stride] :
         llvm::zip(map.getResults().drop_back(), ArrayRef(strides).drop_back()))
      if (expr.isFunctionOfDim(along) || ShapedType::isDynamic(stride) ||
          stride % plan.lanes)
        return std::nullopt;
    plan.contiguous.push_back(true);
    plan.alignment.push_back(plan.lanes * type.getElementTypeBitWidth() / 8);
  }
  return plan;
}

struct LinalgToGpu {
  IRRewriter &rewriter;
  int64_t threads;
  int64_t blockReduceMin;
  int64_t vectorBytes;
  /// Kernels made, how many of them reduce with a block per row, and how
  /// many load and store vectors.
  int64_t kernels = 0, blockReductions = 0, vectorKernels = 0;
  /// The bytes the kernels' operands span: every input read, every output
  /// written, and read too where the payload reads it (not from a seed). A
  /// static count of the traffic, each operand once per kernel.
  int64_t kernelBytes = 0;

  /// Counts the kernel `op` becomes; `seeded` if it starts from a fill's
  /// value rather than reading its output.
  void countKernel(linalg::LinalgOp op, bool seeded) {
    ++kernels;
    auto bytes = [](Value value) -> int64_t {
      auto type = dyn_cast<MemRefType>(value.getType());
      if (!type || !type.hasStaticShape())
        return 0;
      return type.getNumElements() * type.getElementTypeBitWidth() / 8;
    };
    for (OpOperand *input : op.getDpsInputOperands())
      kernelBytes += bytes(input->get());
    for (OpOperand &init : op.getDpsInitsMutable())
      kernelBytes += bytes(init.get()) *
                     (!seeded && op.payloadUsesValueFromOperand(&init) ? 2 : 1);
  }
  /// Fills a reduction took over (erased; see takeFill).
  llvm::SmallPtrSet<Operation *, 16> taken = {};

  /// An index constant.
  Value indexConstant(Location loc, int64_t value) {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  }

  /// Splits the linear index `linear` into one index per size (unit sizes
  /// index 0).
  SmallVector<Value> delinearize(Location loc, Value linear,
                                 ArrayRef<int64_t> sizes) {
    SmallVector<int64_t> basis;
    for (int64_t size : sizes)
      if (size != 1)
        basis.push_back(size);
    SmallVector<Value> split;
    if (basis.size() == 1)
      split.push_back(linear);
    else if (basis.size() > 1)
      split = affine::AffineDelinearizeIndexOp::create(
                  rewriter, loc, linear, basis, /*hasOuterBound=*/true)
                  .getResults();
    SmallVector<Value> indices;
    Value zero = indexConstant(loc, 0);
    unsigned next = 0;
    for (int64_t size : sizes)
      indices.push_back(size == 1 ? zero : split[next++]);
    return indices;
  }

  /// `map` applied to `dims`, one index per result.
  SmallVector<Value> apply(Location loc, AffineMap map, ValueRange dims) {
    SmallVector<Value> indices;
    for (AffineExpr e : map.getResults())
      indices.push_back(affine::AffineApplyOp::create(
          rewriter, loc, AffineMap::get(map.getNumDims(), 0, e), dims));
    return indices;
  }

  /// `operand`'s value at `at` for `lanes` consecutive elements: one
  /// aligned vector load when `contiguous`, else one scalar for every lane
  /// (loaded, or the operand itself when it is a scalar, a fill's value).
  Value loadLanes(Location loc, OpOperand &operand, Type element,
                  ValueRange at, int64_t lanes, bool contiguous,
                  int64_t alignment) {
    Value source = operand.get();
    if (contiguous)
      return vector::LoadOp::create(
          rewriter, loc, VectorType::get({lanes}, element), source, at,
          /*nontemporal=*/false, llvm::MaybeAlign(alignment));
    if (isa<MemRefType>(source.getType()))
      return memref::LoadOp::create(rewriter, loc, source, at);
    return source;
  }

  /// Lane `lane` of what loadLanes returned (a scalar serves every lane).
  Value laneOf(Location loc, Value lanes, int64_t lane) {
    if (!isa<VectorType>(lanes.getType()))
      return lanes;
    return vector::ExtractOp::create(rewriter, loc, lanes,
                                     ArrayRef<int64_t>{lane});
  }

  /// A block per output element; its threads stride along the reduction,
  /// each folding its share into a partial, and the block combines the
  /// partials (scf.reduce, a gpu.all_reduce once mapped).
  /// With `plan`, each thread loads `plan->lanes` consecutive elements of
  /// the row at a time (a vector per input that reads the row) and folds
  /// them in order. With `seed` (the output's fill, taken over), the first
  /// thread starts from it instead of the output's value.
  void mapBlockReduction(linalg::GenericOp op, Operation *combiner,
                         ArrayRef<int64_t> parallelSizes,
                         const std::optional<VectorPlan> &plan, Value seed) {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    SmallVector<int64_t> reductionSizes(ranges.begin() + parallelSizes.size(),
                                        ranges.end());
    int64_t length = 1;
    for (int64_t size : reductionSizes)
      length *= size;
    int64_t count = 1;
    for (int64_t size : parallelSizes)
      count *= size;
    int64_t width = plan ? plan->lanes : 1;
    int64_t block =
        std::min<int64_t>(threads, (length / width + 31) / 32 * 32);
    rewriter.setInsertionPoint(op);
    auto c = [&](int64_t v) { return indexConstant(loc, v); };
    Value identity = arith::ConstantOp::create(
        rewriter, loc, *arith::getNeutralElement(combiner));
    auto rows = scf::ParallelOp::create(rewriter, loc, ValueRange{c(0)},
                                        ValueRange{c(count)}, ValueRange{c(1)});
    (void)gpu::setMappingAttr(rows, {mapTo(ctx, gpu::Processor::BlockX)});
    rewriter.setInsertionPointToStart(rows.getBody());
    SmallVector<Value> dims =
        delinearize(loc, rows.getInductionVars()[0], parallelSizes);
    auto lanes = scf::ParallelOp::create(
        rewriter, loc, ValueRange{c(0)}, ValueRange{c(block)}, ValueRange{c(1)},
        ValueRange{identity});
    (void)gpu::setMappingAttr(lanes, {mapTo(ctx, gpu::Processor::ThreadX)});
    Value total = lanes.getResult(0);

    // Each thread: k = t, t + block, ... folded into its partial. Thread 0
    // starts from the output's value (or the seed); the others from the
    // neutral element.
    // Every thread reads the output before the block reduction (a barrier)
    // and writes the same total after it.
    rewriter.setInsertionPointToStart(lanes.getBody());
    Value lane = lanes.getInductionVars()[0];
    OpOperand *init = op.getDpsInitOperand(0);
    SmallVector<Value> outDims(dims);
    outDims.append(reductionSizes.size(), c(0));
    SmallVector<Value> at =
        apply(loc, op.getMatchingIndexingMap(init), outDims);
    Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        lane, c(0));
    Value start = arith::SelectOp::create(
        rewriter, loc, first,
        seed ? seed : memref::LoadOp::create(rewriter, loc, init->get(), at),
        identity);
    Value from = width > 1 ? Value(arith::MulIOp::create(rewriter, loc, lane,
                                                         c(width)))
                           : lane;
    auto loop = scf::ForOp::create(rewriter, loc, from, c(length),
                                   c(block * width), ValueRange{start});
    rewriter.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> all(dims);
    llvm::append_range(
        all, delinearize(loc, loop.getInductionVar(), reductionSizes));
    // Each input's lanes: a vector, or one scalar for all.
    SmallVector<Value> loaded;
    for (auto [index, input] : llvm::enumerate(op.getDpsInputOperands()))
      loaded.push_back(loadLanes(
          loc, *input, op.getMatchingBlockArgument(input).getType(),
          apply(loc, op.getMatchingIndexingMap(input), all), width,
          plan && plan->contiguous[index], plan ? plan->alignment[index] : 0));
    Value partial = loop.getRegionIterArg(0);
    for (int64_t l = 0; l < width; ++l) {
      IRMapping body;
      for (auto [index, input] : llvm::enumerate(op.getDpsInputOperands()))
        body.map(op.getMatchingBlockArgument(input),
                 laneOf(loc, loaded[index], l));
      body.map(op.getRegionOutputArgs()[0], partial);
      for (Operation &inner : op.getBlock()->without_terminator())
        rewriter.clone(inner, body);
      partial = body.lookup(op.getBlock()->getTerminator()->getOperand(0));
    }
    scf::YieldOp::create(rewriter, loc, partial);

    // The block's partials, combined: the loop's terminator (a parallel
    // loop with an init is built without one; the reduce's builder gives
    // its region a block of two arguments).
    rewriter.setInsertionPointToEnd(lanes.getBody());
    auto partials = scf::ReduceOp::create(rewriter, loc, loop.getResult(0));
    Block *merge = &partials.getReductions()[0].front();
    rewriter.setInsertionPointToEnd(merge);
    IRMapping pair;
    pair.map(combiner->getOperand(0), merge->getArgument(0));
    pair.map(combiner->getOperand(1), merge->getArgument(1));
    scf::ReduceReturnOp::create(rewriter, loc,
                                rewriter.clone(*combiner, pair)->getResult(0));

    rewriter.setInsertionPointAfter(lanes);
    memref::StoreOp::create(rewriter, loc, total, init->get(), at);
    rewriter.eraseOp(op);
  }

  /// Maps `op` (parallel loops `sizes` first) with `plan.lanes` elements
  /// of its innermost parallel loop per thread: vector loads, the body once
  /// per lane, vector stores. A column reduction's reduction loops run in
  /// each thread, in order, carrying every lane's partial from the output's
  /// lanes loaded before them (each lane sums in the CPU's order).
  /// With `seed` (a column reduction's output just filled with it, see
  /// takeFill), every lane starts from it instead of the output's lanes.
  void mapVectors(linalg::GenericOp op, ArrayRef<int64_t> sizes,
                  const VectorPlan &plan, Value seed = {}) {
    Location loc = op.getLoc();
    SmallVector<int64_t> threadSizes(sizes);
    threadSizes.back() /= plan.lanes;
    int64_t count = 1;
    for (int64_t size : threadSizes)
      count *= size;
    Value linear = buildNest(op, count);
    rewriter.setInsertionPoint(op);
    auto c = [&](int64_t v) { return indexConstant(loc, v); };
    SmallVector<Value> dims = delinearize(loc, linear, threadSizes);
    dims.back() =
        arith::MulIOp::create(rewriter, loc, dims.back(), c(plan.lanes));
    SmallVector<int64_t> reductionSizes(
        ArrayRef(op.getStaticLoopRanges()).drop_front(sizes.size()));
    Block *body = op.getBlock();
    unsigned inputs = op.getNumDpsInputs(), outputs = op.getNumDpsInits();
    // Each operand's lanes: a vector, or one scalar for all. Outputs are
    // loaded (where read) before the reduction loops, at index 0 of each.
    SmallVector<Value> loaded(op->getNumOperands());
    SmallVector<SmallVector<Value>> at(op->getNumOperands());
    auto load = [&](OpOperand &operand, ValueRange all) {
      unsigned index = operand.getOperandNumber();
      at[index] = apply(loc, op.getMatchingIndexingMap(&operand), all);
      BlockArgument arg = op.getMatchingBlockArgument(&operand);
      if (!arg.use_empty())
        loaded[index] =
            loadLanes(loc, operand, arg.getType(), at[index], plan.lanes,
                      plan.contiguous[index], plan.alignment[index]);
    };
    SmallVector<Value> outDims(dims);
    outDims.append(reductionSizes.size(), c(0));
    for (OpOperand &init : op.getDpsInitsMutable()) {
      if (seed)
        at[init.getOperandNumber()] =
            apply(loc, op.getMatchingIndexingMap(&init), outDims);
      else
        load(init, outDims);
    }
    // Output o's lane l: loaded[inputs + o] before the loops, carried[o *
    // lanes + l] through them.
    SmallVector<Value> carried;
    for (unsigned o = 0; o < outputs && !reductionSizes.empty(); ++o)
      for (int64_t lane = 0; lane < plan.lanes; ++lane)
        carried.push_back(seed ? seed : laneOf(loc, loaded[inputs + o], lane));
    SmallVector<scf::ForOp> nest;
    SmallVector<Value> all(dims);
    for (int64_t size : reductionSizes) {
      auto loop =
          scf::ForOp::create(rewriter, loc, c(0), c(size), c(1), carried);
      rewriter.setInsertionPointToStart(loop.getBody());
      all.push_back(loop.getInductionVar());
      carried.assign(loop.getRegionIterArgs().begin(),
                     loop.getRegionIterArgs().end());
      nest.push_back(loop);
    }
    for (OpOperand *input : op.getDpsInputOperands())
      load(*input, all);
    SmallVector<SmallVector<Value>> results(outputs);
    for (int64_t lane = 0; lane < plan.lanes; ++lane) {
      IRMapping mapping;
      for (auto [index, value] : llvm::enumerate(loaded))
        if (value)
          mapping.map(body->getArgument(index), laneOf(loc, value, lane));
      for (unsigned o = 0; o < outputs && !nest.empty(); ++o)
        mapping.map(body->getArgument(inputs + o),
                    carried[o * plan.lanes + lane]);
      for (Operation &inner : body->without_terminator()) {
        // This lane's loop indices: the thread's, plus the lane innermost.
        if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
          unsigned dim = index.getDim();
          mapping.map(index.getResult(),
                      dim + 1 < dims.size()
                          ? dims[dim]
                          : Value(arith::AddIOp::create(rewriter, loc,
                                                        dims.back(), c(lane))));
          continue;
        }
        rewriter.clone(inner, mapping);
      }
      for (auto [index, value] :
           llvm::enumerate(body->getTerminator()->getOperands()))
        results[index].push_back(mapping.lookupOrDefault(value));
    }
    // The loops yield every lane's partial; the outermost gives the totals.
    if (!nest.empty()) {
      SmallVector<Value> partials;
      for (ArrayRef<Value> lanes : results)
        llvm::append_range(partials, lanes);
      scf::YieldOp::create(rewriter, loc, partials);
      for (unsigned depth = nest.size() - 1; depth > 0; --depth) {
        rewriter.setInsertionPointToEnd(nest[depth - 1].getBody());
        scf::YieldOp::create(rewriter, loc, nest[depth].getResults());
      }
      for (unsigned o = 0; o < outputs; ++o)
        for (int64_t lane = 0; lane < plan.lanes; ++lane)
          results[o][lane] = nest.front().getResult(o * plan.lanes + lane);
    }
    rewriter.setInsertionPoint(op);
    for (unsigned o = 0; o < outputs; ++o) {
      OpOperand *init = op.getDpsInitOperand(o);
      Value vector = vector::FromElementsOp::create(
          rewriter, loc,
          VectorType::get({plan.lanes}, results[o].front().getType()),
          results[o]);
      vector::StoreOp::create(rewriter, loc, vector, init->get(),
                              at[inputs + o], /*nontemporal=*/false,
                              llvm::MaybeAlign(plan.alignment[inputs + o]));
    }
    // The innermost loop unrolled by the largest factor of its trip count
    // up to kColumnUnroll (each copy's loads are independent of the
    // others' sums), once its results have their users: a loop unrolled
    // whole goes, its uses replaced.
    if (!nest.empty()) {
      int64_t trips = reductionSizes.back(), factor = kColumnUnroll;
      while (trips % factor)
        --factor;
      if (factor > 1)
        (void)loopUnrollByFactor(nest.back(), factor);
    }
    rewriter.eraseOp(op);
  }

  /// The value of a linalg.fill of the reduction `op`'s one output right
  /// before it (only ops free of memory effects between them), if `op`
  /// writes each output element once: the fill is erased (its kernel would
  /// only write what `op` overwrites) and `op` starts from its value, as a
  /// GEMM into a buffer just zeroed takes beta = 0. Null if none. Every
  /// mapping of a reduction takes it: a block per output, a thread per
  /// output's lanes, a thread per output.
  Value takeFill(linalg::GenericOp op) {
    OpOperand *init = op.getDpsInitOperand(0);
    AffineMap map = op.getMatchingIndexingMap(init);
    if (op.getNumReductionLoops() == 0 || op.getNumDpsInits() != 1 ||
        !map.isProjectedPermutation() ||
        map.getNumResults() != op.getNumParallelLoops())
      return {};
    linalg::FillOp fill = loom::codegen::fillBefore(op, init->get());
    if (!fill || fill.getInputs()[0].getType() !=
                     getElementTypeOrSelf(init->get().getType()))
      return {};
    Value value = fill.getInputs()[0];
    taken.insert(fill);
    rewriter.eraseOp(fill);
    return value;
  }

  /// Builds the block x thread nest for `count` iterations before `op` and
  /// returns the linear index inside its bound check.
  Value buildNest(Operation *op, int64_t count) {
    Location loc = op->getLoc();
    MLIRContext *ctx = op->getContext();
    int64_t block = std::min<int64_t>(threads, (count + 31) / 32 * 32);
    int64_t blocks = (count + block - 1) / block;
    rewriter.setInsertionPoint(op);
    auto c = [&](int64_t v) { return indexConstant(loc, v); };
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
      return op.emitError("gpu-map-linalg: the CUDA target needs static "
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
    bool whole = anchor == op.getOperation();
    Value seed;
    // The op is replaced as it is generalised and interchanged.
    Location loc = op.getLoc();
    rewriter.setInsertionPoint(op);
    FailureOr<linalg::GenericOp> generic =
        isa<linalg::GenericOp>(op.getOperation())
            ? FailureOr<linalg::GenericOp>(cast<linalg::GenericOp>(op))
            : linalg::generalizeNamedOp(rewriter, op);
    if (failed(generic))
      return emitError(loc, "gpu-map-linalg: cannot generalise this op");
    if (!llvm::equal(order, llvm::seq<unsigned>(0, order.size()))) {
      generic = linalg::interchangeGenericOp(rewriter, *generic, order);
      if (failed(generic))
        return emitError(loc, "gpu-map-linalg: cannot interchange loops");
    }
    if (whole) {
      anchor = *generic;
      // A thread per output would fill fewer blocks than a GPU has
      // multiprocessors (132 on an H100).
      bool fewOutputs = count <= loom::codegen::kFewBlocks * threads;
      if (Operation *combiner =
              blockReduction(*generic, blockReduceMin, fewOutputs)) {
        // Vectors along a row read with unit stride (a column sum's
        // strided walk has none).
        std::optional<VectorPlan> plan =
            planVectors(*generic, vectorBytes, LaneAxis::Row);
        Value start = takeFill(*generic);
        countKernel(*generic, bool(start));
        mapBlockReduction(*generic, combiner, parallelSizes, plan, start);
        ++blockReductions;
        vectorKernels += plan.has_value();
        return success();
      }
      // An elementwise op, or a reduction into columns read with unit
      // stride (gpu-split-reduction's partials, which start from the
      // fill before them).
      std::optional<VectorPlan> plan = planVectors(*generic, vectorBytes);
      if (!plan) {
        plan = planVectors(*generic, vectorBytes, LaneAxis::Column);
        if (plan)
          seed = takeFill(*generic);
      }
      if (plan) {
        countKernel(*generic, bool(seed));
        mapVectors(*generic, parallelSizes, *plan, seed);
        ++vectorKernels;
        return success();
      }
      // A thread per output stores the seed before its reduction loops.
      seed = takeFill(*generic);
    }
    countKernel(*generic, bool(seed));
    Value linear = buildNest(anchor, count);
    rewriter.setInsertionPoint(*generic);
    if (seed) {
      // This thread's output element, before the reduction loops.
      OpOperand *init = generic->getDpsInitOperand(0);
      SmallVector<Value> dims = delinearize(loc, linear, parallelSizes);
      dims.append(generic->getNumReductionLoops(), indexConstant(loc, 0));
      memref::StoreOp::create(
          rewriter, loc, seed, init->get(),
          apply(loc, generic->getMatchingIndexingMap(init), dims));
    }
    FailureOr<linalg::LinalgLoops> loops =
        linalg::linalgOpToParallelLoops(rewriter, *generic);
    if (failed(loops))
      return emitError(loc, "gpu-map-linalg: cannot lower to loops");
    rewriter.eraseOp(*generic);
    if (parallelSizes.empty())
      return success();
    // The outer scf.parallel over every parallel dimension: its induction
    // variables are the delinearised thread index.
    auto parallel = loops->empty()
                        ? scf::ParallelOp()
                        : dyn_cast<scf::ParallelOp>(loops->front());
    if (!parallel || parallel.getNumLoops() != parallelSizes.size())
      return emitError(loc, "gpu-map-linalg: expected one loop over the "
                            "parallel dimensions");
    rewriter.setInsertionPoint(parallel);
    SmallVector<Value> indices =
        delinearize(parallel.getLoc(), linear, parallelSizes);
    Block *body = parallel.getBody();
    rewriter.eraseOp(body->getTerminator());
    rewriter.inlineBlockBefore(body, parallel, indices);
    rewriter.eraseOp(parallel);
    return success();
  }
};

struct GpuMapLinalgPass
    : public loom::codegen::impl::GpuMapLinalgPassBase<GpuMapLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    IRRewriter rewriter(&getContext());
    LinalgToGpu mapper{rewriter, threads, blockReduceMin, vectorBytes};
    if (threads < 32 || threads > 1024 || threads % 32) {
      func.emitError("gpu-map-linalg: threads must be a multiple of 32 "
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
        loop.emitError("gpu-map-linalg: a host loop that reads memory "
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
        op.emitError("gpu-map-linalg: expected a linalg op on buffers "
                     "(run bufferisation first)");
        return signalPassFailure();
      }
    }
    // Last to first, so that a reduction still sees the fill before it.
    for (linalg::LinalgOp op : llvm::reverse(ops))
      if (!mapper.taken.contains(op.getOperation()) &&
          failed(mapper.map(op, op)))
        return signalPassFailure();
    // The function's counts (its report in the IR), and the pass's.
    Builder b(&getContext());
    func->setAttr(attrs::kGpuKernels, b.getI64IntegerAttr(mapper.kernels));
    func->setAttr(attrs::kGpuBlockReductions,
                  b.getI64IntegerAttr(mapper.blockReductions));
    func->setAttr(attrs::kGpuVectorKernels,
                  b.getI64IntegerAttr(mapper.vectorKernels));
    func->setAttr(attrs::kGpuKernelBytes,
                  b.getI64IntegerAttr(mapper.kernelBytes));
    numKernels += mapper.kernels;
    numBlockReductions += mapper.blockReductions;
    numVectorKernels += mapper.vectorKernels;
    kernelBytes += mapper.kernelBytes;
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
          op->getName().getDialectNamespace() == "vector") {
        op->emitError("gpu-map-linalg: this op would run on the host "
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
