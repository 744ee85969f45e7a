#include "toy_tasks.h"

#include <unordered_set>

#include "base/error.h"
#include "base/random.h"
#include "dates.h"
#include "grammar.h"
#include "numbers.h"

namespace sf::data {

namespace {

// copy / reverse: 3..12 words drawn from 50 consonant-vowel syllables
// ("ba", "be", ..., "zu"), so the vocabulary is small and every order is possible.
std::vector<std::string> random_syllables(Rng& rng) {
  static const char kConsonants[] = "bdfgklmprz", kVowels[] = "aeiou";
  std::vector<std::string> words(3 + rng.below(10));
  for (std::string& word : words) word = {kConsonants[rng.below(10)], kVowels[rng.below(5)]};
  return words;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

Pair sample_copy(Rng& rng) {
  std::string text = join(random_syllables(rng));
  return {text, text, ""};
}

Pair sample_reverse(Rng& rng) {
  std::vector<std::string> words = random_syllables(rng);
  std::string src = join(words);
  return {src, join({words.rbegin(), words.rend()}), ""};
}

const ToyTaskInfo& toy_task(const std::string& name) {
  for (const ToyTaskInfo& task : toy_tasks())
    if (task.name == name) return task;
  internal_fail("unknown toy task \"", name, "\" (copy | reverse | dates | numbers | grammar)");
}

}  // namespace

const std::vector<ToyTaskInfo>& toy_tasks() {
  static const std::vector<ToyTaskInfo> kTasks = {
      {"copy", "words", "copy", sample_copy},
      {"reverse", "words", "reversed", sample_reverse},
      {"dates", "en", "iso", dates::sample_pair},
      {"numbers", "en", "digits", numbers::sample_pair},
      {"grammar", "en", "it", grammar::sample_pair},
  };
  return kTasks;
}

std::vector<Pair> generate_toy_task(const std::string& name, int64_t size, uint64_t seed) {
  if (size <= 0) internal_fail("toy task \"", name, "\": size must be positive, got ", size);
  const ToyTaskInfo& task = toy_task(name);
  Rng rng(seed);
  std::vector<Pair> pairs;
  std::unordered_set<std::string> sources;
  // Duplicates are redrawn; a task whose space is nearly exhausted stops with
  // an error instead of looping for ever.
  for (int64_t attempts = 0; static_cast<int64_t>(pairs.size()) < size; ++attempts) {
    if (attempts >= 20 * size)
      fail("toy task \"", name, "\" cannot produce ", size, " distinct pairs");
    Pair pair = task.sample(rng);
    if (!sources.insert(pair.src).second) continue;
    pair.origin = name + "#" + std::to_string(pairs.size());
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

}  // namespace sf::data
