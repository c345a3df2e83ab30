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

} // namespace loom::runtime

#endif // LOOM_LIB_RUNTIME_CHECKPOINT_H
