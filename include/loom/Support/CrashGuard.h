//===- CrashGuard.h - a crash on bad input becomes a diagnostic -*- C++ -*-===//
//
// A bug in a parser or pass (Loom's or upstream MLIR's) must not kill a tool
// by a signal on what a user wrote. The tools run their parse and passes
// under a guard: a crash on the calling thread is recovered, its stack is
// printed for the bug report, and the tool exits non-zero with one line
// saying what it was doing. docs/Robustness.md lists the known cases.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_CRASHGUARD_H
#define LOOM_SUPPORT_CRASHGUARD_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

namespace loom {

/// Runs `body`. Returns false if it crashed, after printing the stack and
/// "TOOL: error: crashed while WHAT (a bug ...)".
bool runGuarded(llvm::StringRef tool, llvm::StringRef what,
                llvm::function_ref<void()> body);

} // namespace loom

#endif // LOOM_SUPPORT_CRASHGUARD_H
