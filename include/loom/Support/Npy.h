//===- Npy.h - read and write NumPy .npy files ------------------*- C++ -*-===//
//
// The interchange format for tensors between Loom's tools, tests and (later)
// checkpoints: NumPy's .npy, version 1.0, little-endian, C order.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_NPY_H
#define LOOM_SUPPORT_NPY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// Element types Loom reads and writes.
enum class NpyDType { F32, F64, I32, I64 };

/// Bytes per element of `dtype`.
int64_t getNpyElementBytes(NpyDType dtype);
/// The NumPy descriptor (`<f4`, ...) of `dtype`.
llvm::StringRef getNpyDescr(NpyDType dtype);

/// A dense array: shape, element type and the raw little-endian bytes.
struct NpyArray {
  NpyDType dtype = NpyDType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t getNumElements() const;
};

/// Reads `path`; errors name the file and what is wrong with it.
llvm::Expected<NpyArray> readNpy(llvm::StringRef path);

/// Writes `array` to `path` through a temporary file and a rename, so a
/// reader never sees a half-written file.
llvm::Error writeNpy(llvm::StringRef path, const NpyArray &array);

} // namespace loom

#endif // LOOM_SUPPORT_NPY_H
