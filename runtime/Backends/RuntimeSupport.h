//===- RuntimeSupport.h - pieces the loomrt backends share ---------*- C++
//-*-===//
//
// Private to the runtime: the allocation counter behind loomrt_host_* (which
// libloomtrainer defines, and the CUDA backend feeds with its device
// allocations), and the statistics and trace both backends keep.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_RUNTIMESUPPORT_H
#define LOOM_RUNTIME_RUNTIMESUPPORT_H

#include "loom/Runtime/loomrt.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
/// Counts `bytes` at `pointer` as allocated by the step (ignores null).
void loomrt_count_alloc(void *pointer, int64_t bytes);
/// Forgets `pointer` (ignores pointers it never counted).
void loomrt_count_free(void *pointer);
}

namespace loom::runtime {

/// A backend's communication statistics and trace, one per process:
/// loomrt_take_stats, loomrt_trace_to and loomrt_trace_span read and write
/// it, the backend adds its collectives and stalls. Thread-safe.
class Recorder {
public:
  /// A collective on the communication track, busy from `begin` to `end`
  /// (microseconds since loomrt_init): its kind, op id (-1 for none) and
  /// the larger of its input and output in bytes.
  void collective(int64_t kind, int64_t opId, int64_t bytes, double begin,
                  double end);
  /// Time the compute side was blocked in a wait.
  void stall(double begin, double end);
  /// A named interval on the compute track (loomrt_trace_span).
  void span(const char *name, double begin, double end);
  /// Heap one collective took on the communication thread.
  void scratch(int64_t bytes);
  loomrt_stats take();
  void traceTo(const char *path);
  /// Writes the Chrome trace, if one was asked for (at loomrt_finalize),
  /// durably (DurableFile). Returns "" or the error.
  std::string finish(int rank);

  // The profile (loomrt_profile_*): op and collective times by op id.
  void profileStart();
  bool isProfiling() const { return profiling.load(std::memory_order_relaxed); }
  /// Adds `us` to op `opId`'s time.
  void opTime(int64_t opId, double us);
  void opFused(int64_t member, int64_t opId);
  void profileStep(double stepUs);
  /// Time blocked in waits since profileStart.
  double waitedUs();
  /// Every rank calls it; rank 0 writes the JSON to `path`. Returns "" or
  /// the error (the same on every rank).
  std::string writeProfile(const char *path, int rank, int size,
                           const char *target);

private:
  struct Event {
    std::string name, track;
    double begin, end;
  };
  struct CollectiveTime {
    std::string kind;
    int64_t bytes = 0, count = 0;
    double us = 0;
  };
  std::mutex mutex;
  std::atomic<bool> profiling{false};
  std::map<int64_t, double> opUs;
  std::map<int64_t, int64_t> fused;
  std::map<int64_t, CollectiveTime> collectiveUs;
  int64_t profiledSteps = 0;
  double profiledStepUs = 0, profiledWaitUs = 0;
  loomrt_stats stats{0, 0, 0, 0};
  bool tracing = false;
  std::string path;
  std::vector<Event> events;
};

Recorder &recorder();

} // namespace loom::runtime

#endif // LOOM_RUNTIME_RUNTIMESUPPORT_H
