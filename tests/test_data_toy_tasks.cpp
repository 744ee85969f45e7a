// The built-in toy tasks: determinism, distinct sources, and hand-checked
// outputs for dates, numbers and the English -> Italian grammar.
#include <doctest/doctest.h>

#include <set>

#include "base/error.h"
#include "data/dates.h"
#include "data/grammar.h"
#include "data/numbers.h"
#include "data/pretokenizer.h"
#include "data/toy_tasks.h"

using namespace sf;
using namespace sf::data;

TEST_CASE("data: toy tasks are deterministic in (size, seed) with distinct sources") {
  for (const ToyTaskInfo& task : toy_tasks()) {
    CAPTURE(task.name);
    CHECK(task.lang_src != task.lang_tgt);
    std::vector<Pair> a = generate_toy_task(task.name, 300, 5);
    std::vector<Pair> b = generate_toy_task(task.name, 300, 5);
    std::vector<Pair> c = generate_toy_task(task.name, 300, 6);
    REQUIRE(a.size() == 300);
    std::set<std::string> sources;
    bool differs = false;
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].src == b[i].src);
      CHECK(a[i].tgt == b[i].tgt);
      differs = differs || a[i].src != c[i].src;
      sources.insert(a[i].src);
    }
    CHECK(differs);
    CHECK(sources.size() == 300);
    CHECK(a[7].origin == task.name + "#7");
  }
  CHECK_THROWS_WITH_AS(generate_toy_task("poetry", 10, 1),
                       "unknown toy task \"poetry\" (copy | reverse | dates | numbers | grammar)",
                       InternalError);
}

TEST_CASE("data: copy and reverse") {
  for (const Pair& pair : generate_toy_task("copy", 50, 1)) CHECK(pair.src == pair.tgt);
  for (const Pair& pair : generate_toy_task("reverse", 50, 1)) {
    std::vector<std::string_view> src = pre_tokenize(pair.src), tgt = pre_tokenize(pair.tgt);
    CHECK(src.size() >= 3);
    CHECK(src.size() <= 12);
    CHECK(std::vector<std::string_view>(src.rbegin(), src.rend()) == tgt);
  }
}

TEST_CASE("data: dates, hand-checked") {
  using dates::Date;
  using dates::Style;
  // Weekdays checked with Python's datetime.date(...).strftime("%A").
  Date march3{2021, 3, 3};
  CHECK(dates::english(march3, Style::WeekdayMonthOrdinal) == "wednesday , march 3rd 2021");
  CHECK(dates::english(march3, Style::DayAbbrevShortYear) == "3 mar 21");
  CHECK(dates::english(march3, Style::Numeric) == "03/03/2021");
  CHECK(dates::english(march3, Style::TheOrdinalOf) == "the 3rd of march , 2021");
  CHECK(dates::english(march3, Style::MonthDayComma) == "march 3 , 2021");
  CHECK(dates::english(march3, Style::DayMonthYear) == "3 march 2021");
  CHECK(dates::iso(march3) == "2021 - 03 - 03");

  CHECK(dates::english({1999, 12, 31}, Style::WeekdayMonthOrdinal) == "friday , december 31st 1999");
  CHECK(dates::english({2000, 2, 29}, Style::WeekdayMonthOrdinal) == "tuesday , february 29th 2000");
  CHECK(dates::english({2012, 11, 11}, Style::TheOrdinalOf) == "the 11th of november , 2012");
  CHECK(dates::english({2012, 11, 11}, Style::WeekdayMonthOrdinal) == "sunday , november 11th 2012");
  CHECK(dates::english({1962, 9, 22}, Style::TheOrdinalOf) == "the 22nd of september , 1962");
  CHECK(dates::english({1962, 9, 22}, Style::DayAbbrevShortYear) == "22 sep 62");
  CHECK(dates::english({2005, 7, 4}, Style::Numeric) == "07/04/2005");
  CHECK(dates::iso({1962, 9, 22}) == "1962 - 09 - 22");

  // Generated pairs: the target is an ISO date inside the range, in tokens.
  for (const Pair& pair : generate_toy_task("dates", 200, 3)) {
    std::vector<std::string_view> iso = pre_tokenize(pair.tgt);
    REQUIRE(iso.size() == 5);
    int year = std::stoi(std::string(iso[0]));
    CHECK(year >= dates::kFirstYear);
    CHECK(year <= dates::kLastYear);
    CHECK(iso[1] == "-");
    CHECK(iso[2].size() == 2);
  }
}

TEST_CASE("data: numbers, hand-checked") {
  CHECK(numbers::words(0) == "zero");
  CHECK(numbers::words(13) == "thirteen");
  CHECK(numbers::words(40) == "forty");
  CHECK(numbers::words(342) == "three hundred and forty - two");
  CHECK(numbers::words(1005) == "one thousand and five");
  CHECK(numbers::words(1234) == "one thousand two hundred and thirty - four");
  CHECK(numbers::words(342000) == "three hundred and forty - two thousand");
  CHECK(numbers::words(999999) ==
        "nine hundred and ninety - nine thousand nine hundred and ninety - nine");
  CHECK(numbers::digits(342) == "3 4 2");
  CHECK(numbers::digits(0) == "0");
  CHECK_THROWS_AS(numbers::words(1000000), InternalError);
}

namespace {

// Writes a grammar::Sentence down compactly:
//   subject({"the", "black", "cat", true}).verb("eat").object({"the", "small", "fish"})
struct SentenceBuilder {
  grammar::Sentence s;
  SentenceBuilder& verb(const std::string& v) { s.verb = v; return *this; }
  SentenceBuilder& object(const grammar::NounPhrase& np) { s.object = np; return *this; }
  SentenceBuilder& is(const std::string& adjective) { s.verb = "be"; s.adjective = adjective; return *this; }
  SentenceBuilder& at(const std::string& preposition, const grammar::NounPhrase& np) {
    s.preposition = preposition;
    s.place = np;
    return *this;
  }
};
SentenceBuilder subject(const grammar::NounPhrase& np) {
  SentenceBuilder b;
  b.s.subject = np;
  return b;
}
SentenceBuilder pronoun(const std::string& p) {
  SentenceBuilder b;
  b.s.pronoun = p;
  return b;
}

void check_grammar(const SentenceBuilder& sentence, const std::string& en, const std::string& it) {
  Pair pair = grammar::render(sentence.s);
  CHECK(pair.src == en);
  CHECK(pair.tgt == it);
}

}  // namespace

TEST_CASE("data: grammar, hand-checked English -> Italian") {
  // The example: plural agreement of article, noun, adjective and verb.
  check_grammar(subject({"the", "black", "cat", true}).verb("eat").object({"the", "small", "fish"}),
                "the black cats eat the small fish", "i gatti neri mangiano il pesce piccolo");
  // Possessive with article; "in" + "il" -> "nel".
  check_grammar(subject({"my", "", "friend"}).verb("read").object({"a", "", "book"}).at("in", {"the", "", "garden"}),
                "my friend reads a book in the garden", "il mio amico legge un libro nel giardino");
  // "gli" before a vowel and before "s" + consonant.
  check_grammar(subject({"the", "", "student", true}).verb("sleep").at("under", {"the", "old", "tree", true}),
                "the students sleep under the old trees", "gli studenti dormono sotto gli alberi vecchi");
  // English "an"; Italian feminine indefinite; adjective after the noun.
  check_grammar(subject({"a", "old", "woman"}).verb("open").object({"the", "", "window"}),
                "an old woman opens the window", "una donna vecchia apre la finestra");
  // Elision: "l'amico" (pre-tokenised l ' amico), "all'isola", "un'arancia".
  check_grammar(pronoun("I").verb("see").object({"the", "", "friend"}), "I see the friend",
                "io vedo l'amico");
  check_grammar(pronoun("we").verb("live").at("near", {"the", "", "island"}), "we live near the island",
                "noi viviamo vicino all'isola");
  check_grammar(pronoun("you").verb("want").object({"a", "", "backpack"}), "you want a backpack",
                "tu vuoi uno zaino");
  check_grammar(subject({"a", "", "orange"}).is("yellow"), "an orange is yellow", "un'arancia è gialla");
  // Predicate adjectives agree with the subject.
  check_grammar(pronoun("she").is("tired"), "she is tired", "lei è stanca");
  check_grammar(subject({"this", "white", "house", true}).is("big"), "these white houses are big",
                "queste case bianche sono grandi");
  check_grammar(subject({"my", "", "city", true}).is("beautiful"), "my cities are beautiful",
                "le mie città sono belle");
  // "con" does not merge; "su" + "la" -> "sulla"; irregular plurals.
  check_grammar(subject({"the", "", "child", true}).verb("play").at("with", {"my", "", "dog", true}),
                "the children play with my dogs", "i bambini giocano con i miei cani");
  check_grammar(subject({"the", "", "man", true}).verb("carry").object({"the", "", "key"}).at("on", {"the", "", "chair"}),
                "the men carry the key on the chair", "gli uomini portano la chiave sulla sedia");
  check_grammar(pronoun("he").verb("wait").at("in", {"the", "", "city"}), "he waits in the city",
                "lui aspetta nella città");
  CHECK(pre_tokenize("io vedo l'amico") == std::vector<std::string_view>{"io", "vedo", "l", "'", "amico"});

  // Sentences outside the grammar are errors, not wrong translations.
  CHECK_THROWS_AS(grammar::render(subject({"a", "", "cat", true}).verb("sleep").s), InternalError);
  CHECK_THROWS_AS(grammar::render(pronoun("I").is("tired").s), InternalError);
  CHECK_THROWS_AS(grammar::render(subject({"the", "", "fish", true}).verb("sleep").s), InternalError);
  CHECK_THROWS_AS(grammar::render(subject({"the", "", "unicorn"}).verb("sleep").s), InternalError);
  CHECK_THROWS_AS(grammar::render(subject({"the", "", "cat"}).verb("eat").s), InternalError);
}

TEST_CASE("data: grammar lexicon >= 80 words and >= 50k distinct pairs") {
  CHECK(grammar::lexicon_size() >= 80);
  // generate_toy_task only returns distinct sources, so this succeeding shows
  // 50,000 distinct pairs exist (it gives up when the space runs dry).
  std::vector<Pair> pairs = generate_toy_task("grammar", 50000, 11);
  std::set<std::string> en_words, it_words;
  for (const Pair& pair : pairs) {
    for (std::string_view w : pre_tokenize(pair.src)) en_words.emplace(w);
    for (std::string_view w : pre_tokenize(pair.tgt)) it_words.emplace(w);
  }
  CHECK(en_words.size() >= 80);
  CHECK(it_words.size() >= 80);
}
