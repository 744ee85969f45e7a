#include "export_folder.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file_steps.h"
#include "hf_files.h"
#include "transformer_graph.h"
#include "translate_page.h"

namespace sf::onnx {

namespace fs = std::filesystem;

namespace {

void require_new_folder(const fs::path& folder) {
  std::error_code ec;
  fs::file_status status = fs::status(folder, ec);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status)) fail(folder.string(), ": exists and is not a folder; export --format onnx writes a new folder");
  if (!fs::is_empty(folder, ec))
    fail(folder.string(), ": the folder exists and is not empty; export --format onnx writes a new folder");
}

// Writes every file into `dir`, in the order they are listed.
std::vector<WrittenFile> write_files(const infer::Session& s, const fs::path& dir) {
  std::vector<WrittenFile> written;
  auto write = [&](const std::string& name, const std::string& bytes) {
    write_file_atomically((dir / name).string(), bytes);
    written.push_back({name, bytes.size()});
  };
  auto json = [](const nlohmann::ordered_json& j) { return j.dump(2) + "\n"; };
  make_folders_or_fail((dir / "onnx").string());
  ModelInfo info;
  info.doc_string = "Scratchformer Transformer, exported from " + s.checkpoint;
  write("onnx/encoder_model.onnx", serialize_model(encoder_graph(*s.model), info));
  write("onnx/decoder_model_merged.onnx", serialize_model(decoder_graph(*s.model), info));
  const setup::Config& c = s.config;
  write("config.json", json(hf_config(c, s.src_tokenizer.vocab_size(), s.tgt_tokenizer.vocab_size())));
  write("generation_config.json", json(hf_generation_config(c)));
  if (c.shared_vocab) {
    write("tokenizer.json", json(hf_tokenizer(s.src_tokenizer)));
    write("translate.html", translate_page(c));
  } else {
    write("source_tokenizer.json", json(hf_tokenizer(s.src_tokenizer)));
    write("target_tokenizer.json", json(hf_tokenizer(s.tgt_tokenizer)));
  }
  write("tokenizer_config.json", json(hf_tokenizer_config(c)));
  return written;
}

}  // namespace

std::vector<WrittenFile> export_folder(const infer::Session& session, const std::string& out) {
  fs::path folder = fs::path(out).lexically_normal();
  if (!folder.has_filename()) folder = folder.parent_path();  // "DIR/" names DIR
  require_new_folder(folder);
  fs::path temporary = folder;
  temporary += ".tmp-" + std::to_string(getpid());
  std::error_code ec;
  fs::remove_all(temporary, ec);  // a folder of an earlier process of this id, killed
  try {
    std::vector<WrittenFile> written = write_files(session, temporary);
    // rename() replaces an empty folder of that name, atomically.
    if (file_steps::rename(temporary.string(), folder.string()) != 0)
      fail(folder.string(), ": cannot rename the finished export into place (", std::strerror(errno), ")");
    sync_folder_of(folder.string());
    return written;
  } catch (const std::exception& e) {
    fs::remove_all(temporary, ec);
    rethrow_as(e, folder.string(), ": not written, nothing left behind: ", e.what());
  }
}

}  // namespace sf::onnx
