// Running the scratchformer command as a child process, as a user would:
// start it, signal it, wait for it, optionally under a file-size limit.
#pragma once
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "build_dir.h"
#include "train_helpers.h"

namespace sf::testing {

// Runs a shell command that must succeed; returns what it printed on stdout.
inline std::string capture(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) out += buffer;
  CHECK(pclose(pipe) == 0);
  return out;
}

// The same, as lines without their '\n'.
inline std::vector<std::string> capture_lines(const std::string& command) {
  std::vector<std::string> lines;
  std::istringstream out(capture(command));
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  return lines;
}

// Starts `program` with `args` in the background, stdout and stderr to
// `log`. With `file_size_limit` (bytes) no file it writes may grow past it,
// as on a full disk. `env` holds NAME=VALUE settings added to its environment.
inline pid_t spawn_program(const std::string& program, const std::vector<std::string>& args, const fs::path& log,
                           std::optional<rlim_t> file_size_limit = std::nullopt,
                           const std::vector<std::string>& env = {}) {
  pid_t pid = fork();
  if (pid == 0) {
    for (const std::string& setting : env) putenv(const_cast<char*>(setting.c_str()));
    FILE* out = std::fopen(log.c_str(), "w");
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(out), STDERR_FILENO);
    if (file_size_limit) {
      rlimit limit{*file_size_limit, *file_size_limit};
      setrlimit(RLIMIT_FSIZE, &limit);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// The same for the scratchformer command, as a user would run it.
inline pid_t spawn(const std::vector<std::string>& args, const fs::path& log,
                   std::optional<rlim_t> file_size_limit = std::nullopt, const std::vector<std::string>& env = {}) {
  return spawn_program(scratchformer_binary(), args, log, file_size_limit, env);
}

// The exit code of a process that exited, or minus the signal that ended it
// (a shell's 128 + signal would not tell SIGINT from exit code 130).
inline int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status); }

inline int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return exit_code(status);
}

inline int run(const std::vector<std::string>& args, const fs::path& log,
               std::optional<rlim_t> file_size_limit = std::nullopt, const std::vector<std::string>& env = {}) {
  return wait_exit(spawn(args, log, file_size_limit, env));
}

// Waits until `path` has at least `lines` lines (or the process ended).
inline void wait_for_lines(const fs::path& path, size_t lines, pid_t pid) {
  for (int i = 0; i < 6000; ++i) {
    std::string text = read_file(path);
    if (static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) >= lines) return;
    if (waitpid(pid, nullptr, WNOHANG) != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace sf::testing
