//===- DurableFile.cpp - files replaced atomically and durably ------------===//

#include "loom/Runtime/DurableFile.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

using namespace loom::runtime;

static std::string callFailed(const std::string &path, const std::string &call,
                              int code) {
  return "cannot write " + path + ": " + call + ": " + std::strerror(code);
}

static bool startsWith(const std::string &text, const char *prefix) {
  return text.rfind(prefix, 0) == 0;
}

std::string loom::runtime::parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string loom::runtime::temporarySibling(const std::string &path) {
  // The pid alone repeats across PID namespaces sharing a filesystem.
  static std::mt19937_64 random{std::random_device{}() ^
                                (uint64_t(::getpid()) << 32)};
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".tmp-%d-%08llx", int(::getpid()),
                (unsigned long long)(random() & 0xffffffffull));
  return path + suffix;
}

DurableTarget loom::runtime::planDurableWrite(const std::string &path) {
  DurableTarget target;
  target.path = target.write = path;
  auto inPlace = [&](bool append) {
    target.inPlace = true;
    target.append = append;
    return target;
  };
  // A stream or device (/dev/null, /dev/stdout, /dev/fd/N, /proc/self/fd/N)
  // is written where it is, after what it holds: renaming over /dev/null
  // would make it a regular file, and /dev/stdout may be the shell's
  // `>> log`.
  if (startsWith(path, "/dev/") || startsWith(path, "/proc/"))
    return inPlace(/*append=*/true);
  struct stat info;
  bool exists = ::lstat(path.c_str(), &info) == 0;
  // A symbolic link stays a link: the regular file it names is replaced.
  if (exists && S_ISLNK(info.st_mode)) {
    struct stat named;
    if (::stat(path.c_str(), &named) != 0) {
      target.error =
          callFailed(path, "stat (a symbolic link to nothing?)", errno);
      return target;
    }
    if (!S_ISREG(named.st_mode) && !S_ISDIR(named.st_mode))
      return inPlace(/*append=*/true);
    char *resolved = ::realpath(path.c_str(), nullptr);
    if (!resolved) {
      target.error = callFailed(path, "realpath", errno);
      return target;
    }
    target.path = target.write = resolved;
    std::free(resolved);
    exists = ::lstat(target.path.c_str(), &info) == 0;
  }
  if (exists && S_ISDIR(info.st_mode)) {
    target.error = "cannot write " + path + ": it is a directory";
    return target;
  }
  if (exists && !S_ISREG(info.st_mode))
    return inPlace(/*append=*/true);
  if (exists) {
    target.mode = int(info.st_mode & 07777);
    target.owner = int64_t(info.st_uid);
    target.group = int64_t(info.st_gid);
    // A file with other hard links, or in a directory this process cannot
    // add a name to, is rewritten where it is (not atomically): a rename
    // would break the links, and cannot happen there.
    if (info.st_nlink > 1 ||
        ::access(parentDirectory(target.path).c_str(), W_OK | X_OK) != 0)
      return inPlace(/*append=*/false);
  }
  target.write = temporarySibling(target.path);
  return target;
}

std::string loom::runtime::copyFileInPlace(const std::string &from,
                                           const std::string &to) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return callFailed(to, "open " + from, errno);
  int out = ::open(to.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (out < 0) {
    int code = errno;
    ::close(in);
    return callFailed(to, "open", code);
  }
  std::string error;
  char buffer[1 << 16];
  for (ssize_t n; error.empty() && (n = ::read(in, buffer, sizeof(buffer)));) {
    if (n < 0) {
      if (errno != EINTR)
        error = callFailed(to, "read " + from, errno);
      continue;
    }
    for (ssize_t done = 0; error.empty() && done < n;) {
      ssize_t written = ::write(out, buffer + done, size_t(n - done));
      if (written < 0 && errno != EINTR)
        error = callFailed(to, "write", errno);
      done += written > 0 ? written : 0;
    }
  }
  // `to` keeps its permissions, plus `from`'s execute bits.
  struct stat fromInfo, toInfo;
  if (error.empty() && ::fstat(in, &fromInfo) == 0 &&
      ::fstat(out, &toInfo) == 0 &&
      (fromInfo.st_mode & ~toInfo.st_mode & 0111) &&
      ::fchmod(out, (toInfo.st_mode | (fromInfo.st_mode & 0111)) & 07777) != 0)
    error = callFailed(to, "fchmod", errno);
  if (error.empty() && ::fsync(out) != 0)
    error = callFailed(to, "fsync", errno);
  if (::close(out) != 0 && error.empty())
    error = callFailed(to, "close", errno);
  ::close(in);
  return error;
}

/// Renames the synced temporary `from` over `to` (copying in place where a
/// rename cannot replace it), then syncs the directory. Removes `from`.
static std::string replace(const std::string &from, const std::string &to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    int code = errno;
    std::string error = code == EBUSY || code == EXDEV
                            ? copyFileInPlace(from, to)
                            : callFailed(to, "rename", code);
    ::unlink(from.c_str());
    if (!error.empty())
      return error;
  }
  return syncDirectory(parentDirectory(to));
}

/// Gives the temporary at `fd` the replaced file's owner (where this
/// process may) and permissions, plus `extraMode`.
static std::string takeOver(int fd, const DurableTarget &target,
                            mode_t extraMode) {
  if (target.mode < 0)
    return "";
  // Only root may give a file away; anyone else keeps their own.
  if (::fchown(fd, uid_t(target.owner), gid_t(target.group)) != 0 &&
      errno != EPERM)
    return callFailed(target.path, "fchown", errno);
  if (::fchmod(fd, mode_t(target.mode) | extraMode) != 0)
    return callFailed(target.path, "fchmod", errno);
  return "";
}

std::string loom::runtime::writeToScratch(DurableTarget &target) {
  if (!target.error.empty() || !target.inPlace || target.append)
    return target.error;
  const char *dir = std::getenv("TMPDIR");
  std::string scratch =
      std::string(dir && *dir ? dir : "/tmp") + "/loom-durable-XXXXXX";
  int fd = ::mkstemp(scratch.data());
  if (fd < 0)
    return callFailed(target.path, "mkstemp " + scratch, errno);
  ::close(fd);
  target.write = scratch;
  return "";
}

std::string loom::runtime::installFileDurably(const DurableTarget &target) {
  if (!target.error.empty())
    return target.error;
  if (target.inPlace && target.write != target.path) {
    std::string error = copyFileInPlace(target.write, target.path);
    ::unlink(target.write.c_str());
    return error;
  }
  if (target.inPlace) {
    // Only a regular file is synced (opening a FIFO would wait for a
    // writer).
    struct stat info;
    if (::stat(target.write.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
      return "";
    int fd = ::open(target.write.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return callFailed(target.path, "open", errno);
    std::string error;
    if (::fsync(fd) != 0)
      error = callFailed(target.path, "fsync", errno);
    ::close(fd);
    return error;
  }
  int fd = ::open(target.write.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return callFailed(target.path, "open " + target.write, errno);
  struct stat written;
  std::string error;
  if (::fstat(fd, &written) != 0)
    error = callFailed(target.path, "fstat", errno);
  // The writer's execute bits stay (a linker's trainer is executable).
  if (error.empty())
    error = takeOver(fd, target, written.st_mode & 0111);
  if (error.empty() && ::fsync(fd) != 0)
    error = callFailed(target.path, "fsync", errno);
  ::close(fd);
  if (!error.empty()) {
    ::unlink(target.write.c_str());
    return error;
  }
  return replace(target.write, target.path);
}

DurableFile::DurableFile(const std::string &path)
    : target(planDurableWrite(path)) {
  failure = target.error;
  if (!failure.empty())
    return;
  if (target.append) {
    fd = ::open(target.write.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0)
      fail("open", errno);
    return;
  }
  if (target.inPlace) {
    // A file rewritten where it is gets the bytes only once they are all
    // written (commit() copies them over it): a scratch file elsewhere.
    failure = writeToScratch(target);
    if (!failure.empty())
      return;
    created = true;
    fd = ::open(target.write.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      fail("open " + target.write, errno);
    return;
  }
  // O_EXCL: a name another writer holds is never taken over.
  for (int attempt = 0; fd < 0 && attempt < 16; ++attempt) {
    if (attempt)
      target.write = temporarySibling(target.path);
    fd = ::open(target.write.c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) {
    fail("open " + target.write, errno);
    return;
  }
  created = true;
  if (std::string error = takeOver(fd, target, 0); !error.empty())
    failure = error;
}

DurableFile::~DurableFile() {
  if (fd >= 0)
    ::close(fd);
  if (created && !committed)
    ::unlink(target.write.c_str());
}

void DurableFile::fail(const std::string &call, int code) {
  if (failure.empty())
    failure = callFailed(target.path, call, code);
}

bool DurableFile::write(const void *data, size_t size) {
  const char *bytes = static_cast<const char *>(data);
  while (failure.empty() && size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0) {
      if (errno != EINTR)
        fail("write", errno);
      continue;
    }
    bytes += written;
    size -= size_t(written);
  }
  return failure.empty();
}

std::string DurableFile::commit() {
  if (!failure.empty())
    return failure;
  // A device or FIFO need not (and often cannot) be synced; a scratch file
  // is synced where it is copied to.
  struct stat info;
  if (::fstat(fd, &info) != 0)
    fail("fstat", errno);
  else if (S_ISREG(info.st_mode) && !target.inPlace && ::fsync(fd) != 0)
    fail("fsync", errno);
  if (::close(fd) != 0)
    fail("close", errno);
  fd = -1;
  if (!failure.empty() || target.append)
    return failure;
  if (target.inPlace) {
    failure = copyFileInPlace(target.write, target.path);
    return failure;
  }
  committed = true;
  failure = replace(target.write, target.path);
  return failure;
}

std::string loom::runtime::writeFileDurably(const std::string &path,
                                            const void *data, size_t size) {
  DurableFile file(path);
  file.write(data, size);
  return file.commit();
}

std::string loom::runtime::syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return "cannot sync directory " + dir + ": open: " + std::strerror(errno);
  std::string error;
  if (::fsync(fd) != 0)
    error = "cannot sync directory " + dir + ": fsync: " + std::strerror(errno);
  ::close(fd);
  return error;
}
