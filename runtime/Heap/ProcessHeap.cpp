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
// The count is split into lines: each named thread's
// (loomrt_heap_name_thread) and every other thread's together, which
// partition it, and within a named thread's, what it allocates in a scope
// (loomrt_heap_scope_begin/end: the runtime's bookkeeping, the runtime
// kernels' scratch, the trainer's own). A block's bytes stay on the line
// that allocated it until it is freed, whichever thread frees it: a
// collective's table entry the compute thread allocates and the
// communication thread destroys leaves the runtime's line, not the
// communication thread's. So a block of any line but the first
// named thread's (the trainer's compute thread, the one that allocates most)
// is remembered with its line in a table, and a free of a block the table
// does not hold is the first named thread's.
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
#include <sched.h>
#include <utility>

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
// The named threads, in the order they were named; the first is the
// default owner of a block.
constexpr unsigned kNamedThreads = 16;
Line named[kNamedThreads];
std::atomic<unsigned> namedCount{0};
// The threads not named (or named past kNamedThreads): MPI's and BLAS's own.
Line otherThreads;
// What named threads allocate in each scope (loomrt_heap_scope).
constexpr unsigned kScopes = 3;
Line scopes[kScopes];
// What the first named thread allocates outside every scope: the step's own
// allocations and what the trainer and the runtime do on the compute
// thread besides.
Line defaultUnscoped;

/// Which lines a block is counted on: a named thread's slot or kOther (the
/// low 6 bits), and the scope it was allocated in plus one, or 0 (the top
/// 2).
using Owner = uint8_t;
constexpr Owner kOther = 0x3f, kThreadBits = 0x3f;
constexpr unsigned kScopeShift = 6;
constexpr Owner kDefaultOwner = 0;
static_assert(kNamedThreads < kOther && kScopes < (1u << (8 - kScopeShift)),
              "an Owner holds a named thread's slot and a scope");

thread_local Owner threadOwner = kOther;
// The calling thread's open scopes, innermost last (deeper than kNesting
// counts as the deepest recorded).
constexpr int kNesting = 8;
thread_local uint8_t openScopes[kNesting];
thread_local int scopeDepth = 0;

void charge(Owner owner, int64_t delta) {
  heap.add(delta);
  Owner thread = owner & kThreadBits;
  if (thread == kOther) {
    otherThreads.add(delta);
    return;
  }
  named[thread].add(delta);
  if (unsigned scope = owner >> kScopeShift)
    scopes[scope - 1].add(delta);
  else if (thread == kDefaultOwner)
    defaultUnscoped.add(delta);
}

/// The blocks not owned by the first named thread: an open-addressing table
/// (linear probing, deletion by backward shift) under a spin lock, with a
/// count of blocks per hash bucket in front of it so that most frees (the
/// default owner's) do not take the lock. A block the full table cannot
/// take is counted as the default owner's when freed (`untracked`).
class Owners {
public:
  void insert(void *pointer, Owner owner) {
    uintptr_t key = uintptr_t(pointer);
    Lock lock(busy);
    if (size == kSlots - kSlots / 8) {
      untracked.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    size_t at = slotOf(key);
    while (keys[at])
      at = (at + 1) & (kSlots - 1);
    keys[at] = key;
    owners[at] = owner;
    ++size;
    buckets[bucketOf(key)].fetch_add(1, std::memory_order_relaxed);
  }

  /// The owner of `pointer` (forgotten), or the default owner.
  Owner take(void *pointer) {
    uintptr_t key = uintptr_t(pointer);
    if (buckets[bucketOf(key)].load(std::memory_order_relaxed) == 0)
      return kDefaultOwner;
    Lock lock(busy);
    size_t at = slotOf(key);
    while (keys[at] && keys[at] != key)
      at = (at + 1) & (kSlots - 1);
    if (!keys[at])
      return kDefaultOwner;
    Owner owner = owners[at];
    buckets[bucketOf(key)].fetch_sub(1, std::memory_order_relaxed);
    --size;
    // Backward shift: move up each later key of the run whose home slot
    // does not lie between the hole and it (cyclically).
    size_t hole = at;
    for (size_t next = (hole + 1) & (kSlots - 1); keys[next];
         next = (next + 1) & (kSlots - 1)) {
      size_t home = slotOf(keys[next]);
      bool stays = hole <= next ? (hole < home && home <= next)
                                : (hole < home || home <= next);
      if (stays)
        continue;
      keys[hole] = keys[next];
      owners[hole] = owners[next];
      hole = next;
    }
    keys[hole] = 0;
    return owner;
  }

  int64_t untrackedBlocks() const {
    return untracked.load(std::memory_order_relaxed);
  }

private:
  static constexpr size_t kSlots = size_t(1) << 16;
  static constexpr size_t kBuckets = size_t(1) << 14;

  struct Lock {
    explicit Lock(std::atomic_flag &flag) : flag(flag) {
      while (flag.test_and_set(std::memory_order_acquire))
        sched_yield();
    }
    ~Lock() { flag.clear(std::memory_order_release); }
    std::atomic_flag &flag;
  };

  static size_t hash(uintptr_t key) {
    return size_t((key >> 4) * 0x9e3779b97f4a7c15ull >> 32);
  }
  static size_t slotOf(uintptr_t key) { return hash(key) & (kSlots - 1); }
  static size_t bucketOf(uintptr_t key) {
    return (hash(key) >> 16) & (kBuckets - 1);
  }

  std::atomic_flag busy = ATOMIC_FLAG_INIT;
  size_t size = 0;
  uintptr_t keys[kSlots] = {};
  Owner owners[kSlots] = {};
  std::atomic<uint32_t> buckets[kBuckets] = {};
  std::atomic<int64_t> untracked{0};
};

Owners owners;

/// The calling thread's line: its own if named, else every unnamed thread's.
Line &threadLine() {
  return threadOwner == kOther ? otherThreads : named[threadOwner];
}

Owner currentOwner() {
  if (threadOwner == kOther || scopeDepth == 0)
    return threadOwner;
  int innermost = openScopes[(scopeDepth < kNesting ? scopeDepth : kNesting) - 1];
  return Owner(threadOwner | (innermost + 1) << kScopeShift);
}

void *counted(void *pointer) {
  if (!pointer)
    return pointer;
  Owner owner = currentOwner();
  if (owner != kDefaultOwner)
    owners.insert(pointer, owner);
  charge(owner, int64_t(malloc_usable_size(pointer)));
  return pointer;
}

/// Forgets `pointer` before glibc may hand its address out again; returns
/// its bytes and owner.
std::pair<int64_t, Owner> forget(void *pointer) {
  return {int64_t(malloc_usable_size(pointer)), owners.take(pointer)};
}


} // namespace

extern "C" {

void *malloc(size_t bytes) { return counted(__libc_malloc(bytes)); }

void free(void *pointer) {
  if (!pointer)
    return;
  auto [bytes, owner] = forget(pointer);
  charge(owner, -bytes);
  __libc_free(pointer);
}

void *calloc(size_t count, size_t bytes) {
  return counted(__libc_calloc(count, bytes));
}

void *realloc(void *pointer, size_t bytes) {
  if (!pointer)
    return malloc(bytes);
  // The old block is gone once realloc succeeds (or bytes is 0); until
  // then its address is its own, so it is forgotten first and remembered
  // again on failure.
  auto [old, owner] = forget(pointer);
  void *moved = __libc_realloc(pointer, bytes);
  if (!moved && bytes != 0) {
    if (owner != kDefaultOwner)
      owners.insert(pointer, owner);
    return nullptr;
  }
  charge(owner, -old);
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

void loomrt_heap_name_thread(void) {
  if (threadOwner != kOther)
    return;
  unsigned slot = namedCount.fetch_add(1, std::memory_order_relaxed);
  if (slot < kNamedThreads)
    threadOwner = Owner(slot);
}
int64_t loomrt_heap_other_bytes(void) { return otherThreads.now(); }
int64_t loomrt_heap_other_peak_bytes(void) { return otherThreads.most(); }
void loomrt_heap_other_reset_peak(void) { otherThreads.resetPeak(); }

void loomrt_heap_scope_begin(loomrt_heap_scope scope) {
  if (scopeDepth < kNesting)
    openScopes[scopeDepth] = uint8_t(scope);
  ++scopeDepth;
}
void loomrt_heap_scope_end(loomrt_heap_scope scope) {
  (void)scope;
  if (scopeDepth > 0)
    --scopeDepth;
}
int64_t loomrt_heap_scope_bytes(loomrt_heap_scope scope) {
  return scopes[scope].now();
}
int64_t loomrt_heap_scope_peak_bytes(loomrt_heap_scope scope) {
  return scopes[scope].most();
}
void loomrt_heap_scope_reset_peak(loomrt_heap_scope scope) {
  scopes[scope].resetPeak();
}

int64_t loomrt_heap_thread_bytes(void) { return threadLine().now(); }
int64_t loomrt_heap_thread_peak_bytes(void) { return threadLine().most(); }
void loomrt_heap_thread_reset_peak(void) { threadLine().resetPeak(); }
int64_t loomrt_heap_unscoped_bytes(void) { return defaultUnscoped.now(); }
int64_t loomrt_heap_unscoped_peak_bytes(void) { return defaultUnscoped.most(); }
void loomrt_heap_unscoped_reset_peak(void) { defaultUnscoped.resetPeak(); }
int64_t loomrt_heap_untracked_blocks(void) { return owners.untrackedBlocks(); }

} // extern "C"
