//===- TokenData.cpp - the trainer's token file ---------------------------===//

#include "TokenData.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token files are little-endian; the trainer reads them in place"
#endif

using namespace loom::runtime;

namespace {

/// llm.c's shard headers: 256 int32s, of which the magic, the version and
/// the token count are read.
constexpr int64_t kLlmcHeaderBytes = 256 * 4;
struct LlmcKind {
  int32_t magic, version, width;
};
constexpr LlmcKind kLlmcKinds[] = {{20240520, 1, 2}, {20240801, 7, 4}};

const char kNpyMagic[] = "\x93NUMPY";

int32_t readInt32(const unsigned char *at) {
  int32_t v;
  std::memcpy(&v, at, 4);
  return v;
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The first of `ids` (n of them) outside [0, bound), or -1.
/// Id `i` of `ids`, stored as T (the file's bytes need not be aligned).
template <typename T> T load(const unsigned char *ids, int64_t i) {
  T v;
  std::memcpy(&v, ids + i * int64_t(sizeof(T)), sizeof(T));
  return v;
}

template <typename T>
int64_t findOutside(const unsigned char *ids, int64_t n, int64_t bound) {
  for (int64_t i = 0; i < n; ++i) {
    T v = load<T>(ids, i);
    if constexpr (std::numeric_limits<T>::is_signed) {
      if (v < 0)
        return i;
    }
    if (uint64_t(v) >= uint64_t(bound))
      return i;
  }
  return -1;
}

} // namespace

bool loom::runtime::parseTokenFormat(const std::string &name,
                                     TokenFormat &format) {
  static const std::pair<const char *, TokenFormat> kNames[] = {
      {"auto", TokenFormat::Auto},     {"bytes", TokenFormat::Bytes},
      {"uint16", TokenFormat::Uint16}, {"uint32", TokenFormat::Uint32},
      {"llmc", TokenFormat::Llmc},     {"npy", TokenFormat::Npy}};
  for (const auto &[text, value] : kNames)
    if (name == text) {
      format = value;
      return true;
    }
  return false;
}

const char *loom::runtime::getTokenFormatNames() {
  return "auto, bytes, uint16, uint32, llmc or npy";
}

TokenData::~TokenData() {
  if (map)
    munmap(map, mapBytes);
}

std::string TokenData::open(const std::string &path, TokenFormat format) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "cannot read data file " + path + ": " + std::strerror(errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "data file " + path + " is not a regular file";
  }
  mapBytes = size_t(st.st_size);
  if (mapBytes) {
    map = mmap(nullptr, mapBytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      map = nullptr;
      ::close(fd);
      return "cannot map data file " + path + ": " + std::strerror(errno);
    }
    base = static_cast<const unsigned char *>(map);
  }
  ::close(fd);
  bool isNpy = mapBytes >= 6 && std::memcmp(base, kNpyMagic, 6) == 0;
  bool isLlmc = false;
  if (mapBytes >= 4)
    for (const LlmcKind &kind : kLlmcKinds)
      isLlmc |= readInt32(base) == kind.magic;
  switch (format) {
  case TokenFormat::Auto:
    if (isNpy)
      return readNpyHeader(path);
    if (isLlmc)
      return readLlmcHeader(path);
    if (endsWith(path, ".bin"))
      return "data file " + path +
             " has no llm.c header; a .bin file of raw ids (nanoGPT's) "
             "needs --data-format uint16 or uint32, and --data-format bytes "
             "reads its bytes as tokens";
    return setRaw(path, 1, "bytes");
  case TokenFormat::Bytes:
    return setRaw(path, 1, "bytes");
  case TokenFormat::Uint16:
    return setRaw(path, 2, "uint16");
  case TokenFormat::Uint32:
    return setRaw(path, 4, "uint32");
  case TokenFormat::Llmc:
    if (!isLlmc)
      return "data file " + path +
             " is not an llm.c shard (its first int32 is not the magic "
             "20240520 or 20240801)";
    return readLlmcHeader(path);
  case TokenFormat::Npy:
    if (!isNpy)
      return "data file " + path + " is not a .npy file (no \\x93NUMPY magic)";
    return readNpyHeader(path);
  }
  return "unknown data format";
}

std::string TokenData::setRaw(const std::string &path, int bytes,
                              const char *name) {
  width = bytes;
  first = 0;
  if (mapBytes % size_t(bytes))
    return "data file " + path + " has " + std::to_string(mapBytes) +
           " bytes, not a whole number of " + name + " ids";
  count = int64_t(mapBytes) / bytes;
  description = name;
  return "";
}

std::string TokenData::readLlmcHeader(const std::string &path) {
  if (mapBytes < size_t(kLlmcHeaderBytes))
    return "data file " + path + ": an llm.c shard's header is " +
           std::to_string(kLlmcHeaderBytes) + " bytes, the file has " +
           std::to_string(mapBytes);
  int32_t magic = readInt32(base), version = readInt32(base + 4),
          tokens = readInt32(base + 8);
  const LlmcKind *kind = nullptr;
  for (const LlmcKind &k : kLlmcKinds)
    if (k.magic == magic && k.version == version)
      kind = &k;
  if (!kind)
    return "data file " + path + ": llm.c magic " + std::to_string(magic) +
           " with version " + std::to_string(version) +
           " is not a shard Loom reads (20240520 version 1: uint16 ids; "
           "20240801 version 7: uint32 ids)";
  width = kind->width;
  first = kLlmcHeaderBytes;
  int64_t payload = int64_t(mapBytes) - kLlmcHeaderBytes;
  if (tokens < 0 || int64_t(tokens) * width != payload)
    return "data file " + path + ": its llm.c header says " +
           std::to_string(tokens) + " tokens (" +
           std::to_string(int64_t(tokens) * width) +
           " bytes), the file holds " + std::to_string(payload) +
           " bytes after the header";
  count = tokens;
  description = width == 2 ? "llmc (uint16)" : "llmc (uint32)";
  return "";
}

std::string TokenData::readNpyHeader(const std::string &path) {
  auto bad = [&](const std::string &what) {
    return "data file " + path + ": " + what;
  };
  if (mapBytes < 10)
    return bad("truncated .npy header");
  int major = base[6];
  int64_t length = 0, start = 0;
  if (major == 1) {
    length = base[8] | (int64_t(base[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (mapBytes < 12)
      return bad("truncated .npy header");
    length = uint32_t(readInt32(base + 8));
    start = 12;
  } else {
    return bad(".npy version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  if (start + length > int64_t(mapBytes))
    return bad("truncated .npy header");
  std::string header(reinterpret_cast<const char *>(base + start),
                     size_t(length));
  auto value = [&](const std::string &key) -> std::string {
    size_t at = header.find("'" + key + "':");
    if (at == std::string::npos)
      return "";
    at = header.find_first_not_of(' ', at + key.size() + 3);
    if (at == std::string::npos)
      return "";
    if (header[at] == '(') {
      size_t end = header.find(')', at);
      return end == std::string::npos ? "" : header.substr(at, end - at + 1);
    }
    size_t end = header.find_first_of(",}", at);
    return end == std::string::npos ? "" : header.substr(at, end - at);
  };
  std::string descr = value("descr"), order = value("fortran_order"),
              shape = value("shape");
  static const struct {
    const char *descr;
    int width;
    bool isSigned;
  } kTypes[] = {{"'|u1'", 1, false}, {"'<u2'", 2, false}, {"'<u4'", 4, false},
                {"'<u8'", 8, false}, {"'<i2'", 2, true},  {"'<i4'", 4, true},
                {"'<i8'", 8, true}};
  bool known = false;
  for (const auto &type : kTypes)
    if (descr == type.descr) {
      width = type.width;
      isSigned = type.isSigned;
      known = true;
    }
  if (!known)
    return bad("a .npy array of " + (descr.empty() ? "no dtype" : descr) +
               "; token ids are little-endian integers (uint8/16/32/64, "
               "int16/32/64)");
  if (shape.size() < 2)
    return bad("a .npy header without a shape");
  // The shape's product: "(n,)", "(a, b)", "()".
  int64_t elements = 1, dims = 0;
  const char *p = shape.c_str() + 1;
  while (*p && *p != ')') {
    if (*p == ',' || *p == ' ') {
      ++p;
      continue;
    }
    char *end = nullptr;
    errno = 0;
    long long d = std::strtoll(p, &end, 10);
    if (end == p || d < 0 || errno == ERANGE)
      return bad("a .npy shape that does not parse: " + shape);
    // The bytes of ids must fit the file: no product past it is taken.
    if (d && elements > std::numeric_limits<int64_t>::max() / width / d)
      return bad("a .npy shape too large: " + shape);
    elements *= d;
    ++dims;
    p = end;
  }
  if (order != "False" && dims > 1)
    return bad("a Fortran-ordered .npy array; save it in C order");
  first = start + length;
  int64_t payload = int64_t(mapBytes) - first;
  if (elements > payload / width || elements * width != payload)
    return bad("the .npy shape " + shape + " is " + std::to_string(elements) +
               " ids of " + std::to_string(width) + " bytes, the file holds " +
               std::to_string(payload) + " bytes of data");
  count = elements;
  description = "npy (" + descr.substr(1, descr.size() - 2) + ")";
  return "";
}

int64_t TokenData::operator[](int64_t i) const {
  const unsigned char *ids = base + first;
  switch (width) {
  case 1:
    return ids[i];
  // Each branch widened on its own: a ternary of the two types would read
  // a negative int32 as uint32.
  case 2:
    return isSigned ? int64_t(load<int16_t>(ids, i))
                    : int64_t(load<uint16_t>(ids, i));
  case 4:
    return isSigned ? int64_t(load<int32_t>(ids, i))
                    : int64_t(load<uint32_t>(ids, i));
  default:
    // uint64 ids past int64's range read as negative: out of range.
    return load<int64_t>(ids, i);
  }
}

int64_t TokenData::findOutOfRange(int64_t bound) const {
  auto scan = [&](const unsigned char *ids, int64_t n) -> int64_t {
    switch (width) {
    case 1:
      return findOutside<uint8_t>(ids, n, bound);
    case 2:
      return isSigned ? findOutside<int16_t>(ids, n, bound)
                      : findOutside<uint16_t>(ids, n, bound);
    case 4:
      return isSigned ? findOutside<int32_t>(ids, n, bound)
                      : findOutside<uint32_t>(ids, n, bound);
    default:
      // uint64 ids are read as int64: one past int64's range is negative.
      return findOutside<int64_t>(ids, n, bound);
    }
  };
  const int64_t chunk = (int64_t(64) << 20) / width;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t released = uintptr_t(base);
  for (int64_t at = 0; at < count; at += chunk) {
    const unsigned char *ids = base + first + at * width;
    int64_t found = scan(ids, std::min(chunk, count - at));
    if (found >= 0)
      return at + found;
    // The whole pages read so far leave the resident set.
    uintptr_t end =
        uintptr_t(ids + std::min(chunk, count - at) * width) / page * page;
    if (end > released) {
      madvise(reinterpret_cast<void *>(released), end - released,
              MADV_DONTNEED);
      released = end;
    }
  }
  return -1;
}
