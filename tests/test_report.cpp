// The HTML report, the attention heatmaps and explorer, and eval against
// translate's lines.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "cli_process.h"
#include "explorer_data.h"
#include "test_nn_helpers.h"
#include "train_helpers.h"
#include "data/detokenizer.h"
#include "data/toy_tasks.h"
#include "report/attention_explorer.h"
#include "infer/attention_maps.h"
#include "infer/inference.h"
#include "eval/metrics.h"
#include "report/report.h"
#include "eval/moses_bleu.h"
#include "eval/sacrebleu.h"
#include "train/trainer.h"

using namespace sf;
using testing::base64_bytes;
using testing::explorer_data;
using namespace sf::report;
using sf::testing::capture;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A tokenizer of the words a..g (ids 4..10) after the special tokens.
data::Tokenizer letters_tokenizer() {
  std::vector<std::string> words = {"[UNK]", "[PAD]", "[SOS]", "[EOS]", "a", "b", "c", "d", "e", "f", "g"};
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < words.size(); ++i) vocab[words[i]] = i;
  nlohmann::json file = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
                         {"added_tokens", nlohmann::json::array()}, {"normalizer", nullptr},
                         {"pre_tokenizer", {{"type", "Whitespace"}}}, {"post_processor", nullptr},
                         {"decoder", nullptr},
                         {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "[UNK]"}}}};
  return data::Tokenizer::from_json(file, "test");
}

// What the tiny model (2 layers, 2 heads) attends to while greedily
// translating "a b c", stopped after 3 decoder positions.
infer::AttentionRecord tiny_model_record() {
  auto model = testing::tiny_model();
  model->eval();
  model->projection_layer.proj.bias.data()[data::kEosId] = -40.0f;  // no [EOS]: max_len ends it
  std::vector<infer::AttentionRecord> records;
  infer::greedy_decode(*model, data::frame_sources({{4, 5, 6}}), 4, &records);
  return records.at(0);
}

}  // namespace

TEST_CASE("report: a self-contained page with the curves, metrics table, samples and heatmaps") {
  testing::TempDir dir;
  fs::path metrics_file = dir.path / "metrics.jsonl";
  {
    std::ofstream out(metrics_file);
    for (int step = 1; step <= 30; ++step)
      out << R"({"kind": "step", "epoch": 0, "step": )" << step << R"(, "loss": )" << 5.0 / step
          << R"(, "lr": 0.001, "grad_norm": 1, "tokens_per_s": 100, "time": 1})" << "\n";
    // Validation records with every metric: metric i is i + 0.25 at epoch 0, i + 10.25 at epoch 1.
    for (int epoch = 0; epoch < 2; ++epoch) {
      nlohmann::ordered_json valid = {{"kind", "valid"}, {"epoch", epoch}, {"step", 30 * (epoch + 1)}, {"loss", 1.5 - epoch}};
      for (size_t i = 0; i < eval::metrics().size(); ++i)
        valid[eval::metrics()[i].name] = double(i) + 10 * epoch + 0.25;
      out << valid.dump() << "\n";
    }
    out << R"({"kind": "step", "ep)" << "\n";  // a line cut short by a kill is skipped
  }
  data::Tokenizer letters = letters_tokenizer();
  ReportContent content{"run <1>", metrics_file.string(), {{"a < b", "ref & co", "pred"}},
                        attention_explorer({{"a b c", "b c", tiny_model_record()}}, letters, letters)};
  write_report((dir.path / "report.html").string(), content);
  std::string html = slurp(dir.path / "report.html");
  std::set<std::string> metric_charts;
  for (const eval::Metric& m : eval::metrics()) metric_charts.insert(m.chart);
  // Training loss, learning rate, validation loss, the metrics' charts.
  CHECK(count(html, "<svg") == 3 + metric_charts.size());
  CHECK(count(html, "<polyline class=\"series\"") == 3 + eval::metrics().size());  // a curve per metric
  for (const std::string& title : metric_charts) CHECK(html.find(">" + title + "</text>") != std::string::npos);
  // The table: a column per metric, its last row the epoch-1 values.
  CHECK(count(html, "<th>") == 3 + eval::metrics().size() + 3);  // + the samples table's 3
  CHECK(html.find("<th>token BLEU ↑</th>") != std::string::npos);
  CHECK(html.find("<th>sacreBLEU ↑</th>") != std::string::npos);
  CHECK(html.find(eval::sacrebleu_signature()) != std::string::npos);
  CHECK(html.find(eval::sacrebleu_signature(eval::Case::lowercase)) != std::string::npos);
  CHECK(html.find(eval::moses_bleu_signature()) != std::string::npos);
  CHECK(html.find("<th>CER ↓</th>") != std::string::npos);
  std::string last_row = "<tr><td>1</td><td>60</td><td>0.5</td>";
  for (size_t i = 0; i < eval::metrics().size(); ++i) last_row += "<td>" + std::to_string(10 + i) + ".25</td>";
  CHECK(html.find(last_row + "</tr>") != std::string::npos);
  // The explorer, with its one sentence.
  CHECK(count(html, "<section id=\"explorer\">") == 1);
  CHECK(explorer_data(html)["sentences"].size() == 1);
  CHECK(html.find("a &lt; b") != std::string::npos);  // text is escaped
  CHECK(html.find("run &lt;1&gt;") != std::string::npos);
  CHECK(html.find("src=") == std::string::npos);     // nothing loaded from elsewhere
  CHECK(html.find("href=") == std::string::npos);
}

TEST_CASE("attention maps: every layer's and head's weights, rows summing to 1, tokens on the axes") {
  data::Tokenizer tokenizer = letters_tokenizer();
  std::vector<infer::AttentionRecord> records = {tiny_model_record()};
  std::vector<infer::AttentionMap> maps = infer::attention_maps(records.at(0), tokenizer, tokenizer);
  // 2 layers x 2 heads: encoder self, decoder self, decoder cross.
  REQUIRE(maps.size() == 3 * 2 * 2);
  CHECK(maps[0].rows == std::vector<std::string>{"[SOS]", "a", "b", "c", "[EOS]"});
  CHECK(maps.back().title == "decoder layer 1 cross-attention, head 1");
  std::vector<std::string> fed;  // the decoder inputs: [SOS] and the tokens fed back
  for (int32_t id : records[0].target) fed.push_back(tokenizer.id_to_token(id));
  CHECK(fed.size() == 3);  // [SOS] and 2 generated tokens; the 3rd is never fed
  CHECK(fed.front() == "[SOS]");
  CHECK(maps.back().rows == fed);
  CHECK(maps.back().cols.size() == 5);
  for (const infer::AttentionMap& m : maps)
    for (size_t r = 0; r < m.rows.size(); ++r) {
      double sum = 0;
      for (size_t c = 0; c < m.cols.size(); ++c) sum += m.weights[r * m.cols.size() + c];
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
    }
  // Decoder self-attention is causal: nothing above the diagonal.
  const infer::AttentionMap& self = maps[4];
  CHECK(self.title == "decoder layer 0 self-attention, head 0");
  CHECK(self.weights[0 * self.cols.size() + 1] == 0.0f);
  std::string svg = infer::attention_svg(maps, 2);
  CHECK(count(svg, "<g class=\"heatmap\">") == 12);
  CHECK(svg.find(">[SOS]</text>") != std::string::npos);
}

TEST_CASE("attention explorer: every block, layer and head quantised to 8 bits; self-contained; 20 sentences under 2 MB") {
  // base64 as RFC 4648's examples: "f", "fo", "foo", "foob" as weights byte / 255.
  auto weights = [](std::string_view text) {
    std::vector<float> w;
    for (unsigned char c : text) w.push_back(c / 255.0f);
    return w;
  };
  CHECK(quantised_base64(weights("f")) == "Zg==");
  CHECK(quantised_base64(weights("fo")) == "Zm8=");
  CHECK(quantised_base64(weights("foo")) == "Zm9v");
  CHECK(quantised_base64(weights("foob")) == "Zm9vYg==");
  CHECK(quantised_base64({-0.5f, 0.5f, 2.0f}) == quantised_base64({0.0f, 128 / 255.0f, 1.0f}));  // clamped, rounded

  data::Tokenizer letters = letters_tokenizer();
  infer::AttentionRecord record = tiny_model_record();
  std::string page = attention_explorer_page("a </script> title", {{"a b c", "b c </script>", record}}, letters, letters);
  CHECK(page.find("src=") == std::string::npos);  // nothing loaded from elsewhere
  CHECK(page.find("href=") == std::string::npos);
  CHECK(count(page, "</script>") == 2);  // the data's own "</" is written "<\/"
  nlohmann::json data = explorer_data(page);
  REQUIRE(data["sentences"].size() == 1);
  const nlohmann::json& s = data["sentences"][0];
  CHECK(s["translation"] == "b c </script>");
  CHECK(s["source"] == std::vector<std::string>{"[SOS]", "a", "b", "c", "[EOS]"});
  CHECK(s["target"].size() == record.target.size());
  CHECK(s["layers"] == 2);
  CHECK(s["heads"] == 2);
  // Each block's layers decode to their weights within half a step of 1/255.
  for (auto [name, block] : {std::pair{"encoder_self", &record.encoder_self}, {"decoder_self", &record.decoder_self},
                             {"cross", &record.cross}}) {
    REQUIRE(s["blocks"][name].size() == 2);
    for (size_t l = 0; l < 2; ++l) {
      std::vector<uint8_t> bytes = base64_bytes(s["blocks"][name][l]);
      const std::vector<float>& values = (*block)[l].values;
      REQUIRE(bytes.size() == values.size());
      for (size_t i = 0; i < bytes.size(); ++i) CHECK(std::abs(bytes[i] / 255.0 - values[i]) <= 0.5 / 255 + 1e-6);
    }
  }

  // Twenty sentences as long as Multi30k's (20 source and 20 target words) of
  // a model of its size (3 layers, 8 heads): a report stays under 2 MB.
  auto weights_of = [](int64_t queries, int64_t keys) {
    std::vector<float> w(static_cast<size_t>(8 * queries * keys));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37) % 101) / 100.0f;
    return infer::AttentionWeights{8, queries, keys, w};
  };
  infer::AttentionRecord long_record;
  long_record.source.assign(22, 4);
  long_record.target.assign(21, 4);
  for (int l = 0; l < 3; ++l) {
    long_record.encoder_self.push_back(weights_of(22, 22));
    long_record.decoder_self.push_back(weights_of(21, 21));
    long_record.cross.push_back(weights_of(21, 22));
  }
  std::vector<ExplorerSentence> twenty(20, {"a b c d e f g a b c d e f g a b c d e f", "a b c", long_record});
  size_t bytes = attention_explorer(twenty, letters, letters).size();
  MESSAGE("explorer of 20 Multi30k-sized sentences: ", bytes, " bytes");
  CHECK(bytes < 2'000'000);
}

TEST_CASE("eval: equals the metrics recomputed from the lines translate --tokens prints; translate detokenizes them") {
  testing::TempDir dir;
  std::string d = dir.path.string();
  // One epoch of 3000 pairs: enough for dates with their hyphens, which
  // detokenizing rewrites (smaller runs print empty lines).
  std::string config = testing::write_config(dir.path, R"("data": {"task": "dates", "size": 3000}, "lang_src": "en",
    "lang_tgt": "iso", "num_epochs": 1, "batch_size": 32, "lr": 0.005, "seq_len": 20, "d_model": 32, "N": 1,
    "h": 2, "d_ff": 64, "min_frequency": 1)");
  REQUIRE(train::Trainer(setup::load_config(config)).run() == 0);
  {
    // Validation records the attention of its first sentences while it
    // translates them, so the report's heatmaps show the translations it printed.
    train::Trainer trainer(setup::load_config(config, {"num_epochs=0", "preload=latest"}));
    eval::ValidationResult v = trainer.validate();
    REQUIRE(v.attention.size() == 20);
    data::Tokenizer iso = data::Tokenizer::load(d + "/tokenizer_iso.json");
    for (size_t i = 0; i < v.attention.size(); ++i) {
      // The record's decoder inputs are [SOS] and every generated token fed
      // back: all of the printed translation, or all but its last token when
      // decoding stopped at seq_len rather than at [EOS].
      const std::string& printed = v.predictions[i];
      CHECK(printed.starts_with(iso.decode(v.attention[i].target)));
      CHECK(v.attention[i].target.size() >= count(printed, " ") + 1);
    }
    // The sentences people read are the same, but for unknown words replaced.
    REQUIRE(v.shown.size() == 20);
    for (size_t i = 0; i < v.shown.size(); ++i)
      if (v.predictions[i].find("[UNK]") == std::string::npos) CHECK(v.shown[i] == v.predictions[i]);
    // The report's explorer holds the sentences validation recorded.
    CHECK(explorer_data(slurp(dir.path / "run/report.html"))["sentences"].size() == v.attention.size());
  }
  {
    // The validation record holds every metric by name.
    std::ifstream in(dir.path / "run/metrics.jsonl");
    int valid_records = 0;
    for (std::string line; std::getline(in, line);) {
      auto r = nlohmann::json::parse(line);
      if (r["kind"] != "valid") continue;
      ++valid_records;
      for (const eval::Metric& m : eval::metrics()) CHECK_MESSAGE(r[m.name].is_number(), m.name);
    }
    CHECK(valid_records == 1);
  }
  std::vector<data::Pair> pairs = data::generate_toy_task("dates", 20, 99);
  std::string sources, references;
  {
    std::ofstream tsv(dir.path / "valid.tsv");
    for (const data::Pair& p : pairs) {
      tsv << p.src << "\t" << p.tgt << "\n";
      sources += p.src + "\n";
    }
  }
  std::ofstream(dir.path / "sources.txt") << sources;
  std::string bin = sf::testing::scratchformer_binary();
  std::string prefix = "cd '" + d + "' && '" + bin + "' ";
  auto result = nlohmann::ordered_json::parse(capture(prefix + "eval --config config.json --data valid.tsv --beam 2"));
  std::istringstream lines(capture(prefix + "translate --config config.json --beam 2 --tokens < sources.txt")),
      detokenized(capture(prefix + "translate --config config.json --beam 2 < sources.txt"));
  std::vector<std::string> hypotheses, refs;
  for (std::string line; std::getline(lines, line);) hypotheses.push_back(line);
  for (const data::Pair& p : pairs) refs.push_back(p.tgt);
  REQUIRE(hypotheses.size() == pairs.size());
  // Without --tokens the same lines, as written: "1992 - 07 - 04" is "1992-07-04".
  int rewritten = 0;
  for (const std::string& tokens : hypotheses) {
    std::string line;
    REQUIRE(std::getline(detokenized, line));
    CHECK(line == data::detokenize(tokens));
    rewritten += line != tokens;
  }
  CHECK(rewritten > 0);
  eval::Scores s = eval::score_translations(hypotheses, refs, "iso");
  // Every metric of the table, in its order, then the references' loss,
  // the three sacreBLEU signatures, the sentences and the time.
  std::vector<std::string> keys;
  for (const auto& [key, value] : result.items()) keys.push_back(key);
  REQUIRE(keys.size() == eval::metrics().size() + 6);
  CHECK(keys[eval::metrics().size()] == "loss");
  CHECK(result["loss"].get<double>() > 0);
  for (size_t i = 0; i < eval::metrics().size(); ++i) {
    CAPTURE(keys[i]);
    CHECK(keys[i] == eval::metrics()[i].name);
    CHECK(result[keys[i]].get<double>() == doctest::Approx(s.values[i]));
  }
  for (const char* key : {"bleu", "sacrebleu", "chrf", "cer", "wer"}) CHECK(result.contains(key));
  CHECK(result["signature"] == eval::sacrebleu_signature());
  CHECK(result["signature_lc"] == "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0");
  CHECK(result["signature_lc_tok"] == "nrefs:1|case:lc|eff:no|tok:none|smooth:none|version:2.6.0");
  // sacreBLEU scores the lines translate prints against the raw references.
  std::vector<std::string> printed;
  for (const std::string& tokens : hypotheses) printed.push_back(data::detokenize(tokens));
  CHECK(result["sacrebleu"].get<double>() == doctest::Approx(eval::corpus_sacrebleu(printed, refs)));
  CHECK(result["sentences"] == 20);
  CHECK(result["seconds"].get<double>() > 0);
  // --attention writes one sentence's heatmaps.
  capture(prefix + "translate --config config.json --attention att.svg '" + pairs[0].src + "'");
  std::string svg = slurp(dir.path / "att.svg");
  CHECK(count(svg, "<g class=\"heatmap\">") == 3 * 2);
  // --attention OUT.html explores every sentence translated.
  capture(prefix + "translate --config config.json --attention att.html '" + pairs[0].src + "' '" + pairs[1].src + "'");
  nlohmann::json explored = explorer_data(slurp(dir.path / "att.html"));
  REQUIRE(explored["sentences"].size() == 2);
  CHECK(explored["sentences"][1]["text"] == pairs[1].src);
}
