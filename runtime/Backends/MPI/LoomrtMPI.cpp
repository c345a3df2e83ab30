//===- LoomrtMPI.cpp - loomrt over MPI (the CPU backend) ------------------===//
//
// One communication thread per process runs the collectives in issue order
// with blocking MPI calls; the compute thread only enqueues and waits. That
// is the in-order stream the simulator models, and it makes a started
// collective progress while compute runs (Open MPI's non-blocking
// collectives progress only inside MPI calls). MPI is initialised with
// MPI_THREAD_SERIALIZED: the trainer's own MPI calls (barrier, gather) go
// through the same thread.
//
// Sends and receives are posted on that thread as MPI_Isend/MPI_Irecv and
// completed there by polling, so a blocked transfer never holds up the
// collectives and transfers queued behind it (two stages sending to each
// other at once would deadlock with blocking calls). Messages between two
// ranks match in the order they are posted; the receiver checks the tag.
//
//===----------------------------------------------------------------------===//

#include "Backends/Backend.h"
#include "Backends/RuntimeSupport.h"
#include "loom/Runtime/Bf16.h"
#include "loom/Runtime/loomrt.h"

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Collective {
  int64_t kind, reduction, dtype, arg;
  char *in, *out;
  int64_t inCount, outCount, opId, bytes;
  /// The communicator and its size, resolved when it starts.
  MPI_Comm comm;
  int64_t commSize;
  bool done = false;
  double beginUs = 0, endUs = 0;
  MPI_Request request = MPI_REQUEST_NULL;
};

using loom::runtime::recorder;

/// The MPI type of a loomrt dtype (bf16 moves as 16-bit words).
MPI_Datatype mpiType(int64_t dtype) {
  return dtype == LOOMRT_F64    ? MPI_DOUBLE
         : dtype == LOOMRT_BF16 ? MPI_UINT16_T
                                : MPI_FLOAT;
}

/// The whole state of the MPI backend.
class Context : public loom::runtime::Backend {
public:
  int init(int *argc, char ***argv) override;
  int finalize() override;
  int64_t start(const loom::runtime::CollRequest &request) override;
  void wait(int64_t handle, int64_t in, int64_t out) override;
  /// Runs `fn` on the communication thread and waits for it.
  void runOnStream(std::function<void()> fn);
  [[noreturn]] void abort(const std::string &message) override;
  const char *target() const override { return "cpu"; }
  /// The communication thread's heap high-water starts over.
  void stepBoundary() override {
    runOnStream([] { loomrt_heap_thread_reset_peak(); });
  }

protected:
  void makeGroup(int64_t handle) override;

  std::mutex mutex;

private:
  void loop();
  void run(Collective &c);
  /// Posts a send or receive; it completes in poll().
  void post(Collective &c);
  /// Completes the posted transfers MPI has finished.
  void poll();
  void complete(Collective &c);
  void recordTransferScratch();
  void reduceBf16(Collective &c);

  std::thread thread;
  std::condition_variable wake, finished;
  std::deque<std::function<void()>> queue;
  std::vector<std::unique_ptr<Collective>> collectives;
  /// MPI's communicator of each of comms (read by the compute thread).
  std::vector<MPI_Comm> mpiComms{MPI_COMM_WORLD};
  /// Posted transfers, touched only by the communication thread.
  std::vector<Collective *> posted;
  /// Compute-thread waits in progress (under `mutex`).
  int waiting = 0;
  /// The communication thread's heap when it started.
  int64_t startHeap = 0;
  bool stopping = false, initialised = false;
  double timeoutS = 300;
};

Context &context() {
  static Context instance;
  return instance;
}

int Context::init(int *argc, char ***argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) !=
      MPI_SUCCESS) {
    std::fprintf(stderr, "loomrt: MPI_Init_thread failed\n");
    return 1;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    std::fprintf(stderr, "loomrt: this MPI does not provide "
                         "MPI_THREAD_SERIALIZED\n");
    MPI_Finalize();
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (const char *timeout = std::getenv("LOOMRT_TIMEOUT_S"))
    timeoutS = std::atof(timeout) > 0 ? std::atof(timeout) : timeoutS;
  thread = std::thread([this] { loop(); });
  initialised = true;
  return 0;
}

void Context::loop() {
  loomrt_heap_name_thread();
  startHeap = loomrt_heap_thread_bytes();
  std::unique_lock<std::mutex> lock(mutex);
  double stoppingSince = -1;
  while (true) {
    auto ready = [&] { return stopping || !queue.empty(); };
    // Transfers in flight are polled, often while the compute thread waits
    // for one.
    if (posted.empty())
      wake.wait(lock, ready);
    else
      wake.wait_for(lock, std::chrono::microseconds(waiting ? 5 : 100), ready);
    if (!posted.empty()) {
      lock.unlock();
      poll();
      lock.lock();
    }
    if (queue.empty()) {
      if (stopping && posted.empty())
        return;
      if (stopping) {
        // A transfer the program never waited for, whose peer never came.
        if (stoppingSince < 0)
          stoppingSince = nowUs();
        if (nowUs() - stoppingSince > timeoutS * 1e6) {
          lock.unlock();
          abort(std::to_string(posted.size()) +
                " sends or receives did not finish by loomrt_finalize in " +
                std::to_string(int(timeoutS)) + " s (LOOMRT_TIMEOUT_S)");
        }
      }
      continue;
    }
    std::function<void()> fn = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    fn();
    lock.lock();
    finished.notify_all();
  }
}

void Context::run(Collective &c) {
  if (c.dtype == LOOMRT_BF16 &&
      (c.kind == LOOMRT_REDUCE_SCATTER || c.kind == LOOMRT_ALL_REDUCE))
    return reduceBf16(c);
  MPI_Datatype type = mpiType(c.dtype);
  MPI_Op op = c.reduction == LOOMRT_MAX   ? MPI_MAX
              : c.reduction == LOOMRT_MIN ? MPI_MIN
                                          : MPI_SUM;
  int status = MPI_SUCCESS;
  switch (c.kind) {
  case LOOMRT_ALL_GATHER:
    status = MPI_Allgather(c.in, int(c.inCount), type, c.out, int(c.inCount),
                           type, c.comm);
    break;
  case LOOMRT_REDUCE_SCATTER:
    status = MPI_Reduce_scatter_block(c.in, c.out, int(c.outCount), type, op,
                                      c.comm);
    break;
  case LOOMRT_ALL_REDUCE:
    status = MPI_Allreduce(c.in, c.out, int(c.outCount), type, op, c.comm);
    break;
  case LOOMRT_BROADCAST:
    std::memcpy(c.out, c.in,
                c.outCount * (c.dtype == LOOMRT_F64    ? 8
                              : c.dtype == LOOMRT_BF16 ? 2
                                                       : 4));
    status = MPI_Bcast(c.out, int(c.outCount), type, int(c.arg), c.comm);
    break;
  }
  if (status != MPI_SUCCESS)
    abort(std::string("MPI error in ") +
          loom::runtime::collectiveKindName(c.kind));
  if (c.reduction == LOOMRT_AVG &&
      (c.kind == LOOMRT_REDUCE_SCATTER || c.kind == LOOMRT_ALL_REDUCE)) {
    if (c.dtype == LOOMRT_F64)
      for (int64_t i = 0; i < c.outCount; ++i)
        reinterpret_cast<double *>(c.out)[i] /= c.commSize;
    else
      for (int64_t i = 0; i < c.outCount; ++i)
        reinterpret_cast<float *>(c.out)[i] /= float(c.commSize);
  }
}

/// What MPI holds on this thread (messages a peer sent before their
/// receive was posted, the pools it keeps for them after, a collective's
/// temporaries): the thread's heap high-water above what it held when it
/// started, reported as the step's scratch.
void Context::recordTransferScratch() {
  recorder().scratch(loomrt_heap_thread_peak_bytes() - startHeap);
}

void Context::post(Collective &c) {
  MPI_Datatype type = mpiType(c.dtype);
  int status = c.kind == LOOMRT_SEND
                   ? MPI_Isend(c.in, int(c.inCount), type, int(c.arg),
                               int(c.reduction), c.comm, &c.request)
                   : MPI_Irecv(c.out, int(c.outCount), type, int(c.arg),
                               MPI_ANY_TAG, c.comm, &c.request);
  if (status != MPI_SUCCESS)
    abort(std::string("MPI error posting a ") +
          loom::runtime::collectiveKindName(c.kind));
  posted.push_back(&c);
  recordTransferScratch();
}

void Context::poll() {
  for (size_t i = 0; i < posted.size();) {
    Collective &c = *posted[i];
    int flag = 0;
    MPI_Status status;
    if (MPI_Test(&c.request, &flag, &status) != MPI_SUCCESS)
      abort(std::string("MPI error in ") +
            loom::runtime::collectiveKindName(c.kind));
    if (!flag) {
      ++i;
      continue;
    }
    if (c.kind == LOOMRT_RECV) {
      int count = 0;
      MPI_Get_count(&status, mpiType(c.dtype), &count);
      if (status.MPI_TAG != int(c.reduction) || count != c.outCount)
        abort("recv from rank " + std::to_string(c.arg) + " expected tag " +
              std::to_string(c.reduction) + " and " +
              std::to_string(c.outCount) + " elements, got tag " +
              std::to_string(status.MPI_TAG) + " and " + std::to_string(count) +
              ": the two ranks' programs send and receive in different "
              "orders");
    }
    posted.erase(posted.begin() + i);
    complete(c);
  }
  recordTransferScratch();
}

void Context::complete(Collective &c) {
  std::lock_guard<std::mutex> lock(mutex);
  c.endUs = nowUs();
  c.done = true;
  recorder().collective(c.kind, c.opId, c.bytes, c.beginUs, c.endUs);
  finished.notify_all();
}

/// A bf16 reduce-scatter or all-reduce. MPI has no bf16 type: the input is
/// widened, reduced in f32 and rounded once into the output.
void Context::reduceBf16(Collective &c) {
  std::vector<float> in(c.inCount), out(c.outCount);
  const auto *source = reinterpret_cast<const uint16_t *>(c.in);
  for (int64_t i = 0; i < c.inCount; ++i)
    in[i] = loom::bf16ToFloat(source[i]);
  Collective wide = c;
  wide.dtype = LOOMRT_F32;
  wide.in = reinterpret_cast<char *>(in.data());
  wide.out = reinterpret_cast<char *>(out.data());
  run(wide);
  auto *target = reinterpret_cast<uint16_t *>(c.out);
  for (int64_t i = 0; i < c.outCount; ++i)
    target[i] = loom::floatToBf16(out[i]);
}

int64_t Context::start(const loom::runtime::CollRequest &r) {
  if (!initialised)
    abort("a collective started before loomrt_init");
  auto owned = std::make_unique<Collective>(Collective{
      r.kind, r.reduction, r.dtype, r.arg, reinterpret_cast<char *>(r.in),
      reinterpret_cast<char *>(r.out), r.inCount, r.outCount, r.opId,
      r.getBytes(), mpiComms.at(r.comm), comm(r.comm).size});
  Collective *collective = owned.get();
  std::lock_guard<std::mutex> lock(mutex);
  int64_t handle = int64_t(collectives.size());
  collectives.push_back(std::move(owned));
  if (r.kind == LOOMRT_SEND || r.kind == LOOMRT_RECV) {
    if (r.reduction < 0 || r.reduction > 32767)
      abort("a send or receive with tag " + std::to_string(r.reduction) +
            " (MPI takes 0..32767)");
    queue.push_back([this, collective] {
      collective->beginUs = nowUs();
      post(*collective);
    });
    wake.notify_one();
    return handle;
  }
  queue.push_back([this, collective] {
    collective->beginUs = nowUs();
    // What MPI holds on this thread at most while the collective runs: its
    // algorithm's temporaries (and bf16 widening) on top of what it keeps
    // (the transfers' buffers and pools, a new communicator's state).
    loomrt_heap_thread_reset_peak();
    run(*collective);
    recordTransferScratch();
    std::lock_guard<std::mutex> lock(mutex);
    collective->endUs = nowUs();
    collective->done = true;
    recorder().collective(collective->kind, collective->opId, collective->bytes,
                          collective->beginUs, collective->endUs);
  });
  wake.notify_one();
  return handle;
}

void Context::wait(int64_t handle, int64_t in, int64_t out) {
  std::unique_lock<std::mutex> lock(mutex);
  if (handle < 0 || handle >= int64_t(collectives.size()) ||
      !collectives[handle])
    abort("coll.wait on an unknown or finished collective #" +
          std::to_string(handle));
  Collective &c = *collectives[handle];
  if (int64_t(c.in) != in || int64_t(c.out) != out)
    abort("coll.wait with buffers that differ from its start's");
  double begin = nowUs();
  ++waiting;
  wake.notify_one();
  bool done = finished.wait_for(lock, std::chrono::duration<double>(timeoutS),
                                [&] { return c.done; });
  --waiting;
  if (!done) {
    std::string what = loom::runtime::collectiveKindName(c.kind);
    lock.unlock();
    abort(what + " #" + std::to_string(handle) + " did not finish in " +
          std::to_string(int(timeoutS)) +
          " s (LOOMRT_TIMEOUT_S); a rank may have died or diverged");
  }
  double end = nowUs();
  recorder().stall(begin, end);
  collectives[handle].reset();
  // Handles are positions; once every started collective is waited the
  // table starts over, so it never grows across steps.
  bool allWaited = true;
  for (const auto &pending : collectives)
    allWaited &= !pending;
  if (allWaited)
    collectives.clear();
}

/// A group's communicator, made by its members alone
/// (MPI_Comm_create_group): a rank's groups need no other rank to make
/// them, so stages that make theirs in different orders do not deadlock.
void Context::makeGroup(int64_t handle) {
  const std::vector<int> &members = comms[handle].worldRanks;
  // Concurrent creations that share ranks are told apart by the tag.
  uint64_t hash = 1469598103934665603ull;
  for (int member : members)
    hash = (hash ^ uint64_t(member)) * 1099511628211ull;
  int tag = int(hash % 32768);
  MPI_Comm made = MPI_COMM_NULL;
  int status = MPI_SUCCESS, size = 0, rankInGroup = -1;
  runOnStream([&] {
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, int(members.size()), members.data(), &group);
    status = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &made);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    if (status == MPI_SUCCESS && made != MPI_COMM_NULL) {
      MPI_Comm_size(made, &size);
      MPI_Comm_rank(made, &rankInGroup);
    }
  });
  if (status != MPI_SUCCESS || made == MPI_COMM_NULL)
    abort("MPI_Comm_create_group failed for a group of " +
          std::to_string(members.size()) + " ranks");
  if (size != int(members.size()) || rankInGroup != comms[handle].rank)
    abort("MPI made a group of " + std::to_string(size) +
          " ranks with this "
          "rank as " +
          std::to_string(rankInGroup) + ", not " +
          std::to_string(members.size()) + " and " +
          std::to_string(comms[handle].rank));
  mpiComms.push_back(made);
}

void Context::runOnStream(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mutex);
  bool done = false;
  queue.push_back([&, fn] {
    fn();
    std::lock_guard<std::mutex> inner(mutex);
    done = true;
  });
  wake.notify_one();
  if (!finished.wait_for(lock, std::chrono::duration<double>(timeoutS),
                         [&] { return done; })) {
    lock.unlock();
    abort("a trainer collective did not finish in " +
          std::to_string(int(timeoutS)) + " s; a rank may have died");
  }
}

void Context::abort(const std::string &message) {
  std::fprintf(stderr, "loomrt: rank %d: error: %s\n", rank, message.c_str());
  std::fflush(stderr);
  if (initialised)
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

int Context::finalize() {
  if (!initialised)
    return 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_one();
  thread.join();
  std::string error = recorder().finish(rank);
  if (!error.empty())
    std::fprintf(stderr, "loomrt: error: rank %d: %s\n", rank, error.c_str());
  initialised = false;
  for (size_t i = 1; i < mpiComms.size(); ++i)
    MPI_Comm_free(&mpiComms[i]);
  MPI_Finalize();
  return error.empty() ? 0 : 1;
}

} // namespace

extern "C" {

void loomrt_barrier(void) {
  context().runOnStream([] { MPI_Barrier(MPI_COMM_WORLD); });
}

void loomrt_allreduce_f64(const double *in, double *out, int64_t count,
                          int64_t op) {
  context().runOnStream([=] {
    MPI_Allreduce(in, out, int(count), MPI_DOUBLE,
                  op == LOOMRT_MAX ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
  });
}

void loomrt_gather_f32(const float *in, int64_t count, float *out,
                       int64_t root) {
  context().runOnStream([=] {
    MPI_Gather(in, int(count), MPI_FLOAT, out, int(count), MPI_FLOAT, int(root),
               MPI_COMM_WORLD);
  });
}

// The step's buffers are the trainer's host memory.
void *loomrt_device_alloc(int64_t) { return nullptr; }
void loomrt_device_free(void *) {}
void loomrt_copy_to_device(void *, const void *, int64_t) {
  context().abort("loomrt_copy_to_device: the MPI backend has no device");
}
void loomrt_copy_to_host(void *, const void *, int64_t) {
  context().abort("loomrt_copy_to_host: the MPI backend has no device");
}
void loomrt_step_sync(void) {}
int64_t loomrt_device_used_bytes(void) { return -1; }
loomrt_device_lines loomrt_device_named_bytes(void) { return {-1, -1, -1}; }

} // extern "C"

// BackendCApi.cpp's entry points run on this backend.
loom::runtime::Backend &loom::runtime::backend() { return context(); }
