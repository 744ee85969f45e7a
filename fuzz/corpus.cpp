// A parallel corpus: the same bytes read as TSV and as JSONL, then split into
// train and valid as `train` does when no valid file is given.
#include "data/corpus.h"
#include "data/pretokenizer.h"
#include "data/unicode.h"
#include "targets.h"

namespace sf::fuzz {

namespace {

// Every pair the readers return has two non-blank sides in valid UTF-8, and
// the pre-tokeniser splits them.
void check_pairs(const data::ReadResult& result) {
  for (const data::Pair& pair : result.pairs) {
    for (const std::string* side : {&pair.src, &pair.tgt}) {
      expect(data::find_invalid_utf8(*side) == std::string_view::npos, "corpus: a side is not UTF-8");
      expect(!data::is_blank(*side), "corpus: a side is blank");
      expect(!data::pre_tokenize(*side).empty(), "corpus: a non-blank side has no words");
    }
  }
  data::Split split = data::split_pairs(result.pairs, 0.25, 7);
  expect(split.train.size() + split.valid.size() == result.pairs.size(), "corpus: the split lost pairs");
}

}  // namespace

void corpus(std::string_view input) {
  std::string path = scratch_file("corpus", input);
  try {
    data::ReadResult tsv = data::read_tsv(path);
    check_pairs(tsv);
    for (const data::Pair& pair : tsv.pairs)
      expect(pair.src.find('\t') == std::string::npos && pair.tgt.find('\t') == std::string::npos,
             "corpus: a TSV side holds a TAB");
  } catch (const Error&) {
    // Rejected as TSV; it may still be JSONL.
  }
  check_pairs(data::read_jsonl(path, "en", "de"));
}

}  // namespace sf::fuzz
