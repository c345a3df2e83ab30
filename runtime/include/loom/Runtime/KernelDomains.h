//===- KernelDomains.h - what the CUDA kernels take -------------*- C++ -*-===//
//
// The sizes and head dims each CUDA kernel the compiler calls is built for.
// The kernels check their arguments against these at run time (and refuse
// the rest); the compiler checks the same at compile time
// (train-fuse-attention{cuda}, train-decompose{cuda}) and falls back to the
// decomposition with a remark, so that a trainer never compiles into a call
// its kernel refuses. The host kernels take any size.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELDOMAINS_H
#define LOOM_RUNTIME_KERNELDOMAINS_H

#include <cstdint>

namespace loom::runtime {

/// Fused attention: the tile widths are instantiated for head dims up to
/// 128; the f32 kernels load 4 lanes at a time, the bf16 ones (tensor-core
/// fragments) 8.
inline constexpr int64_t kCudaAttentionMaxHeadDim = 128;
constexpr int64_t cudaAttentionHeadDimMultiple(bool bf16) {
  return bf16 ? 8 : 4;
}
constexpr bool cudaAttentionTakesHeadDim(int64_t dim, bool bf16) {
  return dim > 0 && dim <= kCudaAttentionMaxHeadDim &&
         dim % cudaAttentionHeadDimMultiple(bf16) == 0;
}
/// The grid: one block per (batch, head) in y (at most 65535) and query
/// blocks of 64 positions in x, addressed in int.
inline constexpr int64_t kCudaAttentionBlock = 64;
constexpr bool cudaAttentionTakesGrid(int64_t batch, int64_t seq,
                                      int64_t heads) {
  return batch >= 0 && seq >= 0 && seq <= INT32_MAX - kCudaAttentionBlock &&
         heads > 0 && heads <= 65535 && batch <= 65535 / heads;
}

/// The loss's row kernels: a block per row (int rows), and a grid column per
/// 4096 vocabulary entries (at most 65535).
inline constexpr int64_t kCudaCrossEntropyColumns = 4096;
constexpr bool cudaCrossEntropyTakes(int64_t rows, int64_t vocab) {
  return rows >= 0 && rows <= INT32_MAX && vocab > 0 &&
         (vocab + kCudaCrossEntropyColumns - 1) / kCudaCrossEntropyColumns <=
             65535;
}

/// The embedding gradient's scatter-add: tokens addressed in int.
constexpr bool cudaEmbeddingGradTakes(int64_t tokens, int64_t rows,
                                      int64_t width) {
  return tokens >= 0 && tokens <= INT32_MAX && rows >= 0 && width > 0;
}

} // namespace loom::runtime

#endif // LOOM_RUNTIME_KERNELDOMAINS_H
