//===- FlashAttentionBf16.cu - fused bf16 attention on tensor cores -------===//
//
// FlashAttention-2 for bf16 grouped-query attention, its products on tensor
// cores: PTX's mma.sync m16n8k16 with bf16 operands and f32 accumulators.
// The softmax, its statistics and every accumulator are f32; the
// probabilities P and the score gradients dS are rounded to bf16 as the
// operands of the products that follow (as FlashAttention-2 does), and the
// results once at the end.
//
// Every kernel runs 4 warps over 64 x 64 blocks of the scores. Warp w owns
// rows 16 w .. 16 w + 15 of its block: query rows in the forward and dQ
// kernels, key rows in the dK/dV kernel, so that each warp's softmax rows
// are its own and only the 4 lanes that share a row exchange values. With
// lane l, g = l / 4 and t = l % 4, PTX's fragments ("Matrix Fragments for
// mma.m16n8k16 with floating point type") are:
//
//   A, 16 x 16 row-major: 32-bit registers 0-3 hold the element pairs at
//     (g, 2t), (g + 8, 2t), (g, 2t + 8) and (g + 8, 2t + 8);
//   B, 16 x 8 column-major: registers 0-1 hold the pairs at (2t, g) and
//     (2t + 8, g), the pair running down the column;
//   C/D, 16 x 8 f32: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
//
// Fragments come out of shared memory through ldmatrix: one .x4 gives a
// warp the A fragment of a 16 x 16 tile, or the B fragments of two
// neighbouring 16 x 8 tiles. A row-major tile serves both ways round:
// plain ldmatrix reads it as B's transpose (K in S = Q K^T), ldmatrix.trans
// as B itself (V in O = P V, Q and dO for dK/dV, K for dQ), so no tile is
// ever stored transposed. The C fragments of two neighbouring 16 x 8 score
// tiles, rounded to bf16 pairwise, are the A fragment of the 16 x 16 tile
// they make up: P never leaves registers. Row strides are padded by 16
// bytes, so the 8 rows of 16 bytes an ldmatrix phase reads hit 32
// different banks.
//
// Tiles move from global memory with cp.async into two buffers: while the
// warps multiply one block, the next block's copies are in flight, and one
// barrier per block both publishes the copies and retires the buffer the
// next copies overwrite. Rows past the sequence and columns past the head
// dim arrive as zeros (cp.async's source size 0).
//
// The blocks and their order are those of the f32 kernels
// (FlashAttention.cu): the forward and dQ kernels take one query block of
// one head each, the dK/dV kernel one key block of one kv head, looping over
// its query heads and query blocks; each output has one writer. Only the
// blocks on the causal diagonal or at the sequence's end test the mask.
//
//===----------------------------------------------------------------------===//

#include "Bf16Pack.cuh"
#include "FlashAttention.h"
#include "FlashCommon.cuh"

#include <cmath>
#include <cstdint>

namespace loom::flash {
namespace {

using namespace detail;
using bf16 = uint16_t;

/// Four warps, each owning 16 rows of a kBlock-row block.
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
/// Row stride, in elements, of a [kBlock, D] tile in shared memory.
template <int D> constexpr int kRowLd = D + 8;
/// Elements in a [kBlock, D] tile.
template <int D> constexpr int kTile = kBlock *kRowLd<D>;
/// 16-byte chunks of a tile each thread copies.
template <int D> constexpr int kChunks = kBlock *D / 8 / kThreads;

__device__ __forceinline__ int lane() { return threadIdx.x % 32; }
__device__ __forceinline__ int warp() { return threadIdx.x / 32; }

using cuda::pack;
using cuda::widen;

/// d += a b for a 16 x 16 bf16 A and a 16 x 8 bf16 B (fragments above).
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
#ifdef __CUDA_ARCH__
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(LOOM_CUDA_EMULATION)
  emu::mmaBf16(d, a, b0, b1);
#endif
}

/// ldmatrix .x4 from shared memory, .trans if `Trans`: this lane gives
/// `row`, the address of row lane % 8 of matrix lane / 8, and register m
/// receives its part of matrix m.
template <bool Trans>
__device__ __forceinline__ void ldmatrix4(uint32_t (&r)[4], const bf16 *row) {
#ifdef __CUDA_ARCH__
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
#elif defined(LOOM_CUDA_EMULATION)
  emu::ldmatrix4(r, row, Trans);
#endif
}

/// cp.async of `Bytes` (4 or 16) from global `src` to shared `dst`, or of
/// zeros unless `valid` (`src` must still be a mapped address).
template <int Bytes>
__device__ __forceinline__ void copyAsync(void *dst, const void *src,
                                          bool valid) {
#ifdef __CUDA_ARCH__
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(address),
                 "l"(src), "r"(valid ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(address),
                 "l"(src), "n"(Bytes), "r"(valid ? Bytes : 0));
#elif defined(LOOM_CUDA_EMULATION)
  emu::copyAsync(dst, src, Bytes, valid);
#endif
}

/// Closes this thread's group of copies.
__device__ __forceinline__ void commitCopies() {
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.commit_group;");
#elif defined(LOOM_CUDA_EMULATION)
  emu::commitCopies();
#endif
}

/// Waits for this thread's committed copies; __syncthreads then publishes
/// every thread's.
__device__ __forceinline__ void waitCopies() {
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.wait_group 0;" ::: "memory");
#elif defined(LOOM_CUDA_EMULATION)
  emu::waitCopies(0);
#endif
}

/// The address this lane gives ldmatrix for the 16 x 16 block at rows
/// row0.. and columns col0.. of a row-major tile `ld` apart, its four 8 x 8
/// matrices in the order top-left, bottom-left, top-right, bottom-right.
__device__ __forceinline__ const bf16 *blockRow(const bf16 *tile, int ld,
                                                int row0, int col0) {
  const int l = lane();
  return tile + (row0 + l % 8 + 8 * (l / 8 % 2)) * ld + col0 + 8 * (l / 16);
}

/// The A fragment of rows row0.. and columns col0.. of a row-major tile.
__device__ __forceinline__ void loadA(uint32_t (&a)[4], const bf16 *tile,
                                      int ld, int row0, int col0) {
  ldmatrix4<false>(a, blockRow(tile, ld, row0, col0));
}

/// The B fragments of the two 16 x 8 tiles at columns n0.. and n0 + 8.. of
/// rows k0.. of the row-major [k, n] tile B (registers 0-1 and 2-3): the
/// same addresses as an A fragment, transposed.
__device__ __forceinline__ void loadB(uint32_t (&b)[4], const bf16 *tile,
                                      int ld, int k0, int n0) {
  ldmatrix4<true>(b, blockRow(tile, ld, k0, n0));
}

/// The B fragments of the two 16 x 8 tiles at columns n0.. and n0 + 8.. of
/// B, where B's transpose is rows n0.. and columns k0.. of the row-major
/// tile `tile` (registers 0-1 and 2-3).
__device__ __forceinline__ void loadBT(uint32_t (&b)[4], const bf16 *tile,
                                       int ld, int n0, int k0) {
  const int l = lane();
  ldmatrix4<false>(b, tile + (n0 + l % 8 + 8 * (l / 16)) * ld + k0 +
                          8 * (l / 8 % 2));
}

/// The A fragment of the 16 x 16 tile whose left and right 16 x 8 halves
/// are the f32 C fragments `left` and `right`, rounded to bf16.
__device__ __forceinline__ void packA(uint32_t (&a)[4], const float (&left)[4],
                                      const float (&right)[4]) {
  a[0] = pack(left[0], left[1]);
  a[1] = pack(left[2], left[3]);
  a[2] = pack(right[0], right[1]);
  a[3] = pack(right[2], right[3]);
}

/// acc[d] += S T for the [16, kBlock] f32 C fragments `s` (this warp's rows)
/// and the row-major [kBlock, D] tile T.
template <int D>
__device__ __forceinline__ void scoresTimes(float (&acc)[D / 8][4],
                                            const float (&s)[kBlock / 8][4],
                                            const bf16 *tile) {
#pragma unroll
  for (int kk = 0; kk < kBlock / 16; ++kk) {
    uint32_t a[4];
    packA(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      uint32_t b[4];
      loadB(b, tile, kRowLd<D>, 16 * kk, 16 * n);
      mma(acc[2 * n], a, b[0], b[1]);
      mma(acc[2 * n + 1], a, b[2], b[3]);
    }
  }
}

/// s[n] += A B^T over the D columns, for this warp's 16 rows of the
/// row-major tile `a` and the kBlock rows of the row-major tile `b`.
template <int D>
__device__ __forceinline__ void rowDots(float (&s)[kBlock / 8][4],
                                        const bf16 *a, const bf16 *b) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t frag[4];
    loadA(frag, a, kRowLd<D>, 16 * warp(), 16 * kk);
#pragma unroll
    for (int n = 0; n < kBlock / 16; ++n) {
      uint32_t bt[4];
      loadBT(bt, b, kRowLd<D>, 16 * n, 16 * kk);
      mma(s[2 * n], frag, bt[0], bt[1]);
      mma(s[2 * n + 1], frag, bt[2], bt[3]);
    }
  }
}

/// Starts copying rows [0, rows) (at most kBlock) of `dim` elements,
/// `stride` apart from `src` on, into the [kBlock, D] tile `dst`, zeros past
/// them: a warp copies whole rows (coalesced reads).
template <int D>
__device__ __forceinline__ void copyTile(bf16 *dst,
                                         const bf16 *__restrict__ src,
                                         int64_t stride, int rows, int dim) {
#pragma unroll
  for (int n = 0; n < kChunks<D>; ++n) {
    const int idx = n * kThreads + threadIdx.x;
    const int row = idx / (D / 8);
    const int col = idx % (D / 8) * 8;
    const bool valid = row < rows && col < dim;
    copyAsync<16>(dst + row * kRowLd<D> + col,
                  valid ? src + row * stride + col : src, valid);
  }
}

/// Starts copying the K and V tiles of key block `kb` (see copyTile) into
/// `kDst` and `vDst`, as one group of copies: the loop over key blocks of
/// the forward and dQ kernels.
template <int D>
__device__ __forceinline__ void
copyKeyBlock(bf16 *kDst, bf16 *vDst, const bf16 *__restrict__ k,
             const bf16 *__restrict__ v, int64_t kvOffset, int64_t kvStride,
             int kb, int seq, int dim) {
  const int64_t offset = kvOffset + kb * kBlock * kvStride;
  copyTile<D>(kDst, k + offset, kvStride, seq - kb * kBlock, dim);
  copyTile<D>(vDst, v + offset, kvStride, seq - kb * kBlock, dim);
  commitCopies();
}

/// Starts copying the `count` f32 statistics from `src` on into `dst`
/// (kBlock of them, zeros past `count`): thread `first` + i copies the i-th.
__device__ __forceinline__ void copyStats(float *dst, const float *src,
                                          int count, int first) {
  const int i = threadIdx.x - first;
  if (i >= 0 && i < kBlock)
    copyAsync<4>(dst + i, i < count ? src + i : src, i < count);
}

/// Stores acc * mul, this warp's 16 rows of a [kBlock, D] f32 result, as
/// bf16 into the rows below `rows` and the columns below `dim` of the rows
/// `stride` elements apart from `dst` on.
template <int D>
__device__ __forceinline__ void
storeRows(bf16 *__restrict__ dst, const float (&acc)[D / 8][4], int64_t stride,
          int rows, int dim, float mul) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = 16 * warp() + lane() / 4 + 8 * half;
    if (row >= rows)
      continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int col = 8 * n + 2 * (lane() % 4);
      if (col < dim)
        *reinterpret_cast<uint32_t *>(dst + row * stride + col) =
            pack(acc[n][2 * half] * mul, acc[n][2 * half + 1] * mul);
    }
  }
}

/// `x` reduced with `op` over the 4 lanes that share a fragment row.
template <typename Op>
__device__ __forceinline__ float quadReduce(float x, Op op) {
  x = op(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return op(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

/// Whether the score of query i and key j is masked.
__device__ __forceinline__ bool masked(int i, int j, int seq, bool causal) {
  return i >= seq || j >= seq || (causal && j > i);
}

/// Whether the block of query rows q0.. and key rows k0.. has a masked
/// score: it is on the causal diagonal or runs past the sequence.
__device__ __forceinline__ bool hasMask(int q0, int k0, int seq, bool causal) {
  return (causal && k0 + kBlock > q0) || q0 + kBlock > seq || k0 + kBlock > seq;
}

/// Forward: grid (query blocks, batch * heads), the last query block first.
/// Shared memory: Q, then K and V of two key blocks. Each warp keeps its Q
/// fragments in registers.
template <int D>
__global__ void __launch_bounds__(kThreads)
    forwardKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                  const bf16 *__restrict__ v, bf16 *__restrict__ out,
                  float *__restrict__ lse, int seq, int heads, int kvHeads,
                  int dim, bool causal, float scaleLog2) {
  extern __shared__ float4 sharedMem[];
  bf16 *qs = reinterpret_cast<bf16 *>(sharedMem);
  // Key block kb's K and V tiles.
  auto ks = [&](int kb) { return qs + (1 + kb % 2) * kTile<D>; };
  auto vs = [&](int kb) { return qs + (3 + kb % 2) * kTile<D>; };

  const auto [qBlock, q0, hk, qStride, kvStride, qOffset, kvOffset] =
      queryTile(seq, heads, kvHeads, dim);
  copyTile<D>(qs, q + qOffset, qStride, seq - q0, dim);
  copyKeyBlock<D>(ks(0), vs(0), k, v, kvOffset, kvStride, 0, seq, dim);
  uint32_t qf[D / 16][4];

  // This lane's rows: row0 and row0 + 8.
  const int row0 = q0 + 16 * warp() + lane() / 4;
  float acc[D / 8][4] = {};
  float maxSoFar[2] = {-INFINITY, -INFINITY};
  float partialSum[2] = {0.f, 0.f};
  const int keyBlocks = keyBlockCount(causal, qBlock, seq);
  for (int kb = 0; kb < keyBlocks; ++kb) {
    const int k0 = kb * kBlock;
    // Block kb is in; every warp is done with block kb - 1's buffers.
    waitCopies();
    __syncthreads();
    if (kb == 0)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        loadA(qf[kk], qs, kRowLd<D>, 16 * warp(), 16 * kk);
    if (kb + 1 < keyBlocks)
      copyKeyBlock<D>(ks(kb + 1), vs(kb + 1), k, v, kvOffset, kvStride, kb + 1,
                      seq, dim);

    float s[kBlock / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int n = 0; n < kBlock / 16; ++n) {
        uint32_t bt[4];
        loadBT(bt, ks(kb), kRowLd<D>, 16 * n, 16 * kk);
        mma(s[2 * n], qf[kk], bt[0], bt[1]);
        mma(s[2 * n + 1], qf[kk], bt[2], bt[3]);
      }

    const bool edge = hasMask(q0, k0, seq, causal);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = row0 + 8 * half;
      float tileMax = -INFINITY;
#pragma unroll
      for (int n = 0; n < kBlock / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = k0 + 8 * n + 2 * (lane() % 4) + e;
          float &x = s[n][2 * half + e];
          x = edge && (j >= seq || (causal && j > i)) ? -INFINITY
                                                      : x * scaleLog2;
          tileMax = fmaxf(tileMax, x);
        }
      float alpha;
      const float base = advanceMax(
          maxSoFar[half],
          quadReduce(tileMax, [](float a, float b) { return fmaxf(a, b); }),
          alpha);
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kBlock / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float &x = s[n][2 * half + e];
          x = exp2f(x - base);
          sum += x;
        }
      partialSum[half] = partialSum[half] * alpha + sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        acc[n][2 * half] *= alpha;
        acc[n][2 * half + 1] *= alpha;
      }
    }
    scoresTimes<D>(acc, s, vs(kb));
  }

  // Every row has a score at its max, so total >= 1.
  const int64_t statOffset = queryStatOffset(seq, heads);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float total =
        quadReduce(partialSum[half], [](float a, float b) { return a + b; });
    const int i = row0 + 8 * half;
    if (lane() % 4 == 0 && i < seq)
      lse[statOffset + i] = naturalLse(maxSoFar[half], total);
    const float inverse = 1.f / total;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      acc[n][2 * half] *= inverse;
      acc[n][2 * half + 1] *= inverse;
    }
  }
  storeRows<D>(out + qOffset, acc, qStride, seq - q0, dim, 1.f);
}

/// delta[b, h, i] = dot(dout[b, i, h, :], out[b, i, h, :]) in f32: one warp
/// per (b, i, h) row, grid-strided.
__global__ void __launch_bounds__(kThreads)
    deltaKernel(const bf16 *__restrict__ out, const bf16 *__restrict__ dout,
                float *__restrict__ delta, int64_t rows, int seq, int heads,
                int dim) {
  const int64_t warps = int64_t(gridDim.x) * kWarps;
  for (int64_t row = int64_t(blockIdx.x) * kWarps + warp(); row < rows;
       row += warps) {
    float sum = 0.f;
    for (int col = 8 * lane(); col < dim; col += 8 * 32) {
      const uint4 a = *reinterpret_cast<const uint4 *>(out + row * dim + col);
      const uint4 c = *reinterpret_cast<const uint4 *>(dout + row * dim + col);
      const uint32_t as[4] = {a.x, a.y, a.z, a.w};
      const uint32_t cs[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sum += widen(bf16(as[e])) * widen(bf16(cs[e])) +
               widen(bf16(as[e] >> 16)) * widen(bf16(cs[e] >> 16));
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane() == 0)
      delta[statIndex(row, seq, heads)] = sum;
  }
}

/// Blocks per SM the backward kernels are compiled for. At D = 64 shared
/// memory has room for 3, and the registers for 3 cost a few spilled bytes
/// outside the loop (1.15x faster on an H100 than 2); at D = 128 the
/// registers leave 1.
template <int D> constexpr int kBackwardBlocks = D == 64 ? 3 : 1;

/// dk and dv: grid (key blocks, batch * kvHeads). Shared memory: K and V of
/// the block's keys, then two buffers of a query block's Q, dout, lse (base
/// e) and delta, for the (query head, query block) pairs the block loops
/// over. The scores are transposed: rows are keys, columns queries.
template <int D>
__global__ void __launch_bounds__(kThreads, kBackwardBlocks<D>)
    dkdvKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
               const bf16 *__restrict__ v, const float *__restrict__ lse,
               const bf16 *__restrict__ dout, const float *__restrict__ delta,
               bf16 *__restrict__ dk, bf16 *__restrict__ dv, int seq, int heads,
               int kvHeads, int dim, bool causal, float scaleLog2,
               float scale) {
  extern __shared__ float4 sharedMem[];
  bf16 *ks = reinterpret_cast<bf16 *>(sharedMem);
  bf16 *vs = ks + kTile<D>;
  float *stats = reinterpret_cast<float *>(vs + 5 * kTile<D>);
  // Step `step`'s Q, dout, lse and delta.
  auto qs = [&](int step) { return vs + (1 + step % 2) * kTile<D>; };
  auto dos = [&](int step) { return vs + (3 + step % 2) * kTile<D>; };
  auto lses = [&](int step) { return stats + step % 2 * kBlock; };
  auto deltas = [&](int step) { return stats + (2 + step % 2) * kBlock; };

  const int kBlockIdx = blockIdx.x;
  const int b = blockIdx.y / kvHeads;
  const int hk = blockIdx.y % kvHeads;
  const int group = heads / kvHeads;
  const int k0 = kBlockIdx * kBlock;
  const int64_t qStride = int64_t(heads) * dim;
  const int64_t kvStride = int64_t(kvHeads) * dim;
  const int64_t kvOffset = ((int64_t(b) * seq + k0) * kvHeads + hk) * dim;
  // The block's (query head, query block) pairs, step by step.
  const int firstQuery = causal ? kBlockIdx : 0;
  const int perHead = (seq + kBlock - 1) / kBlock - firstQuery;
  auto copyQueryBlock = [&](int step) {
    const int h = hk * group + step / perHead;
    const int q0 = (firstQuery + step % perHead) * kBlock;
    const int64_t rowOffset = (int64_t(b) * seq + q0) * qStride + h * dim;
    const int64_t statOffset = (int64_t(b) * heads + h) * seq + q0;
    copyTile<D>(qs(step), q + rowOffset, qStride, seq - q0, dim);
    copyTile<D>(dos(step), dout + rowOffset, qStride, seq - q0, dim);
    copyStats(lses(step), lse + statOffset, seq - q0, 0);
    copyStats(deltas(step), delta + statOffset, seq - q0, kBlock);
    commitCopies();
  };
  copyTile<D>(ks, k + kvOffset, kvStride, seq - k0, dim);
  copyTile<D>(vs, v + kvOffset, kvStride, seq - k0, dim);
  copyQueryBlock(0);

  // This lane's keys: key0 and key0 + 8.
  const int key0 = k0 + 16 * warp() + lane() / 4;
  float dkAcc[D / 8][4] = {};
  float dvAcc[D / 8][4] = {};
  const int steps = group * perHead;
  for (int step = 0; step < steps; ++step) {
    const int q0 = (firstQuery + step % perHead) * kBlock;
    const bf16 *qNow = qs(step), *doNow = dos(step);
    const float *lsesNow = lses(step), *deltasNow = deltas(step);
    // This step's query block is in; every warp is done with the last one's.
    waitCopies();
    __syncthreads();
    if (step + 1 < steps)
      copyQueryBlock(step + 1);

    // P^T, then dV += P^T dO.
    float p[kBlock / 8][4] = {};
    rowDots<D>(p, ks, qNow);
    const bool edge = hasMask(q0, k0, seq, causal);
#pragma unroll
    for (int n = 0; n < kBlock / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * n + 2 * (lane() % 4) + e % 2;
        const int j = key0 + 8 * (e / 2);
        p[n][e] = edge && masked(q0 + col, j, seq, causal)
                      ? 0.f
                      : exp2f(p[n][e] * scaleLog2 - lsesNow[col] * kLog2e);
      }
    scoresTimes<D>(dvAcc, p, doNow);

    // dP^T = V dO^T, then dS^T = P^T (dP^T - delta) and dK += dS^T Q.
    float ds[kBlock / 8][4] = {};
    rowDots<D>(ds, vs, doNow);
#pragma unroll
    for (int n = 0; n < kBlock / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * n + 2 * (lane() % 4) + e % 2;
        ds[n][e] = p[n][e] * (ds[n][e] - deltasNow[col]);
      }
    scoresTimes<D>(dkAcc, ds, qNow);
  }
  storeRows<D>(dk + kvOffset, dkAcc, kvStride, seq - k0, dim, scale);
  storeRows<D>(dv + kvOffset, dvAcc, kvStride, seq - k0, dim, 1.f);
}

/// dq: grid (query blocks, batch * heads), the last query block first.
/// Shared memory: Q and dout, then K and V of two key blocks.
template <int D>
__global__ void __launch_bounds__(kThreads, kBackwardBlocks<D>)
    dqKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
             const bf16 *__restrict__ v, const float *__restrict__ lse,
             const bf16 *__restrict__ dout, const float *__restrict__ delta,
             bf16 *__restrict__ dq, int seq, int heads, int kvHeads, int dim,
             bool causal, float scaleLog2, float scale) {
  extern __shared__ float4 sharedMem[];
  bf16 *qs = reinterpret_cast<bf16 *>(sharedMem);
  bf16 *dos = qs + kTile<D>;
  // Key block kb's K and V tiles.
  auto ks = [&](int kb) { return qs + (2 + kb % 2) * kTile<D>; };
  auto vs = [&](int kb) { return qs + (4 + kb % 2) * kTile<D>; };

  const auto [qBlock, q0, hk, qStride, kvStride, qOffset, kvOffset] =
      queryTile(seq, heads, kvHeads, dim);
  copyTile<D>(qs, q + qOffset, qStride, seq - q0, dim);
  copyTile<D>(dos, dout + qOffset, qStride, seq - q0, dim);
  copyKeyBlock<D>(ks(0), vs(0), k, v, kvOffset, kvStride, 0, seq, dim);
  const int64_t statOffset = queryStatOffset(seq, heads);
  const int row0 = q0 + 16 * warp() + lane() / 4;
  float rowLse[2], rowDelta[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = row0 + 8 * half;
    rowLse[half] = i < seq ? lse[statOffset + i] * kLog2e : 0.f;
    rowDelta[half] = i < seq ? delta[statOffset + i] : 0.f;
  }

  float acc[D / 8][4] = {};
  const int keyBlocks = keyBlockCount(causal, qBlock, seq);
  for (int kb = 0; kb < keyBlocks; ++kb) {
    const int k0 = kb * kBlock;
    // Block kb is in; every warp is done with block kb - 1's buffers.
    waitCopies();
    __syncthreads();
    if (kb + 1 < keyBlocks)
      copyKeyBlock<D>(ks(kb + 1), vs(kb + 1), k, v, kvOffset, kvStride, kb + 1,
                      seq, dim);

    float s[kBlock / 8][4] = {};
    float ds[kBlock / 8][4] = {};
    rowDots<D>(s, qs, ks(kb));
    rowDots<D>(ds, dos, vs(kb));
    const bool edge = hasMask(q0, k0, seq, causal);
#pragma unroll
    for (int n = 0; n < kBlock / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e / 2;
        const int j = k0 + 8 * n + 2 * (lane() % 4) + e % 2;
        const float p = edge && masked(row0 + 8 * half, j, seq, causal)
                            ? 0.f
                            : exp2f(s[n][e] * scaleLog2 - rowLse[half]);
        ds[n][e] = p * (ds[n][e] - rowDelta[half]);
      }
    scoresTimes<D>(acc, ds, ks(kb));
  }
  storeRows<D>(dq + qOffset, acc, qStride, seq - q0, dim, scale);
}

template <int D>
cudaError_t launchForward(cudaStream_t stream, const bf16 *q, const bf16 *k,
                          const bf16 *v, bf16 *out, float *lse, const Sizes &n,
                          bool causal, float scale) {
  const size_t bytes = 5 * kTile<D> * sizeof(bf16);
  if (cudaError_t error = allowSharedMemory(forwardKernel<D>, bytes))
    return error;
  const dim3 grid((n.seq + kBlock - 1) / kBlock, n.batch * n.heads);
  forwardKernel<D><<<grid, kThreads, bytes, stream>>>(q, k, v, out, lse, n.seq,
                                                      n.heads, n.kvHeads, n.dim,
                                                      causal, scale * kLog2e);
  return cudaGetLastError();
}

template <int D>
cudaError_t launchBackward(cudaStream_t stream, const bf16 *q, const bf16 *k,
                           const bf16 *v, const float *lse, const bf16 *dout,
                           const float *delta, bf16 *dq, bf16 *dk, bf16 *dv,
                           const Sizes &n, bool causal, float scale) {
  const int blocks = (n.seq + kBlock - 1) / kBlock;
  const size_t dkdvBytes =
      6 * kTile<D> * sizeof(bf16) + 4 * kBlock * sizeof(float);
  if (cudaError_t error = allowSharedMemory(dkdvKernel<D>, dkdvBytes))
    return error;
  dkdvKernel<D>
      <<<dim3(blocks, n.batch * n.kvHeads), kThreads, dkdvBytes, stream>>>(
          q, k, v, lse, dout, delta, dk, dv, n.seq, n.heads, n.kvHeads, n.dim,
          causal, scale * kLog2e, scale);
  if (cudaError_t error = cudaGetLastError())
    return error;

  const size_t dqBytes = 6 * kTile<D> * sizeof(bf16);
  if (cudaError_t error = allowSharedMemory(dqKernel<D>, dqBytes))
    return error;
  dqKernel<D><<<dim3(blocks, n.batch * n.heads), kThreads, dqBytes, stream>>>(
      q, k, v, lse, dout, delta, dq, n.seq, n.heads, n.kvHeads, n.dim, causal,
      scale * kLog2e, scale);
  return cudaGetLastError();
}

} // namespace

bool supportsBf16(int64_t dim) {
  return loom::runtime::cudaAttentionTakesHeadDim(dim, /*bf16=*/true);
}

cudaError_t forwardBf16(cudaStream_t stream, const uint16_t *q,
                        const uint16_t *k, const uint16_t *v, uint16_t *out,
                        float *lse, int64_t batch, int64_t seq, int64_t heads,
                        int64_t kvHeads, int64_t dim, bool causal,
                        float scale) {
  Sizes n;
  if (cudaError_t error = checkArguments(batch, seq, heads, kvHeads, dim,
                                         supportsBf16(dim), {q, k, v, out}, n);
      error != cudaSuccess || n.empty())
    return error;
  return withTileDim(n.dim, [&](auto tile) {
    return launchForward<decltype(tile)::value>(stream, q, k, v, out, lse, n,
                                                causal, scale);
  });
}

cudaError_t backwardBf16(cudaStream_t stream, const uint16_t *q,
                         const uint16_t *k, const uint16_t *v,
                         const uint16_t *out, const float *lse,
                         const uint16_t *dout, uint16_t *dq, uint16_t *dk,
                         uint16_t *dv, float *delta, int64_t batch, int64_t seq,
                         int64_t heads, int64_t kvHeads, int64_t dim,
                         bool causal, float scale) {
  Sizes n;
  if (cudaError_t error =
          checkArguments(batch, seq, heads, kvHeads, dim, supportsBf16(dim),
                         {q, k, v, out, dout, dq, dk, dv}, n);
      error != cudaSuccess || n.empty())
    return error;

  const int64_t rows = batch * seq * heads;
  deltaKernel<<<rowGrid(rows, kWarps), kThreads, 0, stream>>>(
      out, dout, delta, rows, n.seq, n.heads, n.dim);
  if (cudaError_t error = cudaGetLastError())
    return error;
  return withTileDim(n.dim, [&](auto tile) {
    return launchBackward<decltype(tile)::value>(
        stream, q, k, v, lse, dout, delta, dq, dk, dv, n, causal, scale);
  });
}

} // namespace loom::flash
