// The `dates` toy task: English dates in varied formats -> ISO words.
// "wednesday , march 3rd 2021", "3 mar 21", "03/03/2021", ... -> "2021 - 03 - 03".
#pragma once
#include <string>

#include "base/random.h"
#include "corpus.h"

namespace sf::data::dates {

struct Date {
  int year, month, day;  // month 1..12, day 1..days in that month
};

// Dates are drawn from 1950-01-01 .. 2049-12-31, so a two-digit year is never
// ambiguous: 50..99 are 19xx, 00..49 are 20xx.
inline constexpr int kFirstYear = 1950, kLastYear = 2049;

enum class Style {
  WeekdayMonthOrdinal,  // "wednesday , march 3rd 2021"
  DayAbbrevShortYear,   // "3 mar 21"
  Numeric,              // "03/03/2021" (US order: month/day/year, as "march 3rd")
  TheOrdinalOf,         // "the 3rd of march , 2021"
  MonthDayComma,        // "march 3 , 2021"
  DayMonthYear,         // "3 march 2021"
};
inline constexpr int kStyleCount = 6;

std::string english(const Date& date, Style style);
std::string iso(const Date& date);  // "2021 - 03 - 03"

Pair sample_pair(Rng& rng);

}  // namespace sf::data::dates
