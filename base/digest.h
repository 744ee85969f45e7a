// FNV-1a (Fowler, Noll, Vo), a 64-bit digest: cheap, and good enough to tell
// two different things apart (what two ranks read, a checkpoint file and the
// one its state recorded). It is no defence against deliberate tampering.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sf {

class Digest {
 public:
  // Byte by byte, as FNV-1a defines it.
  void add(const void* bytes, size_t size) {
    const auto* b = static_cast<const unsigned char*>(bytes);
    for (size_t i = 0; i < size; ++i) mix(b[i]);
  }
  template <class T>
  void add(const std::vector<T>& values) { add(values.data(), values.size() * sizeof(T)); }
  void add(const std::string& text) { add(text.data(), text.size()); }
  // Eight bytes at a time (a word per step: eight times faster, for whole
  // files), the last size % 8 bytes one by one.
  void add_words(const void* bytes, size_t size) {
    const auto* b = static_cast<const unsigned char*>(bytes);
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
      uint64_t word;
      std::memcpy(&word, b + i, 8);
      mix(word);
    }
    add(b + i, size - i);
  }
  void add_value(uint64_t value) { mix(value); }
  uint64_t value() const { return hash_; }

 private:
  void mix(uint64_t value) { hash_ = (hash_ ^ value) * 0x100000001b3ull; }
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace sf
