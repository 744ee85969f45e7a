// End to end, where users feel speed: one training step of the whole
// Transformer (forward, loss, backward, Adam) and greedy decoding, ours beside
// PyTorch (bench/pytorch_reference.py, the same model in PyTorch, run with
// /usr/bin/python3 when it has torch) and, in an OPENCL=1 build, the OpenCL
// device beside the CPU. Batches of random tokens whose lengths are uniform in
// [S/2, S-1], padded to S; dropout 0.1, label smoothing 0.1; the figure is the
// median step after warm-up steps. Each measurement runs in a process of its
// own (this program, re-run with --measure), so its peak resident memory is
// its own too.
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/device.h"
#include "autograd/engine.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/thread_pool.h"
#include "autograd/ops.h"
#include "base/error.h"
#include "bench_util.h"
#include "data/framing.h"
#include "infer/decode_place.h"
#include "infer/decoding.h"
#include "step_models.h"
#include "optim/optimizer.h"

namespace sf::bench {
namespace {

// Median milliseconds of `steps` training steps after `warmup` on `device`,
// the matrix products in `precision` (DType::BF16: mixed precision, as
// torch.autocast; the backward's products follow the forward's).
double step_ms(const StepConfig& c, Device& device, DType precision, int warmup, int steps) {
  TrainingSteps run(c, device);
  std::vector<double> times;
  for (int i = 0; i < warmup + steps; ++i) {
    double t = seconds([&] { run.step(precision); });
    if (i >= warmup) times.push_back(t * 1e3);
  }
  return median(times);
}

// Median milliseconds of greedy decoding of `tokens` tokens for one source
// sentence of `tokens` words ([SOS] words [EOS]), after 3 warm-up runs: the
// library's greedy_decode, with its length limit at `tokens`. The model's
// weights are random and seeded, and it never ends the sentence early (a
// check, not a hope: the work must be the same `tokens` steps as the
// reference's, which never stops at [EOS]). Decoded as one translate_ids call
// decodes batches of one sentence: where the process chose for that size
// class (infer/decode_place.h; the first warm-up run chooses), so a CPU copy
// takes the model's weights once, in the first run, as translate_ids takes
// them once per call (not in the figure: about 1.5 ms for the tiny model and
// 12 ms for the small one on an H200). `decoded_on` receives the place's name.
double decode_ms(const StepConfig& c, Device& device, int tokens, std::string* decoded_on) {
  NoGradGuard no_grad;
  auto model = build(c, device);
  model->eval();
  Tensor src = data::frame_sources({std::vector<int32_t>(tokens, 5)});
  auto decode = [&](nn::Transformer& decoding) {
    const std::vector<infer::TokenIds> out = infer::greedy_decode(decoding, src, tokens + 1);
    if (std::ssize(out.at(0)) != tokens)
      internal_fail("bench: the random model ended its sentence after ", out[0].size(), " of ", tokens,
                    " tokens: the timed work would not be the reference's");
  };
  std::vector<double> times;
  infer::PlacedDecoder decoder(*model, 1);
  infer::Place place = infer::Place::model;
  for (int run = 0; run < 23; ++run) {
    double t = seconds([&] { place = decoder.decode(1, decode); });
    if (run >= 3) times.push_back(t * 1e3);
  }
  *decoded_on = place == infer::Place::cpu_copy ? "cpu" : device.name();
  return median(times);
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Runs a command and parses the last line it prints as JSON (null on failure).
nlohmann::json run_json(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return nullptr;
  std::string last;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) last = line;
  int status = pclose(pipe);
  nlohmann::json j = nlohmann::json::parse(last, nullptr, false);
  return status == 0 && j.is_object() ? j : nlohmann::json(nullptr);
}

// This program, re-run for one measurement (the path read here: a shell would
// read /proc/self/exe as itself).
std::string self_command(const std::string& what, const std::string& model, const std::string& device,
                         int threads, const std::string& precision = "fp32") {
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  return self + " --measure " + what + " " + model + " " + device + " " + std::to_string(threads) + " " +
         precision;
}

bool have_torch() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

std::string torch_command(const std::string& what, const std::string& model, int threads,
                          const std::string& precision = "fp32") {
  // PyTorch keeps OpenBLAS's default spinning, which its own timings are best with.
  return "env -u OPENBLAS_THREAD_TIMEOUT /usr/bin/python3 bench/pytorch_reference.py " + what + " --model " + model +
         " --threads " + std::to_string(threads) + " --precision " + precision + " 2>/dev/null";
}

}  // namespace

// `bench --measure train|decode MODEL DEVICE THREADS [fp32|bf16]`: one
// measurement, as JSON (the precision: the training step's);
// `bench --measure gemm_bf16 SIZE cpu THREADS`: the bf16 GEMM beside float32's.
int measure(int argc, char** argv) {
  if (argc != 6 && argc != 7) return 2;
  std::string what = argv[2];
  if (what == "gemm_bf16") {
    kernels::set_num_threads(std::stoi(argv[5]));
    measure_gemm_bf16(std::stoll(argv[3]));
    return 0;
  }
  const StepConfig& c = config_named(argv[3]);
  Device& device = device_named(argv[4]);
  kernels::set_num_threads(std::stoi(argv[5]));
  DType precision = argc == 7 && std::string(argv[6]) == "bf16" ? DType::BF16 : DType::F32;
  std::string decoded_on;
  double ms = what == "decode" ? decode_ms(c, device, 20, &decoded_on) : step_ms(c, device, precision, 5, 20);
  nlohmann::json result = {{what == "decode" ? "decode_ms" : "step_ms", ms}, {"peak_rss_mib", peak_rss_mib()}};
  if (what == "decode") result["decoded_on"] = decoded_on;
  std::printf("%s\n", result.dump().c_str());
  return 0;
}

void bench_train_steps() {
  bool torch = have_torch();
  std::printf("\nTraining step, ms (median of 20 after 5 warm-up) and peak RSS, MiB: ours beside PyTorch %s\n"
              "%-8s %7s %9s %9s %7s %9s %9s\n",
              torch ? "(its fastest thread setting)" : "(skipped: /usr/bin/python3 has no torch)", "model",
              "threads", "ours", "pytorch", "ratio", "ours RSS", "torch RSS");
  for (const char* model : {"tiny", "small"})
    for (int threads : {1, 2}) {
      nlohmann::json ours = run_json(self_command("train", model, "cpu", threads));
      nlohmann::json ref = torch ? run_json(torch_command("train", model, threads)) : nlohmann::json(nullptr);
      if (ours.is_null()) {
        std::printf("%-8s %7d   failed\n", model, threads);
        continue;
      }
      double ms = ours["step_ms"], rss = ours["peak_rss_mib"];
      if (ref.is_null()) {
        std::printf("%-8s %7d %9.1f %9s %7s %9.0f %9s\n", model, threads, ms, "-", "-", rss, "-");
        add_record("train_step", model, threads, ms, ms, "none", "ms")["peak_rss_mib"] = rss;
        continue;
      }
      double ref_ms = ref["step_ms"], ref_rss = ref["peak_rss_mib"];
      std::printf("%-8s %7d %9.1f %9.1f %7.3f %9.0f %9.0f\n", model, threads, ms, ref_ms, ms / ref_ms, rss,
                  ref_rss);
      nlohmann::json& r = add_record("train_step", model, threads, ms, ref_ms, "pytorch", "ms");
      r["peak_rss_mib"] = rss;
      r["ref_peak_rss_mib"] = ref_rss;
    }

  std::printf("\nGreedy decoding of 20 tokens for a 20-word sentence, tiny model, ms: ours (KV cache) beside\n"
              "PyTorch without a cache (the decoder re-run on the whole prefix at each token)\n"
              "%-8s %9s %9s %7s\n", "threads", "ours", "pytorch", "ratio");
  for (int threads : {1, 2}) {
    nlohmann::json ours = run_json(self_command("decode", "tiny", "cpu", threads));
    nlohmann::json ref = torch ? run_json(torch_command("decode", "tiny", threads)) : nlohmann::json(nullptr);
    if (ours.is_null()) continue;
    double ms = ours["decode_ms"], ref_ms = ref.is_null() ? ms : ref["decode_ms"].get<double>();
    std::printf("%-8d %9.2f %9s %7s\n", threads, ms,
                ref.is_null() ? "-" : std::to_string(ref_ms).substr(0, 7).c_str(),
                ref.is_null() ? "-" : std::to_string(ms / ref_ms).substr(0, 5).c_str());
    add_record("greedy_decode", "tiny, 20 tokens", threads, ms, ref_ms, ref.is_null() ? "none" : "pytorch", "ms");
  }
#ifdef SF_OPENCL
  std::printf("\nTraining step on OpenCL (%s; ms) vs the CPU, 2 threads\n%-10s %9s %9s %7s\n",
              device_named("opencl").description().c_str(), "model", "opencl", "cpu", "ratio");
  for (const char* model : {"tiny", "small"}) {
    nlohmann::json on_cpu = run_json(self_command("train", model, "cpu", 2)),
                   on_opencl = run_json(self_command("train", model, "opencl", 2));
    if (on_cpu.is_null() || on_opencl.is_null()) continue;
    double cpu_ms = on_cpu["step_ms"], opencl_ms = on_opencl["step_ms"];
    std::printf("%-10s %9.1f %9.1f %7.3f\n", model, opencl_ms, cpu_ms, opencl_ms / cpu_ms);
    add_record("train_step_opencl", model, 2, opencl_ms, cpu_ms, "cpu 2 threads", "ms");
  }
  // The goal: decoding a sentence with the model on the device no slower
  // than on one CPU core, wherever the device's decoding chooses to run.
  nlohmann::json on_cpu = run_json(self_command("decode", "tiny", "cpu", 1)),
                 on_opencl = run_json(self_command("decode", "tiny", "opencl", 1));
  if (!on_cpu.is_null() && !on_opencl.is_null()) {
    double cpu_ms = on_cpu["decode_ms"], opencl_ms = on_opencl["decode_ms"];
    std::string decoded_on = on_opencl["decoded_on"];
    std::printf("\nGreedy decoding of 20 tokens, tiny model on OpenCL (decoded on %s) vs one CPU core, ms\n"
                "%9s %9s %7s\n%9.2f %9.2f %7.3f\n",
                decoded_on.c_str(), "opencl", "cpu", "ratio", opencl_ms, cpu_ms, opencl_ms / cpu_ms);
    add_record("greedy_decode_opencl", "tiny, 20 tokens", 1, opencl_ms, cpu_ms, "cpu 1 thread", "ms")["decoded_on"] =
        decoded_on;
  }
#endif
}

// Mixed precision (issue 22): our step with bf16 matrix products beside
// PyTorch's float32 step and its torch.autocast("cpu", bfloat16) step (oneDNN's
// bf16 kernels), all measured in this run. The goals, at 2 threads: at most
// 0.3x PyTorch's float32 step and 0.5x its autocast step.
// On a CPU whose bf16 products are no faster than float32's (the portable
// level, forced here on any CPU), bf16 keeps its rounding and should cost no
// time: the float32 GEMM rounds the operands as it packs them. One model and
// optimizer take float32 and bf16 steps in turn (bench_util.h: interleaved),
// so a machine that changes speed slows both alike.
void bench_portable_bf16_steps() {
  const kernels::Bf16Gemm level = kernels::bf16_gemm();
  kernels::set_bf16_gemm(kernels::Bf16Gemm::kPortable);
  std::printf("\nbf16 where it brings no speed (the portable level), beside float32: steps in turn in one process,\n"
              "ms (median of %d each); goal <= 1.05\n%-8s %7s %9s %9s %8s\n",
              kTrials, "model", "threads", "float32", "bf16", "ratio");
  for (const char* model_name : {"tiny", "small"}) {
    const int threads = 2;
    kernels::set_num_threads(threads);
    TrainingSteps run(config_named(model_name), cpu());
    auto step = [&run](DType precision) { return [&run, precision] { run.step(precision); }; };
    for (int i = 0; i < 3; ++i) step(DType::BF16)();  // warm-up: allocations, the thread pool
    const auto [f32, bf16] = interleaved(step(DType::F32), step(DType::BF16));
    std::printf("%-8s %7d %9.1f %9.1f %8.3f\n", model_name, threads, f32 * 1e3, bf16 * 1e3, bf16 / f32);
    add_record("train_step_bf16_portable", model_name, threads, bf16 * 1e3, f32 * 1e3, "ours fp32", "ms");
  }
  kernels::set_bf16_gemm(level);
}

void bench_train_steps_bf16() {
  bool torch = have_torch();
  std::printf("\nTraining step in bf16 (mixed precision), ms (median of 20 after 5 warm-up): ours beside PyTorch's\n"
              "float32 and autocast-bf16 steps %s; goals at 2 threads: vs fp32 <= 0.3, vs autocast <= 0.5\n"
              "%-8s %7s %9s %10s %10s %8s %8s %9s %9s\n",
              torch ? "(each its fastest thread setting)" : "(skipped: /usr/bin/python3 has no torch)", "model",
              "threads", "ours bf16", "torch fp32", "torch bf16", "vs fp32", "vs bf16", "ours RSS", "torch RSS");
  for (const char* model : {"tiny", "small"})
    for (int threads : {1, 2}) {
      nlohmann::json ours = run_json(self_command("train", model, "cpu", threads, "bf16"));
      if (ours.is_null()) {
        std::printf("%-8s %7d   failed\n", model, threads);
        continue;
      }
      double ms = ours["step_ms"], rss = ours["peak_rss_mib"];
      nlohmann::json fp32 = torch ? run_json(torch_command("train", model, threads, "fp32")) : nullptr;
      nlohmann::json bf16 = torch ? run_json(torch_command("train", model, threads, "bf16")) : nullptr;
      if (fp32.is_null() || bf16.is_null()) {
        std::printf("%-8s %7d %9.1f %10s %10s %8s %8s %9.0f %9s\n", model, threads, ms, "-", "-", "-", "-", rss, "-");
        add_record("train_step_bf16", model, threads, ms, ms, "none", "ms")["peak_rss_mib"] = rss;
        continue;
      }
      double fp32_ms = fp32["step_ms"], bf16_ms = bf16["step_ms"], bf16_rss = bf16["peak_rss_mib"];
      std::printf("%-8s %7d %9.1f %10.1f %10.1f %8.3f %8.3f %9.0f %9.0f\n", model, threads, ms, fp32_ms, bf16_ms,
                  ms / fp32_ms, ms / bf16_ms, rss, bf16_rss);
      // Each reference with the thread split PyTorch was fastest with (its own or OpenBLAS's threads).
      for (const auto& [ref, ref_name] : {std::pair{&fp32, "pytorch fp32"}, {&bf16, "pytorch autocast bf16"}}) {
        nlohmann::json& r = add_record("train_step_bf16", model, threads, ms, (*ref)["step_ms"], ref_name, "ms");
        r["peak_rss_mib"] = rss;
        r["ref_peak_rss_mib"] = (*ref)["peak_rss_mib"];
        r["ref_split"] = {{"torch_threads", (*ref)["torch_threads"]}, {"blas_threads", (*ref)["blas_threads"]}};
      }
    }
}

}  // namespace sf::bench
