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

// Waits until `path` has at least `lines` lines, written by the process
// `pid`; returns "" then. If the process ends first, or `patience` passes,
// returns which lines never came: the file, how many it has of those
// awaited, and why the wait ended. The process is not reaped (WNOWAIT): its
// exit status stays for the caller's wait.
inline std::string lines_missing(const fs::path& path, size_t lines, pid_t pid, std::chrono::milliseconds patience) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    // Whether it had ended before the file is read: then the file holds all
    // it will ever write.
    siginfo_t end{};
    const bool ended =
        waitid(P_PID, static_cast<id_t>(pid), &end, WEXITED | WNOHANG | WNOWAIT) == 0 && end.si_pid == pid;
    const std::string text = read_file(path);
    const size_t seen = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    if (seen >= lines) return "";
    if (ended || std::chrono::steady_clock::now() - start >= patience) {
      std::ostringstream why;
      why << path.string() << " has " << seen << " of the " << lines << " lines awaited: ";
      if (!ended)
        why << "the wait ran out after " << std::chrono::duration<double>(patience).count() << " s";
      else if (end.si_code == CLD_EXITED)
        why << "the process ended first, with exit status " << end.si_status;
      else
        why << "the process ended first, by signal " << end.si_status;
      return why.str();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// lines_missing with a minute's patience, for a test that goes on to signal
// the process at that point: if the lines never come, the test fails there,
// naming them, after it has ended the process, which would train on alone.
inline void wait_for_lines(const fs::path& path, size_t lines, pid_t pid) {
  const std::string missing = lines_missing(path, lines, pid, std::chrono::minutes(1));
  if (missing.empty()) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  FAIL(missing);
}

}  // namespace sf::testing
