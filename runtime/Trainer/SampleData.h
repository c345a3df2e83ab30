//===- SampleData.h - a step input's samples from a .npy array --*- C++ -*-===//
//
// Inputs other than token ids (a regression's features and targets) come
// from .npy arrays whose first dimension is the sample: `--input x=x.npy`
// (docs/Data.md). Plain C++17, as the rest of the trainer.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_TRAINER_SAMPLEDATA_H
#define LOOM_RUNTIME_TRAINER_SAMPLEDATA_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

/// One input's samples, read whole: a C-order little-endian .npy array of
/// f32 (for an f32 input) or int32/int64 (for an i32 one, each value in
/// range) whose rows have the input's per-sample shape.
class SampleData {
public:
  /// Reads `path` for an input whose samples are `rowShape` of `dtype`
  /// ("f32" or "i32"). Returns "" or an error naming the file.
  std::string open(const std::string &path,
                   const std::vector<int64_t> &rowShape,
                   const std::string &dtype);
  int64_t rows() const { return numRows; }
  /// Copies sample `index` (taken modulo rows()) into `out`, 4 bytes an
  /// element.
  void copyRow(int64_t index, void *out) const;

private:
  std::vector<uint32_t> words; // f32 or i32 bit patterns
  int64_t numRows = 0, rowSize = 0;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_TRAINER_SAMPLEDATA_H
