#include "atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "error.h"

namespace sf {

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)), temporary_(path_ + ".tmp") {
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path_, ": cannot write (", std::strerror(errno), ")");
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    // A full disk shows as ENOSPC, a file-size limit as EFBIG (SIGXFSZ is
    // ignored by the command line so that the limit is an error, not a kill).
    if (n <= 0) fail(path_, ": cannot write (", n < 0 ? std::strerror(errno) : "no progress", ")");
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) fail(path_, ": cannot write (", std::strerror(errno), ")");
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(path_, ": cannot write (", std::strerror(errno), ")");
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0)
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
  ::fsync(fd);
  ::close(fd);
}

}  // namespace sf
