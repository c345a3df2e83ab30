//===- flash_test.cpp - the emulated flash kernels against a reference ----===//
//
// Runs loom::flash's f32 and bf16 forward and backward (emulated on the CPU
// by cuda_emulated.py) and compares out, lse, dq, dk and dv with a
// double-precision reference computed from the same (for bf16: rounded)
// inputs. Bars, relative to the largest reference value (at least 1): f32
// 2e-5; bf16 1e-5 for lse (f32 scores of bf16 operands) and 1.2e-2 for the
// rest (bf16 results, P and dS rounded to bf16 for their products).
//
//===----------------------------------------------------------------------===//

#include "FlashAttention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using Vec = std::vector<float>;

struct Ref {
  std::vector<double> out, lse, dq, dk, dv;
};

struct Case {
  int B, S, H, HK, D;
  bool causal;
  float scaleMul;
};

Ref reference(const Vec &q, const Vec &k, const Vec &v, const Vec &dout,
              const Case &c, double scale) {
  const int B = c.B, S = c.S, H = c.H, HK = c.HK, D = c.D, G = H / HK;
  Ref r;
  r.out.assign(size_t(B) * S * H * D, 0);
  r.lse.assign(size_t(B) * H * S, 0);
  r.dq.assign(r.out.size(), 0);
  r.dk.assign(size_t(B) * S * HK * D, 0);
  r.dv = r.dk;
  auto qi = [&](int b, int i, int h) {
    return ((size_t(b) * S + i) * H + h) * D;
  };
  auto ki = [&](int b, int j, int h) {
    return ((size_t(b) * S + j) * HK + h) * D;
  };
  std::vector<double> s(S), p(S);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int hk = h / G;
      for (int i = 0; i < S; ++i) {
        const int n = c.causal ? i + 1 : S;
        double mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
          double acc = 0;
          for (int d = 0; d < D; ++d)
            acc += double(q[qi(b, i, h) + d]) * k[ki(b, j, hk) + d];
          s[j] = acc * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = 0; j < n; ++j)
          sum += std::exp(s[j] - mx);
        const double lse = mx + std::log(sum);
        r.lse[(size_t(b) * H + h) * S + i] = lse;
        double *o = &r.out[qi(b, i, h)];
        for (int j = 0; j < n; ++j) {
          p[j] = std::exp(s[j] - lse);
          for (int d = 0; d < D; ++d)
            o[d] += p[j] * v[ki(b, j, hk) + d];
        }
        double delta = 0;
        for (int d = 0; d < D; ++d)
          delta += dout[qi(b, i, h) + d] * o[d];
        for (int j = 0; j < n; ++j) {
          double dp = 0;
          for (int d = 0; d < D; ++d)
            dp += double(dout[qi(b, i, h) + d]) * v[ki(b, j, hk) + d];
          const double ds = p[j] * (dp - delta);
          for (int d = 0; d < D; ++d) {
            r.dv[ki(b, j, hk) + d] += p[j] * dout[qi(b, i, h) + d];
            r.dq[qi(b, i, h) + d] += scale * ds * k[ki(b, j, hk) + d];
            r.dk[ki(b, j, hk) + d] += scale * ds * q[qi(b, i, h) + d];
          }
        }
      }
    }
  return r;
}

/// Prints the error of `got` against `want` relative to max(|want|, 1);
/// whether it is within `bar`.
bool compare(const char *name, const Vec &got, const std::vector<double> &want,
             double bar) {
  double maxErr = 0, maxRef = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    double e = std::fabs(got[i] - want[i]);
    if (!(e == e))
      e = INFINITY;
    maxErr = std::max(maxErr, e);
    maxRef = std::max(maxRef, std::fabs(want[i]));
  }
  const double rel = maxErr / maxRef;
  std::printf("  %-4s rel %.3e%s\n", name, rel, rel <= bar ? "" : "  <-- FAIL");
  return rel <= bar;
}

uint16_t toBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float fromBf16(uint16_t x) {
  const uint32_t u = uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

using Bits = std::vector<uint16_t>;

Bits bits(const Vec &x) {
  Bits out(x.size());
  std::transform(x.begin(), x.end(), out.begin(), toBf16);
  return out;
}

Vec floats(const Bits &x) {
  Vec out(x.size());
  std::transform(x.begin(), x.end(), out.begin(), fromBf16);
  return out;
}

bool runCase(const Case &c, bool bf16, std::mt19937 &rng) {
  const size_t nq = size_t(c.B) * c.S * c.H * c.D;
  const size_t nk = size_t(c.B) * c.S * c.HK * c.D;
  const size_t ns = size_t(c.B) * c.H * c.S;
  std::normal_distribution<float> normal(0, 1);
  Vec q(nq), k(nk), v(nk), dout(nq);
  for (Vec *x : {&q, &k, &v, &dout})
    for (float &e : *x)
      e = bf16 ? fromBf16(toBf16(normal(rng))) : normal(rng);
  const float scale = c.scaleMul / std::sqrt(float(c.D));
  std::printf("%s B=%d S=%d H=%d HK=%d D=%d causal=%d scale=%g\n",
              bf16 ? "bf16" : "f32", c.B, c.S, c.H, c.HK, c.D, c.causal, scale);
  Vec out(nq, NAN), lse(ns, NAN), dq(nq, NAN), dk(nk, NAN), dv(nk, NAN),
      delta(ns, NAN);
  if (bf16) {
    Bits qb = bits(q), kb = bits(k), vb = bits(v), db = bits(dout);
    Bits ob(nq, 0xffff), dqb(nq, 0xffff), dkb(nk, 0xffff), dvb(nk, 0xffff);
    if (loom::flash::forwardBf16(nullptr, qb.data(), kb.data(), vb.data(),
                                 ob.data(), lse.data(), c.B, c.S, c.H, c.HK,
                                 c.D, c.causal, scale) != cudaSuccess ||
        loom::flash::backwardBf16(
            nullptr, qb.data(), kb.data(), vb.data(), ob.data(), lse.data(),
            db.data(), dqb.data(), dkb.data(), dvb.data(), delta.data(), c.B,
            c.S, c.H, c.HK, c.D, c.causal, scale) != cudaSuccess) {
      std::puts("  a launch failed");
      return false;
    }
    out = floats(ob), dq = floats(dqb), dk = floats(dkb), dv = floats(dvb);
  } else if (loom::flash::forward(nullptr, q.data(), k.data(), v.data(),
                                  out.data(), lse.data(), c.B, c.S, c.H, c.HK,
                                  c.D, c.causal, scale) != cudaSuccess ||
             loom::flash::backward(
                 nullptr, q.data(), k.data(), v.data(), out.data(), lse.data(),
                 dout.data(), dq.data(), dk.data(), dv.data(), delta.data(),
                 c.B, c.S, c.H, c.HK, c.D, c.causal, scale) != cudaSuccess) {
    std::puts("  a launch failed");
    return false;
  }
  const Ref r = reference(q, k, v, dout, c, scale);
  const double bar = bf16 ? 1.2e-2 : 2e-5, lseBar = bf16 ? 1e-5 : 2e-5;
  bool ok = compare("out", out, r.out, bar);
  ok &= compare("lse", lse, r.lse, lseBar);
  ok &= compare("dq", dq, r.dq, bar);
  ok &= compare("dk", dk, r.dk, bar);
  ok &= compare("dv", dv, r.dv, bar);
  return ok;
}

/// The entry points' argument checks (no launch happens for these).
bool argumentChecks() {
  float *p = nullptr;
  uint16_t *h = nullptr;
  using loom::flash::backward, loom::flash::backwardBf16;
  using loom::flash::forward, loom::flash::forwardBf16;
  bool ok = true;
  // heads not a multiple of kv heads; head dims past 128 or not a multiple
  // of 4 (f32) or 8 (bf16); nothing to do; a misaligned pointer.
  ok &= forward(nullptr, p, p, p, p, p, 1, 4, 3, 2, 64, false, 1) ==
        cudaErrorInvalidValue;
  ok &= forward(nullptr, p, p, p, p, p, 1, 4, 2, 2, 130, false, 1) ==
        cudaErrorInvalidValue;
  ok &= forward(nullptr, p, p, p, p, p, 1, 4, 2, 2, 66, false, 1) ==
        cudaErrorInvalidValue;
  ok &=
      forward(nullptr, p, p, p, p, p, 0, 4, 2, 2, 64, false, 1) == cudaSuccess;
  ok &= backward(nullptr, p, p, p, p, p, p, p, p, p, p, 1, 0, 2, 2, 64, false,
                 1) == cudaSuccess;
  ok &= forward(nullptr, p + 1, p, p, p, p, 1, 4, 2, 2, 64, false, 1) ==
        cudaErrorInvalidValue;
  ok &= forwardBf16(nullptr, h, h, h, h, p, 1, 4, 2, 2, 68, false, 1) ==
        cudaErrorInvalidValue;
  ok &= forwardBf16(nullptr, h, h, h, h, p, 1, 4, 3, 2, 64, false, 1) ==
        cudaErrorInvalidValue;
  ok &= backwardBf16(nullptr, h, h, h, h, p, h, h, h, h, p, 1, 4, 2, 2, 136,
                     false, 1) == cudaErrorInvalidValue;
  ok &= forwardBf16(nullptr, h, h, h, h, p, 0, 4, 2, 2, 64, false, 1) ==
        cudaSuccess;
  ok &= forwardBf16(nullptr, h + 1, h, h, h, p, 1, 4, 2, 2, 64, false, 1) ==
        cudaErrorInvalidValue;
  ok &= loom::flash::supports(64) && loom::flash::supports(128) &&
        loom::flash::supports(4) && !loom::flash::supports(0) &&
        !loom::flash::supports(132) && !loom::flash::supports(62);
  ok &= loom::flash::supportsBf16(64) && loom::flash::supportsBf16(8) &&
        !loom::flash::supportsBf16(4) && !loom::flash::supportsBf16(136);
  std::printf("argument checks: %s\n", ok ? "ok" : "FAILED");
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  // Partial blocks (70, 130, 129, 65), grouped-query heads, both head-dim
  // templates with padded dims (4, 32, 80), several blocks per row, and
  // scales that make the softmax sharp.
  const std::vector<Case> f32Cases = {
      {1, 1, 1, 1, 64, false, 1},    {1, 1, 1, 1, 64, true, 1},
      {2, 70, 4, 2, 64, false, 1},   {2, 70, 4, 2, 64, true, 1},
      {1, 130, 2, 1, 128, false, 1}, {1, 130, 2, 1, 128, true, 1},
      {1, 64, 3, 3, 80, true, 1},    {1, 100, 2, 2, 4, true, 1},
      {1, 129, 4, 1, 32, false, 8},  {1, 129, 4, 1, 32, true, 8},
      {1, 128, 1, 1, 128, true, 4},  {1, 200, 2, 2, 64, false, 1},
      {2, 65, 4, 1, 128, true, 1},   {1, 192, 2, 1, 64, true, 2},
      {1, 100, 1, 1, 4, false, 30},  {1, 100, 1, 1, 4, true, 30},
  };
  const std::vector<Case> bf16Cases = {
      {1, 1, 1, 1, 64, false, 1},    {1, 1, 1, 1, 64, true, 1},
      {2, 70, 4, 2, 64, false, 1},   {2, 70, 4, 2, 64, true, 1},
      {1, 130, 2, 1, 128, false, 1}, {1, 130, 2, 1, 128, true, 1},
      {1, 64, 3, 3, 80, true, 1},    {1, 100, 2, 2, 8, true, 1},
      {1, 129, 4, 1, 32, false, 8},  {1, 129, 4, 1, 32, true, 8},
      {1, 200, 2, 2, 64, false, 1},  {2, 65, 4, 1, 128, true, 1},
      {1, 192, 2, 1, 64, true, 2},   {1, 100, 1, 1, 16, true, 30},
  };
  std::mt19937 rng(42);
  bool ok = true;
  for (const Case &c : f32Cases)
    ok &= runCase(c, false, rng);
  for (const Case &c : bf16Cases)
    ok &= runCase(c, true, rng);
  ok &= argumentChecks();
  std::printf("%s\n", ok ? "ALL OK" : "FAILURES");
  return ok ? 0 : 1;
}
