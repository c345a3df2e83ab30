//===- ConvertLinalgToBlas.cpp - 2-D contractions to cblas_?gemm ----------===//
//
// CBLAS takes 32-bit sizes (Debian's libopenblas is LP64); larger
// dimensions are left to the loops.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainPasses.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace loom::train {
#define GEN_PASS_DEF_CONVERTLINALGTOBLASPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;

namespace {

// CBLAS enums.
constexpr int32_t kRowMajor = 101, kNoTrans = 111, kTrans = 112;

/// True if the body is `out + a * b` (in either order of the add).
bool isMulAdd(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  if (body->getOperations().size() != 3)
    return false;
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value out = body->getArgument(2);
  Value product = add.getLhs() == out ? add.getRhs() : add.getLhs();
  if ((add.getLhs() == out) == (add.getRhs() == out))
    return false;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul)
    return false;
  Value a = body->getArgument(0), b = body->getArgument(1);
  return (mul.getLhs() == a && mul.getRhs() == b) ||
         (mul.getLhs() == b && mul.getRhs() == a);
}

/// The two loop dimensions a 2-result projected-permutation map reads.
std::optional<std::pair<unsigned, unsigned>> dimsOf(AffineMap map) {
  if (map.getNumResults() != 2 || !map.isProjectedPermutation())
    return std::nullopt;
  return std::make_pair(map.getDimPosition(0), map.getDimPosition(1));
}

struct Gemm {
  Value a, b, c;
  bool transA, transB;
};

/// Recognises C(i,j) += A(i|k, k|i) * B(k|j, j|k) with 2-D f32/f64 memrefs.
std::optional<Gemm> matchGemm(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op.getNumLoops() != 3 ||
      op.getNumReductionLoops() != 1 || !isMulAdd(op))
    return std::nullopt;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto c = dimsOf(maps[2]), x = dimsOf(maps[0]), y = dimsOf(maps[1]);
  if (!c || !x || !y)
    return std::nullopt;
  unsigned i = c->first, j = c->second;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (iterators[i] != utils::IteratorType::parallel ||
      iterators[j] != utils::IteratorType::parallel)
    return std::nullopt;
  unsigned k = 3 - i - j;
  Value a = op.getDpsInputs()[0], b = op.getDpsInputs()[1];
  // The operand that reads row i is A.
  auto reads = [](std::pair<unsigned, unsigned> d, unsigned dim) {
    return d.first == dim || d.second == dim;
  };
  if (reads(*y, i) && reads(*x, j))
    std::swap(a, b), std::swap(x, y);
  if (!reads(*x, i) || !reads(*x, k) || !reads(*y, k) || !reads(*y, j))
    return std::nullopt;
  for (Value v : {a, b, op.getDpsInits()[0]}) {
    auto type = dyn_cast<MemRefType>(v.getType());
    if (!type || type.getRank() != 2 ||
        type.getElementType() != cast<MemRefType>(a.getType()).getElementType())
      return std::nullopt;
    Type element = type.getElementType();
    if (!element.isF32() && !element.isF64())
      return std::nullopt;
    // Rows must be contiguous: unit inner stride.
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) || strides[1] != 1)
      return std::nullopt;
  }
  return Gemm{a, b, op.getDpsInits()[0], /*transA=*/x->first == k,
              /*transB=*/y->first == j};
}

struct ConvertLinalgToBlasPass
    : public loom::train::impl::ConvertLinalgToBlasPassBase<
          ConvertLinalgToBlasPass> {
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
    SmallVector<std::pair<linalg::LinalgOp, Gemm>> gemms;
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
      Type element = cast<MemRefType>(gemm.c.getType()).getElementType();
      bool f64 = element.isF64();
      StringRef name = cublas ? (f64 ? "loomrt_cublas_dgemm"
                                     : "loomrt_cublas_sgemm")
                              : (f64 ? "cblas_dgemm" : "cblas_sgemm");
      func::FuncOp callee;
      {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPointToStart(module.getBody());
        callee = module.lookupSymbol<func::FuncOp>(name);
        if (!callee) {
          callee = func::FuncOp::create(
              builder, loc, name,
              builder.getFunctionType({i32, i32, i32, i32, i32, i32, element,
                                       ptr, i32, ptr, i32, element, ptr, i32},
                                      {}));
          callee.setPrivate();
        }
      }
      builder.setInsertionPoint(op);
      // Base pointer + offset, and the leading dimension, of each operand.
      auto operand = [&](Value memref) -> std::pair<Value, Value> {
        auto meta =
            memref::ExtractStridedMetadataOp::create(builder, loc, memref);
        Value base = memref::ExtractAlignedPointerAsIndexOp::create(
            builder, loc, memref);
        Value bytes = arith::MulIOp::create(
            builder, loc, meta.getOffset(),
            arith::ConstantIndexOp::create(builder, loc, f64 ? 8 : 4));
        Value address = arith::IndexCastOp::create(
            builder, loc, i64,
            arith::AddIOp::create(builder, loc, base, bytes));
        Value pointer = LLVM::IntToPtrOp::create(builder, loc, ptr, address);
        Value lead = arith::IndexCastOp::create(builder, loc, i32,
                                                meta.getStrides()[0]);
        return {pointer, lead};
      };
      auto dim = [&](Value memref, int64_t d) -> Value {
        return arith::IndexCastOp::create(
            builder, loc, i32, memref::DimOp::create(builder, loc, memref, d));
      };
      auto [pa, lda] = operand(gemm.a);
      auto [pb, ldb] = operand(gemm.b);
      auto [pc, ldc] = operand(gemm.c);
      Value m = dim(gemm.c, 0), n = dim(gemm.c, 1);
      Value k = dim(gemm.a, gemm.transA ? 0 : 1);
      auto i32Const = [&](int32_t v) -> Value {
        return arith::ConstantIntOp::create(builder, loc, i32, v);
      };
      Value one = arith::ConstantOp::create(builder, loc,
                                            builder.getFloatAttr(element, 1.0));
      func::CallOp::create(
          builder, loc, callee,
          ValueRange{i32Const(kRowMajor),
                     i32Const(gemm.transA ? kTrans : kNoTrans),
                     i32Const(gemm.transB ? kTrans : kNoTrans), m, n, k, one,
                     pa, lda, pb, ldb, one, pc, ldc});
      op->erase();
    }
  }
};

} // namespace
