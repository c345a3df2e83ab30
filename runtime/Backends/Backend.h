//===- Backend.h - what a loomrt backend implements -------------*- C++ -*-===//
//
// Private to the runtime. The process and collective entry points of the C
// ABI (loomrt_init, loomrt_coll_start, ...) are the same on every backend:
// BackendCApi.cpp defines them once, over the Backend that the linked
// library (libloomrt_mpi or libloomrt_cuda) provides through backend().
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_BACKENDS_BACKEND_H
#define LOOM_RUNTIME_BACKENDS_BACKEND_H

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace loom::runtime {

/// One collective as the compiled step starts it: loomrt_coll_start's
/// arguments (buffers as addresses, counts in elements).
struct CollRequest {
  int64_t kind, reduction, dtype, comm, arg;
  int64_t in, inCount, out, outCount;
  /// The start's op id (trainer-stamp-op-ids), -1 for none.
  int64_t opId;

  /// The larger of the input and the output, in bytes.
  int64_t getBytes() const;
};

/// A backend: the process's communicator, its collectives and its clock.
class Backend {
public:
  virtual ~Backend() = default;
  /// Process set-up from the launcher's environment; 0 or non-zero.
  virtual int init(int *argc, char ***argv) = 0;
  /// Shuts down; 0, or non-zero when the trace could not be written.
  virtual int finalize() = 0;
  /// Prints `message` with the rank and ends every rank. Never returns.
  [[noreturn]] virtual void abort(const std::string &message) = 0;
  /// One communicator: the world (handle 0) or a group of a parent.
  struct Comm {
    int64_t size, rank;
    /// The world ranks of its members, by their rank in it.
    std::vector<int> worldRanks;
  };
  /// loomrt_comm_group: the handle of this rank's group of `parent`,
  /// made (makeGroup) on the first call and cached.
  int64_t group(int64_t parent, int64_t size, int64_t stride);
  /// The communicator `handle` (aborts on an unknown one).
  const Comm &comm(int64_t handle);

  /// Enqueues `request` and returns its handle at once.
  virtual int64_t start(const CollRequest &request) = 0;
  /// Blocks until the collective `handle`, started on `in` and `out`, is
  /// done.
  virtual void wait(int64_t handle, int64_t in, int64_t out) = 0;

  /// Brackets op `opId`'s work in a profiled step (loomrt_op_begin and
  /// loomrt_op_end). By default the host clock times it, less any time
  /// blocked in a wait inside it: on the CPU the step's calls are its work.
  virtual void opBegin(int64_t opId);
  virtual void opEnd(int64_t opId);
  /// Between steps (loomrt_take_stats): what the backend measures per step
  /// starts over. By default nothing.
  virtual void stepBoundary() {}
  /// "cpu" or "cuda": the --target whose trainers this backend runs.
  virtual const char *target() const = 0;

  /// Microseconds since the backend was made.
  double nowUs() const {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now() - epoch)
        .count();
  }

  int rank = 0, size = 1;

protected:
  /// Makes the backend's communicator for comms[handle], a new group (a
  /// collective call among its members). By default: not supported.
  virtual void makeGroup(int64_t handle);
  /// The world, then each group in the order this rank made them.
  std::vector<Comm> comms;

private:
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> groups;

  /// The bracket opBegin opened: its op and start.
  int64_t openOp = -1;
  double openSinceUs = 0, waitedBeforeUs = 0;

  std::chrono::steady_clock::time_point epoch =
      std::chrono::steady_clock::now();
};

/// The linked backend's one instance.
Backend &backend();

/// all_gather, reduce_scatter, all_reduce or broadcast (trace and error
/// messages).
const char *collectiveKindName(int64_t kind);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_BACKENDS_BACKEND_H
