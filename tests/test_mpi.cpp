// Data-parallel training under mpirun (make MPI=1): N ranks take the steps
// one process takes on the whole batch, resume exactly, stop together, and a
// rank that dies, hangs or reads other data ends the job with a clear error.
//
// The suite "mpi" runs the MPI variant of the command under Open MPI's mpirun,
// so it is skipped unless asked for: `make test` installs Open MPI, builds
// build/mpi/scratchformer and then runs `build/tests -ts=mpi --no-skip`.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "autograd/safetensors.h"
#include "cli_process.h"
#include "skip.h"
#include "autograd/ops.h"
#include "base/random.h"
#include "setup/checkpoints.h"
#include "dist/data_parallel.h"
#include "infer/inference.h"

using namespace sf;
using namespace sf::dist;
using namespace sf::testing;

namespace {

// `variant` "" or "opencl/": the plain build's commands or the OpenCL build's.
std::string mpi_binary(const std::string& variant = "") {
  return build_path(variant + "mpi/scratchformer");
}
std::string single_binary(const std::string& variant = "") {
  return build_path(variant + "scratchformer");
}

// Starts the program argv[0] (looked up in PATH), output to `log`, with
// `env` added to its environment.
pid_t spawn_program(const std::vector<std::string>& argv, const fs::path& log, const std::vector<std::string>& env) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::fopen(log.c_str(), "w");
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(out), STDERR_FILENO);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> c_argv;
    for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
    c_argv.push_back(nullptr);
    execvp(c_argv[0], c_argv.data());
    _exit(127);
  }
  return pid;
}

// mpirun and its options: root is how CI runs, more ranks than cores is
// what the 3-rank test asks for, and ranks are not pinned to one core each.
const std::vector<std::string> kMpirun = {"mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"};

// mpirun's options for ranks that talk over TCP only, as ranks on two
// machines do (Open MPI's shared-memory transport left out, and the
// communicator's sums in shared memory too).
const std::vector<std::string> kTcpOnly = {"--mca", "btl", "self,tcp", "-x", "SCRATCHFORMER_MPI_SHARED_SUMS=0"};

// Starts `mpirun [OPTIONS] -np ranks build/mpi/scratchformer ARGS...` (or,
// with ranks 0, the plain command alone), output to `log`.
pid_t spawn_ranks(int ranks, const std::vector<std::string>& args, const fs::path& log,
                  const std::vector<std::string>& env = {}, const std::string& variant = "",
                  const std::vector<std::string>& mpirun_options = {}) {
  std::vector<std::string> argv = {single_binary(variant)};
  if (ranks > 0) {
    argv = kMpirun;
    argv.insert(argv.end(), mpirun_options.begin(), mpirun_options.end());
    argv.insert(argv.end(), {"-np", std::to_string(ranks), mpi_binary(variant)});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return spawn_program(argv, log, env);
}

int run_ranks(int ranks, const std::vector<std::string>& args, const fs::path& log, const std::string& variant = "",
              const std::vector<std::string>& mpirun_options = {}) {
  int status = wait_exit(spawn_ranks(ranks, args, log, {}, variant, mpirun_options));
  if (status != 0) MESSAGE(read_file(log));
  return status;
}

std::vector<std::string> train_args(const std::string& config, const std::vector<std::string>& sets) {
  std::vector<std::string> args{"train", "--config", config};
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  return args;
}

// The largest relative difference ||a - b|| / ||b|| over the tensors of two
// weights files, but the attention's key biases. Their gradient is zero in
// exact arithmetic (adding q.b_k to every score of a row leaves its softmax
// unchanged), so in float it is rounding noise, which Adam divides by its own
// size into steps of up to about lr each: they take a random walk that any
// change in the order of a sum (here: summing the ranks' halves of a batch)
// sends elsewhere. Each run's walk reaches at most the sum of its steps'
// learning rates from the shared start, so two runs' biases are held to
// within `walks`, twice that sum.
double largest_relative_difference(const fs::path& a, const fs::path& b, double walks) {
  safetensors::Contents x = safetensors::load(a.string()), y = safetensors::load(b.string());
  REQUIRE(x.tensors.size() == y.tensors.size());
  double worst = 0;
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    REQUIRE(x.tensors[i].first == y.tensors[i].first);
    std::vector<float> u = x.tensors[i].second.to_vector(), v = y.tensors[i].second.to_vector();
    if (x.tensors[i].first.ends_with("w_k.bias")) {
      for (size_t k = 0; k < u.size(); ++k)
        CHECK_MESSAGE(std::fabs(double(u[k]) - v[k]) <= walks, x.tensors[i].first, "[", k, "]: ", u[k], " vs ", v[k]);
      continue;
    }
    double diff = 0, norm = 0;
    for (size_t k = 0; k < u.size(); ++k) {
      diff += (double(u[k]) - v[k]) * (double(u[k]) - v[k]);
      norm += double(v[k]) * v[k];
    }
    worst = std::max(worst, std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30));
  }
  return worst;
}

// The copy task with dropout 0: 640 training pairs, 20 batches of 32 (the last
// one 31 pairs), one epoch, so 20 optimizer steps.
std::string twenty_steps_config(const fs::path& dir) {
  return write_config(dir, std::string(R"("data": {"task": "copy", "size": 711}, "lang_src": "a", "lang_tgt": "b",
    "num_epochs": 1, "dropout": 0.0, "clip_grad_norm": 1.0, )") + kTiny);
}

// Figure `what` ("pairs", "label tokens", "empty shares") of each rank, from
// rank 0's summary line at the end of a run.
std::vector<int64_t> per_rank(const std::string& log, const std::string& what) {
  size_t at = log.find("per rank: ");
  REQUIRE(at != std::string::npos);
  at = log.find(what + " ", at);
  REQUIRE(at != std::string::npos);
  std::vector<int64_t> figures;
  for (const char* p = log.c_str() + at + what.size() + 1;;) {
    char* end = nullptr;
    figures.push_back(std::strtoll(p, &end, 10));
    // ", " and the next rank's figure, or the next figure's name.
    if (end[0] != ',' || !std::isdigit(static_cast<unsigned char>(end[2]))) return figures;
    p = end + 2;
  }
}

// The training pairs of a run, from its "data: N training pairs" line.
int64_t training_pairs(const std::string& log) {
  size_t at = log.find("data: ");
  REQUIRE(at != std::string::npos);
  return std::stoll(log.substr(at + 6));
}

// The model's parameters, from a run's "model: N parameters" line.
int64_t model_parameters(const std::string& log) {
  size_t at = log.find("model: ");
  REQUIRE(at != std::string::npos);
  return std::stoll(log.substr(at + 7));
}

// For the gradient norm of the run's last step, each rank took the squares
// of its own runs of the gradients alone: together every parameter, once.
void check_each_rank_squared_its_runs(const std::string& log, int ranks) {
  const std::vector<int64_t> squared = per_rank(log, "gradient elements squared in the last step");
  REQUIRE(squared.size() == size_t(ranks));
  int64_t all = 0;
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    CHECK(squared[r] < model_parameters(log));
    all += squared[r];
  }
  CHECK(all == model_parameters(log));
}

// Every rank ran every gradient sum in shared memory (`shared`), or every
// one by messages. Either way the sums are right: only these counts tell.
void check_sum_paths(const std::string& log, int ranks, bool shared) {
  const std::vector<int64_t> in_shared_memory = per_rank(log, "gradient sums in shared memory"),
                             by_messages = per_rank(log, "by messages");
  REQUIRE(in_shared_memory.size() == size_t(ranks));
  REQUIRE(by_messages.size() == size_t(ranks));
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    CHECK((shared ? in_shared_memory : by_messages)[r] > 0);
    CHECK((shared ? by_messages : in_shared_memory)[r] == 0);
  }
}

// The step records of a run's metrics.jsonl.
std::vector<nlohmann::json> step_records(const fs::path& dir) {
  std::vector<nlohmann::json> records;
  std::ifstream in(dir / "run/metrics.jsonl");
  for (std::string line; std::getline(in, line);)
    if (nlohmann::json j = nlohmann::json::parse(line); j["kind"] == "step") records.push_back(j);
  return records;
}

// One process and `ranks` ranks train the same config; returns how far apart
// their final weights are, after checking both took the same number of steps.
// Each rank trained on a share of every batch: the shares' pairs sum to the
// epoch's, and no rank had them all. Each rank squared its own runs of the
// gradients, and summed them in shared memory, unless `mpirun_options` take
// it away (TCP only, or no room in it): then by messages.
double distance_from_one_process(int ranks, const std::vector<std::string>& sets, const fs::path& reference_dir,
                                 const fs::path& parallel_dir, const std::string& variant = "",
                                 const std::vector<std::string>& mpirun_options = {}) {
  std::string one = twenty_steps_config(reference_dir), many = twenty_steps_config(parallel_dir);
  REQUIRE(run_ranks(0, train_args(one, sets), reference_dir / "log", variant) == 0);
  REQUIRE(run_ranks(ranks, train_args(many, sets), parallel_dir / "log", variant, mpirun_options) == 0);
  const std::string log = read_file(parallel_dir / "log");
  const std::vector<int64_t> pairs = per_rank(log, "pairs"), tokens = per_rank(log, "label tokens");
  REQUIRE(pairs.size() == size_t(ranks));
  REQUIRE(tokens.size() == size_t(ranks));
  int64_t all_pairs = 0;
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    all_pairs += pairs[r];
    CHECK(pairs[r] < training_pairs(log));
    CHECK(tokens[r] > 0);
  }
  CHECK(all_pairs == training_pairs(log));
  check_each_rank_squared_its_runs(log, ranks);
  check_sum_paths(log, ranks, mpirun_options.empty());
  // Every step's loss and gradient norm (before clipping) agree too.
  std::vector<nlohmann::json> steps = step_records(reference_dir), parallel = step_records(parallel_dir);
  CHECK(steps.size() >= 10);
  REQUIRE(parallel.size() == steps.size());
  for (size_t i = 0; i < steps.size(); ++i)
    for (const char* key : {"loss", "grad_norm"}) {
      double want = steps[i][key], got = parallel[i][key];
      CHECK_MESSAGE(std::fabs(got - want) <= 1e-5 * std::fabs(want), "step ", i + 1, " ", key, ": ", got, " vs ", want);
    }
  double lr_sum = 0;
  for (const nlohmann::json& step : steps) lr_sum += step["lr"].get<double>();
  double d = largest_relative_difference(parallel_dir / "weights/tmodel_00.safetensors",
                                         reference_dir / "weights/tmodel_00.safetensors", 2 * lr_sum);
  MESSAGE(ranks, " ranks vs 1 process, ", steps.size(), " steps: largest relative weight difference ", d);
  return d;
}

// The ranks of a job (mpirun's children), waited for until all are running.
std::vector<pid_t> ranks_of(pid_t mpirun, size_t count) {
  std::vector<pid_t> children;
  for (int tries = 0; tries < 500 && children.size() < count; ++tries) {
    children.clear();
    std::ifstream in("/proc/" + std::to_string(mpirun) + "/task/" + std::to_string(mpirun) + "/children");
    for (pid_t child; in >> child;) children.push_back(child);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return children;
}

// The copy task with dropout 0.1 for resume tests: 12 batches an epoch.
std::string resume_config(const fs::path& dir) {
  return write_config(dir, std::string(R"("data": {"task": "copy", "size": 420}, "lang_src": "a",
    "lang_tgt": "b", "dropout": 0.1, "num_epochs": 4, "grad_accum": 2, )") + kTiny);
}

// resume_config's settings for runs long enough to interrupt at a chosen
// step: 85 batches an epoch (43 steps), 2 epochs.
const std::vector<std::string> kLonger = {"data.size=3000", "num_epochs=2"};

// Waits until each process has ended (a job's ranks, which mpirun, ending
// first, may leave to finish alone); false if one is still there after 10 s.
bool all_ended(const std::vector<pid_t>& pids) {
  for (int tries = 0; tries < 500; ++tries) {
    bool running = false;
    for (pid_t pid : pids) {
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string id, name, state;
      running |= stat >> id >> name >> state && state != "Z";  // a zombie has ended
    }
    if (!running) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void check_same_files(const fs::path& a, const fs::path& b, const std::string& tag) {
  for (std::string file : {".safetensors", ".optim.safetensors"}) {
    CAPTURE(file);
    CHECK(read_file(a / "weights" / ("tmodel_" + tag + file)) == read_file(b / "weights" / ("tmodel_" + tag + file)));
  }
  CHECK(step_losses(a / "run/metrics.jsonl") == step_losses(b / "run/metrics.jsonl"));
  CHECK(step_losses(a / "run/metrics.jsonl", "valid") == step_losses(b / "run/metrics.jsonl", "valid"));
}

// Whether a command's (or a job's) whole output is one error line: no
// banner of Open MPI's after it, such as MPI_Abort's "MPI_ABORT was invoked".
bool one_error_line(const std::string& output) {
  return output.starts_with("scratchformer: error: ") && output.find('\n') == output.size() - 1;
}

// A job's output from its first error line on (rank 0 may have printed its
// progress before).
std::string from_error(const std::string& output) {
  return output.substr(std::min(output.find("scratchformer: error: "), output.size()));
}

// mpirun's MPMD form: a job of one rank in each of `folders` (rank r runs
// `args` in folders[r]).
std::vector<std::string> one_rank_in_each(const std::vector<fs::path>& folders, const std::vector<std::string>& args) {
  std::vector<std::string> argv = kMpirun;
  for (size_t r = 0; r < folders.size(); ++r) {
    if (r > 0) argv.push_back(":");
    argv.insert(argv.end(), {"-np", "1", "--wdir", folders[r].string(), mpi_binary()});
    argv.insert(argv.end(), args.begin(), args.end());
  }
  return argv;
}

}  // namespace

// The pieces of data parallelism that need no MPI, checked by hand.
TEST_CASE("data parallel: rank_share splits a batch of equal widths into contiguous shares differing by at most one") {
  for (size_t size = 0; size <= 9; ++size)
    for (int ranks = 1; ranks <= 4; ++ranks) {
      CAPTURE(size);
      CAPTURE(ranks);
      std::vector<size_t> batch(size), joined;
      for (size_t i = 0; i < size; ++i) batch[i] = 100 + 7 * i;
      const std::vector<PairWidths> widths(size, PairWidths{12, 11});
      for (int r = 0; r < ranks; ++r) {
        std::vector<size_t> share = rank_share(batch, widths, r, ranks);
        // The first size % ranks ranks take one more.
        CHECK(share.size() == size / ranks + (size_t(r) < size % ranks ? 1 : 0));
        joined.insert(joined.end(), share.begin(), share.end());
      }
      CHECK(joined == batch);
    }
  const std::vector<PairWidths> two{{4, 3}, {9, 8}};
  CHECK(rank_share({5, 6}, two, 2, 3).empty());  // fewer pairs than ranks: the last rank has none
}

// A share is padded to its longest source and target: its cost is its size
// times their sum. By hand: widths 3+2 four times, then 11+10 once, on 2
// ranks: equal counts (3 and 2 pairs) would cost 15 and 42; the longest
// pair alone costs 21, the four short ones 20.
TEST_CASE("data parallel: rank_share makes the costliest padded share as cheap as any contiguous split can") {
  const std::vector<size_t> batch{0, 1, 2, 3, 4};
  const std::vector<PairWidths> by_hand{{3, 2}, {3, 2}, {3, 2}, {3, 2}, {11, 10}};
  CHECK(rank_share(batch, by_hand, 0, 2) == std::vector<size_t>{0, 1, 2, 3});
  CHECK(rank_share(batch, by_hand, 1, 2) == std::vector<size_t>{4});

  auto cost = [](const std::vector<PairWidths>& w, size_t begin, size_t end) {
    int64_t source = 0, target = 0;
    for (size_t k = begin; k < end; ++k) source = std::max(source, w[k].source), target = std::max(target, w[k].target);
    return int64_t(end - begin) * (source + target);
  };
  // The least costliest share over every contiguous split, by trying them all.
  std::function<int64_t(const std::vector<PairWidths>&, size_t, int)> best = [&](const std::vector<PairWidths>& w,
                                                                                 size_t begin, int ranks) {
    if (ranks == 1) return cost(w, begin, w.size());
    int64_t least = std::numeric_limits<int64_t>::max();
    for (size_t end = begin; end <= w.size(); ++end)
      least = std::min(least, std::max(cost(w, begin, end), best(w, end, ranks - 1)));
    return least;
  };
  Rng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t size = rng.next_u64() % 10;
    const int ranks = 1 + int(rng.next_u64() % 4);
    std::vector<size_t> batch(size), joined;
    std::vector<PairWidths> widths;
    for (size_t i = 0; i < size; ++i) {
      batch[i] = 3 * i + 1;
      widths.push_back({2 + int64_t(rng.next_u64() % 20), 1 + int64_t(rng.next_u64() % 20)});
    }
    CAPTURE(trial);
    int64_t costliest = 0;
    for (int r = 0; r < ranks; ++r) {
      const std::vector<size_t> share = rank_share(batch, widths, r, ranks);
      const size_t begin = joined.size();
      joined.insert(joined.end(), share.begin(), share.end());
      costliest = std::max(costliest, cost(widths, begin, joined.size()));
    }
    CHECK(joined == batch);  // contiguous, in order, every example once
    CHECK(costliest == best(widths, 0, ranks));
  }
}

// A communicator that claims `ranks` ranks and moves nothing: the gradient
// buckets' layout depends on the ranks' number alone.
class LayoutOnly : public Communicator {
 public:
  explicit LayoutOnly(int ranks) : ranks_(ranks) {}
  int rank() const override { return 0; }
  int size() const override { return ranks_; }
  int local_rank() const override { return 0; }
  int local_size() const override { return ranks_; }
  void all_reduce_sum(std::span<double>) override {}
  void all_reduce_sum(std::span<int64_t>) override {}
  void all_reduce_max(std::span<int64_t>) override {}
  void broadcast(std::span<std::byte>, int) override {}
  void all_gather(std::span<const std::byte>, std::span<std::byte>) override {}
  void all_gather_in_place(const std::vector<Runs>&) override {}
  void gather_in_place(const std::vector<Runs>&, int) override {}
  Request start_all_reduce_sum(std::span<float>) override { return 0; }
  Request start_reduce_scatter_sum(std::span<float>, std::vector<int64_t>) override { return 0; }
  void wait(Request) override {}
  int64_t bytes_sent() const override { return 0; }
  void abort(int) override {}

 private:
  int ranks_;
};

// Rank `rank` of as many as `gathered` holds, to which an all-gather hands
// back `gathered`: what every rank sent, whatever this one sends.
class GathersThese : public LayoutOnly {
 public:
  GathersThese(int rank, std::vector<uint64_t> gathered)
      : LayoutOnly(static_cast<int>(gathered.size())), rank_(rank), gathered_(std::move(gathered)) {}
  int rank() const override { return rank_; }
  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    REQUIRE(mine.size() == sizeof(uint64_t));
    REQUIRE(all.size() == gathered_.size() * sizeof(uint64_t));
    std::memcpy(all.data(), gathered_.data(), all.size());
  }

 private:
  int rank_;
  std::vector<uint64_t> gathered_;
};

// Every rank sees every digest, so every rank fails, and with the kind of
// error that the writer alone prints (cli/main.cpp: the others wait for it to
// end the job instead of racing it to stderr on a busy machine).
TEST_CASE("data parallel: ranks that hold other data fail on every rank, with the error the writer speaks for") {
  for (int rank : {0, 1, 2}) {
    CAPTURE(rank);
    GathersThese differ(rank, {0xa, 0xa, 0xb});
    CHECK_THROWS_WITH_AS(check_same_on_every_rank(rank == 2 ? 0xb : 0xa, "data", "c.json", differ),
                         "c.json: rank 2 read other data than rank 0 (digest b vs a): every rank must train on the "
                         "same config and data",
                         ErrorOnEveryRank);
    GathersThese agree(rank, {0xa, 0xa, 0xa});
    CHECK_NOTHROW(check_same_on_every_rank(0xa, "data", "c.json", agree));
  }
}

TEST_CASE("data parallel: gradients are views into their buckets, each from a multiple of 64; zero's runs cut each "
          "bucket into equal runs") {
  for (int ranks : {1, 2, 3, 5}) {
    CAPTURE(ranks);
    NamedTensors params;
    Rng rng(7);
    for (int64_t n : {100, 1, 64, 1000, 37, 130}) {
      Tensor p = Tensor::from(std::vector<float>(static_cast<size_t>(n), 0.0f), {n});
      for (int64_t k = 0; k < n; ++k) p.data()[k] = static_cast<float>(rng.uniform()) - 0.5f;
      params.emplace_back(std::to_string(n) + " elements", p.set_requires_grad());
    }
    LayoutOnly comm(ranks);
    // Buckets of 1024 floats; reverse order, padded to 64: 192 + 64 | 1024 | 64 + 64 + 128.
    GradientReducer reducer(params, comm, 4096, true, /*zero=*/true);
    CHECK(reducer.buckets() == 3);
    CHECK(reducer.shard_runs().empty());  // until the first finish() fixes the buckets
    for (int step = 0; step < 2; ++step) {
      CAPTURE(step);
      Tensor loss;
      for (const auto& [name, p] : params) loss = loss.defined() ? loss + sum(p * p) : sum(p * p);
      run_backward(loss, Tensor::ones({}), reducer.hooks());
      reducer.finish();  // the first plans the buckets anew, in the order the gradients came
      for (const auto& named : params) {  // (no bindings: clang before 16 cannot capture them in CAPTURE)
        const auto& name = named.first;
        const auto& p = named.second;
        CAPTURE(name);
        for (int64_t k = 0; k < p.numel(); ++k) REQUIRE(p.grad().data()[k] == 2 * p.data()[k]);
      }
      std::vector<Tensor> before;
      for (const auto& [name, p] : params) before.push_back(p.grad());
      reducer.zero_grad();  // and the first moves the gradients into those buckets
      for (size_t i = 0; i < params.size(); ++i) {
        const auto& name = params[i].first;
        const auto& p = params[i].second;
        CAPTURE(name);
        CHECK(p.grad().to_vector() == std::vector<float>(static_cast<size_t>(p.numel()), 0.0f));
        CHECK(p.grad().same_storage(before[i]) == (step > 0));
        int in = 0;
        for (size_t b = 0; b < reducer.buckets(); ++b) {
          const Tensor& values = reducer.bucket_values(b);
          if (!p.grad().same_storage(values)) continue;
          ++in;
          const int64_t offset = p.grad().data() - values.data(), length = values.numel();
          CHECK(offset % 64 == 0);
          CHECK(offset + p.numel() <= length);
          // Rank r's run of the bucket (equal runs, on multiples of 64), met
          // with the parameter: rank r's run of the parameter.
          const int64_t run = (length / 64 + ranks - 1) / ranks * 64;
          REQUIRE(reducer.shard_runs()[i].size() == size_t(ranks) + 1);
          for (int r = 0; r <= ranks; ++r)
            CHECK(reducer.shard_runs()[i][r] == std::clamp(std::min(length, r * run) - offset, int64_t{0}, p.numel()));
          for (int r = 0; r < ranks; ++r) {
            CHECK(reducer.owned(r)[i].begin == reducer.shard_runs()[i][r]);
            CHECK(reducer.owned(r)[i].end == reducer.shard_runs()[i][r + 1]);
          }
        }
        CHECK(in == 1);
      }
    }
  }
}

TEST_CASE("data parallel: the first bucket is small, the last ones shrink towards backward's end, the others hold "
          "up to bucket_mb") {
  // Buckets of 4 MB (1M floats), but the first holds at most 1 MB (256k
  // floats), the last too (or one parameter), the one before it 2 MB; each
  // parameter from a multiple of 64 (100k floats take 100032).
  auto layout = [](std::vector<int64_t> reverse_order) {
    NamedTensors params;
    for (size_t k = reverse_order.size(); k-- > 0;)
      params.emplace_back(std::to_string(k), Tensor::zeros({reverse_order[k]}).set_requires_grad());
    LayoutOnly comm(2);
    GradientReducer reducer(params, comm, size_t{4} << 20);
    std::vector<int64_t> sizes;
    for (size_t b = 0; b < reducer.buckets(); ++b) sizes.push_back(reducer.bucket_values(b).numel());
    return sizes;
  };
  // Without the shrinking ones the last bucket would be 600k + 200k + 100k,
  // all of it summed only after backward.
  CHECK(layout({100000, 600000, 600000, 200000, 100000}) ==
        std::vector<int64_t>{100032, 600000, 600000, 200000, 100032});
  // A last parameter larger than 1 MB (an embedding) is the last bucket
  // alone; the 2 MB one before it takes what fits, the middle ones the rest.
  CHECK(layout({1024, 896000, 320000, 320000, 128000, 256000, 128000, 2000000}) ==
        std::vector<int64_t>{1024, 896000, 640000, 512000, 2000000});
  // A model no larger than the first bucket: one bucket.
  CHECK(layout({1000, 2000, 3000}) == std::vector<int64_t>{1024 + 2048 + 3008});
}

// Two ranks with the same gradients: a sum doubles a bucket, when it is
// waited for. Each wait is logged.
class DoublesOnWait final : public LayoutOnly {
 public:
  explicit DoublesOnWait(std::vector<std::string>& log) : LayoutOnly(2), log_(log) {}
  Request start_all_reduce_sum(std::span<float> values) override {
    started_.push_back(values);
    return static_cast<Request>(started_.size() - 1);
  }
  void wait(Request request) override {
    for (float& v : started_[static_cast<size_t>(request)]) v *= 2.0f;
    log_.push_back("wait");
  }

 private:
  std::vector<std::string>& log_;
  std::vector<std::span<float>> started_;
};

TEST_CASE("data parallel: finish() hands over each bucket once its sums are in: before the next wait with the overlap, "
          "after every wait without") {
  for (bool overlap : {true, false}) {
    CAPTURE(overlap);
    NamedTensors params;
    for (int64_t n : {100000, 200000, 600000, 600000, 100000}) {
      std::vector<float> values(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) values[static_cast<size_t>(k)] = static_cast<float>(k % 7) - 3.0f;
      params.emplace_back(std::to_string(n), Tensor::from(values, {n}).set_requires_grad());
    }
    std::vector<std::string> log;
    DoublesOnWait comm(log);
    GradientReducer reducer(params, comm, size_t{4} << 20, overlap);
    REQUIRE(reducer.buckets() == 5);
    Tensor loss;
    for (const auto& [name, p] : params) loss = loss.defined() ? loss + sum(p * p) : sum(p * p);
    run_backward(loss, Tensor::ones({}), reducer.hooks());
    std::vector<int> handed(params.size(), 0);
    reducer.finish([&](std::span<const size_t> which) {
      log.push_back("summed");
      for (size_t i : which) {
        ++handed[i];
        const Tensor& p = params[i].second;
        CAPTURE(params[i].first);
        CHECK(p.grad().to_vector() == (p * 4.0f).to_vector());  // d(p * p)/dp = 2p, summed over 2 ranks
      }
    });
    CHECK(handed == std::vector<int>(params.size(), 1));
    std::vector<std::string> in_turn, waits_first(5, "wait");
    for (int b = 0; b < 5; ++b) in_turn.insert(in_turn.end(), {"wait", "summed"});
    waits_first.resize(10, "summed");
    CHECK(log == (overlap ? in_turn : waits_first));
  }
}

TEST_SUITE("mpi" * doctest::skip()) {
  // And in shared memory, each sum where it should run. Where /dev/shm (Open
  // MPI's shared memory) has no room for every rank's buckets (77 MiB on 4
  // ranks; a container's default is 64 MB), as the communicator's statvfs
  // of it finds, the check leaves the largest out of that part and says how
  // much they need: a part skipped, which tools/run-tests holds against the
  // room there.
  TEST_CASE("mpi: the ring sums buckets of one element to several segments per chunk exactly, on 2, 3 and 4 ranks") {
    const std::string program = build_path("mpi/allreduce-bench");
    for (int ranks : {2, 3, 4}) {
      CAPTURE(ranks);
      TempDir dir;
      std::vector<std::string> argv = kMpirun;
      argv.insert(argv.end(), {"-np", std::to_string(ranks), program, "check"});
      const fs::path log = dir.path / "log";
      int status = wait_exit(spawn_program(argv, log, {}));
      const std::string output = read_file(log);
      CHECK_MESSAGE(status == 0, output);
      // "shared memory has no room for the buckets of ... all of them need N MiB"
      const std::string need = "all of them need ";
      if (const size_t at = output.find(need); at != std::string::npos) {
        const long long mib = std::stoll(output.substr(at + need.size()));
        skip_part(("/dev/shm has less than " + std::to_string(mib) + " MiB free: the shared sums' check on " +
                   std::to_string(ranks) + " ranks left its largest buckets out")
                      .c_str());
      }
    }
  }

  TEST_CASE("mpi: 20 steps on 2 ranks end with the weights of 20 steps of one process (dropout 0)") {
    TempDir one, two;
    CHECK(distance_from_one_process(2, {}, one.path, two.path) <= 1e-5);
  }

  TEST_CASE("mpi: zero 1 shards the optimizer state and changes nothing: same weights, same whole optimizer file") {
    TempDir one, sharded, unsharded;
    CHECK(distance_from_one_process(2, {"zero=1"}, one.path, sharded.path) <= 1e-5);
    CHECK(read_file(sharded.path / "log").find("optimizer state sharded") != std::string::npos);
    // Without clipping (whose norm ZeRO sums from the ranks' pieces, in
    // another order): Adam is element-wise, so the shards update exactly what
    // the whole would.
    const std::vector<std::string> unclipped{"clip_grad_norm=null"};
    fs::remove_all(sharded.path / "weights");
    REQUIRE(run_ranks(2, train_args(twenty_steps_config(sharded.path), {"zero=1", "clip_grad_norm=null"}),
                      sharded.path / "log") == 0);
    REQUIRE(run_ranks(2, train_args(twenty_steps_config(unsharded.path), unclipped), unsharded.path / "log") == 0);
    for (std::string file : {"weights/tmodel_00.safetensors", "weights/tmodel_00.optim.safetensors"}) {
      CAPTURE(file);
      CHECK(read_file(sharded.path / file) == read_file(unsharded.path / file));
    }
    // A sharded step's reduce-scatter and all-gather send no more than a
    // plain step's all-reduce: the buckets' padding to multiples of 64, which
    // the all-gather of the parameters leaves out, makes them a little less.
    // An all-reduce and an all-gather would send 1.5 times as much.
    auto sent = [](const fs::path& dir) {
      std::vector<int64_t> bytes = per_rank(read_file(dir / "log"), "sent in the last step");
      REQUIRE(bytes.size() == 2);
      return bytes[0] + bytes[1];
    };
    CHECK(sent(sharded.path) <= sent(unsharded.path));
    CHECK(sent(sharded.path) > sent(unsharded.path) * 3 / 4);
  }

  TEST_CASE("mpi: zero 1 on 3 ranks, a batch split unevenly, matches one process") {
    TempDir one, three;
    CHECK(distance_from_one_process(3, {"zero=1", "batch_size=7", "data.size=150"}, one.path, three.path) <= 1e-5);
  }

  TEST_CASE("mpi: over TCP only, as ranks on two machines talk, 2 ranks match one process") {
    TempDir one, two;
    CHECK(distance_from_one_process(2, {}, one.path, two.path, "", kTcpOnly) <= 1e-5);
  }

  TEST_CASE("mpi: without room in shared memory the ranks sum by messages, say so once, and match one process") {
    TempDir one, two;
    const std::vector<std::string> no_room = {"--mca", "osc_sm_backing_directory", "/nonexistent"};
    CHECK(distance_from_one_process(2, {}, one.path, two.path, "", no_room) <= 1e-5);
    const std::string log = read_file(two.path / "log"), line = "/nonexistent has no room for the gradient buckets";
    CHECK(log.find(line) != std::string::npos);
    CHECK(log.find(line) == log.rfind(line));
  }

  TEST_CASE("mpi: gradient accumulation 2 on 2 ranks matches one process") {
    TempDir one, two;
    CHECK(distance_from_one_process(2, {"grad_accum=2"}, one.path, two.path) <= 1e-5);
  }

  TEST_CASE("mpi: an odd global batch split unevenly across 3 ranks matches one process") {
    TempDir one, three;
    // 7 = 3 + 2 + 2 pairs a batch; 134 training pairs make 19 such batches
    // and a last one of 1 pair, in which ranks 1 and 2 have none.
    CHECK(distance_from_one_process(3, {"batch_size=7", "data.size=150"}, one.path, three.path) <= 1e-5);
    CHECK(training_pairs(read_file(three.path / "log")) == 134);
    CHECK(per_rank(read_file(three.path / "log"), "empty shares") == std::vector<int64_t>{0, 1, 1});
  }

  // One batch of mixed lengths: four pairs of one word and one of ten (the
  // batch sorted by length). A share is padded to its longest source and
  // target, framed: 3 + 2 wide for one word, 12 + 11 for ten. Equal counts,
  // 3 and 2 pairs, would cost 15 and 46; the four short pairs cost 20, the
  // long one alone 23. Two epochs of that one batch: two steps, the second
  // with the runs each rank squares fixed by the first.
  TEST_CASE("mpi: on a batch of mixed lengths the ranks share the pairs by padded cost, and each squares its own "
            "runs") {
    TempDir dir;
    std::ofstream(dir.path / "train.tsv") << "a\tb\nc\td\ne\tf\ng\th\n"
                                          << "i j k l m n o p q r\ts t u v w x y z ab ac\n";
    std::string config = write_config(dir.path, R"("data": {"train": ")" + (dir.path / "train.tsv").string() +
                                                    R"("}, "lang_src": "en", "lang_tgt": "de", "num_epochs": 2, )" +
                                                    R"("val_fraction": 0.0, )" + kTiny);
    REQUIRE(run_ranks(2, train_args(config, {}), dir.path / "log") == 0);
    const std::string log = read_file(dir.path / "log");
    const std::vector<int64_t> pairs = per_rank(log, "pairs");  // equal counts: 6 and 4
    REQUIRE(pairs.size() == 2);
    CHECK(pairs[0] == 8);
    CHECK(pairs[1] == 2);
    check_each_rank_squared_its_runs(log, 2);
  }

  TEST_CASE("mpi: device opencl: 2 ranks on the machine's OpenCL devices match one process on OpenCL") {
    if (!fs::exists(mpi_binary("opencl/"))) SF_SKIP("no OpenCL build here (make OPENCL=1: its packages could not be installed)");
    TempDir one, two;
    CHECK(distance_from_one_process(2, {"device=opencl"}, one.path, two.path, "opencl/") <= 1e-5);
    CHECK(read_file(two.path / "log").find("parameters on opencl") != std::string::npos);
  }

  TEST_CASE("mpi: 2 ranks for 2 epochs then resumed to 4 equal 4 straight epochs, bit for bit (dropout on)") {
    TempDir straight, resumed;
    REQUIRE(run_ranks(2, train_args(resume_config(straight.path), {}), straight.path / "log") == 0);
    std::string config = resume_config(resumed.path);
    REQUIRE(run_ranks(2, train_args(config, {"num_epochs=2"}), resumed.path / "log1") == 0);
    REQUIRE(run_ranks(2, train_args(config, {"preload=latest"}), resumed.path / "log2") == 0);
    check_same_files(straight.path, resumed.path, "03");
    // Each rank's dropout stream is saved, and the streams differ.
    setup::TrainingState state = setup::CheckpointStore(resumed.path / "weights", "tmodel_", 5).load_state("01");
    REQUIRE(state.rank_dropout_rngs.size() == 1);
    CHECK(state.rank_dropout_rngs[0] != state.dropout_rng);

    // A 2-rank checkpoint resumed by one process trains on without error, and the reverse.
    CHECK(run_ranks(0, train_args(config, {"preload=latest", "num_epochs=5"}), resumed.path / "log3") == 0);
    CHECK(setup::CheckpointStore(resumed.path / "weights", "tmodel_", 5).latest_epoch() == 4);
    CHECK(run_ranks(2, train_args(config, {"preload=latest", "num_epochs=6"}), resumed.path / "log4") == 0);
    CHECK(setup::CheckpointStore(resumed.path / "weights", "tmodel_", 5).latest_epoch() == 5);
  }

  // A user who signals a rank twice (Ctrl-C, then kill): a process alone
  // ends at once on the second signal, but a rank goes on to the save the
  // first began (train/training_step.h: StopSignals).
  TEST_CASE("mpi: SIGINT then SIGTERM to one rank stop every rank at the same step; rank 0 saves the position "
            "reached; resuming matches") {
    TempDir straight, cut;
    std::string config = resume_config(cut.path);
    REQUIRE(run_ranks(2, train_args(resume_config(straight.path), {}), straight.path / "log") == 0);
    pid_t job = spawn_ranks(2, train_args(config, {}), cut.path / "log1");
    std::vector<pid_t> ranks = ranks_of(job, 2);
    REQUIRE(ranks.size() == 2);
    wait_for_lines(cut.path / "run/metrics.jsonl", 9, job);  // into epoch 1 (6 steps an epoch, 1 valid)
    kill(ranks[1], SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // delivered, so not merged with the second
    kill(ranks[1], SIGTERM);
    CHECK(wait_exit(job) == 130);
    CHECK(read_file(cut.path / "log1").find("stopped: saved epoch") != std::string::npos);
    setup::CheckpointStore store(cut.path / "weights", "tmodel_", 5);
    REQUIRE(store.latest_epoch().has_value());
    setup::TrainingState state = store.load_state(setup::CheckpointStore::epoch_tag(*store.latest_epoch()));
    CHECK(state.global_step == int64_t(logged_steps(cut.path / "run/metrics.jsonl")));
    REQUIRE(run_ranks(2, train_args(config, {"preload=latest"}), cut.path / "log2") == 0);
    check_same_files(straight.path, cut.path, "03");
  }

  TEST_CASE("mpi: SIGKILL of one rank ends the job within 10 s; the last checkpoint still loads") {
    TempDir dir;
    std::string config = resume_config(dir.path);
    pid_t job = spawn_ranks(2, train_args(config, {"num_epochs=50"}), dir.path / "log");
    std::vector<pid_t> ranks = ranks_of(job, 2);
    REQUIRE(ranks.size() == 2);
    wait_for_lines(dir.path / "run/metrics.jsonl", 16, job);  // epoch 0 saved, epoch 2 under way
    auto killed = std::chrono::steady_clock::now();
    kill(ranks[1], SIGKILL);
    int status = wait_exit(job);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
    MESSAGE("the job ended ", seconds, " s after the kill, status ", status, ":\n", read_file(dir.path / "log"));
    CHECK(status != 0);
    CHECK(seconds < 10);
    infer::Session session = infer::Session::open(setup::load_config(config), std::nullopt);
    CHECK(session.checkpoint.find("tmodel_0") != std::string::npos);
  }

  // A hard stop of one rank: the job ends, and what survives is rank 0's last
  // checkpoint, which checkpoint_every keeps within that many steps of where
  // the job was. The kill lands at a "random" step (a fixed seed) past the
  // first periodic checkpoint; the straight run saved nothing mid-epoch.
  TEST_CASE("mpi: SIGKILL of rank 1 at a random step loses at most checkpoint_every steps; resuming matches") {
    constexpr int64_t kEvery = 5;
    TempDir straight, cut;
    REQUIRE(run_ranks(2, train_args(resume_config(straight.path), kLonger), straight.path / "log") == 0);
    std::string config = resume_config(cut.path);
    std::mt19937 random(38);
    size_t line = std::uniform_int_distribution<size_t>(kEvery + 1, 70)(random);  // of 88
    CAPTURE(line);
    pid_t job = spawn_ranks(2, train_args(config, with(kLonger, {"checkpoint_every=" + std::to_string(kEvery)})),
                            cut.path / "log1");
    std::vector<pid_t> ranks = ranks_of(job, 2);
    REQUIRE(ranks.size() == 2);
    wait_for_lines(cut.path / "run/metrics.jsonl", line, job);
    kill(ranks[1], SIGKILL);
    CHECK(wait_exit(job) != 0);
    REQUIRE(all_ended(ranks));
    setup::CheckpointStore store(cut.path / "weights", "tmodel_", 5);
    REQUIRE(store.latest_epoch().has_value());
    setup::TrainingState state = store.load_state(setup::CheckpointStore::epoch_tag(*store.latest_epoch()));
    int64_t logged = int64_t(logged_steps(cut.path / "run/metrics.jsonl"));
    MESSAGE("killed after step ", logged, "; resumes from step ", state.global_step);
    CHECK(state.global_step >= kEvery);
    CHECK(logged - state.global_step <= kEvery);
    REQUIRE(run_ranks(2, train_args(config, with(kLonger, {"preload=latest"})), cut.path / "log2") == 0);
    check_same_files(straight.path, cut.path, "01");
  }

  // A user's double Ctrl-C: mpirun takes the second for "abort now" and ends
  // at once without a word to the ranks, which take its end for a SIGTERM
  // (install_stop_handlers), save the position reached and end too. Each
  // trial takes seconds, so 5 here; tools/double-ctrl-c-trials runs 20.
  TEST_CASE("mpi: a double SIGINT to mpirun leaves the position reached saved; resuming matches, 5 of 5 trials") {
    TempDir straight;
    REQUIRE(run_ranks(2, train_args(resume_config(straight.path), kLonger), straight.path / "log") == 0);
    for (int trial = 1; trial <= 5; ++trial) {
      CAPTURE(trial);
      TempDir cut;
      std::string config = resume_config(cut.path);
      pid_t job = spawn_ranks(2, train_args(config, kLonger), cut.path / "log1");
      std::vector<pid_t> ranks = ranks_of(job, 2);
      REQUIRE(ranks.size() == 2);
      wait_for_lines(cut.path / "run/metrics.jsonl", 10 + 10 * trial, job);
      kill(job, SIGINT);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // delivered, so not merged with the second
      kill(job, SIGINT);
      wait_exit(job);
      REQUIRE(all_ended(ranks));
      setup::CheckpointStore store(cut.path / "weights", "tmodel_", 5);
      REQUIRE(store.latest_epoch().has_value());
      // The position the job reached, not an older checkpoint.
      setup::TrainingState state = store.load_state(setup::CheckpointStore::epoch_tag(*store.latest_epoch()));
      CHECK(state.global_step == int64_t(logged_steps(cut.path / "run/metrics.jsonl")));
      REQUIRE(run_ranks(2, train_args(config, with(kLonger, {"preload=latest"})), cut.path / "log2") == 0);
      check_same_files(straight.path, cut.path, "01");
    }
  }

  TEST_CASE("mpi: a rank that hangs ends the job within seconds, with one line naming it") {
    TempDir dir;
    std::string config = resume_config(dir.path);
    pid_t job = spawn_ranks(2, train_args(config, {"num_epochs=50"}), dir.path / "log", {"SCRATCHFORMER_MPI_TIMEOUT=3"});
    std::vector<pid_t> ranks = ranks_of(job, 2);
    REQUIRE(ranks.size() == 2);
    wait_for_lines(dir.path / "run/metrics.jsonl", 3, job);
    auto stopped = std::chrono::steady_clock::now();
    kill(ranks[1], SIGSTOP);
    int status = wait_exit(job);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
    std::string log = read_file(dir.path / "log");
    MESSAGE("the job ended ", seconds, " s after the rank stopped, status ", status, ":\n", log);
    CHECK(status != 0);
    CHECK(seconds < 10);
    CHECK(log.find("rank 1 (of 2) has not responded") != std::string::npos);
    CHECK(one_error_line(from_error(log)));
  }

  TEST_CASE("mpi: a bad value of an MPI environment variable is one line naming it, and exit 2") {
    TempDir dir;
    std::string config = resume_config(dir.path);
    for (std::string setting : {"SCRATCHFORMER_MPI_TIMEOUT=soon", "SCRATCHFORMER_MPI_SHARED_SUMS=yes"}) {
      CAPTURE(setting);
      const fs::path log = dir.path / "log";
      int status = wait_exit(spawn_ranks(1, train_args(config, {}), log, {setting}));
      std::string text = read_file(log);
      CHECK(status == 2);
      CHECK(text.find(setting.substr(0, setting.find('=') + 1)) != std::string::npos);
      CHECK(text.find("expected") != std::string::npos);
      CHECK_FALSE(fs::exists(dir.path / "run/metrics.jsonl"));
    }
  }

  TEST_CASE("mpi: ranks that read different data are refused at start, naming the rank") {
    TempDir dir;
    for (std::string side : {"a", "b"}) {
      fs::create_directories(dir.path / side);
      std::ofstream(dir.path / side / "train.tsv") << "one two\tein zwei\nthree\tdrei\n"
                                                  << (side == "a" ? "four\tvier\n" : "five\tfünf\n");
    }
    std::string config = write_config(dir.path, std::string(R"("data": {"train": "train.tsv"}, "lang_src": "en",
      "lang_tgt": "de", "num_epochs": 1, "val_fraction": 0.0, )") + kTiny);
    // Rank 0 runs in folder a, rank 1 in folder b.
    std::vector<std::string> argv = one_rank_in_each({dir.path / "a", dir.path / "b"}, train_args(config, {}));
    CHECK(wait_exit(spawn_program(argv, dir.path / "log", {})) == 2);
    std::string log = read_file(dir.path / "log");
    MESSAGE(log);
    CHECK(log.find("scratchformer: error: " + config + ": rank 1 read other data") != std::string::npos);
    CHECK(one_error_line(from_error(log)));
    CHECK(!fs::exists(dir.path / "weights/tmodel_00.safetensors"));
  }

  // Started by hand, the MPI build's commands run as one process, as the
  // plain build's do: bad input is one line and exit 2.
  TEST_CASE("mpi: by hand, the MPI build's eval and export report bad input in one line, and exit 2") {
    TempDir dir;
    std::string config = resume_config(dir.path);
    REQUIRE(run_ranks(0, train_args(config, {"num_epochs=1"}), dir.path / "log") == 0);
    const std::string missing = (dir.path / "nonexistent").string();
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"eval", "--config", config, "--data", missing + ".tsv"},
          std::vector<std::string>{"export", "--config", config, "--checkpoint", missing + ".safetensors", "--out",
                                   (dir.path / "out.safetensors").string()}}) {
      CAPTURE(args[0]);
      const fs::path log = dir.path / "log";
      CHECK(wait_exit(spawn_program(with({mpi_binary()}, args), log, {})) == 2);
      const std::string output = read_file(log);
      CHECK_MESSAGE(one_error_line(output), output);
      CHECK(output.find(missing) != std::string::npos);
    }
  }

  // With a pml (Open MPI's messaging layer) that does not exist, MPI_Init
  // fails: a command that started MPI would end there, in Open MPI's words.
  TEST_CASE("mpi: by hand, the MPI build's train and export run without starting MPI") {
    TempDir dir;
    std::string config = resume_config(dir.path);
    const std::vector<std::string> mpi_fails = {"OMPI_MCA_pml=scratchformer_none"};
    const fs::path log = dir.path / "log", out = dir.path / "out.safetensors";
    const std::vector<std::string> train = with({mpi_binary()}, train_args(config, {"num_epochs=1"})),
                                   exports = {mpi_binary(), "export", "--config", config, "--out", out.string()};
    for (const std::vector<std::string>& command : {train, exports}) {
      CAPTURE(command[1]);
      CHECK_MESSAGE(wait_exit(spawn_program(command, log, mpi_fails)) == 0, read_file(log));
    }
    CHECK(fs::exists(out));
  }

  // Every rank meets the error; rank 0 prints it for all, and the job ends
  // with the command's exit status, without a word of Open MPI's.
  TEST_CASE("mpi: under mpirun, a bad config or a command other than train is one line, and exit 2") {
    TempDir dir;
    std::string config = resume_config(dir.path);
    const fs::path log = dir.path / "log";
    CHECK(wait_exit(spawn_ranks(2, train_args(config, {"num_epochs=-1"}), log)) == 2);
    std::string output = read_file(log);
    CHECK_MESSAGE(one_error_line(output), output);
    CHECK(output.find("num_epochs") != std::string::npos);

    CHECK(wait_exit(spawn_ranks(2, {"eval", "--config", config, "--data", "valid.tsv"}, log)) == 2);
    output = read_file(log);
    CHECK_MESSAGE(one_error_line(output), output);
    CHECK(output.find("only train runs on several processes") != std::string::npos);
  }

  // One rank fails alone (its folder has no data; the other rank reads its
  // own and waits for it in a collective): it ends the whole job at once,
  // in one line, naming the rank where it is not rank 0, and exit 2.
  TEST_CASE("mpi: an error on one rank alone ends the job at once, in one line, and exit 2") {
    for (int failing : {0, 1}) {
      CAPTURE(failing);
      TempDir dir;
      const std::vector<fs::path> folders = {dir.path / "rank0", dir.path / "rank1"};
      for (int r : {0, 1}) {
        fs::create_directories(folders[r]);
        if (r != failing) std::ofstream(folders[r] / "train.tsv") << "one two\tein zwei\nthree\tdrei\n";
      }
      std::string config = write_config(dir.path, std::string(R"("data": {"train": "train.tsv"}, "lang_src": "en",
        "lang_tgt": "de", "num_epochs": 1, "val_fraction": 0.0, )") + kTiny);
      const fs::path log = dir.path / "log";
      const auto start = std::chrono::steady_clock::now();
      CHECK(wait_exit(spawn_program(one_rank_in_each(folders, train_args(config, {})), log, {})) == 2);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string output = read_file(log);
      CHECK_MESSAGE(one_error_line(from_error(output)), output);
      CHECK(output.find("train.tsv") != std::string::npos);
      CHECK((output.find("rank 1: ") != std::string::npos) == (failing == 1));
      CHECK(seconds < 10);  // the other rank would wait SCRATCHFORMER_MPI_TIMEOUT (30 s)
    }
  }
}
