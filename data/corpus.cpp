#include "corpus.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "shuffle.h"
#include "unicode.h"

namespace sf::data {

namespace {

std::string read_file(const std::string& path) {
  // A folder opens as a stream that reads nothing: it must not pass for an empty corpus.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  std::ostringstream content;
  content << in.rdbuf();
  return std::move(content).str();
}

// Calls parse(line, "FILE:LINE") for every line that is not blank, after
// checking its UTF-8. A trailing '\r' (a CRLF file) and a UTF-8 byte order
// mark at the start are not part of the text.
ReadResult read_lines(const std::string& path,
                         const std::function<Pair(std::string_view, const std::string&)>& parse) {
  std::string content = read_file(path);
  std::string_view rest = content;
  if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);
  ReadResult result;
  for (int64_t number = 1; !rest.empty(); ++number) {
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    std::string where = path + ":" + std::to_string(number);
    if (size_t bad = find_invalid_utf8(line); bad != std::string_view::npos)
      fail(where, ": invalid UTF-8 at byte ", bad + 1, " of the line");
    if (is_blank(line)) {
      ++result.blank_lines;
      continue;
    }
    result.pairs.push_back(parse(line, where));
  }
  return result;
}

void check_side(const std::string& text, const char* side, const std::string& where) {
  if (is_blank(text)) fail(where, ": empty ", side, " sentence");
}

}  // namespace

Pair split_tsv_line(std::string_view line, const std::string& where) {
  size_t tab = line.find('\t');
  if (tab == std::string_view::npos) fail(where, ": no TAB (expected source<TAB>target)");
  if (line.find('\t', tab + 1) != std::string_view::npos)
    fail(where, ": more than one TAB (expected source<TAB>target)");
  return {std::string(line.substr(0, tab)), std::string(line.substr(tab + 1)), where};
}

ReadResult read_tsv(const std::string& path) {
  return read_lines(path, [](std::string_view line, const std::string& where) {
    Pair pair = split_tsv_line(line, where);
    check_side(pair.src, "source", where);
    check_side(pair.tgt, "target", where);
    return pair;
  });
}

ReadResult read_jsonl(const std::string& path, const std::string& lang_src, const std::string& lang_tgt) {
  return read_lines(path, [&](std::string_view line, const std::string& where) {
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded()) fail(where, ": bad JSON");
    if (!row.is_object() || !row.contains("translation") || !row["translation"].is_object())
      fail(where, ": expected {\"translation\": {\"", lang_src, "\": ..., \"", lang_tgt, "\": ...}}");
    const nlohmann::json& translation = row["translation"];
    auto side = [&](const std::string& lang, const char* name) {
      if (!translation.contains(lang)) fail(where, ": no \"", lang, "\" key in \"translation\"");
      if (!translation[lang].is_string()) fail(where, ": \"", lang, "\" is not a string");
      std::string text = translation[lang].get<std::string>();
      check_side(text, name, where);
      return text;
    };
    return Pair{side(lang_src, "source"), side(lang_tgt, "target"), where};
  });
}

ReadResult read_pairs(const std::string& path, const std::string& format,
                      const std::string& lang_src, const std::string& lang_tgt) {
  if (format == "tsv") return read_tsv(path);
  if (format == "jsonl") return read_jsonl(path, lang_src, lang_tgt);
  fail(path, ": unknown data format \"", format, "\" (tsv | jsonl)");
}

Split split_pairs(std::vector<Pair> pairs, double val_fraction, uint64_t seed) {
  if (!(val_fraction >= 0 && val_fraction < 1))
    internal_fail("val_fraction must be in [0, 1), got ", val_fraction);
  size_t n = pairs.size();
  size_t n_train = static_cast<size_t>(std::floor((1 - val_fraction) * static_cast<double>(n)));
  // The first n_train indices of a random permutation are the training pairs.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  Rng rng(seed);
  shuffle(order, rng);
  std::vector<bool> is_train(n, false);
  for (size_t i = 0; i < n_train; ++i) is_train[order[i]] = true;

  Split split;
  split.train.reserve(n_train);
  split.valid.reserve(n - n_train);
  for (size_t i = 0; i < n; ++i) (is_train[i] ? split.train : split.valid).push_back(std::move(pairs[i]));
  return split;
}

}  // namespace sf::data
