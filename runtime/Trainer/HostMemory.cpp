//===- HostMemory.cpp - the compiled step's allocations, counted ----------===//
//
// loomc lowers memref.alloc/dealloc with MLIR's generic allocation functions
// (finalize-memref-to-llvm{use-generic-functions}); defining them here lets
// the trainer measure what the step really allocates, to set beside the
// static plan. Allocations are few (one arena per step), so a mutex and a
// map from pointer to size cost nothing measurable.
//
//===----------------------------------------------------------------------===//

#include "Backends/RuntimeSupport.h"
#include "loom/Runtime/loomrt.h"


#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace {

struct HostMemory {
  std::mutex mutex;
  std::unordered_map<void *, int64_t> sizes;
  int64_t current = 0, peak = 0;

  void *record(void *pointer, size_t bytes) {
    if (!pointer)
      return pointer;
    std::lock_guard<std::mutex> lock(mutex);
    sizes[pointer] = int64_t(bytes);
    current += int64_t(bytes);
    if (current > peak)
      peak = current;
    return pointer;
  }
  void release(void *pointer) {
    if (!pointer)
      return;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = sizes.find(pointer);
    if (it != sizes.end()) {
      current -= it->second;
      sizes.erase(it);
    }
  }
};

HostMemory &hostMemory() {
  static HostMemory memory;
  return memory;
}

} // namespace

extern "C" {

void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return hostMemory().record(std::malloc(bytes), bytes);
}

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment.
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return hostMemory().record(std::aligned_alloc(alignment, rounded), bytes);
}

void _mlir_memref_to_llvm_free(void *pointer) {
  hostMemory().release(pointer);
  std::free(pointer);
}

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
  hostMemory().record(pointer, size_t(bytes));
}

void loomrt_count_free(void *pointer) { hostMemory().release(pointer); }

} // extern "C"
