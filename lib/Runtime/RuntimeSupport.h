//===- RuntimeSupport.h - pieces the loomrt backends share ---------*- C++ -*-===//
//
// Private to lib/Runtime: the allocation counter behind loomrt_host_* (which
// libloomtrainer defines, and the CUDA backend feeds with its device
// allocations), and the Chrome trace writer.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_RUNTIMESUPPORT_H
#define LOOM_RUNTIME_RUNTIMESUPPORT_H

#include <cstdint>
#include <string>
#include <vector>

extern "C" {
/// Counts `bytes` at `pointer` as allocated by the step (ignores null).
void loomrt_count_alloc(void *pointer, int64_t bytes);
/// Forgets `pointer` (ignores pointers it never counted).
void loomrt_count_free(void *pointer);
}

namespace loom::runtime {

struct TraceEvent {
  std::string name, track;
  double begin, end;
};

/// Writes `events` as a Chrome trace (chrome://tracing, Perfetto) to `path`,
/// through a temporary file renamed into place.
void writeChromeTrace(const std::string &path, int rank,
                      const std::vector<TraceEvent> &events);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_RUNTIMESUPPORT_H
