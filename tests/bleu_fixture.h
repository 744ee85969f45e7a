// The fixture tests/sacrebleu_fixture.py writes (sacreBLEU's and Moses' own
// answers on real sentences), as the BLEU tests read it.
#pragma once
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sf::testing {

inline nlohmann::json bleu_fixture() {
  std::ifstream in(std::filesystem::path(__FILE__).parent_path() / "sacrebleu_fixture.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// Each entry of `corpora` names a range of the fixture's pairs and the BLEU the
// reference tool gave it; score(hypotheses, references, entry) must agree to
// rounding (the same operations in the same order as the tool's).
template <class Score>
void check_corpus_scores(const nlohmann::json& corpora, const std::vector<std::string>& hypotheses,
                         const std::vector<std::string>& references, Score score) {
  for (const nlohmann::json& corpus : corpora) {
    size_t first = corpus.at("first"), end = corpus.at("end");
    std::vector<std::string> hyp(hypotheses.begin() + first, hypotheses.begin() + end);
    std::vector<std::string> ref(references.begin() + first, references.begin() + end);
    INFO(corpus.at("name").get<std::string>());
    CHECK(score(hyp, ref, corpus) == doctest::Approx(corpus.at("bleu").get<double>()).epsilon(1e-9));
  }
}

}  // namespace sf::testing
