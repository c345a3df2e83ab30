//===- ProcessHeapTest.cpp - the trainer's heap lines partition it --------===//
//
// This test links the trainer's malloc (ProcessHeap.cpp), so every
// allocation of the test process is counted as a trainer's would be.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/HeapScope.h"
#include "loom/Runtime/loomrt.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

namespace {

using loom::runtime::HeapScope;

/// malloc that the compiler may not elide with its free.
void *allocate(size_t bytes) {
  void *block = std::malloc(bytes);
  asm volatile("" : : "r"(block) : "memory");
  return block;
}

/// A named thread other than the test's main one (a communication thread).
template <typename Fn> void onNamedThread(Fn fn) {
  std::thread([&] {
    loomrt_heap_name_thread();
    fn();
  }).join();
}

// The test's thread is named first, as the trainer's compute thread is.
const bool kMainNamed = [] {
  loomrt_heap_name_thread();
  return true;
}();

TEST(ProcessHeapTest, AFreeIsChargedToTheLineThatAllocated) {
  ASSERT_TRUE(kMainNamed);
  constexpr size_t kBytes = 4000;
  int64_t runtime = loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME);
  void *block;
  {
    HeapScope scope(LOOMRT_HEAP_RUNTIME);
    block = allocate(kBytes);
  }
  ASSERT_NE(block, nullptr);
  EXPECT_GE(loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME) - runtime,
            int64_t(kBytes));
  // The communication thread frees the runtime's block: the runtime's line
  // falls back, the freeing thread's does not fall below where it began.
  int64_t freerBefore = 0, freerAfter = 0;
  onNamedThread([&] {
    freerBefore = loomrt_heap_thread_bytes();
    std::free(block);
    freerAfter = loomrt_heap_thread_bytes();
  });
  EXPECT_EQ(loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME), runtime);
  EXPECT_EQ(freerAfter, freerBefore);
  EXPECT_EQ(loomrt_heap_untracked_blocks(), 0);
}

TEST(ProcessHeapTest, AnotherThreadsBlockFreedHereStaysOffThisThreadsLine) {
  ASSERT_TRUE(kMainNamed);
  constexpr size_t kBytes = 1 << 16;
  void *block = nullptr;
  int64_t other = loomrt_heap_other_bytes();
  std::thread([&] { block = allocate(kBytes); }).join();
  ASSERT_NE(block, nullptr);
  EXPECT_GE(loomrt_heap_other_bytes() - other, int64_t(kBytes));
  int64_t mine = loomrt_heap_thread_bytes();
  std::free(block);
  EXPECT_EQ(loomrt_heap_thread_bytes(), mine);
  EXPECT_EQ(loomrt_heap_other_bytes(), other);
}

TEST(ProcessHeapTest, ReallocKeepsTheBlocksLine) {
  ASSERT_TRUE(kMainNamed);
  int64_t kernels = loomrt_heap_scope_bytes(LOOMRT_HEAP_KERNELS);
  void *block;
  {
    HeapScope scope(LOOMRT_HEAP_KERNELS);
    block = allocate(64);
  }
  // Grown outside the scope, it is a new block of this thread's own.
  block = std::realloc(block, 1 << 20);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(loomrt_heap_scope_bytes(LOOMRT_HEAP_KERNELS), kernels);
  int64_t unscoped = loomrt_heap_unscoped_bytes();
  onNamedThread([&] { std::free(block); });
  EXPECT_LE(loomrt_heap_unscoped_bytes(), unscoped - (1 << 20));
}

TEST(ProcessHeapTest, ScopesNest) {
  ASSERT_TRUE(kMainNamed);
  int64_t runtime = loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME);
  int64_t kernels = loomrt_heap_scope_bytes(LOOMRT_HEAP_KERNELS);
  void *inner, *outer;
  {
    HeapScope a(LOOMRT_HEAP_RUNTIME);
    {
      HeapScope b(LOOMRT_HEAP_KERNELS);
      inner = allocate(1000);
    }
    outer = allocate(2000);
  }
  EXPECT_GE(loomrt_heap_scope_bytes(LOOMRT_HEAP_KERNELS) - kernels, 1000);
  EXPECT_LT(loomrt_heap_scope_bytes(LOOMRT_HEAP_KERNELS) - kernels, 2000);
  EXPECT_GE(loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME) - runtime, 2000);
  std::free(inner);
  std::free(outer);
  EXPECT_EQ(loomrt_heap_scope_bytes(LOOMRT_HEAP_KERNELS), kernels);
  EXPECT_EQ(loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME), runtime);
}

TEST(ProcessHeapTest, ManyBlocksFreedInAnyOrderLeaveNothingOnTheLine) {
  ASSERT_TRUE(kMainNamed);
  std::vector<void *> blocks(20000);
  int64_t runtime = loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME);
  {
    HeapScope scope(LOOMRT_HEAP_RUNTIME);
    for (size_t i = 0; i < blocks.size(); ++i)
      blocks[i] = allocate(16 + i % 200);
  }
  EXPECT_GT(loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME) - runtime,
            int64_t(blocks.size() * 16));
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(7));
  // Half here, half on another thread, some while this one allocates more.
  std::thread other([&] {
    loomrt_heap_name_thread();
    for (size_t i = blocks.size() / 2; i < blocks.size(); ++i)
      std::free(blocks[i]);
  });
  for (size_t i = 0; i < blocks.size() / 2; ++i) {
    std::free(blocks[i]);
    std::free(allocate(24));
  }
  other.join();
  EXPECT_EQ(loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME), runtime);
  EXPECT_EQ(loomrt_heap_untracked_blocks(), 0);
}

} // namespace
