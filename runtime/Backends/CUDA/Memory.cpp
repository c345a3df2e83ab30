//===- Memory.cpp - device memory, copies and streams ---------------------===//
//
// Device memory (freed blocks handed back by size, so that cudaMalloc and
// cudaFree stay out of the step), copies, events, and the streams and
// memory entry points of MLIR's gpu-to-llvm ABI.
//
//===----------------------------------------------------------------------===//

#include "Backends/CUDA/CudaContext.h"

using namespace loom::runtime::cuda;

namespace loom::runtime::cuda {

cudaEvent_t Context::event() {
  if (!spareEvents.empty()) {
    cudaEvent_t e = spareEvents.back();
    spareEvents.pop_back();
    return e;
  }
  cudaEvent_t e;
  check(cudaEventCreate(&e), "cudaEventCreate");
  return e;
}

void *Context::alloc(uint64_t bytes) {
  void *pointer = nullptr;
  auto it = freeBlocks.find(bytes);
  if (it != freeBlocks.end()) {
    pointer = it->second;
    freeBlocks.erase(it);
  } else {
    check(cudaMalloc(&pointer, bytes),
          "cudaMalloc of the step's " + std::to_string(bytes) + " bytes");
    blockSizes[pointer] = bytes;
  }
  loomrt_count_alloc(pointer, int64_t(bytes));
  return pointer;
}

void Context::free(void *pointer) {
  auto it = blockSizes.find(pointer);
  if (it == blockSizes.end())
    abort("mgpuMemFree of memory the step did not allocate");
  loomrt_count_free(pointer);
  freeBlocks.insert({it->second, pointer});
}

void Context::copy(void *dst, const void *src, int64_t bytes,
                   cudaMemcpyKind kind, const char *what) {
  // On the compute stream, so that the step's kernels see the copy (a
  // plain cudaMemcpy runs on the legacy stream, which the non-blocking
  // compute stream does not wait for).
  check(cudaMemcpyAsync(dst, src, size_t(bytes), kind, compute), what);
  check(cudaStreamSynchronize(compute), what);
}

} // namespace loom::runtime::cuda

extern "C" {

int64_t loomrt_device_used_bytes(void) {
  Context &c = context();
  return c.usedBytes() - c.contextBytes;
}

loomrt_device_lines loomrt_device_named_bytes(void) {
  Context &c = context();
  return {int64_t(Context::kCublasWorkspaceBytes), c.moduleBytes, c.ncclBytes};
}

void *loomrt_device_alloc(int64_t bytes) {
  void *pointer = nullptr;
  context().check(cudaMalloc(&pointer, size_t(bytes > 0 ? bytes : 1)),
                  "cudaMalloc of a " + std::to_string(bytes) +
                      "-byte trainer buffer");
  return pointer;
}

void loomrt_device_free(void *device) { cudaFree(device); }

void loomrt_copy_to_device(void *device, const void *host, int64_t bytes) {
  context().copy(device, host, bytes, cudaMemcpyHostToDevice,
                 "copying a trainer buffer to the GPU");
}

void loomrt_copy_to_host(void *host, const void *device, int64_t bytes) {
  context().copy(host, device, bytes, cudaMemcpyDeviceToHost,
                 "copying a trainer buffer from the GPU");
}

void *mgpuStreamCreate() { return context().compute; }
void mgpuStreamDestroy(void *) {}
void mgpuStreamSynchronize(void *) {}

void *mgpuMemAlloc(uint64_t bytes, void *, bool hostShared) {
  if (hostShared)
    context().abort("host-shared GPU memory is not supported");
  return context().alloc(bytes);
}

void mgpuMemFree(void *pointer, void *) { context().free(pointer); }

void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  context().check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                  static_cast<cudaStream_t>(stream)),
                  "mgpuMemcpy");
}

void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream) {
  // Only zero and repeated bytes can use cudaMemsetAsync.
  unsigned byte = value & 0xff;
  if (value != (byte * 0x01010101u))
    context().abort("mgpuMemset32 of a non-byte pattern is not supported");
  context().check(cudaMemsetAsync(dst, int(byte), count * 4,
                                  static_cast<cudaStream_t>(stream)),
                  "mgpuMemset32");
}

} // extern "C"
