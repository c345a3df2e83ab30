//===- HostCrossEntropy.cpp - the fused loss's row kernels on the CPU -----===//
//
// The MPI backend's loomrt_cross_entropy_* (see loomrt.h): one pass over each
// row of a chunk's logits for its log-sum-exp and loss, one more for their
// gradient, with the arithmetic the CUDA kernels use (CrossEntropyMath.h).
// The CPU target keeps the linalg decomposition unless loomc is given
// --loss-kernels; these let it run the kernels' IR, and check it, anywhere.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CrossEntropyMath.h"
#include "loom/Runtime/Bf16.h"
#include "loom/Runtime/loomrt.h"

#include <string>

using namespace loom::xent;
using namespace loom::xent::detail;

namespace {

void checkSizes(const char *function, int64_t rows, int64_t vocab,
                int64_t totalVocab) {
  if (rows < 0 || vocab <= 0 || totalVocab < vocab)
    loomrt_abort((std::string(function) + ": bad sizes (rows " +
                  std::to_string(rows) + ", vocab " + std::to_string(vocab) +
                  " of " + std::to_string(totalVocab) + ")")
                     .c_str());
}

/// The gradient of every logit, each written by `store(index, value)`.
template <typename Store>
void gradient(const float *logits, const int32_t *labels, const float *lse,
              const float *weights, int64_t rows, int64_t vocab,
              int64_t columnOffset, const Constants &c, Store store) {
  for (int64_t r = 0; r < rows; ++r) {
    const RowGradient row(lse[r], weights[r], labels[r], columnOffset, c);
    for (int64_t j = 0; j < vocab; ++j)
      store(r * vocab + j, row(logits[r * vocab + j], j, c));
  }
}

} // namespace

extern "C" {

void loomrt_cross_entropy_f32(const float *logits, const int32_t *labels,
                              float *lse, float *loss, int64_t rows,
                              int64_t vocab, int64_t ignoreIndex,
                              double smoothing, double zLoss, double softcap) {
  checkSizes("loomrt_cross_entropy_f32", rows, vocab, vocab);
  const Constants c =
      constantsFor({ignoreIndex, smoothing, zLoss, softcap}, vocab);
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = logits + r * vocab;
    RowStats stats;
    for (int64_t j = 0; j < vocab; ++j)
      stats.add(z[j], c);
    lse[r] = stats.lse();
    loss[r] = rowLoss(lse[r], stats.total, labels[r], vocab, c,
                      [&](int32_t label) { return capped(z[label], c); });
  }
}

void loomrt_cross_entropy_grad_f32(const int32_t *labels, const float *lse,
                                   const float *weights, float *grad,
                                   int64_t rows, int64_t vocab,
                                   int64_t columnOffset, int64_t totalVocab,
                                   double smoothing, double zLoss,
                                   double softcap) {
  checkSizes("loomrt_cross_entropy_grad_f32", rows, vocab, totalVocab);
  gradient(grad, labels, lse, weights, rows, vocab, columnOffset,
           constantsFor({0, smoothing, zLoss, softcap}, totalVocab),
           [&](int64_t i, float value) { grad[i] = value; });
}

void loomrt_cross_entropy_grad_bf16(const float *logits, const int32_t *labels,
                                    const float *lse, const float *weights,
                                    uint16_t *grad, int64_t rows, int64_t vocab,
                                    int64_t columnOffset, int64_t totalVocab,
                                    double smoothing, double zLoss,
                                    double softcap) {
  checkSizes("loomrt_cross_entropy_grad_bf16", rows, vocab, totalVocab);
  gradient(logits, labels, lse, weights, rows, vocab, columnOffset,
           constantsFor({0, smoothing, zLoss, softcap}, totalVocab),
           [&](int64_t i, float value) { grad[i] = loom::floatToBf16(value); });
}

} // extern "C"
