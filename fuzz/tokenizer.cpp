// The tokenizer file, WordLevel or BPE, through data::Tokenizer::load as
// `translate` reads it.
#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "targets.h"

namespace sf::fuzz {

void tokenizer(std::string_view input) {
  data::Tokenizer t = data::Tokenizer::load(scratch_file("tokenizer.json", input));
  // Saving and loading again gives the same vocabulary, id for id.
  data::Tokenizer again = data::Tokenizer::from_json(t.to_json(), "the saved copy");
  expect(again.vocab_size() == t.vocab_size(), "tokenizer: the saved copy has another size");
  expect(again.to_json() == t.to_json(), "tokenizer: the saved copy has another model (merges, settings)");
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    expect(again.id_to_token(id) == t.id_to_token(id), "tokenizer: the saved copy has another token");
    expect(t.token_to_id(t.id_to_token(id)) == id, "tokenizer: a token does not map back to its id");
  }
  // Encoding gives ids inside the vocabulary, and decoding them works.
  std::string text = "[SOS] the 3rd of march , 2021 [PAD] x[EOS] perché über";
  std::vector<int32_t> ids = t.encode(text);
  for (int32_t id : ids)
    expect(id >= 0 && id < t.vocab_size(), "tokenizer: encode gave an id outside the vocabulary");
  expect(t.token_texts(text).size() == ids.size(), "tokenizer: token_texts and encode disagree");
  t.decode(ids);
}

}  // namespace sf::fuzz
