//===- CheckpointDirectory.cpp - checkpoints put in place crash-safely ----===//
//
// The states a killed trainer can leave ROOT in, and what the next one
// makes of them (cleanCheckpointRoot at start, findLatestCheckpoint at
// --resume):
//
//   step-K.tmp-PID-RANDOM     an unfinished checkpoint, or one being
//                             pruned: removed
//   latest.tmp-PID-RANDOM     an unfinished `latest`: removed
//   step-K.old and no step-K  killed between the two renames of a
//                             replacement: step-K.old is step-K again
//   step-K.old and step-K     killed before the old one was removed:
//                             step-K.old is removed
//
// Every rename is followed by an fsync of ROOT, and every file in a
// checkpoint is fsynced (DurableFile) before the directory is renamed, so
// the same holds after a power loss.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "loom/Runtime/DurableFile.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace loom::runtime;
namespace fs = std::filesystem;

void loom::runtime::checkpointCrashPoint() {
  static const long target = [] {
    const char *value = std::getenv("LOOM_TRAINER_KILL_AT");
    return value ? std::atol(value) : 0;
  }();
  static long calls = 0;
  if (target > 0 && ++calls == target)
    std::raise(SIGKILL);
}

static std::string stepName(int64_t step) {
  return "step-" + std::to_string(step);
}

/// K for a name "step-K" (1 to 18 digits), or -1.
static int64_t stepOf(const std::string &name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 23)
    return -1;
  for (size_t i = 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9')
      return -1;
  return std::stoll(name.substr(5));
}

static std::string renameDurably(const std::string &root,
                                 const std::string &from,
                                 const std::string &to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    return "cannot rename " + from + " to " + to + ": " + std::strerror(errno);
  return syncDirectory(root);
}

/// Creates `dir` and the directories above it that are missing, syncing
/// the parent of each so that they persist.
static std::string createDirectoriesDurably(const std::string &dir) {
  std::error_code ec;
  std::vector<fs::path> missing;
  for (fs::path level = dir; !level.empty() && !fs::exists(level, ec);
       level = level.parent_path())
    missing.push_back(level);
  fs::create_directories(dir, ec);
  if (ec)
    return "cannot create " + dir + ": " + ec.message();
  for (auto level = missing.rbegin(); level != missing.rend(); ++level)
    if (std::string error = syncDirectory(parentDirectory(level->string()));
        !error.empty())
      return error;
  return "";
}

static std::string removeAll(const fs::path &path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  return ec ? "cannot remove " + path.string() + ": " + ec.message() : "";
}

std::string loom::runtime::cleanCheckpointRoot(const std::string &root) {
  std::error_code ec;
  if (!fs::exists(root, ec))
    return "";
  // `latest` is replaced, not written through: it must be a regular file.
  struct stat info;
  std::string latest = root + "/latest";
  if (::lstat(latest.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    return latest + " is not a regular file; move it away to checkpoint here";
  std::vector<fs::path> entries;
  for (const fs::directory_entry &entry : fs::directory_iterator(root, ec))
    entries.push_back(entry.path());
  if (ec)
    return "cannot list " + root + ": " + ec.message();
  for (const fs::path &path : entries) {
    std::string name = path.filename().string();
    size_t tmp = name.find(".tmp-");
    if (tmp != std::string::npos &&
        (stepOf(name.substr(0, tmp)) >= 0 || name.substr(0, tmp) == "latest")) {
      if (std::string error = removeAll(path); !error.empty())
        return error;
      continue;
    }
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".old") == 0 &&
        stepOf(name.substr(0, name.size() - 4)) >= 0) {
      fs::path current = path.parent_path() / name.substr(0, name.size() - 4);
      std::string error = fs::exists(current, ec)
                              ? removeAll(path)
                              : renameDurably(root, path, current);
      if (!error.empty())
        return error;
    }
  }
  return syncDirectory(root);
}

std::string loom::runtime::beginCheckpoint(const std::string &root,
                                           int64_t step, std::string &tmp) {
  if (std::string error = createDirectoriesDurably(root); !error.empty())
    return error;
  std::error_code ec;
  for (int attempt = 0; attempt < 16; ++attempt) {
    tmp = temporarySibling(root + "/" + stepName(step));
    if (fs::create_directory(tmp, ec))
      return "";
    if (ec)
      break;
  }
  return "cannot create " + tmp + ": " +
         (ec ? ec.message() : std::string("it exists"));
}

std::string loom::runtime::commitCheckpoint(const std::string &root,
                                            int64_t step,
                                            const std::string &tmp) {
  std::string dir = root + "/" + stepName(step), old = dir + ".old";
  // The files are synced; their directory entries persist with this.
  if (std::string error = syncDirectory(tmp); !error.empty())
    return error;
  checkpointCrashPoint();
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (std::string error = removeAll(old); !error.empty())
      return error;
    if (std::string error = renameDurably(root, dir, old); !error.empty())
      return error;
    checkpointCrashPoint();
  }
  if (std::string error = renameDurably(root, tmp, dir); !error.empty())
    return error;
  checkpointCrashPoint();
  if (std::string error = removeAll(old); !error.empty())
    return error;
  // `latest` is replaced, not written through: it must be a regular file.
  std::string latest = root + "/latest";
  struct stat info;
  if (::lstat(latest.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    return latest + " is not a regular file; move it away to checkpoint here";
  std::string error = writeFileDurably(latest, stepName(step) + "\n");
  checkpointCrashPoint();
  return error;
}

std::string loom::runtime::findLatestCheckpoint(const std::string &root,
                                                std::string &dir) {
  std::string latest = root + "/latest";
  std::ifstream in(latest);
  std::string name;
  if (!in || !std::getline(in, name) || name.empty())
    return "no checkpoint in " + root +
           " (its 'latest' file is missing or empty)";
  if (stepOf(name) < 0)
    return latest + " names '" + name + "', not a step-K directory";
  dir = root + "/" + name;
  std::error_code ec;
  if (!fs::exists(dir, ec) && fs::exists(dir + ".old", ec))
    dir += ".old";
  return "";
}

std::string loom::runtime::pruneCheckpoints(const std::string &root,
                                            int64_t keep) {
  if (keep <= 0)
    return "";
  std::string latestDir;
  if (std::string error = findLatestCheckpoint(root, latestDir); !error.empty())
    return error;
  std::string latestName = fs::path(latestDir).filename().string();
  if (latestName.size() > 4 &&
      latestName.compare(latestName.size() - 4, 4, ".old") == 0)
    latestName.resize(latestName.size() - 4);
  int64_t latest = stepOf(latestName);
  // Only what a trainer wrote (a step-K with a manifest) before `latest`;
  // steps after it are an earlier run's, which this run replaces as it
  // reaches them.
  std::vector<int64_t> before;
  std::error_code ec;
  for (const fs::directory_entry &entry : fs::directory_iterator(root, ec)) {
    int64_t step = stepOf(entry.path().filename().string());
    if (step >= 0 && step < latest && entry.is_directory(ec) &&
        fs::exists(entry.path() / "manifest.json", ec))
      before.push_back(step);
  }
  if (ec)
    return "cannot list " + root + ": " + ec.message();
  std::sort(before.begin(), before.end());
  int64_t drop = int64_t(before.size()) - (keep - 1);
  for (int64_t i = 0; i < drop; ++i) {
    // Renamed to a temporary first, so that a removal cut short is
    // finished by the next start (cleanCheckpointRoot), never half a
    // checkpoint left under its name.
    std::string dir = root + "/" + stepName(before[i]);
    std::string doomed = temporarySibling(dir);
    if (std::string error = renameDurably(root, dir, doomed); !error.empty())
      return error;
    checkpointCrashPoint();
    if (std::string error = removeAll(doomed); !error.empty())
      return error;
  }
  return "";
}
