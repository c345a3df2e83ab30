//===- Recorder.cpp - statistics and the trace, for both backends ---------===//
//
// Compiled into each backend library (a backend must not need
// libloomtrainer to link).
//
//===----------------------------------------------------------------------===//

#include "Backends/Backend.h"
#include "Backends/RuntimeSupport.h"
#include "loom/Runtime/DurableFile.h"
#include "loom/Runtime/HeapScope.h"

#include <cstdio>

using loom::runtime::collectiveKindName;
using loom::runtime::Recorder;
using loom::runtime::writeFileDurably;

void Recorder::collective(int64_t kind, int64_t opId, int64_t bytes,
                          double begin, double end) {
  const char *name = collectiveKindName(kind);
  std::lock_guard<std::mutex> lock(mutex);
  stats.comm_us += end - begin;
  stats.collectives++;
  if (tracing)
    events.push_back({name, "comm", begin, end});
  if (profiling && opId >= 0) {
    CollectiveTime &time = collectiveUs[opId];
    time.kind = name;
    time.bytes = bytes;
    time.count++;
    time.us += end - begin;
  }
}

void Recorder::stall(double begin, double end) {
  std::lock_guard<std::mutex> lock(mutex);
  stats.exposed_us += end - begin;
  if (profiling)
    profiledWaitUs += end - begin;
  if (tracing && end - begin > 1)
    events.push_back({"wait (stalled)", "compute", begin, end});
}

void Recorder::span(const char *name, double begin, double end) {
  std::lock_guard<std::mutex> lock(mutex);
  if (tracing)
    events.push_back({name, "compute", begin, end});
}

void Recorder::scratch(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  if (bytes > stats.scratch_bytes)
    stats.scratch_bytes = bytes;
}

loomrt_stats Recorder::take() {
  std::lock_guard<std::mutex> lock(mutex);
  loomrt_stats taken = stats;
  stats = {0, 0, 0, 0};
  return taken;
}

void Recorder::traceTo(const char *to) {
  std::lock_guard<std::mutex> lock(mutex);
  tracing = to != nullptr;
  path = to ? to : "";
}

std::string Recorder::finish(int rank) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!tracing || path.empty())
    return "";
  std::string json = "{\"traceEvents\": [\n";
  char line[512];
  for (size_t i = 0; i < events.size(); ++i) {
    std::snprintf(line, sizeof(line),
                  "\", \"ph\": \"X\", \"pid\": %d, \"tid\": \"%s\", "
                  "\"ts\": %.3f, \"dur\": %.3f}%s\n",
                  rank, events[i].track.c_str(), events[i].begin,
                  events[i].end - events[i].begin,
                  i + 1 < events.size() ? "," : "");
    json += "  {\"name\": \"" + events[i].name + line;
  }
  json += "]}\n";
  return writeFileDurably(path, json);
}

void Recorder::profileStart() {
  std::lock_guard<std::mutex> lock(mutex);
  opUs.clear();
  fused.clear();
  collectiveUs.clear();
  profiledSteps = 0;
  profiledStepUs = 0;
  profiledWaitUs = 0;
  profiling = true;
}

void Recorder::opTime(int64_t opId, double us) {
  std::lock_guard<std::mutex> lock(mutex);
  opUs[opId] += us;
}

void Recorder::opFused(int64_t member, int64_t opId) {
  std::lock_guard<std::mutex> lock(mutex);
  fused[member] = opId;
}

double Recorder::waitedUs() {
  std::lock_guard<std::mutex> lock(mutex);
  return profiledWaitUs;
}

void Recorder::profileStep(double stepUs) {
  std::lock_guard<std::mutex> lock(mutex);
  profiledSteps++;
  profiledStepUs += stepUs;
}

namespace {

/// Element-wise sum (op 0) or max (op 2) over the ranks, in place.
void allreduce(std::vector<double> &values, int64_t op) {
  std::vector<double> out(values.size());
  loomrt_allreduce_f64(values.data(), out.data(), int64_t(values.size()), op);
  values.swap(out);
}

/// Whether every rank holds the same `values`.
bool sameOnEveryRank(const std::vector<double> &values) {
  std::vector<double> high = values, low(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    low[i] = -values[i];
  allreduce(high, 2);
  allreduce(low, 2);
  for (size_t i = 0; i < values.size(); ++i)
    if (high[i] != -low[i])
      return false;
  return true;
}

} // namespace

std::string Recorder::writeProfile(const char *path, int rank, int size,
                                   const char *target) {
  std::unique_lock<std::mutex> lock(mutex);
  profiling = false;
  // The ids on every rank (the same step), then the times averaged over
  // the ranks; ids that differ would make the average meaningless.
  std::vector<double> shape = {double(opUs.size()), double(fused.size()),
                               double(collectiveUs.size()),
                               double(profiledSteps)};
  lock.unlock();
  if (!sameOnEveryRank(shape))
    return "the ranks profiled different steps or ops";
  lock.lock();
  std::vector<double> ids, times;
  for (auto &[id, us] : opUs) {
    ids.push_back(double(id));
    times.push_back(us);
  }
  for (auto &[member, id] : fused) {
    ids.push_back(double(member));
    ids.push_back(double(id));
  }
  // A collective's time is the mean over the ranks too. The least (what
  // the last rank to start it saw) leaves out what the others sent before
  // it arrived, and predicted the synchronous order 14% fast at 200 Mbit/s
  // (docs/Profiling.md); the mean also holds their wait for it, and
  // predicts it 2-6% slow.
  for (auto &[id, time] : collectiveUs) {
    ids.push_back(double(id));
    ids.push_back(double(time.bytes));
    ids.push_back(double(time.count));
    times.push_back(time.us);
  }
  times.push_back(profiledWaitUs);
  times.push_back(profiledStepUs);
  lock.unlock();
  if (!sameOnEveryRank(ids))
    return "the ranks profiled different ops";
  allreduce(times, 0);
  if (profiledSteps == 0)
    return "no step was profiled";
  double per = double(profiledSteps) * double(size);
  std::string error;
  if (rank == 0) {
    lock.lock();
    std::string json =
        "{\n  \"format\": \"loom-profile\",\n  \"version\": 1,\n";
    char line[256];
    std::snprintf(line, sizeof(line),
                  "  \"target\": \"%s\",\n  \"world_size\": %d,\n"
                  "  \"steps\": %lld,\n  \"step_us\": %.3f,\n"
                  "  \"waits_us\": %.3f,\n",
                  target, size, (long long)profiledSteps,
                  times[times.size() - 1] / per, times[times.size() - 2] / per);
    json += line;

    size_t t = 0;
    json += "  \"ops\": {";
    bool first = true;
    for (auto &entry : opUs) {
      std::snprintf(line, sizeof(line), "%s\n    \"%lld\": %.3f",
                    first ? "" : ",", (long long)entry.first, times[t++] / per);
      json += line;
      first = false;
    }
    json += "\n  },\n  \"fused\": {";
    first = true;
    for (auto &[member, id] : fused) {
      std::snprintf(line, sizeof(line), "%s\n    \"%lld\": %lld",
                    first ? "" : ",", (long long)member, (long long)id);
      json += line;
      first = false;
    }
    json += "\n  },\n  \"collectives\": {";
    first = true;
    for (auto &[id, time] : collectiveUs) {
      // Per step and rank; an op id that started more than one collective
      // a step (none does today) would have their sum.
      double us = times[t++] / per;
      std::snprintf(line, sizeof(line),
                    "%s\n    \"%lld\": {\"kind\": \"%s\", \"bytes\": %lld, "
                    "\"ranks\": %d, \"us\": %.3f, \"algbw_gbps\": %.4f}",
                    first ? "" : ",", (long long)id, time.kind.c_str(),
                    (long long)time.bytes, size, us,
                    us > 0 ? double(time.bytes) / us / 1e3 : 0.0);
      json += line;
      first = false;
    }
    json += "\n  }\n}\n";
    lock.unlock();
    error = writeFileDurably(path, json);
  }
  std::vector<double> failed = {error.empty() ? 0.0 : 1.0};
  allreduce(failed, 2);
  if (failed[0] != 0 && error.empty())
    error = "rank 0 could not write the profile";
  return error;
}

Recorder &loom::runtime::recorder() {
  static Recorder instance;
  return instance;
}

extern "C" {

loomrt_stats loomrt_take_stats(void) {
  // The call it queues on the communication thread is the runtime's.
  loom::runtime::HeapScope scope(LOOMRT_HEAP_RUNTIME);
  loom::runtime::backend().stepBoundary();
  return loom::runtime::recorder().take();
}

void loomrt_trace_to(const char *path) {
  loom::runtime::recorder().traceTo(path);
}

void loomrt_trace_span(const char *name, double begin, double end) {
  loom::runtime::recorder().span(name, begin, end);
}

} // extern "C"
