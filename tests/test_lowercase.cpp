// Lowercasing as Python's str.lower() (sacreBLEU's -lc) and Perl's lc()
// (Moses' lowercase.perl): the expected strings are what Python 3.11 and
// Perl 5.36 print for the same input.
#include <doctest/doctest.h>

#include "data/lowercase.h"

using sf::data::FinalSigma;
using sf::data::lowercase;

TEST_CASE("lowercase: ASCII, Latin-1, Latin Extended-A, Cyrillic and Greek letters, other characters kept") {
  CHECK(lowercase("Der HUND, 42 Äpfel!", FinalSigma::python) == "der hund, 42 äpfel!");
  CHECK(lowercase("ÀÉÎÕÜÝÞ ŁŻŒĀ Ÿ", FinalSigma::python) == "àéîõüýþ łżœā ÿ");
  CHECK(lowercase("ПРИВЕТ Ёж", FinalSigma::python) == "привет ёж");
  CHECK(lowercase("ΑΒΓ Ά", FinalSigma::python) == "αβγ ά");
  CHECK(lowercase("ß → „“ 中文 😀", FinalSigma::python) == "ß → „“ 中文 😀");
  CHECK(lowercase("", FinalSigma::python).empty());
}

TEST_CASE("lowercase: capital I with dot above becomes two code points, as both Python and Perl write it") {
  CHECK(lowercase("İSTANBUL", FinalSigma::python) == "i\u0307stanbul");
  CHECK(lowercase("İSTANBUL", FinalSigma::perl) == "i\u0307stanbul");
}

TEST_CASE("lowercase: Python writes a word-final capital sigma as ς, Perl always as σ") {
  // Python: 'ΟΔΟΣ ΣΑ Σ Α\'Σ'.lower() == "οδος σα σ α'ς": final after a letter
  // (an apostrophe between is skipped), not before one, not alone.
  CHECK(lowercase("ΟΔΟΣ ΣΑ Σ Α'Σ", FinalSigma::python) == "οδος σα σ α'ς");
  CHECK(lowercase("ΟΔΟΣ ΣΑ Σ Α'Σ", FinalSigma::perl) == "οδοσ σα σ α'σ");
  // A combining mark after the sigma is skipped too: still final.
  CHECK(lowercase("ΑΣ\u0301", FinalSigma::python) == "ας\u0301");
}
