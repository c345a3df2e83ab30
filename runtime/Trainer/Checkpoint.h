//===- Checkpoint.h - .npy files and checkpoint manifests -------*- C++ -*-===//
//
// The trainer's file formats, without LLVM or MLIR so the runtime links
// only libc++, MPI and the compiled step. See docs/Runtime.md.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CHECKPOINT_H
#define LOOM_LIB_RUNTIME_CHECKPOINT_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

/// Writes a little-endian f32 array as NumPy .npy (format 1.0). Returns an
/// error message, or "" on success.
std::string writeNpyF32(const std::string &path, const std::vector<int64_t> &shape,
                        const float *data);
/// Reads an f32 .npy of exactly `shape` into `data`. Returns an error
/// message, or "".
std::string readNpyF32(const std::string &path, const std::vector<int64_t> &shape,
                       std::vector<float> &data);

struct CheckpointTensor {
  std::string name, role, file;
  std::vector<int64_t> shape;
};

struct CheckpointManifest {
  int64_t step = 0, worldSize = 0, zeroStage = 0;
  std::string source;
  std::vector<CheckpointTensor> tensors;
};

std::string writeManifest(const std::string &path, const CheckpointManifest &m);
/// Parses a manifest written by writeManifest. Returns an error message, or "".
std::string readManifest(const std::string &path, CheckpointManifest &m);

// The checkpoint directory ROOT (docs/Runtime.md, "Checkpoints"):
// ROOT/step-K holds a complete checkpoint, ROOT/latest names the one to
// resume. A checkpoint is written into ROOT/step-K.tmp-PID-RANDOM and
// renamed into place; replacing an existing step-K moves it aside to
// step-K.old first. A process killed at any point leaves ROOT resumable
// from the previous `latest` or the new one. One trainer writes a ROOT at a
// time. Each function returns "" or an error.

/// Removes what a killed trainer left in ROOT (step-*.tmp-*, latest.tmp-*)
/// and settles a replacement it interrupted (step-K.old).
std::string cleanCheckpointRoot(const std::string &root);
/// Creates the empty temporary directory for step `step` as `tmp`.
std::string beginCheckpoint(const std::string &root, int64_t step,
                            std::string &tmp);
/// Puts the filled temporary `tmp` in place as ROOT/step-K and points
/// ROOT/latest at it, durably.
std::string commitCheckpoint(const std::string &root, int64_t step,
                             const std::string &tmp);
/// Keeps the checkpoint `latest` names and the `keep - 1` before it (by
/// step), and removes the step-K directories before those; keep = 0 keeps
/// all. Steps after `latest` (an earlier run's) are left alone.
std::string pruneCheckpoints(const std::string &root, int64_t keep);
/// The directory `latest` names, as `dir`.
std::string findLatestCheckpoint(const std::string &root, std::string &dir);

/// Testing hook: with LOOM_TRAINER_KILL_AT=N in the environment, the N-th
/// call in the process (counted over every checkpoint it writes) kills it
/// with SIGKILL. Called between the steps of writing a checkpoint.
void checkpointCrashPoint();

} // namespace loom::runtime

#endif // LOOM_LIB_RUNTIME_CHECKPOINT_H
