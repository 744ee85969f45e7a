// The real corpora in ../shared/data (beside the repository; see their
// README.md files): the first 1000 lines of each file read and build
// vocabularies. Skipped, with a message, when the folder is absent.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "data/pipeline.h"
#include "real_corpora.h"
#include "skip.h"

using namespace sf::data;
namespace fs = std::filesystem;
using sf::testing::shared_data;

namespace {

// The first `lines` lines of `path`, as a temporary file.
std::string head_copy(const fs::path& path, int lines) {
  std::string out_path = (fs::temp_directory_path() /
                          ("sf_data_" + std::to_string(getpid()) + "_head.tsv"))
                             .string();
  std::ifstream in(path);
  std::ofstream out(out_path);
  std::string line;
  for (int i = 0; i < lines && std::getline(in, line); ++i) out << line << '\n';
  return out_path;
}

}  // namespace

TEST_CASE("data: real corpora, first 1000 lines, load and build vocabularies") {
  fs::path root = shared_data();
  if (!fs::is_directory(root)) SF_SKIP(("no real corpora at " + root.string()).c_str());

  struct Expect {
    const char *folder, *src_word, *tgt_word;
  };
  for (Expect expect : {Expect{"multi30k_en_de", "the", "Mann"}, Expect{"tatoeba_en_es", "I", "¿"}}) {
    for (const char* file : {"train.tsv", "valid.tsv"}) {
      fs::path path = root / expect.folder / file;
      CAPTURE(path.string());
      REQUIRE(fs::exists(path));
      std::string head = head_copy(path, 1000);
      ReadResult read = read_tsv(head);
      fs::remove(head);
      CHECK(read.pairs.size() + read.blank_lines == 1000);
      Tokenizer src = build_tokenizer(read.pairs, Side::Source, {.min_frequency = 2});
      Tokenizer tgt = build_tokenizer(read.pairs, Side::Target, {.min_frequency = 2});
      CAPTURE(src.vocab_size());
      CAPTURE(tgt.vocab_size());
      CHECK(src.vocab_size() > 100);
      CHECK(tgt.vocab_size() > 100);
      CHECK(src.token_to_id(expect.src_word) >= 4);
      CHECK(tgt.token_to_id(expect.tgt_word) >= 4);
    }
  }
}
