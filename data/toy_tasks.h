// Built-in toy translation tasks (config `data: {"task": NAME, "size": N}`),
// generated in code from a seed: same (name, size, seed), same pairs.
//   copy     random syllable sequences -> the same sequence     (words -> copy)
//   reverse  random syllable sequences -> the sequence reversed (words -> reversed)
//   dates    English dates in varied formats -> ISO words       (en -> iso)
//   numbers  English number words -> digit tokens               (en -> digits)
//   grammar  English phrases -> Italian                         (en -> it)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/random.h"
#include "corpus.h"

namespace sf::data {

struct ToyTaskInfo {
  std::string name;
  std::string lang_src, lang_tgt;  // distinct names for the two sides (tokenizer files)
  Pair (*sample)(Rng&);            // one random pair
};

const std::vector<ToyTaskInfo>& toy_tasks();

// `size` pairs with distinct sources (so a train/valid split cannot leak a
// sentence), each with origin "NAME#INDEX".
std::vector<Pair> generate_toy_task(const std::string& name, int64_t size, uint64_t seed);

}  // namespace sf::data
