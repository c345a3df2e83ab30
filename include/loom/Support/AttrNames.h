//===- AttrNames.h - the attributes passes exchange -------------*- C++ -*-===//
//
// Discardable `loom.*` attributes one pass writes and a later pass (or loomc,
// or a test) reads, by name in one place: markers and the passes' reports.
// The `train.*` roles and the contracts between passes (microbatches,
// stages, actions, ZeRO stage, full shapes, the optimizer, the plan's
// figures, the trainer's manifest) belong to the train dialect, which
// verifies them (TrainDialect::k*AttrName).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_ATTRNAMES_H
#define LOOM_SUPPORT_ATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace loom::attrs {

// On the step's memory plan (codegen-memory-plan).
/// On the arena's memref.alloc.
inline constexpr llvm::StringLiteral kArena = "loom.arena";
/// On a collective start: its result's offset in the arena (i64).
inline constexpr llvm::StringLiteral kArenaOffset = "loom.arena_offset";

// Reports: what a pass did to a function, for tests and benchmarks to read
// (the same counts are the passes' statistics).
/// codegen-memory-plan: buffers left to bufferisation.
inline constexpr llvm::StringLiteral kUnplannedBuffers =
    "loom.unplanned_buffers";
/// cpu-vectorize: linalg ops that became vector loops, and those left.
inline constexpr llvm::StringLiteral kVectorizedOps = "loom.vectorized_ops";
inline constexpr llvm::StringLiteral kScalarOps = "loom.scalar_ops";
/// gpu-map-linalg: kernels, block reductions, vector kernels and the bytes
/// their operands span.
inline constexpr llvm::StringLiteral kGpuKernels = "loom.gpu_kernels";
inline constexpr llvm::StringLiteral kGpuBlockReductions =
    "loom.gpu_block_reductions";
inline constexpr llvm::StringLiteral kGpuVectorKernels =
    "loom.gpu_vector_kernels";
inline constexpr llvm::StringLiteral kGpuKernelBytes = "loom.gpu_kernel_bytes";

} // namespace loom::attrs

#endif // LOOM_SUPPORT_ATTRNAMES_H
