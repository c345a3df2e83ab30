//===- EmbeddingGrad.cu - the embedding gradient's scatter-add ------------===//
//
// Two launches after zeroing the table (EmbeddingGrad.h has the scheme):
//
//   - chunkSums: a block per token; the block's 256 threads load the ids of
//     the token's chunk, and a ballot per warp finds those equal to the
//     token's id, in order. Unless the token is the first of them, the block
//     exits; otherwise it sums their gradient rows in f32, eight columns a
//     thread per pass, into the token's row of `partial`.
//   - rowSums: a block per token; unless the token is its id's first (the
//     first of its chunk, and no earlier chunk holds the id), the block
//     exits; otherwise it walks the chunks from its own on, adds each
//     chunk's first partial of the id, and writes the table row, rounded
//     once.
//
// The generated code this replaces walked all tokens one after another for
// each column (3 blocks, a dependent load per token: 3.2 ms on the ~125M
// step's 8,192 tokens) and added in the table's type.
//
//===----------------------------------------------------------------------===//

#include "Bf16Pack.cuh"
#include "EmbeddingGrad.h"
#include "loom/Runtime/KernelDomains.h"

#include <cstdint>

namespace loom::embedding {
namespace {

constexpr int kThreads = int(kChunk);
constexpr int kWarps = kThreads / 32;
/// Columns a thread sums per pass over the rows.
constexpr int kColumns = 8;
constexpr int64_t kPass = int64_t(kThreads) * kColumns;

__device__ __forceinline__ float widened(float x) { return x; }
__device__ __forceinline__ float widened(uint16_t x) { return cuda::widen(x); }
__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(uint16_t *p, float v) {
  *p = uint16_t(cuda::pack(v, 0.f));
}

/// A block's shared memory: one chunk's matching positions and the warps'
/// ballots.
struct Tile {
  int32_t list[kThreads];
  unsigned masks[kWarps];
};

/// The positions of [base, min(base + kThreads, tokens)) whose id is `id`,
/// in order, as offsets from `base` in tile.list; returns their count. Every
/// thread of the block calls it (it synchronises the block).
__device__ int matches(const int32_t *ids, int64_t base, int64_t tokens,
                       int32_t id, Tile &tile) {
  const int64_t s = base + threadIdx.x;
  const bool hit = s < tokens && ids[s] == id;
  const unsigned mask = __ballot_sync(0xffffffffu, hit);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0)
    tile.masks[warp] = mask;
  __syncthreads();
  int before = 0, total = 0;
  for (int w = 0; w < kWarps; ++w) {
    const int n = __popc(tile.masks[w]);
    before += w < warp ? n : 0;
    total += n;
  }
  if (hit)
    tile.list[before + __popc(mask & ((1u << lane) - 1u))] =
        int32_t(threadIdx.x);
  __syncthreads();
  return total;
}

/// acc[k] += row[k * kThreads] for the columns below `width` (row and
/// `column` already at this thread's first column of the pass).
template <typename T>
__device__ __forceinline__ void addRow(float (&acc)[kColumns], const T *row,
                                       int64_t column, int64_t width) {
#pragma unroll
  for (int k = 0; k < kColumns; ++k)
    if (column + k * kThreads < width)
      acc[k] += widened(row[k * kThreads]);
}

/// out[k * kThreads] = acc[k] (rounded to T) for the columns below `width`.
template <typename T>
__device__ __forceinline__ void storeRow(T *out, const float (&acc)[kColumns],
                                         int64_t column, int64_t width) {
#pragma unroll
  for (int k = 0; k < kColumns; ++k)
    if (column + k * kThreads < width)
      store(out + k * kThreads, acc[k]);
}

/// A block's token: its index, its id, its chunk's first index, and how many
/// of the chunk's tokens have that id (their offsets in tile.list).
struct Token {
  int64_t t, base;
  int32_t id;
  int count;
};

/// The opening of both kernels, a block per token: fills `token` and
/// tile.list, and returns false, for the whole block, unless the id is in
/// the table and the token is its chunk's first of that id.
__device__ bool chunkFirst(const int32_t *ids, int64_t tokens, int64_t rows,
                           Tile &tile, Token &token) {
  token.t = blockIdx.x;
  token.id = ids[token.t];
  if (token.id < 0 || token.id >= rows)
    return false;
  token.base = token.t - token.t % kThreads;
  token.count = matches(ids, token.base, tokens, token.id, tile);
  return token.base + tile.list[0] == token.t;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    chunkSums(const int32_t *ids, const T *grad, float *partial,
              int64_t tokens, int64_t rows, int64_t width) {
  extern __shared__ float4 sharedMem[];
  Tile &tile = *reinterpret_cast<Tile *>(sharedMem);
  Token token;
  if (!chunkFirst(ids, tokens, rows, tile, token))
    return;
  for (int64_t c0 = 0; c0 < width; c0 += kPass) {
    const int64_t column = c0 + threadIdx.x;
    float acc[kColumns] = {};
#pragma unroll 4
    for (int j = 0; j < token.count; ++j)
      addRow(acc, grad + (token.base + tile.list[j]) * width + column, column,
             width);
    storeRow(partial + token.t * width + column, acc, column, width);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    rowSums(const int32_t *ids, const float *partial, T *table,
            int64_t tokens, int64_t rows, int64_t width) {
  extern __shared__ float4 sharedMem[];
  Tile &tile = *reinterpret_cast<Tile *>(sharedMem);
  Token token;
  if (!chunkFirst(ids, tokens, rows, tile, token))
    return;
  for (int64_t b = 0; b < token.base; b += kThreads)
    if (matches(ids, b, tokens, token.id, tile) > 0)
      return;
  for (int64_t c0 = 0; c0 < width; c0 += kPass) {
    const int64_t column = c0 + threadIdx.x;
    float acc[kColumns] = {};
    for (int64_t b = token.base; b < tokens; b += kThreads)
      if (matches(ids, b, tokens, token.id, tile) > 0)
        addRow(acc, partial + (b + tile.list[0]) * width + column, column,
               width);
    storeRow(table + int64_t(token.id) * width + column, acc, column, width);
  }
}

template <typename T>
cudaError_t launch(cudaStream_t stream, const int32_t *ids, const T *grad,
                   T *table, float *partial, int64_t tokens, int64_t rows,
                   int64_t width) {
  if (!loom::runtime::cudaEmbeddingGradTakes(tokens, rows, width))
    return cudaErrorInvalidValue;
  cudaError_t status = cudaMemsetAsync(
      table, 0, size_t(rows) * size_t(width) * sizeof(T), stream);
  if (status != cudaSuccess || tokens == 0)
    return status;
  const dim3 grid(unsigned(tokens), 1), block(kThreads);
  chunkSums<T><<<grid, block, sizeof(Tile), stream>>>(ids, grad, partial,
                                                      tokens, rows, width);
  rowSums<T><<<grid, block, sizeof(Tile), stream>>>(ids, partial, table,
                                                    tokens, rows, width);
  return cudaGetLastError();
}

} // namespace

cudaError_t gradient(cudaStream_t stream, const int32_t *ids, const float *grad,
                     float *table, float *partial, int64_t tokens,
                     int64_t rows, int64_t width) {
  return launch(stream, ids, grad, table, partial, tokens, rows, width);
}

cudaError_t gradientBf16(cudaStream_t stream, const int32_t *ids,
                         const uint16_t *grad, uint16_t *table, float *partial,
                         int64_t tokens, int64_t rows, int64_t width) {
  return launch(stream, ids, grad, table, partial, tokens, rows, width);
}

} // namespace loom::embedding
