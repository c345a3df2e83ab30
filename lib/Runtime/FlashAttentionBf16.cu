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
// So an A fragment is four words of a row-major tile, a B fragment two words
// of a row of B's transpose, and the C fragments of two neighbouring 16 x 8
// score tiles, rounded to bf16 pairwise, are the A fragment of the 16 x 16
// tile they make up: P never leaves registers. Tiles whose transpose is a
// B operand (V in the forward, Q and dO for dK/dV, K for dQ) are also
// stored transposed in shared memory as they are loaded. Row strides are
// padded to 4 words mod 32 banks, so the 8 rows x 4 words a fragment reads
// hit 32 different banks.
//
// The blocks and their order are those of the f32 kernels
// (FlashAttention.cu): the forward and dQ kernels take one query block of
// one head each, the dK/dV kernel one key block of one kv head, looping over
// its query heads and query blocks; each output has one writer.
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
/// Row stride of a transposed tile ([D, kBlock]).
constexpr int kColLd = kBlock + 8;
/// Elements in a [kBlock, D] tile and in its transpose.
template <int D> constexpr int kRowTile = kBlock *kRowLd<D>;
template <int D> constexpr int kColTile = D *kColLd;
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
#endif
}

__device__ __forceinline__ uint32_t word(const bf16 *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}

/// The A fragment of rows row0.. and columns col0.. of a tile `ld` apart.
__device__ __forceinline__ void loadA(uint32_t (&a)[4], const bf16 *tile,
                                      int ld, int row0, int col0) {
  const bf16 *p = tile + (row0 + lane() / 4) * ld + col0 + 2 * (lane() % 4);
  a[0] = word(p);
  a[1] = word(p + 8 * ld);
  a[2] = word(p + 8);
  a[3] = word(p + 8 * ld + 8);
}

/// d += A B where B's transpose is rows n0.. and columns k0.. of `tile`.
__device__ __forceinline__ void mmaB(float (&d)[4], const uint32_t (&a)[4],
                                     const bf16 *tile, int ld, int n0, int k0) {
  const bf16 *p = tile + (n0 + lane() / 4) * ld + k0 + 2 * (lane() % 4);
  mma(d, a, word(p), word(p + 8));
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
/// and the [kBlock, D] tile T whose transpose is `tileT`.
template <int D>
__device__ __forceinline__ void scoresTimes(float (&acc)[D / 8][4],
                                            const float (&s)[kBlock / 8][4],
                                            const bf16 *tileT) {
#pragma unroll
  for (int kk = 0; kk < kBlock / 16; ++kk) {
    uint32_t a[4];
    packA(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      mmaB(acc[n], a, tileT, kColLd, 8 * n, 16 * kk);
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
    for (int n = 0; n < kBlock / 8; ++n)
      mmaB(s[n], frag, b, kRowLd<D>, 8 * n, 16 * kk);
  }
}

/// Copies rows [0, rows) (at most kBlock) of `dim` elements, `stride` apart
/// from `src` on, into the [kBlock, D] tile `dst` (zeros past them) and its
/// transpose into `dstT`, each unless null. Without a transpose a warp
/// copies whole rows (coalesced global reads, conflict-free 16-byte stores);
/// with one, thread t copies row t % kBlock, so that the transposed 16-bit
/// stores of a warp fill 16 consecutive words. (The calls pass a literal
/// null, so the choice folds away.)
template <int D>
__device__ __forceinline__ void loadTile(bf16 *dst, bf16 *dstT,
                                         const bf16 *__restrict__ src,
                                         int64_t stride, int rows, int dim) {
  auto position = [&](int n, int &row, int &col) {
    const int idx = n * kThreads + threadIdx.x;
    row = dstT ? idx % kBlock : idx / (D / 8);
    col = (dstT ? idx / kBlock : idx % (D / 8)) * 8;
  };
  uint4 chunks[kChunks<D>];
#pragma unroll
  for (int n = 0; n < kChunks<D>; ++n) {
    int row, col;
    position(n, row, col);
    chunks[n] = make_uint4(0, 0, 0, 0);
    if (row < rows && col < dim)
      chunks[n] = *reinterpret_cast<const uint4 *>(src + row * stride + col);
  }
#pragma unroll
  for (int n = 0; n < kChunks<D>; ++n) {
    int row, col;
    position(n, row, col);
    if (dst)
      *reinterpret_cast<uint4 *>(dst + row * kRowLd<D> + col) = chunks[n];
    if (dstT) {
      const uint32_t words[4] = {chunks[n].x, chunks[n].y, chunks[n].z,
                                 chunks[n].w};
#pragma unroll
      for (int e = 0; e < 8; ++e)
        dstT[(col + e) * kColLd + row] = bf16(words[e / 2] >> (16 * (e % 2)));
    }
  }
}

/// Loads the K and V tiles of the key block starting at row `k0` (see
/// loadTile: each, or its transpose, unless null), once every thread is
/// done with the previous ones (the forward's and dQ's loop over key
/// blocks).
template <int D>
__device__ __forceinline__ void
loadKeyBlock(bf16 *ks, bf16 *kt, bf16 *vs, bf16 *vt, const bf16 *__restrict__ k,
             const bf16 *__restrict__ v, int64_t kvOffset, int64_t kvStride,
             int k0, int seq, int dim) {
  __syncthreads();
  const int64_t offset = kvOffset + k0 * kvStride;
  loadTile<D>(ks, kt, k + offset, kvStride, seq - k0, dim);
  loadTile<D>(vs, vt, v + offset, kvStride, seq - k0, dim);
  __syncthreads();
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

/// Forward: grid (query blocks, batch * heads), the last query block first.
/// Shared memory: Q, K, and V transposed. Each warp keeps its Q fragments in
/// registers.
template <int D>
__global__ void __launch_bounds__(kThreads)
    forwardKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                  const bf16 *__restrict__ v, bf16 *__restrict__ out,
                  float *__restrict__ lse, int seq, int heads, int kvHeads,
                  int dim, bool causal, float scaleLog2) {
  extern __shared__ float4 sharedMem[];
  bf16 *qs = reinterpret_cast<bf16 *>(sharedMem);
  bf16 *ks = qs + kRowTile<D>;
  bf16 *vt = ks + kRowTile<D>;

  const auto [qBlock, q0, hk, qStride, kvStride, qOffset, kvOffset] =
      queryTile(seq, heads, kvHeads, dim);
  loadTile<D>(qs, nullptr, q + qOffset, qStride, seq - q0, dim);
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    loadA(qf[kk], qs, kRowLd<D>, 16 * warp(), 16 * kk);

  // This lane's rows: row0 and row0 + 8.
  const int row0 = q0 + 16 * warp() + lane() / 4;
  float acc[D / 8][4] = {};
  float maxSoFar[2] = {-INFINITY, -INFINITY};
  float partialSum[2] = {0.f, 0.f};
  const int keyBlocks = keyBlockCount(causal, qBlock, seq);
  for (int kb = 0; kb < keyBlocks; ++kb) {
    const int k0 = kb * kBlock;
    // After the previous P V product, which read vt.
    loadKeyBlock<D>(ks, nullptr, nullptr, vt, k, v, kvOffset, kvStride, k0, seq,
                    dim);

    float s[kBlock / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int n = 0; n < kBlock / 8; ++n)
        mmaB(s[n], qf[kk], ks, kRowLd<D>, 8 * n, 16 * kk);

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
          x = j >= seq || (causal && j > i) ? -INFINITY : x * scaleLog2;
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
    scoresTimes<D>(acc, s, vt);
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

/// dk and dv: grid (key blocks, batch * kvHeads). Shared memory: K and V of
/// the block's keys, then per query block Q and dout (each also
/// transposed), and the queries' lse (base 2) and delta. The scores are
/// transposed: rows are keys, columns queries.
template <int D>
__global__ void __launch_bounds__(kThreads)
    dkdvKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
               const bf16 *__restrict__ v, const float *__restrict__ lse,
               const bf16 *__restrict__ dout, const float *__restrict__ delta,
               bf16 *__restrict__ dk, bf16 *__restrict__ dv, int seq, int heads,
               int kvHeads, int dim, bool causal, float scaleLog2,
               float scale) {
  extern __shared__ float4 sharedMem[];
  bf16 *ks = reinterpret_cast<bf16 *>(sharedMem);
  bf16 *vs = ks + kRowTile<D>;
  bf16 *qs = vs + kRowTile<D>;
  bf16 *dos = qs + kRowTile<D>;
  bf16 *qt = dos + kRowTile<D>;
  bf16 *dot = qt + kColTile<D>;
  float *lses = reinterpret_cast<float *>(dot + kColTile<D>);
  float *deltas = lses + kBlock;

  const int kBlockIdx = blockIdx.x;
  const int b = blockIdx.y / kvHeads;
  const int hk = blockIdx.y % kvHeads;
  const int group = heads / kvHeads;
  const int k0 = kBlockIdx * kBlock;
  const int64_t qStride = int64_t(heads) * dim;
  const int64_t kvStride = int64_t(kvHeads) * dim;
  const int64_t kvOffset = ((int64_t(b) * seq + k0) * kvHeads + hk) * dim;
  loadTile<D>(ks, nullptr, k + kvOffset, kvStride, seq - k0, dim);
  loadTile<D>(vs, nullptr, v + kvOffset, kvStride, seq - k0, dim);

  // This lane's keys: key0 and key0 + 8.
  const int key0 = k0 + 16 * warp() + lane() / 4;
  float dkAcc[D / 8][4] = {};
  float dvAcc[D / 8][4] = {};
  const int queryBlocks = (seq + kBlock - 1) / kBlock;
  for (int g = 0; g < group; ++g) {
    const int h = hk * group + g;
    const int64_t headOffset = (int64_t(b) * seq * heads + h) * dim;
    const int64_t statOffset = (int64_t(b) * heads + h) * seq;
    for (int qb = causal ? kBlockIdx : 0; qb < queryBlocks; ++qb) {
      const int q0 = qb * kBlock;
      // The previous products are done with the query tiles.
      __syncthreads();
      loadTile<D>(qs, qt, q + headOffset + q0 * qStride, qStride, seq - q0,
                  dim);
      loadTile<D>(dos, dot, dout + headOffset + q0 * qStride, qStride, seq - q0,
                  dim);
      if (threadIdx.x < kBlock) {
        const int i = q0 + threadIdx.x;
        lses[threadIdx.x] = i < seq ? lse[statOffset + i] * kLog2e : 0.f;
        deltas[threadIdx.x] = i < seq ? delta[statOffset + i] : 0.f;
      }
      __syncthreads();

      // P^T, then dV += P^T dO.
      float p[kBlock / 8][4] = {};
      rowDots<D>(p, ks, qs);
#pragma unroll
      for (int n = 0; n < kBlock / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = 8 * n + 2 * (lane() % 4) + e % 2;
          const int j = key0 + 8 * (e / 2);
          p[n][e] = masked(q0 + col, j, seq, causal)
                        ? 0.f
                        : exp2f(p[n][e] * scaleLog2 - lses[col]);
        }
      scoresTimes<D>(dvAcc, p, dot);

      // dP^T = V dO^T, then dS^T = P^T (dP^T - delta) and dK += dS^T Q.
      float ds[kBlock / 8][4] = {};
      rowDots<D>(ds, vs, dos);
#pragma unroll
      for (int n = 0; n < kBlock / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = 8 * n + 2 * (lane() % 4) + e % 2;
          ds[n][e] = p[n][e] * (ds[n][e] - deltas[col]);
        }
      scoresTimes<D>(dkAcc, ds, qt);
    }
  }
  storeRows<D>(dk + kvOffset, dkAcc, kvStride, seq - k0, dim, scale);
  storeRows<D>(dv + kvOffset, dvAcc, kvStride, seq - k0, dim, 1.f);
}

/// dq: grid (query blocks, batch * heads), the last query block first.
/// Shared memory: Q and dout, then per key block K (also transposed) and V.
template <int D>
__global__ void __launch_bounds__(kThreads)
    dqKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
             const bf16 *__restrict__ v, const float *__restrict__ lse,
             const bf16 *__restrict__ dout, const float *__restrict__ delta,
             bf16 *__restrict__ dq, int seq, int heads, int kvHeads, int dim,
             bool causal, float scaleLog2, float scale) {
  extern __shared__ float4 sharedMem[];
  bf16 *qs = reinterpret_cast<bf16 *>(sharedMem);
  bf16 *dos = qs + kRowTile<D>;
  bf16 *ks = dos + kRowTile<D>;
  bf16 *vs = ks + kRowTile<D>;
  bf16 *kt = vs + kRowTile<D>;

  const auto [qBlock, q0, hk, qStride, kvStride, qOffset, kvOffset] =
      queryTile(seq, heads, kvHeads, dim);
  loadTile<D>(qs, nullptr, q + qOffset, qStride, seq - q0, dim);
  loadTile<D>(dos, nullptr, dout + qOffset, qStride, seq - q0, dim);
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
    // After the previous dS K product, which read kt.
    loadKeyBlock<D>(ks, kt, vs, nullptr, k, v, kvOffset, kvStride, k0, seq,
                    dim);

    float s[kBlock / 8][4] = {};
    float ds[kBlock / 8][4] = {};
    rowDots<D>(s, qs, ks);
    rowDots<D>(ds, dos, vs);
#pragma unroll
    for (int n = 0; n < kBlock / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e / 2;
        const int j = k0 + 8 * n + 2 * (lane() % 4) + e % 2;
        const float p = masked(row0 + 8 * half, j, seq, causal)
                            ? 0.f
                            : exp2f(s[n][e] * scaleLog2 - rowLse[half]);
        ds[n][e] = p * (ds[n][e] - rowDelta[half]);
      }
    scoresTimes<D>(acc, ds, kt);
  }
  storeRows<D>(dq + qOffset, acc, qStride, seq - q0, dim, scale);
}

template <int D>
cudaError_t launchForward(cudaStream_t stream, const bf16 *q, const bf16 *k,
                          const bf16 *v, bf16 *out, float *lse, const Sizes &n,
                          bool causal, float scale) {
  const size_t bytes = (2 * kRowTile<D> + kColTile<D>)*sizeof(bf16);
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
  const size_t dkdvBytes = (4 * kRowTile<D> + 2 * kColTile<D>)*sizeof(bf16) +
                           2 * kBlock * sizeof(float);
  if (cudaError_t error = allowSharedMemory(dkdvKernel<D>, dkdvBytes))
    return error;
  dkdvKernel<D>
      <<<dim3(blocks, n.batch * n.kvHeads), kThreads, dkdvBytes, stream>>>(
          q, k, v, lse, dout, delta, dk, dv, n.seq, n.heads, n.kvHeads, n.dim,
          causal, scale * kLog2e, scale);
  if (cudaError_t error = cudaGetLastError())
    return error;

  const size_t dqBytes = (4 * kRowTile<D> + kColTile<D>)*sizeof(bf16);
  if (cudaError_t error = allowSharedMemory(dqKernel<D>, dqBytes))
    return error;
  dqKernel<D><<<dim3(blocks, n.batch * n.heads), kThreads, dqBytes, stream>>>(
      q, k, v, lse, dout, delta, dq, n.seq, n.heads, n.kvHeads, n.dim, causal,
      scale * kLog2e, scale);
  return cudaGetLastError();
}

} // namespace

bool supportsBf16(int64_t dim) { return dim > 0 && dim <= 128 && dim % 8 == 0; }

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
