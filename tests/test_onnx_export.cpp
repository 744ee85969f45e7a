// `scratchformer export --format onnx`, checked by the runtimes themselves:
// the ONNX reference checker (Debian's python3-onnx, full_check: types and
// shapes inferred through every node) passes both graphs, and ONNX Runtime
// (onnxruntime-node, tools/onnx-run greedy) decodes a batch of sentences
// greedily with the exported encoder and merged decoder, its key/value cache
// fed back step by step: its logits equal ours at every step, and its
// tokens are those `translate` writes; transformers.js's translation
// pipeline (tools/onnx-run translate) frames, decodes greedily and writes
// each sentence as we do. Two tiny models cover the graph's
// variants: a shared BPE vocabulary with tied embeddings, pre-norm, ReLU;
// two word-level vocabularies, post-norm, GELU.
// Then the bad inputs: one line, exit 2, no folder left.
// Skipped, with the reason, where python3-onnx, Node or the npm packages
// cannot be installed (no network, not root).
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "data/framing.h"
#include "data/toy_tasks.h"
#include "infer/inference.h"
#include "skip.h"

using namespace sf;
using namespace sf::testing;

namespace {

// The repository root: __FILE__ is tests/test_onnx_export.cpp, relative to it.
fs::path repository() { return fs::absolute(__FILE__).parent_path().parent_path(); }

// A path as one shell word.
std::string shell_word(const fs::path& path) { return std::string(1, '\'') + path.string() + '\''; }

bool succeeds(const std::string& command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Debian's python3-onnx (the reference checker), installed when missing.
const char* kOnnxChecker = "/usr/bin/python3";
bool onnx_checker_installed() {
  return succeeds((repository() / "tools/need-packages").string() +
                  " python3-onnx:/usr/lib/python3/dist-packages/onnx/__init__.py >/dev/null 2>&1");
}

bool onnx_runtimes_installed() { return succeeds((repository() / "tools/onnx-run").string() + " --install >/dev/null 2>&1"); }

// Trains a tiny model on the dates task in `dir` (its config.json) and exports it to dir/export.
void train_and_export(const fs::path& dir, const std::string& settings) {
  std::string config = write_config(dir, std::string(R"("data": {"task": "dates", "size": 2000},
    "lang_src": "en", "lang_tgt": "iso", "num_epochs": 3, )") + kSmall + ", " + settings);
  REQUIRE(train::Trainer(setup::load_config(config)).run() == 0);
  std::vector<std::string> said = capture_lines(shell_word(scratchformer_binary()) + " export --config " + shell_word(config) +
                                                " --format onnx --out " + shell_word(dir / "export"));
  REQUIRE(!said.empty());
  MESSAGE(said[0]);
}

// Our logits of each step of `tokens` (teacher-forced: [SOS] tokens [EOS]
// as far as the steps go), [steps, V] as rows.
std::vector<std::vector<float>> our_logits(nn::Transformer& model, const std::vector<int32_t>& source,
                                           const std::vector<int32_t>& tokens, size_t steps) {
  NoGradGuard no_grad;
  Tensor src = data::frame_sources({source});
  Tensor src_mask = data::encoder_keep_mask(src);
  std::vector<int32_t> fed = {data::kSosId};
  fed.insert(fed.end(), tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(steps - 1));
  Tensor tgt = Tensor::from_ints(fed, {1, static_cast<int64_t>(fed.size())});
  Tensor logits = model.logits(model.decode(model.encode(src, src_mask), src_mask, tgt, data::decoder_keep_mask(tgt)));
  std::vector<float> all = logits.to_vector();
  size_t v = static_cast<size_t>(logits.size(-1));
  std::vector<std::vector<float>> rows;
  for (size_t t = 0; t < steps; ++t) rows.emplace_back(all.begin() + t * v, all.begin() + (t + 1) * v);
  return rows;
}

std::string joined(const std::vector<int32_t>& ids) {
  std::string line;
  for (int32_t id : ids) {
    if (!line.empty()) line += ' ';
    line += std::to_string(id);
  }
  return line;
}

// transformers.js's translation pipeline on the folder (tools/onnx-run
// translate): its tokenizer frames each sentence as our encoder reads it,
// and its greedy ids and text are ours.
void check_with_transformers_js(const fs::path& dir, const infer::Session& session, const std::vector<std::string>& texts,
                                const std::vector<infer::TokenIds>& ours, const std::vector<std::string>& translated) {
  REQUIRE(succeeds(shell_word(repository() / "tools/onnx-run") + " translate " + shell_word(dir / "export") + " " +
                   shell_word(dir / "sentences.txt") + " " + shell_word(dir / "transformers_js.txt")));
  std::vector<std::string> lines = capture_lines("cat " + shell_word(dir / "transformers_js.txt"));
  REQUIRE(lines.size() == texts.size());
  size_t same = 0;
  for (size_t s = 0; s < texts.size(); ++s) {
    CAPTURE(texts[s]);
    std::vector<int32_t> ids = session.src_tokenizer.encode(texts[s]);
    std::string source = joined(data::frame_source(ids, data::framed_source_width(ids.size())));
    std::vector<std::string> fields;
    for (size_t begin = 0, end; begin <= lines[s].size(); begin = end + 1) {
      end = std::min(lines[s].find('\t', begin), lines[s].size());
      fields.push_back(lines[s].substr(begin, end - begin));
    }
    REQUIRE(fields.size() == 3);
    CHECK(fields[0] == source);
    CHECK(fields[1] == joined(ours[s]));
    CHECK(fields[2] == translated[s]);
    same += fields[0] == source && fields[1] == joined(ours[s]) && fields[2] == translated[s];
  }
  MESSAGE("transformers.js: ", same, " of ", texts.size(), " sentences framed and translated as ours");
}

// The exported folder `dir`/export against the model it came from.
void check_with_runtimes(const fs::path& dir) {
  const fs::path out = dir / "export";
  for (const char* graph : {"encoder_model.onnx", "decoder_model_merged.onnx"}) {
    fs::path path = out / "onnx" / graph;
    CHECK_MESSAGE(succeeds(std::string(kOnnxChecker) + " -c 'import onnx, sys; onnx.checker.check_model(sys.argv[1], "
                           "full_check=True)' " + shell_word(path)),
                  "onnx.checker.check_model(full_check=True) fails on ", path.string());
  }

  infer::Session session = infer::Session::open(setup::load_config((dir / "config.json").string()), std::nullopt);
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> sources;
  nlohmann::json input = {{"max_len", session.config.seq_len}, {"pad", data::kPadId}, {"sos", data::kSosId},
                          {"eos", data::kEosId}, {"check_uncached", true}, {"sources", nlohmann::json::array()}};
  for (const data::Pair& p : data::generate_toy_task("dates", 24, 7)) {
    texts.push_back(p.src);
    sources.push_back(session.src_tokenizer.encode(p.src));
    input["sources"].push_back(data::frame_source(sources.back(), data::framed_source_width(sources.back().size())));
  }
  std::ofstream(dir / "input.json") << input.dump();
  REQUIRE(succeeds(shell_word(repository() / "tools/onnx-run") + " greedy " + shell_word(out) + " " + shell_word(dir / "input.json") +
                   " " + shell_word(dir / "ort.json")));
  nlohmann::json ort = nlohmann::json::parse(std::ifstream(dir / "ort.json"));

  std::vector<infer::TokenIds> ours = infer::translate_ids(*session.model, sources, infer::DecodeOptions::from_config(session.config));
  std::string sentences;
  for (const std::string& text : texts) sentences += text + "\n";
  std::ofstream(dir / "sentences.txt") << sentences;
  std::vector<std::string> translated = capture_lines(shell_word(scratchformer_binary()) + " translate --tokens --config " +
                                                      shell_word(dir / "config.json") + " < " + shell_word(dir / "sentences.txt"));
  REQUIRE(translated.size() == texts.size());
  double largest = 0;
  size_t same = 0, steps = 0;
  for (size_t s = 0; s < texts.size(); ++s) {
    CAPTURE(texts[s]);
    const nlohmann::json& sentence = ort["sentences"][s];
    std::vector<int32_t> tokens = sentence["tokens"];
    std::vector<std::vector<float>> theirs = sentence["logits"];
    std::vector<std::vector<float>> mine = our_logits(*session.model, sources[s], tokens, theirs.size());
    for (size_t t = 0; t < theirs.size(); ++t, ++steps)
      for (size_t v = 0; v < mine[t].size(); ++v) largest = std::max(largest, double(std::abs(mine[t][v] - theirs[t][v])));
    CHECK(joined(tokens) == joined(ours[s]));
    CHECK(session.tgt_tokenizer.decode(tokens) == translated[s]);
    same += tokens == ours[s] && session.tgt_tokenizer.decode(tokens) == translated[s];
  }
  MESSAGE("ONNX Runtime: ", same, " of ", texts.size(), " sentences as translate writes them; ", steps,
          " steps, logits within ", largest, " of ours; the decoder without its cache within ",
          ort["uncached_difference"].get<double>(), " of it with");
  CHECK(largest < 1e-4);
  CHECK(ort["uncached_difference"].get<double>() < 1e-4);
  if (session.config.shared_vocab) check_with_transformers_js(dir, session, texts, ours, translated);
}

}  // namespace

TEST_CASE("onnx: the export passes onnx.checker's full check; ONNX Runtime decodes with its cache as we do "
          "(logits within 1e-4 at every step, translate's tokens), and so does transformers.js's pipeline") {
  if (!onnx_checker_installed()) SF_SKIP("python3-onnx (the ONNX checker) could not be installed");
  if (!onnx_runtimes_installed())
    SF_SKIP("Node, onnxruntime-node or transformers.js could not be installed (tools/onnx-run --install)");
  for (const char* settings : {R"("tokenizer": "bpe", "vocab_size": 200, "shared_vocab": true, "tie_embeddings": true)",
                               R"("norm": "post", "activation": "gelu")"}) {
    CAPTURE(std::string(settings));
    TempDir dir;
    train_and_export(dir.path, settings);
    check_with_runtimes(dir.path);
  }
}

namespace {

// What an export run printed on stderr, and which entries of `dir` it left.
std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("onnx: a bad export (a checkpoint unlike its config, a folder not empty, a disk full at any step): "
          "one line, exit 2, no folder left") {
  TempDir dir;
  std::string config = write_config(dir.path, std::string(R"("data": {"task": "dates", "size": 300},
    "lang_src": "en", "lang_tgt": "iso", "num_epochs": 1, )") + kTiny);
  REQUIRE(train::Trainer(setup::load_config(config)).run() == 0);
  const fs::path out = dir.path / "out" / "export", log = dir.path / "log.txt";
  fs::create_directories(out.parent_path());
  auto export_to = [&](const std::vector<std::string>& more, const std::vector<std::string>& env = {}) {
    std::vector<std::string> args = {"export", "--config", config, "--format", "onnx", "--out", out.string()};
    args.insert(args.end(), more.begin(), more.end());
    return run(args, log, std::nullopt, env);
  };
  auto one_error_line = [&](const std::string& says) {
    std::vector<std::string> lines = lines_of(log);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].starts_with("scratchformer: error: "));
    CHECK_MESSAGE(lines[0].find(says) != std::string::npos, lines[0]);
  };

  CHECK(export_to({"--set", "d_model=64"}) == 2);
  one_error_line("d_model");
  CHECK(entries(out.parent_path()).empty());

  fs::create_directories(out);
  std::ofstream(out / "notes.txt") << "mine\n";
  CHECK(export_to({}) == 2);
  one_error_line("not empty");
  CHECK(entries(out) == std::vector<std::string>{"notes.txt"});
  CHECK(entries(out.parent_path()) == std::vector<std::string>{"export"});
  fs::remove(out / "notes.txt");

  // An empty folder is written into; then every file-system step of that
  // export in turn is followed by a full disk (SCRATCHFORMER_FILE_STEPS,
  // base/file_steps.h): each run either fails with one line and leaves no
  // folder, or (once the last byte is written) succeeds.
  REQUIRE(export_to({}) == 0);
  const std::vector<std::string> complete = entries(out);
  REQUIRE(export_to({}, {"SCRATCHFORMER_FILE_STEPS=list"}) == 2);  // the folder is no longer empty
  fs::remove_all(out);
  REQUIRE(export_to({}, {"SCRATCHFORMER_FILE_STEPS=list"}) == 0);
  int64_t steps = 0, last_write = 0;  // "file step N: write PATH"
  for (const std::string& line : lines_of(log)) {
    if (!line.starts_with("file step ")) continue;
    ++steps;
    if (line.find(": write ") != std::string::npos) last_write = steps;
  }
  MESSAGE(steps, " file-system steps in an export");
  for (int64_t step = 0; step <= steps; ++step) {
    CAPTURE(step);
    fs::remove_all(out);
    int code = export_to({}, {"SCRATCHFORMER_FILE_STEPS=ENOSPC:" + std::to_string(step)});
    if (step < last_write) {
      CHECK(code == 2);
      one_error_line("No space left on device");
      CHECK(entries(out.parent_path()).empty());
    } else {  // nothing is written after that step
      CHECK(code == 0);
      CHECK(entries(out) == complete);
    }
  }
}
