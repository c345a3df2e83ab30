//===- CrossEntropy.h - the fused loss's row kernels for CUDA --*- C++ -*-===//
//
// Private to the runtime: the per-chunk kernels of the fused linear +
// cross-entropy (docs/FusedCrossEntropy.md). cuBLAS computes a chunk's
// [rows, vocab] logits; `forward` reduces each row to its log-sum-exp and
// loss in one pass over it, and `backward` turns the logits into their
// gradient in one more, so that a chunk's logits are read once per
// direction and nothing of size [tokens, vocab] exists.
//
// Every entry point enqueues its kernel on `stream` and returns without
// waiting: cudaErrorInvalidValue for sizes it does not take, or the
// launch's error. Results are deterministic (no atomics).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CROSSENTROPY_H
#define LOOM_RUNTIME_CROSSENTROPY_H

#include "Kernels/CrossEntropyMath.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace loom::xent {

/// logits: [rows, vocab] f32 (before the soft-cap); labels: [rows] i32.
/// Writes each row's log-sum-exp and loss (0 for an ignored label, NaN for a
/// label outside [0, vocab)).
cudaError_t forward(cudaStream_t stream, const float *logits,
                    const int32_t *labels, float *lse, float *loss,
                    int64_t rows, int64_t vocab, const Settings &settings);

/// The gradient of columns [columnOffset, columnOffset + vocab) of a
/// `totalVocab`-wide loss: grad = weights[r] * (p (1 + 2 z lse) - (1 - ls)
/// [col == label] - ls / totalVocab), times 1 - tanh^2 under a soft-cap,
/// where p = exp(capped logit - lse). `grad` may be `logits` (in place): the
/// kernel reads each logit before it writes its gradient, through plain
/// loads (no __restrict__, no __ldg: the read-only cache would be unsound).
cudaError_t backward(cudaStream_t stream, const float *logits,
                     const int32_t *labels, const float *lse,
                     const float *weights, float *grad, int64_t rows,
                     int64_t vocab, int64_t columnOffset, int64_t totalVocab,
                     const Settings &settings);

/// The same, the gradient rounded to bf16 (its bits as uint16_t) for the
/// bf16 GEMMs that consume it. `grad` must not overlap `logits`.
cudaError_t backwardBf16(cudaStream_t stream, const float *logits,
                         const int32_t *labels, const float *lse,
                         const float *weights, uint16_t *grad, int64_t rows,
                         int64_t vocab, int64_t columnOffset,
                         int64_t totalVocab, const Settings &settings);

} // namespace loom::xent

#endif // LOOM_RUNTIME_CROSSENTROPY_H
