//===- Bf16.h - bfloat16 <-> float on the host -------------------*- C++ -*-===//
//
// Header-only, no LLVM: the runtime and the tools share it. bf16 is the top
// half of an IEEE f32; rounding to it is to nearest, ties to even, as
// arith.truncf and cvt.rn.bf16.f32 do.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_BF16_H
#define LOOM_SUPPORT_BF16_H

#include <cstdint>
#include <cstring>

namespace loom {

inline float bf16ToFloat(uint16_t bits) {
  uint32_t word = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

inline uint16_t floatToBf16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof word);
  if ((word & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet, keep the sign
    return uint16_t((word >> 16) | 0x40);
  word += 0x7fffu + ((word >> 16) & 1u);
  return uint16_t(word >> 16);
}

} // namespace loom

#endif // LOOM_SUPPORT_BF16_H
