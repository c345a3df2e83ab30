//===- HostBlas.cpp - strided batched and bf16 GEMMs over CBLAS -----------===//
//
// convert-linalg-to-blas calls one batched GEMM over attention's heads where
// it used to loop; on the CPU that batch is a loop of CBLAS calls (the
// Debian OpenBLAS has no batched entry point). OpenBLAS threads each call.
//
// The Debian OpenBLAS is built without bf16 (no cblas_sbgemm), so a bf16
// GEMM widens its operands into per-thread f32 scratch, calls
// cblas_sgemm and rounds C back once: the products accumulate in f32, as
// cuBLAS's bf16 GEMMs do.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Bf16.h"
#include "loom/Runtime/HeapScope.h"
#include "loom/Runtime/loomrt.h"

#include <cblas.h>
#include <type_traits>
#include <vector>

using loom::bf16ToFloat;
using loom::floatToBf16;

namespace {

/// The bf16 GEMMs' f32 copies of A, B and C, per calling thread (kept
/// across calls: they grow to the largest GEMM).
struct WideningScratch {
  std::vector<float> a, b, c;
};
thread_local WideningScratch scratch;

/// `rows` x `cols` of a bf16 matrix with leading dimension `ld`, as a
/// packed f32 matrix in `out`.
const float *widen(const uint16_t *x, int32_t rows, int32_t cols, int32_t ld,
                   std::vector<float> &out) {
  out.resize(size_t(rows) * size_t(cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = bf16ToFloat(x[r * ld + c]);
  return out.data();
}

/// C = alpha op(A) op(B) + beta C for bf16 A and B (row-major), C f32
/// (`Out` = float) or bf16 (`Out` = uint16_t). Without `widenA` (`widenB`)
/// the scratch still holds A (B) from the previous call: a batch's shared
/// operand (stride 0) is widened once.
template <typename Out>
void bf16Gemm(int32_t order, int32_t transA, int32_t transB, int32_t m,
              int32_t n, int32_t k, float alpha, const uint16_t *a,
              int32_t lda, const uint16_t *b, int32_t ldb, float beta, Out *c,
              int32_t ldc, bool widenA = true, bool widenB = true) {
  if (order != CblasRowMajor)
    loomrt_abort("loomrt_cblas_bgemm: only row-major (CblasRowMajor)");
  std::vector<float> &wa = scratch.a, &wb = scratch.b, &wc = scratch.c;
  bool ta = transA != CblasNoTrans, tb = transB != CblasNoTrans;
  // op(A) is m x k: stored k x m when transposed.
  const float *fa = widenA ? widen(a, ta ? k : m, ta ? m : k, lda, wa)
                           : wa.data();
  const float *fb = widenB ? widen(b, tb ? n : k, tb ? k : n, ldb, wb)
                           : wb.data();
  if constexpr (std::is_same_v<Out, float>) {
    cblas_sgemm(CblasRowMajor, CBLAS_TRANSPOSE(transA),
                CBLAS_TRANSPOSE(transB), m, n, k, alpha, fa, ta ? m : k, fb,
                tb ? k : n, beta, c, ldc);
  } else {
    if (beta != 0.0f)
      widen(c, m, n, ldc, wc);
    else
      wc.assign(size_t(m) * size_t(n), 0.0f);
    cblas_sgemm(CblasRowMajor, CBLAS_TRANSPOSE(transA),
                CBLAS_TRANSPOSE(transB), m, n, k, alpha, fa, ta ? m : k, fb,
                tb ? k : n, beta, wc.data(), n);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < n; ++col)
        c[r * ldc + col] = floatToBf16(wc[r * n + col]);
  }
}

template <typename Out>
void bf16GemmBatched(int32_t order, int32_t transA, int32_t transB, int32_t m,
                     int32_t n, int32_t k, float alpha, const uint16_t *a,
                     int32_t lda, int64_t strideA, const uint16_t *b,
                     int32_t ldb, int64_t strideB, float beta, Out *c,
                     int32_t ldc, int64_t strideC, int32_t count) {
  for (int32_t i = 0; i < count; ++i)
    bf16Gemm(order, transA, transB, m, n, k, alpha, a + i * strideA, lda,
             b + i * strideB, ldb, beta, c + i * strideC, ldc,
             i == 0 || strideA != 0, i == 0 || strideB != 0);
}

template <typename T, typename Gemm>
void batchedGemm(Gemm gemm, int32_t order, int32_t transA, int32_t transB,
                 int32_t m, int32_t n, int32_t k, T alpha, const T *a,
                 int32_t lda, int64_t strideA, const T *b, int32_t ldb,
                 int64_t strideB, T beta, T *c, int32_t ldc, int64_t strideC,
                 int32_t count) {
  for (int32_t i = 0; i < count; ++i)
    gemm(CBLAS_ORDER(order), CBLAS_TRANSPOSE(transA), CBLAS_TRANSPOSE(transB),
         m, n, k, alpha, a + i * strideA, lda, b + i * strideB, ldb, beta,
         c + i * strideC, ldc);
}

} // namespace

extern "C" {

void loomrt_cblas_sgemm_batched(int32_t order, int32_t transA, int32_t transB,
                                int32_t m, int32_t n, int32_t k, float alpha,
                                const float *a, int32_t lda, int64_t strideA,
                                const float *b, int32_t ldb, int64_t strideB,
                                float beta, float *c, int32_t ldc,
                                int64_t strideC, int32_t count) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  batchedGemm(cblas_sgemm, order, transA, transB, m, n, k, alpha, a, lda,
              strideA, b, ldb, strideB, beta, c, ldc, strideC, count);
}

void loomrt_cblas_dgemm_batched(int32_t order, int32_t transA, int32_t transB,
                                int32_t m, int32_t n, int32_t k, double alpha,
                                const double *a, int32_t lda, int64_t strideA,
                                const double *b, int32_t ldb, int64_t strideB,
                                double beta, double *c, int32_t ldc,
                                int64_t strideC, int32_t count) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  batchedGemm(cblas_dgemm, order, transA, transB, m, n, k, alpha, a, lda,
              strideA, b, ldb, strideB, beta, c, ldc, strideC, count);
}

void loomrt_cblas_bgemm(int32_t order, int32_t transA, int32_t transB,
                        int32_t m, int32_t n, int32_t k, float alpha,
                        const uint16_t *a, int32_t lda, const uint16_t *b,
                        int32_t ldb, float beta, uint16_t *c, int32_t ldc) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  bf16Gemm(order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c,
           ldc);
}

void loomrt_cblas_sbgemm(int32_t order, int32_t transA, int32_t transB,
                         int32_t m, int32_t n, int32_t k, float alpha,
                         const uint16_t *a, int32_t lda, const uint16_t *b,
                         int32_t ldb, float beta, float *c, int32_t ldc) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  bf16Gemm(order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c,
           ldc);
}

void loomrt_cblas_bgemm_batched(int32_t order, int32_t transA, int32_t transB,
                                int32_t m, int32_t n, int32_t k, float alpha,
                                const uint16_t *a, int32_t lda,
                                int64_t strideA, const uint16_t *b,
                                int32_t ldb, int64_t strideB, float beta,
                                uint16_t *c, int32_t ldc, int64_t strideC,
                                int32_t count) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  bf16GemmBatched(order, transA, transB, m, n, k, alpha, a, lda, strideA, b,
                  ldb, strideB, beta, c, ldc, strideC, count);
}

void loomrt_cblas_sbgemm_batched(int32_t order, int32_t transA,
                                 int32_t transB, int32_t m, int32_t n,
                                 int32_t k, float alpha, const uint16_t *a,
                                 int32_t lda, int64_t strideA,
                                 const uint16_t *b, int32_t ldb,
                                 int64_t strideB, float beta, float *c,
                                 int32_t ldc, int64_t strideC, int32_t count) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  bf16GemmBatched(order, transA, transB, m, n, k, alpha, a, lda, strideA, b,
                  ldb, strideB, beta, c, ldc, strideC, count);
}

} // extern "C"

extern "C" int64_t loomrt_blas_scratch_bytes(void) {
  static const int64_t bytes = [] {
    const int n = 512;
    std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 1.0f),
        c(size_t(n) * n);
    int64_t base = loomrt_heap_bytes();
    loomrt_heap_reset_peak();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
    return loomrt_heap_peak_bytes() - base;
  }();
  return bytes;
}

extern "C" int64_t loomrt_gemm_scratch_bytes(void) {
  return int64_t(sizeof(float)) *
         int64_t(scratch.a.capacity() + scratch.b.capacity() +
                 scratch.c.capacity());
}
