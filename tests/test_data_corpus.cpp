// TSV and JSONL readers (one test per error, each naming FILE:LINE), skipped
// blank lines, the train/valid split, and load_corpus / tokenizer files.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "data/corpus.h"
#include "data/pipeline.h"

using namespace sf;
using namespace sf::data;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("sf_data_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// A file in the temp folder, removed when the test ends.
struct TempFile {
  std::string path;
  TempFile(const std::string& name, const std::string& content) : path(temp_path(name)) {
    std::ofstream(path, std::ios::binary) << content;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string tsv_error(const std::string& content) {
  TempFile file("bad.tsv", content);
  return error_of([&] { read_tsv(file.path); });
}

std::string jsonl_error(const std::string& content) {
  TempFile file("bad.jsonl", content);
  return error_of([&] { read_jsonl(file.path, "en", "it"); });
}

// The "FILE:LINE: " that starts an error message.
std::string where(int line, const std::string& name) {
  return temp_path(name) + ":" + std::to_string(line) + ": ";
}

std::vector<Pair> numbered_pairs(int n) {
  std::vector<Pair> pairs;
  for (int i = 0; i < n; ++i) pairs.push_back({std::to_string(i), std::to_string(-i), ""});
  return pairs;
}

}  // namespace

TEST_CASE("data: TSV reader reads pairs and counts skipped blank lines") {
  TempFile file("ok.tsv", "Hello!\tCiao!\n\n   \t \nThe man's dog.\tIl cane dell'uomo.\r\nlast\tultima");
  ReadResult read = read_tsv(file.path);
  REQUIRE(read.pairs.size() == 3);
  CHECK(read.blank_lines == 2);
  CHECK(read.pairs[1].src == "The man's dog.");
  CHECK(read.pairs[1].tgt == "Il cane dell'uomo.");  // the CR of a CRLF line is dropped
  CHECK(read.pairs[1].origin == file.path + ":4");
  CHECK(read.pairs[2].tgt == "ultima");  // no newline at the end
}

TEST_CASE("data: TSV error: missing TAB") {
  CHECK(tsv_error("a\tb\nno tab here\n") == where(2, "bad.tsv") + "no TAB (expected source<TAB>target)");
}

TEST_CASE("data: TSV error: extra TAB") {
  CHECK(tsv_error("a\tb\tc\n") == where(1, "bad.tsv") + "more than one TAB (expected source<TAB>target)");
}

TEST_CASE("data: TSV error: empty side") {
  CHECK(tsv_error("a\tb\n\n  \tciao\n") == where(3, "bad.tsv") + "empty source sentence");
  CHECK(tsv_error("a\t\n") == where(1, "bad.tsv") + "empty target sentence");
}

TEST_CASE("data: TSV error: invalid UTF-8") {
  CHECK(tsv_error("ok\tbene\nper\xE9\tperch\xC3\xA9\n") ==
        where(2, "bad.tsv") + "invalid UTF-8 at byte 4 of the line");
}

TEST_CASE("data: JSONL reader reads HF translation rows") {
  TempFile file("ok.jsonl",
                "{\"translation\": {\"en\": \"I see.\", \"it\": \"Capisco.\"}}\n"
                "\n"
                "{\"id\": 7, \"translation\": {\"de\": \"x\", \"it\": \"perché?\", \"en\": \"why?\"}}\n");
  ReadResult read = read_jsonl(file.path, "en", "it");
  REQUIRE(read.pairs.size() == 2);
  CHECK(read.blank_lines == 1);
  CHECK(read.pairs[1].src == "why?");
  CHECK(read.pairs[1].tgt == "perché?");
  CHECK(read.pairs[1].origin == file.path + ":3");
}

TEST_CASE("data: JSONL error: missing language key") {
  CHECK(jsonl_error("{\"translation\": {\"en\": \"a\", \"it\": \"b\"}}\n"
                    "{\"translation\": {\"en\": \"a\", \"es\": \"b\"}}\n") ==
        where(2, "bad.jsonl") + "no \"it\" key in \"translation\"");
}

TEST_CASE("data: JSONL error: bad JSON") {
  CHECK(jsonl_error("{\"translation\": {\"en\": \"a\", \"it\": \"b\"}\n") == where(1, "bad.jsonl") + "bad JSON");
}

TEST_CASE("data: JSONL error: not a translation row, non-string or empty side") {
  CHECK(jsonl_error("[1, 2]\n") ==
        where(1, "bad.jsonl") + "expected {\"translation\": {\"en\": ..., \"it\": ...}}");
  CHECK(jsonl_error("{\"translation\": {\"en\": 3, \"it\": \"b\"}}\n") ==
        where(1, "bad.jsonl") + "\"en\" is not a string");
  CHECK(jsonl_error("{\"translation\": {\"en\": \"a\", \"it\": \" \"}}\n") ==
        where(1, "bad.jsonl") + "empty target sentence");
}

TEST_CASE("data: unknown format and missing file") {
  CHECK(error_of([] { read_pairs("x.csv", "csv", "en", "it"); }) ==
        "x.csv: unknown data format \"csv\" (tsv | jsonl)");
  CHECK(error_of([] { read_tsv("/nonexistent/train.tsv"); }) == "/nonexistent/train.tsv: cannot open");
}

TEST_CASE("data: train/valid split is deterministic and a partition") {
  std::vector<Pair> pairs = numbered_pairs(1000);
  Split a = split_pairs(pairs, 0.1, 42), b = split_pairs(pairs, 0.1, 42);
  CHECK(a.train.size() == 900);  // floor(0.9 * n)
  CHECK(a.valid.size() == 100);
  auto sources = [](const std::vector<Pair>& part) {
    std::vector<std::string> out;
    for (const Pair& p : part) out.push_back(p.src);
    return out;
  };
  CHECK(sources(a.train) == sources(b.train));
  CHECK(sources(a.valid) == sources(b.valid));
  // Another seed, another split.
  CHECK(sources(split_pairs(pairs, 0.1, 43).valid) != sources(a.valid));
  // Together the parts are the input, each pair once.
  std::set<std::string> all;
  for (const Pair& p : a.train) all.insert(p.src);
  for (const Pair& p : a.valid) all.insert(p.src);
  CHECK(all.size() == 1000);
  // 7 pairs: train gets floor(0.9 * 7) = 6.
  CHECK(split_pairs(numbered_pairs(7), 0.1, 1).valid.size() == 1);
  CHECK(split_pairs(numbered_pairs(7), 0.0, 1).valid.empty());
  CHECK_THROWS_AS(split_pairs(pairs, 1.0, 1), InternalError);
}

TEST_CASE("data: load_corpus uses the valid file or splits; tokenizer file is built then loaded") {
  TempFile train("train.tsv", "a b\tx y\na c\tx z\n\nb c\ty z\n");
  TempFile valid("valid.tsv", "a\tx\n");
  CorpusOptions options;
  options.train = train.path;
  options.valid = valid.path;
  Corpus with_valid = load_corpus(options);
  CHECK(with_valid.train.size() == 3);
  CHECK(with_valid.valid.size() == 1);
  CHECK(with_valid.blank_lines == 1);

  options.valid.clear();
  options.val_fraction = 0.34;  // floor(0.66 * 3) = 1 train pair
  Corpus split = load_corpus(options);
  CHECK(split.train.size() == 1);
  CHECK(split.valid.size() == 2);

  options = {};
  options.task = "numbers";
  options.size = 50;
  Corpus toy = load_corpus(options);
  CHECK(toy.train.size() == 45);
  CHECK(toy.valid.size() == 5);

  std::string path = temp_path("tok") + "/tokenizer_en.json";
  TokenizerFile built = load_or_build_tokenizer(path, with_valid.train, Side::Target, {.min_frequency = 2});
  CHECK_FALSE(built.loaded);
  CHECK(built.tokenizer.vocab_size() == 4 + 3);  // x, y, z twice each
  TokenizerFile again = load_or_build_tokenizer(path, with_valid.train, Side::Target, {.min_frequency = 2});
  CHECK(again.loaded);
  CHECK(again.tokenizer.to_json() == built.tokenizer.to_json());
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}
