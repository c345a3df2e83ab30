//===- Bf16Pack.cuh - bf16 conversions in CUDA kernels ----------*- C++ -*-===//
//
// Private to lib/Runtime's kernels: bf16 (its bits as uint16_t) to f32 and
// back, rounding to nearest, ties to even, as include/loom/Support/Bf16.h
// does on the host. On the device one cvt.rn.bf16x2.f32 rounds a pair.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_BF16PACK_CUH
#define LOOM_RUNTIME_BF16PACK_CUH

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
#else
  auto round = [](float x) -> uint32_t {
    const uint32_t bits = __float_as_uint(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
      return (bits >> 16) | 0x40u; // a quiet NaN
    return (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  };
  return round(lo) | round(hi) << 16;
#endif
}

} // namespace loom::cuda

#endif // LOOM_RUNTIME_BF16PACK_CUH
