//===- HeapScope.h - count a block of runtime code on a heap line --*- C++ -*-===//
//
// What the code in a HeapScope's lifetime allocates on a named thread is
// counted on that scope's line of the trainer's heap (loomrt_heap_scope):
// the runtime's bookkeeping, the runtime kernels' scratch. The trainer
// reports each line beside the plan.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_HEAPSCOPE_H
#define LOOM_RUNTIME_HEAPSCOPE_H

#include "loom/Runtime/loomrt.h"

namespace loom::runtime {

class HeapScope {
public:
  explicit HeapScope(loomrt_heap_scope scope) : scope(scope) {
    loomrt_heap_scope_begin(scope);
  }
  ~HeapScope() { loomrt_heap_scope_end(scope); }
  HeapScope(const HeapScope &) = delete;
  HeapScope &operator=(const HeapScope &) = delete;

private:
  loomrt_heap_scope scope;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_HEAPSCOPE_H
