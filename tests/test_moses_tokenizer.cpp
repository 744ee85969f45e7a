// The Multi30k papers' tokenization and BLEU (eval/moses_tokenizer.h,
// eval/moses_bleu.h): each rule on a line whose expected tokens are what
// Moses' scripts print for it (lowercase.perl | normalize-punctuation.perl -l
// LANG | tokenizer.perl -l LANG, snapshot moses-3a0631a, Perl 5.36), then the
// scripts' own tokens and sacreBLEU's scores on real sentences
// (tests/sacrebleu_fixture.py).
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "eval/moses_bleu.h"
#include "eval/moses_tokenizer.h"
#include "eval/sacrebleu.h"
#include "tests/bleu_fixture.h"
#include "tests/real_corpora.h"
#include "tests/skip.h"

using namespace sf::eval;
using doctest::Approx;

namespace {
// The tokens of `line` joined by spaces, as the scripts print them.
std::string tokens(const std::string& line, const char* language) {
  std::string joined;
  for (const std::string& word : moses_lowercase_tokens(line, language)) joined += (joined.empty() ? "" : " ") + word;
  return joined;
}

// 32-bit FNV-1a of the UTF-8 bytes, as the fixture script hashes the scripts' tokens.
std::string fnv1a(const std::string& text) {
  uint32_t h = 0x811C9DC5u;
  for (unsigned char byte : text) h = (h ^ byte) * 0x01000193u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return hex;
}

std::vector<std::string> split_hashes(const std::string& joined) {
  std::istringstream in(joined);
  std::vector<std::string> out;
  for (std::string h; in >> h;) out.push_back(h);
  return out;
}
}  // namespace

TEST_CASE("moses: lowercased; symbols split off; quotes, brackets, ampersands escaped") {
  CHECK(tokens("Ein Mann (rot) steht da.", "de") == "ein mann ( rot ) steht da .");
  CHECK(tokens("x [y] |z| <a> & b", "de") == "x &#91; y &#93; &#124; z &#124; &lt; a &gt; &amp; b");
  CHECK(tokens("ΟΔΟΣ İSTANBUL ПРИВЕТ ÀÉÎ ŁŻ", "de") == "οδοσ i ̇ stanbul привет àéî łż");  // U+0307 is no letter
  CHECK(tokens(std::string("A\x01") + "B \t C\u00a0D", "de") == "ab c d");  // controls dropped, Unicode spaces
  CHECK(tokens(" \t ", "de").empty());
}

TEST_CASE("moses: typographic punctuation made ASCII, French guillemets and no-break spaces removed") {
  CHECK(tokens("Er sagte: „Hallo“ – und ging…", "de") == "er sagte : &quot; hallo &quot; - und ging ...");
  CHECK(tokens("A„B“C”D—E–F", "de") == "a &quot; b &quot; c &quot; d - e-f");
  CHECK(tokens("Er sagt ‚ja‘ und don’t ´n` ``x`` ", "de") ==
        "er sagt &quot; ja &quot; und don &apos; t &apos; n &apos; &quot; x &quot;");
  CHECK(tokens("Il dit \u00ab\u00a0oui\u00a0\u00bb et \u00abnon\u00bb , l\u2019eau a. b. A.", "fr") ==
        "il dit &quot; oui &quot; et &quot; non &quot; , l&apos; eau a. b. a .");
}

TEST_CASE("moses: a no-break space between digits becomes the language's separator, spaces in brackets go") {
  CHECK(tokens("Das kostet 1\u00a0000 Euro (ca. 5 %) .", "de") == "das kostet 1,000 euro ( ca. 5 % ) .");
  CHECK(tokens("Das kostet 1 000 Euro, ca. 5 % mehr.", "de") == "das kostet 1 000 euro , ca. 5 % mehr .");
  CHECK(tokens("Ein Hund ( braun ) ; ja : gut", "de") == "ein hund ( braun ) ; ja : gut");
}

TEST_CASE("moses: a quote goes after a comma or period in English, before it elsewhere, even at the end") {
  CHECK(tokens("He said \"yes,\" and \"no\". Also \"x\"...", "en") ==
        "he said &quot; yes , &quot; and &quot; no . &quot; also &quot; x ... &quot;");
  CHECK(tokens("Sie sagte \"gut.\" Dann", "de") == "sie sagte &quot; gut &quot; . dann");
  CHECK(tokens("Fertig.\". Ende", "de") == "fertig &quot; .. ende");
  CHECK(tokens("Der Preis .\" <b>", "de") == "der preis &quot; . &lt; b &gt;");
}

TEST_CASE("moses: runs of periods stay one word; commas split off except inside numbers") {
  CHECK(tokens("Wait...what? Yes.. no", "de") == "wait ... what ? yes .. no");
  CHECK(tokens("Peter's Hund, 1,5 und 5,300, a,b,c", "de") == "peter &apos; s hund , 1,5 und 5,300 , a , b , c");
}

TEST_CASE("moses: apostrophes split to the right in English, to the left in French, off elsewhere") {
  CHECK(tokens("Don't do it, the 1990's.", "en") == "don &apos;t do it , the 1990 &apos;s .");
  CHECK(tokens("'Tis the dog's bone'", "en") == "&apos;tis the dog &apos;s bone&apos;");
  CHECK(tokens("It ends.'", "en") == "it ends . &apos;");
  CHECK(tokens("L'eau est « bonne » ici, aujourd'hui.", "fr") ==
        "l&apos; eau est &quot; bonne &quot; ici , aujourd&apos; hui .");
}

TEST_CASE("moses: a final period is split off except after an abbreviation or before a lowercase word") {
  CHECK(tokens("z.B. U.S.A. etc. Linie A.", "de") == "z.b. u.s.a. etc. linie a.");
  // German ordinals up to 99 keep their period, at the end of a sentence too.
  CHECK(tokens("Nummer 10. Am 3. Mai 2016.", "de") == "nummer 10. am 3. mai 2016 .");
  CHECK(tokens("Platz 100. Platz 99. Platz 0.", "de") == "platz 100. platz 99. platz 0 .");
  // At the end of a sentence only the prefix keeps it (Multi30k's test2016 has this line).
  CHECK(tokens("Der Spieler mit der Nummer 10.", "de") == "der spieler mit der nummer 10.");
  CHECK(tokens("Mr. Smith. pp. 12 No. 5", "en") == "mr. smith. pp. 12 no . 5");
  CHECK(tokens("Pp. 12 and pp. 12 and pp. x", "en") == "pp. 12 and pp. 12 and pp. x");
  CHECK(tokens("Tom tiene doc. El km. 5 s. XX.", "es") == "tom tiene doc. el km. 5 s. xx .");
  CHECK(tokens("Un grand ravin sec.", "fr") == "un grand ravin sec.");  // "sec" is a prefix in French
}

TEST_CASE("moses: BLEU without smoothing on the lowercased tokens, and its signature") {
  // Both sides are "ein hund läuft schnell ." once lowercased and tokenized.
  CHECK(corpus_moses_bleu({"Ein Hund läuft schnell."}, {"ein  HUND läuft schnell ."}, "de") == Approx(100.0));
  // 5 of 6 words, 3 of 5 bigrams, 1 of 4 trigrams, no 4-gram of 3: 0 without
  // smoothing (multi-bleu.perl), where sacreBLEU's smoothing gives more.
  std::vector<std::string> hyp = {"Ein Hund läuft im Park."}, ref = {"Ein Hund rennt im Park."};
  CHECK(corpus_moses_bleu(hyp, ref, "de") == 0.0);
  CHECK(corpus_sacrebleu(hyp, ref, Case::lowercase) > 0.0);
  CHECK(moses_bleu_signature() == "nrefs:1|case:lc|eff:no|tok:none|smooth:none|version:2.6.0");
}

TEST_CASE("moses: the scripts' tokens and sacreBLEU's BLEU on 400 perturbed pairs (a committed fixture)") {
  const nlohmann::json fixture = sf::testing::bleu_fixture();
  const nlohmann::json& moses = fixture.at("moses");
  CHECK(moses.at("signature").get<std::string>() == moses_bleu_signature());
  const auto hypotheses = fixture.at("hypotheses").get<std::vector<std::string>>();
  const auto references = fixture.at("references").get<std::vector<std::string>>();
  const auto hyp_hashes = split_hashes(moses.at("hypothesis_hashes"));
  const auto ref_hashes = split_hashes(moses.at("reference_hashes"));
  REQUIRE(hyp_hashes.size() == 400);
  REQUIRE(ref_hashes.size() == 400);
  int differ = 0;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    const char* language = i < 300 ? "de" : "en";  // 300 German pairs, then 100 English
    for (auto [line, hash] : {std::pair{&hypotheses[i], &hyp_hashes[i]}, std::pair{&references[i], &ref_hashes[i]}})
      if (fnv1a(tokens(*line, language)) != *hash && ++differ <= 3)
        CHECK_MESSAGE(false, "pair ", i, ": ", *line, " -> ", tokens(*line, language));
  }
  CHECK(differ == 0);
  sf::testing::check_corpus_scores(moses.at("corpora"), hypotheses, references,
                                   [](const auto& hyp, const auto& ref, const nlohmann::json& corpus) {
                                     return corpus_moses_bleu(hyp, ref, corpus.at("language").get<std::string>());
                                   });
}

TEST_CASE("moses: the scripts' tokens of every validation reference of Multi30k (German) and Tatoeba (Spanish)") {
  std::filesystem::path root = sf::testing::shared_data();
  if (!std::filesystem::is_directory(root)) SF_SKIP(("no real corpora at " + root.string()).c_str());
  const nlohmann::json fixture = sf::testing::bleu_fixture();
  for (const nlohmann::json& corpus : fixture.at("moses").at("real")) {
    const std::string path = corpus.at("path"), language = corpus.at("language");
    INFO(path);
    const auto hashes = split_hashes(corpus.at("hashes"));
    sf::data::ReadResult file = sf::data::read_tsv((root / path).string());
    REQUIRE(file.pairs.size() == hashes.size());
    int differ = 0;
    for (size_t i = 0; i < hashes.size(); ++i) {
      const std::string& line = file.pairs[i].tgt;
      if (fnv1a(tokens(line, language.c_str())) != hashes[i] && ++differ <= 3)
        CHECK_MESSAGE(false, "line ", i + 1, ": ", line, " -> ", tokens(line, language.c_str()));
    }
    CHECK(differ == 0);
  }
}
