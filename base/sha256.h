// SHA-256 (FIPS 180-4), the digest a tokenizer file is known by in a
// checkpoint's metadata: `sha256sum FILE` prints the same 64 hex digits, so
// anyone can check which tokenizer files belong to a model. Unlike FNV-1a
// (digest.h) it is a cryptographic hash: two different files never meet by
// accident, whatever their size.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace sf {

class Sha256 {
 public:
  void add(std::string_view bytes);
  // The digest as 64 lowercase hex digits; the object is spent after it.
  std::string hex();

 private:
  void compress(const unsigned char* block);  // one 64-byte block into state_

  std::array<uint32_t, 8> state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};  // §5.3.3
  std::array<unsigned char, 64> pending_{};  // a block's bytes not yet compressed
  size_t pending_size_ = 0;
  uint64_t length_ = 0;  // bytes added
};

inline std::string sha256_hex(std::string_view bytes) {
  Sha256 digest;
  digest.add(bytes);
  return digest.hex();
}

}  // namespace sf
