// {experiment_name}/metrics.jsonl, one JSON object a line (docs/10-formats.md):
// the one place that knows its keys. The trainer writes it, the report reads it.
#pragma once
#include <string>
#include <vector>

#include "eval/metrics.h"

namespace sf::report {

// {"kind": "step", "epoch", "step", "loss", "lr", "grad_norm", "tokens_per_s", "time"}
// per optimizer step; time: seconds since the run (or its resumption) started.
struct StepRecord {
  int64_t epoch = 0, step = 0;
  float loss = 0, lr = 0, grad_norm = 0;  // a non-finite value is written as null, read as NaN
  double tokens_per_s = 0, time = 0;
};
// {"kind": "valid", "epoch", "step", "loss", then each metric of metrics() by name}
// per validation; a metric a line lacks is read as NaN.
struct ValidRecord {
  int64_t epoch = 0, step = 0;
  double loss = 0;
  eval::Scores scores;
};

// Starts the file: a fresh run empties it; a resumed run keeps the records up
// to `global_step` (a killed run's later ones are written again) and drops
// the lines that are no JSON object, returning how many: a run killed while
// appending leaves its last line cut short.
int64_t restart_metrics(const std::string& path, bool resumed, int64_t global_step);
// One line at the end, written with one call: a killed run leaves at most a
// last line cut short, which read_metrics skips (as any line that is no
// record). A write that fails (a full disk) leaves the file as it was.
void append_metrics(const std::string& path, const StepRecord& record);
void append_metrics(const std::string& path, const ValidRecord& record);
// Flushes the lines appended so far to the disk: appending does not (an fsync
// a step would cost more than the line), so the trainer calls it before each
// checkpoint, and a power cut never takes lines older than the checkpoint that
// survived it. A write the disk failed raises sf::Error.
void sync_metrics(const std::string& path);
void read_metrics(const std::string& path, std::vector<StepRecord>& steps, std::vector<ValidRecord>& valid);

}  // namespace sf::report
