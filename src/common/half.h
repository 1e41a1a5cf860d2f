#pragma once
// Host-side 16-bit float storage types for the CPU kernels. Layout-compatible with CUDA's __half and
// __nv_bfloat16 and torch's Half/BFloat16 (IEEE binary16 and the upper half of binary32), so CPU
// code needs no CUDA headers. Conversions round to nearest even, like the hardware.

#include <cstdint>
#include <cstring>

namespace sparsekern::detail {

inline float bits_to_float(std::uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline std::uint32_t float_to_bits(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); return u; }

struct bfloat16_t {
  std::uint16_t bits;
  bfloat16_t() = default;
  explicit bfloat16_t(float f) {
    std::uint32_t u = float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = static_cast<std::uint16_t>((u >> 16) | 0x40); return; }  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    bits = static_cast<std::uint16_t>(u >> 16);
  }
  explicit operator float() const { return bits_to_float(static_cast<std::uint32_t>(bits) << 16); }
};

struct half_t {
  std::uint16_t bits;
  half_t() = default;
  explicit half_t(float f) {
    // Shift-and-round conversion from binary32 to binary16 (handles subnormals, inf, NaN).
    std::uint32_t x = float_to_bits(f);
    std::uint32_t sign = (x >> 16) & 0x8000u;
    std::uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {  // inf or NaN
      bits = static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
      return;
    }
    if (absx >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
      bits = static_cast<std::uint16_t>(sign | 0x7c00u);
      return;
    }
    if (absx < 0x38800000u) {  // subnormal half (or zero): scale by 2^24 and round
      float scaled = bits_to_float(absx) * 16777216.0f;  // exact: power-of-two scale
      // nearbyint with ties-to-even through the float adder
      float r = scaled + 8388608.0f;
      std::uint32_t m = float_to_bits(r) - 0x4b000000u;
      bits = static_cast<std::uint16_t>(sign | m);
      return;
    }
    std::uint32_t mant_odd = (absx >> 13) & 1u;
    absx += 0xc8000fffu + mant_odd;  // rebias exponent (127 -> 15) and round to nearest even
    bits = static_cast<std::uint16_t>(sign | (absx >> 13));
  }
  explicit operator float() const {
    std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    std::uint32_t exp = (bits >> 10) & 0x1fu;
    std::uint32_t mant = bits & 0x3ffu;
    if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
      return sign ? -v : v;
    }
    return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

template <typename T> inline float to_float(T v) { return static_cast<float>(v); }
inline double to_acc(double v) { return v; }

template <typename T> inline T from_float(float v) { return T(v); }

}  // namespace sparsekern::detail
