//===- DurableFileTest.cpp - files replaced atomically, only regular ones -===//

#include "loom/Runtime/DurableFile.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

using namespace loom::runtime;
namespace fs = std::filesystem;

namespace {

class DurableFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("loom-durable-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string read(const fs::path &path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  /// The names in `dir`, so that a stray temporary shows.
  std::vector<std::string> entries() {
    std::vector<std::string> names;
    for (const auto &entry : fs::directory_iterator(dir))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir;
};

TEST_F(DurableFileTest, ReplacesARegularFileAndLeavesNoTemporary) {
  fs::path file = dir / "out.txt";
  ASSERT_EQ(writeFileDurably(file, "old"), "");
  struct stat info;
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  ino_t before = info.st_ino;
  ASSERT_EQ(writeFileDurably(file, "new contents"), "");
  EXPECT_EQ(read(file), "new contents");
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  // Replaced by a rename, not rewritten in place.
  EXPECT_NE(info.st_ino, before);
  EXPECT_EQ(entries(), std::vector<std::string>{"out.txt"});
}

TEST_F(DurableFileTest, KeepsThePermissionsOfTheFileItReplaces) {
  fs::path file = dir / "script.sh";
  ASSERT_EQ(writeFileDurably(file, "a"), "");
  fs::permissions(file, fs::perms::owner_all | fs::perms::group_read);
  ASSERT_EQ(writeFileDurably(file, "b"), "");
  EXPECT_EQ(fs::status(file).permissions(),
            fs::perms::owner_all | fs::perms::group_read);
}

TEST_F(DurableFileTest, AnUncommittedFileChangesNothing) {
  fs::path file = dir / "keep.txt";
  ASSERT_EQ(writeFileDurably(file, "kept"), "");
  {
    DurableFile half(file);
    ASSERT_TRUE(half.write(std::string("half written")));
    // Destroyed without commit(): a process that fails midway.
  }
  EXPECT_EQ(read(file), "kept");
  EXPECT_EQ(entries(), std::vector<std::string>{"keep.txt"});
}

TEST_F(DurableFileTest, WritesADeviceInPlace) {
  ASSERT_EQ(writeFileDurably("/dev/null", "discarded"), "");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(DurableFileTest, AFullDeviceIsAnError) {
  if (!fs::exists("/dev/full"))
    GTEST_SKIP() << "no /dev/full";
  std::string error = writeFileDurably("/dev/full", std::string(8192, 'x'));
  EXPECT_NE(error.find("cannot write /dev/full: write: No space left"),
            std::string::npos)
      << error;
}

TEST_F(DurableFileTest, ASymbolicLinkStaysALink) {
  fs::path target = dir / "target.txt", link = dir / "link.txt";
  ASSERT_EQ(writeFileDurably(target, "old"), "");
  fs::create_symlink(target, link);
  ASSERT_EQ(writeFileDurably(link, "through the link"), "");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read(target), "through the link");
}

TEST_F(DurableFileTest, ADanglingLinkOrADirectoryIsAnError) {
  fs::create_symlink(dir / "nowhere", dir / "dangling");
  EXPECT_NE(writeFileDurably(dir / "dangling", "x").find("realpath"),
            std::string::npos);
  EXPECT_TRUE(fs::is_symlink(dir / "dangling"));
  fs::create_directory(dir / "sub");
  EXPECT_NE(writeFileDurably(dir / "sub", "x").find("it is a directory"),
            std::string::npos);
  EXPECT_TRUE(fs::is_directory(dir / "sub"));
}

TEST_F(DurableFileTest, AMissingDirectoryIsAnError) {
  std::string error = writeFileDurably(dir / "missing" / "file", "x");
  EXPECT_NE(error.find("open: No such file or directory"), std::string::npos)
      << error;
}

} // namespace
