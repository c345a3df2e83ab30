//===- ConvertLinalgToBlas.cpp - contractions to cblas_?gemm ---------------===//
//
// A contraction with batch dimensions (attention's) becomes one strided
// batched GEMM call over its largest batch dimension, inside a loop nest
// over the others; a second reduction (grouped-query attention's dK and dV
// sum over the query heads of a group too) becomes an inner loop of calls
// accumulating into the same C. The GEMM's rows and
// reduction are the largest dimensions that fit the operands' layouts, so
// that few, large GEMMs are called. CBLAS takes 32-bit sizes (Debian's
// libopenblas is LP64); larger dimensions are left to the loops. A GEMM
// into a buffer that was just filled with zeros calls with beta = 0 and the
// fill goes (on the CUDA target, a kernel writing all of C).
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Utils/GemmMatch.h"
#include "loom/Codegen/Utils/ReductionMatch.h"
#include "loom/Conversion/Passes.h"
#include "loom/Runtime/Symbols.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"

#include <limits>

namespace loom {
#define GEN_PASS_DEF_CONVERTLINALGTOBLASPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;
namespace symbols = loom::runtime::symbols;

namespace {

// CBLAS enums.
constexpr int32_t kRowMajor = 101, kNoTrans = 111, kTrans = 112;

} // namespace

namespace {

/// The GEMM routine for the operands' element types: s (f32), d (f64),
/// b (bf16 A, B and C) or sb (bf16 A and B, f32 C); bf16 accumulates in f32.
std::optional<StringRef> gemmRoutine(linalg::LinalgOp op) {
  Type a = getElementTypeOrSelf(op.getDpsInputs()[0].getType()),
       b = getElementTypeOrSelf(op.getDpsInputs()[1].getType()),
       c = getElementTypeOrSelf(op.getDpsInits()[0].getType());
  if (a != b)
    return std::nullopt;
  if (a == c && (c.isF32() || c.isF64()))
    return c.isF32() ? StringRef("sgemm") : StringRef("dgemm");
  if (a.isBF16() && (c.isBF16() || c.isF32()))
    return c.isBF16() ? StringRef("bgemm") : StringRef("sbgemm");
  return std::nullopt;
}

/// One operand of a GEMM: its memref, whether the matrix is read transposed,
/// the memref dimension whose stride is the leading dimension, and the
/// memref dimension each batch loop indexes (-1: not read, stride 0).
struct Matrix {
  Value memref;
  bool transposed;
  unsigned lead;
  SmallVector<int64_t> batchPos;
};

struct Gemm {
  Matrix a, b, c;
  int64_t m, n, k;
  double alpha;
  /// The loops around the call, outermost first: C's batch dimensions, then
  /// the reductions other than k (C is the same in each; the GEMMs
  /// accumulate).
  SmallVector<int64_t> batch;
  /// How many of `batch` are C's batch dimensions.
  unsigned outputBatch = 0;
};

/// `operand` as a matrix over loop dimensions (row, col): the map must
/// read both, plus only batch loops; the memref's last dimension must be
/// one of them with a unit stride.
std::optional<Matrix> matrixOf(Value operand, AffineMap map, unsigned row,
                               unsigned col, ArrayRef<unsigned> batchLoops) {
  auto type = dyn_cast<MemRefType>(operand.getType());
  if (!type || !map.isProjectedPermutation() || map.getNumResults() < 2)
    return std::nullopt;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || strides.back() != 1)
    return std::nullopt;
  std::optional<unsigned> rowPos = map.getResultPosition(
                              getAffineDimExpr(row, map.getContext())),
                          colPos = map.getResultPosition(
                              getAffineDimExpr(col, map.getContext()));
  unsigned last = map.getNumResults() - 1;
  if (!rowPos || !colPos || (*rowPos != last && *colPos != last))
    return std::nullopt;
  Matrix m{operand, /*transposed=*/*rowPos == last,
           /*lead=*/*rowPos == last ? *colPos : *rowPos, {}};
  unsigned batchRead = 0;
  for (unsigned loop : batchLoops) {
    std::optional<unsigned> pos =
        map.getResultPosition(getAffineDimExpr(loop, map.getContext()));
    m.batchPos.push_back(pos ? int64_t(*pos) : -1);
    batchRead += pos.has_value();
  }
  if (batchRead + 2 != map.getNumResults())
    return std::nullopt;
  return m;
}

/// Recognises C(.., i, .., j) += alpha A(.., i|k, .., k|i) * B(.., k|j, ..,
/// j|k) on memrefs (see gemmRoutine) whose rows are contiguous. j is C's last
/// dimension; i is the largest other dimension of C, and k the largest
/// reduction, whose layouts fit a GEMM. C's other dimensions are batch
/// loops (A or B may skip one: a broadcast, stride 0), and the other
/// reductions are inner loops whose GEMMs accumulate.
std::optional<Gemm> matchGemm(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op.getNumReductionLoops() < 1)
    return std::nullopt;
  std::optional<double> alpha = loom::codegen::mulAddAlpha(op);
  if (!alpha)
    return std::nullopt;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned rank = maps[2].getNumResults();
  if (llvm::any_of(ranges, ShapedType::isDynamic) ||
      !maps[2].isProjectedPermutation() || rank < 2 ||
      rank + op.getNumReductionLoops() != op.getNumLoops())
    return std::nullopt;
  if (!gemmRoutine(op))
    return std::nullopt;
  unsigned j = maps[2].getDimPosition(rank - 1);
  SmallVector<unsigned> rows, reductions;
  for (unsigned r = 0; r + 1 < rank; ++r)
    rows.push_back(maps[2].getDimPosition(r));
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (unsigned d = 0; d < op.getNumLoops(); ++d)
    if (iterators[d] == utils::IteratorType::reduction)
      reductions.push_back(d);
  auto largestFirst = [&](unsigned p, unsigned q) {
    return ranges[p] > ranges[q];
  };
  llvm::stable_sort(rows, largestFirst);
  llvm::stable_sort(reductions, largestFirst);
  // CBLAS takes 32-bit sizes.
  auto fits = [&](unsigned d) {
    return ranges[d] <= std::numeric_limits<int32_t>::max();
  };
  for (unsigned k : reductions) {
    for (unsigned i : rows) {
      if (!fits(i) || !fits(j) || !fits(k))
        continue;
      SmallVector<unsigned> loops;
      for (unsigned r = 0; r + 1 < rank; ++r)
        if (maps[2].getDimPosition(r) != i)
          loops.push_back(maps[2].getDimPosition(r));
      for (unsigned d = 0; d < op.getNumLoops(); ++d)
        if (iterators[d] == utils::IteratorType::reduction && d != k)
          loops.push_back(d);
      Value x = op.getDpsInputs()[0], y = op.getDpsInputs()[1];
      AffineMap xMap = maps[0], yMap = maps[1];
      // The operand that reads row i is A.
      if (!xMap.isFunctionOfDim(i))
        std::swap(x, y), std::swap(xMap, yMap);
      std::optional<Matrix> a = matrixOf(x, xMap, i, k, loops),
                            b = matrixOf(y, yMap, k, j, loops),
                            c = matrixOf(op.getDpsInits()[0], maps[2], i, j,
                                         loops);
      if (!a || !b || !c || c->transposed)
        continue;
      Gemm gemm{*a, *b, *c, ranges[i], ranges[j], ranges[k], *alpha, {}};
      for (unsigned loop : loops)
        gemm.batch.push_back(ranges[loop]);
      gemm.outputBatch = rank - 2;
      return gemm;
    }
  }
  return std::nullopt;
}

/// The fill of zeros into `op`'s C right before it, with only ops free of
/// memory effects between them, when `gemm`'s calls write each element of
/// C once (no inner reduction loop accumulating into it): beta = 0 then
/// does the fill's work. Null otherwise.
linalg::FillOp zeroFillBefore(linalg::LinalgOp op, const Gemm &gemm) {
  if (gemm.batch.size() != gemm.outputBatch)
    return {};
  linalg::FillOp fill = loom::codegen::fillBefore(op, gemm.c.memref);
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat())
             ? fill
             : linalg::FillOp();
}

struct ConvertLinalgToBlasPass
    : public loom::impl::ConvertLinalgToBlasPassBase<ConvertLinalgToBlasPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (library != "cblas" && library != "cublas") {
      module.emitError() << "convert-linalg-to-blas: library must be cblas "
                            "or cublas, not '"
                         << library << "'";
      return signalPassFailure();
    }
    bool cublas = library == "cublas";
    std::vector<std::pair<linalg::LinalgOp, Gemm>> gemms;
    module.walk([&](linalg::LinalgOp op) {
      if (std::optional<Gemm> gemm = matchGemm(op))
        gemms.push_back({op, *gemm});
    });
    if (gemms.empty())
      return;
    MLIRContext *ctx = &getContext();
    OpBuilder builder(ctx);
    Type i32 = builder.getI32Type(), i64 = builder.getI64Type();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    for (auto [op, gemm] : gemms) {
      Location loc = op.getLoc();
      Type element =
          cast<MemRefType>(gemm.c.memref.getType()).getElementType();
      StringRef routine = *gemmRoutine(op);
      // alpha and beta: f64 for dgemm, else f32.
      Type scalar = element.isF64() ? element : builder.getF32Type();
      // The batch loop the call takes over: C's largest (the innermost on
      // ties), when batching is on and it has more than one element.
      std::optional<unsigned> batched;
      for (unsigned l = 0; batch && l < gemm.outputBatch; ++l)
        if (gemm.batch[l] > 1 &&
            gemm.batch[l] <= std::numeric_limits<int32_t>::max() &&
            (!batched || gemm.batch[l] >= gemm.batch[*batched]))
          batched = l;
      // The Debian OpenBLAS has no bf16 GEMM: the runtime's does it.
      bool runtime = cublas || batched || routine.ends_with("bgemm");
      std::string name = (Twine(cublas    ? symbols::kCublasPrefix
                                : runtime ? symbols::kLoomCblasPrefix
                                          : symbols::kCblasPrefix) +
                          routine + (batched ? "_batched" : ""))
                             .str();
      func::FuncOp callee;
      {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPointToStart(module.getBody());
        callee = module.lookupSymbol<func::FuncOp>(name);
        if (!callee) {
          SmallVector<Type> args = {i32, i32, i32, i32, i32, i32, scalar};
          for (int x = 0; x < 3; ++x) {
            if (x == 2)
              args.push_back(scalar); // beta
            args.append({ptr, i32});
            if (batched)
              args.push_back(i64); // the stride between batch elements
          }
          if (batched)
            args.push_back(i32); // the batch count
          callee = func::FuncOp::create(builder, loc, name,
                                        builder.getFunctionType(args, {}));
          callee.setPrivate();
        }
      }
      linalg::FillOp zeroFill = zeroFillBefore(op, gemm);
      builder.setInsertionPoint(op);
      auto index = [&](int64_t v) -> Value {
        return arith::ConstantIndexOp::create(builder, loc, v);
      };
      // Each operand's metadata once; then one call per batch element (the
      // batched one at index 0), at base + (offset + sum of batch index x
      // stride) elements.
      SmallVector<memref::ExtractStridedMetadataOp> metas;
      SmallVector<Value> bases;
      for (Matrix *x : {&gemm.a, &gemm.b, &gemm.c}) {
        metas.push_back(
            memref::ExtractStridedMetadataOp::create(builder, loc, x->memref));
        bases.push_back(memref::ExtractAlignedPointerAsIndexOp::create(
            builder, loc, x->memref));
      }
      SmallVector<Value> batchIndex;
      for (auto [l, size] : llvm::enumerate(gemm.batch)) {
        if (batched && l == *batched) {
          batchIndex.push_back(index(0));
          continue;
        }
        auto loop = scf::ForOp::create(builder, loc, index(0), index(size),
                                       index(1));
        builder.setInsertionPointToStart(loop.getBody());
        batchIndex.push_back(loop.getInductionVar());
      }
      auto i32Const = [&](int32_t v) -> Value {
        return arith::ConstantIntOp::create(builder, loc, i32, v);
      };
      SmallVector<Value> operands = {
          i32Const(kRowMajor), i32Const(gemm.a.transposed ? kTrans : kNoTrans),
          i32Const(gemm.b.transposed ? kTrans : kNoTrans),
          i32Const(int32_t(gemm.m)), i32Const(int32_t(gemm.n)),
          i32Const(int32_t(gemm.k)),
          arith::ConstantOp::create(builder, loc,
                                    builder.getFloatAttr(scalar, gemm.alpha))};
      for (auto [which, x] : llvm::enumerate(
               std::array<Matrix *, 3>{&gemm.a, &gemm.b, &gemm.c})) {
        memref::ExtractStridedMetadataOp meta = metas[which];
        Value elements = meta.getOffset();
        for (auto [pos, iv] : llvm::zip(x->batchPos, batchIndex))
          if (pos >= 0)
            elements = arith::AddIOp::create(
                builder, loc, elements,
                arith::MulIOp::create(builder, loc, iv,
                                      meta.getStrides()[pos]));
        Value bytes = arith::MulIOp::create(
            builder, loc, elements,
            index(cast<MemRefType>(x->memref.getType()).getElementTypeBitWidth() /
                  8));
        Value address = arith::IndexCastOp::create(
            builder, loc, i64,
            arith::AddIOp::create(builder, loc, bases[which], bytes));
        if (which == 2) // beta: C accumulates, unless it was just zeroed.
          operands.push_back(arith::ConstantOp::create(
              builder, loc, builder.getFloatAttr(scalar, zeroFill ? 0.0 : 1.0)));
        operands.push_back(LLVM::IntToPtrOp::create(builder, loc, ptr, address));
        operands.push_back(arith::IndexCastOp::create(
            builder, loc, i32, meta.getStrides()[x->lead]));
        if (batched) {
          int64_t pos = x->batchPos[*batched];
          operands.push_back(
              pos >= 0 ? Value(arith::IndexCastOp::create(
                             builder, loc, i64, meta.getStrides()[pos]))
                       : Value(arith::ConstantIntOp::create(builder, loc, i64,
                                                            0)));
        }
      }
      if (batched)
        operands.push_back(i32Const(int32_t(gemm.batch[*batched])));
      func::CallOp::create(builder, loc, callee, operands);
      ++numCalls;
      op->erase();
      if (zeroFill)
        zeroFill->erase();
    }
  }
};

} // namespace
