//===- SampleDataTest.cpp - the trainer's --input .npy samples ------------===//
//
// f32 and integer rows read back; sample indices wrap; each malformed file
// is an error that says what is wrong.
//
//===----------------------------------------------------------------------===//

#include "Trainer/SampleData.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using loom::runtime::SampleData;

namespace {

class SampleDataTest : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/loom-sample-data-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir + "'";
    ASSERT_EQ(std::system(command.c_str()), 0);
  }
  /// A .npy (version 1.0) of `descr` and `shape` holding `data`.
  template <typename T>
  std::string npy(const std::string &name, const std::string &descr,
                  const std::string &shape, const std::vector<T> &data,
                  bool fortran = false) {
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': " +
                       (fortran ? "True" : "False") + ", 'shape': " + shape +
                       ", }";
    size_t total = 10 + dict.size() + 1;
    dict += std::string((64 - total % 64) % 64, ' ') + "\n";
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += char(dict.size() & 0xff);
    bytes += char(dict.size() >> 8);
    bytes += dict;
    bytes += std::string(reinterpret_cast<const char *>(data.data()),
                         data.size() * sizeof(T));
    std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string dir;
};

TEST_F(SampleDataTest, ReadsRowsAndWraps) {
  SampleData x;
  std::string path = npy<float>("x.npy", "<f4", "(3, 2)", {1, 2, 3, 4, 5, 6});
  ASSERT_EQ(x.open(path, {2}, "f32"), "");
  EXPECT_EQ(x.rows(), 3);
  float row[2];
  x.copyRow(1, row);
  EXPECT_EQ(row[0], 3.0f);
  EXPECT_EQ(row[1], 4.0f);
  x.copyRow(5, row); // 5 mod 3 = 2
  EXPECT_EQ(row[0], 5.0f);
  EXPECT_EQ(row[1], 6.0f);
}

TEST_F(SampleDataTest, IntegersNarrowToI32) {
  SampleData y;
  std::string path = npy<int64_t>("y.npy", "<i8", "(4,)", {7, -1, 0, 9});
  ASSERT_EQ(y.open(path, {}, "i32"), "");
  int32_t value;
  y.copyRow(1, &value);
  EXPECT_EQ(value, -1);
  std::string big =
      npy<int64_t>("big.npy", "<i8", "(2,)", {1, int64_t(1) << 40});
  EXPECT_NE(y.open(big, {}, "i32").find("outside int32"), std::string::npos);
}

TEST_F(SampleDataTest, MalformedFilesSayWhat) {
  SampleData d;
  auto error = [&](const std::string &path, std::vector<int64_t> row,
                   const std::string &dtype) { return d.open(path, row, dtype); };
  EXPECT_NE(error(npy<float>("a.npy", "<f4", "(2, 3)", {1, 2, 3, 4, 5, 6}),
                  {2}, "f32")
                .find("does not hold samples of [2]"),
            std::string::npos);
  EXPECT_NE(error(npy<double>("b.npy", "<f8", "(2,)", {1, 2}), {}, "f32")
                .find("save it as float32"),
            std::string::npos);
  EXPECT_NE(error(npy<float>("c.npy", "<f4", "(3,)", {1, 2}), {}, "f32")
                .find("is not the 3 elements"),
            std::string::npos);
  EXPECT_NE(error(npy<float>("d.npy", "<f4", "(2,)", {1, 2}, true), {}, "f32")
                .find("Fortran"),
            std::string::npos);
  EXPECT_NE(error(npy<float>("e.npy", "<f4", "(0,)", {}), {}, "f32")
                .find("no samples"),
            std::string::npos);
  EXPECT_NE(error(dir + "/missing.npy", {}, "f32").find("cannot read"),
            std::string::npos);
  std::ofstream(dir + "/text.npy") << "not numpy";
  EXPECT_NE(error(dir + "/text.npy", {}, "f32").find("not a .npy file"),
            std::string::npos);
}

} // namespace
