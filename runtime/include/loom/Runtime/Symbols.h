//===- Symbols.h - names the compiler and the runtime share -----*- C++ -*-===//
//
// Every symbol compiled code exports to the trainer, and every runtime
// function the compiler emits a call to, by name. The compiler builds calls
// from these constants; the runtime checks at compile time that each names
// a function loomrt.h declares (Backends/BackendCApi.cpp), so neither side
// can rename one alone.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SYMBOLS_H
#define LOOM_RUNTIME_SYMBOLS_H

namespace loom::runtime::symbols {

// What a compiled step exports (trainer-entry-point, trainer-manifest).
inline constexpr char kStep[] = "loom_step";
inline constexpr char kStepPacked[] = "loom_step_packed";
inline constexpr char kStepManifest[] = "loom_step_manifest";
// The CPU features the step was compiled for (loomc; CpuFeatures.h): a
// comma-separated list the trainer checks before it runs the step.
inline constexpr char kCpuFeatures[] = "loom_cpu_features";

// Collectives (convert-coll-to-loomrt).
inline constexpr char kCollStart[] = "loomrt_coll_start";
inline constexpr char kCollWait[] = "loomrt_coll_wait";
inline constexpr char kCommGroup[] = "loomrt_comm_group";
inline constexpr char kRank[] = "loomrt_rank";

// Profile probes (trainer-profile-probes).
inline constexpr char kOpBegin[] = "loomrt_op_begin";
inline constexpr char kOpEnd[] = "loomrt_op_end";
inline constexpr char kOpFused[] = "loomrt_op_fused";

// Fused kernels (train-fuse-attention, train-decompose).
inline constexpr char kAttentionF32[] = "loomrt_attention_f32";
inline constexpr char kAttentionGradF32[] = "loomrt_attention_grad_f32";
inline constexpr char kAttentionBf16[] = "loomrt_attention_bf16";
inline constexpr char kAttentionGradBf16[] = "loomrt_attention_grad_bf16";
inline constexpr char kCrossEntropyF32[] = "loomrt_cross_entropy_f32";
inline constexpr char kCrossEntropyGradF32[] = "loomrt_cross_entropy_grad_f32";
inline constexpr char kCrossEntropyGradBf16[] =
    "loomrt_cross_entropy_grad_bf16";
inline constexpr char kEmbeddingGradF32[] = "loomrt_embedding_grad_f32";
inline constexpr char kEmbeddingGradBf16[] = "loomrt_embedding_grad_bf16";

// GEMMs (convert-linalg-to-blas): a prefix, then the type letter(s) and
// "gemm" or "gemm_batched" (cblas_sgemm, loomrt_cblas_bgemm,
// loomrt_cublas_sgemm_batched, ...).
inline constexpr char kCblasPrefix[] = "cblas_";
inline constexpr char kLoomCblasPrefix[] = "loomrt_cblas_";
inline constexpr char kCublasPrefix[] = "loomrt_cublas_";

} // namespace loom::runtime::symbols

#endif // LOOM_RUNTIME_SYMBOLS_H
