//===- CrossEntropy.cu - the fused loss's row kernels
//-----------------------===//
//
// The per-chunk kernels of the fused linear + cross-entropy: cuBLAS computes
// a chunk's [rows, vocab] logits, then
//
//   - the forward kernel reads each row once: a block of 1,024 threads per
//     row, each thread keeping the row's statistics (RowStats: an online
//     (max, sum of exp) pair and the sum of its columns) over float4 loads,
//     merged across the warp with shuffles and across the block through
//     shared memory; thread 0 then writes the row's log-sum-exp and loss;
//   - the backward kernel reads each logit once more and writes its
//     gradient (in place, or rounded to bf16 for the bf16 GEMMs): a block per
//     row and 4,096-column tile, four columns a thread per step.
//
// Either applies the soft-cap on the fly, so the capped logits (and, in the
// backward, tanh) are never stored. The formulas and constants are the
// linalg decomposition's (LinearCrossEntropyDecomposition.cpp), but not its
// bits: the forward's log-sum-exp is online (one pass) where the
// decomposition takes the row maximum first, and nvcc contracts
// multiply-adds into FMAs.
//
//===----------------------------------------------------------------------===//

#include "Bf16Pack.cuh"
#include "CrossEntropy.h"
#include "loom/Runtime/KernelDomains.h"

#include <cmath>
#include <cstdint>

namespace loom::xent {
namespace {

using namespace detail;

constexpr int kThreads = 256;
/// The forward's block: a chunk has a few hundred rows (256 by default),
/// one block each, so a row takes as many threads as an SM can hold two
/// blocks of: at 256 threads, two blocks an SM left three quarters of its
/// threads idle and the kernel moved 1.07 TB/s on an H100.
constexpr int kForwardThreads = 1024;
constexpr int kForwardWarps = kForwardThreads / 32;
/// Columns of a backward block.
constexpr int kColumns = 4096;

bool aligned(const void *pointer, int bytes) {
  return reinterpret_cast<uintptr_t>(pointer) % bytes == 0;
}

/// One block per row of `logits` ([rows, vocab]).
__global__ void __launch_bounds__(kForwardThreads, 2)
    forwardKernel(const float *logits, const int32_t *labels, float *lse,
                  float *loss, int64_t vocab, Constants c, bool vectorised) {
  extern __shared__ float4 sharedMem[];
  RowStats *partial = reinterpret_cast<RowStats *>(sharedMem); // a warp's
  const int64_t row = blockIdx.x;
  const float *z = logits + row * vocab;
  RowStats stats;
  if (vectorised) {
    const float4 *z4 = reinterpret_cast<const float4 *>(z);
    // Unrolled, so that a thread's next loads are in flight while it
    // folds the last ones (in the same order).
#pragma unroll 4
    for (int64_t j = threadIdx.x; j < vocab / 4; j += kForwardThreads) {
      const float4 v = z4[j];
      stats.add(v.x, c);
      stats.add(v.y, c);
      stats.add(v.z, c);
      stats.add(v.w, c);
    }
  } else {
    for (int64_t j = threadIdx.x; j < vocab; j += kForwardThreads)
      stats.add(z[j], c);
  }
  for (int offset = 16; offset > 0; offset /= 2)
    stats.merge({__shfl_xor_sync(0xffffffffu, stats.max, offset),
                 __shfl_xor_sync(0xffffffffu, stats.sum, offset),
                 __shfl_xor_sync(0xffffffffu, stats.total, offset)});
  if (threadIdx.x % 32 == 0)
    partial[threadIdx.x / 32] = stats;
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  for (int w = 1; w < kForwardWarps; ++w)
    stats.merge(partial[w]);
  const float rowLse = stats.lse();
  lse[row] = rowLse;
  loss[row] = rowLoss(rowLse, stats.total, labels[row], vocab, c,
                      [&](int32_t label) { return capped(z[label], c); });
}

/// Stores four consecutive gradients.
__device__ __forceinline__ void store4(float *out, float a, float b, float c,
                                       float d) {
  *reinterpret_cast<float4 *>(out) = make_float4(a, b, c, d);
}
__device__ __forceinline__ void store4(uint16_t *out, float a, float b, float c,
                                       float d) {
  uint32_t *words = reinterpret_cast<uint32_t *>(out);
  words[0] = cuda::pack(a, b);
  words[1] = cuda::pack(c, d);
}
__device__ __forceinline__ void store1(float *out, float a) { *out = a; }
__device__ __forceinline__ void store1(uint16_t *out, float a) {
  *out = static_cast<uint16_t>(cuda::pack(a, 0.f) & 0xffffu);
}

/// Block (row, tile): the gradient of columns [tile * kColumns, ...) of
/// row `row`. `grad` may alias `logits`: each thread reads its logits before
/// it writes their gradients.
template <typename Out>
__global__ void __launch_bounds__(kThreads)
    backwardKernel(const float *logits, const int32_t *labels, const float *lse,
                   const float *weights, Out *grad, int64_t vocab,
                   int64_t columnOffset, Constants c, bool vectorised) {
  const int64_t row = blockIdx.x;
  const RowGradient gradient(lse[row], weights[row], labels[row], columnOffset,
                             c);
  const float *z = logits + row * vocab;
  Out *g = grad + row * vocab;
  const int64_t begin = int64_t(blockIdx.y) * kColumns;
  const int64_t end = begin + kColumns < vocab ? begin + kColumns : vocab;
  if (vectorised) {
    for (int64_t j = begin + 4 * threadIdx.x; j < end; j += 4 * kThreads) {
      const float4 v = *reinterpret_cast<const float4 *>(z + j);
      store4(g + j, gradient(v.x, j, c), gradient(v.y, j + 1, c),
             gradient(v.z, j + 2, c), gradient(v.w, j + 3, c));
    }
  } else {
    for (int64_t j = begin + threadIdx.x; j < end; j += kThreads)
      store1(g + j, gradient(z[j], j, c));
  }
}

bool takes(int64_t rows, int64_t vocab) {
  static_assert(kColumns == loom::runtime::kCudaCrossEntropyColumns);
  return loom::runtime::cudaCrossEntropyTakes(rows, vocab);
}

template <typename Out>
cudaError_t launchBackward(cudaStream_t stream, const float *logits,
                           const int32_t *labels, const float *lse,
                           const float *weights, Out *grad, int64_t rows,
                           int64_t vocab, int64_t columnOffset,
                           int64_t totalVocab, const Settings &settings) {
  if (!takes(rows, vocab) || totalVocab < vocab)
    return cudaErrorInvalidValue;
  if (rows == 0)
    return cudaSuccess;
  const bool vectorised =
      vocab % 4 == 0 && aligned(logits, 16) && aligned(grad, 4 * sizeof(Out));
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((vocab + kColumns - 1) / kColumns));
  backwardKernel<Out><<<grid, kThreads, 0, stream>>>(
      logits, labels, lse, weights, grad, vocab, columnOffset,
      constantsFor(settings, totalVocab), vectorised);
  return cudaGetLastError();
}

} // namespace

cudaError_t forward(cudaStream_t stream, const float *logits,
                    const int32_t *labels, float *lse, float *loss,
                    int64_t rows, int64_t vocab, const Settings &settings) {
  if (!takes(rows, vocab))
    return cudaErrorInvalidValue;
  if (rows == 0)
    return cudaSuccess;
  const bool vectorised = vocab % 4 == 0 && aligned(logits, 16);
  forwardKernel<<<static_cast<unsigned>(rows), kForwardThreads,
                  kForwardWarps * sizeof(RowStats), stream>>>(
      logits, labels, lse, loss, vocab, constantsFor(settings, vocab),
      vectorised);
  return cudaGetLastError();
}

cudaError_t backward(cudaStream_t stream, const float *logits,
                     const int32_t *labels, const float *lse,
                     const float *weights, float *grad, int64_t rows,
                     int64_t vocab, int64_t columnOffset, int64_t totalVocab,
                     const Settings &settings) {
  return launchBackward(stream, logits, labels, lse, weights, grad, rows, vocab,
                        columnOffset, totalVocab, settings);
}

cudaError_t backwardBf16(cudaStream_t stream, const float *logits,
                         const int32_t *labels, const float *lse,
                         const float *weights, uint16_t *grad, int64_t rows,
                         int64_t vocab, int64_t columnOffset,
                         int64_t totalVocab, const Settings &settings) {
  return launchBackward(stream, logits, labels, lse, weights, grad, rows, vocab,
                        columnOffset, totalVocab, settings);
}

} // namespace loom::xent
