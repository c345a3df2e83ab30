//===- DurableFileTest.cpp - files replaced atomically, only regular ones -===//

#include "loom/Runtime/DurableFile.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <thread>
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

TEST_F(DurableFileTest, WritesAFifoInPlace) {
  fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read(fifo); });
  EXPECT_EQ(writeFileDurably(fifo, "through the pipe"), "");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(entries(), std::vector<std::string>{"fifo"});
}

TEST_F(DurableFileTest, DevicesAndStreamsAreWrittenInPlace) {
  for (const char *path : {"/dev/null", "/dev/full", "/dev/stdout", "/dev/fd/1",
                           "/proc/self/fd/1"}) {
    DurableTarget target = planDurableWrite(path);
    EXPECT_TRUE(target.inPlace && target.append) << path;
    EXPECT_EQ(target.write, path);
  }
}

TEST_F(DurableFileTest, ALinkToAFifoIsWrittenThroughInPlace) {
  fs::path fifo = dir / "fifo", link = dir / "link";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink(fifo, link);
  DurableTarget target = planDurableWrite(link);
  EXPECT_TRUE(target.inPlace && target.append);
}

TEST_F(DurableFileTest, AFileWithOtherHardLinksKeepsThem) {
  fs::path file = dir / "a.txt", other = dir / "b.txt";
  ASSERT_EQ(writeFileDurably(file, "old"), "");
  fs::create_hard_link(file, other);
  ASSERT_EQ(writeFileDurably(file, "new, for both names"), "");
  EXPECT_EQ(read(other), "new, for both names");
  EXPECT_EQ(fs::hard_link_count(file), 2u);
  {
    // A write that never commits leaves both names as they were.
    DurableFile half(file);
    ASSERT_TRUE(half.write(std::string("half")));
  }
  EXPECT_EQ(read(other), "new, for both names");
}

TEST_F(DurableFileTest, TemporariesNeverCollide) {
  std::string a = temporarySibling("x"), b = temporarySibling("x");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("x.tmp-" + std::to_string(::getpid()) + "-", 0), 0u);
}

TEST_F(DurableFileTest, InstallKeepsTheWritersExecuteBits) {
  fs::path file = dir / "trainer";
  ASSERT_EQ(writeFileDurably(file, "old trainer"), "");
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  DurableTarget target = planDurableWrite(file);
  ASSERT_EQ(target.error, "");
  ASSERT_FALSE(target.inPlace);
  { std::ofstream(target.write) << "new trainer"; }
  fs::permissions(target.write, fs::perms::owner_all);
  ASSERT_EQ(installFileDurably(target), "");
  EXPECT_EQ(read(file), "new trainer");
  EXPECT_EQ(fs::status(file).permissions(), fs::perms::owner_all);
  EXPECT_EQ(entries(), std::vector<std::string>{"trainer"});
}

TEST_F(DurableFileTest, AFullDeviceIsAnError) {
  if (!fs::exists("/dev/full"))
    GTEST_SKIP() << "no /dev/full";
  // Written in place, never renamed over (as root, a regression here would
  // replace the machine's /dev/full).
  ASSERT_TRUE(planDurableWrite("/dev/full").inPlace);
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
  EXPECT_NE(writeFileDurably(dir / "dangling", "x")
                .find("a symbolic link to nothing?"),
            std::string::npos);
  EXPECT_TRUE(fs::is_symlink(dir / "dangling"));
  fs::create_directory(dir / "sub");
  EXPECT_NE(writeFileDurably(dir / "sub", "x").find("it is a directory"),
            std::string::npos);
  EXPECT_TRUE(fs::is_directory(dir / "sub"));
}

TEST_F(DurableFileTest, AMissingDirectoryIsAnError) {
  std::string path = (dir / "missing" / "file").string();
  std::string error = writeFileDurably(path, "x");
  EXPECT_EQ(error.rfind("cannot write " + path + ": open " + path + ".tmp-", 0),
            0u)
      << error;
  EXPECT_NE(error.find(": No such file or directory"), std::string::npos)
      << error;
}

} // namespace
