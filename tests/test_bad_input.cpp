// The bad-input table: for each kind of input a user hands the command
// (config, --set and arguments, tokenizer, checkpoint, optimizer and training
// state, corpus), malformed examples and the one error line each must give.
// Every row runs the real command in a scratch folder and checks: exit code 2;
// the last line of stderr is "scratchformer: error: " + the row's error (only
// its beginning where the row's text ends in "...", the rest being byte counts);
// no other error line; and no file already in the folder changed, no
// temporary file left behind.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "build_dir.h"
#include "test_nn_helpers.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

struct Outcome {
  int status = -1;  // the exit code, or 128 + the signal that ended it
  std::string err;
};

// Runs build/scratchformer with `args` in `dir`, `input` on its standard input.
Outcome run_command(const fs::path& dir, const std::vector<std::string>& args, const std::string& input) {
  fs::path in = dir / ".stdin", err = dir / ".stderr";
  write_file(in, input);
  std::string bin = sf::testing::scratchformer_binary();
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(126);
    int in_fd = open(in.c_str(), O_RDONLY), null_fd = open("/dev/null", O_WRONLY),
        err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    std::vector<char*> argv{bin.data()};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Outcome o{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), read_file(err)};
  fs::remove(in);
  fs::remove(err);
  return o;
}

// Every file under `dir` with its bytes: what a failed run must leave as it was.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) files[fs::relative(entry.path(), dir).string()] = read_file(entry.path());
  return files;
}

// One malformed input: `prepare` writes or damages files in the run's folder,
// then the command runs with `args` (and `input` on stdin).
struct Row {
  std::string input;  // what is wrong, as the failure report shows it
  std::function<void(const fs::path&)> prepare;
  std::vector<std::string> args;
  std::string error;
  std::string stdin_text = "";
};

void check_error_line(const Outcome& o, const std::string& expected) {
  CHECK(o.status == 2);
  std::vector<std::string> lines;
  std::stringstream s(o.err);
  for (std::string line; std::getline(s, line);)
    if (!line.empty()) lines.push_back(line);
  REQUIRE_FALSE(lines.empty());
  // The progress lines a run prints before it gets going (data:, tokenizer
  // ..., model:) may come first; the error is the one "scratchformer:" line.
  CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
          return l.rfind("scratchformer:", 0) == 0;
        }) == 1);
  std::string want = "scratchformer: error: " + expected;
  if (want.size() > 3 && want.compare(want.size() - 3, 3, "...") == 0)
    CHECK(lines.back().substr(0, want.size() - 3) == want.substr(0, want.size() - 3));
  else
    CHECK(lines.back() == want);
}

// Runs each row in a fresh copy of `fixture` (empty: an empty folder).
void check_table(const fs::path& fixture, const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    CAPTURE(row.input);
    sf::testing::TempDir dir;
    if (!fixture.empty()) fs::copy(fixture, dir.path, fs::copy_options::recursive);
    if (row.prepare) row.prepare(dir.path);
    auto before = snapshot(dir.path);
    Outcome o = run_command(dir.path, row.args, row.stdin_text);
    check_error_line(o, row.error);
    CHECK(snapshot(dir.path) == before);  // nothing kept changed, no partial file left
  }
}

// A small, fast training setup whose outputs stay in the run's folder.
json tiny_config() {
  return json::parse(R"({"data": {"task": "dates", "size": 64}, "lang_src": "en", "lang_tgt": "iso",
    "num_epochs": 1, "batch_size": 16, "seq_len": 32, "d_model": 16, "N": 1, "h": 2, "d_ff": 32,
    "dropout": 0.0, "min_frequency": 1, "val_examples": 0, "keep_checkpoints": 1,
    "model_folder": "weights", "experiment_name": "run", "tokenizer_file": "tok_{0}.json"})");
}

// A folder holding config.json, the two tokenizers and epoch 00's checkpoint,
// trained once for the whole suite.
const fs::path& trained_fixture() {
  static sf::testing::TempDir dir;
  static bool trained = false;
  if (!trained) {
    write_file(dir.path / "config.json", tiny_config().dump());
    REQUIRE(run_command(dir.path, {"train", "--config", "config.json"}, "").status == 0);
    REQUIRE(fs::exists(dir.path / "weights/tmodel_00.state.json"));
    fs::remove_all(dir.path / "run");  // the run's report and metrics play no part here
    trained = true;
  }
  return dir.path;
}

const std::vector<std::string> kTrain = {"train", "--config", "config.json"};

// --- damaging files -----------------------------------------------------------

std::function<void(const fs::path&)> write_text(const std::string& name, const std::string& text) {
  return [=](const fs::path& dir) { write_file(dir / name, text); };
}

std::function<void(const fs::path&)> edit_text(const std::string& name,
                                               std::function<std::string(std::string)> edit) {
  return [=](const fs::path& dir) { write_file(dir / name, edit(read_file(dir / name))); };
}

std::function<void(const fs::path&)> edit_json(const std::string& name, std::function<void(json&)> edit) {
  return [=](const fs::path& dir) {
    json j = json::parse(read_file(dir / name));
    edit(j);
    write_file(dir / name, j.dump());
  };
}

// A safetensors file: 8-byte header length, JSON header, data.
struct Safetensors {
  json header;
  std::string data;
};

Safetensors read_safetensors(const fs::path& path) {
  std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

void write_safetensors(const fs::path& path, const Safetensors& f) {
  std::string header = f.header.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  uint64_t n = header.size();
  write_file(path, std::string(reinterpret_cast<const char*>(&n), 8) + header + f.data);
}

std::function<void(const fs::path&)> edit_safetensors(const std::string& name,
                                                      std::function<void(Safetensors&)> edit) {
  return [=](const fs::path& dir) {
    Safetensors f = read_safetensors(dir / name);
    edit(f);
    write_safetensors(dir / name, f);
  };
}

// The tensor whose data comes first in the file (the header's own key order
// is alphabetical once parsed).
std::string first_tensor(const json& header) {
  std::string first;
  uint64_t lowest = UINT64_MAX;
  for (const auto& [name, entry] : header.items())
    if (name != "__metadata__" && entry["data_offsets"][0].get<uint64_t>() < lowest) {
      lowest = entry["data_offsets"][0].get<uint64_t>();
      first = name;
    }
  return first;
}

}  // namespace

TEST_CASE("bad input: config files") {
  auto row = [](std::string input, std::string text, std::string error) {
    return Row{input, write_text("config.json", text), kTrain, error};
  };
  // Keys that need data and a model to check are given a tiny one.
  auto tiny = [](json changes) {
    json c = tiny_config();
    c.merge_patch(changes);
    return c.dump();
  };
  check_table("", {
      row("an empty file", "",
          "config.json:1: malformed JSON: syntax error while parsing value - unexpected end of input; expected "
          "'[', '{', or a literal"),
      row("a trailing comma", R"({"lr": 0.1,})",
          "config.json:1: malformed JSON: syntax error while parsing object key - unexpected '}'; expected "
          "string literal"),
      row("a missing colon on line 3", "{\n \"lr\": 0.1,\n \"seed\" 3\n}",
          "config.json:3: malformed JSON: syntax error while parsing object separator - unexpected number "
          "literal; expected ':'"),
      row("NaN", R"({"lr": NaN})",
          "config.json:1: malformed JSON: syntax error while parsing value - invalid literal; last read: "
          "'\"lr\": N'"),
      row("an array", "[1, 2]", "config.json: must be a JSON object"),
      row("N = 1000000", R"({"N": 1000000})", "config.json: key 'N': must be <= 1024, got 1000000"),
      row("d_ff = 2^40", R"({"d_ff": 1099511627776})", "config.json: key 'd_ff': must be <= 1048576, got 1099511627776"),
      row("seq_len = 2^40", R"({"seq_len": 1099511627776})",
          "config.json: key 'seq_len': must be <= 65536, got 1099511627776"),
      row("threads = 100000", R"({"threads": 100000})", "config.json: key 'threads': must be <= 1024, got 100000"),
      row("lr = 1e39 (past float)", R"({"lr": 1e39})", "config.json: key 'lr': is beyond the range of a float, got 1e+39"),
      row("lr = 1e999 (past double)", R"({"lr": 1e999})", "config.json: number overflow parsing '1e999'"),
      row("seed = 2^64 - 1", R"({"seed": 18446744073709551615})",
          "config.json: key 'seed': must be <= 9223372036854775807, got 18446744073709551615"),
      row("a tokenizer_file without {0}", R"({"tokenizer_file": "tok.json"})",
          "config.json: key 'tokenizer_file': must contain {0} (replaced by the language: one file per language), "
          "got \"tok.json\""),
      row("a model_basename with a folder", R"({"model_basename": "sub/m_"})",
          "config.json: key 'model_basename': must be a file name prefix, not a path (the folder is model_folder), "
          "got \"sub/m_\""),
      row("a model_folder that is a file", tiny({{"model_folder", "config.json"}}),
          "config.json: key 'model_folder': cannot create the folder config.json (a file of that name exists)"),
      row("a model too large for memory", tiny({{"d_model", 65536}, {"h", 1}, {"N", 1024}, {"d_ff", 65536}}),
          "config.json: training this model needs about..."),
      row("100000 nested arrays", std::string(100000, '[') + std::string(100000, ']'),
          "config.json: must be a JSON object"),
      row("an unknown key", R"({"batchsize": 4})", "config.json: key 'batchsize': unknown key"),
      row("an unknown nested key", R"({"data": {"task": "dates", "colour": 1}})",
          "config.json: key 'data.colour': unknown key"),
      row("an unknown optimizer key", R"({"optimizer": {"lr": 1}})",
          "config.json: key 'optimizer.lr': unknown key"),
      row("an integer as a string", R"({"batch_size": "8"})",
          "config.json: key 'batch_size': expected an integer, got string \"8\""),
      row("a float for an integer", R"({"batch_size": 8.5})",
          "config.json: key 'batch_size': expected an integer, got number 8.5"),
      row("a boolean for an integer", R"({"batch_size": true})",
          "config.json: key 'batch_size': expected an integer, got boolean true"),
      row("99999999999999999999", R"({"batch_size": 99999999999999999999})",
          "config.json: key 'batch_size': expected an integer, got number 1e+20"),
      row("batch_size 0", R"({"batch_size": 0})", "config.json: key 'batch_size': must be >= 1, got 0"),
      row("num_epochs -1", R"({"num_epochs": -1})", "config.json: key 'num_epochs': must be >= 0, got -1"),
      row("lr 0", R"({"lr": 0})", "config.json: key 'lr': must be > 0, got 0"),
      row("lr as a string", R"({"lr": "0.1"})", "config.json: key 'lr': expected a number, got string \"0.1\""),
      row("seq_len 2", R"({"seq_len": 2})", "config.json: key 'seq_len': must be >= 3, got 2"),
      row("h 0", R"({"h": 0})", "config.json: key 'h': must be >= 1, got 0"),
      row("d_model not divisible by h", R"({"d_model": 30, "h": 4})",
          "config.json: key 'd_model': must be divisible by h (30 % 4 != 0)"),
      row("d_model 1e9 written as a float", R"({"d_model": 1e9})",
          "config.json: key 'd_model': expected an integer, got number 1000000000.0"),
      row("a negative seed", R"({"seed": -5})", "config.json: key 'seed': must be >= 0, got -5"),
      row("dropout 1", R"({"dropout": 1.0})", "config.json: key 'dropout': must be in [0, 1), got 1.0"),
      row("label_smoothing 2", R"({"label_smoothing": 2})",
          "config.json: key 'label_smoothing': must be in [0, 1], got 2"),
      row("norm middle", R"({"norm": "middle"})",
          "config.json: key 'norm': must be one of \"pre\", \"post\", got \"middle\""),
      row("tie_embeddings as a string", R"({"tie_embeddings": "yes"})",
          "config.json: key 'tie_embeddings': expected true or false, got string \"yes\""),
      row("tie_embeddings with two vocabularies", R"({"tie_embeddings": true})",
          "config.json: key 'tie_embeddings': needs shared_vocab: true (one vocabulary for both languages, "
          "tokenizer \"bpe\")"),
      row("the same language twice", R"({"lang_src": "en", "lang_tgt": "en"})",
          "config.json: key 'lang_tgt': must differ from lang_src (\"en\")"),
      row("an empty data object", R"({"data": {}})",
          "config.json: key 'data.': needs exactly one of \"task\" (a built-in task) or \"train\" (a file)"),
      row("an unknown task", R"({"data": {"task": "poems"}})",
          "config.json: key 'data.task': must be one of \"copy\", \"reverse\", \"dates\", \"numbers\", "
          "\"grammar\", got \"poems\""),
      row("data.size 0", R"({"data": {"task": "dates", "size": 0}})",
          "config.json: key 'data.size': must be >= 1, got 0"),
      row("format csv", R"({"data": {"train": "x.tsv", "format": "csv"}})",
          "config.json: key 'data.format': must be one of \"tsv\", \"jsonl\", got \"csv\""),
      row("an unknown optimizer", R"({"optimizer": {"name": "rmsprop"}})",
          "config.json: key 'optimizer.name': must be one of \"adam\", \"adamw\", \"sgd\", got \"rmsprop\""),
      row("one beta", R"({"optimizer": {"betas": [0.9]}})",
          "config.json: key 'optimizer.betas': expected an array of two numbers, got array [0.9]"),
      row("nesterov without momentum", R"({"optimizer": {"name": "sgd", "nesterov": true}})",
          "config.json: key 'optimizer.nesterov': needs momentum > 0"),
      row("an unknown tokenizer", R"({"tokenizer": "char"})",
          "config.json: key 'tokenizer': must be one of \"word\", \"bpe\", got \"char\""),
      row("vocab_size with the word tokenizer", R"({"vocab_size": 8000})",
          "config.json: key 'vocab_size': applies to tokenizer \"bpe\" only (the word tokenizer keeps every word "
          "seen min_frequency times)"),
      row("shared_vocab with the word tokenizer", R"({"tokenizer": "word", "shared_vocab": true})",
          "config.json: key 'shared_vocab': applies to tokenizer \"bpe\" only (the word tokenizer keeps every word "
          "seen min_frequency times)"),
      row("vocab_size 4", R"({"tokenizer": "bpe", "vocab_size": 4})",
          "config.json: key 'vocab_size': must be >= 5, got 4"),
      row("shared_vocab a string", R"({"tokenizer": "bpe", "shared_vocab": "yes"})",
          "config.json: key 'shared_vocab': expected true or false, got string \"yes\""),
      row("noam without warmup", R"({"schedule": "noam", "warmup_steps": 0})",
          "config.json: key 'warmup_steps': must be >= 1 for schedule \"noam\""),
      row("clip_grad_norm 0", R"({"clip_grad_norm": 0})",
          "config.json: key 'clip_grad_norm': expected null or a number > 0, got number 0"),
      row("an unknown device", R"({"device": "gpu"})",
          "config.json: key 'device': must be one of \"cpu\", \"opencl\", got \"gpu\""),
      row("preload a number", R"({"preload": 5})",
          "config.json: key 'preload': expected null, \"latest\" or a checkpoint path, got number 5"),
      row("an empty experiment_name", R"({"experiment_name": ""})",
          "config.json: key 'experiment_name': must not be empty"),
      row("a one-pair task", tiny({{"data", {{"size", 1}}}}), "config.json: no training pairs"),
      Row{"a missing config file", nullptr, {"train", "--config", "nope.json"},
          "nope.json: cannot open the config file"},
  });
}

TEST_CASE("bad input: --set and command-line arguments") {
  auto with_config = write_text("config.json", tiny_config().dump());
  auto row = [&](std::string input, std::vector<std::string> args, std::string error) {
    return Row{input, with_config, args, error};
  };
  auto set = [&](std::string assignment, std::string error) {
    return row("--set " + assignment, {"train", "--config", "config.json", "--set", assignment}, error);
  };
  check_table("", {
      row("no subcommand", {}, "no subcommand (try --help)"),
      row("an unknown subcommand", {"trian"}, "unknown subcommand 'trian' (try --help)"),
      row("no --config", {"train"}, "train: --config FILE is required"),
      row("--config without a value", {"train", "--config"}, "train: --config needs a value"),
      row("an unknown option", {"train", "--config", "config.json", "--bogus", "1"}, "train: unknown option --bogus"),
      row("another command's option", {"train", "--config", "config.json", "--beam", "2"},
          "train: unknown option --beam"),
      row("a stray argument", {"train", "--config", "config.json", "extra"}, "train: unexpected argument 'extra'"),
      row("--set without a value", {"train", "--config", "config.json", "--set"}, "train: --set needs a value"),
      set("lr", "config.json: --set 'lr': expected key=value"),
      set("=5", "config.json: --set '=5': expected key=value"),
      set("lr=", "config.json: key 'lr': expected a number, got string \"\""),
      set("learning_rate=1", "config.json: key 'learning_rate': unknown key"),
      set("data.task.x=1", "config.json: --set data.task.x: 'data.task.' is not an object"),
      set("batch_size=5abc", "config.json: key 'batch_size': expected an integer, got string \"5abc\""),
      set("seed=99999999999999999999", "config.json: key 'seed': expected an integer, got number 1e+20"),
      set("optimizer.name=rmsprop",
          "config.json: key 'optimizer.name': must be one of \"adam\", \"adamw\", \"sgd\", got \"rmsprop\""),
      row("--beam 0", {"translate", "--config", "config.json", "--beam", "0", "x"},
          "translate: --beam needs an integer in [1, 1024], got '0'"),
      row("--beam abc", {"translate", "--config", "config.json", "--beam", "abc", "x"},
          "translate: --beam needs an integer in [1, 1024], got 'abc'"),
      row("--beam 1e9", {"translate", "--config", "config.json", "--beam", "1e9", "x"},
          "translate: --beam needs an integer in [1, 1024], got '1e9'"),
      row("--beam past 64 bits", {"translate", "--config", "config.json", "--beam", "99999999999999999999", "x"},
          "translate: --beam needs an integer in [1, 1024], got '99999999999999999999'"),
      row("--beam twice", {"translate", "--config", "config.json", "--beam", "2", "--beam", "3", "x"},
          "translate: --beam is given twice"),
      set(".lr=1", "config.json: --set '.lr=1': the key has an empty part"),
      row("eval without --data", {"eval", "--config", "config.json"}, "eval: --data FILE.tsv is required"),
      row("a stray argument to score", {"score", "--config", "config.json", "extra"},
          "score: unexpected argument 'extra'"),
  });
}

TEST_CASE("bad input: tokenizer files") {
  const std::vector<std::string> translate = {"translate", "--config", "config.json", "march 3 , 2001"};
  auto row = [&](std::string input, std::function<void(json&)> edit, std::string error) {
    return Row{input, edit_json("tok_en.json", edit), translate, error};
  };
  auto text = [&](std::string input, std::function<std::string(std::string)> edit, std::string error) {
    return Row{input, edit_text("tok_en.json", edit), translate, error};
  };
  check_table(trained_fixture(), {
      text("truncated", [](std::string t) { return t.substr(0, t.size() / 2); }, "tok_en.json: not valid JSON"),
      text("empty", [](std::string) { return ""; }, "tok_en.json: not valid JSON"),
      text("an array", [](std::string) { return "[]"; }, "tok_en.json: not a tokenizer (expected a JSON object)"),
      row("a Unigram model", [](json& t) { t["model"]["type"] = "Unigram"; },
          "tok_en.json: tokenizer model \"Unigram\" is not supported (only WordLevel and BPE)"),
      row("a WordLevel file marked BPE", [](json& t) { t["model"]["type"] = "BPE"; },
          "tok_en.json: pre_tokenizer Whitespace is not supported (only the Split of Python's \\w+|[^\\w\\s]+ "
          "that we write)"),
      row("no model", [](json& t) { t.erase("model"); },
          "tok_en.json: tokenizer model \"\" is not supported (only WordLevel and BPE)"),
      row("another pre-tokenizer", [](json& t) { t["pre_tokenizer"] = {{"type", "BertPreTokenizer"}}; },
          "tok_en.json: pre_tokenizer {\"type\":\"BertPreTokenizer\"} is not supported (only {\"type\": "
          "\"Whitespace\"})"),
      row("a normalizer", [](json& t) { t["normalizer"] = {{"type", "Lowercase"}}; },
          "tok_en.json: \"normalizer\" must be null"),
      row("an empty vocabulary", [](json& t) { t["model"]["vocab"] = json::object(); },
          "tok_en.json: model.vocab must be a non-empty object"),
      row("[PAD] and [SOS] swapped", [](json& t) {
            t["model"]["vocab"]["[PAD]"] = 2;
            t["model"]["vocab"]["[SOS]"] = 1;
          }, "tok_en.json: expected [PAD] at id 1"),
      row("an id used twice", [](json& t) { t["model"]["vocab"]["march"] = 4; },
          "tok_en.json: vocabulary ids must be 0..116 each once; \"march\" has 4"),
      row("an id of 2^40", [](json& t) { t["model"]["vocab"]["march"] = int64_t(1) << 40; },
          "tok_en.json: vocabulary ids must be 0..116 each once; \"march\" has 1099511627776"),
      row("a negative id", [](json& t) { t["model"]["vocab"]["march"] = -1; },
          "tok_en.json: vocabulary ids must be 0..116 each once; \"march\" has -1"),
      row("another unk_token", [](json& t) { t["model"]["unk_token"] = "<unk>"; },
          "tok_en.json: model.unk_token must be \"[UNK]\""),
      row("an added token beyond the specials",
          [](json& t) { t["added_tokens"].push_back({{"id", 4}, {"content", "<x>"}}); },
          "tok_en.json: added token \"<x>\" (id 4) is not supported (only the four specials)"),
      row("one word more than the checkpoint's vocabulary", [](json& t) {
            t["model"]["vocab"]["zzz"] = t["model"]["vocab"].size();
          }, "tok_en.json: is not the source tokenizer weights/tmodel_00.safetensors was trained with ..."),
      Row{"a missing file", [](const fs::path& d) { fs::remove(d / "tok_iso.json"); }, translate,
          "tok_iso.json: cannot open tokenizer file"},
  });
}

TEST_CASE("bad input: checkpoint (safetensors) files") {
  const std::string weights = "weights/tmodel_00.safetensors";
  const std::vector<std::string> translate = {"translate", "--config", "config.json", "march 3 , 2001"};
  auto bytes = [&](std::string input, std::function<std::string(std::string)> edit, std::string error) {
    return Row{input, edit_text(weights, edit), translate, weights + ": " + error};
  };
  auto header = [&](std::string input, std::function<void(Safetensors&)> edit, std::string error) {
    return Row{input, edit_safetensors(weights, edit), translate, weights + ": " + error};
  };
  auto entry = [&](std::string input, std::function<void(json&)> edit, std::string error) {
    return header(input, [=](Safetensors& f) { edit(f.header[first_tensor(f.header)]); },
                  "tensor 'encoder.layers.0.self_attention_block.w_q.weight': " + error);
  };
  auto metadata = [&](std::string key, std::string value, std::string error) {
    return header("metadata " + key + " = " + value, [=](Safetensors& f) { f.header["__metadata__"][key] = value; },
                  error);
  };
  auto length = [](uint64_t n) { return std::string(reinterpret_cast<const char*>(&n), 8); };
  check_table(trained_fixture(), {
      bytes("empty", [](std::string) { return ""; }, "0 bytes is too short for a safetensors file"),
      bytes("7 bytes", [](std::string s) { return s.substr(0, 7); }, "7 bytes is too short for a safetensors file"),
      bytes("cut inside the header", [](std::string s) { return s.substr(0, 40); },
            "header length 5808 does not fit the file (40 bytes): not a safetensors file, or truncated"),
      bytes("one byte short", [](std::string s) { return s.substr(0, s.size() - 1); },
            "tensor 'projection_layer.proj.bias': data_offsets ..."),
      bytes("one byte too many", [](std::string s) { return s + '\0'; }, "the tensors hold ..."),
      bytes("header length 2^63", [&](std::string s) { return length(uint64_t(1) << 63) + s.substr(8); },
            "header length 9223372036854775808 does not fit the file ..."),
      bytes("a text file", [](std::string) { return "this is not a checkpoint\n"; },
            "header length 2338328219631577204 does not fit the file (25 bytes): not a safetensors file, or "
            "truncated"),
      header("a header that is an array", [](Safetensors& f) { f.header = json::array(); },
             "the header is not a JSON object"),
      header("metadata that is an array", [](Safetensors& f) { f.header["__metadata__"] = json::array({"x"}); },
             "__metadata__ is not a JSON object"),
      header("a metadata number", [](Safetensors& f) { f.header["__metadata__"]["N"] = 1; },
             "__metadata__ value of 'N' is not a string"),
      entry("dtype F16", [](json& e) { e["dtype"] = "F16"; }, "dtype \"F16\" is not supported (F32, I32 or BF16)"),
      entry("no dtype", [](json& e) { e.erase("dtype"); }, "needs dtype, shape and data_offsets"),
      entry("a negative size", [](json& e) { e["shape"] = {-1, 16}; },
            "shape [-1,16] holds a non-integer or negative size"),
      entry("a shape of 2^62 x 2^62", [](json& e) { e["shape"] = {uint64_t(1) << 62, uint64_t(1) << 62}; },
            "shape [4611686018427387904,4611686018427387904] is larger than the whole file"),
      entry("offsets past the end", [](json& e) { e["data_offsets"][1] = 1000000000; },
            "data_offsets [0,1000000000] go past the end ..."),
      entry("three offsets", [](json& e) { e["data_offsets"] = {0, 4, 8}; },
            "data_offsets [0,4,8] is not a pair of non-negative integers"),
      entry("an unknown field", [](json& e) { e["extra"] = 1; }, "unexpected field 'extra'"),
      header("a missing tensor", [](Safetensors& f) {
               uint64_t begin = f.header["projection_layer.proj.bias"]["data_offsets"][0];
               f.header.erase("projection_layer.proj.bias");
               f.data.resize(begin);
             }, "tensor 'projection_layer.proj.bias' is missing"),
      header("an extra tensor", [](Safetensors& f) {
               uint64_t end = f.data.size();
               f.header["zz.extra"] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {end, end + 4}}};
               f.data += std::string(4, '\0');
             }, "unexpected tensor 'zz.extra' (not in the model)"),
      metadata("N", "abc", "__metadata__ 'N' is \"abc\", not a positive integer"),
      metadata("N", "5abc", "__metadata__ 'N' is \"5abc\", not a positive integer"),
      metadata("N", "-2", "__metadata__ 'N' is \"-2\", not a positive integer"),
      metadata("N", "99999999999999999999", "__metadata__ 'N' is \"99999999999999999999\", not a positive integer"),
      Row{"metadata seq_len = 8", edit_safetensors(weights, [](Safetensors& f) { f.header["__metadata__"]["seq_len"] = "8"; }),
          translate, "config.json: key 'seq_len' is 32, but " + weights + " was trained with seq_len 8"},
      Row{"translate --set d_model=32 with a d_model 16 checkpoint", nullptr,
          {"translate", "--config", "config.json", "--set", "d_model=32", "march 3 , 2001"},
          "config.json: key 'd_model' is 32, but " + weights + " was trained with d_model 16"},
      Row{"score --set h=4 with an h 2 checkpoint", nullptr, {"score", "--config", "config.json", "--set", "h=4"},
          "config.json: key 'h' is 4, but " + weights + " was trained with h 2"},
      header("no N in the metadata", [](Safetensors& f) { f.header["__metadata__"].erase("N"); },
             "__metadata__ has no 'N'"),
      Row{"a missing --checkpoint", nullptr, {"translate", "--config", "config.json", "--checkpoint", "nope", "x"},
          "nope: cannot open for reading"},
      Row{"a folder as --checkpoint", nullptr, {"translate", "--config", "config.json", "--checkpoint", "weights", "x"},
          "weights: cannot read: Is a directory"},
      Row{"preload of a truncated file", edit_text(weights, [](std::string s) { return s.substr(0, 100); }),
          {"train", "--config", "config.json", "--set", "preload=" + weights},
          weights + ": header length 5808 does not fit the file (100 bytes): not a safetensors file, or truncated"},
      Row{"resuming with another d_model", nullptr,
          {"train", "--config", "config.json", "--set", "preload=latest", "--set", "d_model=32"},
          "config.json: key 'd_model' is 32, but " + weights + " was trained with d_model 16"},
  });
}

TEST_CASE("bad input: export") {
  auto exporting = [](std::vector<std::string> options) {
    std::vector<std::string> args = {"export", "--config", "config.json"};
    args.insert(args.end(), options.begin(), options.end());
    return args;
  };
  auto remove_checkpoint = [](const fs::path& dir) {
    for (const char* suffix : {".safetensors", ".optim.safetensors", ".state.json"})
      fs::remove(dir / (std::string("weights/tmodel_00") + suffix));
  };
  check_table(trained_fixture(), {
      Row{"no --out", nullptr, exporting({}), "export: --out PATH is required"},
      Row{"--dtype f16", nullptr, exporting({"--out", "m.safetensors", "--dtype", "f16"}),
          "export: --dtype needs bf16 or fp32, got 'f16'"},
      Row{"no checkpoint to export", remove_checkpoint, exporting({"--out", "m.safetensors"}),
          "weights: no complete checkpoint 'tmodel_NN' here (train first, or pass --checkpoint)"},
      Row{"--out the checkpoint exported", nullptr,
          exporting({"--checkpoint", "weights/tmodel_00.safetensors", "--out", "./weights/tmodel_00.safetensors"}),
          "export: --out ./weights/tmodel_00.safetensors is a checkpoint it reads; write to another file"},
      Row{"--out over the run's optimizer file", nullptr, exporting({"--out", "weights/tmodel_00.optim.safetensors"}),
          "export: --out weights/tmodel_00.optim.safetensors is in model_folder and starts with model_basename "
          "'tmodel_', as the run's checkpoint files do; write it elsewhere"},
      Row{"--out a new name under model_basename", nullptr, exporting({"--out", "weights/tmodel_bf16.safetensors"}),
          "export: --out weights/tmodel_bf16.safetensors is in model_folder and starts with model_basename "
          "'tmodel_', as the run's checkpoint files do; write it elsewhere"},
      Row{"--out in a missing folder", nullptr, exporting({"--out", "nope/m.safetensors"}),
          "nope/m.safetensors: cannot write (No such file or directory)"},
      Row{"--format xml", nullptr, exporting({"--out", "m.xml", "--format", "xml"}),
          "export: --format needs safetensors or onnx, got 'xml'"},
      Row{"--format onnx with --dtype", nullptr, exporting({"--out", "m", "--format", "onnx", "--dtype", "fp32"}),
          "export: --dtype is for safetensors; --format onnx writes float32"},
      Row{"--format onnx into a file", nullptr, exporting({"--out", "config.json", "--format", "onnx"}),
          "config.json: exists and is not a folder; export --format onnx writes a new folder"},
      Row{"--dtype to translate", nullptr, {"translate", "--config", "config.json", "--dtype", "bf16", "x"},
          "translate: unknown option --dtype"},
      Row{"--tokens to eval", nullptr, {"eval", "--config", "config.json", "--tokens", "--data", "x.tsv"},
          "eval: unknown option --tokens"},
  });
}

TEST_CASE("bad input: average") {
  auto averaging = [](std::vector<std::string> options) {
    std::vector<std::string> args = {"average", "--config", "config.json"};
    args.insert(args.end(), options.begin(), options.end());
    return args;
  };
  const std::string epoch0 = "weights/tmodel_00.safetensors";
  check_table(trained_fixture(), {
      Row{"no --out", nullptr, averaging({"--last", "1"}), "average: --out PATH is required"},
      Row{"neither --last nor checkpoints", nullptr, averaging({"--out", "m.safetensors"}),
          "average: --last K or the checkpoints to average is required"},
      Row{"both --last and checkpoints", nullptr, averaging({"--last", "1", "--out", "m.safetensors", epoch0}),
          "average: --last K or checkpoints to average, not both"},
      Row{"--last 0", nullptr, averaging({"--last", "0", "--out", "m.safetensors"}),
          "average: --last needs an integer >= 1, got '0'"},
      Row{"--last beyond the epochs saved", nullptr, averaging({"--last", "3", "--out", "m.safetensors"}),
          "config.json: --last 3: model_folder weights has 1 complete epoch checkpoint"},
      Row{"--out a checkpoint averaged", nullptr, averaging({"--out", "./" + epoch0, epoch0, epoch0}),
          "average: --out ./" + epoch0 + " is a checkpoint it reads; write to another file"},
      Row{"a missing checkpoint", nullptr, averaging({"--out", "m.safetensors", epoch0, "nope.safetensors"}),
          "nope.safetensors: cannot open for reading"},
  });
}

TEST_CASE("bad input: optimizer and training-state files") {
  const std::string optim = "weights/tmodel_00.optim.safetensors", state = "weights/tmodel_00.state.json";
  const std::vector<std::string> resume = {"train", "--config", "config.json", "--set", "preload=latest",
                                           "--set", "num_epochs=2"};
  auto step = [&](std::string value, std::string error) {
    return Row{"step = \"" + value + "\"",
               edit_safetensors(optim, [=](Safetensors& f) { f.header["__metadata__"]["step"] = value; }), resume,
               optim + ": " + error};
  };
  auto state_row = [&](std::string input, std::function<void(json&)> edit, std::string error) {
    return Row{input, edit_json(state, edit), resume, state + ": " + error};
  };
  check_table(trained_fixture(), {
      Row{"a truncated optimizer file", edit_text(optim, [](std::string s) { return s.substr(0, s.size() / 2); }),
          resume, optim + ": tensor '..."},
      Row{"the weights in place of the optimizer state",
          [&](const fs::path& d) { fs::copy_file(d / "weights/tmodel_00.safetensors", d / optim,
                                                  fs::copy_options::overwrite_existing); },
          resume, optim + ": optimizer state is for '?', not 'adam'"},
      step("99999999999999999999", "__metadata__ 'step' is \"99999999999999999999\", not an integer >= 0"),
      step("", "__metadata__ 'step' is \"\", not an integer >= 0"),
      Row{"no step count", edit_safetensors(optim, [](Safetensors& f) { f.header["__metadata__"].erase("step"); }),
          resume, optim + ": optimizer state has no step count"},
      Row{"an SGD state for Adam",
          edit_safetensors(optim, [](Safetensors& f) { f.header["__metadata__"]["optimizer"] = "sgd"; }), resume,
          optim + ": optimizer state is for 'sgd', not 'adam'"},
      Row{"an Adam state for SGD", nullptr, [&] {
            auto args = resume;
            args.insert(args.end(), {"--set", "optimizer.name=sgd"});
            return args;
          }(), optim + ": optimizer state is for 'adam', not 'sgd'"},
      Row{"a state file that is not JSON", write_text(state, "{epoch"), resume, state + ": malformed JSON"},
      Row{"an empty state file", write_text(state, ""), resume, state + ": malformed JSON"},
      state_row("epoch -1", [](json& s) { s["epoch"] = -1; }, "training state field 'epoch' must be an integer >= 0, got -1"),
      state_row("batch beyond the epoch", [](json& s) { s["batch"] = s["batches_in_epoch"].get<int64_t>() + 1; },
                "training state field 'batch' must be <= batches_in_epoch (4), got 5"),
      state_row("global_step -1", [](json& s) { s["global_step"] = -1; },
                "training state field 'global_step' must be an integer >= 0, got -1"),
      state_row("a one-word RNG state", [](json& s) { s["dropout_rng"] = {1}; },
                "training state field 'dropout_rng' must be 4 unsigned 64-bit integers, got [1]"),
  });
}

TEST_CASE("bad input: corpora") {
  // A training run on a TSV (or JSONL) file holding `text`.
  auto train = [](std::string input, std::string text, std::string error, std::string format = "tsv") {
    std::string name = format == "tsv" ? "train.tsv" : "train.jsonl";
    json config = tiny_config();
    config["data"] = {{"train", name}, {"format", format}};
    config["lang_tgt"] = "de";
    return Row{input, [=](const fs::path& d) {
                 write_file(d / "config.json", config.dump());
                 write_file(d / name, text);
               }, {"train", "--config", "config.json"}, error};
  };
  const std::string good = "a b\tc d\ne f\tg h\n";
  check_table("", {
      train("an empty file", "", "train.tsv: no training pairs"),
      train("blank lines only", "\n \n\t\n", "train.tsv: no training pairs"),
      train("no TAB on line 2", "a\tb\nno tab here\n", "train.tsv:2: no TAB (expected source<TAB>target)"),
      train("two TABs on line 3", good + "e\tf\tg\n", "train.tsv:3: more than one TAB (expected source<TAB>target)"),
      train("an empty source", "a\tb\n\tonly target\n", "train.tsv:2: empty source sentence"),
      train("an empty target", "a\tb\nonly source\t \n", "train.tsv:2: empty target sentence"),
      train("invalid UTF-8 on line 3", good + "\xff\xfe\tx\n", "train.tsv:3: invalid UTF-8 at byte 1 of the line"),
      train("an overlong UTF-8 '/'", "a\tb\n\xc0\xaf\tx\n", "train.tsv:2: invalid UTF-8 at byte 1 of the line"),
      train("a UTF-16 surrogate", "a\tb\n\xed\xa0\x80\tx\n", "train.tsv:2: invalid UTF-8 at byte 1 of the line"),
      train("JSONL: not JSON", "{\"translation\": {\"en\": \"a\", \"de\": \"b\"}}\nnot json\n",
            "train.jsonl:2: bad JSON", "jsonl"),
      train("JSONL: no translation object", "{\"translations\": {\"en\": \"a\", \"de\": \"b\"}}\n",
            "train.jsonl:1: expected {\"translation\": {\"en\": ..., \"de\": ...}}", "jsonl"),
      train("JSONL: a language missing", "{\"translation\": {\"en\": \"a\", \"fr\": \"b\"}}\n",
            "train.jsonl:1: no \"de\" key in \"translation\"", "jsonl"),
      train("JSONL: a number for a sentence", "{\"translation\": {\"en\": \"a\", \"de\": 5}}\n",
            "train.jsonl:1: \"de\" is not a string", "jsonl"),
      Row{"a missing training file", write_text("config.json", [] {
            json c = tiny_config();
            c["data"] = {{"train", "train.tsv"}};
            return c.dump();
          }()), {"train", "--config", "config.json"}, "train.tsv: cannot open"},
  });
  // eval, score and translate read their sentences from a file or stdin.
  auto command = [](std::string input, std::vector<std::string> args, std::string error, std::string in = "",
                    std::function<void(const fs::path&)> prepare = nullptr) {
    args.insert(args.begin() + 1, {"--config", "config.json"});
    return Row{input, prepare, args, error, in};
  };
  std::string long_sentence;
  for (int i = 0; i < 200; ++i) long_sentence += "march ";
  check_table(trained_fixture(), {
      command("eval: no TAB", {"eval", "--data", "e.tsv"}, "e.tsv:1: no TAB (expected source<TAB>target)", "",
              write_text("e.tsv", "march 3 , 2001\n")),
      command("eval: invalid UTF-8", {"eval", "--data", "e.tsv"}, "e.tsv:2: invalid UTF-8 at byte 1 of the line",
              "", write_text("e.tsv", "a\tb\n\xff\tb\n")),
      command("score: no TAB", {"score"}, "<stdin>:1: no TAB (expected source<TAB>target)", "march 3\n"),
      command("score: two TABs", {"score"}, "<stdin>:1: more than one TAB (expected source<TAB>target)", "a\tb\tc\n"),
      command("score: a source longer than seq_len", {"score"},
              "<stdin>:1: the source has 200 tokens, more than seq_len - 2 = 30", long_sentence + "\t2001\n"),
      command("score: a target longer than seq_len", {"score"},
              "<stdin>:1: the target has 200 tokens, more than seq_len - 1 = 31", "march\t" + long_sentence + "\n"),
      command("translate: a sentence longer than seq_len", {"translate"},
              "input sentence 3: the sentence has 200 tokens, more than seq_len - 2 = 30",
              "march\nmarch\n" + long_sentence + "\n"),
  });
}
