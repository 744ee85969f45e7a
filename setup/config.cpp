#include "config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "autograd/device.h"
#include "autograd/kernels/gemm.h"
#include "base/error.h"
#include "data/framing.h"
#include "nn/layers.h"
#include "data/unicode.h"

namespace sf::setup {

using nlohmann::json;

namespace {

// Reads the keys of one JSON object into fields, checking each key's type and
// range, and at the end that no key was left unread (an unknown key).
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string source, std::string prefix)
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {
    if (!object_.is_object()) error("", "must be a JSON object");
  }

  [[noreturn]] void error(const std::string& key, const std::string& what) const {
    std::string name = prefix_ + key;
    if (name.empty()) fail(source_, ": ", what);
    fail(source_, ": key '", name, "': ", what);
  }

  const json* find(const std::string& key) {
    seen_.insert(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  // Integers: a JSON integer (not 2.5, not "2") in [min, max]. JSON has no
  // integer limit: one beyond 64 bits parses as a float and is refused here.
  void integer(const std::string& key, int64_t& out, int64_t min, int64_t max = INT64_MAX) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_number_integer()) error(key, "expected an integer, got " + describe(*v));
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max))
      error(key, "must be <= " + std::to_string(max) + ", got " + text_of(*v));
    out = v->get<int64_t>();
    if (out < min) error(key, "must be >= " + std::to_string(min) + ", got " + text_of(*v));
    if (out > max) error(key, "must be <= " + std::to_string(max) + ", got " + text_of(*v));
  }

  // Numbers: any JSON number, integers included. `check` says what is wrong or "".
  template <class Check>
  void number(const std::string& key, float& out, Check check) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_number()) error(key, "expected a number, got " + describe(*v));
    out = v->get<float>();
    if (!std::isfinite(out)) error(key, "is beyond the range of a float, got " + text_of(*v));
    if (std::string problem = check(out); !problem.empty()) error(key, problem + ", got " + text_of(*v));
  }

  void boolean(const std::string& key, bool& out) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_boolean()) error(key, "expected true or false, got " + describe(*v));
    out = v->get<bool>();
  }

  void string(const std::string& key, std::string& out, const std::vector<std::string>& allowed = {}) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_string()) error(key, "expected a string, got " + describe(*v));
    out = v->get<std::string>();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), out) == allowed.end()) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + ("\"" + a + "\"");
      error(key, "must be one of " + list + ", got \"" + out + "\"");
    }
    if (allowed.empty() && out.empty()) error(key, "must not be empty");
  }

  void finish() const {
    for (auto it = object_.begin(); it != object_.end(); ++it)
      if (!seen_.count(it.key())) error(it.key(), "unknown key");
  }

  // The value as JSON text, invalid UTF-8 shown as U+FFFD.
  static std::string text_of(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

  static std::string describe(const json& v) {
    std::string text = text_of(v);
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return std::string(v.type_name()) + " " + text;
  }

 private:
  const json& object_;
  std::string source_, prefix_;
  std::set<std::string> seen_;
};

std::string positive(float v) { return v > 0.0f ? "" : "must be > 0"; }
std::string non_negative(float v) { return v >= 0.0f ? "" : "must be >= 0"; }
std::string probability(float v) { return v >= 0.0f && v < 1.0f ? "" : "must be in [0, 1)"; }
std::string fraction(float v) { return v >= 0.0f && v <= 1.0f ? "" : "must be in [0, 1]"; }
// A bucket is summed in one ring, whose chunks MPI counts in an int.
std::string bucket_size(float mb) { return mb > 0.0f && mb <= 1024.0f ? "" : "must be in (0, 1024] (MB)"; }

const std::vector<std::string> kTasks = {"copy", "reverse", "dates", "numbers", "grammar"};

void read_data(ObjectReader& top, DataConfig& data, const std::string& source) {
  const json* v = top.find("data");
  if (!v) {
    data.task = kDefaultTask;
    return;
  }
  ObjectReader r(*v, source, "data.");
  bool has_task = v->is_object() && v->contains("task"), has_train = v->is_object() && v->contains("train");
  if (has_task == has_train) r.error("", "needs exactly one of \"task\" (a built-in task) or \"train\" (a file)");
  if (has_task) {
    r.string("task", data.task, kTasks);
    r.integer("size", data.size, 1);
  } else {
    r.string("train", data.train);
    r.string("valid", data.valid);
    r.string("format", data.format, {"tsv", "jsonl"});
  }
  r.finish();
}

void read_optimizer(ObjectReader& top, OptimizerConfig& o, const std::string& source) {
  const json* v = top.find("optimizer");
  if (!v) return;
  ObjectReader r(*v, source, "optimizer.");
  r.string("name", o.name, {"adam", "adamw", "sgd"});
  if (const json* betas = r.find("betas")) {
    if (!betas->is_array() || betas->size() != 2 || !(*betas)[0].is_number() || !(*betas)[1].is_number())
      r.error("betas", "expected an array of two numbers, got " + ObjectReader::describe(*betas));
    o.beta1 = (*betas)[0].get<float>();
    o.beta2 = (*betas)[1].get<float>();
    if (!probability(o.beta1).empty() || !probability(o.beta2).empty())
      r.error("betas", "each must be in [0, 1), got " + ObjectReader::text_of(*betas));
  }
  r.number("eps", o.eps, positive);
  r.number("weight_decay", o.weight_decay, non_negative);
  r.number("momentum", o.momentum, non_negative);
  r.boolean("nesterov", o.nesterov);
  if (o.nesterov && o.momentum <= 0.0f) r.error("nesterov", "needs momentum > 0");
  r.finish();
}

Config from_json(const json& root, const std::string& source) {
  Config c;
  c.source = source;
  ObjectReader r(root, source, "");
  r.integer("batch_size", c.batch_size, 1, kMaxBatchSize);
  r.integer("num_epochs", c.num_epochs, 0, kMaxEpochs);
  r.number("lr", c.lr, positive);
  r.integer("seq_len", c.seq_len, 3, kMaxSeqLen);
  r.integer("d_model", c.d_model, 1, kMaxWidth);
  r.integer("N", c.N, 1, kMaxLayers);
  r.integer("h", c.h, 1, kMaxWidth);
  r.integer("d_ff", c.d_ff, 1, kMaxWidth);
  if (c.d_model % c.h != 0)
    r.error("d_model", "must be divisible by h (" + std::to_string(c.d_model) + " % " +
                           std::to_string(c.h) + " != 0)");
  r.number("dropout", c.dropout, probability);
  r.string("activation", c.activation, nn::activation_names());
  r.string("norm", c.norm, {"pre", "post"});
  r.boolean("tie_embeddings", c.tie_embeddings);
  r.number("label_smoothing", c.label_smoothing, fraction);
  r.integer("seed", c.seed, 0);
  r.string("lang_src", c.lang_src);
  r.string("lang_tgt", c.lang_tgt);
  if (c.lang_src == c.lang_tgt) r.error("lang_tgt", "must differ from lang_src (\"" + c.lang_src + "\")");
  read_data(r, c.data, source);
  r.number("val_fraction", c.val_fraction, probability);
  r.boolean("max_len_filter", c.max_len_filter);
  r.boolean("bucket", c.bucket);
  r.integer("max_tokens", c.max_tokens, 0, kMaxBatchSize * kMaxSeqLen);
  if (c.max_tokens > 0 && c.max_tokens < c.seq_len)
    r.error("max_tokens", "must be 0 (off) or at least seq_len (" + std::to_string(c.seq_len) +
                              "), so that the longest pair fits a batch, got " + std::to_string(c.max_tokens));
  r.integer("min_frequency", c.min_frequency, 1, INT32_MAX);
  r.string("tokenizer", c.tokenizer, {"word", "bpe"});
  for (const char* key : {"vocab_size", "shared_vocab"})
    if (c.tokenizer == "word" && r.find(key))
      r.error(key, "applies to tokenizer \"bpe\" only (the word tokenizer keeps every word seen min_frequency times)");
  // At least the special tokens and one character.
  r.integer("vocab_size", c.vocab_size, static_cast<int64_t>(data::kSpecialTokens.size()) + 1, INT32_MAX);
  r.boolean("shared_vocab", c.shared_vocab);
  if (c.tie_embeddings && !c.shared_vocab)
    r.error("tie_embeddings", "needs shared_vocab: true (one vocabulary for both languages, tokenizer \"bpe\")");
  r.string("model_folder", c.model_folder);
  r.string("model_basename", c.model_basename);
  if (c.model_basename.find('/') != std::string::npos)
    r.error("model_basename", "must be a file name prefix, not a path (the folder is model_folder), got \"" +
                                  c.model_basename + "\"");
  r.integer("keep_checkpoints", c.keep_checkpoints, 0);
  r.integer("checkpoint_every", c.checkpoint_every, 0);
  r.boolean("overwrite", c.overwrite);
  if (const json* v = r.find("preload"); v && !v->is_null()) {
    if (!v->is_string() || v->get<std::string>().empty())
      r.error("preload", "expected null, \"latest\" or a checkpoint path, got " + ObjectReader::describe(*v));
    c.preload = v->get<std::string>();
  }
  r.string("tokenizer_file", c.tokenizer_file);
  if (c.tokenizer_file.find("{0}") == std::string::npos)
    r.error("tokenizer_file", "must contain {0} (replaced by the language: one file per language), got \"" +
                                  c.tokenizer_file + "\"");
  r.string("experiment_name", c.experiment_name);
  read_optimizer(r, c.optimizer, source);
  r.string("schedule", c.schedule, {"constant", "noam", "cosine"});
  r.integer("warmup_steps", c.warmup_steps, 0, INT32_MAX);
  if (c.schedule == "noam" && c.warmup_steps < 1) r.error("warmup_steps", "must be >= 1 for schedule \"noam\"");
  if (const json* v = r.find("clip_grad_norm"); v && !v->is_null()) {
    if (!v->is_number() || v->get<float>() <= 0.0f)
      r.error("clip_grad_norm", "expected null or a number > 0, got " + ObjectReader::describe(*v));
    c.clip_grad_norm = v->get<float>();
  }
  r.integer("grad_accum", c.grad_accum, 1, kMaxBatchSize);
  r.string("device", c.device, device_names());
  try {
    device_named(c.device);  // a build without OpenCL, or a machine without a device
  } catch (const Error& e) {
    r.error("device", e.what());
  }
  std::vector<std::string> precisions = precision_names();
  precisions.push_back("auto");
  std::string precision = c.precision ? precision_name(*c.precision) : "auto";
  r.string("precision", precision, precisions);
  c.precision = precision_named(precision);  // "auto": nullopt
  // OpenCL C 1.2 has no bf16 arithmetic: the device would widen every operand.
  if (c.precision == DType::BF16 && c.device != "cpu")
    r.error("precision", "\"bf16\" runs on the CPU only; device \"" + c.device + "\" computes in float32");
  r.integer("threads", c.threads, 0, kMaxThreads);
  r.integer("zero", c.zero, 0, 1);
  r.number("bucket_mb", c.bucket_mb, bucket_size);
  r.boolean("overlap_grad_reduce", c.overlap_grad_reduce);
  r.integer("val_examples", c.val_examples, 0);
  r.integer("beam", c.beam, 1, kMaxBeam);
  r.integer("max_nonfinite_steps", c.max_nonfinite_steps, 0);
  r.number("length_penalty", c.length_penalty, non_negative);
  r.finish();
  return c;
}

// The 1-based line of byte `offset` in `text`.
int64_t line_of(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

// The line of the `occurrence`-th (1-based) appearance of `key` as an object
// key in `text`, or 0 when the raw text spells it differently (escapes).
int64_t line_of_key(const std::string& text, const std::string& key, int occurrence) {
  const std::string quoted = json(key).dump();
  for (size_t at = text.find(quoted); at != std::string::npos; at = text.find(quoted, at + 1)) {
    size_t after = text.find_first_not_of(" \t\r\n", at + quoted.size());
    bool is_key = (at == 0 || text[at - 1] != '\\') && after != std::string::npos && text[after] == ':';
    if (is_key && --occurrence == 0) return line_of(text, at);
  }
  return 0;
}

// JSON allows an object to repeat a key, and the parser keeps the last value:
// in a config that hides a mistake (two "lr" lines, the first one edited), so
// a repeated key is an error naming it and its line.
json parse_without_duplicate_keys(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> keys_of_open_objects;
  std::vector<std::string> key_path;  // the keys leading to the current value
  std::map<std::string, int> occurrences;  // of each key name in the text so far
  auto check_key = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys_of_open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      keys_of_open_objects.pop_back();
    } else if (event == json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      int occurrence = ++occurrences[key];
      key_path.resize(static_cast<size_t>(depth - 1));
      key_path.push_back(key);
      if (!keys_of_open_objects.back().insert(key).second) {
        std::string name;
        for (const std::string& part : key_path) name += (name.empty() ? "" : ".") + part;
        int64_t line = line_of_key(text, key, occurrence);
        fail(path, line ? ":" + std::to_string(line) : "", ": key '", name,
             "' appears twice (only the last value would count)");
      }
    }
    return true;
  };
  return json::parse(text, check_key);
}

void apply_override(json& root, const std::string& assignment, const std::string& source) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    fail(source, ": --set '", assignment, "': expected key=value");
  if (!root.is_object()) fail(source, ": must be a JSON object");
  // JSON text is UTF-8: a value that is not could be neither stored nor written out.
  if (size_t bad = data::find_invalid_utf8(assignment); bad != std::string::npos)
    fail(source, ": --set: invalid UTF-8 at byte ", bad + 1, " of '", assignment.substr(0, bad), "...'");
  std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  if (key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos)
    fail(source, ": --set '", assignment, "': the key has an empty part");
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;  // not JSON: a plain string
  json* node = &root;
  std::stringstream parts(key);
  std::string part, walked;
  std::getline(parts, part, '.');
  for (std::string next; std::getline(parts, next, '.'); part = next) {
    walked += part + ".";
    json& child = (*node)[part];
    if (child.is_null()) child = json::object();
    if (!child.is_object()) fail(source, ": --set ", key, ": '", walked, "' is not an object");
    node = &child;
  }
  (*node)[part] = value;
}

}  // namespace

std::string Config::tokenizer_path(const std::string& lang) const {
  std::string path = tokenizer_file;
  for (size_t at = 0; (at = path.find("{0}", at)) != std::string::npos; at += lang.size()) path.replace(at, 3, lang);
  return path;
}

DType Config::precision_dtype() const {
  if (precision) return *precision;
  return device_named(device).multiplies_bf16_faster() ? DType::BF16 : DType::F32;
}

std::string Config::precision_note() const {
  if (precision == DType::F32) return "";
  if (device != "cpu") return "precision auto: fp32 (device " + device + " computes in float32)";
  const bool faster = device_named(device).multiplies_bf16_faster();
  const std::string level = kernels::to_string(kernels::bf16_gemm());
  const std::string no_gain = std::string("this CPU has no bf16 product faster than float32 (") +
                              kernels::why_no_faster_bf16_gemm() + ")";
  if (!precision)
    return faster ? "precision auto: bf16, matrix products on bf16 operands (" + level + "), faster than float32 here"
                  : "precision auto: fp32: " + no_gain;
  return faster ? "precision bf16: matrix products on bf16 operands (" + level + "), float32 accumulation"
                : "precision bf16: " + no_gain +
                      ", so the products run in float32 on bf16-rounded values: bf16's results, no speed-up";
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a folder, not a config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open the config file");
  // A config is a few hundred bytes: reading stops well before a device such
  // as /dev/zero could fill the memory.
  constexpr size_t kMaxConfigBytes = 1 << 20;
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) fail(path, ": larger than 1 MiB, not a config file");
  json root;
  try {
    root = parse_without_duplicate_keys(text, path);
  } catch (const json::out_of_range& e) {  // e.g. 1e999, beyond a double
    std::string what = e.what();  // "[json.exception.out_of_range.406] number overflow parsing '1e999'"
    fail(path, ": ", what.substr(what.find(']') + 2));
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string what = e.what();
    size_t colon = what.find(": ", what.find("parse error"));
    fail(path, ":", line_of(text, e.byte == 0 ? 0 : e.byte - 1), ": malformed JSON: ",
         colon == std::string::npos ? what : what.substr(colon + 2));
  }
  for (const std::string& o : overrides) apply_override(root, o, path);
  Config config = from_json(root, path);
  config.canonical = root.dump();
  return config;
}

}  // namespace sf::setup
