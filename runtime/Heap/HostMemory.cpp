//===- HostMemory.cpp - the compiled step's allocations, counted ----------===//
//
// loomc lowers memref.alloc/dealloc with MLIR's generic allocation functions
// (finalize-memref-to-llvm{use-generic-functions}); defining them here lets
// the trainer count what the step allocates through them. Allocations are
// few (one arena per step), so a mutex and a map from pointer to size cost
// nothing measurable.
//
// A freed block of 1 MiB or more is kept, and handed out again for the next
// allocation of the same size and alignment: a static plan allocates the
// same arena every step, so the arena is allocated once per process and the
// resident set does not grow step by step (glibc raises its mmap threshold
// after the first free of a large block, and later arenas then come from a
// heap that fragments). The kept blocks stay in the process heap
// (ProcessHeap.cpp), which counts them as held.
//
//===----------------------------------------------------------------------===//

#include "Backends/RuntimeSupport.h"
#include "loom/Runtime/loomrt.h"


#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

constexpr size_t kKeptBytes = size_t(1) << 20;

struct HostMemory {
  struct Block {
    int64_t bytes = 0;
    /// 0 for malloc's.
    size_t alignment = 0;
  };
  std::mutex mutex;
  std::unordered_map<void *, Block> blocks;
  /// Freed blocks kept, by (bytes, alignment).
  std::map<std::pair<int64_t, size_t>, std::vector<void *>> kept;
  int64_t current = 0, peak = 0;

  void *record(void *pointer, size_t bytes, size_t alignment = 0) {
    if (!pointer)
      return pointer;
    std::lock_guard<std::mutex> lock(mutex);
    blocks[pointer] = {int64_t(bytes), alignment};
    current += int64_t(bytes);
    if (current > peak)
      peak = current;
    return pointer;
  }
  /// Forgets `pointer`; returns true if it was counted.
  bool release(void *pointer, Block *block = nullptr) {
    if (!pointer)
      return false;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = blocks.find(pointer);
    if (it == blocks.end())
      return false;
    current -= it->second.bytes;
    if (block)
      *block = it->second;
    blocks.erase(it);
    return true;
  }
  /// A kept block of this size and alignment, or null.
  void *reuse(size_t bytes, size_t alignment) {
    if (bytes < kKeptBytes)
      return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = kept.find({int64_t(bytes), alignment});
    if (it == kept.end() || it->second.empty())
      return nullptr;
    void *pointer = it->second.back();
    it->second.pop_back();
    return pointer;
  }
  /// Frees `pointer`, or keeps it for reuse if it is a large step block.
  void dispose(void *pointer) {
    Block block;
    if (!release(pointer, &block)) {
      std::free(pointer);
      return;
    }
    if (size_t(block.bytes) < kKeptBytes) {
      std::free(pointer);
      return;
    }
    std::lock_guard<std::mutex> lock(mutex);
    kept[{block.bytes, block.alignment}].push_back(pointer);
  }
};

HostMemory &hostMemory() {
  static HostMemory memory;
  return memory;
}

} // namespace

extern "C" {

void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  void *pointer = hostMemory().reuse(bytes, 0);
  return hostMemory().record(pointer ? pointer : std::malloc(bytes), bytes);
}

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  void *pointer = hostMemory().reuse(bytes, alignment);
  // aligned_alloc needs a size that is a multiple of the alignment.
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return hostMemory().record(pointer ? pointer
                                     : std::aligned_alloc(alignment, rounded),
                             bytes, alignment);
}

void _mlir_memref_to_llvm_free(void *pointer) { hostMemory().dispose(pointer); }

int64_t loomrt_host_bytes(void) {
  std::lock_guard<std::mutex> lock(hostMemory().mutex);
  return hostMemory().current;
}

int64_t loomrt_host_peak_bytes(void) {
  std::lock_guard<std::mutex> lock(hostMemory().mutex);
  return hostMemory().peak;
}

void loomrt_host_reset_peak(void) {
  std::lock_guard<std::mutex> lock(hostMemory().mutex);
  hostMemory().peak = hostMemory().current;
}

void loomrt_count_alloc(void *pointer, int64_t bytes) {
  hostMemory().record(pointer, size_t(bytes), /*alignment=*/1);
}

void loomrt_count_free(void *pointer) { hostMemory().release(pointer); }

} // extern "C"
