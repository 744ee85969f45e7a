// The training config: the JSON file, then NUL-separated `--set key=value`
// overrides, through setup::load_config as `scratchformer train` calls it.
#include <string>
#include <vector>

#include "targets.h"
#include "setup/config.h"

namespace sf::fuzz {

void config(std::string_view input) {
  auto [file, rest] = split_at_nul(input);
  std::vector<std::string> overrides;
  while (!rest.empty()) {
    auto [one, after] = split_at_nul(rest);
    overrides.emplace_back(one);
    rest = after;
  }
  setup::Config c = setup::load_config(scratch_file("config.json", file), overrides);
  // What validation promises the rest of the program.
  expect(c.batch_size >= 1 && c.num_epochs >= 0 && c.seq_len >= 1 && c.d_model >= 1 && c.N >= 1 &&
             c.h >= 1 && c.d_ff >= 1,
         "config: a size below its minimum was accepted");
  expect(c.lr > 0 && c.dropout >= 0 && c.dropout < 1, "config: lr or dropout out of range was accepted");
  expect(!c.tokenizer_path(c.lang_src).empty(), "config: an empty tokenizer path was accepted");
}

}  // namespace sf::fuzz
