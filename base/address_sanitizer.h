// AddressSanitizer's manual poisoning, for memory this program recycles by
// itself instead of freeing (the tensors' block cache): a byte marked
// poisoned is reported when touched, as a freed or out-of-bounds heap byte
// is. Without AddressSanitizer these do nothing and cost nothing.
#pragma once
#include <cstddef>

// GCC says __SANITIZE_ADDRESS__, Clang __has_feature(address_sanitizer).
#if defined(__SANITIZE_ADDRESS__)
#define SF_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SF_ADDRESS_SANITIZER 1
#endif
#endif

#ifdef SF_ADDRESS_SANITIZER
#include <sanitizer/asan_interface.h>
#endif

namespace sf::address_sanitizer {

#ifdef SF_ADDRESS_SANITIZER
inline constexpr bool kOn = true;
// Poisoning works in 8-byte granules: a region may start anywhere, and a
// granule's bytes before it stay as they were.
inline void poison(const void* begin, size_t bytes) { __asan_poison_memory_region(begin, bytes); }
inline void unpoison(const void* begin, size_t bytes) { __asan_unpoison_memory_region(begin, bytes); }
#else
inline constexpr bool kOn = false;
inline void poison(const void*, size_t) {}
inline void unpoison(const void*, size_t) {}
#endif

}  // namespace sf::address_sanitizer
