//===- DurableFile.h - files replaced atomically and durably ----*- C++ -*-===//
//
// Every file Loom writes for the user (checkpoints, their `latest` pointer,
// traces, reports, .npy results, loomc's and loom-opt's outputs) goes
// through DurableFile, so that a crash, a killed process, a full disk or a
// power loss leaves the old file or the new one, never a mix:
//
//   - a regular file (or a new one) is written as a temporary beside it
//     (PATH.tmp-PID-RANDOM, created exclusively), fsynced, given the old
//     file's permissions and owner, renamed over it, and its directory
//     fsynced; where a rename cannot replace it (a bind-mounted file), it
//     is copied in place and fsynced;
//   - a symbolic link stays a link: the regular file it names is replaced;
//   - a device, FIFO or stream (anything under /dev or /proc: /dev/null,
//     /dev/stdout, /dev/fd/N) is written in place, appended to;
//   - a regular file with other hard links, or in a directory this process
//     cannot write, is rewritten in place (the links kept; not atomic);
//   - a directory or a dangling link is an error;
//   - every call is checked, and an error names the path and the call.
//
// Plain C++ and POSIX: the runtime and the compiler both use it (loomc's
// outputs, loom-opt -o, coll-report's files, loom-run's .npy results).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DURABLEFILE_H
#define LOOM_RUNTIME_DURABLEFILE_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::runtime {

/// Where a file for `path` is written and how it is put in place.
struct DurableTarget {
  /// The file replaced: `path`, or the file a symbolic link names.
  std::string path;
  /// Where to write: a temporary beside `path`, or `path` itself when it
  /// is a device or FIFO (`inPlace`).
  std::string write;
  /// Why `path` cannot be written (a directory, a dangling link), or "".
  std::string error;
  /// Written where it is (see the file comment); after what it holds
  /// (`append`, a device or stream) or from its start.
  bool inPlace = false, append = false;
  /// The permissions, owner and group of the regular file replaced, or -1.
  int mode = -1;
  int64_t owner = -1, group = -1;
};

/// Plans writing `path` (see the file comment).
DurableTarget planDurableWrite(const std::string &path);
/// For a file another program writes whole (a linker, MLIR's driver): a
/// target rewritten where it is (`inPlace`, not `append`) is written to a
/// scratch file in TMPDIR instead, so that a failed write leaves it as it
/// was; installFileDurably copies the scratch over it. Returns "" or the
/// error.
std::string writeToScratch(DurableTarget &target);
/// Puts the file written at `target.write` (by another program, e.g. a
/// linker) in place: the replaced file's permissions (plus the written
/// file's execute bits) and owner, fsync, rename over `target.path`, fsync
/// of its directory; from a scratch file (writeToScratch), copied over it;
/// written in place, only the fsync. Returns "" or the error, and leaves
/// no temporary or scratch file behind either way.
std::string installFileDurably(const DurableTarget &target);

/// Copies the file `from` over the existing file `to` where it is (its
/// inode, links and permissions kept, plus `from`'s execute bits) and
/// fsyncs it: for a target written in place, or a rename that cannot
/// replace it. Returns "" or the error.
std::string copyFileInPlace(const std::string &from, const std::string &to);

/// A fresh name beside `path` for a temporary: PATH.tmp-PID-RANDOM.
std::string temporarySibling(const std::string &path);

class DurableFile {
public:
  /// Starts writing `path`; error() says why if it cannot.
  explicit DurableFile(const std::string &path);
  /// Removes the temporary of a file not committed.
  ~DurableFile();
  DurableFile(const DurableFile &) = delete;
  DurableFile &operator=(const DurableFile &) = delete;

  /// Appends `size` bytes; false after an error.
  bool write(const void *data, size_t size);
  bool write(const std::string &text) {
    return write(text.data(), text.size());
  }
  /// Puts the file in place (see the file comment). Returns "" or the error.
  std::string commit();
  /// The first error, or "".
  const std::string &error() const { return failure; }

private:
  void fail(const std::string &call, int code);

  DurableTarget target;
  std::string failure;
  int fd = -1;
  bool created = false, committed = false;
};

/// Writes `size` bytes at `data` as `path` through a DurableFile. Returns ""
/// or the error.
std::string writeFileDurably(const std::string &path, const void *data,
                             size_t size);
inline std::string writeFileDurably(const std::string &path,
                                    const std::string &text) {
  return writeFileDurably(path, text.data(), text.size());
}

/// fsyncs the directory `dir`, so that the entries made or renamed in it
/// persist. Returns "" or the error.
std::string syncDirectory(const std::string &dir);

/// The directory holding `path` ("." for a bare name).
std::string parentDirectory(const std::string &path);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DURABLEFILE_H
