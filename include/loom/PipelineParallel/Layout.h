//===- Layout.h - pipeline stages' units --------------------------*- C++
//-*-===//
//
// Which units (Megatron's E: embedding, t: transformer block, L: output and
// loss) each pipeline stage holds: parsed from Megatron's layout syntax, or
// cut to balance the units' costs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PIPELINEPARALLEL_LAYOUT_H
#define LOOM_PIPELINEPARALLEL_LAYOUT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <string>

namespace loom::pp {

/// Parses a layout ("Et*3|t*4|t*3L": stages separated by '|', each a run of
/// units E, t and L, `*N` repeating the one before) into each stage's units
/// spelled out ("Ettt"). Returns an empty list and sets `error` when it is
/// malformed.
llvm::SmallVector<std::string> parseLayout(llvm::StringRef layout,
                                           std::string &error);

/// The stage of each unit when `costs` (one per unit, in order) are cut into
/// `stages` contiguous non-empty runs minimising the costliest run (exact,
/// by dynamic programming over the cuts). Requires 1 <= stages <=
/// costs.size().
llvm::SmallVector<int64_t> balanceUnits(llvm::ArrayRef<double> costs,
                                        int64_t stages);

/// The layout string of `kinds` (one letter per unit) cut by `stageOfUnit`:
/// "Et|tL".
std::string printLayout(llvm::ArrayRef<std::string> kinds,
                        llvm::ArrayRef<int64_t> stageOfUnit);

} // namespace loom::pp

#endif // LOOM_PIPELINEPARALLEL_LAYOUT_H
