//===- EmbeddingGrad.h - the embedding gradient's kernels ------*- C++ -*-===//
//
// Private to the runtime: the CUDA kernels of train.embedding_grad's
// scatter-add, summing in EmbeddingGradOrder.h's order.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EMBEDDINGGRAD_H
#define LOOM_RUNTIME_EMBEDDINGGRAD_H

#include "Kernels/EmbeddingGradOrder.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace loom::embedding {

/// ids: [tokens] i32; grad: [tokens, width]; table: [rows, width], every
/// element written; partial: [tokens, width] f32 scratch. Enqueued on
/// `stream`; cudaErrorInvalidValue for sizes the kernels do not take.
cudaError_t gradient(cudaStream_t stream, const int32_t *ids, const float *grad,
                     float *table, float *partial, int64_t tokens, int64_t rows,
                     int64_t width);

/// The same with bf16 gradients and table (their bits as uint16_t): sums in
/// f32, each table element rounded once.
cudaError_t gradientBf16(cudaStream_t stream, const int32_t *ids,
                         const uint16_t *grad, uint16_t *table, float *partial,
                         int64_t tokens, int64_t rows, int64_t width);

} // namespace loom::embedding

#endif // LOOM_RUNTIME_EMBEDDINGGRAD_H
