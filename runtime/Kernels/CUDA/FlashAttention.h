//===- FlashAttention.h - fused attention kernels for CUDA -----*- C++ -*-===//
//
// Private to the runtime: FlashAttention-2 style forward and backward for
// grouped-query attention in f32 and bf16, without materialising the seq x seq
// scores. Query head h reads key/value head h / (heads / kvHeads).
//
// Every entry point enqueues kernels on `stream` and returns without waiting:
// cudaErrorInvalidValue for arguments it does not take (see supports()), or
// the launch's error. Pointers must be 16-byte aligned (cudaMalloc's are).
// Results are deterministic (no atomics). Declared for host compilers that
// are not nvcc: it includes only cudart's header.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_FLASHATTENTION_H
#define LOOM_RUNTIME_FLASHATTENTION_H

#include <cuda_runtime.h>

#include <cstdint>

namespace loom::flash {

/// Forward. q, out: [batch, seq, heads, dim]; k, v: [batch, seq, kvHeads, dim];
/// lse: [batch, heads, seq]. All contiguous row-major f32 device memory.
/// out = softmax(scale * q k^T (causal: keys after the query masked)) v, and
/// lse is the natural log of the softmax's denominator (with its max).
cudaError_t forward(cudaStream_t stream, const float *q, const float *k,
                    const float *v, float *out, float *lse, int64_t batch,
                    int64_t seq, int64_t heads, int64_t kvHeads, int64_t dim,
                    bool causal, float scale);

/// Backward: dq like q; dk, dv like k; delta: [batch, heads, seq] workspace.
/// `out` and `lse` are forward's results for the same arguments; dq, dk and
/// dv are overwritten (dk and dv sum over the query heads of each group).
cudaError_t backward(cudaStream_t stream, const float *q, const float *k,
                     const float *v, const float *out, const float *lse,
                     const float *dout, float *dq, float *dk, float *dv,
                     float *delta, int64_t batch, int64_t seq, int64_t heads,
                     int64_t kvHeads, int64_t dim, bool causal, float scale);

/// Whether these kernels take `dim`: any multiple of 4 up to 128 (dims up to
/// 64 run the 64-wide kernels, larger ones the 128-wide kernels).
bool supports(int64_t dim);

/// bf16 forward and backward on tensor cores (FlashAttentionBf16.cu): the
/// same arguments and layouts, with q, k, v, out, dout, dq, dk and dv bf16
/// (their bits as uint16_t); lse and delta stay f32. Products take bf16
/// operands and accumulate in f32; P and dS are rounded to bf16 for them.
cudaError_t forwardBf16(cudaStream_t stream, const uint16_t *q,
                        const uint16_t *k, const uint16_t *v, uint16_t *out,
                        float *lse, int64_t batch, int64_t seq, int64_t heads,
                        int64_t kvHeads, int64_t dim, bool causal, float scale);
cudaError_t backwardBf16(cudaStream_t stream, const uint16_t *q,
                         const uint16_t *k, const uint16_t *v,
                         const uint16_t *out, const float *lse,
                         const uint16_t *dout, uint16_t *dq, uint16_t *dk,
                         uint16_t *dv, float *delta, int64_t batch, int64_t seq,
                         int64_t heads, int64_t kvHeads, int64_t dim,
                         bool causal, float scale);

/// Whether the bf16 kernels take `dim`: any multiple of 8 up to 128.
bool supportsBf16(int64_t dim);

} // namespace loom::flash

#endif // LOOM_RUNTIME_FLASHATTENTION_H
