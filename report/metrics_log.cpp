#include "metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file_steps.h"

namespace sf::report {

using nlohmann::json;

int64_t restart_metrics(const std::string& path, bool resumed, int64_t global_step) {
  std::string kept;
  int64_t unreadable = 0;
  if (resumed) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!r.is_object())
        ++unreadable;
      else if (r.value("step", INT64_MAX) <= global_step)
        kept += line + "\n";
    }
  }
  write_file_atomically(path, kept);
  return unreadable;
}

// The line goes at the end in one write, so a kill leaves at most the last
// line cut short. A write the disk has no room for is cut back off: a full
// disk leaves no half line.
static void append_line(const std::string& path, const nlohmann::ordered_json& record) {
  const std::string line = record.dump() + "\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, ": cannot write (", std::strerror(errno), ")");
  struct stat before {};
  if (::fstat(fd, &before) != 0) {
    int error = errno;
    ::close(fd);
    fail(path, ": cannot write (", std::strerror(error), ")");
  }
  ssize_t written = file_steps::write(fd, line.data(), line.size(), path);
  // A short write means the disk filled up part way.
  int error = written < 0 ? errno : ENOSPC;
  bool whole = written == static_cast<ssize_t>(line.size());
  if (!whole && written > 0 && ::ftruncate(fd, before.st_size) != 0) error = errno;
  if (::close(fd) != 0 && whole) {
    whole = false;
    error = errno;
  }
  if (!whole) fail(path, ": cannot write (", std::strerror(error), ")");
}

void append_metrics(const std::string& path, const StepRecord& r) {
  append_line(path, {{"kind", "step"}, {"epoch", r.epoch},         {"step", r.step},          {"loss", r.loss},
                     {"lr", r.lr},     {"grad_norm", r.grad_norm}, {"tokens_per_s", r.tokens_per_s}, {"time", r.time}});
}

void append_metrics(const std::string& path, const ValidRecord& r) {
  nlohmann::ordered_json record = {{"kind", "valid"}, {"epoch", r.epoch}, {"step", r.step}, {"loss", r.loss}};
  eval::add_scores(record, r.scores);
  append_line(path, record);
}

void sync_metrics(const std::string& path) {
  // Opened as for appending, which refuses a folder in its place. A file the
  // run cannot append to holds no line to keep (the next append says why),
  // and the checkpoint that follows must still be saved.
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return;
  int result = file_steps::fsync(fd, path);
  int error = errno;
  ::close(fd);
  if (result != 0) fail(path, ": cannot write (", std::strerror(error), ")");
}

void read_metrics(const std::string& path, std::vector<StepRecord>& steps, std::vector<ValidRecord>& valid) {
  // A number, or NaN when missing or not a number (JSON has no NaN: null).
  auto number = [](const json& r, const char* key) {
    auto it = r.find(key);
    return it != r.end() && it->is_number() ? it->get<double>() : NAN;
  };
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!r.is_object() || !std::isfinite(number(r, "epoch")) || !std::isfinite(number(r, "step"))) continue;
    int64_t epoch = r["epoch"].get<int64_t>(), step = r["step"].get<int64_t>();
    if (r.value("kind", "") == "step") {
      steps.push_back({epoch, step, float(number(r, "loss")), float(number(r, "lr")), float(number(r, "grad_norm")),
                       number(r, "tokens_per_s"), number(r, "time")});
    } else if (r.value("kind", "") == "valid") {
      valid.push_back({epoch, step, number(r, "loss"), {}});
      for (const eval::Metric& m : eval::metrics()) valid.back().scores.values.push_back(number(r, m.name));
    }
  }
}

}  // namespace sf::report
