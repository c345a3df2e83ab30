//===- HostBlas.cpp - strided batched GEMM over CBLAS ---------------------===//
//
// convert-linalg-to-blas calls one batched GEMM over attention's heads where
// it used to loop; on the CPU that batch is a loop of CBLAS calls (the
// Debian OpenBLAS has no batched entry point). OpenBLAS threads each call.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/loomrt.h"

#include <cblas.h>

namespace {

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
  batchedGemm(cblas_sgemm, order, transA, transB, m, n, k, alpha, a, lda,
              strideA, b, ldb, strideB, beta, c, ldc, strideC, count);
}

void loomrt_cblas_dgemm_batched(int32_t order, int32_t transA, int32_t transB,
                                int32_t m, int32_t n, int32_t k, double alpha,
                                const double *a, int32_t lda, int64_t strideA,
                                const double *b, int32_t ldb, int64_t strideB,
                                double beta, double *c, int32_t ldc,
                                int64_t strideC, int32_t count) {
  batchedGemm(cblas_dgemm, order, transA, transB, m, n, k, alpha, a, lda,
              strideA, b, ldb, strideB, beta, c, ldc, strideC, count);
}

} // extern "C"
