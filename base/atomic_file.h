// Writing a file so that a crash, a kill or a full disk never leaves a damaged
// file under its real name: the bytes go to a temporary file beside it
// ("NAME.tmp"), which is flushed to the disk (fsync) and then renamed over the
// real name. A rename within one folder is atomic on POSIX file systems, so a
// reader sees either the old file or the whole new one. A write that fails
// (ENOSPC, EFBIG under a file-size limit, EIO) raises sf::Error naming the file
// and the reason, and the temporary file is removed.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>

namespace sf {

class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);  // creates the temporary file
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();  // not committed: the temporary file is removed

  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Flushes the temporary file to the disk and renames it into place.
  void commit();

 private:
  void write_through(const char* data, size_t bytes);
  void flush();

  std::string path_, temporary_;
  // Small pieces (a checkpoint's many small tensors) are gathered into large
  // writes: fewer system calls.
  std::string buffer_;
  int fd_ = -1;
  bool committed_ = false;
};

void write_file_atomically(const std::string& path, std::string_view text);

// Flushes a folder's entries (a rename into it) to the disk; best effort.
void sync_folder_of(const std::string& path);

// Makes `folder` and each missing folder above it, each followed by an fsync
// of its parent: a new folder's name is an entry of its parent, so without it
// a power cut could take the folder and every file saved in it. Returns the
// error of the first that could not be made (a file in the way above it); a
// file in place of `folder` itself is left to the caller, whose first write
// there fails.
std::error_code make_folders(const std::string& folder);
// The same, raising sf::Error naming the folder and the reason.
void make_folders_or_fail(const std::string& folder);

}  // namespace sf
