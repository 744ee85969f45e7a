// The fuzz targets' scratch files.
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "targets.h"

namespace sf::fuzz {

namespace {

namespace fs = std::filesystem;

// In memory (/dev/shm) when the system has it and TMPDIR does not say
// otherwise: a fuzzer writes a file per input, and a disk makes that the slow part.
fs::path temporary_folder() {
  std::error_code ec;
  if (!std::getenv("TMPDIR") && fs::is_directory("/dev/shm", ec)) return "/dev/shm";
  return fs::temp_directory_path();
}

// One folder per process, so that parallel fuzzers and tests never share files.
class ScratchFolder {
 public:
  ScratchFolder() : path_(temporary_folder() / (kPrefix + std::to_string(getpid()))) {
    remove_orphans();
    fs::create_directories(path_);
  }
  ~ScratchFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  static constexpr const char* kPrefix = "scratchformer-fuzz-";

  // A process that crashed (a finding) could not remove its folder: the
  // folders of processes no longer running go now.
  void remove_orphans() const {
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator(path_.parent_path(), ec)) {
      std::string name = entry.path().filename().string();
      if (!name.starts_with(kPrefix)) continue;
      pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + std::strlen(kPrefix)));
      if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
    }
  }

  fs::path path_;
};

}  // namespace

std::string scratch_file(const std::string& name, std::string_view bytes) {
  static ScratchFolder folder;
  std::string path = (folder.path() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write the scratch file " + path);
  return path;
}

std::pair<std::string_view, std::string_view> split_at_nul(std::string_view input) {
  size_t nul = input.find('\0');
  if (nul == std::string_view::npos) return {input, {}};
  return {input.substr(0, nul), input.substr(nul + 1)};
}

}  // namespace sf::fuzz
