//===- Bf16Pack.cuh - bf16 conversions in CUDA kernels ----------*- C++ -*-===//
//
// Private to the runtime's kernels: bf16 (its bits as uint16_t) to f32 and
// back, rounding to nearest, ties to even: on the device one
// cvt.rn.bf16x2.f32 rounds a pair, elsewhere include/loom/Runtime/Bf16.h.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_BF16PACK_CUH
#define LOOM_RUNTIME_BF16PACK_CUH

#include "loom/Runtime/Bf16.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace loom::cuda {

__device__ __forceinline__ float widen(uint16_t x) {
  return __uint_as_float(uint32_t(x) << 16);
}

/// `lo` and `hi` rounded to the nearest bf16 (ties to even), packed with
/// `lo` at the lower address.
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
#ifdef __CUDA_ARCH__
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
#else // the host pass, and the CPU emulation of the kernels
  return floatToBf16(lo) | uint32_t(floatToBf16(hi)) << 16;
#endif
}

} // namespace loom::cuda

#endif // LOOM_RUNTIME_BF16PACK_CUH
