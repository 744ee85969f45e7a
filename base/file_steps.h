// The file-system steps that save a file or a checkpoint (make a folder,
// create a temporary file, write, fsync, link, rename, unlink), each made
// through one function here so that a test can stop the program between any
// two of them.
//
// Why: a save is safe only if a kill between any two of its steps leaves a
// loadable checkpoint, and the steps that decide it (a link, a rename) take
// microseconds, so kills at random moments almost never land on them. The
// environment variable SCRATCHFORMER_FILE_STEPS, read at the first step,
// numbers the steps of the process from 1 and acts on one of them:
//   list      prints "file step N: WHAT PATH" to stderr after each step
//   KILL:N    raises SIGKILL right after step N (a crash there)
//   INT:N     raises SIGINT right after step N (a user's Ctrl-C there)
//   STOP:N    raises SIGSTOP right after step N (a test then fills the disk
//             and lets the process continue)
//   ENOSPC:N  fails every write after step N with ENOSPC, as a disk that
//             filled up there would (where a test cannot mount a small one)
//   POWER:N   loses, right after step N, what a power cut would: the data
//             written since each file's last fsync and the names changed
//             since each folder's last fsync; then raises SIGKILL. (A kill
//             alone loses neither: the page cache keeps them.)
// Unset, as outside the tests, a step costs about 65 instructions more than
// its system call (measured with callgrind: docs/checkpoints.md).
//
// Each function returns what the system call returns, errno included.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <string>

namespace sf::file_steps {

int create(const std::string& path);  // open for writing, created or emptied
ssize_t write(int fd, const void* data, size_t bytes, const std::string& path);
int fsync(int fd, const std::string& path);
int link(const std::string& from, const std::string& to);
int rename(const std::string& from, const std::string& to);
int unlink(const std::string& path);
int make_folder(const std::string& path);  // mkdir; a power loss takes it, and all in it, until its parent is fsynced

}  // namespace sf::file_steps
