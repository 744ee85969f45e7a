#include "random.h"

#include <cmath>
#include <numbers>

#include "error.h"

namespace sf {

static uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void Rng::reseed(uint64_t seed) {
  for (uint64_t& word : state_) word = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  uint64_t* s = state_.data();
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

// The top 24 bits: every float in [0, 1) this can return is exactly representable.
float Rng::uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }

float Rng::uniform(float low, float high) { return low + (high - low) * uniform(); }

float Rng::normal() {
  float u1 = 1.0f - uniform();  // (0, 1]: log(u1) is finite
  float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(2.0f * std::numbers::pi_v<float> * u2);
}

uint64_t Rng::below(uint64_t n) {
  if (n == 0) internal_fail("Rng::below(0)");
  // Rejection sampling removes the modulo bias.
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = next_u64();
  while (r >= limit);
  return r % n;
}

}  // namespace sf
