//===- ProcessHeap.cpp - every heap allocation of the trainer, counted ----===//
//
// The trainer defines malloc and its relatives, so that every heap
// allocation in the process goes through here: the compiled step's, the
// runtime kernels' scratch (std::vector and friends), OpenBLAS's, Open MPI's
// and the trainer's own. Each forwards to glibc's implementation
// (__libc_malloc, ...) and adds malloc_usable_size of the block to an atomic
// count; free subtracts it. The count is independent of the plan: it is what
// glibc handed out, so "measured" beside "planned" is a measurement.
//
// Not counted: memory mapped without malloc (OpenBLAS's buffer pool, MPI's
// shared-memory segments), which the resident set size (also reported)
// includes.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/loomrt.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <malloc.h>

extern "C" {
void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
void *__libc_valloc(size_t);
void *__libc_pvalloc(size_t);
}

namespace {

/// Bytes in use by one line of the heap, and the most since its reset.
struct Line {
  std::atomic<int64_t> bytes{0}, peak{0};

  void add(int64_t delta) {
    int64_t now = bytes.fetch_add(delta, std::memory_order_relaxed) + delta;
    int64_t high = peak.load(std::memory_order_relaxed);
    while (now > high &&
           !peak.compare_exchange_weak(high, now, std::memory_order_relaxed))
      ;
  }
  int64_t now() const { return bytes.load(std::memory_order_relaxed); }
  int64_t most() const { return peak.load(std::memory_order_relaxed); }
  void resetPeak() { peak.store(now(), std::memory_order_relaxed); }
};

// The whole process.
Line heap;
// The threads not named (loomrt_heap_name_thread): MPI's and BLAS's own.
Line otherThreads;
// What the runtime's entry points the step calls allocate for their own
// bookkeeping (loomrt_heap_runtime_begin/end: the collectives' tables).
Line runtimeTables;
thread_local int runtimeDepth = 0;
// The calling thread's allocations less its frees (the executable's static
// TLS: reading it allocates nothing).
thread_local int64_t threadBytes = 0, threadPeak = 0;
thread_local bool threadNamed = false;

void add(int64_t bytes) {
  heap.add(bytes);
  if (!threadNamed)
    otherThreads.add(bytes);
  else if (runtimeDepth)
    runtimeTables.add(bytes);
  threadBytes += bytes;
  if (threadBytes > threadPeak)
    threadPeak = threadBytes;
}

void *counted(void *pointer) {
  if (pointer)
    add(int64_t(malloc_usable_size(pointer)));
  return pointer;
}

void uncount(void *pointer) {
  if (pointer)
    add(-int64_t(malloc_usable_size(pointer)));
}

} // namespace

extern "C" {

void *malloc(size_t bytes) { return counted(__libc_malloc(bytes)); }

void free(void *pointer) {
  uncount(pointer);
  __libc_free(pointer);
}

void *calloc(size_t count, size_t bytes) {
  return counted(__libc_calloc(count, bytes));
}

void *realloc(void *pointer, size_t bytes) {
  // The old block is gone once realloc succeeds (or bytes is 0).
  int64_t old = pointer ? int64_t(malloc_usable_size(pointer)) : 0;
  void *moved = __libc_realloc(pointer, bytes);
  if (moved || bytes == 0)
    add(-old);
  return counted(moved);
}

void *reallocarray(void *pointer, size_t count, size_t bytes) {
  size_t total;
  if (__builtin_mul_overflow(count, bytes, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(pointer, total);
}

void *memalign(size_t alignment, size_t bytes) {
  return counted(__libc_memalign(alignment, bytes));
}

void *aligned_alloc(size_t alignment, size_t bytes) {
  return counted(__libc_memalign(alignment, bytes));
}

int posix_memalign(void **out, size_t alignment, size_t bytes) {
  if (alignment % sizeof(void *) || (alignment & (alignment - 1)))
    return EINVAL;
  void *pointer = counted(__libc_memalign(alignment, bytes));
  if (!pointer)
    return ENOMEM;
  *out = pointer;
  return 0;
}

void *valloc(size_t bytes) { return counted(__libc_valloc(bytes)); }
void *pvalloc(size_t bytes) { return counted(__libc_pvalloc(bytes)); }

int64_t loomrt_heap_bytes(void) { return heap.now(); }
int64_t loomrt_heap_peak_bytes(void) { return heap.most(); }
void loomrt_heap_reset_peak(void) { heap.resetPeak(); }

void loomrt_heap_name_thread(void) { threadNamed = true; }
int64_t loomrt_heap_other_bytes(void) { return otherThreads.now(); }
int64_t loomrt_heap_other_peak_bytes(void) { return otherThreads.most(); }
void loomrt_heap_other_reset_peak(void) { otherThreads.resetPeak(); }

void loomrt_heap_runtime_begin(void) { ++runtimeDepth; }
void loomrt_heap_runtime_end(void) { --runtimeDepth; }
int64_t loomrt_heap_runtime_bytes(void) { return runtimeTables.now(); }
int64_t loomrt_heap_runtime_peak_bytes(void) { return runtimeTables.most(); }
void loomrt_heap_runtime_reset_peak(void) { runtimeTables.resetPeak(); }

int64_t loomrt_heap_thread_bytes(void) { return threadBytes; }
int64_t loomrt_heap_thread_peak_bytes(void) { return threadPeak; }
void loomrt_heap_thread_reset_peak(void) { threadPeak = threadBytes; }

} // extern "C"
