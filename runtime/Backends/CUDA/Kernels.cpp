//===- Kernels.cpp - kernel launches --------------------------------------===//
//
// The kernels of the modules loomc embeds (loaded on first use through
// cudart's library API) and the runtime's own fused kernels (attention,
// the loss's rows, the embedding gradient), all on the compute stream.
//
//===----------------------------------------------------------------------===//

#include "Backends/CUDA/CudaContext.h"
#include "Kernels/CUDA/CrossEntropy.h"
#include "Kernels/CUDA/EmbeddingGrad.h"
#include "Kernels/CUDA/FlashAttention.h"

using namespace loom::runtime::cuda;

namespace loom::runtime::cuda {

cudaKernel_t Context::kernel(Module &module, const char *name) {
  auto it = module.kernels.find(name);
  if (it != module.kernels.end())
    return it->second;
  if (!initialised)
    abort(std::string("kernel ") + name + " used before loomrt_init");
  if (!module.library) {
    int64_t before = usedBytes();
    check(cudaLibraryLoadData(&module.library, module.image, nullptr, nullptr,
                              0, nullptr, nullptr, 0),
          std::string("loading the module of kernel ") + name);
    moduleBytes += usedBytes() - before;
  }
  cudaKernel_t k;
  check(cudaLibraryGetKernel(&k, module.library, name),
        std::string("finding kernel ") + name);
  module.kernels[name] = k;
  kernelNames[k] = name;
  return k;
}

} // namespace loom::runtime::cuda

namespace {

/// Runs one of the runtime's own kernel launches, `call` (FlashAttention*.cu,
/// CrossEntropy.cu), on the compute stream, timed under `what`, and stops
/// with a message naming `what` if it fails.
template <typename Call> void onComputeStream(const char *what, Call call) {
  Context &ctx = context();
  ctx.busy();
  cudaError_t status = cudaSuccess;
  ctx.timed([&] { return std::string(what); },
            [&] { status = call(ctx.compute); });
  ctx.check(status, what);
}

/// A fused attention kernel: `function` names the entry point in the
/// message for a head dim the kernels do not take (`supports`).
template <typename Call>
void fusedAttention(const char *function, const char *what, int64_t dim,
                    bool (*supports)(int64_t), Call call) {
  if (!supports(dim))
    context().abort(
        std::string(function) + ": no fused attention kernel for head dim " +
        std::to_string(dim) + " (compile with --fuse-attention=false)");
  onComputeStream(what, call);
}

} // namespace

extern "C" {

// Fused attention (FlashAttention.cu, FlashAttentionBf16.cu) on the compute
// stream.
void loomrt_attention_f32(const float *q, const float *k, const float *v,
                          float *out, float *lse, int64_t batch, int64_t seq,
                          int64_t heads, int64_t kvHeads, int64_t dim,
                          int32_t causal, float scale) {
  fusedAttention("loomrt_attention_f32", "the fused attention forward", dim,
                 loom::flash::supports, [&](cudaStream_t stream) {
                   return loom::flash::forward(stream, q, k, v, out, lse, batch,
                                               seq, heads, kvHeads, dim, causal,
                                               scale);
                 });
}

void loomrt_attention_grad_f32(const float *q, const float *k, const float *v,
                               const float *out, const float *lse,
                               const float *dout, float *dq, float *dk,
                               float *dv, float *delta, int64_t batch,
                               int64_t seq, int64_t heads, int64_t kvHeads,
                               int64_t dim, int32_t causal, float scale) {
  fusedAttention("loomrt_attention_grad_f32", "the fused attention backward",
                 dim, loom::flash::supports, [&](cudaStream_t stream) {
                   return loom::flash::backward(
                       stream, q, k, v, out, lse, dout, dq, dk, dv, delta,
                       batch, seq, heads, kvHeads, dim, causal, scale);
                 });
}

void loomrt_attention_bf16(const uint16_t *q, const uint16_t *k,
                           const uint16_t *v, uint16_t *out, float *lse,
                           int64_t batch, int64_t seq, int64_t heads,
                           int64_t kvHeads, int64_t dim, int32_t causal,
                           float scale) {
  fusedAttention("loomrt_attention_bf16", "the fused bf16 attention forward",
                 dim, loom::flash::supportsBf16, [&](cudaStream_t stream) {
                   return loom::flash::forwardBf16(stream, q, k, v, out, lse,
                                                   batch, seq, heads, kvHeads,
                                                   dim, causal, scale);
                 });
}

void loomrt_attention_grad_bf16(const uint16_t *q, const uint16_t *k,
                                const uint16_t *v, const uint16_t *out,
                                const float *lse, const uint16_t *dout,
                                uint16_t *dq, uint16_t *dk, uint16_t *dv,
                                float *delta, int64_t batch, int64_t seq,
                                int64_t heads, int64_t kvHeads, int64_t dim,
                                int32_t causal, float scale) {
  fusedAttention("loomrt_attention_grad_bf16",
                 "the fused bf16 attention backward", dim,
                 loom::flash::supportsBf16, [&](cudaStream_t stream) {
                   return loom::flash::backwardBf16(
                       stream, q, k, v, out, lse, dout, dq, dk, dv, delta,
                       batch, seq, heads, kvHeads, dim, causal, scale);
                 });
}

// The fused loss's row kernels (CrossEntropy.cu), on the compute stream.
void loomrt_cross_entropy_f32(const float *logits, const int32_t *labels,
                              float *lse, float *loss, int64_t rows,
                              int64_t vocab, int64_t ignoreIndex,
                              double smoothing, double zLoss, double softcap) {
  onComputeStream("the fused loss's row kernel", [&](cudaStream_t stream) {
    return loom::xent::forward(stream, logits, labels, lse, loss, rows, vocab,
                               {ignoreIndex, smoothing, zLoss, softcap});
  });
}

void loomrt_cross_entropy_grad_f32(const int32_t *labels, const float *lse,
                                   const float *weights, float *grad,
                                   int64_t rows, int64_t vocab,
                                   int64_t columnOffset, int64_t totalVocab,
                                   double smoothing, double zLoss,
                                   double softcap) {
  onComputeStream("the fused loss's gradient kernel", [&](cudaStream_t stream) {
    return loom::xent::backward(stream, grad, labels, lse, weights, grad, rows,
                                vocab, columnOffset, totalVocab,
                                {0, smoothing, zLoss, softcap});
  });
}

void loomrt_cross_entropy_grad_bf16(const float *logits, const int32_t *labels,
                                    const float *lse, const float *weights,
                                    uint16_t *grad, int64_t rows, int64_t vocab,
                                    int64_t columnOffset, int64_t totalVocab,
                                    double smoothing, double zLoss,
                                    double softcap) {
  onComputeStream(
      "the fused loss's bf16 gradient kernel", [&](cudaStream_t stream) {
        return loom::xent::backwardBf16(
            stream, logits, labels, lse, weights, grad, rows, vocab,
            columnOffset, totalVocab, {0, smoothing, zLoss, softcap});
      });
}

// The embedding gradient's scatter-add (EmbeddingGrad.cu).
void loomrt_embedding_grad_f32(const int32_t *ids, const float *grad,
                               float *table, float *partial, int64_t tokens,
                               int64_t rows, int64_t width) {
  onComputeStream("the embedding gradient", [&](cudaStream_t stream) {
    return loom::embedding::gradient(stream, ids, grad, table, partial, tokens,
                                     rows, width);
  });
}

void loomrt_embedding_grad_bf16(const int32_t *ids, const uint16_t *grad,
                                uint16_t *table, float *partial, int64_t tokens,
                                int64_t rows, int64_t width) {
  onComputeStream("the embedding gradient", [&](cudaStream_t stream) {
    return loom::embedding::gradientBf16(stream, ids, grad, table, partial,
                                         tokens, rows, width);
  });
}

// The runtime ABI of MLIR's gpu-to-llvm lowering. Module constructors run
// before main, so loading waits for the first launch. Every launch goes on
// the compute stream: the "stream" gpu-to-llvm creates around a synchronous
// launch is that stream, and its synchronisation is stream order.
void *mgpuModuleLoad(void *data, size_t) { return new Module(data); }
void *mgpuModuleLoadJIT(void *data, int) { return new Module(data); }
void mgpuModuleUnload(void *module) {
  // At exit the CUDA runtime may already be gone; the process ends anyway.
  delete static_cast<Module *>(module);
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  return reinterpret_cast<void *>(
      context().kernel(*static_cast<Module *>(module), name));
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedBytes, void *stream,
                      void **params, void **, size_t) {
  Context &c = context();
  c.busy();
  cudaError_t status = cudaSuccess;
  c.timed(
      [&] {
        return c.kernelNames[function] + " <<<" + std::to_string(gridX) + ", " +
               std::to_string(blockX) + ">>>";
      },
      [&] {
        status = cudaLaunchKernel(
            function, dim3(unsigned(gridX), unsigned(gridY), unsigned(gridZ)),
            dim3(unsigned(blockX), unsigned(blockY), unsigned(blockZ)), params,
            size_t(sharedBytes), static_cast<cudaStream_t>(stream));
      });
  if (status != cudaSuccess)
    c.check(status, "launching kernel " + c.kernelNames[function]);
}

} // extern "C"
