//===- Recorder.cpp - statistics and the trace, for both backends ---------===//
//
// Compiled into each backend library (a backend must not need
// libloomtrainer to link).
//
//===----------------------------------------------------------------------===//

#include "Backends/RuntimeSupport.h"
#include "loom/Runtime/DurableFile.h"

#include <cstdio>

using loom::runtime::Recorder;
using loom::runtime::writeFileDurably;

void Recorder::collective(const char *name, double begin, double end) {
  std::lock_guard<std::mutex> lock(mutex);
  stats.comm_us += end - begin;
  stats.collectives++;
  if (tracing)
    events.push_back({name, "comm", begin, end});
}

void Recorder::stall(double begin, double end) {
  std::lock_guard<std::mutex> lock(mutex);
  stats.exposed_us += end - begin;
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

Recorder &loom::runtime::recorder() {
  static Recorder instance;
  return instance;
}

extern "C" {

loomrt_stats loomrt_take_stats(void) { return loom::runtime::recorder().take(); }

void loomrt_trace_to(const char *path) {
  loom::runtime::recorder().traceTo(path);
}

void loomrt_trace_span(const char *name, double begin, double end) {
  loom::runtime::recorder().span(name, begin, end);
}

} // extern "C"
