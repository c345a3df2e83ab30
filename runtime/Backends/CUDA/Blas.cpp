//===- Blas.cpp - GEMMs through cuBLAS ------------------------------------===//
//
// convert-linalg-to-blas{library=cublas}'s calls: row-major CBLAS
// arguments mapped onto cuBLAS's column-major GEMMs, on the compute
// stream.
//
//===----------------------------------------------------------------------===//

#include "Backends/CUDA/CudaContext.h"

using namespace loom::runtime::cuda;

namespace {

/// CBLAS's CblasTrans (112) and CblasConjTrans (113, the same for real
/// types) against CblasNoTrans (111).
cublasOperation_t operation(int cblasTrans) {
  return cblasTrans == 111 ? CUBLAS_OP_N : CUBLAS_OP_T;
}

/// Runs one cuBLAS GEMM call on the compute stream, timed under "name
/// shape"; a failure names both. `shape` is built only when needed.
template <typename Shape, typename Call>
void blasCall(const char *name, int32_t order, Shape shape, Call call) {
  Context &ctx = context();
  if (order != 101)
    ctx.abort(std::string(name) + ": only row-major (CblasRowMajor)");
  ctx.busy();
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  ctx.timed([&] { return std::string(name) + " " + shape(); },
            [&] { status = call(); });
  if (status != CUBLAS_STATUS_SUCCESS)
    ctx.check(status, std::string(name) + " (" + shape() + ")");
}

/// C = alpha op(A) op(B) + beta C on row-major matrices. A row-major
/// matrix is its column-major transpose, so cuBLAS computes
/// Cᵀ = op(B)ᵀ op(A)ᵀ.
template <typename T, typename Gemm>
void rowMajorGemm(Gemm gemm, const char *name, int32_t order, int32_t transA,
                  int32_t transB, int32_t m, int32_t n, int32_t k, T alpha,
                  const T *a, int32_t lda, const T *b, int32_t ldb, T beta,
                  T *c, int32_t ldc) {
  blasCall(
      name, order,
      [&] {
        return std::to_string(m) + "x" + std::to_string(n) + "x" +
               std::to_string(k);
      },
      [&] {
        return gemm(context().blas, operation(transB), operation(transA), n, m,
                    k, &alpha, b, ldb, a, lda, &beta, c, ldc);
      });
}

/// `count` such GEMMs at strides (in elements) in one strided batched
/// call: convert-linalg-to-blas's batch (attention's heads).
template <typename T, typename Gemm>
void rowMajorBatchedGemm(Gemm gemm, const char *name, int32_t order,
                         int32_t transA, int32_t transB, int32_t m, int32_t n,
                         int32_t k, T alpha, const T *a, int32_t lda,
                         int64_t strideA, const T *b, int32_t ldb,
                         int64_t strideB, T beta, T *c, int32_t ldc,
                         int64_t strideC, int32_t count) {
  blasCall(
      name, order,
      [&] {
        return std::to_string(count) + "x" + std::to_string(m) + "x" +
               std::to_string(n) + "x" + std::to_string(k);
      },
      [&] {
        return gemm(context().blas, operation(transB), operation(transA), n, m,
                    k, &alpha, b, ldb, strideB, a, lda, strideA, &beta, c, ldc,
                    strideC, count);
      });
}

/// A bf16 GEMM (C bf16 or f32, `cType`) through cublasGemmEx (`count`
/// < 0), or `count` of them through cublasGemmStridedBatchedEx; f32
/// accumulation.
void bf16Gemm(const char *name, cudaDataType_t cType, int32_t order,
              int32_t transA, int32_t transB, int32_t m, int32_t n, int32_t k,
              float alpha, const void *a, int32_t lda, int64_t strideA,
              const void *b, int32_t ldb, int64_t strideB, float beta, void *c,
              int32_t ldc, int64_t strideC, int32_t count) {
  blasCall(
      name, order,
      [&] {
        return (count >= 0 ? std::to_string(count) + "x" : std::string()) +
               std::to_string(m) + "x" + std::to_string(n) + "x" +
               std::to_string(k);
      },
      [&] {
        cublasHandle_t blas = context().blas;
        if (count < 0)
          return cublasGemmEx(blas, operation(transB), operation(transA), n, m,
                              k, &alpha, b, CUDA_R_16BF, ldb, a, CUDA_R_16BF,
                              lda, &beta, c, cType, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT);
        return cublasGemmStridedBatchedEx(
            blas, operation(transB), operation(transA), n, m, k, &alpha, b,
            CUDA_R_16BF, ldb, strideB, a, CUDA_R_16BF, lda, strideA, &beta, c,
            cType, ldc, strideC, count, CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT);
      });
}

} // namespace

extern "C" {

int64_t loomrt_blas_scratch_bytes(void) { return 0; }
int64_t loomrt_gemm_scratch_bytes(void) { return 0; }

// Matmuls: convert-linalg-to-blas{library=cublas} calls these with CBLAS's
// row-major arguments.
void loomrt_cublas_sgemm(int32_t order, int32_t transA, int32_t transB,
                         int32_t m, int32_t n, int32_t k, float alpha,
                         const float *a, int32_t lda, const float *b,
                         int32_t ldb, float beta, float *c, int32_t ldc) {
  rowMajorGemm(cublasSgemm, "cublasSgemm", order, transA, transB, m, n, k,
               alpha, a, lda, b, ldb, beta, c, ldc);
}

void loomrt_cublas_dgemm(int32_t order, int32_t transA, int32_t transB,
                         int32_t m, int32_t n, int32_t k, double alpha,
                         const double *a, int32_t lda, const double *b,
                         int32_t ldb, double beta, double *c, int32_t ldc) {
  rowMajorGemm(cublasDgemm, "cublasDgemm", order, transA, transB, m, n, k,
               alpha, a, lda, b, ldb, beta, c, ldc);
}

void loomrt_cublas_sgemm_batched(int32_t order, int32_t transA, int32_t transB,
                                 int32_t m, int32_t n, int32_t k, float alpha,
                                 const float *a, int32_t lda, int64_t strideA,
                                 const float *b, int32_t ldb, int64_t strideB,
                                 float beta, float *c, int32_t ldc,
                                 int64_t strideC, int32_t count) {
  rowMajorBatchedGemm(cublasSgemmStridedBatched, "cublasSgemmStridedBatched",
                      order, transA, transB, m, n, k, alpha, a, lda, strideA, b,
                      ldb, strideB, beta, c, ldc, strideC, count);
}

void loomrt_cublas_dgemm_batched(int32_t order, int32_t transA, int32_t transB,
                                 int32_t m, int32_t n, int32_t k, double alpha,
                                 const double *a, int32_t lda, int64_t strideA,
                                 const double *b, int32_t ldb, int64_t strideB,
                                 double beta, double *c, int32_t ldc,
                                 int64_t strideC, int32_t count) {
  rowMajorBatchedGemm(cublasDgemmStridedBatched, "cublasDgemmStridedBatched",
                      order, transA, transB, m, n, k, alpha, a, lda, strideA, b,
                      ldb, strideB, beta, c, ldc, strideC, count);
}

void loomrt_cublas_bgemm(int32_t order, int32_t transA, int32_t transB,
                         int32_t m, int32_t n, int32_t k, float alpha,
                         const uint16_t *a, int32_t lda, const uint16_t *b,
                         int32_t ldb, float beta, uint16_t *c, int32_t ldc) {
  bf16Gemm("cublasGemmEx(bf16)", CUDA_R_16BF, order, transA, transB, m, n, k,
           alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, -1);
}

void loomrt_cublas_sbgemm(int32_t order, int32_t transA, int32_t transB,
                          int32_t m, int32_t n, int32_t k, float alpha,
                          const uint16_t *a, int32_t lda, const uint16_t *b,
                          int32_t ldb, float beta, float *c, int32_t ldc) {
  bf16Gemm("cublasGemmEx(bf16->f32)", CUDA_R_32F, order, transA, transB, m, n,
           k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, -1);
}

void loomrt_cublas_bgemm_batched(int32_t order, int32_t transA, int32_t transB,
                                 int32_t m, int32_t n, int32_t k, float alpha,
                                 const uint16_t *a, int32_t lda,
                                 int64_t strideA, const uint16_t *b,
                                 int32_t ldb, int64_t strideB, float beta,
                                 uint16_t *c, int32_t ldc, int64_t strideC,
                                 int32_t count) {
  bf16Gemm("cublasGemmStridedBatchedEx(bf16)", CUDA_R_16BF, order, transA,
           transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c,
           ldc, strideC, count);
}

void loomrt_cublas_sbgemm_batched(int32_t order, int32_t transA, int32_t transB,
                                  int32_t m, int32_t n, int32_t k, float alpha,
                                  const uint16_t *a, int32_t lda,
                                  int64_t strideA, const uint16_t *b,
                                  int32_t ldb, int64_t strideB, float beta,
                                  float *c, int32_t ldc, int64_t strideC,
                                  int32_t count) {
  bf16Gemm("cublasGemmStridedBatchedEx(bf16->f32)", CUDA_R_32F, order, transA,
           transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c,
           ldc, strideC, count);
}

} // extern "C"
