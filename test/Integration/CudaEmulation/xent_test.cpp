//===- xent_test.cpp - the emulated loss row kernels against a reference --===//
//
// Runs loom::xent's forward, backward and bf16 backward (CrossEntropy.cu,
// emulated on the CPU by cuda_emulated.py) and compares the log-sum-exp,
// the loss and the logits' gradient with a double-precision reference of
// the formulas in docs/FusedCrossEntropy.md. Cases cover the vectorised and
// scalar paths (vocab a multiple of 4 or not, a misaligned row start),
// several 4,096-column tiles, vocabulary blocks (a column offset), ignored
// and out-of-range labels, label smoothing, z-loss, the soft-cap, the
// in-place gradient and the argument checks. Bars, relative to the largest
// reference value (at least 1): 1e-6 for f32 results; bf16 gradients
// within half a bf16 ulp of the reference, plus that. A NaN where the
// reference has none (or none where it has one) fails.
//
//===----------------------------------------------------------------------===//

#include "CrossEntropy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using loom::xent::Settings;

struct Case {
  const char *name;
  int64_t rows, vocab;
  /// The block's first column and the whole vocabulary (0: the block).
  int64_t offset, total;
  Settings settings;
  /// Misalign the logits by one element (the scalar path).
  bool misaligned;
};

double capped(double z, const Settings &s) {
  return s.softcap > 0 ? s.softcap * std::tanh(z / s.softcap) : z;
}

/// Largest |got - want| over max(1, largest |want|); NaN where they
/// disagree on NaN.
template <typename Got>
double relativeError(const std::vector<double> &want, Got got) {
  double worst = 0, scale = 1;
  for (double w : want)
    if (!std::isnan(w))
      scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got(i);
    if (std::isnan(want[i]) != std::isnan(g))
      return NAN;
    if (!std::isnan(g))
      worst = std::max(worst, std::fabs(g - want[i]) / scale);
  }
  return worst;
}

bool runCase(const Case &c, std::mt19937 &rng) {
  const int64_t total = c.total ? c.total : c.vocab;
  const Settings &s = c.settings;
  std::normal_distribution<float> normal(0.f, 3.f);
  std::uniform_int_distribution<int32_t> column(0, int32_t(total - 1));
  // One spare element in front, for the misaligned case.
  std::vector<float> storage(size_t(c.rows * c.vocab) + 4);
  float *logits = storage.data() + (c.misaligned ? 1 : 0);
  for (int64_t i = 0; i < c.rows * c.vocab; ++i)
    logits[i] = normal(rng);
  std::vector<int32_t> labels(size_t(c.rows));
  std::vector<float> weights(size_t(c.rows));
  for (int64_t r = 0; r < c.rows; ++r) {
    labels[r] = column(rng);
    weights[r] = 0.25f + 0.5f * float(r % 3);
  }
  if (c.rows > 1) {
    labels[1] = int32_t(s.ignoreIndex); // ignored
    weights[1] = 0.f;                   // as the token weights make it
  }

  // The reference: each row's lse over this block (the forward takes the
  // whole vocabulary: its cases have total == vocab), loss and gradient.
  std::vector<double> lse(size_t(c.rows)), loss(size_t(c.rows)),
      grad(size_t(c.rows * c.vocab));
  for (int64_t r = 0; r < c.rows; ++r) {
    double max = -INFINITY, sum = 0, rowSum = 0;
    for (int64_t j = 0; j < c.vocab; ++j)
      max = std::max(max, capped(logits[r * c.vocab + j], s));
    for (int64_t j = 0; j < c.vocab; ++j) {
      const double z = capped(logits[r * c.vocab + j], s);
      sum += std::exp(z - max);
      rowSum += z;
    }
    lse[r] = max + std::log(sum);
    const int32_t label = labels[r];
    if (label == s.ignoreIndex) {
      loss[r] = 0;
    } else if (label < 0 || label >= c.vocab) {
      loss[r] = NAN;
    } else {
      loss[r] = (1 - s.smoothing) *
                    (lse[r] - capped(logits[r * c.vocab + label], s)) +
                s.smoothing * (lse[r] - rowSum / double(c.vocab)) +
                s.zLoss * lse[r] * lse[r];
    }
  }
  // The backward takes the f32 lse (for a block, a made-up row lse: it
  // only has to be the same on both sides).
  std::vector<float> lse32(size_t(c.rows));
  for (int64_t r = 0; r < c.rows; ++r)
    lse32[r] = float(lse[r]) + (c.total ? 2.5f : 0.f);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.vocab; ++j) {
      const double z = logits[r * c.vocab + j];
      const double l = lse32[r];
      double g = std::exp(capped(z, s) - l) * (1 + 2 * s.zLoss * l);
      if (j + c.offset == labels[r])
        g -= 1 - s.smoothing;
      g = (g - s.smoothing / double(total)) * weights[r];
      if (s.softcap > 0) {
        const double t = std::tanh(z / s.softcap);
        g *= 1 - t * t;
      }
      grad[r * c.vocab + j] = g;
    }

  bool ok = true;
  auto report = [&](const char *what, double error, double bar) {
    const bool good = error <= bar; // NaN fails
    std::printf("  %-8s %.2e (bar %.0e) %s\n", what, error, bar,
                good ? "ok" : "FAILED");
    ok &= good;
  };
  std::printf("%s: %lld x %lld\n", c.name, (long long)c.rows,
              (long long)c.vocab);
  if (!c.total) {
    std::vector<float> gotLse(size_t(c.rows), NAN),
        gotLoss(size_t(c.rows), NAN);
    const cudaError_t status =
        loom::xent::forward(nullptr, logits, labels.data(), gotLse.data(),
                            gotLoss.data(), c.rows, c.vocab, s);
    report("launch", status == cudaSuccess ? 0 : 1, 0);
    report("lse", relativeError(lse, [&](size_t i) { return gotLse[i]; }),
           1e-6);
    report("loss", relativeError(loss, [&](size_t i) { return gotLoss[i]; }),
           1e-6);
  }
  // bf16 first: the f32 gradient overwrites the logits.
  std::vector<uint16_t> bf16(grad.size(), 0xffff);
  cudaError_t status = loom::xent::backwardBf16(
      nullptr, logits, labels.data(), lse32.data(), weights.data(), bf16.data(),
      c.rows, c.vocab, c.offset, total, s);
  report("launch", status == cudaSuccess ? 0 : 1, 0);
  std::vector<double> rounded(grad.size());
  double scale = 1;
  for (double g : grad)
    scale = std::max(scale, std::fabs(g));
  double worstUlp = 0;
  for (size_t i = 0; i < grad.size(); ++i) {
    uint32_t bits = uint32_t(bf16[i]) << 16;
    float got;
    std::memcpy(&got, &bits, 4);
    if (std::isnan(got) != std::isnan(grad[i])) {
      worstUlp = INFINITY;
      break;
    }
    // Round to nearest: within half an ulp of the reference (none at 0),
    // plus the f32 arithmetic's error.
    const double ulp =
        grad[i] == 0 ? 0 : std::ldexp(1.0, std::ilogb(grad[i]) - 7);
    const double error = std::fabs(got - grad[i]) - 0.5 * ulp;
    worstUlp = std::max(worstUlp, error / scale);
  }
  report("bf16 dz", worstUlp, 1e-6);
  status = loom::xent::backward(nullptr, logits, labels.data(), lse32.data(),
                                weights.data(), logits, c.rows, c.vocab,
                                c.offset, total, s);
  report("launch", status == cudaSuccess ? 0 : 1, 0);
  report("dz", relativeError(grad, [&](size_t i) { return logits[i]; }), 1e-6);
  return ok;
}

bool argumentChecks() {
  float x[8] = {};
  int32_t label[2] = {};
  const Settings s;
  bool ok =
      loom::xent::forward(nullptr, x, label, x, x, -1, 4, s) ==
          cudaErrorInvalidValue &&
      loom::xent::forward(nullptr, x, label, x, x, 1, 0, s) ==
          cudaErrorInvalidValue &&
      loom::xent::backward(nullptr, x, label, x, x, x, 1, 8, 0, 4, s) ==
          cudaErrorInvalidValue && // a block wider than the vocabulary
      loom::xent::forward(nullptr, x, label, x, x, 0, 4, s) == cudaSuccess;
  std::printf("argument checks: %s\n", ok ? "ok" : "FAILED");
  return ok;
}

} // namespace

int main() {
  Settings plain;
  Settings all;
  all.smoothing = 0.1;
  all.zLoss = 1e-4;
  all.softcap = 30.0;
  Settings tight;
  tight.softcap = 2.0;
  tight.ignoreIndex = 3;
  const std::vector<Case> cases = {
      {"plain", 5, 256, 0, 0, plain, false},
      {"odd vocab (scalar path)", 4, 1001, 0, 0, plain, false},
      {"odd vocab, two column tiles", 3, 4099, 0, 0, all, false},
      {"misaligned (scalar path)", 3, 512, 0, 0, plain, true},
      {"two column tiles", 3, 5000, 0, 0, all, false},
      {"smoothing, z-loss, cap", 6, 1024, 0, 0, all, false},
      {"tight cap, in-range ignore", 4, 300, 0, 0, tight, false},
      {"vocabulary block", 4, 64, 128, 256, all, false},
      {"odd block", 3, 37, 37, 111, plain, false},
      {"one row", 1, 8, 0, 0, all, false},
      // Five float4 loads a forward thread (1,024 a block), as the ~125M
      // model's 32,000-column rows take eight.
      {"long rows", 2, 20480, 0, 0, all, false},
  };
  std::mt19937 rng(7);
  bool ok = true;
  for (const Case &c : cases)
    ok &= runCase(c, rng);
  // A label outside the vocabulary: NaN loss, not a read out of bounds.
  {
    float logits[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t labels[2] = {8, -1};
    float lse[2], loss[2];
    const bool good = loom::xent::forward(nullptr, logits, labels, lse, loss, 2,
                                          4, plain) == cudaSuccess &&
                      std::isnan(loss[0]) && std::isnan(loss[1]) &&
                      std::isfinite(lse[0]);
    std::printf("out-of-range labels give NaN losses: %s\n",
                good ? "ok" : "FAILED");
    ok &= good;
  }
  ok &= argumentChecks();
  std::printf("%s\n", ok ? "ALL OK" : "FAILURES");
  return ok ? 0 : 1;
}
