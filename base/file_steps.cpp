#include "file_steps.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "error.h"

namespace sf::file_steps {

namespace {

enum class Action { none, list, kill, interrupt, stop, disk_full };

struct Plan {
  Action action = Action::none;
  long long at = 0;  // the step after which `action` happens
  long long done = 0;
};

Plan read_plan() {
  Plan plan;
  const char* text = std::getenv("SCRATCHFORMER_FILE_STEPS");
  if (!text || !*text) return plan;
  std::string_view value = text;
  if (value == "list") {
    plan.action = Action::list;
    return plan;
  }
  for (auto [name, action] : {std::pair{"KILL:", Action::kill}, std::pair{"INT:", Action::interrupt},
                              std::pair{"STOP:", Action::stop}, std::pair{"ENOSPC:", Action::disk_full}}) {
    if (!value.starts_with(name)) continue;
    char* end = nullptr;
    plan.at = std::strtoll(text + std::string_view(name).size(), &end, 10);
    if (end != text + value.size() || plan.at < 0) break;
    plan.action = action;
    return plan;
  }
  internal_fail("SCRATCHFORMER_FILE_STEPS: expected list, KILL:N, INT:N, STOP:N or ENOSPC:N, got '", value, "'");
}

Plan& plan() {
  static Plan p = read_plan();
  return p;
}

// Counts the step just made and does what the plan says there; errno is kept.
void after(const char* what, const std::string& path) {
  Plan& p = plan();
  if (p.action == Action::none) return;
  int saved_errno = errno;
  ++p.done;
  if (p.action == Action::list) std::fprintf(stderr, "file step %lld: %s %s\n", p.done, what, path.c_str());
  if (p.done == p.at) {
    if (p.action == Action::kill) ::raise(SIGKILL);
    if (p.action == Action::interrupt) ::raise(SIGINT);
    if (p.action == Action::stop) ::raise(SIGSTOP);
  }
  errno = saved_errno;
}

}  // namespace

int create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  after("create", path);
  return fd;
}

ssize_t write(int fd, const void* data, size_t bytes, const std::string& path) {
  const Plan& p = plan();
  ssize_t n;
  if (p.action == Action::disk_full && p.done >= p.at) {
    errno = ENOSPC;
    n = -1;
  } else {
    n = ::write(fd, data, bytes);
  }
  after("write", path);
  return n;
}

int fsync(int fd, const std::string& path) {
  int result = ::fsync(fd);
  after("fsync", path);
  return result;
}

int link(const std::string& from, const std::string& to) {
  int result = ::link(from.c_str(), to.c_str());
  after("link", to);
  return result;
}

int rename(const std::string& from, const std::string& to) {
  int result = ::rename(from.c_str(), to.c_str());
  after("rename", to);
  return result;
}

int unlink(const std::string& path) {
  int result = ::unlink(path.c_str());
  after("unlink", path);
  return result;
}

}  // namespace sf::file_steps
