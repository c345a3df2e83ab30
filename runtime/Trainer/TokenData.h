//===- TokenData.h - the trainer's token file -------------------*- C++ -*-===//
//
// One file of token ids, memory-mapped: bytes, raw uint16/uint32 ids,
// llm.c shards or a .npy array (docs/Data.md). Plain C++17.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_TRAINER_TOKENDATA_H
#define LOOM_RUNTIME_TRAINER_TOKENDATA_H

#include <cstdint>
#include <string>

namespace loom::runtime {

enum class TokenFormat { Auto, Bytes, Uint16, Uint32, Llmc, Npy };

/// The format `--data-format NAME` names (auto, bytes, uint16, uint32,
/// llmc, npy); false for another name.
bool parseTokenFormat(const std::string &name, TokenFormat &format);

/// The names parseTokenFormat takes, for messages.
const char *getTokenFormatNames();

/// A file of token ids, mapped read-only.
class TokenData {
public:
  TokenData() = default;
  TokenData(const TokenData &) = delete;
  TokenData &operator=(const TokenData &) = delete;
  ~TokenData();

  /// Maps `path` and reads its header as `format` says (Auto: detected,
  /// docs/Data.md). Returns "" or what is wrong with the file.
  std::string open(const std::string &path, TokenFormat format);

  /// The number of tokens.
  int64_t size() const { return count; }
  /// Token `i`, 0 <= i < size().
  int64_t operator[](int64_t i) const;
  /// The file offset of token `i`.
  int64_t getByteOffset(int64_t i) const { return first + i * width; }
  /// The format read, as --data-format names it, with the id type
  /// ("llmc (uint16)").
  const std::string &describe() const { return description; }
  /// The index of the first token outside [0, bound), or -1. Reads the
  /// file in chunks and drops each chunk's pages from the resident set
  /// once read (they come back from the page cache when training reads
  /// them), so that a scan of a large file does not raise the process's
  /// peak resident set by the file's size.
  int64_t findOutOfRange(int64_t bound) const;

private:
  std::string readNpyHeader(const std::string &path);
  std::string readLlmcHeader(const std::string &path);
  std::string setRaw(const std::string &path, int bytes, const char *name);

  void *map = nullptr;
  size_t mapBytes = 0;
  const unsigned char *base = nullptr;
  int64_t first = 0, count = 0;
  /// Bytes of one id, and whether ids are signed.
  int width = 1;
  bool isSigned = false;
  std::string description;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_TRAINER_TOKENDATA_H
