//===- HostEmbeddingGrad.cpp - the embedding gradient on the CPU ----------===//
//
// The MPI backend's loomrt_embedding_grad_* (see loomrt.h), summing in the
// CUDA kernels' order (EmbeddingGradOrder.h): each chunk's first token of an
// id gathers the chunk's rows of that id into its row of `partial`, then each
// id's first token adds its chunks' partials, in chunk order, into the table
// row. The CPU target keeps the linalg decomposition unless loomc is given
// --embedding-kernel; this lets it run the kernel's IR, and check it,
// anywhere.
//
//===----------------------------------------------------------------------===//

#include "Kernels/EmbeddingGradOrder.h"
#include "loom/Runtime/Bf16.h"
#include "loom/Runtime/HeapScope.h"
#include "loom/Runtime/loomrt.h"

#include <algorithm>
#include <string>
#include <vector>

namespace {

using loom::embedding::kChunk;

float widened(float x) { return x; }
float widened(uint16_t x) { return loom::bf16ToFloat(x); }
void store(float *p, float v) { *p = v; }
void store(uint16_t *p, float v) { *p = loom::floatToBf16(v); }

template <typename T>
void gradient(const char *function, const int32_t *ids, const T *grad, T *table,
              float *partial, int64_t tokens, int64_t rows, int64_t width) {
  if (tokens < 0 || rows < 0 || width <= 0)
    loomrt_abort((std::string(function) + ": bad sizes (tokens " +
                  std::to_string(tokens) + ", rows " + std::to_string(rows) +
                  ", width " + std::to_string(width) + ")")
                     .c_str());
  std::fill(table, table + rows * width, T(0));
  // The latest chunk-first token of each id, and from each chunk-first
  // token the next one of its id.
  std::vector<int64_t> latest(size_t(rows), -1), next(size_t(tokens), -1);
  std::vector<int64_t> owners; // each id's first token, in token order
  for (int64_t t = 0; t < tokens; ++t) {
    const int32_t id = ids[t];
    if (id < 0 || id >= rows)
      continue;
    int64_t &first = latest[size_t(id)];
    if (first < t - t % kChunk) { // none yet in this chunk
      if (first < 0)
        owners.push_back(t);
      else
        next[size_t(first)] = t;
      first = t;
      std::fill(partial + t * width, partial + (t + 1) * width, 0.f);
    }
    float *sum = partial + first * width;
    for (int64_t c = 0; c < width; ++c)
      sum[c] += widened(grad[t * width + c]);
  }
  std::vector<float> acc(static_cast<size_t>(width));
  for (int64_t owner : owners) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t f = owner; f >= 0; f = next[size_t(f)])
      for (int64_t c = 0; c < width; ++c)
        acc[size_t(c)] += partial[f * width + c];
    T *row = table + int64_t(ids[owner]) * width;
    for (int64_t c = 0; c < width; ++c)
      store(row + c, acc[size_t(c)]);
  }
}

} // namespace

extern "C" {

void loomrt_embedding_grad_f32(const int32_t *ids, const float *grad,
                               float *table, float *partial, int64_t tokens,
                               int64_t rows, int64_t width) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  gradient("loomrt_embedding_grad_f32", ids, grad, table, partial, tokens, rows,
           width);
}

void loomrt_embedding_grad_bf16(const int32_t *ids, const uint16_t *grad,
                                uint16_t *table, float *partial, int64_t tokens,
                                int64_t rows, int64_t width) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  gradient("loomrt_embedding_grad_bf16", ids, grad, table, partial, tokens,
           rows, width);
}

} // extern "C"
