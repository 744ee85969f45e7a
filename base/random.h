// A small deterministic random generator (xoshiro256**, seeded through
// splitmix64). Same seed, same numbers, on every platform and compiler — which
// the standard library's distributions do not promise. Its state can be saved
// and restored, so a resumed training run draws exactly the numbers the
// uninterrupted one would have.
#pragma once
#include <array>
#include <cstdint>

namespace sf {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);

  uint64_t next_u64();
  float uniform();                      // [0, 1)
  float uniform(float low, float high);  // [low, high)
  float normal();                       // mean 0, std 1 (Box-Muller)
  uint64_t below(uint64_t n);           // uniform integer in [0, n)

  using State = std::array<uint64_t, 4>;
  State state() const { return state_; }
  void set_state(const State& state) { state_ = state; }

 private:
  State state_{};
};

}  // namespace sf
