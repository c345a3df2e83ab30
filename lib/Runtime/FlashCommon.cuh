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

#include <cuda_runtime.h>

#include <cstdint>

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

inline bool aligned(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

/// The problem's sizes, as the kernels take them.
struct Sizes {
  int batch, seq, heads, kvHeads, dim;
};

/// Checks the sizes (`dimSupported`: the kernels take the head dim; the grid's
/// y dimension is at most 65535; sequence positions and block counts fit in
/// int) and narrows them into `sizes`.
inline bool checkSizes(int64_t batch, int64_t seq, int64_t heads,
                       int64_t kvHeads, int64_t dim, bool dimSupported,
                       Sizes &sizes) {
  if (batch < 0 || seq < 0 || seq > INT32_MAX - kBlock || heads <= 0 ||
      kvHeads <= 0 || heads % kvHeads != 0 || !dimSupported || heads > 65535 ||
      batch > 65535 / heads)
    return false;
  sizes = {static_cast<int>(batch), static_cast<int>(seq),
           static_cast<int>(heads), static_cast<int>(kvHeads),
           static_cast<int>(dim)};
  return true;
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
