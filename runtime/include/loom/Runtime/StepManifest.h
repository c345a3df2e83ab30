//===- StepManifest.h - the compiled step's manifest ------------*- C++ -*-===//
//
// The one description of a compiled training step's ABI that both sides
// read: the compiler writes it (trainer-entry-point, trainer-manifest) and
// the trainer parses it (loom_step_manifest). Plain C++17, no LLVM.
//
// The text is line based:
//
//   loom-step 1
//   KEY VALUE                 one per property (world_size 4, lr 0.001, ...)
//   arg|result ROLE NAME DTYPE LOCAL FULL [in-place | below=N]
//
// one line per tensor in the order of loom_step_packed's buffers: the step's
// arguments, then its results. ROLE is param, state, input or loss; DTYPE
// f32, f64, bf16, i32 or i64; LOCAL and FULL are this rank's shape and the
// unpartitioned one, as `4x32` (`-` for a scalar). `in-place` marks a
// result written into the buffer of the argument it updates; `below=N` an
// input of ids that must lie in [0, N) (train.id_bound: a vocabulary).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_STEPMANIFEST_H
#define LOOM_RUNTIME_STEPMANIFEST_H

#include <cstdint>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace loom::runtime {

/// The manifest's first line.
inline constexpr const char kStepManifestHeader[] = "loom-step 1";

/// One argument or result of the compiled step.
struct StepTensor {
  bool isArgument = false;
  /// param, state, input or loss.
  std::string role, name;
  /// f32, f64, bf16, i32 or i64.
  std::string dtype;
  /// On this rank, and unpartitioned (they differ for ZeRO shards).
  std::vector<int64_t> localShape, fullShape;
  /// A result written into its argument's buffer: no storage of its own.
  bool inPlace = false;
  /// An input of ids: each lies in [0, bound) (0: no bound known).
  int64_t bound = 0;

  /// Bytes of one element of `dtype`; 0 for an unknown one.
  static int64_t getElementBytes(const std::string &dtype) {
    if (dtype == "f64" || dtype == "i64")
      return 8;
    if (dtype == "f32" || dtype == "i32")
      return 4;
    if (dtype == "bf16")
      return 2;
    return 0;
  }
  static int64_t getCount(const std::vector<int64_t> &shape) {
    int64_t count = 1;
    for (int64_t d : shape)
      count *= d;
    return count;
  }
  int64_t getLocalCount() const { return getCount(localShape); }
  int64_t getFullCount() const { return getCount(fullShape); }
  /// Bytes of this rank's tensor.
  int64_t getBytes() const { return getLocalCount() * getElementBytes(dtype); }
};

/// A compiled step's properties and tensors.
struct StepManifest {
  std::map<std::string, std::string> properties;
  std::vector<StepTensor> tensors;

  /// The property `key`, or null.
  const std::string *getProperty(const std::string &key) const {
    auto it = properties.find(key);
    return it == properties.end() ? nullptr : &it->second;
  }

  static std::string printShape(const std::vector<int64_t> &shape) {
    if (shape.empty())
      return "-";
    std::string text;
    for (int64_t d : shape)
      text += (text.empty() ? "" : "x") + std::to_string(d);
    return text;
  }

  /// The manifest's text (see the file comment).
  std::string print() const {
    std::string text = std::string(kStepManifestHeader) + "\n";
    for (const auto &[key, value] : properties)
      text += key + " " + value + "\n";
    for (const StepTensor &t : tensors)
      text += std::string(t.isArgument ? "arg" : "result") + " " + t.role +
              " " + t.name + " " + t.dtype + " " + printShape(t.localShape) +
              " " + printShape(t.fullShape) + (t.inPlace ? " in-place" : "") +
              (t.bound > 0 ? " below=" + std::to_string(t.bound) : "") + "\n";
    return text;
  }

  /// Parses `text` into `manifest`. On malformed text returns false with
  /// `error` saying which line and what was expected.
  static bool parse(const std::string &text, StepManifest &manifest,
                    std::string &error) {
    manifest = StepManifest();
    std::istringstream in(text);
    std::string line;
    if (!std::getline(in, line) || line != kStepManifestHeader) {
      error = "expected '" + std::string(kStepManifestHeader) +
              "' on the first line, got '" + line + "'";
      return false;
    }
    for (int number = 2; std::getline(in, line); ++number) {
      std::istringstream words(line);
      std::string kind;
      if (!(words >> kind)) {
        error = "line " + std::to_string(number) + " is empty";
        return false;
      }
      if (kind != "arg" && kind != "result") {
        std::string value;
        std::getline(words >> std::ws, value);
        manifest.properties[kind] = value;
        continue;
      }
      StepTensor t;
      t.isArgument = kind == "arg";
      std::string local, full, flag, extra;
      words >> t.role >> t.name >> t.dtype >> local >> full;
      bool roleOk = t.role == "param" || t.role == "state" ||
                    t.role == "input" || t.role == "loss";
      bool fieldsOk = bool(words), flagOk = true;
      if (fieldsOk && (words >> flag)) {
        if (flag == "in-place")
          flagOk = !t.isArgument;
        else
          flagOk = t.isArgument && flag.rfind("below=", 0) == 0 &&
                   parseCount(flag.substr(6), t.bound) && t.bound > 0;
      }
      if (!fieldsOk || !roleOk || !StepTensor::getElementBytes(t.dtype) ||
          !parseShape(local, t.localShape) || !parseShape(full, t.fullShape) ||
          !flagOk || (words >> extra)) {
        error = "line " + std::to_string(number) +
                ": expected 'arg|result ROLE NAME DTYPE LOCAL FULL "
                "[in-place | below=N]', got '" +
                line + "'";
        return false;
      }
      t.inPlace = flag == "in-place";
      manifest.tensors.push_back(std::move(t));
    }
    return true;
  }

private:
  /// A decimal count of at most 18 digits.
  static bool parseCount(const std::string &text, int64_t &value) {
    if (text.empty() || text.size() > 18 ||
        text.find_first_not_of("0123456789") != std::string::npos)
      return false;
    value = std::stoll(text);
    return true;
  }

  /// "4x32" or "-" (a scalar); the bytes of the largest element type within
  /// int64.
  static bool parseShape(const std::string &text, std::vector<int64_t> &shape) {
    shape.clear();
    if (text == "-")
      return true;
    std::istringstream in(text);
    std::string dim;
    int64_t count = 1;
    while (std::getline(in, dim, 'x')) {
      if (dim.empty() || dim.size() > 18 ||
          dim.find_first_not_of("0123456789") != std::string::npos)
        return false;
      int64_t d = std::stoll(dim);
      if (d > 0 && count > std::numeric_limits<int64_t>::max() / 8 / d)
        return false;
      count *= d;
      shape.push_back(d);
    }
    return !shape.empty() && text.back() != 'x';
  }
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_STEPMANIFEST_H
