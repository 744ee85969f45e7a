// Detokenisation (data/detokenizer.h): each rule on hand-made sentences, then
// the round trip detokenize(pre_tokenize(s)) == s on the validation files of
// the real corpora in ../shared/data (skipped when they are absent).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "data/detokenizer.h"
#include "data/pretokenizer.h"
#include "real_corpora.h"
#include "skip.h"

using namespace sf::data;
namespace fs = std::filesystem;
using sf::testing::shared_data;

namespace {

std::string round_trip(std::string_view text) { return detokenize(pre_tokenize(text)); }

// True when the pre-tokenizer keeps everything but the places of single
// spaces: no tabs, no leading, trailing or repeated spaces.
bool spacing_is_single(std::string_view text) {
  if (text.empty() || text.front() == ' ' || text.back() == ' ') return false;
  return text.find("  ") == std::string_view::npos && text.find('\t') == std::string_view::npos &&
         text.find('\r') == std::string_view::npos;
}

struct Share {
  int checked = 0, equal = 0;
  double percent() const { return checked ? 100.0 * equal / checked : 0; }
};

// The round-trip share of one column (0 source, 1 target) of a TSV file, over
// the sentences whose spacing the pre-tokenizer keeps.
Share round_trip_share(const fs::path& path, int column) {
  Share share;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    std::string text = column == 0 ? line.substr(0, tab) : line.substr(tab + 1);
    if (!spacing_is_single(text)) continue;
    ++share.checked;
    share.equal += round_trip(text) == text;
  }
  return share;
}

}  // namespace

TEST_CASE("data: detokenize writes closing punctuation against the word before it") {
  CHECK(round_trip("Ein Mann schläft in einem grünen Raum auf einem Sofa.") ==
        "Ein Mann schläft in einem grünen Raum auf einem Sofa.");
  CHECK(detokenize("Hello , world !") == "Hello, world!");
  CHECK(detokenize("Wait ; what : this ?!") == "Wait; what: this?!");
  CHECK(detokenize("He left ...") == "He left...");
  CHECK(detokenize("50 % off") == "50% off");
}

TEST_CASE("data: detokenize writes opening punctuation against the word after it") {
  CHECK(detokenize("a man ( in red ) runs") == "a man (in red) runs");
  CHECK(detokenize("[ sic ]") == "[sic]");
  CHECK(detokenize("¿ Dónde está ?") == "¿Dónde está?");
  CHECK(detokenize("¡ Qué bien !") == "¡Qué bien!");
  CHECK(detokenize("Sí , ¿ y tú ?") == "Sí, ¿y tú?");
}

TEST_CASE("data: detokenize pairs quotes") {
  CHECK(detokenize("He said \" hi \" and \" bye .\"") == "He said \"hi\" and \"bye.\"");
  CHECK(detokenize("Sie sagte „ Hallo .“ Dann ging sie .") == "Sie sagte „Hallo.“ Dann ging sie.");
  CHECK(detokenize("He said “ hi ” .") == "He said “hi”.");
  CHECK(detokenize("« Hola » , dijo .") == "«Hola», dijo.");
  // Between two words an apostrophe joins them (see below), so single quotes
  // pair only where one side is punctuation or the sentence's edge.
  CHECK(detokenize("' Hello ' , he said .") == "'Hello', he said.");
  CHECK(detokenize("\"¿ Qué ?\"") == "\"¿Qué?\"");
}

TEST_CASE("data: detokenize joins apostrophes and hyphens between words") {
  CHECK(detokenize("I don ' t know Tom ' s dog") == "I don't know Tom's dog");
  CHECK(detokenize("l ' uomo") == "l'uomo");
  CHECK(detokenize("it ’ s") == "it’s");
  CHECK(detokenize("ein rotes T - Shirt") == "ein rotes T-Shirt");
  CHECK(detokenize("Obst - und Gemüsehändler") == "Obst- und Gemüsehändler");
}

TEST_CASE("data: detokenize keeps numbers with their separators") {
  CHECK(detokenize("1 , 000 people") == "1,000 people");
  CHECK(detokenize("3 . 5 km at 10 : 30 .") == "3.5 km at 10:30.");
  // A separator between a number and a word is punctuation, not part of it.
  CHECK(detokenize("I have 3 , you have 4 .") == "I have 3, you have 4.");
}

TEST_CASE("data: detokenize of nothing, one word, and the spaced string form") {
  CHECK(detokenize(std::vector<std::string_view>{}).empty());
  CHECK(detokenize("") == "");
  CHECK(detokenize("Sofa") == "Sofa");
  CHECK(detokenize(". . .") == "...");
  CHECK(detokenize(pre_tokenized_text("¿Quién es?")) == "¿Quién es?");
}

TEST_CASE("data: detokenize inverts the pre-tokenizer on the real validation sentences") {
  fs::path root = shared_data();
  if (!fs::is_directory(root)) SF_SKIP(("no real corpora at " + root.string()).c_str());
  struct Expect {
    const char *folder, *language;
    int column;
    double floor_percent;  // a little below the share measured
  };
  for (Expect e : {Expect{"multi30k_en_de", "en", 0, 99.0}, Expect{"multi30k_en_de", "de", 1, 99.0},
                   Expect{"tatoeba_en_es", "en", 0, 99.5}, Expect{"tatoeba_en_es", "es", 1, 99.5}}) {
    fs::path path = root / e.folder / "valid.tsv";
    REQUIRE(fs::exists(path));
    Share share = round_trip_share(path, e.column);
    MESSAGE(std::string(e.folder) << " " << std::string(e.language) << ": detokenize(pre_tokenize(s)) == s for " << share.equal << " of "
                     << share.checked << " sentences (" << share.percent() << "%)");
    CHECK(share.checked > 900);
    CHECK(share.percent() >= e.floor_percent);
  }
}
