//===- AttrNames.h - the attributes passes exchange -------------*- C++ -*-===//
//
// Discardable `loom.*` attributes one pass writes and a later pass (or loomc,
// or a test) reads, by name in one place. The `train.*` roles belong to the
// train dialect (TrainDialect::k*AttrName).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_ATTRNAMES_H
#define LOOM_SUPPORT_ATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace loom::attrs {

// On a sharded step (zero-partition).
/// An argument's or result's unpartitioned shape where ZeRO changed it
/// (dense i64 array).
inline constexpr llvm::StringLiteral kFullShape = "loom.full_shape";
/// The ZeRO stage the step was partitioned with (i64).
inline constexpr llvm::StringLiteral kZeroStage = "loom.zero_stage";

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

// Pipeline parallelism (train-microbatch, pp-partition).
/// On a forward or step: the number of microbatches its batch is split into.
inline constexpr llvm::StringLiteral kMicrobatches = "loom.microbatches";
/// On an op train-microbatch cloned: its microbatch.
inline constexpr llvm::StringLiteral kMicrobatch = "loom.microbatch";
/// On a pipeline stage's ops: the schedule action they run in ("F3").
inline constexpr llvm::StringLiteral kAction = "loom.action";
/// On a stage's function: its stage in the pipeline.
inline constexpr llvm::StringLiteral kPipelineStage = "loom.pipeline_stage";
/// On a stage's function: the pipeline's stages, schedule and bubble.
inline constexpr llvm::StringLiteral kPipeline = "loom.pipeline";

} // namespace loom::attrs

#endif // LOOM_SUPPORT_ATTRNAMES_H
