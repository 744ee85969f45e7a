// Every way of decoding, under every precision and on every device, through
// every entry point: `translate` (greedy or beam search, with or without
// --attention, unknown words replaced or kept), `eval`, the validation inside
// `train` (its metrics record, its printed samples) and the report it writes.
// Each run must succeed and agree with the float32 CPU run of the same
// decoding options, within what its numerics allow:
//  - the same precision on another device or entry point: the same lines;
//  - another precision: the same lines except near-ties, where at the first
//    token the two outputs differ the float32 model gives the two tokens
//    log-probabilities within twice the precision's error (a flip needs the
//    errors of both to close the gap), or gives the two whole outputs
//    log-probabilities within that error per token (beam search compares
//    whole hypotheses). The precision's error is bounded by kLogProbError
//    and measured: every log-probability along the outputs, compared.
// The matrix is the product of the axes below; a new decoding option or
// config key joins it as one line there.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "cli_process.h"
#include "data/detokenizer.h"
#include "explorer_data.h"
#include "names_model.h"
#include "infer/inference.h"
#include "eval/metrics.h"

using namespace sf;
using namespace sf::infer;
using namespace sf::testing;

namespace {

// The commands a cell runs: translate the validation sources, eval the
// validation pairs, or train one epoch from the trained weights without an
// optimizer step, for its validation pass and report.
enum Entry : unsigned { kTranslate = 1, kEval = 2, kTrain = 4, kEveryEntry = 7 };

struct Setting {
  std::string label;
  std::vector<std::string> args;  // command-line words; "{cell}" is the cell's own folder
  unsigned entries = kEveryEntry;   // the entry points that take it
  bool cpu_only = false;            // bf16 autocast runs on the CPU alone
};

struct Axis {
  // Whether the axis changes how the output is computed but not what it is
  // (precision, device, recording attention): its cells are compared with the
  // reference run, which takes its first setting. Otherwise (beam width,
  // [UNK] kept) each setting has a reference run of its own.
  bool same_output;
  std::vector<Setting> settings;
};

const std::vector<Axis>& axes() {
  static const std::vector<Axis> axes = {
      {true, {{"cpu", {"--set", "device=cpu"}}
#ifdef SF_OPENCL
              , {"opencl", {"--set", "device=opencl"}}
#endif
             }},
      {true, {{"fp32", {"--set", "precision=fp32"}}, {"bf16", {"--set", "precision=bf16"}, kEveryEntry, true}}},
      {false, {{"greedy", {"--set", "beam=1"}}, {"beam 3", {"--set", "beam=3"}}}},
      {true, {{"", {}, kTranslate}, {"--attention", {"--attention", "{cell}/attention.html"}, kTranslate}}},
      {false, {{"", {}, kTranslate}, {"--keep-unk", {"--keep-unk"}, kTranslate}}},
  };
  return axes;
}

// A bound on how far a precision moves a log-probability of this model from
// float32 on the CPU (measured: bf16 up to 0.12 nats, float32 on
// OpenCL 1e-6).
const std::map<DType, double> kLogProbError = {{DType::F32, 1e-4}, {DType::BF16, 0.25}};
// A bound on how far bf16 moves an attention weight of this model from
// float32's, as translate --attention writes them (bytes of 1/255; measured:
// up to 6/255 = 0.024).
constexpr double kAttentionError = 0.05;

struct Cell {
  Entry entry;
  std::vector<size_t> choice;  // a setting of each axis

  std::string name() const {
    std::string name = entry == kTranslate ? "translate" : entry == kEval ? "eval" : "train";
    for (size_t a = 0; a < choice.size(); ++a)
      if (!axes()[a].settings[choice[a]].label.empty()) name += ", " + axes()[a].settings[choice[a]].label;
    return name;
  }
  std::vector<std::string> args(const fs::path& folder) const {
    std::vector<std::string> args;
    for (size_t a = 0; a < choice.size(); ++a)
      for (std::string arg : axes()[a].settings[choice[a]].args) {
        if (size_t at = arg.find("{cell}"); at != std::string::npos) arg.replace(at, 6, folder.string());
        args.push_back(arg);
      }
    return args;
  }
  // The --set words alone, for load_config.
  std::vector<std::string> sets() const {
    std::vector<std::string> sets, all = args("");
    for (size_t i = 0; i + 1 < all.size(); ++i)
      if (all[i] == "--set") sets.push_back(all[++i]);
    return sets;
  }
  // The float32 CPU translate run this cell must agree with.
  Cell reference() const {
    Cell r{kTranslate, choice};
    for (size_t a = 0; a < choice.size(); ++a)
      if (axes()[a].same_output) r.choice[a] = 0;
    return r;
  }
  bool is_reference() const { return entry == kTranslate && reference().choice == choice; }
};

// Every cell whose settings all apply to its entry point, on `device`.
std::vector<Cell> cells_on(const std::string& device) {
  std::vector<Cell> cells;
  for (Entry entry : {kTranslate, kEval, kTrain}) {
    std::vector<size_t> choice(axes().size(), 0);
    while (true) {
      bool applies = axes()[0].settings[choice[0]].label == device;
      for (size_t a = 0; a < choice.size(); ++a) {
        const Setting& setting = axes()[a].settings[choice[a]];
        applies = applies && (choice[a] == 0 || (setting.entries & entry)) && !(setting.cpu_only && device != "cpu");
      }
      if (applies) cells.push_back({entry, choice});
      size_t a = 0;
      while (a < choice.size() && ++choice[a] == axes()[a].settings.size()) choice[a++] = 0;
      if (a == choice.size()) break;
    }
  }
  return cells;
}

std::string quoted(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& w : words) line += " '" + w + "'";
  return line;
}

// What a cell's run gave: the lines it printed for the validation sources
// (translate's, or train's samples), and its metrics (eval's, or train's
// validation record).
struct Outcome {
  std::vector<std::string> lines;
  std::optional<nlohmann::json> metrics;
  fs::path folder;  // the run's own, where its files are
};

struct Matrix {
  const NamesModel& model = names_model();
  TempDir scratch;
  std::vector<std::string> sources, references;
  std::string weights;  // the trained model's latest weights
  std::map<std::string, Outcome> outcomes;  // by cell name
  std::string summary;                      // a line per cell checked against another precision or device

  Matrix() {
    std::ifstream pairs(model.valid);
    std::ofstream input(scratch.path / "sources.txt");
    for (std::string line; std::getline(pairs, line);) {
      sources.push_back(line.substr(0, line.find('\t')));
      references.push_back(line.substr(line.find('\t') + 1));
      input << sources.back() << "\n";
    }
    weights = Session::open(setup::load_config(model.config, model.sets), std::nullopt).checkpoint;
    // Train runs start from the weights alone (a fresh optimizer at epoch 0).
    fs::copy_file(weights, scratch.path / "start.safetensors");
  }

  std::string command(const Cell& cell, const fs::path& folder) const {
    std::vector<std::string> words = {scratchformer_binary()};
    if (cell.entry == kTranslate) words.insert(words.end(), {"translate", "--config", model.config});
    if (cell.entry == kEval) words.insert(words.end(), {"eval", "--config", model.config, "--data", model.valid.string()});
    if (cell.entry == kTrain)
      // The validation pairs as the training data too, and steps too small
      // to change a weight (w - 1e-30 g is w in float32).
      words.insert(words.end(), {"train", "--config", model.config, "--set", "preload=" + (scratch.path / "start.safetensors").string(),
                                 "--set", "num_epochs=1", "--set", "optimizer.name=sgd", "--set", "lr=1e-30",
                                 "--set", "data.train=" + model.valid.string(),
                                 "--set", "model_folder=" + (folder / "weights").string(), "--set",
                                 "experiment_name=" + (folder / "run").string(), "--set", "val_examples=60"});
    for (const std::string& set : model.sets) words.insert(words.end(), {"--set", set});
    std::vector<std::string> args = cell.args(folder);
    words.insert(words.end(), args.begin(), args.end());
    std::string line = quoted(words);
    if (cell.entry == kTranslate) line += " <'" + (scratch.path / "sources.txt").string() + "'";
    return line;
  }

  const Outcome& run(const Cell& cell) {
    if (auto found = outcomes.find(cell.name()); found != outcomes.end()) return found->second;
    fs::path folder = scratch.path / std::to_string(outcomes.size());
    fs::create_directories(folder);
    std::string command_line = command(cell, folder);
    INFO(cell.name(), ":", command_line);
    Outcome outcome;
    outcome.folder = folder;
    std::vector<std::string> printed = capture_lines(command_line + " 2>'" + (folder / "stderr").string() + "'");
    INFO(read_file(folder / "stderr"));
    if (cell.entry == kTranslate) outcome.lines = printed;
    if (cell.entry == kEval) {
      REQUIRE(printed.size() == 1);
      outcome.metrics = nlohmann::json::parse(printed[0]);
    }
    if (cell.entry == kTrain) {
      // Its progress and samples go to standard error.
      const std::string sample = " PREDICTED: ";
      std::ifstream log(folder / "stderr");
      for (std::string line; std::getline(log, line);)
        if (line.starts_with(sample)) outcome.lines.push_back(line.substr(sample.size()));
      std::ifstream records(folder / "run/metrics.jsonl");
      for (std::string line; std::getline(records, line);)
        if (auto record = nlohmann::json::parse(line); record["kind"] == "valid") outcome.metrics = record;
      REQUIRE(outcome.metrics.has_value());
      // No optimizer step: the epoch's checkpoint holds the trained weights.
      CHECK(read_file(folder / "weights/tmodel_00.safetensors") == read_file(weights));
      check_report(folder / "run/report.html", outcome.lines);
    }
    if (cell.entry != kEval) REQUIRE(outcome.lines.size() == sources.size());
    return outcomes[cell.name()] = outcome;
  }

  // The report's sample translations are the first validation samples printed.
  void check_report(const fs::path& report, const std::vector<std::string>& printed) const {
    std::string html = read_file(report);
    std::regex row("<tr><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td></tr>");
    size_t i = 0;
    for (auto m = std::sregex_iterator(html.begin(), html.end(), row); m != std::sregex_iterator(); ++m, ++i) {
      REQUIRE(i < printed.size());
      CHECK((*m)[1].str() == printed[i]);
    }
    CHECK(i == 5);
  }

  // The metrics of printed lines, [UNK] kept as the model wrote it.
  eval::Scores scores_of(const Session& session, const std::vector<std::string>& lines) const {
    std::vector<std::string> tokens;
    for (const std::string& line : lines) tokens.push_back(session.tgt_tokenizer.decode(session.tgt_tokenizer.encode(line)));
    return eval::score_translations(tokens, references, session.config.lang_tgt);
  }
};

Session open_session(const Matrix& m, const Cell& cell) {
  std::vector<std::string> sets = m.model.sets;
  for (const std::string& set : cell.sets()) sets.push_back(set);
  return Session::open(setup::load_config(m.model.config, sets), m.weights);
}

// log p of every token at each position of `target` (its tokens, then
// [EOS]) given `source`, teacher-forced in the session's precision.
std::vector<std::vector<float>> next_token_log_probs(Session& s, const TokenIds& source, const TokenIds& target) {
  NoGradGuard no_grad;
  AutocastGuard autocast(s.config.precision_dtype());
  data::BatchedDataset set({{source, target, {}}}, {1, s.config.seq_len, false, false, 0});
  data::Batch b = set.make_batch({0});
  Tensor memory = s.model->encode(b.encoder_input, b.encoder_mask);
  std::vector<float> all =
      s.model->project(s.model->decode(memory, b.encoder_mask, b.decoder_input, b.decoder_mask)).to_vector();
  const size_t vocab = all.size() / b.label.size(1);
  std::vector<std::vector<float>> rows;
  for (size_t t = 0; t < target.size() + 1; ++t) rows.emplace_back(all.begin() + t * vocab, all.begin() + (t + 1) * vocab);
  return rows;
}

// The largest difference between two runs' log-probabilities of the tokens
// of `target` (its [EOS] included) and, at position `at`, of `also`.
double largest_difference(const std::vector<std::vector<float>>& x, const std::vector<std::vector<float>>& y,
                          const TokenIds& target, size_t at = 0, int32_t also = data::kEosId) {
  double worst = std::fabs(double(x.at(at)[also]) - y.at(at)[also]);
  for (size_t t = 0; t < x.size(); ++t) {
    int32_t token = t < target.size() ? target[t] : data::kEosId;
    worst = std::max(worst, std::fabs(double(x[t][token]) - y[t][token]));
  }
  return worst;
}

double total(const std::vector<std::vector<float>>& rows, const TokenIds& target) {
  double sum = 0.0;
  for (size_t t = 0; t < rows.size(); ++t) sum += rows[t][t < target.size() ? target[t] : data::kEosId];
  return sum;
}

// Checks `lines` against the reference run's within `cell`'s precision (see
// the top of the file); `lines` are shown (unknown words replaced) or kept
// as the reference's are.
void check_agrees(Matrix& m, const Cell& cell, const std::vector<std::string>& lines, const std::vector<std::string>& expected) {
  REQUIRE(lines.size() == expected.size());
  Session here = open_session(m, cell), reference = open_session(m, cell.reference());
  const double bound = kLogProbError.at(here.config.precision_dtype());
  const bool same_numerics = here.config.precision == reference.config.precision &&
                             here.config.device == reference.config.device;
  int differing = 0;
  double measured = 0.0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] == expected[i] && !(i % 10 == 0 && !same_numerics)) continue;
    CAPTURE(m.sources[i]);
    CAPTURE(expected[i]);
    CAPTURE(lines[i]);
    const TokenIds source = here.src_tokenizer.encode(m.sources[i]);
    const TokenIds a = reference.tgt_tokenizer.encode(expected[i]), b = reference.tgt_tokenizer.encode(lines[i]);
    size_t t = 0;  // where the outputs part
    while (t < a.size() && t < b.size() && a[t] == b[t]) ++t;
    auto token = [&](const TokenIds& ids) { return t < ids.size() ? ids[t] : data::kEosId; };
    auto on_a = next_token_log_probs(reference, source, a), on_b = next_token_log_probs(reference, source, b);
    auto here_a = next_token_log_probs(here, source, a), here_b = next_token_log_probs(here, source, b);
    // The precision's error along both outputs, within its bound.
    double error = std::max(largest_difference(on_a, here_a, a, t, token(b)), largest_difference(on_b, here_b, b));
    measured = std::max(measured, error);
    CHECK(error <= bound);
    if (lines[i] == expected[i]) continue;
    ++differing;
    CHECK_FALSE(same_numerics);
    // A near-tie: greedy parts where the two next tokens' float32
    // log-probabilities are within both errors; beam search ranks whole
    // outputs by their scores (log-probability over length^length_penalty,
    // the [EOS] counted), whose float32 values can then be no further apart
    // than the precision moved the two, as measured along them.
    const double penalty = here.config.length_penalty;
    auto score = [&](const std::vector<std::vector<float>>& rows, const TokenIds& output) {
      return total(rows, output) / std::pow(double(data::framed_target_width(output.size())), penalty);
    };
    double step_gap = std::fabs(on_a[t][token(a)] - on_a[t][token(b)]);
    double whole_gap = std::fabs(score(on_a, a) - score(on_b, b));
    double whole_error = std::fabs(score(on_a, a) - score(here_a, a)) + std::fabs(score(on_b, b) - score(here_b, b));
    CHECK_MESSAGE((step_gap <= 2 * bound || whole_gap <= whole_error), "not a near-tie: at token ", t,
                  " the float32 log-probabilities differ by ", step_gap, ", over the outputs by ", whole_gap,
                  " where the precision moved them by ", whole_error);
  }
  if (!same_numerics)
    m.summary += "\n  " + cell.name() + ": " + std::to_string(differing) + " of " + std::to_string(lines.size()) +
                 " lines differ from float32's (near-ties); log-probability error up to " + std::to_string(measured) +
                 " (bound " + std::to_string(bound) + ")";
}

// score's lines ("NLL<TAB>tokens") for the validation pairs, with `sets`.
std::vector<std::string> score_lines(const Matrix& m, const std::string& set) {
  std::vector<std::string> words = {scratchformer_binary(), "score", "--config", m.model.config, "--set", set};
  for (const std::string& s : m.model.sets) words.insert(words.end(), {"--set", s});
  return capture_lines(quoted(words) + " <'" + m.model.valid.string() + "'");
}

// Each sentence of an explorer page: its translation, and its weights, each
// as its byte / 255, in page order.
std::vector<std::pair<std::string, std::vector<double>>> explorer_weights(const fs::path& page) {
  std::vector<std::pair<std::string, std::vector<double>>> sentences;
  const nlohmann::json data = explorer_data(read_file(page));
  for (const auto& sentence : data["sentences"]) {
    std::vector<double> weights;
    for (const auto& [block, layers] : sentence["blocks"].items())
      for (const auto& layer : layers)
        for (uint8_t byte : base64_bytes(layer.get<std::string>())) weights.push_back(byte / 255.0);
    sentences.emplace_back(sentence["translation"].get<std::string>(), std::move(weights));
  }
  return sentences;
}

// bf16 where the config says bf16: every entry point computes in it. Its
// numbers differ from float32's (an entry point that skipped the autocast
// would give float32's exactly) and stay within the precision's error:
// score's NLLs (a sum over the target's tokens and [EOS], so within
// kLogProbError per token), eval's loss and validation's (means per token),
// and the attention weights translate --attention writes (bytes of 1/255).
void check_bf16_is_bf16(Matrix& m) {
  const double bound = kLogProbError.at(DType::BF16);
  const std::vector<std::string> f32 = score_lines(m, "precision=fp32"), b16 = score_lines(m, "precision=bf16");
  REQUIRE(f32.size() == m.sources.size());
  REQUIRE(b16.size() == f32.size());
  int differing = 0;
  for (size_t i = 0; i < f32.size(); ++i) {
    CAPTURE(m.sources[i]);
    const double nll_f32 = std::stod(f32[i]), nll_b16 = std::stod(b16[i]);
    const int tokens = std::stoi(f32[i].substr(f32[i].find('\t') + 1));
    CHECK(std::fabs(nll_b16 - nll_f32) <= bound * tokens);
    differing += nll_b16 != nll_f32;
  }
  MESSAGE("score: ", differing, " of ", f32.size(), " NLLs differ in bf16");
  CHECK(differing > int(f32.size()) / 2);
  for (const std::string entry : {"eval", "train"}) {
    CAPTURE(entry);
    const double loss_f32 = (*m.outcomes.at(entry + ", cpu, fp32, greedy").metrics)["loss"].get<double>();
    const double loss_b16 = (*m.outcomes.at(entry + ", cpu, bf16, greedy").metrics)["loss"].get<double>();
    MESSAGE(entry, ": loss ", loss_f32, " in float32, ", loss_b16, " in bf16");
    CHECK(loss_b16 != loss_f32);
    CHECK(std::fabs(loss_b16 - loss_f32) <= bound);
  }
  // eval's loss is validation's, on the same pairs.
  CHECK((*m.outcomes.at("eval, cpu, fp32, greedy").metrics)["loss"].get<double>() ==
        doctest::Approx((*m.outcomes.at("train, cpu, fp32, greedy").metrics)["loss"].get<double>()).epsilon(1e-5));
  // The weights of the sentences both precisions translate alike (a near-tie
  // may part the others: the matrix's own checks above).
  const auto a = explorer_weights(m.outcomes.at("translate, cpu, fp32, greedy, --attention").folder / "attention.html"),
             b = explorer_weights(m.outcomes.at("translate, cpu, bf16, greedy, --attention").folder / "attention.html");
  REQUIRE(a.size() == b.size());
  double largest = 0;
  size_t moved = 0, compared = 0, sentences = 0;
  for (size_t s = 0; s < a.size(); ++s) {
    if (a[s].first != b[s].first) continue;
    ++sentences;
    REQUIRE(a[s].second.size() == b[s].second.size());
    for (size_t i = 0; i < a[s].second.size(); ++i, ++compared) {
      largest = std::max(largest, std::fabs(a[s].second[i] - b[s].second[i]));
      moved += a[s].second[i] != b[s].second[i];
    }
  }
  CHECK(sentences >= a.size() / 2);
  MESSAGE("attention: ", moved, " of ", compared, " weights of ", sentences, " sentences differ in bf16, by up to ",
          largest);
  CHECK(moved > 0);
  CHECK(largest <= kAttentionError);
}

void run_matrix(const std::string& device) {
  Matrix m;
  for (const Cell& cell : cells_on(device)) {
    CAPTURE(cell.name());
    const Outcome& outcome = m.run(cell);
    const Outcome& reference = m.run(cell.reference());
    Session session = open_session(m, cell);
    if (cell.entry == kTranslate && !cell.is_reference()) check_agrees(m, cell, outcome.lines, reference.lines);
    if (cell.entry == kTrain) {
      // Its samples are shown (unknown words replaced); its record scores
      // the same translations, [UNK] kept, as eval does.
      check_agrees(m, cell, outcome.lines, reference.lines);
      eval::Scores scores = m.scores_of(session, outcome.lines);
      for (const eval::Metric& metric : eval::metrics())
        CHECK((*outcome.metrics)[metric.name].get<double>() == doctest::Approx(scores.at(metric.name)));
    }
    if (cell.entry == kEval) {
      // eval scores what translate --keep-unk prints in the same settings.
      Cell kept = cell;
      kept.entry = kTranslate;
      for (size_t a = 0; a < axes().size(); ++a)
        for (size_t k = 0; k < axes()[a].settings.size(); ++k)
          if (axes()[a].settings[k].label == "--keep-unk") kept.choice[a] = k;
      const Outcome& printed = m.run(kept);
      eval::Scores scores = m.scores_of(session, printed.lines);
      for (const eval::Metric& metric : eval::metrics())
        CHECK((*outcome.metrics)[metric.name].get<double>() == doctest::Approx(scores.at(metric.name)));
    }
  }
  if (device == "cpu") check_bf16_is_bf16(m);
  MESSAGE(m.outcomes.size(), " runs on ", device, m.summary);
}

}  // namespace

TEST_CASE("decoding matrix: every decoding path, precision and entry point agrees with float32 on the CPU") {
  run_matrix("cpu");
}

#ifdef SF_OPENCL
TEST_SUITE("opencl") {
  TEST_CASE("opencl decoding matrix: every decoding path and entry point on OpenCL agrees with the CPU") {
    run_matrix("opencl");
  }
}
#endif
