//===- SampleData.cpp - a step input's samples from a .npy array ----------===//

#include "SampleData.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

using namespace loom::runtime;

namespace {

/// The value of `key` in a .npy header dictionary: a quoted string, a
/// boolean or a parenthesised tuple, as written; "" if absent.
std::string field(const std::string &header, const std::string &key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return "";
  at = header.find(':', at);
  if (at == std::string::npos)
    return "";
  at = header.find_first_not_of(' ', at + 1);
  if (at == std::string::npos)
    return "";
  char open = header[at];
  size_t end = open == '\'' ? header.find('\'', at + 1)
               : open == '(' ? header.find(')', at)
                             : header.find_first_of(",}", at) - 1;
  if (end == std::string::npos)
    return "";
  return header.substr(at, end - at + 1);
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

} // namespace

std::string SampleData::open(const std::string &path,
                             const std::vector<int64_t> &rowShape,
                             const std::string &dtype) {
  auto bad = [&](const std::string &what) {
    return "input file " + path + ": " + what;
  };
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "cannot read input file " + path;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    return bad("not a .npy file (no \\x93NUMPY magic)");
  int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    return bad(".npy version " + std::to_string(major) + " is not 1, 2 or 3");
  size_t lengthBytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + lengthBytes)
    return bad("truncated .npy header");
  uint32_t length = 0;
  for (size_t i = 0; i < lengthBytes; ++i)
    length |= uint32_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  size_t start = 8 + lengthBytes + length;
  if (start > bytes.size())
    return bad("truncated .npy header");
  std::string header(bytes.data() + 8 + lengthBytes, length);
  std::string descr = field(header, "descr");
  if (field(header, "fortran_order") != "False")
    return bad("a Fortran-ordered array; save it in C order");
  bool isFloat = descr == "'<f4'";
  bool isInt32 = descr == "'<i4'", isInt64 = descr == "'<i8'";
  if (dtype == "f32" ? !isFloat : !(isInt32 || isInt64))
    return bad("an array of " + descr + " for an input of " + dtype +
               (dtype == "f32" ? " (save it as float32, '<f4')"
                               : " (save it as int32 or int64)"));
  // The shape: (N, d1, ...) with each d_i equal to the row's.
  std::string tuple = field(header, "shape");
  std::vector<int64_t> shape;
  for (size_t at = 1; at < tuple.size();) {
    size_t end = tuple.find_first_of(",)", at);
    std::string item = tuple.substr(at, end - at);
    item.erase(0, item.find_first_not_of(' '));
    if (!item.empty()) {
      char *stop = nullptr;
      long long value = std::strtoll(item.c_str(), &stop, 10);
      if (*stop || value < 0)
        return bad("a shape that does not parse: " + tuple);
      shape.push_back(value);
    }
    if (end == std::string::npos || tuple[end] == ')')
      break;
    at = end + 1;
  }
  std::vector<int64_t> want = rowShape;
  if (shape.empty() ||
      std::vector<int64_t>(shape.begin() + 1, shape.end()) != want)
    return bad("shape " + tuple + " does not hold samples of " +
               shapeText(rowShape) + " (the first dimension is the sample)");
  numRows = shape[0];
  rowSize = 1;
  for (int64_t d : rowShape) {
    if (d != 0 && rowSize > std::numeric_limits<int64_t>::max() / d)
      return bad("a shape too large");
    rowSize *= d;
  }
  if (numRows == 0)
    return bad("no samples");
  size_t width = isInt64 ? 8 : 4;
  if (numRows > int64_t((bytes.size() - start) / width) / rowSize ||
      bytes.size() - start != size_t(numRows * rowSize) * width)
    return bad("its data is not the " + std::to_string(numRows * rowSize) +
               " elements of its header's shape");
  words.resize(size_t(numRows * rowSize));
  const char *data = bytes.data() + start;
  for (size_t i = 0; i < words.size(); ++i) {
    if (!isInt64) {
      std::memcpy(&words[i], data + 4 * i, 4);
      continue;
    }
    int64_t value;
    std::memcpy(&value, data + 8 * i, 8);
    if (value < std::numeric_limits<int32_t>::min() ||
        value > std::numeric_limits<int32_t>::max())
      return bad("value " + std::to_string(value) + " at element " +
                 std::to_string(i) + " is outside int32");
    int32_t narrow = int32_t(value);
    std::memcpy(&words[i], &narrow, 4);
  }
  return "";
}

void SampleData::copyRow(int64_t index, void *out) const {
  int64_t row = index % numRows;
  std::memcpy(out, words.data() + row * rowSize, size_t(rowSize) * 4);
}
