// Our BPE files against the Hugging Face tokenizers library itself: for each
// real corpus (../shared/data, see real_corpora.h), the BPE tokenizer its
// configs/*_bpe.json builds is saved, loaded by the library's Node binding
// (tools/hf-encode) and used to encode every sentence of the training and
// validation pairs, both sides, and a few of unusual characters; the ids must
// be ours, sentence by sentence.
// Skipped, with the reason, when the corpora are absent or when Node or the
// npm package cannot be installed (no network, not root).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include "data/pipeline.h"
#include "real_corpora.h"
#include "setup/config.h"
#include "skip.h"

using namespace sf::data;
namespace fs = std::filesystem;

namespace {

// The repository root: __FILE__ is tests/test_data_bpe_hf.cpp, relative to it.
fs::path repository() { return fs::absolute(__FILE__).parent_path().parent_path(); }

std::string ids_line(const std::vector<int32_t>& ids) {
  std::string line;
  for (int32_t id : ids) {
    if (!line.empty()) line += ' ';
    line += std::to_string(id);
  }
  return line;
}

}  // namespace

TEST_CASE("data: Hugging Face tokenizers encodes both real corpora as our BPE does") {
  if (!fs::is_directory(sf::testing::shared_data()))
    SF_SKIP(("no real corpora at " + sf::testing::shared_data().string()).c_str());
  std::string hf_encode = (repository() / "tools" / "hf-encode").string();
  int installed = std::system((hf_encode + " --install >/dev/null 2>&1").c_str());
  if (!WIFEXITED(installed) || WEXITSTATUS(installed) != 0)
    SF_SKIP("Node or the npm package tokenizers could not be installed (tools/hf-encode --install)");

  for (const char* name : {"multi30k_en_de", "tatoeba_en_es"}) {
    CAPTURE(name);
    sf::setup::Config config = sf::setup::load_config((repository() / "configs" / (std::string(name) + "_bpe.json")).string());
    REQUIRE(config.tokenizer == "bpe");
    CorpusOptions files;
    files.train = config.data.train;
    files.valid = config.data.valid;
    Corpus corpus = load_corpus(files);
    auto start = std::chrono::steady_clock::now();
    Tokenizer tokenizer = build_tokenizer(
        corpus.train, Side::Source, {.kind = "bpe", .vocab_size = config.vocab_size, .shared_vocab = config.shared_vocab});
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    std::string prefix = (fs::temp_directory_path() / ("sf_hf_" + std::to_string(getpid()) + "_")).string();
    tokenizer.save(prefix + "tokenizer.json");
    // And text no corpus has: unseen characters ([UNK] each), those whose
    // class differs between Python and Oniguruma (CO₂, ½, a combining accent,
    // the separator 0x1C), special tokens written in the text.
    std::vector<std::string_view> sentences = {"zebra™ 北京 CO₂ naïve x½y ﬁne ᾯ", "e\u0301t\u00e9 a\x1c b\x1f",
                                               "[UNK]ab ab[PAD] [SOS][EOS]"};
    for (const std::vector<Pair>* pairs : {&corpus.train, &corpus.valid})
      for (const Pair& pair : *pairs) sentences.insert(sentences.end(), {pair.src, pair.tgt});
    {
      std::ofstream out(prefix + "sentences.txt");
      for (std::string_view sentence : sentences) out << sentence << '\n';
    }
    std::string command = hf_encode + " " + prefix + "tokenizer.json " + prefix + "sentences.txt " + prefix + "ids.txt";
    REQUIRE(std::system(command.c_str()) == 0);

    std::ifstream in(prefix + "ids.txt");
    std::string line;
    size_t compared = 0, mismatches = 0;
    for (std::string_view sentence : sentences) {
      if (!std::getline(in, line)) break;
      ++compared;
      if (line != ids_line(tokenizer.encode(sentence)) && ++mismatches <= 3)
        FAIL_CHECK("\"", std::string(sentence), "\": HF ", line, ", ours ", ids_line(tokenizer.encode(sentence)));
    }
    std::printf("%s: BPE of %lld tokens trained in %.2f s; %zu sentences compared with Hugging Face, %zu differ\n",
                name, static_cast<long long>(tokenizer.vocab_size()), seconds, compared, mismatches);
    CHECK(compared == sentences.size());
    CHECK(mismatches == 0);
    for (const char* file : {"tokenizer.json", "sentences.txt", "ids.txt"}) fs::remove(prefix + file);
  }
}
