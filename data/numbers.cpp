#include "numbers.h"

#include "base/error.h"

namespace sf::data::numbers {

namespace {

const char* const kUnits[] = {"zero",    "one",     "two",       "three",    "four",
                              "five",    "six",     "seven",     "eight",    "nine",
                              "ten",     "eleven",  "twelve",    "thirteen", "fourteen",
                              "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
const char* const kTens[] = {"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy",
                             "eighty", "ninety"};

std::string below_hundred(int n) {  // 1..99
  if (n < 20) return kUnits[n];
  std::string out = kTens[n / 10];
  if (n % 10) out += std::string(" - ") + kUnits[n % 10];
  return out;
}

std::string below_thousand(int n) {  // 1..999
  int hundreds = n / 100, rest = n % 100;
  if (!hundreds) return below_hundred(rest);
  std::string out = std::string(kUnits[hundreds]) + " hundred";
  if (rest) out += " and " + below_hundred(rest);
  return out;
}

}  // namespace

std::string words(int value) {
  if (value < 0 || value > 999999) internal_fail("numbers: ", value, " outside 0..999999");
  if (value == 0) return "zero";
  int thousands = value / 1000, rest = value % 1000;
  if (!thousands) return below_thousand(rest);
  std::string out = below_thousand(thousands) + " thousand";
  if (rest) out += (rest < 100 ? " and " : " ") + below_thousand(rest);
  return out;
}

std::string digits(int value) {
  std::string text = std::to_string(value), out;
  for (char digit : text) {
    if (!out.empty()) out += ' ';
    out += digit;
  }
  return out;
}

Pair sample_pair(Rng& rng) {
  int length = 1 + static_cast<int>(rng.below(6));
  int high = 10;
  for (int i = 1; i < length; ++i) high *= 10;
  int low = length == 1 ? 0 : high / 10;  // the smallest number with `length` digits
  int value = low + static_cast<int>(rng.below(high - low));
  return {words(value), digits(value), ""};
}

}  // namespace sf::data::numbers
