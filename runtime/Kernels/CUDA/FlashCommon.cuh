//===- FlashCommon.cuh - what the f32 and bf16 attention kernels share ----===//
//
// Private to FlashAttention.cu and FlashAttentionBf16.cu: the block size, the
// mapping of a block to its query rows, and the host-side argument checks.
// Both kernel families tile the scores in kBlock x kBlock blocks, so that
// with causal masking only the diagonal blocks mix masked and unmasked
// scores.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_FLASHCOMMON_CUH
#define LOOM_RUNTIME_FLASHCOMMON_CUH

#include "loom/Runtime/KernelDomains.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace loom::flash::detail {

/// Rows of a query block and of a key block.
constexpr int kBlock = 64;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// Where a block of the forward or dQ kernel works: query block qBlock
/// (rows q0..) of batch element blockIdx.y / heads and head
/// blockIdx.y % heads, whose kv head is hk; rows qStride and kvStride
/// elements apart; its first query row and kv row at qOffset and kvOffset.
/// Blocks run last-first, so that the heaviest causal ones start first.
struct QueryTile {
  int qBlock, q0, hk;
  int64_t qStride, kvStride, qOffset, kvOffset;
};

/// The block's first statistic (lse, delta), computed where it is used (held
/// across the forward's loop it costs a spill).
__device__ __forceinline__ int64_t queryStatOffset(int seq, int heads) {
  return (int64_t(blockIdx.y / heads) * heads + blockIdx.y % heads) * seq;
}

__device__ __forceinline__ QueryTile queryTile(int seq, int heads, int kvHeads,
                                               int dim) {
  const int qBlock = gridDim.x - 1 - blockIdx.x;
  const int b = blockIdx.y / heads;
  const int h = blockIdx.y % heads;
  const int hk = h / (heads / kvHeads);
  const int q0 = qBlock * kBlock;
  return {qBlock,
          q0,
          hk,
          int64_t(heads) * dim,
          int64_t(kvHeads) * dim,
          ((int64_t(b) * seq + q0) * heads + h) * dim,
          (int64_t(b) * seq * kvHeads + hk) * dim};
}

/// How many key blocks query block `qBlock` reads: those up to its own with
/// causal masking, else all.
__device__ __forceinline__ int keyBlockCount(bool causal, int qBlock, int seq) {
  return causal ? qBlock + 1 : (seq + kBlock - 1) / kBlock;
}

/// One step of the online softmax (base 2) for a row whose new block of
/// scores peaks at `blockMax`: raises `maxSoFar` to it, sets `alpha`, the
/// factor for what the row accumulated so far, and returns the base the
/// block's exponentials subtract. A row whose scores so far are all masked
/// keeps everything at 0.
__device__ __forceinline__ float advanceMax(float &maxSoFar, float blockMax,
                                            float &alpha) {
  const float newMax = fmaxf(maxSoFar, blockMax);
  const float base = newMax == -INFINITY ? 0.f : newMax;
  alpha = exp2f(maxSoFar - base);
  maxSoFar = newMax;
  return base;
}

/// The natural log-sum-exp of a row whose base-2 max is `max` and whose
/// exponentials below it sum to `total`.
__device__ __forceinline__ float naturalLse(float max, float total) {
  return (max + log2f(total)) * kLn2;
}

/// Where row `row` ((b * seq + i) * heads + h) of the [batch, seq, heads]
/// rows of out and dout sits in the [batch, heads, seq] statistics.
__device__ __forceinline__ int64_t statIndex(int64_t row, int seq, int heads) {
  const int64_t position = row / heads; // b * seq + i
  const int64_t h = row % heads;
  return (position / seq * heads + h) * seq + position % seq;
}

inline bool aligned(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

/// The problem's sizes, as the kernels take them.
struct Sizes {
  int batch, seq, heads, kvHeads, dim;
  /// Whether there is nothing to compute.
  bool empty() const { return batch == 0 || seq == 0; }
};

/// Checks the sizes (`dimSupported`: the kernels take the head dim; the grid's
/// y dimension is at most 65535; sequence positions and block counts fit in
/// int) and narrows them into `sizes`.
inline bool checkSizes(int64_t batch, int64_t seq, int64_t heads,
                       int64_t kvHeads, int64_t dim, bool dimSupported,
                       Sizes &sizes) {
  static_assert(kBlock == loom::runtime::kCudaAttentionBlock);
  if (!loom::runtime::cudaAttentionTakesGrid(batch, seq, heads) ||
      kvHeads <= 0 || heads % kvHeads != 0 || !dimSupported)
    return false;
  sizes = {static_cast<int>(batch), static_cast<int>(seq),
           static_cast<int>(heads), static_cast<int>(kvHeads),
           static_cast<int>(dim)};
  return true;
}

/// An entry point's argument checks: cudaErrorInvalidValue for sizes the
/// kernels do not take (see checkSizes) or, when there is work, for a
/// pointer in `pointers` that is not 16-byte aligned; else cudaSuccess with
/// the sizes in `n` (n.empty(): nothing to launch).
inline cudaError_t checkArguments(int64_t batch, int64_t seq, int64_t heads,
                                  int64_t kvHeads, int64_t dim,
                                  bool dimSupported,
                                  std::initializer_list<const void *> pointers,
                                  Sizes &n) {
  if (!checkSizes(batch, seq, heads, kvHeads, dim, dimSupported, n))
    return cudaErrorInvalidValue;
  if (!n.empty())
    for (const void *pointer : pointers)
      if (!aligned(pointer))
        return cudaErrorInvalidValue;
  return cudaSuccess;
}

/// Calls `launch` with the kernels' tile width for head dim `dim` as an
/// std::integral_constant: 64 for dims up to 64, else 128 (smaller dims
/// run zero-padded).
template <typename Launch> cudaError_t withTileDim(int dim, Launch launch) {
  if (dim <= 64)
    return launch(std::integral_constant<int, 64>());
  return launch(std::integral_constant<int, 128>());
}

/// Blocks of `warpsPerBlock` warps for a grid-strided kernel with a warp per
/// row: one per `warpsPerBlock` rows, at most 2^20.
inline unsigned rowGrid(int64_t rows, int warpsPerBlock) {
  const int64_t blocks = (rows + warpsPerBlock - 1) / warpsPerBlock;
  return static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
}

/// Opts `kernel` in to `bytes` of dynamic shared memory (above 48 KiB).
template <typename Kernel>
cudaError_t allowSharedMemory(Kernel *kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

} // namespace loom::flash::detail

#endif // LOOM_RUNTIME_FLASHCOMMON_CUH
