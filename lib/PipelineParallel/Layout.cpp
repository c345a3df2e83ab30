//===- Layout.cpp - pipeline stages' units --------------------------------===//

#include "loom/PipelineParallel/Layout.h"
#include <algorithm>
#include <vector>

using namespace llvm;

SmallVector<std::string> loom::pp::parseLayout(StringRef layout,
                                               std::string &error) {
  SmallVector<StringRef> parts;
  layout.split(parts, '|');
  SmallVector<std::string> stages;
  for (StringRef part : parts) {
    std::string units;
    StringRef rest = part.trim();
    while (!rest.empty()) {
      char kind = rest.front();
      rest = rest.drop_front();
      if (kind != 'E' && kind != 't' && kind != 'L') {
        error = "unknown unit '" + std::string(1, kind) + "' in layout \"" +
                layout.str() + "\" (expected E, t, L, *N and |)";
        return {};
      }
      int64_t count = 1;
      if (rest.consume_front("*")) {
        StringRef number =
            rest.take_front(rest.find_first_not_of("0123456789"));
        if (number.empty() || number.getAsInteger(10, count) || count < 1) {
          error = "expected a positive count after '*' in layout \"" +
                  layout.str() + "\"";
          return {};
        }
        rest = rest.drop_front(number.size());
      }
      units.append(count, kind);
    }
    stages.push_back(units);
  }
  return stages;
}

SmallVector<int64_t> loom::pp::balanceUnits(ArrayRef<double> costs,
                                            int64_t stages) {
  int64_t n = costs.size();
  std::vector<double> prefix(n + 1, 0);
  for (int64_t u = 0; u < n; ++u)
    prefix[u + 1] = prefix[u] + costs[u];
  // best[s][u]: the least costliest run of units [0, u) on s stages; cut,
  // where its last run starts.
  std::vector<std::vector<double>> best(stages + 1,
                                        std::vector<double>(n + 1, 1e300));
  std::vector<std::vector<int64_t>> cut(stages + 1,
                                        std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int64_t s = 1; s <= stages; ++s)
    for (int64_t u = s; u <= n; ++u)
      for (int64_t c = s - 1; c < u; ++c) {
        double value = std::max(best[s - 1][c], prefix[u] - prefix[c]);
        if (value < best[s][u]) {
          best[s][u] = value;
          cut[s][u] = c;
        }
      }
  SmallVector<int64_t> stageOf(n, 0);
  for (int64_t s = stages, u = n; s > 0; --s) {
    int64_t c = cut[s][u];
    for (int64_t k = c; k < u; ++k)
      stageOf[k] = s - 1;
    u = c;
  }
  return stageOf;
}

std::string loom::pp::printLayout(ArrayRef<std::string> kinds,
                                  ArrayRef<int64_t> stageOfUnit) {
  std::string text;
  for (size_t u = 0; u < kinds.size(); ++u) {
    if (u > 0 && stageOfUnit[u] != stageOfUnit[u - 1])
      text += "|";
    text += kinds[u];
  }
  return text;
}
