// Host fp16/bf16 conversions of src/common/half.h, which every CPU kernel uses to read and write
// half-precision tensors. Exhaustive where cheap: every 16-bit pattern is decoded and re-encoded, and
// every tie between two neighbouring representable values (plus the floats just either side of it)
// is rounded, which covers subnormals, the subnormal/normal boundary and overflow to infinity.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/half.h"
#include "test_util.h"

using sparsekern::detail::bfloat16_t;
using sparsekern::detail::half_t;

namespace {

half_t half_bits(std::uint16_t b) { half_t h; h.bits = b; return h; }
bfloat16_t bf16_bits(std::uint16_t b) { bfloat16_t h; h.bits = b; return h; }

// binary16 value of `b` computed independently of half.h (exact in double).
double half_value(std::uint16_t b) {
  const int sign = b >> 15, exp = (b >> 10) & 0x1f, mant = b & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  if (exp == 0x1f) v = mant ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  return sign ? -v : v;
}

void half_decode_roundtrip() {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = static_cast<float>(half_bits(bits));
    const double expect = half_value(bits);
    if (std::isnan(expect)) {
      SK_CHECK(std::isnan(f), "half 0x", std::hex, b, " must decode to NaN");
      SK_CHECK(std::isnan(static_cast<float>(half_t(f))), "NaN 0x", std::hex, b, " must stay NaN");
      continue;
    }
    SK_CHECK(f == expect && std::signbit(f) == std::signbit(expect), "half 0x", std::hex, b,
             " decodes to ", f, ", expected ", expect);
    SK_CHECK(half_t(f).bits == bits, "half 0x", std::hex, b, " re-encodes to 0x", half_t(f).bits);
  }
}

// For each pair of neighbours lo < hi: their midpoint must round to the one with the even mantissa
// (ties to even), and the floats just below/above the midpoint to lo/hi.
template <typename H, typename Value>
void ties_to_even(const char* name, std::uint16_t last_finite, Value value) {
  for (std::uint32_t b = 0; b <= last_finite; ++b) {
    for (std::uint16_t sign : {std::uint16_t(0), std::uint16_t(0x8000)}) {
      const std::uint16_t lo = static_cast<std::uint16_t>(b | sign);
      const std::uint16_t hi = static_cast<std::uint16_t>((b + 1) | sign);  // may be +-inf
      // Past the largest finite value the next step is infinity; the tie sits half an ulp out.
      const double mid_d = std::isinf(value(hi)) ? value(lo) + (value(lo) - value(lo - 1)) / 2
                                                 : (value(lo) + value(hi)) / 2;
      const float mid = static_cast<float>(mid_d);  // exact: needs only one bit more than H has
      const float inward = std::nextafter(mid, 0.0f), outward = std::nextafter(mid, mid * 2);
      const std::uint16_t even = (lo & 1) ? hi : lo;
      SK_CHECK(H(mid).bits == even, name, "(", mid, ") = 0x", std::hex, H(mid).bits,
               ", expected the even neighbour 0x", even);
      SK_CHECK(H(inward).bits == lo, name, "(", inward, ") = 0x", std::hex, H(inward).bits,
               ", expected 0x", lo);
      SK_CHECK(H(outward).bits == hi, name, "(", outward, ") = 0x", std::hex, H(outward).bits,
               ", expected 0x", hi);
    }
  }
}

void half_hand_picked() {
  struct Case { float in; std::uint16_t bits; };
  const Case cases[] = {
      {0.0f, 0x0000},           {-0.0f, 0x8000},          {1.0f, 0x3c00},
      {-2.0f, 0xc000},          {65504.0f, 0x7bff},       // largest finite half
      {65519.996f, 0x7bff},     // just below the overflow tie
      {65520.0f, 0x7c00},       // tie between 65504 and 2^16: to even, i.e. inf
      {1e10f, 0x7c00},          {-1e10f, 0xfc00},         {INFINITY, 0x7c00},
      {1.0f + 0x1p-11f, 0x3c00},         // tie: 1.0 (even) wins over 1 + 2^-10
      {1.0f + 3 * 0x1p-11f, 0x3c02},     // tie: 1 + 2^-9 (even) wins over 1 + 2^-10
      {0x1p-24f, 0x0001},       // smallest subnormal
      {0x1p-25f, 0x0000},       // tie between 0 and 2^-24: 0
      {0x1.8p-24f, 0x0002},     // tie between 1 and 2 ulps: 2
      {0x1p-26f, 0x0000},       {0x1p-14f, 0x0400},       // smallest normal
      {0x1p-14f - 0x1p-25f, 0x0400},  // tie between largest subnormal and smallest normal
      {0.1f, 0x2e66},           {3.14159265f, 0x4248},
  };
  for (const Case& c : cases)
    SK_CHECK(half_t(c.in).bits == c.bits, "half_t(", c.in, ") = 0x", std::hex, half_t(c.in).bits,
             ", expected 0x", c.bits);
  SK_CHECK(std::isnan(static_cast<float>(half_t(std::numeric_limits<float>::quiet_NaN()))),
           "NaN must convert to NaN");
}

void bf16_all() {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = static_cast<float>(bf16_bits(bits));
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    SK_CHECK(u == (b << 16), "bf16 0x", std::hex, b, " decodes to bits 0x", u);
    if (std::isnan(f))
      SK_CHECK(std::isnan(static_cast<float>(bfloat16_t(f))), "bf16 NaN 0x", std::hex, b, " must stay NaN");
    else
      SK_CHECK(bfloat16_t(f).bits == bits, "bf16 0x", std::hex, b, " re-encodes to 0x", bfloat16_t(f).bits);
  }
  struct Case { float in; std::uint16_t bits; };
  const Case cases[] = {
      {1.0f, 0x3f80},
      {1.0f + 0x1p-8f, 0x3f80},      // tie: 1.0 (even)
      {1.0f + 3 * 0x1p-8f, 0x3f82},  // tie: 1 + 2^-6 (even)
      {1.0f + 0x1p-8f + 0x1p-20f, 0x3f81},
      {std::numeric_limits<float>::max(), 0x7f80},  // rounds past the largest bf16: inf
      {-0.0f, 0x8000},
  };
  for (const Case& c : cases)
    SK_CHECK(bfloat16_t(c.in).bits == c.bits, "bfloat16_t(", c.in, ") = 0x", std::hex,
             bfloat16_t(c.in).bits, ", expected 0x", c.bits);
  // A signalling NaN must come back quiet, not as infinity (truncation would lose the payload bit).
  float snan;
  const std::uint32_t snan_bits = 0x7f800001u;
  std::memcpy(&snan, &snan_bits, 4);
  SK_CHECK(std::isnan(static_cast<float>(bfloat16_t(snan))), "signalling NaN must stay NaN");
}

}  // namespace

int main() {
  half_decode_roundtrip();
  ties_to_even<half_t>("half_t", 0x7bff, half_value);
  half_hand_picked();
  bf16_all();
  ties_to_even<bfloat16_t>("bfloat16_t", 0x7f7f, [](std::uint16_t b) {
    return static_cast<double>(static_cast<float>(bf16_bits(b)));
  });
  return sk_test::summary("test_half");
}
