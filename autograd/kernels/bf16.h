// bfloat16 ("brain float", Kalamkar et al. 2019, "A Study of BFLOAT16 for
// Deep Learning Training"): the top 16 bits of a float32. It keeps float32's
// sign and 8-bit exponent, so its range (1e-38 to 3e38, subnormals and
// infinities included) is float32's, and cuts the mantissa from 23 bits to 7:
// about 2-3 significant decimal digits, a relative rounding error of at most
// 2^-9. Converting back to float32 is exact (append 16 zero bits); converting
// to bf16 rounds to nearest, ties to even, as PyTorch's torch.bfloat16 does.
//
// A bf16 value is stored as its 16 bits in `bf16`, a distinct type, so a
// bf16 array is never mistaken for an int16 or float one.
#pragma once
#include <bit>
#include <cstdint>

namespace sf::kernels {

struct bf16 {
  uint16_t bits;
};

// Round to nearest even: add 0x7FFF plus the lowest kept bit, then drop the
// low 16 bits. A carry out of the mantissa lands in the exponent, which is the
// correct rounding there too (up to infinity past the largest bf16). A NaN
// keeps its sign and top payload bits and gets the quiet bit, so it stays a
// NaN even when its payload was only in the bits dropped.
inline bf16 to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return {static_cast<uint16_t>((u >> 16) | 0x0040u)};
  return {static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};
}

inline float to_float(bf16 x) { return std::bit_cast<float>(static_cast<uint32_t>(x.bits) << 16); }

// x rounded to the nearest bf16, as a float32.
inline float round_to_bf16(float x) { return to_float(to_bf16(x)); }

}  // namespace sf::kernels
