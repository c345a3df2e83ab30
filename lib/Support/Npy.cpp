//===- Npy.cpp - read and write NumPy .npy files --------------------------===//

#include "loom/Support/Npy.h"
#include "loom/Runtime/DurableFile.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include <cstring>

using namespace llvm;
using namespace loom;

int64_t loom::getNpyElementBytes(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::F32:
  case NpyDType::I32:
    return 4;
  case NpyDType::F64:
  case NpyDType::I64:
    return 8;
  }
  llvm_unreachable("unknown dtype");
}

StringRef loom::getNpyDescr(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::F32:
    return "<f4";
  case NpyDType::F64:
    return "<f8";
  case NpyDType::I32:
    return "<i4";
  case NpyDType::I64:
    return "<i8";
  }
  llvm_unreachable("unknown dtype");
}

int64_t NpyArray::getNumElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

static Error npyError(StringRef path, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), path + ": " + message);
}

/// Returns the text after `'key':` in a header dict, up to the next comma
/// at nesting depth 0 or the closing brace.
static std::optional<StringRef> findHeaderValue(StringRef header,
                                                StringRef key) {
  std::string quoted = ("'" + key + "'").str();
  size_t pos = header.find(quoted);
  if (pos == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(pos + quoted.size()).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  rest = rest.ltrim();
  int depth = 0;
  size_t end = 0;
  for (; end < rest.size(); ++end) {
    char c = rest[end];
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  return rest.take_front(end).trim();
}

Expected<NpyArray> loom::readNpy(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return npyError(path, "cannot open: " + buffer.getError().message());
  StringRef bytes = (*buffer)->getBuffer();
  if (!bytes.starts_with("\x93NUMPY") || bytes.size() < 10)
    return npyError(path, "not a .npy file (bad magic)");
  uint8_t major = bytes[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return npyError(path, "truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return npyError(path, "unsupported .npy version " + Twine(int(major)));
  }
  if (bytes.size() < headerStart + headerLen)
    return npyError(path, "truncated header");
  StringRef header = bytes.substr(headerStart, headerLen);

  NpyArray array;
  std::optional<StringRef> descr = findHeaderValue(header, "descr");
  if (!descr)
    return npyError(path, "header has no 'descr'");
  StringRef d = descr->trim("'\"");
  if (d == "<f4")
    array.dtype = NpyDType::F32;
  else if (d == "<f8")
    array.dtype = NpyDType::F64;
  else if (d == "<i4")
    array.dtype = NpyDType::I32;
  else if (d == "<i8")
    array.dtype = NpyDType::I64;
  else
    return npyError(path, "unsupported dtype '" + d +
                              "' (expected <f4, <f8, <i4 or <i8)");
  std::optional<StringRef> fortran = findHeaderValue(header, "fortran_order");
  if (!fortran || *fortran != "False")
    return npyError(path, "only C-order arrays are supported");
  std::optional<StringRef> shapeText = findHeaderValue(header, "shape");
  if (!shapeText || !shapeText->starts_with("(") || !shapeText->ends_with(")"))
    return npyError(path, "header has no shape tuple");
  SmallVector<StringRef> dims;
  shapeText->drop_front().drop_back().split(dims, ',', -1, /*KeepEmpty=*/false);
  for (StringRef dim : dims) {
    int64_t size;
    if (dim.trim().getAsInteger(10, size) || size < 0)
      return npyError(path, "bad dimension '" + dim.trim() + "' in shape");
    array.shape.push_back(size);
  }
  size_t dataBytes =
      size_t(array.getNumElements()) * size_t(getNpyElementBytes(array.dtype));
  StringRef payload = bytes.drop_front(headerStart + headerLen);
  if (payload.size() != dataBytes)
    return npyError(path, "expected " + Twine(dataBytes) +
                              " bytes of data for the shape, found " +
                              Twine(payload.size()));
  array.data.assign(payload.begin(), payload.end());
  return array;
}

Error loom::writeNpy(StringRef path, const NpyArray &array) {
  std::string shape = "(";
  for (int64_t dim : array.shape)
    shape += std::to_string(dim) + ",";
  if (array.shape.size() > 1)
    shape.pop_back();
  shape += ")";
  std::string header = ("{'descr': '" + getNpyDescr(array.dtype) +
                        "', 'fortran_order': False, 'shape': " + shape + ", }")
                           .str();
  // Pad so the data starts on a 64-byte boundary, ending in a newline.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');

  std::string bytes = "\x93NUMPY";
  bytes +=
      {char(1), char(0), char(header.size() & 0xff), char(header.size() >> 8)};
  bytes += header;
  bytes.append(array.data.begin(), array.data.end());
  std::string error = loom::runtime::writeFileDurably(path.str(), bytes);
  if (!error.empty())
    return createStringError(inconvertibleErrorCode(), error);
  return Error::success();
}
