#include "sha256.h"

#include <algorithm>
#include <cstring>

namespace sf {

namespace {

// The first 32 bits of the fractional parts of the cube roots of the first 64 primes (§4.2.2).
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

// §6.2.2: the message schedule W, then 64 rounds over the working variables a..h.
void Sha256::compress(const unsigned char* block) {
  uint32_t w[64];
  for (int t = 0; t < 16; ++t)
    w[t] = uint32_t{block[4 * t]} << 24 | uint32_t{block[4 * t + 1]} << 16 | uint32_t{block[4 * t + 2]} << 8 |
           uint32_t{block[4 * t + 3]};
  for (int t = 16; t < 64; ++t) {
    uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);   // σ0
    uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);    // σ1
    w[t] = s1 + w[t - 7] + s0 + w[t - 16];
  }
  auto [a, b, c, d, e, f, g, h] = state_;
  for (int t = 0; t < 64; ++t) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[t] + w[t];  // Σ1, Ch
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));               // Σ0, Maj
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  const uint32_t next[8] = {a, b, c, d, e, f, g, h};
  for (int i = 0; i < 8; ++i) state_[i] += next[i];
}

void Sha256::add(std::string_view bytes) {
  length_ += bytes.size();
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t size = bytes.size();
  while (size > 0) {
    if (pending_size_ == 0 && size >= 64) {  // whole blocks straight from the input
      compress(in);
      in += 64;
      size -= 64;
      continue;
    }
    size_t n = std::min(size, 64 - pending_size_);
    std::memcpy(pending_.data() + pending_size_, in, n);
    pending_size_ += n;
    in += n;
    size -= n;
    if (pending_size_ == 64) {
      compress(pending_.data());
      pending_size_ = 0;
    }
  }
}

// §5.1.1: a 1 bit, zeros up to 56 bytes into a block, then the length in bits, big-endian.
std::string Sha256::hex() {
  uint64_t bits = length_ * 8;
  unsigned char tail[72] = {0x80};
  size_t zeros = (pending_size_ < 56 ? 56 : 120) - pending_size_ - 1;
  for (int i = 0; i < 8; ++i) tail[1 + zeros + i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  add(std::string_view(reinterpret_cast<const char*>(tail), 1 + zeros + 8));
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint32_t word : state_)
    for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(word >> shift) & 15];
  return out;
}

}  // namespace sf
