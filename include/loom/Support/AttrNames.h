//===- AttrNames.h - the attributes passes exchange -------------*- C++ -*-===//
//
// Discardable `loom.*` attributes one pass writes and a later pass (or loomc,
// or a test) reads, by name in one place. The `train.*` roles and the
// sharding and pipeline contracts (microbatches, stages, actions, ZeRO stage,
// full shapes) belong to the train dialect, which verifies them
// (TrainDialect::k*AttrName).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_ATTRNAMES_H
#define LOOM_SUPPORT_ATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace loom::attrs {

// On a training step (train-optimizer).
/// The optimizer the step updates with (string: adamw or sgd).
inline constexpr llvm::StringLiteral kOptimizer = "loom.optimizer";
/// Its learning rate (f64); the trainer's default.
inline constexpr llvm::StringLiteral kLearningRate = "loom.lr";

// On a scheduled step (coll-overlap-schedule).
/// The memory timeline's peak of the synchronous order, the least memory
/// retiming collectives reaches (i64).
inline constexpr llvm::StringLiteral kSynchronousPeakBytes =
    "loom.synchronous_peak_bytes";

// On a scheduled step (trainer-record-scheduled-peak).
/// The memory timeline's peak of the step the scheduler bounded (i64).
inline constexpr llvm::StringLiteral kScheduledPeakBytes =
    "loom.scheduled_peak_bytes";

// On the step function (codegen-update-in-place, codegen-memory-plan).
/// Per result: the argument whose buffer it is written into, or -1.
inline constexpr llvm::StringLiteral kTiedResults = "loom.tied_results";
/// The memory timeline's peak with arguments and caller-owned results.
inline constexpr llvm::StringLiteral kTimelinePeakBytes =
    "loom.timeline_peak_bytes";
/// The planned arena's size, and the most of it live at once.
inline constexpr llvm::StringLiteral kArenaBytes = "loom.arena_bytes";
inline constexpr llvm::StringLiteral kArenaBoundBytes =
    "loom.arena_bound_bytes";
/// On the arena's memref.alloc.
inline constexpr llvm::StringLiteral kArena = "loom.arena";
/// On a collective start: its result's offset in the arena (i64).
inline constexpr llvm::StringLiteral kArenaOffset = "loom.arena_offset";

// On the step after bufferisation (codegen-pack-buffers).
/// What bufferisation allocated outside the plan, packed, and its bound.
inline constexpr llvm::StringLiteral kPackedBytes = "loom.packed_bytes";
inline constexpr llvm::StringLiteral kPackedBoundBytes =
    "loom.packed_bound_bytes";

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

// On the module (trainer-entry-point, read by trainer-manifest).
/// The step's manifest (StepManifest text) before lowering.
inline constexpr llvm::StringLiteral kStepManifest = "loom.step_manifest";

} // namespace loom::attrs

#endif // LOOM_SUPPORT_ATTRNAMES_H
