//===- CrossEntropyMath.h - the fused loss's row arithmetic -----*- C++ -*-===//
//
// Private to the runtime: what the CUDA row kernels (CrossEntropy.cu) and
// the CPU backend's (HostCrossEntropy.cpp) compute per logit and per row,
// written once for both compilers. The formulas and the rounding of their
// constants are the linalg decomposition's
// (LinearCrossEntropyDecomposition.cpp); the log-sum-exp is online, a
// running maximum rescaling a running sum, so one pass over a row does.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CROSSENTROPYMATH_H
#define LOOM_RUNTIME_CROSSENTROPYMATH_H

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_XENT_FN __host__ __device__ __forceinline__
#else
#define LOOM_XENT_FN inline
#endif

namespace loom::xent {

/// The loss's settings, as train.linear_cross_entropy has them.
struct Settings {
  /// Labels equal to it are ignored (loss 0).
  int64_t ignoreIndex = -100;
  /// PyTorch's label_smoothing, PaLM's z-loss coefficient and Gemma 2's
  /// logit soft-cap (0: none).
  double smoothing = 0.0, zLoss = 0.0, softcap = 0.0;
};

namespace detail {

/// The settings as the kernels use them, each constant rounded to f32 from
/// double as the decomposition's constants are.
struct Constants {
  int32_t ignoreIndex;
  float cap, inverseCap; // cap 0: no soft-cap
  float keep;            // 1 - smoothing
  float smoothing;       // the forward's smoothing term
  float inverseVocab;    // the forward's 1 / vocab
  float zLoss, twiceZ;   // z and 2 z
  float uniform;         // the backward's smoothing / total vocab
};

inline Constants constantsFor(const Settings &s, int64_t totalVocab) {
  Constants c;
  // As the decomposition compares labels with an attribute of their type.
  c.ignoreIndex = static_cast<int32_t>(s.ignoreIndex);
  c.cap = s.softcap > 0.0 ? static_cast<float>(s.softcap) : 0.f;
  c.inverseCap = s.softcap > 0.0 ? static_cast<float>(1.0 / s.softcap) : 0.f;
  c.keep = static_cast<float>(1.0 - s.smoothing);
  c.smoothing = static_cast<float>(s.smoothing);
  c.inverseVocab = static_cast<float>(1.0 / double(totalVocab));
  c.zLoss = static_cast<float>(s.zLoss);
  c.twiceZ = static_cast<float>(2.0 * s.zLoss);
  c.uniform = static_cast<float>(s.smoothing / double(totalVocab));
  return c;
}

/// The logit the loss sees: cap * tanh(z / cap) under a soft-cap.
LOOM_XENT_FN float capped(float z, const Constants &c) {
  return c.cap > 0.f ? tanhf(z * c.inverseCap) * c.cap : z;
}

/// Adds `x` to a running maximum and sum of exp(. - maximum).
LOOM_XENT_FN void accumulate(float &max, float &sum, float x) {
  if (x > max) {
    sum = sum * expf(max - x) + 1.f;
    max = x;
  } else if (x != -INFINITY) {
    sum += expf(x - max);
  }
}

/// Merges another (maximum, sum) pair into this one.
LOOM_XENT_FN void combine(float &max, float &sum, float otherMax,
                          float otherSum) {
  const float m = fmaxf(max, otherMax);
  if (m == -INFINITY)
    return; // both empty
  sum = sum * expf(max - m) + otherSum * expf(otherMax - m);
  max = m;
}

/// A row's running statistics over its capped logits: their maximum, the
/// sum of exp(. - maximum), and their plain sum (for label smoothing).
struct RowStats {
  float max = -INFINITY, sum = 0.f, total = 0.f;

  /// Adds logit `z` (not soft-capped).
  LOOM_XENT_FN void add(float z, const Constants &c) {
    const float x = capped(z, c);
    accumulate(max, sum, x);
    total += x;
  }
  LOOM_XENT_FN void merge(const RowStats &other) {
    combine(max, sum, other.max, other.sum);
    total += other.total;
  }
  LOOM_XENT_FN float lse() const { return max + logf(sum); }
};

/// A row's loss from its log-sum-exp, its sum of (capped) logits and its
/// label; `target(label)` reads the label's capped logit. 0 for an ignored
/// label, NaN for one outside [0, vocab).
template <typename Target>
LOOM_XENT_FN float rowLoss(float lse, float rowSum, int32_t label,
                           int64_t vocab, const Constants &c, Target target) {
  if (label == c.ignoreIndex)
    return 0.f;
  if (label < 0 || label >= vocab)
    return NAN; // the decomposition would read out of bounds
  float loss = c.keep * (lse - target(label));
  if (c.smoothing > 0.f)
    loss += c.smoothing * (lse - rowSum * c.inverseVocab);
  if (c.zLoss > 0.f)
    loss += c.zLoss * (lse * lse);
  return loss;
}

/// The gradient of one row's logits: weight * (p (1 + 2 z lse) - (1 - ls)
/// [col == label] - ls / total vocab), times 1 - tanh^2 under a soft-cap.
struct RowGradient {
  float lse, weight, factor;
  /// The label's column in this block of the vocabulary (maybe outside it).
  int64_t target;

  LOOM_XENT_FN RowGradient(float lse, float weight, int32_t label,
                           int64_t columnOffset, const Constants &c)
      : lse(lse), weight(weight), factor(1.f + c.twiceZ * lse),
        target(int64_t(label) - columnOffset) {}

  /// The gradient of logit `z` (not soft-capped) in column `col`.
  LOOM_XENT_FN float operator()(float z, int64_t col,
                                const Constants &c) const {
    float t = 0.f;
    if (c.cap > 0.f) {
      t = tanhf(z * c.inverseCap);
      z = t * c.cap;
    }
    float value = expf(z - lse) * factor;
    if (col == target)
      value -= c.keep;
    value = (value - c.uniform) * weight;
    return c.cap > 0.f ? value * (1.f - t * t) : value;
  }
};

} // namespace detail
} // namespace loom::xent

#endif // LOOM_RUNTIME_CROSSENTROPYMATH_H
