#!/usr/bin/env python3
"""`make MPI=1 bench`'s data-parallel tables: data-parallel training through
the command (`mpirun -np 2 BUILD/mpi/scratchformer train ...`) beside a
reference measured in the same run.

Usage: python3 bench/data_parallel.py BUILD BENCH_JSON
  BUILD       the build folder with scratchformer and mpi/scratchformer
  BENCH_JSON  the C++ bench's records (build/bench.json): this script's
              records are added, replacing any it added before

Five comparisons, all on this machine's 2 cores:
0. The all-reduce of a buffer of floats between 2 local ranks, 1 KB to
   64 MB: our communicator (a gradient bucket's sum, in shared memory)
   beside its ring (messages, as between machines), a bare blocking
   MPI_Allreduce (bench/mpi/allreduce.cpp) and memcpy's bandwidth.
1. Multi30k (a prefix of configs/multi30k_en_de.json's corpus): target
   tokens/s of 2 ranks x 1 thread beside 1 process x 2 threads.
2. The small bench model (bench/step_models.h) on random words: the time
   each step waits for gradient all-reduces after backward, and the whole
   step, with the overlap of all-reduce and backward off and on.
3. The same model with ZeRO-1 (`zero: 1`) beside without: each rank's
   optimizer state and peak RSS.
4. The same model and global batch under PyTorch's DistributedDataParallel
   (bench/pytorch_ddp.py): step time, ours beside theirs, in float32 and
   with bf16 matrix products.
Rates and times are medians over the optimizer steps after each run's first
WARMUP, pooled over its TRIALS runs.
"""
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys

from pytorch_reference import MODELS  # the bench models' sizes (torch is not imported)

WORK = "build/data-parallel"  # every file the runs write
WARMUP = 10  # first optimizer steps of a run left out of the medians (allocations, caches)
# Each side of a comparison runs TRIALS times, in turn with the other (A B A B),
# and its median pools the steps of its runs: other work on the machine for a
# few seconds then slows both sides alike, and a fraction of either's steps.
TRIALS = 2
MULTI30K = "../shared/data/multi30k_en_de"
MULTI30K_PAIRS = 3840  # 60 steps of the config's batch of 64
SMALL = MODELS["small"]
SMALL_STEPS = 30  # optimizer steps per run of the small model
SMALL_BUCKETS_MB = 4  # the overlap table's second bucket size
TORCH_PYTHON = "/usr/bin/python3"  # as the C++ bench: Debian's python3-torch

# Rank 0's lines (stderr) that carry the figures.
BUCKETS = re.compile(r"all-reduced in (\d+) buckets \(([\d.]+) MB per step\)")
SUMMARY = re.compile(r"data parallel: ([\d.]+) ms per step waiting .*, ([\d.]+) ms of it exposed .*; "
                     r"per rank: pairs [\d, ]+, label tokens [\d, ]+, empty shares [\d, ]+, "
                     r"peak RSS ([\d., ]+) MiB, optimizer state ([\d., ]+) MiB, sent in the last step ([\d, ]+) bytes")


def mpirun(ranks, tcp=False, ring=False):
    """The launch of `ranks` ranks on this machine.
    --bind-to none: Open MPI would pin each rank to a core, and with threads > 1
    pin all of a rank's threads there. `ring`: the communicator sums by
    messages (its ring), not in the memory the ranks share. `tcp`: that, and
    over TCP only (loopback), as ranks on two machines talk, Open MPI's
    shared-memory transport left out."""
    command = ["mpirun", "-np", str(ranks), "--bind-to", "none"]
    if tcp:
        command += ["--mca", "btl", "self,tcp"]
    if tcp or ring:
        command += ["-x", "SCRATCHFORMER_MPI_SHARED_SUMS=0"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def train(launcher, config, folder, settings):
    """Trains `launcher + [train ...]` with its outputs in `folder` (emptied
    first); returns the step records of metrics.jsonl and rank 0's stderr."""
    shutil.rmtree(folder, ignore_errors=True)
    settings = dict(settings, model_folder=f"{folder}/weights", experiment_name=f"{folder}/run")
    command = launcher + ["train", "--config", config]
    for key, value in settings.items():
        command += ["--set", f"{key}={json.dumps(value) if isinstance(value, bool) else value}"]
    run = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit(f"data_parallel.py: {' '.join(command)} exited {run.returncode}:\n{run.stderr[-2000:]}")
    with open(f"{folder}/run/metrics.jsonl") as f:
        steps = [r for r in map(json.loads, f) if r["kind"] == "step"]
    return steps, run.stderr


def median_tokens_per_s(runs):
    return statistics.median(r["tokens_per_s"] for steps in runs for r in steps[WARMUP:])


def median_step_ms(runs):
    """Each step's own duration, from the steps' times since the start."""
    durations = []
    for steps in runs:
        times = [r["time"] for r in steps]
        durations += [b - a for a, b in zip(times[WARMUP - 1:], times[WARMUP:])]
    return 1e3 * statistics.median(durations)


def summary(stderr):
    """Rank 0's end-of-run line: ms per step waiting for all-reduces after
    backward (rank 0's wait, and the exposed communication: each step's least
    wait over the ranks), and each rank's peak RSS and optimizer state (MiB) and the
    bytes it sent in the last step (MB here)."""
    m = SUMMARY.search(stderr)
    per_rank = lambda text, scale=1.0: [float(x) * scale for x in text.split(",")]  # noqa: E731
    return {"wait_ms": float(m[1]), "exposed_ms": float(m[2]), "peak RSS": per_rank(m[3]),
            "optimizer state": per_rank(m[4]), "sent per step": per_rank(m[5], 1e-6)}


def record(bench, case, ours, ref, ref_name, unit, threads=2, **extra):
    """A record as bench_util.h's add_record writes it (`threads`: the cores
    it ran on); `speedup` > 1 means ours is better: ref / ours where less is
    better (ms, MiB), else ours / ref."""
    better_low = unit in ("ms", "MiB")
    return dict(bench=bench, case=case, threads=threads, ours=ours, ref=ref, ref_name=ref_name, unit=unit,
                speedup=ref / ours if better_low else ours / ref, **extra)


def allreduce_table(build):
    """Comparison 0, with the bandwidths nccl-tests defines (its
    doc/PERFORMANCE.md): algbw = bytes / time, and busbw = algbw x 2 (n - 1) / n,
    what each rank's link carries in an optimal all-reduce of n ranks, to
    compare with the hardware's bandwidth (here memcpy's)."""
    def run(mode, **transport):
        out = subprocess.run(mpirun(2, **transport) + [f"{build}/mpi/allreduce-bench", mode], stdout=subprocess.PIPE,
                             text=True)
        if out.returncode != 0:
            sys.exit(f"data_parallel.py: allreduce-bench {mode} exited {out.returncode}")
        return [json.loads(line) for line in out.stdout.splitlines()]
    ours, ring, bare, tcp = run("ours"), run("ours", ring=True), run("mpi"), run("ours", tcp=True)
    print("\nAll-reduce of floats between 2 ranks on this machine (mean of many; GB/s as nccl-tests: "
          "busbw = algbw x 2(n-1)/n):\nours (the gradient buckets' sum, in the memory the ranks share) beside "
          "our ring (messages), a bare blocking MPI_Allreduce and memcpy; then our ring over TCP only (loopback)\n"
          f"{'bytes':>10} {'ours us':>9} {'busbw':>7} {'ring us':>9} {'busbw':>7} {'MPI us':>9} {'busbw':>7} "
          f"{'memcpy':>7} {'ours/memcpy':>12} {'TCP us':>9} {'busbw':>7}")
    records = []
    for o, r, b, t in zip(ours, ring, bare, tcp):
        size = o["bytes"]
        busbw = lambda seconds: size / seconds / 1e9 * 2 * (2 - 1) / 2  # noqa: E731
        share = busbw(o["seconds"]) / o["memcpy_gbs"]
        print(f"{size:>10} {1e6 * o['seconds']:9.1f} {busbw(o['seconds']):7.2f} {1e6 * r['seconds']:9.1f} "
              f"{busbw(r['seconds']):7.2f} {1e6 * b['seconds']:9.1f} {busbw(b['seconds']):7.2f} "
              f"{o['memcpy_gbs']:7.2f} {100 * share:11.0f}% {1e6 * t['seconds']:9.1f} {busbw(t['seconds']):7.2f}")
        records.append(dict(record("allreduce", f"{size} bytes, 2 ranks", 1e3 * o["seconds"], 1e3 * b["seconds"],
                                   "MPI_Allreduce", "ms"),
                            busbw_gbs=busbw(o["seconds"]), ref_busbw_gbs=busbw(b["seconds"]),
                            ring_ms=1e3 * r["seconds"], ring_busbw_gbs=busbw(r["seconds"]),
                            memcpy_gbs=o["memcpy_gbs"], tcp_ms=1e3 * t["seconds"], tcp_busbw_gbs=busbw(t["seconds"])))
    return records


def multi30k_prefix(folder):
    """The first MULTI30K_PAIRS pairs of the corpus and 4 validation pairs, in
    `folder` (made), and the settings that train on them for one epoch. Every
    run reads the tokenizers the first one builds, so all train the same model."""
    os.makedirs(folder)
    for name, lines in (("train", MULTI30K_PAIRS), ("valid", 4)):
        with open(f"{MULTI30K}/{name}.tsv") as f, open(f"{folder}/{name}.tsv", "w") as out:
            out.writelines(line for _, line in zip(range(lines), f))
    return {"data.train": f"{folder}/train.tsv", "data.valid": f"{folder}/valid.tsv", "num_epochs": 1,
            "tokenizer_file": f"{folder}/tokenizer_{{0}}.json"}


def multi30k(build):
    """Comparison 1: a prefix of the corpus (the whole takes minutes per epoch)
    and a 4-pair validation file, so validation costs next to nothing."""
    print(f"\nData-parallel training, configs/multi30k_en_de.json on its first {MULTI30K_PAIRS} pairs "
          f"(target tokens/s, median after {WARMUP} warm-up steps, {TRIALS} runs each):\n"
          f"2 ranks x 1 thread beside 1 process x 2 threads; wait: rank 0's ms per step waiting for "
          f"all-reduces after backward\n"
          f"{'case':<28} {'2 ranks':>9} {'1 proc':>9} {'ratio':>7} {'wait':>9}")
    if not os.path.isdir(MULTI30K):
        print(f"{'multi30k_en_de':<28}   skipped: no {MULTI30K}")
        return []
    folder = f"{WORK}/multi30k"
    settings = multi30k_prefix(folder)
    runs = {"shared memory": ([], []), "TCP only": ([], [])}
    single = []
    for trial in range(TRIALS):
        for transport, (steps_of, waits) in runs.items():
            steps, stderr = train(mpirun(2, tcp=transport == "TCP only") + [f"{build}/mpi/scratchformer"],
                                  "configs/multi30k_en_de.json", f"{folder}/ranks{trial}", dict(settings, threads=1))
            steps_of.append(steps)
            waits.append(summary(stderr)["wait_ms"])
        single.append(train([f"{build}/scratchformer"], "configs/multi30k_en_de.json", f"{folder}/single{trial}",
                            dict(settings, threads=2))[0])
    ref = median_tokens_per_s(single)
    records = []
    for transport, (steps_of, waits) in runs.items():
        ours, wait = median_tokens_per_s(steps_of), statistics.mean(waits)
        case = f"multi30k_en_de, {transport}"
        print(f"{case:<28} {ours:9.0f} {ref:9.0f} {ours / ref:7.3f} {wait:9.2f}")
        records.append(record("data_parallel", f"multi30k_en_de prefix, 2 ranks x 1 thread, {transport}", ours, ref,
                              "1 process x 2 threads", "tokens/s", wait_ms=wait))
    return records


def write_random_corpus(path, pairs, c, seed):
    """Pairs of random words with the lengths bench/step_models.cpp draws
    (framed lengths uniform in [S/2, S-1]); each side's words run through
    shuffles of vocab - 4 distinct words, so all are seen and the vocabulary,
    with the 4 special tokens, is exactly c["vocab"]."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(c["vocab"] - 4)]

    def stream():
        while True:
            rng.shuffle(words)
            yield from words
    src, tgt = stream(), stream()
    s = c["seq_len"]
    with open(path, "w") as out:
        for _ in range(pairs):
            n = s // 2 - 2 + rng.randrange(s // 2)
            out.write(" ".join(next(src) for _ in range(n)) + "\t" + " ".join(next(tgt) for _ in range(n)) + "\n")


def small_model_runs(build):
    """Runs of the small model on 2 ranks x 1 thread: TRIALS each with the
    overlap off and on, in turn, then one with ZeRO-1 and one in bf16. Our
    side of comparisons 2, 3 and 4, whose reference (PyTorch) takes the same
    model and batch: bench/step_models.h's small
    sizes, global batch SMALL["batch"], padded to seq_len (bucket false),
    dropout and label smoothing 0.1, Adam (lr 1e-4, eps 1e-9)."""
    folder = f"{WORK}/small"
    os.makedirs(folder)
    write_random_corpus(f"{folder}/train.tsv", SMALL_STEPS * SMALL["batch"], SMALL, seed=1)
    write_random_corpus(f"{folder}/valid.tsv", 2, SMALL, seed=2)
    config = {"data": {"train": f"{folder}/train.tsv", "valid": f"{folder}/valid.tsv"},
              "lang_src": "src", "lang_tgt": "tgt", "tokenizer_file": f"{folder}/tokenizer_{{0}}.json",
              "min_frequency": 1, "bucket": False, "seq_len": SMALL["seq_len"], "batch_size": SMALL["batch"],
              "d_model": SMALL["d_model"], "N": SMALL["N"], "h": SMALL["h"], "d_ff": SMALL["d_ff"],
              "dropout": 0.1, "label_smoothing": 0.1, "lr": 1e-4, "schedule": "constant", "warmup_steps": 0,
              "num_epochs": 1, "threads": 1, "val_examples": 0}
    with open(f"{folder}/config.json", "w") as f:
        json.dump(config, f, indent=1)
    launcher = mpirun(2) + [f"{build}/mpi/scratchformer"]
    # "on"/"off": the default buckets (25 MB after a first small one); with a
    # suffix, buckets of SMALL_BUCKETS_MB (see overlap_table).
    settings = {"off": {}, "on": {}, f"off {SMALL_BUCKETS_MB}": {"bucket_mb": SMALL_BUCKETS_MB},
                f"on {SMALL_BUCKETS_MB}": {"bucket_mb": SMALL_BUCKETS_MB}}
    runs = {name: [] for name in settings}
    # PyTorch's runs (comparison 4) take their turns among ours, so that a
    # machine whose speed drifts slows both sides of the ratio alike.
    pytorch = {"fp32": [], "bf16": []}
    for trial in range(TRIALS):
        for name in runs:
            runs[name].append(train(launcher, f"{folder}/config.json", f"{folder}/{name.replace(' ', '_')}{trial}",
                                    dict(settings[name], zero=0, overlap_grad_reduce=name.startswith("on"))))
        pytorch["fp32"].append(pytorch_step_ms("fp32"))
    # ZeRO-1: one run, for its memory, traffic and step; then bf16 (comparison 4).
    runs["zero"] = [train(launcher, f"{folder}/config.json", f"{folder}/zero", {"zero": 1})]
    runs["bf16"] = []
    for trial in range(TRIALS):
        runs["bf16"].append(train(launcher, f"{folder}/config.json", f"{folder}/bf16{trial}", {"precision": "bf16"}))
        pytorch["bf16"].append(pytorch_step_ms("bf16"))
    # Per kind: the pooled median step, the mean waits, the first run's lines and memory.
    kinds = {}
    for name, trials in runs.items():
        kinds[name] = dict(summary(trials[0][1]), stderr=trials[0][1],
                           step_ms=median_step_ms([steps for steps, _ in trials]),
                           **{k: statistics.mean(summary(stderr)[k] for _, stderr in trials)
                              for k in ("wait_ms", "exposed_ms")})
    kinds["pytorch"] = pytorch
    return kinds


def pytorch_step_ms(precision):
    """One run of PyTorch DDP (bench/pytorch_ddp.py): (its median step in ms,
    None), or (None, why there is none)."""
    if subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        return None, f"skipped: {TORCH_PYTHON} has no torch"
    torch = subprocess.run([TORCH_PYTHON, "bench/pytorch_ddp.py", "--model", "small", "--precision", precision],
                           stdout=subprocess.PIPE, text=True)
    if torch.returncode != 0:
        return None, f"failed: bench/pytorch_ddp.py exited {torch.returncode}"
    return json.loads(torch.stdout.strip().splitlines()[-1])["step_ms"], None


def overlap_table(runs):
    """Comparison 2. The waits are the trainer's own figures: the time from
    backward's end until every bucket is summed (with the overlap off, all of
    the communication), rank 0's, and each step's least over the ranks. Rank
    0's wait also holds the time it waits for the other rank to finish
    backward; the rank that finished last waits for the communication alone,
    so the least is the exposed communication, and the hidden fraction is
    1 - exposed(on) / exposed(off); both leave out the first two steps, which
    set the buckets up. On 2 cores the communication thread shares a core
    with the compute threads: what the overlap saves shows in the whole step,
    beside the waits. Twice: with the default buckets and with buckets of
    SMALL_BUCKETS_MB; in both the last is the target embedding's 8.2 MB,
    summed only after backward, while the trainer takes the gradient norm's
    squares of the buckets summed before it, which the wait leaves out."""
    megabytes = BUCKETS.search(runs["on"]["stderr"]).group(2)
    print(f"\nGradient all-reduce, small model, 2 ranks x 1 thread, {megabytes} MB per step:\n"
          f"ms per step waiting for the all-reduces after backward, rank 0's and the exposed communication "
          f"(each step's least wait over the ranks), overlap on and off; the hidden share of the exposed; "
          f"the whole step\n"
          f"{'case':<20} {'wait on':>8} {'off':>7} {'exposed on':>11} {'off':>7} {'hidden':>7} "
          f"{'step on':>8} {'off':>7}")
    records = []
    for suffix in ("", f" {SMALL_BUCKETS_MB}"):
        on, off = runs["on" + suffix], runs["off" + suffix]
        buckets = BUCKETS.search(on["stderr"]).group(1)
        hidden = 1 - on["exposed_ms"] / off["exposed_ms"]
        case = f"small, {buckets} buckets"
        print(f"{case:<20} {on['wait_ms']:8.2f} {off['wait_ms']:7.2f} {on['exposed_ms']:11.2f} "
              f"{off['exposed_ms']:7.2f} {100 * hidden:6.0f}% {on['step_ms']:8.1f} {off['step_ms']:7.1f}")
        records.append(record("ddp_overlap", f"{case}, exposed ms after backward", on["exposed_ms"],
                              off["exposed_ms"], "overlap off", "ms", hidden_fraction=hidden, buckets=int(buckets),
                              mb_per_step=float(megabytes), wait_ms=on["wait_ms"], ref_wait_ms=off["wait_ms"],
                              step_ms=on["step_ms"], ref_step_ms=off["step_ms"]))
    return records


def zero_table(runs):
    """Comparison 3: memory, the bytes each rank sent in a step (as the
    communicator counts them: the ring's messages, and each rank's runs once
    per receiving rank in the all-gather), and the step."""
    print(f"\nZeRO-1, small model, 2 ranks x 1 thread (per rank: rank 0, rank 1)\n"
          f"{'case':<28} {'zero 1':>13} {'zero 0':>13} {'ratio':>7}")
    records = []
    zero_step, plain_step = runs["zero"]["step_ms"], runs["on"]["step_ms"]
    print(f"{'small, step ms (median)':<28} {zero_step:13.1f} {plain_step:13.1f} {zero_step / plain_step:7.3f}")
    records.append(record("zero", "small, step", zero_step, plain_step, "zero 0", "ms"))
    for what in ("sent per step", "optimizer state", "peak RSS"):
        zero, plain = runs["zero"][what], runs["on"][what]
        unit = "MB" if what == "sent per step" else "MiB"
        print(f"{'small, ' + what + ' (' + unit + ')':<28} {zero[0]:6.1f},{zero[1]:6.1f} {plain[0]:6.1f},{plain[1]:6.1f} "
              f"{max(zero) / max(plain):7.3f}")
        records.append(record("zero", f"small, {what} (largest rank)", max(zero), max(plain), "zero 0", unit,
                              per_rank=zero, ref_per_rank=plain))
    return records


def pytorch_table(runs):
    """Comparison 4. What differs besides the framework: our step also builds
    its batch from the corpus, all-reduces the batch's token count and the
    loss, and computes the gradient norm (logged); PyTorch's reuses 4
    prebuilt batches. Our loss weights each rank by its share of the batch's
    tokens where DDP averages the ranks' means (the same work). Both take
    25 MB buckets after a first small one. Twice: float32, and bf16 matrix
    products (ours: `precision: "bf16"`, float32 accumulation and weights,
    chapter 13; PyTorch's: torch.autocast("cpu", dtype=torch.bfloat16)).
    PyTorch's figure is the median of its TRIALS runs' medians, each run in
    turn with ours."""
    ours = {"fp32": runs["on"]["step_ms"], "bf16": runs["bf16"]["step_ms"]}
    print(f"\nTraining step, small model, global batch {SMALL['batch']} on 2 ranks x 1 thread (ms, median after "
          f"{WARMUP} warm-up steps):\nours beside PyTorch's DistributedDataParallel (gloo; its own warm-up, "
          f"bench/pytorch_ddp.py), each precision beside the same\n{'case':<34} {'ours':>9} {'pytorch':>9} "
          f"{'ratio':>7}")
    records = []
    for precision, mine in ours.items():
        case = f"small, 2 ranks x 1 thread, {precision}"
        trials = runs["pytorch"][precision]
        reason = next((why for _, why in trials if why), None)
        if reason:
            print(f"{case:<34} {mine:9.1f}   {reason}")
            records.append(record("ddp_train_step", case, mine, mine, "none", "ms"))
            continue
        theirs = statistics.median(ms for ms, _ in trials)
        print(f"{case:<34} {mine:9.1f} {theirs:9.1f} {mine / theirs:7.3f}")
        records.append(record("ddp_train_step", case, mine, theirs, f"pytorch ddp (gloo), {precision}", "ms"))
    return records


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, bench_json = sys.argv[1:]
    shutil.rmtree(WORK, ignore_errors=True)
    # PyTorch's float32 products run in OpenBLAS: on a CPU it does not know it
    # would take its generic kernels, and the C++ bench says which to name.
    core = subprocess.run([f"{build}/bench", "--openblas-coretype"], stdout=subprocess.PIPE, text=True).stdout.strip()
    if core and "OPENBLAS_CORETYPE" not in os.environ:
        print(f"OpenBLAS does not know this CPU; PyTorch runs with OPENBLAS_CORETYPE={core}")
        os.environ["OPENBLAS_CORETYPE"] = core
    records = allreduce_table(build) + multi30k(build)
    runs = small_model_runs(build)
    records += overlap_table(runs) + zero_table(runs) + pytorch_table(runs)
    add_records(bench_json, records)


def add_records(bench_json, records):
    """`records` into the file `bench_json`, in place of those of their benches."""
    benches = {r["bench"] for r in records}
    try:
        with open(bench_json) as f:
            kept = [r for r in json.load(f) if r["bench"] not in benches]
    except FileNotFoundError:
        kept = []
    with open(bench_json + ".tmp", "w") as f:
        json.dump(kept + records, f, indent=1)
        f.write("\n")
    os.replace(bench_json + ".tmp", bench_json)
    print(f"\nadded {len(records)} records to {bench_json} ({len(kept) + len(records)} records)")


if __name__ == "__main__":
    main()
