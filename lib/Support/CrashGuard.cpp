//===- CrashGuard.cpp - a crash on bad input becomes a diagnostic ---------===//

#include "loom/Support/CrashGuard.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/raw_ostream.h"

bool loom::runGuarded(llvm::StringRef tool, llvm::StringRef what,
                      llvm::function_ref<void()> body) {
  llvm::CrashRecoveryContext::Enable();
  llvm::CrashRecoveryContext context;
  context.DumpStackAndCleanupOnFailure = true;
  if (context.RunSafely(body))
    return true;
  llvm::errs() << tool << ": error: crashed while " << what
               << " (a bug in Loom or MLIR: the stack above names it, "
                  "docs/Robustness.md lists the known ones)\n";
  return false;
}
