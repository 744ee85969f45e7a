#include "atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "error.h"
#include "file_steps.h"

namespace sf {

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)), temporary_(path_ + ".tmp") {
  fd_ = file_steps::create(temporary_);
  if (fd_ < 0) fail(path_, ": cannot write (", std::strerror(errno), ")");
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) file_steps::unlink(temporary_);
}

namespace {
constexpr size_t kBufferBytes = size_t{1} << 20;
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  if (buffer_.size() + bytes > kBufferBytes) flush();
  if (bytes >= kBufferBytes) {
    write_through(p, bytes);
  } else {
    buffer_.append(p, bytes);
  }
}

void AtomicFileWriter::flush() {
  write_through(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void AtomicFileWriter::write_through(const char* p, size_t bytes) {
  while (bytes > 0) {
    ssize_t n = file_steps::write(fd_, p, bytes, temporary_);
    if (n < 0 && errno == EINTR) continue;
    // A full disk shows as ENOSPC, a file-size limit as EFBIG (SIGXFSZ is
    // ignored by the command line so that the limit is an error, not a kill).
    if (n <= 0) fail(path_, ": cannot write (", n < 0 ? std::strerror(errno) : "no progress", ")");
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  flush();
  if (file_steps::fsync(fd_, temporary_) != 0) fail(path_, ": cannot write (", std::strerror(errno), ")");
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(path_, ": cannot write (", std::strerror(errno), ")");
  if (file_steps::rename(temporary_, path_) != 0)
    fail(path_, ": cannot rename ", temporary_, " into place (", std::strerror(errno), ")");
  committed_ = true;
  sync_folder_of(path_);
}

void write_file_atomically(const std::string& path, std::string_view text) {
  AtomicFileWriter out(path);
  out.write(text);
  out.commit();
}

void sync_folder_of(const std::string& path) {
  std::string folder = std::filesystem::path(path).parent_path().string();
  int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  file_steps::fsync(fd, folder.empty() ? "." : folder);
  ::close(fd);
}

std::error_code make_folders(const std::string& folder) {
  std::filesystem::path path = std::filesystem::path(folder).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "run/": the folder is "run"
  std::vector<std::filesystem::path> missing;  // the deepest first
  std::error_code ec;
  for (; !path.empty() && !std::filesystem::exists(path, ec); path = path.parent_path()) missing.push_back(path);
  for (auto made = missing.rbegin(); made != missing.rend(); ++made) {
    if (file_steps::make_folder(made->string()) != 0 && errno != EEXIST) return {errno, std::generic_category()};
    sync_folder_of(made->string());
  }
  return {};
}

void make_folders_or_fail(const std::string& folder) {
  if (std::error_code ec = make_folders(folder)) fail(folder, ": cannot create the folder (", ec.message(), ")");
}

}  // namespace sf
