//===- embedding_test.cpp - the emulated embedding gradient -------------===//
//
// Runs loom::embedding's f32 and bf16 scatter-add (EmbeddingGrad.cu,
// emulated on the CPU by cuda_emulated.py) and checks each table against
//   - the CPU backend's loomrt_embedding_grad_* (HostEmbeddingGrad.cpp),
//     which sums in the same order: the bits must be equal;
//   - a double-precision sum per row: within 1e-6 of the largest value for
//     f32, half a bf16 ulp (plus that) for bf16.
// Cases cover a frequent id spread over several 256-token chunks, a last
// partial chunk, rows no token names (zero), ids outside the table (skipped),
// a width below one thread a column and one above a pass (2,048 columns),
// no tokens, and the argument check. Every table starts as NaNs, so an
// element the kernels leave unwritten fails.
//
//===----------------------------------------------------------------------===//

#include "EmbeddingGrad.h"
#include "loom/Runtime/Bf16.h"
#include "loom/Runtime/loomrt.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" void loomrt_abort(const char *message) {
  std::fprintf(stderr, "loomrt_abort: %s\n", message);
  std::exit(2);
}

namespace {

struct Case {
  const char *name;
  int64_t tokens, rows, width;
  bool bf16;
};

bool runCase(const Case &c, std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int32_t> anyRow(0, int32_t(c.rows - 1));
  std::vector<int32_t> ids(size_t(c.tokens));
  for (int64_t t = 0; t < c.tokens; ++t) {
    // A third of the tokens share id 3 (a frequent token, in every chunk);
    // every 50th is outside the table.
    ids[t] = t % 3 == 0 ? 3 : anyRow(rng);
    if (t % 50 == 7)
      ids[t] = t % 100 == 7 ? -1 : int32_t(c.rows);
  }
  const size_t n = size_t(c.tokens * c.width), table = size_t(c.rows * c.width);
  std::vector<float> grad(n);
  std::vector<uint16_t> grad16(n);
  for (size_t i = 0; i < n; ++i) {
    grad16[i] = loom::floatToBf16(normal(rng));
    grad[i] = c.bf16 ? loom::bf16ToFloat(grad16[i]) : normal(rng);
  }
  std::vector<double> want(table, 0.0);
  for (int64_t t = 0; t < c.tokens; ++t)
    if (ids[t] >= 0 && ids[t] < c.rows)
      for (int64_t j = 0; j < c.width; ++j)
        want[ids[t] * c.width + j] += grad[t * c.width + j];

  std::vector<float> partial(n), hostPartial(n);
  std::vector<float> got(table, NAN), host(table, NAN);
  std::vector<uint16_t> got16(table, 0xffff), host16(table, 0xffff);
  cudaError_t status;
  if (c.bf16) {
    status = loom::embedding::gradientBf16(nullptr, ids.data(), grad16.data(),
                                           got16.data(), partial.data(),
                                           c.tokens, c.rows, c.width);
    loomrt_embedding_grad_bf16(ids.data(), grad16.data(), host16.data(),
                               hostPartial.data(), c.tokens, c.rows, c.width);
    for (size_t i = 0; i < table; ++i) {
      got[i] = loom::bf16ToFloat(got16[i]);
      host[i] = loom::bf16ToFloat(host16[i]);
    }
  } else {
    status = loom::embedding::gradient(nullptr, ids.data(), grad.data(),
                                       got.data(), partial.data(), c.tokens,
                                       c.rows, c.width);
    loomrt_embedding_grad_f32(ids.data(), grad.data(), host.data(),
                              hostPartial.data(), c.tokens, c.rows, c.width);
  }
  double scale = 1, worst = 0, worstHost = 0;
  for (double w : want)
    scale = std::max(scale, std::fabs(w));
  bool bitsEqual = true;
  for (size_t i = 0; i < table; ++i) {
    const double ulp = c.bf16 ? std::ldexp(1.0, std::ilogb(want[i]) - 7) : 0;
    const double error = std::fabs(got[i] - want[i]);
    worst = std::max(worst, std::isnan(got[i]) ? INFINITY
                                                : std::max(0.0, error - ulp / 2));
    worstHost = std::max(worstHost, std::fabs(host[i] - want[i]));
    bitsEqual &= std::memcmp(&got[i], &host[i], sizeof(float)) == 0;
  }
  const bool ok = status == cudaSuccess && worst / scale <= 1e-6 && bitsEqual;
  std::printf("%s: %lld tokens into %lld x %lld %s: error %.2e (bar 1e-06), "
              "CPU backend's bits %s: %s\n",
              c.name, (long long)c.tokens, (long long)c.rows,
              (long long)c.width, c.bf16 ? "bf16" : "f32", worst / scale,
              bitsEqual ? "equal" : "DIFFER", ok ? "ok" : "FAILED");
  return ok;
}

} // namespace

int main() {
  std::mt19937 rng(7);
  bool ok = true;
  const Case cases[] = {
      {"narrow", 600, 40, 20, false},       // 20 columns: most threads idle
      {"two passes", 200, 150, 2100, true}, // 2,100 columns: > 256 x 8
      {"bf16", 257, 64, 96, true},          // one token in the last chunk
      {"no tokens", 0, 5, 8, false},
  };
  for (const Case &c : cases)
    ok &= runCase(c, rng);
  // Bad sizes are refused before anything is written.
  float table = 1.f;
  const bool refused =
      loom::embedding::gradient(nullptr, nullptr, nullptr, &table, nullptr, 0,
                                1, 0) == cudaErrorInvalidValue &&
      table == 1.f;
  std::printf("argument check: %s\n", refused ? "ok" : "FAILED");
  ok &= refused;
  std::printf("%s\n", ok ? "ALL OK" : "FAILURES");
  return ok ? 0 : 1;
}
