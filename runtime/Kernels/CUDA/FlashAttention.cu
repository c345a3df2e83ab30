//===- FlashAttention.cu - fused f32 attention kernels for CUDA -----------===//
//
// FlashAttention-2 in f32 (no tensor cores), for grouped-query attention.
//
// Every kernel runs 256 threads over 64 x 64 tiles of the scores: thread
// (ty, tx) = (tid / 16, tid % 16) owns the 4 x 4 scores in rows ty + 16 r and
// columns tx + 16 c (r, c < 4), and, of a [64, D] accumulator, rows ty + 16 r
// and columns 64 h + 4 tx + e (h < D / 64, e < 4). The 16 threads of a row sit
// in one half warp, so row reductions are four shuffles. [64, D] tiles live in
// shared memory with rows D + 4 floats apart: the float4s that a quarter warp
// reads from 8 consecutive rows then cover the 32 banks once, and the reads
// of one row (the same for the quarter warp) are broadcasts.
//
// The kernels are templated on D = 64 or 128; a smaller dim (a multiple of 4)
// runs in the next one with the columns from dim to D zero-filled. Scores are
// kept in base 2: the operand that only enters the scores is scaled by
// scale * log2(e) as it is loaded, so exponentials are exp2f.
//
//   forward: one block per (query block, batch, head); K and V tiles stream
//     through shared memory with an online softmax (running max and sum); the
//     probabilities overwrite the K tile for the P V product. With causal
//     masking, key blocks past the diagonal are skipped.
//   backward: delta = rowsum(dout * out) (one warp per row); dk and dv with
//     one block per (key block, batch, kv head) holding K, V and both
//     accumulators, looping over the group's query heads and query blocks;
//     dq with one block per (query block, batch, head) looping over key
//     blocks. Each output has one writer, so the results are deterministic.
//
// Query and key blocks are both 64 rows, so with causal masking the blocks
// that mix masked and unmasked scores are the diagonal ones, and query block
// qb needs key blocks 0..qb. Out-of-range rows are zero-filled when loaded;
// out-of-range keys are masked and out-of-range query rows are not stored.
//
//===----------------------------------------------------------------------===//

#include "FlashAttention.h"
#include "FlashCommon.cuh"

#include <cmath>
#include <cstdint>

namespace loom::flash {
namespace {

using namespace detail;

/// Threads per block: 16 x 16, each owning 4 x 4 scores.
constexpr int kThreads = 256;
/// Row stride, in floats, of a kBlock x kBlock score tile in shared memory.
constexpr int kScoreLd = kBlock + 4;
constexpr int kWarps = kThreads / 32;

/// Row stride, in floats, of a [kBlock, D] tile in shared memory.
template <int D> constexpr int kTileLd = D + 4;
/// Floats in a [kBlock, D] tile in shared memory.
template <int D> constexpr int kTileFloats = (kBlock * kTileLd<D>);

/// Component `e` of `v`; `e` is a constant once loops are unrolled.
__device__ __forceinline__ float component(const float4 &v, int e) {
  return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}

/// The max of `x` over the 16 threads of a score row (a half warp).
__device__ __forceinline__ float rowMax(float x) {
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

/// The sum of `x` over the 16 threads of a score row (a half warp).
__device__ __forceinline__ float rowSum(float x) {
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2)
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

/// The float4s of a [kBlock, D] tile that each thread loads.
template <int D> constexpr int kLoadVecs = (kBlock * D) / (4 * kThreads);

/// Reads this thread's part of a [kBlock, D] tile: `rows` rows (at most
/// kBlock taken) of `dim` floats, `stride` floats apart from `src` on, times
/// `mul`, and zeros past them.
template <int D>
__device__ __forceinline__ void
fetchTile(float4 (&vals)[kLoadVecs<D>], const float *__restrict__ src,
          int64_t stride, int rows, int dim, float mul) {
  static_assert(kBlock * D % (4 * kThreads) == 0, "uneven tile loads");
#pragma unroll
  for (int n = 0; n < kLoadVecs<D>; ++n) {
    const int idx = n * kThreads + threadIdx.x;
    const int row = idx / (D / 4);
    const int col = idx % (D / 4) * 4;
    vals[n] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < rows && col < dim) {
      const float4 val =
          __ldg(reinterpret_cast<const float4 *>(src + row * stride + col));
      vals[n] = make_float4(val.x * mul, val.y * mul, val.z * mul, val.w * mul);
    }
  }
}

/// Stores what fetchTile read into the [kBlock, D] tile `dst`.
template <int D>
__device__ __forceinline__ void putTile(float *dst,
                                        const float4 (&vals)[kLoadVecs<D>]) {
#pragma unroll
  for (int n = 0; n < kLoadVecs<D>; ++n) {
    const int idx = n * kThreads + threadIdx.x;
    const int row = idx / (D / 4);
    const int col = idx % (D / 4) * 4;
    *reinterpret_cast<float4 *>(dst + row * kTileLd<D> + col) = vals[n];
  }
}

/// Loads a tile (see fetchTile) into `dst`.
template <int D>
__device__ __forceinline__ void
loadTile(float *dst, const float *__restrict__ src, int64_t stride, int rows,
         int dim, float mul) {
  float4 vals[kLoadVecs<D>];
  fetchTile<D>(vals, src, stride, rows, dim, mul);
  putTile<D>(dst, vals);
}

/// Loads two tiles with the same rows (see fetchTile), with all the global
/// reads in flight together.
template <int D>
__device__ __forceinline__ void
loadTiles(float *dstA, const float *__restrict__ srcA, float mulA, float *dstB,
          const float *__restrict__ srcB, float mulB, int64_t stride, int rows,
          int dim) {
  float4 valsA[kLoadVecs<D>], valsB[kLoadVecs<D>];
  fetchTile<D>(valsA, srcA, stride, rows, dim, mulA);
  fetchTile<D>(valsB, srcB, stride, rows, dim, mulB);
  putTile<D>(dstA, valsA);
  putTile<D>(dstB, valsB);
}

/// acc[r][c] += dot(a[ty + 16 r, :], b[tx + 16 c, :]) for [kBlock, D] tiles.
/// `Unroll` trades registers (the loads of later steps hoisted) for latency.
template <int D, int Unroll>
__device__ __forceinline__ void tileDots(float (&acc)[4][4], const float *a,
                                         const float *b) {
  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
#pragma unroll Unroll
  for (int d = 0; d < D; d += 4) {
    float4 av[4], bv[4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
      av[r] =
          *reinterpret_cast<const float4 *>(a + (ty + 16 * r) * kTileLd<D> + d);
#pragma unroll
    for (int c = 0; c < 4; ++c)
      bv[c] =
          *reinterpret_cast<const float4 *>(b + (tx + 16 * c) * kTileLd<D> + d);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        float sum = acc[r][c];
        sum = fmaf(av[r].x, bv[c].x, sum);
        sum = fmaf(av[r].y, bv[c].y, sum);
        sum = fmaf(av[r].z, bv[c].z, sum);
        sum = fmaf(av[r].w, bv[c].w, sum);
        acc[r][c] = sum;
      }
    }
  }
}

/// acc[r][4 h + e] += sum_j s[ty + 16 r, j] * t[j, 64 h + 4 tx + e] for the
/// kBlock x kBlock score tile `s` and the [kBlock, D] tile `t`.
template <int D>
__device__ __forceinline__ void
scoresTimesTile(float (&acc)[4][D / 16], const float *s, const float *t) {
  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
#pragma unroll 4
  for (int j = 0; j < kBlock; j += 4) {
    float4 sv[4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
      sv[r] =
          *reinterpret_cast<const float4 *>(s + (ty + 16 * r) * kScoreLd + j);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
      for (int h = 0; h < D / 64; ++h) {
        const float4 tv = *reinterpret_cast<const float4 *>(
            t + (j + jj) * kTileLd<D> + 64 * h + 4 * tx);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float sr = component(sv[r], jj);
          acc[r][4 * h + 0] = fmaf(sr, tv.x, acc[r][4 * h + 0]);
          acc[r][4 * h + 1] = fmaf(sr, tv.y, acc[r][4 * h + 1]);
          acc[r][4 * h + 2] = fmaf(sr, tv.z, acc[r][4 * h + 2]);
          acc[r][4 * h + 3] = fmaf(sr, tv.w, acc[r][4 * h + 3]);
        }
      }
    }
  }
}

/// Stores acc * mul (rows ty + 16 r, columns 64 h + 4 tx + e of a [kBlock, D]
/// tile) to the rows, `stride` floats apart from `dst` on, that are below
/// `rows`, and to the columns below `dim`.
template <int D>
__device__ __forceinline__ void
storeTile(float *__restrict__ dst, const float (&acc)[4][D / 16],
          int64_t stride, int rows, int dim, float mul) {
  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = ty + 16 * r;
    if (row >= rows)
      continue;
#pragma unroll
    for (int h = 0; h < D / 64; ++h) {
      const int col = 64 * h + 4 * tx;
      if (col < dim)
        *reinterpret_cast<float4 *>(dst + row * stride + col) =
            make_float4(acc[r][4 * h + 0] * mul, acc[r][4 * h + 1] * mul,
                        acc[r][4 * h + 2] * mul, acc[r][4 * h + 3] * mul);
    }
  }
}

/// Loads the K and V tiles of the key block starting at row `k0`, once
/// every thread is done with the previous ones (the forward's and dQ's
/// loop over key blocks).
template <int D>
__device__ __forceinline__ void
loadKeyBlock(float *ks, float *vs, const float *__restrict__ k,
             const float *__restrict__ v, int64_t kvOffset, int64_t kvStride,
             int k0, int seq, int dim) {
  __syncthreads();
  loadTiles<D>(ks, k + kvOffset + k0 * kvStride, 1.f, vs,
               v + kvOffset + k0 * kvStride, 1.f, kvStride, seq - k0, dim);
  __syncthreads();
}

/// acc += s t, where each thread holds its 4 x 4 scores of the tile in `s`
/// (rows ty + 16 r, columns tx + 16 c): they are written to `tile` once
/// every thread is done reading the buffer it reuses, then multiplied.
template <int D>
__device__ __forceinline__ void
stagedScoresTimesTile(float (&acc)[4][D / 16], const float (&s)[4][4],
                      float *tile, const float *t) {
  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      tile[(ty + 16 * r) * kScoreLd + tx + 16 * c] = s[r][c];
  __syncthreads();
  scoresTimesTile<D>(acc, tile, t);
}

/// Forward: grid (query blocks, batch * heads), the last query block first
/// (the most work with causal masking). Shared memory: Q (times
/// scale * log2(e)), K, then V tiles; the probabilities overwrite K.
template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    forwardKernel(const float *__restrict__ q, const float *__restrict__ k,
                  const float *__restrict__ v, float *__restrict__ out,
                  float *__restrict__ lse, int seq, int heads, int kvHeads,
                  int dim, bool causal, float scaleLog2) {
  extern __shared__ float4 sharedMem[];
  float *qs = reinterpret_cast<float *>(sharedMem);
  float *ks = qs + kTileFloats<D>;
  float *vs = ks + kTileFloats<D>;
  float *ps = ks;

  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
  const auto [qBlock, q0, hk, qStride, kvStride, qOffset, kvOffset] =
      queryTile(seq, heads, kvHeads, dim);

  loadTile<D>(qs, q + qOffset, qStride, seq - q0, dim, scaleLog2);

  float acc[4][D / 16] = {};
  float maxSoFar[4], partialSum[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    maxSoFar[r] = -INFINITY;
    partialSum[r] = 0.f;
  }

  const int keyBlocks = keyBlockCount(causal, qBlock, seq);
  for (int kb = 0; kb < keyBlocks; ++kb) {
    const int k0 = kb * kBlock;
    // After the previous P V product, which read ps (= ks) and vs.
    loadKeyBlock<D>(ks, vs, k, v, kvOffset, kvStride, k0, seq, dim);

    float s[4][4] = {};
    tileDots<D, 8>(s, qs, ks);

#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = q0 + ty + 16 * r;
      float tileMax = -INFINITY;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int j = k0 + tx + 16 * c;
        if (j >= seq || (causal && j > i))
          s[r][c] = -INFINITY;
        tileMax = fmaxf(tileMax, s[r][c]);
      }
      float alpha;
      const float base = advanceMax(maxSoFar[r], rowMax(tileMax), alpha);
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[r][c] = exp2f(s[r][c] - base);
        sum += s[r][c];
      }
      partialSum[r] = partialSum[r] * alpha + sum;
#pragma unroll
      for (int e = 0; e < D / 16; ++e)
        acc[r][e] *= alpha;
    }

    // The probabilities replace ks.
    stagedScoresTimesTile<D>(acc, s, ps, vs);
  }

  // Every row has a score at its max, so total >= 1.
  const int64_t statOffset = queryStatOffset(seq, heads);
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float total = rowSum(partialSum[r]);
    const int i = q0 + ty + 16 * r;
    if (tx == 0 && i < seq)
      lse[statOffset + i] = naturalLse(maxSoFar[r], total);
    const float inverse = 1.f / total;
#pragma unroll
    for (int e = 0; e < D / 16; ++e)
      acc[r][e] *= inverse;
  }
  storeTile<D>(out + qOffset, acc, qStride, seq - q0, dim, 1.f);
}

/// delta[b, h, i] = dot(dout[b, i, h, :], out[b, i, h, :]): one warp per
/// (b, i, h) row, grid-strided.
__global__ void __launch_bounds__(kThreads)
    deltaKernel(const float *__restrict__ out, const float *__restrict__ dout,
                float *__restrict__ delta, int64_t rows, int seq, int heads,
                int dim) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarps;
  for (int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
       row < rows; row += warps) {
    const float *o = out + row * dim;
    const float *g = dout + row * dim;
    float sum = 0.f;
    for (int col = 4 * lane; col < dim; col += 128) {
      const float4 a = __ldg(reinterpret_cast<const float4 *>(o + col));
      const float4 c = __ldg(reinterpret_cast<const float4 *>(g + col));
      sum += a.x * c.x + a.y * c.y + a.z * c.z + a.w * c.w;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0)
      delta[statIndex(row, seq, heads)] = sum;
  }
}

/// dk and dv: grid (key blocks, batch * kvHeads). Shared memory: K (times
/// scale * log2(e)) and V of the block's keys, then per query block Q, dout,
/// P^T, dS^T, lse (base 2) and delta.
template <int D>
__global__ void __launch_bounds__(kThreads, D == 64 ? 2 : 1)
    dkdvKernel(const float *__restrict__ q, const float *__restrict__ k,
               const float *__restrict__ v, const float *__restrict__ lse,
               const float *__restrict__ dout, const float *__restrict__ delta,
               float *__restrict__ dk, float *__restrict__ dv, int seq,
               int heads, int kvHeads, int dim, bool causal, float scaleLog2,
               float scale) {
  extern __shared__ float4 sharedMem[];
  float *ks = reinterpret_cast<float *>(sharedMem);
  float *vs = ks + kTileFloats<D>;
  float *qs = vs + kTileFloats<D>;
  float *dos = qs + kTileFloats<D>;
  float *ps = dos + kTileFloats<D>;
  float *dss = ps + kBlock * kScoreLd;
  float *lses = dss + kBlock * kScoreLd;
  float *deltas = lses + kBlock;

  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
  const int kBlockIdx = blockIdx.x;
  const int b = blockIdx.y / kvHeads;
  const int hk = blockIdx.y % kvHeads;
  const int group = heads / kvHeads;
  const int k0 = kBlockIdx * kBlock;
  const int64_t qStride = int64_t(heads) * dim;
  const int64_t kvStride = int64_t(kvHeads) * dim;
  const int64_t kvOffset = ((int64_t(b) * seq + k0) * kvHeads + hk) * dim;

  loadTiles<D>(ks, k + kvOffset, scaleLog2, vs, v + kvOffset, 1.f, kvStride,
               seq - k0, dim);

  float dkAcc[4][D / 16] = {};
  float dvAcc[4][D / 16] = {};
  const int queryBlocks = (seq + kBlock - 1) / kBlock;
  for (int g = 0; g < group; ++g) {
    const int h = hk * group + g;
    const int64_t headOffset = (int64_t(b) * seq * heads + h) * dim;
    const int64_t statOffset = (int64_t(b) * heads + h) * seq;
    for (int qb = causal ? kBlockIdx : 0; qb < queryBlocks; ++qb) {
      const int q0 = qb * kBlock;
      // The previous products are done with qs, dos, ps and dss.
      __syncthreads();
      loadTiles<D>(qs, q + headOffset + q0 * qStride, 1.f, dos,
                   dout + headOffset + q0 * qStride, 1.f, qStride, seq - q0,
                   dim);
      const int t = threadIdx.x;
      if (t < kBlock) {
        const int i = q0 + t;
        lses[t] = i < seq ? lse[statOffset + i] * kLog2e : 0.f;
        deltas[t] = i < seq ? delta[statOffset + i] : 0.f;
      }
      __syncthreads();

      // Transposed scores: rows are keys, columns queries.
      float s[4][4] = {};
      float dp[4][4] = {};
      // Fewer registers: 128 a thread for two blocks an SM at D = 64.
      tileDots<D, D == 64 ? 2 : 8>(s, ks, qs);
      tileDots<D, D == 64 ? 2 : 8>(dp, vs, dos);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int j = k0 + ty + 16 * r;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int col = tx + 16 * c;
          const int i = q0 + col;
          const bool masked = i >= seq || j >= seq || (causal && j > i);
          const float p = masked ? 0.f : exp2f(s[r][c] - lses[col]);
          ps[(ty + 16 * r) * kScoreLd + col] = p;
          dss[(ty + 16 * r) * kScoreLd + col] = p * (dp[r][c] - deltas[col]);
        }
      }
      __syncthreads();
      scoresTimesTile<D>(dvAcc, ps, dos);
      scoresTimesTile<D>(dkAcc, dss, qs);
    }
  }
  storeTile<D>(dk + kvOffset, dkAcc, kvStride, seq - k0, dim, scale);
  storeTile<D>(dv + kvOffset, dvAcc, kvStride, seq - k0, dim, 1.f);
}

/// dq: grid (query blocks, batch * heads), the last query block first.
/// Shared memory: Q (times scale * log2(e)), dout, then K and V tiles; dS
/// overwrites V.
template <int D>
__global__ void __launch_bounds__(kThreads, D == 64 ? 2 : 1)
    dqKernel(const float *__restrict__ q, const float *__restrict__ k,
             const float *__restrict__ v, const float *__restrict__ lse,
             const float *__restrict__ dout, const float *__restrict__ delta,
             float *__restrict__ dq, int seq, int heads, int kvHeads, int dim,
             bool causal, float scaleLog2, float scale) {
  extern __shared__ float4 sharedMem[];
  float *qs = reinterpret_cast<float *>(sharedMem);
  float *dos = qs + kTileFloats<D>;
  float *ks = dos + kTileFloats<D>;
  float *vs = ks + kTileFloats<D>;
  float *dss = vs;

  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
  const auto [qBlock, q0, hk, qStride, kvStride, qOffset, kvOffset] =
      queryTile(seq, heads, kvHeads, dim);
  const int64_t statOffset = queryStatOffset(seq, heads);

  loadTiles<D>(qs, q + qOffset, scaleLog2, dos, dout + qOffset, 1.f, qStride,
               seq - q0, dim);
  float rowLse[4], rowDelta[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = q0 + ty + 16 * r;
    rowLse[r] = i < seq ? lse[statOffset + i] * kLog2e : 0.f;
    rowDelta[r] = i < seq ? delta[statOffset + i] : 0.f;
  }

  float acc[4][D / 16] = {};
  const int keyBlocks = keyBlockCount(causal, qBlock, seq);
  for (int kb = 0; kb < keyBlocks; ++kb) {
    const int k0 = kb * kBlock;
    // After the previous dS K product, which read ks and dss (= vs).
    loadKeyBlock<D>(ks, vs, k, v, kvOffset, kvStride, k0, seq, dim);

    float s[4][4] = {};
    float dp[4][4] = {};
    tileDots<D, 8>(s, qs, ks);
    tileDots<D, 8>(dp, dos, vs);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = q0 + ty + 16 * r;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int j = k0 + tx + 16 * c;
        const bool masked = i >= seq || j >= seq || (causal && j > i);
        const float p = masked ? 0.f : exp2f(s[r][c] - rowLse[r]);
        s[r][c] = p * (dp[r][c] - rowDelta[r]);
      }
    }

    // dS replaces vs.
    stagedScoresTimesTile<D>(acc, s, dss, ks);
  }
  storeTile<D>(dq + qOffset, acc, qStride, seq - q0, dim, scale);
}

template <int D>
cudaError_t launchForward(cudaStream_t stream, const float *q, const float *k,
                          const float *v, float *out, float *lse,
                          const Sizes &n, bool causal, float scale) {
  const size_t bytes = 3 * kTileFloats<D> * sizeof(float);
  if (cudaError_t error = allowSharedMemory(forwardKernel<D>, bytes))
    return error;
  const dim3 grid((n.seq + kBlock - 1) / kBlock, n.batch * n.heads);
  forwardKernel<D><<<grid, kThreads, bytes, stream>>>(q, k, v, out, lse, n.seq,
                                                      n.heads, n.kvHeads, n.dim,
                                                      causal, scale * kLog2e);
  return cudaGetLastError();
}

template <int D>
cudaError_t launchBackward(cudaStream_t stream, const float *q, const float *k,
                           const float *v, const float *lse, const float *dout,
                           const float *delta, float *dq, float *dk, float *dv,
                           const Sizes &n, bool causal, float scale) {
  const int blocks = (n.seq + kBlock - 1) / kBlock;
  const size_t dkdvBytes =
      (4 * kTileFloats<D> + 2 * kBlock * kScoreLd + 2 * kBlock) * sizeof(float);
  if (cudaError_t error = allowSharedMemory(dkdvKernel<D>, dkdvBytes))
    return error;
  dkdvKernel<D>
      <<<dim3(blocks, n.batch * n.kvHeads), kThreads, dkdvBytes, stream>>>(
          q, k, v, lse, dout, delta, dk, dv, n.seq, n.heads, n.kvHeads, n.dim,
          causal, scale * kLog2e, scale);
  if (cudaError_t error = cudaGetLastError())
    return error;

  const size_t dqBytes = 4 * kTileFloats<D> * sizeof(float);
  if (cudaError_t error = allowSharedMemory(dqKernel<D>, dqBytes))
    return error;
  dqKernel<D><<<dim3(blocks, n.batch * n.heads), kThreads, dqBytes, stream>>>(
      q, k, v, lse, dout, delta, dq, n.seq, n.heads, n.kvHeads, n.dim, causal,
      scale * kLog2e, scale);
  return cudaGetLastError();
}

} // namespace

bool supports(int64_t dim) {
  return loom::runtime::cudaAttentionTakesHeadDim(dim, /*bf16=*/false);
}

cudaError_t forward(cudaStream_t stream, const float *q, const float *k,
                    const float *v, float *out, float *lse, int64_t batch,
                    int64_t seq, int64_t heads, int64_t kvHeads, int64_t dim,
                    bool causal, float scale) {
  Sizes n;
  if (cudaError_t error = checkArguments(batch, seq, heads, kvHeads, dim,
                                         supports(dim), {q, k, v, out}, n);
      error != cudaSuccess || n.empty())
    return error;
  return withTileDim(n.dim, [&](auto tile) {
    return launchForward<decltype(tile)::value>(stream, q, k, v, out, lse, n,
                                                causal, scale);
  });
}

cudaError_t backward(cudaStream_t stream, const float *q, const float *k,
                     const float *v, const float *out, const float *lse,
                     const float *dout, float *dq, float *dk, float *dv,
                     float *delta, int64_t batch, int64_t seq, int64_t heads,
                     int64_t kvHeads, int64_t dim, bool causal, float scale) {
  Sizes n;
  if (cudaError_t error =
          checkArguments(batch, seq, heads, kvHeads, dim, supports(dim),
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
