#include "lowercase.h"

#include <algorithm>
#include <vector>

namespace sf::data {

namespace {

constexpr char32_t kCapitalSigma = U'\u03A3', kSmallSigma = U'\u03C3', kFinalSigma = U'\u03C2';
constexpr char32_t kCapitalIWithDot = U'\u0130';

// The one-code-point lowercase of `cp` (U+0130 aside).
char32_t lower_code_point(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;  // most characters: ASCII
  const detail::LowercaseRun* end = detail::kLowercaseRuns + detail::kLowercaseRuns_size;
  const detail::LowercaseRun* run = std::lower_bound(
      detail::kLowercaseRuns, end, cp, [](const detail::LowercaseRun& r, char32_t c) { return r.last < c; });
  if (run == end || run->first > cp || (cp - run->first) % run->stride != 0) return cp;
  return static_cast<char32_t>(static_cast<int32_t>(cp) + run->delta);
}

bool is_case_ignorable(char32_t cp) {
  return detail::in_ranges(cp, detail::kCaseIgnorableRanges, detail::kCaseIgnorableRanges_size);
}
bool is_cased(char32_t cp) { return detail::in_ranges(cp, detail::kCasedRanges, detail::kCasedRanges_size); }

// Unicode's Final_Sigma condition as Python tests it: skipping case-ignorable
// characters (apostrophes, combining marks), a cased letter comes before the
// sigma at `i` and none after it. "ΟΔΟΣ" ends in ς, "Σ" alone and "ΣΑ" keep σ.
bool is_final_sigma(const std::u32string& text, size_t i) {
  size_t before = i;
  while (before > 0 && is_case_ignorable(text[before - 1])) --before;
  if (before == 0 || !is_cased(text[before - 1])) return false;
  size_t after = i + 1;
  while (after < text.size() && is_case_ignorable(text[after])) ++after;
  return after == text.size() || !is_cased(text[after]);
}

}  // namespace

std::string lowercase(std::string_view text, FinalSigma sigma) {
  std::u32string code_points = decode_utf8(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < code_points.size(); ++i) {
    char32_t cp = code_points[i];
    if (cp == kCapitalIWithDot) {
      // Its full lowercase is two code points: i and a combining dot above.
      append_utf8(out, U'i');
      append_utf8(out, U'\u0307');
    } else if (cp == kCapitalSigma) {
      bool final = sigma == FinalSigma::python && is_final_sigma(code_points, i);
      append_utf8(out, final ? kFinalSigma : kSmallSigma);
    } else {
      append_utf8(out, lower_code_point(cp));
    }
  }
  return out;
}

}  // namespace sf::data
