// The scratchformer command: train, translate, eval, score, export.
// Bad usage, config or input: one line "scratchformer: error: ..." and exit 2;
// an internal error exits 1; an interrupted training run exits 130 after saving.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/kernels/thread_pool.h"
#include "autograd/ops.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "base/parse_int.h"
#include "data/corpus.h"
#include "data/detokenizer.h"
#include "data/unicode.h"
#include "nn/checkpoint.h"
#include "report/attention_explorer.h"
#include "infer/attention_maps.h"
#include "setup/checkpoints.h"
#include "setup/model_identity.h"
#include "dist/communicator.h"
#include "infer/inference.h"
#include "onnx/export_folder.h"
#include "eval/metrics.h"
#include "setup/resources.h"
#include "eval/moses_bleu.h"
#include "eval/sacrebleu.h"
#include "eval/validation.h"
#include "train/trainer.h"
#ifdef SF_MPI
#include "dist/mpi/communicator.h"
#endif

using namespace sf;

namespace {

const char* kUsage = R"(usage: scratchformer SUBCOMMAND [options]

Trains and runs "Attention Is All You Need" Transformers for translation.

subcommands:
  train      train a model from a JSON config
  translate  translate sentences with a trained model
  eval       translate a TSV file's sources and score them against its targets
  score      teacher-forced negative log-likelihood of source/target pairs
  export     write a checkpoint's weights in bf16 for inference, or the model as ONNX
  average    write the mean of several checkpoints' weights

Run "scratchformer SUBCOMMAND --help" for a subcommand's options.
)";

const char* kTrainHelp = R"(usage: scratchformer train --config FILE [--set key=value ...]

Trains the model the config describes (keys: docs/10-formats.md). Each --set
overrides one key: dotted keys reach nested objects (--set optimizer.name=sgd);
the value is JSON when it parses as JSON, otherwise a string. Shows progress,
validates each epoch, writes checkpoints to model_folder and metrics to
experiment_name/metrics.jsonl. Ctrl-C (SIGINT) or SIGTERM: finishes the current
step, saves a checkpoint of the position reached and exits 130; train again
with "preload": "latest" to continue exactly from there. A run owns its
model_folder and tokenizer files: another run's checkpoints there, or
tokenizer files built from other data, stop it unless --set overwrite=true
(which deletes those checkpoints and builds the tokenizers again).
)";

const char* kTranslateHelp = R"(usage: scratchformer translate --config FILE [--set key=value ...] [--checkpoint PATH]
                               [--beam N] [--attention OUT.svg|OUT.html] [--keep-unk] [--tokens]
                               [TEXT ...]

Translates each TEXT argument, or without TEXT each line of standard input, and
prints one line per sentence, detokenized as the language writes it (no space
before closing punctuation, "T-Shirt", "¿Qué?"), each [UNK] (a word outside the
target vocabulary) replaced by the source word the model attends to most there;
--keep-unk prints [UNK] instead. --tokens prints the target tokens as the model
wrote them (BPE subword units joined into words), joined by single spaces,
[UNK] kept. Uses the
latest checkpoint in model_folder unless --checkpoint names one. --beam N uses
beam search of width N (default: the config's beam). --set overrides config
keys as for train (e.g. model_folder). --attention OUT.svg writes the attention
heatmaps (every layer and head: encoder self, decoder self, cross) of the one
sentence translated, recorded while decoding it; --attention OUT.html writes an
interactive page to explore the attention of every sentence translated.
)";

const char* kEvalHelp = R"(usage: scratchformer eval --config FILE [--set key=value ...] [--checkpoint PATH]
                          --data FILE.tsv [--beam N]

Translates the sources of FILE.tsv (source<TAB>target lines) as translate does
and prints one JSON object: a key per metric ("bleu", "sacrebleu",
"sacrebleu_lc", "bleu_lc_tok", "chrf", "cer", "wer", ..., as validation logs
them), then "loss" (the references' mean loss per token, teacher-forced, as
validation's "loss"), the sacreBLEU signatures "signature", "signature_lc" and
"signature_lc_tok" (of the three BLEUs below), "sentences" and "seconds". The
metrics score the tokens as the model wrote them, what translate --tokens
prints ([UNK] kept, not replaced). "bleu" is BLEU on those word tokens. The
other three are the BLEUs papers publish, computed on them detokenized against
the raw references:
  "sacrebleu"    sacreBLEU's default BLEU (cased, 13a tokenizer), for papers
                 that report sacreBLEU;
  "sacrebleu_lc" the same lowercased (sacrebleu -lc);
  "bleu_lc_tok"  the Multi30k papers' BLEU: both sides lowercased, then
                 normalized and tokenized with Moses' rules for the config's
                 lang_tgt (lowercase.perl | normalize-punctuation.perl |
                 tokenizer.perl, as Multi30k's lc.norm.tok files), scored by
                 multi-bleu.perl's formula: sacreBLEU's none tokenizer and no
                 smoothing on the text our Moses-rules tokenizer writes.
A pair too long for seq_len (source over seq_len - 2 tokens,
target over seq_len - 1) is an error naming its line, as in score.
)";

const char* kScoreHelp = R"(usage: scratchformer score --config FILE [--set key=value ...] [--checkpoint PATH]

Reads source<TAB>target lines on standard input and prints, per line,
NLL<TAB>T: the negative log-likelihood (natural log, teacher forcing, no
dropout, no label smoothing) of the target tokens and the final [EOS], and T,
the number of target tokens + 1. A pair too long for seq_len (source over
seq_len - 2 tokens, target over seq_len - 1) is an error naming its line, as
in eval.
)";

const char* kExportHelp = R"(usage: scratchformer export --config FILE [--set key=value ...] [--checkpoint PATH]
                            [--format safetensors|onnx] --out PATH [--dtype bf16|fp32]

Writes the weights of the latest checkpoint in model_folder (or of --checkpoint)
to PATH, a safetensors file with the same tensor names, order and metadata
(the architecture and the tokenizer files' SHA-256), every tensor rounded to
--dtype (default bf16: half the size of the float32 file, for inference).
translate, eval, score and preload load it as they load any weights file.
PATH may be neither the checkpoint read nor a name in model_folder that
starts with model_basename (the run's own files).

--format onnx writes the model instead as a new folder PATH in the layout of
Hugging Face's exported encoder-decoder models, which ONNX Runtime and
transformers.js load: onnx/encoder_model.onnx, onnx/decoder_model_merged.onnx
(opset 17, float32, its key/value cache in and out), config.json,
generation_config.json, tokenizer.json and tokenizer_config.json (with two
vocabularies: source_tokenizer.json and target_tokenizer.json, which runtimes
expecting one tokenizer.json do not read). PATH must not exist or be empty.
)";

const char* kAverageHelp = R"(usage: scratchformer average --config FILE [--set key=value ...]
                             (--last K | CHECKPOINT...) --out PATH

Writes to PATH a weights file whose every tensor is the element-wise mean of
the given checkpoints' (weights files), or of the last K epochs' checkpoints in
model_folder: checkpoint averaging, which Vaswani et al. (2017, section 6.1)
used for their results. The checkpoints must hold one model (architecture
and tokenizers, as their metadata records them), the one the config describes;
the first difference is an error. translate, eval, score and preload load it
as they load any weights file. PATH may be neither a checkpoint read nor a name in
model_folder that starts with model_basename (the run's own files).
)";

class UsageError : public Error {
 public:
  using Error::Error;
};

struct Arguments {
  std::string config;
  std::vector<std::string> sets, texts;
  std::optional<std::string> checkpoint, data, attention, out, format;
  std::optional<int64_t> beam, last;  // --beam; average --last
  DType dtype = DType::BF16;  // export --dtype
  bool dtype_given = false;
  bool tokens = false;     // translate --tokens: the spaced tokens, not detokenized text
  bool keep_unknown = false;  // --keep-unk: [UNK] printed, not replaced by a source word
  bool help = false;
};

// Parses the options `allowed` for `command`; anything else is a usage error.
Arguments parse(const std::string& command, int argc, char** argv, const std::vector<std::string>& allowed,
                bool takes_texts) {
  Arguments a;
  std::set<std::string> given;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      a.help = true;
      continue;
    }
    if (arg.rfind("--", 0) == 0) {
      if (std::find(allowed.begin(), allowed.end(), arg) == allowed.end())
        throw UsageError(command + ": unknown option " + arg);
      if (arg == "--tokens" || arg == "--keep-unk") {  // the options without a value
        (arg == "--tokens" ? a.tokens : a.keep_unknown) = true;
        continue;
      }
      if (i + 1 >= argc) throw UsageError(command + ": " + arg + " needs a value");
      std::string value = argv[++i];
      if (arg != "--set" && !given.insert(arg).second) throw UsageError(command + ": " + arg + " is given twice");
      if (arg == "--config") a.config = value;
      else if (arg == "--set") a.sets.push_back(value);
      else if (arg == "--checkpoint") a.checkpoint = value;
      else if (arg == "--data") a.data = value;
      else if (arg == "--attention") a.attention = value;
      else if (arg == "--out") a.out = value;
      else if (arg == "--format") {
        if (value != "safetensors" && value != "onnx")
          throw UsageError(command + ": --format needs safetensors or onnx, got '" + value + "'");
        a.format = value;
      }
      else if (arg == "--dtype") {
        std::optional<DType> dtype = precision_named(value);
        if (!dtype) throw UsageError(command + ": --dtype needs bf16 or fp32, got '" + value + "'");
        a.dtype = *dtype;
        a.dtype_given = true;
      }
      else if (arg == "--last") {
        std::optional<int64_t> last = parse_int64(value);
        if (!last || *last < 1) throw UsageError(command + ": --last needs an integer >= 1, got '" + value + "'");
        a.last = *last;
      }
      else if (arg == "--beam") {
        std::optional<int64_t> beam = parse_int64(value);
        if (!beam || *beam < 1 || *beam > setup::kMaxBeam)
          throw UsageError(command + ": --beam needs an integer in [1, " + std::to_string(setup::kMaxBeam) +
                           "], got '" + value + "'");
        a.beam = *beam;
      }
      continue;
    }
    if (!takes_texts) throw UsageError(command + ": unexpected argument '" + arg + "'");
    a.texts.push_back(arg);
  }
  if (!a.help && a.config.empty()) throw UsageError(command + ": --config FILE is required");
  return a;
}

int train_command(int argc, char** argv, dist::Communicator& comm) {
  Arguments a = parse("train", argc, argv, {"--config", "--set"}, false);
  if (a.help) return std::fputs(kTrainHelp, stdout), 0;
  setup::Config config = setup::load_config(a.config, a.sets);
  train::install_stop_handlers(comm.size() > 1 ? train::StopSignals::rank_saves_first
                                               : train::StopSignals::second_ends_process);
  return train::Trainer(config, &comm).run();
}

infer::Session open_session(const Arguments& a) {
  setup::Config config = setup::load_config(a.config, a.sets);
  kernels::set_num_threads(setup::threads_to_use(config.threads));
  return infer::Session::open(config, a.checkpoint);
}

int translate_command(int argc, char** argv) {
  Arguments a = parse("translate", argc, argv,
                      {"--config", "--set", "--checkpoint", "--beam", "--attention", "--tokens", "--keep-unk"}, true);
  if (a.help) return std::fputs(kTranslateHelp, stdout), 0;
  infer::Session session = open_session(a);
  AutocastGuard autocast(session.config.precision_dtype());  // the config's precision (docs/13-bf16.md)
  std::vector<std::string> sentences = a.texts;
  if (sentences.empty())
    for (std::string line; std::getline(std::cin, line);) {
      if (size_t bad = data::find_invalid_utf8(line); bad != std::string::npos)
        fail("<stdin>:", sentences.size() + 1, ": invalid UTF-8 at byte ", bad + 1);
      sentences.push_back(line);
    }
  bool explorer = a.attention && a.attention->ends_with(".html");
  if (a.attention && !explorer && sentences.size() != 1)
    throw UsageError("translate: --attention OUT.svg draws one sentence's heatmaps; got " +
                     std::to_string(sentences.size()) + " sentences (OUT.html explores several)");
  std::vector<infer::AttentionRecord> attention;
  infer::DecodeOptions options = infer::DecodeOptions::from_config(session.config, a.beam);
  options.replace_unknown_words = !a.keep_unknown && !a.tokens;
  std::vector<infer::Translation> lines =
      infer::translate_lines(session, sentences, options, a.attention ? &attention : nullptr);
  for (const infer::Translation& t : lines)
    std::printf("%s\n", (a.tokens ? t.tokens : data::detokenize(t.shown)).c_str());
  if (explorer) {
    std::vector<report::ExplorerSentence> explored;
    for (size_t i = 0; i < sentences.size(); ++i)
      explored.push_back({sentences[i], data::detokenize(lines[i].shown), std::move(attention[i])});
    write_file_atomically(*a.attention,
                          report::attention_explorer_page("Scratchformer attention: " + session.checkpoint, explored,
                                                          session.src_tokenizer, session.tgt_tokenizer));
  } else if (a.attention) {
    std::vector<infer::AttentionMap> maps =
        infer::attention_maps(attention[0], session.src_tokenizer, session.tgt_tokenizer);
    write_file_atomically(*a.attention, infer::attention_svg(maps, session.model->config().h));
  }
  return 0;
}

int eval_command(int argc, char** argv) {
  Arguments a = parse("eval", argc, argv, {"--config", "--set", "--checkpoint", "--data", "--beam"}, false);
  if (a.help) return std::fputs(kEvalHelp, stdout), 0;
  if (!a.data) throw UsageError("eval: --data FILE.tsv is required");
  auto start = std::chrono::steady_clock::now();
  infer::Session session = open_session(a);
  AutocastGuard autocast(session.config.precision_dtype());  // the config's precision (docs/13-bf16.md)
  data::ReadResult file = data::read_tsv(*a.data);
  if (file.pairs.empty()) fail(*a.data, ": no source<TAB>target pairs to evaluate");
  std::vector<std::string> sources, references;
  std::vector<data::Example> examples;
  for (const data::Pair& p : file.pairs) {
    // A pair too long for the model is refused as score refuses it: a
    // reference longer than the model can write would be scored against a
    // translation cut short.
    examples.push_back({session.src_tokenizer.encode(p.src), session.tgt_tokenizer.encode(p.tgt), p});
    data::check_example_fits(examples.back(), session.config.seq_len);
    sources.push_back(p.src);
    references.push_back(p.tgt);
  }
  // The loss of the references, as validation computes it during training.
  const setup::Config& c = session.config;
  session.model->eval();
  const double loss = eval::mean_loss(
      *session.model, data::BatchedDataset(std::move(examples), {infer::inference_batch_size(c), c.seq_len, c.bucket, false, 0}),
      c.label_smoothing);
  // The metrics compare the tokens as the model wrote them (translate --tokens),
  // so nothing is replaced.
  infer::DecodeOptions options = infer::DecodeOptions::from_config(session.config, a.beam);
  options.replace_unknown_words = false;
  std::vector<std::string> hypotheses;
  for (infer::Translation& t : infer::translate_lines(session, sources, options))
    hypotheses.push_back(std::move(t.tokens));
  eval::Scores scores = eval::score_translations(hypotheses, references, session.config.lang_tgt);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::ordered_json out;
  eval::add_scores(out, scores);
  out["loss"] = loss;
  // The signatures of the field's BLEUs, as sacreBLEU prints them beside a score.
  out["signature"] = eval::sacrebleu_signature();  // of "sacrebleu"
  out["signature_lc"] = eval::sacrebleu_signature(eval::Case::lowercase);
  out["signature_lc_tok"] = eval::moses_bleu_signature();  // sacreBLEU's none tokenizer on our Moses tokens
  out["sentences"] = sources.size();
  out["seconds"] = seconds;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int score_command(int argc, char** argv) {
  Arguments a = parse("score", argc, argv, {"--config", "--set", "--checkpoint"}, false);
  if (a.help) return std::fputs(kScoreHelp, stdout), 0;
  infer::Session session = open_session(a);
  AutocastGuard autocast(session.config.precision_dtype());  // the config's precision (docs/13-bf16.md)
  std::vector<data::Example> examples;
  int64_t line_number = 0;
  for (std::string line; std::getline(std::cin, line);) {
    ++line_number;
    std::string where = "<stdin>:" + std::to_string(line_number);
    if (size_t bad = data::find_invalid_utf8(line); bad != std::string::npos)
      fail(where, ": invalid UTF-8 at byte ", bad + 1);
    data::Pair pair = data::split_tsv_line(line, where);
    examples.push_back({session.src_tokenizer.encode(pair.src), session.tgt_tokenizer.encode(pair.tgt), pair});
  }
  const setup::Config& c = session.config;
  for (const infer::PairNll& r :
       infer::score_pairs(*session.model, std::move(examples), c.seq_len, infer::inference_batch_size(c)))
    std::printf("%.6f\t%lld\n", r.nll, static_cast<long long>(r.tokens));
  return 0;
}

// Writing over a checkpoint it reads, or into model_folder under
// model_basename (where it could replace one of the run's files, or be taken
// for a stray checkpoint by a later "preload": "latest"), is refused.
void check_output(const std::string& command, const std::string& out, const std::vector<std::string>& read,
                  const setup::Config& c) {
  std::error_code ec;
  for (const std::string& path : read)
    if (std::filesystem::equivalent(out, path, ec))
      throw UsageError(command + ": --out " + out + " is a checkpoint it reads; write to another file");
  if (setup::CheckpointStore(c.model_folder, c.model_basename, c.keep_checkpoints).has_name_of_its_own(out))
    throw UsageError(command + ": --out " + out + " is in model_folder and starts with model_basename '" +
                     c.model_basename + "', as the run's checkpoint files do; write it elsewhere");
}

// The model as a folder of ONNX graphs and Hugging Face's JSON files (onnx/export_folder.h).
int export_onnx(const Arguments& a) {
  infer::Session session = open_session(a);
  std::vector<onnx::WrittenFile> files = onnx::export_folder(session, *a.out);
  std::printf("export: wrote %s (onnx, opset 17, float32) from %s:", a.out->c_str(), session.checkpoint.c_str());
  for (size_t i = 0; i < files.size(); ++i)
    std::printf("%s %s (%llu bytes)", i == 0 ? "" : ",", files[i].name.c_str(),
                static_cast<unsigned long long>(files[i].bytes));
  std::printf("\n");
  if (!session.config.shared_vocab)
    std::printf("export: the model has two vocabularies (shared_vocab false): source_tokenizer.json and "
                "target_tokenizer.json, which runtimes that read one tokenizer.json (transformers.js) will not load\n");
  return 0;
}

int export_command(int argc, char** argv) {
  Arguments a = parse("export", argc, argv, {"--config", "--set", "--checkpoint", "--out", "--dtype", "--format"}, false);
  if (a.help) return std::fputs(kExportHelp, stdout), 0;
  if (!a.out) throw UsageError("export: --out PATH is required");
  if (a.format == "onnx") {
    if (a.dtype_given) throw UsageError("export: --dtype is for safetensors; --format onnx writes float32");
    return export_onnx(a);
  }
  infer::Session session = open_session(a);
  check_output("export", *a.out, {session.checkpoint}, session.config);
  nn::save_checkpoint(*session.model, *a.out, a.dtype, session.identity.tokenizer_labels());
  std::printf("export: wrote %s (%s, %llu bytes) from %s\n", a.out->c_str(), precision_name(a.dtype),
              static_cast<unsigned long long>(std::filesystem::file_size(*a.out)), session.checkpoint.c_str());
  return 0;
}

// The weights files of the last `k` epochs' complete checkpoints, oldest first.
std::vector<std::string> last_epochs(const setup::Config& c, int64_t k) {
  setup::CheckpointStore store(c.model_folder, c.model_basename, c.keep_checkpoints);
  std::vector<std::string> paths;
  for (int64_t epoch = store.latest_epoch().value_or(-1); epoch >= 0 && int64_t(paths.size()) < k; --epoch)
    if (std::optional<setup::CheckpointFiles> files = store.complete(setup::CheckpointStore::epoch_tag(epoch)))
      paths.insert(paths.begin(), files->weights);
  if (int64_t(paths.size()) < k)
    fail(c.source, ": --last ", k, ": model_folder ", c.model_folder, " has ", paths.size(),
         " complete epoch checkpoint", paths.size() == 1 ? "" : "s");
  return paths;
}

int average_command(int argc, char** argv) {
  Arguments a = parse("average", argc, argv, {"--config", "--set", "--last", "--out"}, true);
  if (a.help) return std::fputs(kAverageHelp, stdout), 0;
  if (!a.out) throw UsageError("average: --out PATH is required");
  if (a.last && !a.texts.empty()) throw UsageError("average: --last K or checkpoints to average, not both");
  if (!a.last && a.texts.empty()) throw UsageError("average: --last K or the checkpoints to average is required");
  setup::Config config = setup::load_config(a.config, a.sets);
  std::vector<std::string> paths = a.last ? last_epochs(config, *a.last) : a.texts;
  check_output("average", *a.out, paths, config);
  // Every file must hold the model the first one holds; the first is checked against the config.
  std::vector<setup::ModelIdentity> identities;
  safetensors::Metadata labels;  // each tokenizer key some file records (where several do, they agree)
  for (const std::string& path : paths) {
    std::optional<setup::ModelIdentity> identity = setup::ModelIdentity::of_file(path);
    if (!identity) fail(path, ": has no __metadata__, so nothing says which model it holds (weights saved by other tools)");
    identities.push_back(*identity);
    labels.merge(identity->tokenizer_labels());
  }
  for (size_t i = 1; i < paths.size(); ++i)
    if (std::optional<setup::IdentityDifference> d = setup::first_difference(identities[i], identities[0])) {
      bool others_agree = true;
      for (size_t j = i + 1; j < paths.size(); ++j) others_agree &= !setup::first_difference(identities[j], identities[0]);
      fail("average: ", paths[i], " has ", d->key, " ", d->shown(d->in_file), ", ", others_agree ? "the others" : paths[0],
           " ", d->shown(d->expected));
    }
  infer::Session session = infer::Session::open(config, paths[0]);
  nn::load_average(*session.model, paths);
  nn::save_checkpoint(*session.model, *a.out, DType::F32, labels);
  std::printf("average: wrote %s, the mean of %zu checkpoints:", a.out->c_str(), paths.size());
  for (const std::string& path : paths) std::printf(" %s", path.c_str());
  std::printf("\n");
  return 0;
}

// The exception that ends the command, as one line on stderr; returns the
// exit status (2: bad input, sf::Error; 1: a bug; base/error.h). With
// several ranks, the writer (rank 0) speaks for all: an error every rank
// meets is printed once, by the writer, which ends the job. Where the ranks
// know the writer meets it too (dist::ErrorOnEveryRank), the others wait to
// be ended, however busy the machine. Any other error a rank other than the
// writer meets may be its alone, while the writer waits for it: it gives the
// writer 2 seconds to end the job first (an error each rank meets by itself,
// such as a bad config), then reports its own error, naming itself, and ends
// the job. (Should the writer not end the job after an ErrorOnEveryRank, the
// rank speaks after 30 seconds.)
int report_failure(const std::exception& e, dist::Communicator& comm) {
  std::fflush(stdout);
  int status = exit_status(e);
  std::string rank;
  if (!comm.writes()) {
    const bool writer_reports = dynamic_cast<const dist::ErrorOnEveryRank*>(&e) != nullptr;
    std::this_thread::sleep_for(std::chrono::seconds(writer_reports ? 30 : 2));
    rank = "rank " + std::to_string(comm.rank()) + ": ";
  }
  std::fprintf(stderr, "scratchformer: %s: %s%s\n", status == 2 ? "error" : "internal error", rank.c_str(), e.what());
  comm.abort(status);
  return status;
}

// The processes of this job. In the MPI build (make MPI=1) they are MPI's
// where a launcher (mpirun) started this process; a command started by hand
// is this process alone, as in the plain build, and does not start MPI,
// whose start alone takes half a second or more.
std::unique_ptr<dist::Communicator> world([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv) {
#ifdef SF_MPI
  if (dist::started_by_launcher()) return dist::mpi_world(argc, argv);
#endif
  return dist::single_process();
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, reported like
  // a full disk, instead of the signal killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  std::unique_ptr<dist::Communicator> comm = dist::single_process();  // until MPI has started
  try {
    comm = world(&argc, &argv);
    set_local_rank(comm->local_rank());  // before a config names a device
    std::string command = argc > 1 ? argv[1] : "";
    if (command == "--help" || command == "-h") return std::fputs(kUsage, stdout), 0;
    if (command == "train") return train_command(argc, argv, *comm);
    if (comm->size() > 1)
      throw UsageError(command + ": only train runs on several processes; run " + command + " without mpirun");
    if (command == "translate") return translate_command(argc, argv);
    if (command == "eval") return eval_command(argc, argv);
    if (command == "score") return score_command(argc, argv);
    if (command == "export") return export_command(argc, argv);
    if (command == "average") return average_command(argc, argv);
    throw UsageError(command.empty() ? "no subcommand (try --help)" : "unknown subcommand '" + command + "' (try --help)");
  } catch (const std::exception& e) {
    return report_failure(e, *comm);
  }
}
