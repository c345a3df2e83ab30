//===- DurableFile.cpp - files replaced atomically and durably ------------===//

#include "loom/Runtime/DurableFile.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace loom::runtime;

static std::string callFailed(const std::string &path, const std::string &call,
                              int code) {
  return "cannot write " + path + ": " + call + ": " + std::strerror(code);
}

std::string loom::runtime::parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

DurableTarget loom::runtime::planDurableWrite(const std::string &path) {
  DurableTarget target;
  target.path = path;
  struct stat info;
  bool exists = ::lstat(path.c_str(), &info) == 0;
  // A symbolic link stays a link: the file it names is replaced.
  if (exists && S_ISLNK(info.st_mode)) {
    char *resolved = ::realpath(path.c_str(), nullptr);
    if (!resolved) {
      target.error =
          callFailed(path, "realpath (a symbolic link to nothing?)", errno);
      return target;
    }
    target.path = resolved;
    std::free(resolved);
    exists = ::lstat(target.path.c_str(), &info) == 0;
  }
  if (exists && S_ISDIR(info.st_mode)) {
    target.error = "cannot write " + path + ": it is a directory";
    return target;
  }
  // Only a regular file is replaced; a device or FIFO is written in place
  // (renaming over /dev/null would make it a regular file).
  target.inPlace = exists && !S_ISREG(info.st_mode);
  target.mode = exists && !target.inPlace ? int(info.st_mode & 07777) : -1;
  target.write = target.inPlace
                     ? target.path
                     : target.path + ".tmp-" + std::to_string(::getpid());
  return target;
}

std::string loom::runtime::installFileDurably(const DurableTarget &target) {
  if (!target.error.empty() || target.inPlace)
    return target.error;
  int fd = ::open(target.write.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return callFailed(target.path, "open " + target.write, errno);
  std::string error;
  // The replacement keeps the permissions of the file it replaces.
  if (target.mode >= 0 && ::fchmod(fd, mode_t(target.mode)) != 0)
    error = callFailed(target.path, "fchmod", errno);
  if (error.empty() && ::fsync(fd) != 0)
    error = callFailed(target.path, "fsync", errno);
  ::close(fd);
  if (error.empty() && ::rename(target.write.c_str(), target.path.c_str()) != 0)
    error = callFailed(target.path, "rename", errno);
  if (!error.empty()) {
    ::unlink(target.write.c_str());
    return error;
  }
  return syncDirectory(parentDirectory(target.path));
}

DurableFile::DurableFile(const std::string &path)
    : target(planDurableWrite(path)) {
  failure = target.error;
  if (!failure.empty())
    return;
  if (target.inPlace) {
    fd = ::open(target.write.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      fail("open", errno);
    return;
  }
  // A temporary left by a killed process of the same pid is stale.
  ::unlink(target.write.c_str());
  fd = ::open(target.write.c_str(),
              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    fail("open", errno);
    return;
  }
  // The replacement keeps the permissions of the file it replaces.
  if (target.mode >= 0 && ::fchmod(fd, mode_t(target.mode)) != 0)
    fail("fchmod", errno);
}

DurableFile::~DurableFile() {
  if (fd >= 0)
    ::close(fd);
  if (!committed && !target.inPlace && target.error.empty())
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
  // A device or FIFO need not (and often cannot) be synced.
  if (!target.inPlace && ::fsync(fd) != 0)
    fail("fsync", errno);
  if (::close(fd) != 0)
    fail("close", errno);
  fd = -1;
  if (!failure.empty() || target.inPlace)
    return failure;
  if (::rename(target.write.c_str(), target.path.c_str()) != 0) {
    fail("rename", errno);
    return failure;
  }
  committed = true;
  return syncDirectory(parentDirectory(target.path));
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
