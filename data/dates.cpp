#include "dates.h"

#include <cstdio>

#include "base/error.h"

namespace sf::data::dates {

namespace {

const char* const kMonths[] = {"january", "february", "march",     "april",   "may",      "june",
                               "july",    "august",   "september", "october", "november", "december"};
const char* const kWeekdays[] = {"sunday",   "monday", "tuesday", "wednesday",
                                 "thursday", "friday", "saturday"};

bool is_leap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int days_in_month(int year, int month) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : kDays[month - 1];
}

// "1st", "2nd", "3rd", "4th", ..., "11th", "12th", "13th", "21st", ...
std::string ordinal(int day) {
  const char* suffix = "th";
  if (day / 10 != 1) {  // 11, 12, 13 take "th"
    if (day % 10 == 1) suffix = "st";
    else if (day % 10 == 2) suffix = "nd";
    else if (day % 10 == 3) suffix = "rd";
  }
  return std::to_string(day) + suffix;
}

std::string two_digits(int value) {
  char text[8];
  std::snprintf(text, sizeof text, "%02d", value % 100);
  return text;
}

const char* weekday_name(const Date& date) {
  // Sakamoto's method: the day of the week of a Gregorian date, 0 = Sunday.
  static const int kOffsets[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
  int y = date.month < 3 ? date.year - 1 : date.year;
  int weekday = (y + y / 4 - y / 100 + y / 400 + kOffsets[date.month - 1] + date.day) % 7;
  return kWeekdays[weekday];
}

}  // namespace

std::string english(const Date& d, Style style) {
  std::string month = kMonths[d.month - 1];
  std::string day = std::to_string(d.day), year = std::to_string(d.year);
  switch (style) {
    case Style::WeekdayMonthOrdinal:
      return std::string(weekday_name(d)) + " , " + month + " " + ordinal(d.day) + " " + year;
    case Style::DayAbbrevShortYear:
      return day + " " + month.substr(0, 3) + " " + two_digits(d.year);
    case Style::Numeric:
      return two_digits(d.month) + "/" + two_digits(d.day) + "/" + year;
    case Style::TheOrdinalOf:
      return "the " + ordinal(d.day) + " of " + month + " , " + year;
    case Style::MonthDayComma:
      return month + " " + day + " , " + year;
    case Style::DayMonthYear:
      return day + " " + month + " " + year;
  }
  internal_fail("dates: unknown style");
}

std::string iso(const Date& d) {
  return std::to_string(d.year) + " - " + two_digits(d.month) + " - " + two_digits(d.day);
}

Pair sample_pair(Rng& rng) {
  Date date;
  date.year = kFirstYear + static_cast<int>(rng.below(kLastYear - kFirstYear + 1));
  date.month = 1 + static_cast<int>(rng.below(12));
  date.day = 1 + static_cast<int>(rng.below(days_in_month(date.year, date.month)));
  auto style = static_cast<Style>(rng.below(kStyleCount));
  return {english(date, style), iso(date), ""};
}

}  // namespace sf::data::dates
