//===- ChromeTrace.cpp - the trace file both backends write ---------------===//
//
// Compiled into each backend library (a backend must not need
// libloomtrainer to link).
//
//===----------------------------------------------------------------------===//

#include "RuntimeSupport.h"

#include <cstdio>

void loom::runtime::writeChromeTrace(const std::string &path, int rank,
                                     const std::vector<TraceEvent> &events) {
  std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "w");
  if (!f)
    return;
  std::fprintf(f, "{\"traceEvents\": [\n");
  for (size_t i = 0; i < events.size(); ++i)
    std::fprintf(f,
                 "  {\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, "
                 "\"tid\": \"%s\", \"ts\": %.3f, \"dur\": %.3f}%s\n",
                 events[i].name.c_str(), rank, events[i].track.c_str(),
                 events[i].begin, events[i].end - events[i].begin,
                 i + 1 < events.size() ? "," : "");
  std::fprintf(f, "]}\n");
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}
