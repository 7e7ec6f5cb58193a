// IEEE float16 and bfloat16 <-> float32 conversions (round to nearest even).
// Reductions on 16-bit types compute in float32 and round once per element.
#pragma once

#include <cstdint>
#include <cstring>

namespace tfmpi {

inline float BFloat16ToFloat(std::uint16_t v) {
  std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint16_t FloatToBFloat16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float Float16ToFloat(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) { mant <<= 1; --exp; }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint16_t FloatToFloat16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  std::uint32_t absbits = bits & 0x7fffffffu;
  if (absbits > 0x7f800000u) return sign | 0x7e00u;            // NaN
  if (absbits >= 0x477ff000u) return sign | 0x7c00u;           // overflow -> inf
  if (absbits < 0x38800000u) {                                  // subnormal or zero
    if (absbits < 0x33000000u) return sign;                     // rounds to zero
    std::uint32_t exp = absbits >> 23;
    std::uint32_t mant = (absbits & 0x7fffffu) | 0x800000u;
    std::uint32_t shift = 126 - exp;                            // 14..24 -> 1..
    std::uint32_t halfway = 1u << (shift - 1);
    std::uint32_t rounded = mant >> shift;
    std::uint32_t rest = mant & ((1u << shift) - 1);
    if (rest > halfway || (rest == halfway && (rounded & 1u))) ++rounded;
    return sign | static_cast<std::uint16_t>(rounded);
  }
  std::uint32_t r = absbits + 0xfffu + ((absbits >> 13) & 1u);  // round to nearest even
  r -= 0x38000000u;                                              // rebias 127 -> 15
  return sign | static_cast<std::uint16_t>(r >> 13);
}

}  // namespace tfmpi
