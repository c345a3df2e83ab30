//===- HostAttention.cpp - fused attention on the CPU ---------------------===//
//
// The MPI backend's loomrt_attention_f32 / loomrt_attention_grad_f32 (and
// their bf16 forms, computed in f32 copies): for each batch element, query
// head and block of query rows, the block's scores against the keys it may
// see (all, or up to its last row when causal) go through CBLAS into a
// [block, seq] scratch row set, so memory is O(block x seq) rather than the
// decomposition's [seq, seq] per head. The
// backward recomputes the probabilities from the forward's log-sum-exp
// (FlashAttention-2's backward, without atomics: the CPU walks the blocks in
// order, accumulating dK and dV).
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Bf16.h"
#include "loom/Runtime/HeapScope.h"
#include "loom/Runtime/loomrt.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

constexpr int64_t kBlock = 64;

/// Where one (batch, head) pair's rows live: row i of its query-shaped
/// arrays at q + i * qStride, of its key-shaped ones at k + i * kStride.
struct Heads {
  int64_t batch, seq, heads, kvHeads, dim;
  int64_t qStride() const { return heads * dim; }
  int64_t kStride() const { return kvHeads * dim; }
  int64_t qOffset(int64_t b, int64_t h) const {
    return b * seq * heads * dim + h * dim;
  }
  int64_t kOffset(int64_t b, int64_t h) const {
    return b * seq * kvHeads * dim + (h / (heads / kvHeads)) * dim;
  }
  int64_t rowOffset(int64_t b, int64_t h) const {
    return (b * heads + h) * seq;
  }
};

/// `count` bf16 values widened to f32.
std::vector<float> widened(const uint16_t *bits, int64_t count) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    values[size_t(i)] = loom::bf16ToFloat(bits[i]);
  return values;
}

/// `values` rounded to bf16 into `bits`.
void narrow(const std::vector<float> &values, uint16_t *bits) {
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = loom::floatToBf16(values[i]);
}

/// The scores of query rows [i0, i0 + rows) against keys [0, keys):
/// scale * Q Kᵀ into `s` ([rows, keys]), masked positions -inf.
void scores(const Heads &x, const float *q, const float *k, int64_t i0,
            int64_t rows, int64_t keys, bool causal, float scale, float *s) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(keys),
              int(x.dim), scale, q + i0 * x.qStride(), int(x.qStride()), k,
              int(x.kStride()), 0.0f, s, int(keys));
  if (causal)
    for (int64_t r = 0; r < rows; ++r)
      std::fill(s + r * keys + i0 + r + 1, s + (r + 1) * keys,
                -std::numeric_limits<float>::infinity());
}

} // namespace

extern "C" {

void loomrt_attention_f32(const float *q, const float *k, const float *v,
                          float *out, float *lse, int64_t batch, int64_t seq,
                          int64_t heads, int64_t kvHeads, int64_t dim,
                          int32_t causal, float scale) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  Heads x{batch, seq, heads, kvHeads, dim};
  std::vector<float> s(size_t(kBlock * seq));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const float *qh = q + x.qOffset(b, h);
      const float *kh = k + x.kOffset(b, h), *vh = v + x.kOffset(b, h);
      float *oh = out + x.qOffset(b, h), *lh = lse + x.rowOffset(b, h);
      for (int64_t i0 = 0; i0 < seq; i0 += kBlock) {
        int64_t rows = std::min(kBlock, seq - i0);
        int64_t keys = causal ? i0 + rows : seq;
        scores(x, qh, kh, i0, rows, keys, causal, scale, s.data());
        for (int64_t r = 0; r < rows; ++r) {
          float *row = s.data() + r * keys;
          float max = *std::max_element(row, row + keys);
          double sum = 0;
          for (int64_t j = 0; j < keys; ++j)
            sum += row[j] = std::exp(row[j] - max);
          for (int64_t j = 0; j < keys; ++j)
            row[j] = float(row[j] / sum);
          lh[i0 + r] = max + float(std::log(sum));
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows),
                    int(dim), int(keys), 1.0f, s.data(), int(keys), vh,
                    int(x.kStride()), 0.0f, oh + i0 * x.qStride(),
                    int(x.qStride()));
      }
    }
}

void loomrt_attention_grad_f32(const float *q, const float *k, const float *v,
                               const float *out, const float *lse,
                               const float *dout, float *dq, float *dk,
                               float *dv, float *delta, int64_t batch,
                               int64_t seq, int64_t heads, int64_t kvHeads,
                               int64_t dim, int32_t causal, float scale) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  Heads x{batch, seq, heads, kvHeads, dim};
  std::memset(dk, 0, sizeof(float) * size_t(batch * seq * kvHeads * dim));
  std::memset(dv, 0, sizeof(float) * size_t(batch * seq * kvHeads * dim));
  std::vector<float> p(size_t(kBlock * seq)), dp(size_t(kBlock * seq));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t qo = x.qOffset(b, h), ko = x.kOffset(b, h);
      const float *lh = lse + x.rowOffset(b, h);
      float *deltah = delta + x.rowOffset(b, h);
      for (int64_t i = 0; i < seq; ++i) {
        const float *o = out + qo + i * x.qStride();
        const float *d = dout + qo + i * x.qStride();
        double sum = 0;
        for (int64_t c = 0; c < dim; ++c)
          sum += double(o[c]) * d[c];
        deltah[i] = float(sum);
      }
      for (int64_t i0 = 0; i0 < seq; i0 += kBlock) {
        int64_t rows = std::min(kBlock, seq - i0);
        int64_t keys = causal ? i0 + rows : seq;
        scores(x, q + qo, k + ko, i0, rows, keys, causal, scale, p.data());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < keys; ++j)
            p[r * keys + j] = std::exp(p[r * keys + j] - lh[i0 + r]);
        const float *dO = dout + qo + i0 * x.qStride();
        // dV += Pᵀ dO; dP = dO Vᵀ.
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(keys),
                    int(dim), int(rows), 1.0f, p.data(), int(keys), dO,
                    int(x.qStride()), 1.0f, dv + ko, int(x.kStride()));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows),
                    int(keys), int(dim), 1.0f, dO, int(x.qStride()), v + ko,
                    int(x.kStride()), 0.0f, dp.data(), int(keys));
        // dS = P (dP - delta), in dp.
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < keys; ++j)
            dp[r * keys + j] =
                p[r * keys + j] * (dp[r * keys + j] - deltah[i0 + r]);
        // dQ = scale dS K; dK += scale dSᵀ Q.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows),
                    int(dim), int(keys), scale, dp.data(), int(keys), k + ko,
                    int(x.kStride()), 0.0f, dq + qo + i0 * x.qStride(),
                    int(x.qStride()));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(keys),
                    int(dim), int(rows), scale, dp.data(), int(keys),
                    q + qo + i0 * x.qStride(), int(x.qStride()), 1.0f, dk + ko,
                    int(x.kStride()));
      }
    }
}

// bf16: widened into f32 copies, computed in f32, each result rounded once.
void loomrt_attention_bf16(const uint16_t *q, const uint16_t *k,
                           const uint16_t *v, uint16_t *out, float *lse,
                           int64_t batch, int64_t seq, int64_t heads,
                           int64_t kvHeads, int64_t dim, int32_t causal,
                           float scale) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  const int64_t queries = batch * seq * heads * dim;
  const int64_t keys = batch * seq * kvHeads * dim;
  std::vector<float> out32(static_cast<size_t>(queries));
  loomrt_attention_f32(widened(q, queries).data(), widened(k, keys).data(),
                       widened(v, keys).data(), out32.data(), lse, batch, seq,
                       heads, kvHeads, dim, causal, scale);
  narrow(out32, out);
}

void loomrt_attention_grad_bf16(const uint16_t *q, const uint16_t *k,
                                const uint16_t *v, const uint16_t *out,
                                const float *lse, const uint16_t *dout,
                                uint16_t *dq, uint16_t *dk, uint16_t *dv,
                                float *delta, int64_t batch, int64_t seq,
                                int64_t heads, int64_t kvHeads, int64_t dim,
                                int32_t causal, float scale) {
  loom::runtime::HeapScope scratch(LOOMRT_HEAP_KERNELS);
  const int64_t queries = batch * seq * heads * dim;
  const int64_t keys = batch * seq * kvHeads * dim;
  std::vector<float> dq32(static_cast<size_t>(queries)),
      dk32(static_cast<size_t>(keys)), dv32(static_cast<size_t>(keys));
  loomrt_attention_grad_f32(
      widened(q, queries).data(), widened(k, keys).data(),
      widened(v, keys).data(), widened(out, queries).data(), lse,
      widened(dout, queries).data(), dq32.data(), dk32.data(), dv32.data(),
      delta, batch, seq, heads, kvHeads, dim, causal, scale);
  narrow(dq32, dq);
  narrow(dk32, dk);
  narrow(dv32, dv);
}

} // extern "C"
