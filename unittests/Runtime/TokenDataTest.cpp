//===- TokenDataTest.cpp - the trainer's token file formats ---------------===//
//
// The same ids written in each format read back the same; each malformed
// file is an error that says what is wrong; the range check names the first
// id out of range.
//
//===----------------------------------------------------------------------===//

#include "Trainer/TokenData.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using loom::runtime::parseTokenFormat;
using loom::runtime::TokenData;
using loom::runtime::TokenFormat;

namespace {

class TokenDataTest : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/loom-token-data-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir + "'";
    ASSERT_EQ(std::system(command.c_str()), 0);
  }

  std::string write(const std::string &name, const std::string &bytes) {
    std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  template <typename T> static std::string raw(const std::vector<T> &ids) {
    return std::string(reinterpret_cast<const char *>(ids.data()),
                       ids.size() * sizeof(T));
  }
  static std::string llmc(int32_t magic, int32_t version, int32_t count) {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = count;
    return raw(header);
  }
  /// A version 1.0 .npy header for `descr` and `shape`, padded as NumPy
  /// pads it (to a multiple of 64 bytes with the magic).
  static std::string npy(const std::string &descr, const std::string &shape,
                         bool fortran = false) {
    std::string dict = "{'descr': '" + descr +
                       "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
    size_t total = 10 + dict.size() + 1;
    dict += std::string((64 - total % 64) % 64, ' ') + "\n";
    std::string header = "\x93NUMPY";
    header += char(1);
    header += char(0);
    header += char(dict.size() & 0xff);
    header += char(dict.size() >> 8);
    return header + dict;
  }
  static std::vector<int64_t> read(const TokenData &data) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < data.size(); ++i)
      ids.push_back(data[i]);
    return ids;
  }

  std::string dir;
  const std::vector<int64_t> ids = {3, 255, 0, 17, 1, 200};
};

TEST_F(TokenDataTest, EveryFormatReadsTheSameIds) {
  std::vector<uint16_t> u16(ids.begin(), ids.end());
  std::vector<uint32_t> u32(ids.begin(), ids.end());
  std::vector<int64_t> i64(ids.begin(), ids.end());
  std::string bytes(ids.begin(), ids.end());
  struct Case {
    std::string file;
    TokenFormat format;
    std::string describe;
  } cases[] = {
      {write("text.txt", bytes), TokenFormat::Auto, "bytes"},
      {write("text.bin", bytes), TokenFormat::Bytes, "bytes"},
      {write("ids16.bin", raw(u16)), TokenFormat::Uint16, "uint16"},
      {write("ids32.raw", raw(u32)), TokenFormat::Uint32, "uint32"},
      {write("shard.bin", llmc(20240520, 1, 6) + raw(u16)), TokenFormat::Auto,
       "llmc (uint16)"},
      {write("shard32.bin", llmc(20240801, 7, 6) + raw(u32)), TokenFormat::Llmc,
       "llmc (uint32)"},
      {write("a.npy", npy("<u2", "(6,)") + raw(u16)), TokenFormat::Auto,
       "npy (<u2)"},
      {write("b.npy", npy("<i8", "(2, 3)") + raw(i64)), TokenFormat::Npy,
       "npy (<i8)"},
      {write("c.npy", npy("|u1", "(6,)") + bytes), TokenFormat::Auto,
       "npy (|u1)"},
  };
  for (const Case &c : cases) {
    TokenData data;
    ASSERT_EQ(data.open(c.file, c.format), "") << c.file;
    EXPECT_EQ(read(data), ids) << c.file;
    EXPECT_EQ(data.describe(), c.describe) << c.file;
    EXPECT_EQ(data.findOutOfRange(256), -1) << c.file;
    EXPECT_EQ(data.findOutOfRange(200), 1) << c.file;
  }
}

TEST_F(TokenDataTest, TheRangeCheckNamesTheFirstBadId) {
  std::vector<uint16_t> u16 = {1, 2, 300, 4, 255};
  TokenData data;
  ASSERT_EQ(data.open(write("ids.u16", raw(u16)), TokenFormat::Uint16), "");
  EXPECT_EQ(data.findOutOfRange(256), 2);
  EXPECT_EQ(data.getByteOffset(2), 4);
  EXPECT_EQ(data[2], 300);
  EXPECT_EQ(data.findOutOfRange(301), -1);
  // A negative id of a signed array is out of range, as is a uint64 id
  // past int64's range.
  std::vector<int32_t> negative = {5, -1, 7};
  TokenData signedData;
  ASSERT_EQ(signedData.open(write("n.npy", npy("<i4", "(3,)") + raw(negative)),
                            TokenFormat::Auto),
            "");
  EXPECT_EQ(signedData.findOutOfRange(256), 1);
  EXPECT_EQ(signedData[1], -1);
  std::vector<uint64_t> huge = {1, uint64_t(1) << 63};
  TokenData hugeData;
  ASSERT_EQ(hugeData.open(write("h.npy", npy("<u8", "(2,)") + raw(huge)),
                          TokenFormat::Npy),
            "");
  EXPECT_EQ(hugeData.findOutOfRange(int64_t(1) << 31), 1);
}

/// The scan goes by chunks of 64 MiB, each released once read: an id past
/// the first chunk, and one in the last partial chunk, are found where they
/// are.
TEST_F(TokenDataTest, TheRangeCheckCrossesChunks) {
  std::vector<uint16_t> ids((int64_t(80) << 20) / 2, 7);
  int64_t second = (int64_t(64) << 20) / 2 + 12345;
  ids[second] = 500;
  std::string path = write("large.u16", raw(ids));
  TokenData data;
  ASSERT_EQ(data.open(path, TokenFormat::Uint16), "");
  EXPECT_EQ(data.findOutOfRange(256), second);
  EXPECT_EQ(data.findOutOfRange(501), -1);
  EXPECT_EQ(data[second], 500);
  EXPECT_EQ(data[int64_t(ids.size()) - 1], 7);
}

TEST_F(TokenDataTest, MalformedFilesSayWhatIsWrong) {
  std::vector<uint16_t> u16 = {1, 2, 3};
  struct Case {
    std::string file;
    TokenFormat format;
    std::string message;
  } cases[] = {
      {dir + "/missing.txt", TokenFormat::Auto, "cannot read data file"},
      {dir, TokenFormat::Auto, "is not a regular file"},
      {write("nanogpt.bin", raw(u16)), TokenFormat::Auto,
       "needs --data-format uint16 or uint32"},
      {write("odd.u16", "abc"), TokenFormat::Uint16,
       "3 bytes, not a whole number of uint16 ids"},
      {write("odd.u32", raw(u16)), TokenFormat::Uint32,
       "6 bytes, not a whole number of uint32 ids"},
      {write("text.txt", "hello"), TokenFormat::Llmc, "not an llm.c shard"},
      {write("short.bin", llmc(20240520, 1, 4) + raw(u16)), TokenFormat::Auto,
       "header says 4 tokens (8 bytes), the file holds 6 bytes"},
      {write("version.bin", llmc(20240520, 7, 3) + raw(u16)), TokenFormat::Auto,
       "version 7 is not a shard Loom reads"},
      {write("cut.bin", llmc(20240801, 7, 3).substr(0, 100)), TokenFormat::Auto,
       "header is 1024 bytes, the file has 100"},
      {write("text2.txt", "hello"), TokenFormat::Npy, "is not a .npy file"},
      {write("f.npy", npy("<f4", "(3,)") + std::string(12, '\0')),
       TokenFormat::Auto, "a .npy array of '<f4'"},
      {write("be.npy", npy(">u2", "(3,)") + raw(u16)), TokenFormat::Auto,
       "a .npy array of '>u2'"},
      {write("fortran.npy", npy("<u2", "(1, 3)", true) + raw(u16)),
       TokenFormat::Auto, "Fortran-ordered"},
      {write("shape.npy", npy("<u2", "(4,)") + raw(u16)), TokenFormat::Auto,
       "the .npy shape (4,) is 4 ids of 2 bytes, the file holds 6 bytes"},
      // Shapes whose bytes wrap around 64 bits: refused, never read.
      {write("wrap.npy", npy("<u8", "(2305843009213693952,)")),
       TokenFormat::Auto, "a .npy shape too large"},
      {write("wrap2.npy", npy("<u4", "(2147483648, 2147483648)")),
       TokenFormat::Auto, "a .npy shape too large"},
      {write("range.npy", npy("<u2", "(99999999999999999999,)")),
       TokenFormat::Auto, "a .npy shape that does not parse"},
      {write("cut.npy", npy("<u2", "(3,)").substr(0, 20)), TokenFormat::Auto,
       "truncated .npy header"},
  };
  for (const Case &c : cases) {
    TokenData data;
    std::string error = data.open(c.file, c.format);
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.file << ": got '" << error << "'";
  }
}

TEST_F(TokenDataTest, FormatNames) {
  TokenFormat format = TokenFormat::Auto;
  EXPECT_TRUE(parseTokenFormat("uint16", format));
  EXPECT_EQ(format, TokenFormat::Uint16);
  EXPECT_TRUE(parseTokenFormat("llmc", format));
  EXPECT_EQ(format, TokenFormat::Llmc);
  EXPECT_FALSE(parseTokenFormat("u16", format));
  EXPECT_FALSE(parseTokenFormat("", format));
}

TEST_F(TokenDataTest, AnEmptyFileHasNoTokens) {
  TokenData data;
  ASSERT_EQ(data.open(write("empty.txt", ""), TokenFormat::Auto), "");
  EXPECT_EQ(data.size(), 0);
  EXPECT_EQ(data.findOutOfRange(1), -1);
}

} // namespace
