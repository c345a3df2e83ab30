//===- CheckpointDirectoryTest.cpp - every state a kill can leave ---------===//
//
// The trainer's checkpoint protocol (runtime/Trainer/CheckpointDirectory.cpp)
// from each state a killed trainer can leave behind. The integration test
// (trainers.py durable) kills real trainers at each of these points.
//
//===----------------------------------------------------------------------===//

#include "Trainer/Checkpoint.h"
#include "loom/Runtime/DurableFile.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

using namespace loom::runtime;
namespace fs = std::filesystem;

namespace {

class CheckpointDirectoryTest : public ::testing::Test {
protected:
  void SetUp() override {
    root = (fs::temp_directory_path() /
            ("loom-ckpt-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(root);
  }
  void TearDown() override { fs::remove_all(root); }

  /// Writes a checkpoint of step `step` whose one file says `text`.
  void save(int64_t step, const std::string &text) {
    std::string tmp;
    ASSERT_EQ(beginCheckpoint(root, step, tmp), "");
    ASSERT_EQ(writeFileDurably(tmp + "/manifest.json", text), "");
    ASSERT_EQ(commitCheckpoint(root, step, tmp), "");
  }
  std::string read(const std::string &path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<std::string> entries() {
    std::vector<std::string> names;
    for (const auto &entry : fs::directory_iterator(root))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string latest() {
    std::string dir;
    std::string error = findLatestCheckpoint(root, dir);
    return error.empty() ? read(dir + "/manifest.json") : error;
  }

  std::string root;
};

using Names = std::vector<std::string>;

TEST_F(CheckpointDirectoryTest, CommitsAndPointsLatestAtIt) {
  save(1, "one");
  save(2, "two");
  EXPECT_EQ(entries(), (Names{"latest", "step-1", "step-2"}));
  EXPECT_EQ(read(root + "/latest"), "step-2\n");
  EXPECT_EQ(latest(), "two");
}

TEST_F(CheckpointDirectoryTest, ReplacesAStepWhole) {
  save(1, "first run");
  save(1, "second run");
  EXPECT_EQ(entries(), (Names{"latest", "step-1"}));
  EXPECT_EQ(latest(), "second run");
}

TEST_F(CheckpointDirectoryTest, AnUnfinishedCheckpointIsRemoved) {
  save(1, "one");
  std::string tmp;
  ASSERT_EQ(beginCheckpoint(root, 2, tmp), "");
  ASSERT_EQ(writeFileDurably(tmp + "/manifest.json", "half"), "");
  // Killed here; also a `latest` killed before its rename.
  std::ofstream(root + "/latest.tmp-12345") << "step-2\n";
  EXPECT_EQ(latest(), "one");
  ASSERT_EQ(cleanCheckpointRoot(root), "");
  EXPECT_EQ(entries(), (Names{"latest", "step-1"}));
}

TEST_F(CheckpointDirectoryTest, AKillBetweenTheRenamesOfAReplacement) {
  save(3, "old");
  // The old step-3 moved aside, the new one not yet renamed in.
  fs::rename(root + "/step-3", root + "/step-3.old");
  std::string tmp;
  ASSERT_EQ(beginCheckpoint(root, 3, tmp), "");
  EXPECT_EQ(latest(), "old");
  ASSERT_EQ(cleanCheckpointRoot(root), "");
  EXPECT_EQ(entries(), (Names{"latest", "step-3"}));
  EXPECT_EQ(latest(), "old");
}

TEST_F(CheckpointDirectoryTest, AKillBeforeTheOldCopyWasRemoved) {
  save(3, "old");
  fs::copy(root + "/step-3", root + "/step-3.old");
  std::ofstream(root + "/step-3/manifest.json") << "new";
  EXPECT_EQ(latest(), "new");
  ASSERT_EQ(cleanCheckpointRoot(root), "");
  EXPECT_EQ(entries(), (Names{"latest", "step-3"}));
  EXPECT_EQ(latest(), "new");
}

TEST_F(CheckpointDirectoryTest, CleaningLeavesWhatTheUserPutThere) {
  save(1, "one");
  std::ofstream(root + "/notes.tmp-1") << "mine";
  std::ofstream(root + "/step-x.old") << "mine";
  ASSERT_EQ(cleanCheckpointRoot(root), "");
  EXPECT_EQ(entries(),
            (Names{"latest", "notes.tmp-1", "step-1", "step-x.old"}));
}

TEST_F(CheckpointDirectoryTest, PruneKeepsLatestAndTheOnesBeforeIt) {
  for (int64_t step : {1, 2, 3, 4, 5, 6})
    save(step, "s" + std::to_string(step));
  // A fresh run into the same root: `latest` is now step-4; step-5 and
  // step-6 are the earlier run's, left for this run to replace.
  save(4, "rerun");
  fs::create_directory(root + "/step-0"); // no manifest: not the trainer's
  ASSERT_EQ(pruneCheckpoints(root, 0), "");
  ASSERT_EQ(pruneCheckpoints(root, 2), "");
  EXPECT_EQ(entries(), (Names{"latest", "step-0", "step-3", "step-4", "step-5",
                              "step-6"}));
  ASSERT_EQ(pruneCheckpoints(root, 1), "");
  EXPECT_EQ(entries(),
            (Names{"latest", "step-0", "step-4", "step-5", "step-6"}));
  EXPECT_EQ(latest(), "rerun");
}

TEST_F(CheckpointDirectoryTest, APruneCutShortIsFinishedAtStart) {
  save(1, "one");
  save(2, "two");
  // Killed inside remove_all: what is left is under a temporary name.
  fs::rename(root + "/step-1", temporarySibling(root + "/step-1"));
  ASSERT_EQ(cleanCheckpointRoot(root), "");
  EXPECT_EQ(entries(), (Names{"latest", "step-2"}));
}

TEST_F(CheckpointDirectoryTest, CreatesTheRootAndItsParents) {
  std::string base = root;
  root += "/a/b";
  save(1, "one");
  EXPECT_EQ(latest(), "one");
  root = base;
}

TEST_F(CheckpointDirectoryTest, ANameTooLongForAStepIsNotOne) {
  save(1, "one");
  fs::create_directory(root + "/step-99999999999999999999");
  std::ofstream(root + "/step-99999999999999999999/manifest.json") << "x";
  ASSERT_EQ(pruneCheckpoints(root, 1), "");
  ASSERT_EQ(cleanCheckpointRoot(root), "");
  std::ofstream(root + "/latest") << "step-99999999999999999999\n";
  EXPECT_NE(latest().find("not a step-K directory"), std::string::npos);
}

TEST_F(CheckpointDirectoryTest, LatestMustBeARegularFileNamingAStep) {
  save(1, "one");
  std::ofstream(root + "/latest") << "../../etc\n";
  EXPECT_NE(latest().find("not a step-K directory"), std::string::npos);
  fs::remove(root + "/latest");
  EXPECT_NE(latest().find("'latest' file is missing"), std::string::npos);
  fs::create_directory(root + "/latest");
  EXPECT_NE(cleanCheckpointRoot(root).find("is not a regular file"),
            std::string::npos);
  std::string tmp;
  ASSERT_EQ(beginCheckpoint(root, 2, tmp), "");
  EXPECT_NE(commitCheckpoint(root, 2, tmp).find("is not a regular file"),
            std::string::npos);
}

} // namespace
