// A checkpoint knows what it is: every architecture key and its tokenizers'
// SHA-256 in its metadata, compared by every command that reads weights; a
// tokenizer file knows what it was built from; a run owns its model_folder.
#include <doctest/doctest.h>

#include <fstream>
#include <map>

#include "autograd/safetensors.h"
#include "base/error.h"
#include "base/sha256.h"
#include "cli_process.h"
#include "nn/checkpoint.h"
#include "setup/model_identity.h"

using namespace sf;
using namespace sf::train;
using namespace sf::testing;

namespace {

const char* kDates = R"("data": {"task": "dates", "size": 300}, "lang_src": "en", "lang_tgt": "iso", "num_epochs": 1, )";

// A config in `dir` (outputs there) for the tiny dates model, with `more` keys.
std::string dates_config(const fs::path& dir, const std::string& more = "") {
  fs::create_directories(dir);
  return write_config(dir, std::string(kDates) + more + kTiny);
}

// The config of a tiny dates model trained for an epoch in `dir`.
std::string trained_dates(const fs::path& dir, const std::string& more = "") {
  std::string config = dates_config(dir, more);
  REQUIRE(Trainer(setup::load_config(config)).run() == 0);
  return config;
}

// Runs the command; returns its exit code, and its output (stdout and stderr) in `said`.
int command(const std::vector<std::string>& args, std::string& said) {
  TempDir logs;
  int code = run(args, logs.path / "log");
  said = read_file(logs.path / "log");
  return code;
}

// The single line a refused command printed, after "scratchformer: error: ".
std::string refusal(const std::vector<std::string>& args) {
  std::string said;
  CHECK(command(args, said) == 2);
  CHECK(std::count(said.begin(), said.end(), '\n') == 1);
  const std::string prefix = "scratchformer: error: ";
  CHECK(said.starts_with(prefix));
  return said.starts_with(prefix) ? said.substr(prefix.size(), said.size() - prefix.size() - 1) : said;
}

// The message of the sf::Error `run` throws.
template <class Run>
std::string error_of(const Run& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("no error");
  return "";
}

// Rewrites a safetensors file's metadata with `edit` applied, keeping its tensors.
template <class Edit>
void edit_metadata(const std::string& path, const Edit& edit) {
  safetensors::Contents contents = safetensors::load(path);
  edit(contents.metadata);
  safetensors::save(path, contents.tensors, contents.metadata);
}

}  // namespace

TEST_CASE("sha256: the FIPS 180-4 examples, and a file's bytes as sha256sum hashes them") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a's, added in pieces that straddle the 64-byte blocks.
  Sha256 digest;
  for (int i = 0; i < 10000; ++i) digest.add(std::string(100, 'a'));
  CHECK(digest.hex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55, 56 and 64 bytes: the lengths where the padding needs one more block.
  TempDir dir;
  for (size_t size : {55, 56, 63, 64, 65}) {
    std::string text(size, 'x');
    std::ofstream(dir.file("f")) << text;
    CAPTURE(size);
    CHECK(capture("sha256sum '" + dir.file("f") + "'").substr(0, 64) == sha256_hex(text));
  }
}

TEST_CASE("identity: a checkpoint holds every architecture key and its tokenizer files' SHA-256, as sha256sum prints "
          "it; a file without the newer keys loads with the defaults it was written under") {
  TempDir dir;
  std::string config = trained_dates(dir.path);
  const std::string weights = dir.file("weights/tmodel_00.safetensors");
  safetensors::Metadata m = safetensors::load_metadata(weights);
  for (const char* key : {"d_model", "N", "h", "d_ff", "seq_len", "src_vocab_size", "tgt_vocab_size", "activation",
                          "norm", "tie_embeddings", "tokenizer", "src_tokenizer_sha256", "tgt_tokenizer_sha256"})
    CHECK_MESSAGE(m.count(key) == 1, key);
  CHECK(m["activation"] == "relu");
  CHECK(m["norm"] == "pre");
  CHECK(m["tie_embeddings"] == "false");
  CHECK(m["tokenizer"] == "word");
  CHECK(m["src_tokenizer_sha256"] == capture("sha256sum '" + dir.file("tokenizer_en.json") + "'").substr(0, 64));
  CHECK(m["tgt_tokenizer_sha256"] == capture("sha256sum '" + dir.file("tokenizer_iso.json") + "'").substr(0, 64));

  // As the files of earlier versions: no tokenizer keys, and the default
  // architecture keys left out. They still translate.
  edit_metadata(weights, [](safetensors::Metadata& old) {
    for (const char* key : {"activation", "norm", "tie_embeddings", "tokenizer", "src_tokenizer_sha256",
                            "tgt_tokenizer_sha256"})
      old.erase(key);
  });
  std::string said;
  CHECK(command({"translate", "--config", config, "july 14 , 1989"}, said) == 0);
  // ... and a gelu config is told the file's model is relu, not that a key is missing.
  CHECK(refusal({"translate", "--config", config, "--set", "activation=gelu", "july 14 , 1989"}) ==
        config + ": key 'activation' is gelu, but " + weights + " was trained with activation relu");
  // The config's tokenizer kind, against its file's.
  CHECK(refusal({"translate", "--config", config, "--set", "tokenizer=bpe", "july 14 , 1989"}) ==
        dir.file("tokenizer_en.json") +
            ": holds a WordLevel tokenizer, but the config's tokenizer is \"bpe\" (delete the file or change tokenizer_file)");
}

TEST_CASE("identity: average refuses checkpoints of different models, naming the first difference") {
  TempDir dir;
  std::string relu = trained_dates(dir.path / "relu"),
              gelu = trained_dates(dir.path / "gelu", R"("activation": "gelu", )");
  const std::string relu_weights = (dir.path / "relu/weights/tmodel_00.safetensors").string(),
                    gelu_weights = (dir.path / "gelu/weights/tmodel_00.safetensors").string();
  const std::string out = dir.file("mix.safetensors");
  CHECK(refusal({"average", "--config", relu, "--out", out, relu_weights, gelu_weights}) ==
        "average: " + gelu_weights + " has activation gelu, the others relu");
  // With three, the first that differs, against the first when the others disagree too.
  CHECK(refusal({"average", "--config", relu, "--out", out, relu_weights, gelu_weights, gelu_weights}) ==
        "average: " + gelu_weights + " has activation gelu, " + relu_weights + " relu");
  // The same model trained again on other data: its tokenizers differ.
  trained_dates(dir.path / "other", R"("seed": 7, )");
  std::string refused =
      refusal({"average", "--config", relu, "--out", out, relu_weights, (dir.path / "other/weights/tmodel_00.safetensors").string()});
  CHECK(refused.find(" has src_tokenizer_sha256 ") != std::string::npos);
  CHECK(!fs::exists(out));
  // The config is checked against the files too.
  CHECK(refusal({"average", "--config", gelu, "--out", out, relu_weights}) ==
        gelu + ": key 'activation' is gelu, but " + relu_weights + " was trained with activation relu");
  // The mean carries the tokenizer digests of what it averaged.
  std::string said;
  REQUIRE(command({"average", "--config", relu, "--out", out, relu_weights, relu_weights}, said) == 0);
  safetensors::Metadata mean = safetensors::load_metadata(out), first = safetensors::load_metadata(relu_weights);
  CHECK(mean == first);
}

TEST_CASE("identity: average refuses a tied model with an untied one") {
  TempDir dir;
  const char* bpe = R"("tokenizer": "bpe", "vocab_size": 60, "shared_vocab": true, )";
  std::string untied = trained_dates(dir.path / "untied", bpe),
              tied = trained_dates(dir.path / "tied", std::string(bpe) + R"("tie_embeddings": true, )");
  const std::string a = (dir.path / "untied/weights/tmodel_00.safetensors").string(),
                    b = (dir.path / "tied/weights/tmodel_00.safetensors").string();
  CHECK(refusal({"average", "--config", untied, "--out", dir.file("mix.safetensors"), a, b}) ==
        "average: " + b + " has tie_embeddings true, the others false");
  CHECK(refusal({"translate", "--config", untied, "--checkpoint", b, "july 14 , 1989"}) ==
        untied + ": key 'tie_embeddings' is false, but " + b + " was trained with tie_embeddings true");
}

// A model unlike the defaults in both ways, through every command that reads
// or writes weights: tied embeddings (one matrix for the target embedding and
// the projection) and post-norm blocks (no final layer norm). Each file says
// so, holds weights shaped so, and a config that says otherwise is refused.
TEST_CASE("identity: a tied, post-norm model goes through train, translate, eval, average and export as itself") {
  TempDir dir;
  std::string config = trained_dates(
      dir.path, R"("tokenizer": "bpe", "vocab_size": 60, "shared_vocab": true, "tie_embeddings": true, "norm": "post", )");
  const std::string weights = dir.file("weights/tmodel_00.safetensors"), mean = dir.file("mean.safetensors"),
                    exported = dir.file("export.safetensors");
  std::string said;
  CHECK(command({"translate", "--config", config, "july 14 , 1989"}, said) == 0);
  CHECK(command({"average", "--config", config, "--out", mean, weights, weights}, said) == 0);
  CHECK(command({"export", "--config", config, "--checkpoint", mean, "--out", exported}, said) == 0);
  std::ofstream(dir.path / "pairs.tsv") << "july 14 , 1989\t1989-07-14\n";
  CHECK(command({"eval", "--config", config, "--checkpoint", exported, "--data", dir.file("pairs.tsv")}, said) == 0);
  for (const std::string& file : {weights, mean, exported}) {
    CAPTURE(file);
    const safetensors::Contents contents = safetensors::load(file);
    CHECK(contents.metadata.at("tie_embeddings") == "true");
    CHECK(contents.metadata.at("norm") == "post");
    std::map<std::string, Tensor> tensors(contents.tensors.begin(), contents.tensors.end());
    // Tied: the projection is the target embedding. Post-norm: no final norms.
    CHECK(tensors.at("projection_layer.proj.weight").to_vector() == tensors.at("tgt_embed.embedding.weight").to_vector());
    CHECK(tensors.count("encoder.norm.alpha") == 0);
    CHECK(tensors.count("decoder.norm.alpha") == 0);
  }
  for (const std::string& file : {weights, mean, exported}) {
    CHECK(refusal({"translate", "--config", config, "--checkpoint", file, "--set", "norm=pre", "july 14 , 1989"}) ==
          config + ": key 'norm' is pre, but " + file + " was trained with norm post");
    CHECK(refusal({"translate", "--config", config, "--checkpoint", file, "--set", "tie_embeddings=false",
                   "july 14 , 1989"}) ==
          config + ": key 'tie_embeddings' is false, but " + file + " was trained with tie_embeddings true");
  }
}

TEST_CASE("identity: train refuses to preload weights of another architecture, in either order") {
  TempDir dir;
  std::string relu = trained_dates(dir.path / "relu"),
              gelu = trained_dates(dir.path / "gelu", R"("activation": "gelu", )");
  const std::string relu_weights = (dir.path / "relu/weights/tmodel_00.safetensors").string(),
                    gelu_weights = (dir.path / "gelu/weights/tmodel_00.safetensors").string();
  // The gelu run's tokenizers are the relu run's (same data): only the activation differs.
  const std::string fresh = "model_folder=" + dir.file("fresh");
  CHECK(error_of([&] { Trainer(setup::load_config(relu, {"preload=" + gelu_weights, fresh})); }) ==
        relu + ": key 'activation' is relu, but " + gelu_weights + " was trained with activation gelu");
  CHECK(error_of([&] { Trainer(setup::load_config(gelu, {"preload=" + relu_weights, fresh})); }) ==
        gelu + ": key 'activation' is gelu, but " + relu_weights + " was trained with activation relu");
  CHECK(error_of([&] { Trainer(setup::load_config(relu, {"preload=" + relu_weights, fresh, "norm=post"})); }) ==
        relu + ": key 'norm' is post, but " + relu_weights + " was trained with norm pre");
}

TEST_CASE("identity: a tokenizer other than the model's is refused by translate, eval, score, export and resume, "
          "even with the same vocabulary size") {
  TempDir dir;
  std::string config = trained_dates(dir.path);
  // Another tokenizer of the same size: two words' ids swapped, as a tokenizer
  // built from other data can give.
  const std::string tokenizer = dir.file("tokenizer_en.json");
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(read_file(tokenizer));
  nlohmann::ordered_json& vocab = json["model"]["vocab"];
  auto first = std::next(vocab.begin(), 4), second = std::next(vocab.begin(), 5);  // after the four specials
  std::swap(first.value(), second.value());
  std::ofstream(tokenizer) << json.dump(2) << "\n";
  const std::string weights = dir.file("weights/tmodel_00.safetensors");
  const std::string expected_start = tokenizer + ": is not the source tokenizer " + weights + " was trained with (SHA-256 ";
  std::ofstream(dir.file("pairs.tsv")) << "july 14 , 1989\t1989 - 07 - 14\n";
  for (std::vector<std::string> args :
       {std::vector<std::string>{"translate", "--config", config, "july 14 , 1989"},
        {"eval", "--config", config, "--data", dir.file("pairs.tsv")},
        {"export", "--config", config, "--out", dir.file("export.safetensors")}}) {
    CAPTURE(args[0]);
    CHECK(refusal(args).starts_with(expected_start));
  }
  CHECK(error_of([&] { Trainer(setup::load_config(config, {"preload=latest", "num_epochs=2"})); })
            .starts_with(expected_start));
  CHECK(!fs::exists(dir.file("export.safetensors")));
}

TEST_CASE("identity: score refuses an optimizer's file, saying what it is") {
  TempDir dir;
  std::string config = trained_dates(dir.path);
  const std::string optimizer = dir.file("weights/tmodel_00.optim.safetensors");
  CHECK(refusal({"score", "--config", config, "--checkpoint", optimizer}) ==
        optimizer + ": is an optimizer state file (adam), not model weights; the model's weights are the "
                    ".safetensors file beside it without .optim");
}

TEST_CASE("tokenizer files: a run loads one built from its own data, refuses one built from other data, and "
          "builds it again with overwrite") {
  TempDir dir;
  std::string config = trained_dates(dir.path);
  const std::string tokenizer = dir.file("tokenizer_en.json");
  nlohmann::json built_from = nlohmann::json::parse(read_file(tokenizer))["model"]["built_from"];
  CHECK(built_from["pairs"] == 269);
  CHECK(built_from["settings"] == "word min_frequency 1");
  // The same data in another model_folder: the files are its own.
  const std::string elsewhere = "model_folder=" + dir.file("again");
  REQUIRE(Trainer(setup::load_config(config, {elsewhere})).run() == 0);
  // Other data, or other settings: refused, naming the file, nothing written.
  std::string before = read_file(tokenizer);
  CHECK(error_of([&] { Trainer(setup::load_config(config, {elsewhere + "2", "data.size=400"})); }) ==
        tokenizer + ": was built from other training data (269 pairs) than this run's (359 pairs); point "
                    "tokenizer_file at a path of this run's own, delete the file, or set overwrite to true to build "
                    "it again");
  CHECK(error_of([&] { Trainer(setup::load_config(config, {elsewhere + "2", "seed=3"})); }) ==
        tokenizer + ": was built from other training sentences than this run's (269 pairs each); point "
                    "tokenizer_file at a path of this run's own, delete the file, or set overwrite to true to build "
                    "it again");
  CHECK(error_of([&] { Trainer(setup::load_config(config, {elsewhere + "2", "min_frequency=2"})); })
            .starts_with(tokenizer + ": was built with other settings (word min_frequency 1) than this run's (word "
                                     "min_frequency 2)"));
  CHECK(read_file(tokenizer) == before);
  CHECK((!fs::exists(dir.file("again2")) || fs::is_empty(dir.file("again2"))));
  // overwrite: built again from this run's data.
  REQUIRE(Trainer(setup::load_config(config, {elsewhere + "3", "data.size=400", "overwrite=true"})).run() == 0);
  CHECK(nlohmann::json::parse(read_file(tokenizer))["model"]["built_from"]["pairs"] == 359);
  // A file that does not say what it was built from (another tool's) is used as given.
  nlohmann::json json = nlohmann::json::parse(read_file(tokenizer));
  json["model"].erase("built_from");
  std::ofstream(tokenizer) << json.dump(2) << "\n";
  REQUIRE(Trainer(setup::load_config(config, {elsewhere + "4", "overwrite=true"})).run() == 0);
  CHECK(!nlohmann::json::parse(read_file(tokenizer))["model"].contains("built_from"));
}

TEST_CASE("tokenizer files: fine-tuning on other data keeps the preloaded model's tokenizer files") {
  TempDir dir;
  std::string config = trained_dates(dir.path);
  std::string before = read_file(dir.file("tokenizer_en.json"));
  // The weights alone (no optimizer or state beside them): a fresh optimizer on other data.
  fs::copy_file(dir.file("weights/tmodel_00.safetensors"), dir.file("model.safetensors"));
  Trainer tuned(setup::load_config(
      config, {"data.size=400", "model_folder=" + dir.file("tuned"), "preload=" + dir.file("model.safetensors")}));
  REQUIRE(tuned.run() == 0);
  CHECK(read_file(dir.file("tokenizer_en.json")) == before);
}

TEST_CASE("model_folder: a fresh run into a folder holding another run's checkpoints stops, or with overwrite "
          "deletes them; a resume from an older epoch than the latest stops too") {
  TempDir dir;
  std::string config = dates_config(dir.path);
  REQUIRE(Trainer(setup::load_config(config, {"num_epochs=3"})).run() == 0);
  const std::string folder = dir.file("weights");
  auto weights = [&](const char* tag) { return folder + "/tmodel_" + tag + ".safetensors"; };
  std::string before = read_file(weights("02"));
  // Training again from scratch, as one forgetting preload would.
  std::string refused = error_of([&] { Trainer(setup::load_config(config, {"num_epochs=2", "precision=bf16"})); });
  CHECK(refused.starts_with(config + ": model_folder " + folder + " holds another run's checkpoints ("));
  CHECK(refused.ends_with("); resume it with preload \"latest\", train into another model_folder, or set overwrite "
                          "to true to delete them"));
  CHECK(read_file(weights("02")) == before);
  // Resuming from epoch 00 would mix the new epoch 01 with the old 02.
  CHECK(error_of([&] {
          Trainer(setup::load_config(config, {"num_epochs=2", "preload=" + weights("00")}));
        }) == config + ": key 'preload': " + weights("00") + " is epoch 00 of the run in " + folder +
                  ", which went on to epoch 02; resume the latest (preload \"latest\"), or set overwrite to true to "
                  "delete the epochs after it");
  // overwrite: the new run alone is left, so export and average --last take its checkpoints.
  REQUIRE(Trainer(setup::load_config(config, {"num_epochs=2", "overwrite=true"})).run() == 0);
  CHECK(fs::exists(weights("01")));
  CHECK(!fs::exists(weights("02")));
  CHECK(!fs::exists(folder + "/tmodel_02.state.json"));
  std::string said;
  REQUIRE(command({"average", "--config", config, "--last", "2", "--out", dir.file("avg.safetensors")}, said) == 0);
  CHECK(said == "average: wrote " + dir.file("avg.safetensors") + ", the mean of 2 checkpoints: " + weights("00") + " " +
                    weights("01") + "\n");
  // A resume from the older epoch with overwrite deletes the epochs after it.
  REQUIRE(Trainer(setup::load_config(config, {"num_epochs=1", "preload=" + weights("00"), "overwrite=true"})).run() ==
          0);
  CHECK(!fs::exists(weights("01")));
}

TEST_CASE("score and eval: a pair too long for seq_len is refused by both, naming its line") {
  TempDir dir;
  std::string config = trained_dates(dir.path);
  std::string long_target;
  for (int i = 0; i < 8; ++i) long_target += "1989 - 07 - 14 ";
  std::ofstream(dir.file("pairs.tsv")) << "july 14 , 1989\t1989 - 07 - 14\n3 mar 21\t" << long_target << "\n";
  const std::string expected = ": the target has 40 tokens, more than seq_len - 1 = 15";
  CHECK(refusal({"eval", "--config", config, "--data", dir.file("pairs.tsv")}) == dir.file("pairs.tsv") + ":2" + expected);
  std::ostringstream score;
  score << "'" << scratchformer_binary() << "' score --config '" << config << "' < '" << dir.file("pairs.tsv")
        << "' 2>&1; echo \"exit $?\"";
  CHECK(capture_lines(score.str()) == std::vector<std::string>{"scratchformer: error: <stdin>:2" + expected, "exit 2"});
}
