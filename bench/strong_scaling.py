#!/usr/bin/env python3
"""`make MPI=1 bench`'s strong-scaling table: one training, its cores split
differently between ranks and threads.

Usage: python3 bench/strong_scaling.py BUILD BENCH_JSON
  BUILD       the build folder with scratchformer and mpi/scratchformer
  BENCH_JSON  the C++ bench's records (build/bench.json): this script's
              records are added, replacing any it added before

configs/multi30k_en_de.json on a prefix of its corpus (bench/data_parallel.py's
comparison 1), global batch 64 however many ranks share it, trained by R ranks
x T threads for each R that is a power of two or the machine's C cores and
divides C, with T = C / R: each rank on T cores of its own (`mpirun --map-by
slot:PE=T --bind-to core`, `threads: 0`, so a rank runs T threads and its
communication thread shares them), beside one process on all C cores. The
figure is rank 0's target tokens/s, the median over the optimizer steps after
each run's first WARMUP, pooled over TRIALS runs of each split taken in turn;
and the communication each step left exposed after backward (section 2 of
docs/data-parallel-engineering.md). On 2 cores this is 2 x 1 beside 1 x 2, as
data_parallel.py measures unbound; the table says most where C is larger.
The split into one rank per core runs twice, the second time with ZeRO-1
(`zero: 1`): without it every rank runs the whole optimizer step, so C ranks
move C times the optimizer's bytes through memory at once; with it each
moves 1/C of them, and the ranks gather the parameters instead.
"""
import os
import shutil
import sys

import data_parallel as dp

WORK = "build/strong-scaling"


def splits(cores):
    """Every rank count R > 1 that divides the cores: powers of two, and all of them."""
    ranks = [r for r in (2 ** k for k in range(1, cores.bit_length())) if cores % r == 0]
    return ranks + ([cores] if cores > 1 and cores not in ranks else [])


def bound_ranks(build, ranks, threads):
    command = ["mpirun", "-np", str(ranks), "--map-by", f"slot:PE={threads}", "--bind-to", "core"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command + [f"{build}/mpi/scratchformer"]


def train_or_why(launcher, folder, settings):
    """dp.train's (steps, stderr), or (None, why) when the run failed (e.g.
    mpirun found fewer cores than the split asks)."""
    try:
        return dp.train(launcher, "configs/multi30k_en_de.json", folder, settings)
    except SystemExit as failed:  # its message: the command, then the tail of its stderr
        said = [line for line in str(failed).splitlines()[1:] if line.strip() and not line.startswith("---")]
        return None, " ".join(said[:2]) or str(failed)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, bench_json = sys.argv[1:]
    cores = len(os.sched_getaffinity(0))
    print(f"\nStrong scaling, configs/multi30k_en_de.json on its first {dp.MULTI30K_PAIRS} pairs, {cores} cores "
          f"(rank 0's target tokens/s, median after {dp.WARMUP} warm-up steps, {dp.TRIALS} runs each; "
          f"exposed: ms per step of communication after backward):\n"
          f"{'ranks x threads':<16} {'tokens/s':>9} {'ratio':>7} {'exposed':>8}")
    if not os.path.isdir(dp.MULTI30K):
        print(f"{'':<16} skipped: no {dp.MULTI30K}")
        return
    shutil.rmtree(WORK, ignore_errors=True)
    settings = dict(dp.multi30k_prefix(f"{WORK}/data"), threads=0)
    # (ranks, zero): every split, then one rank per core with ZeRO-1.
    runs = {(1, 0): []} | {(r, 0): [] for r in splits(cores)} | ({(cores, 1): []} if cores > 1 else {})
    failed = {}
    for trial in range(dp.TRIALS):
        for (ranks, zero), trials in runs.items():
            if (ranks, zero) in failed:
                continue
            launcher = [f"{build}/scratchformer"] if ranks == 1 else bound_ranks(build, ranks, cores // ranks)
            folder = f"{WORK}/{ranks}x{cores // ranks}{'_zero' if zero else ''}_{trial}"
            steps, stderr = train_or_why(launcher, folder, dict(settings, zero=zero))
            if steps is None:
                failed[ranks, zero] = stderr
            else:
                trials.append((steps, stderr))
    if (1, 0) in failed:
        print(f"1 x {cores:<12} failed: {failed[1, 0]}")
        return
    ref = dp.median_tokens_per_s([steps for steps, _ in runs[1, 0]])
    records = []
    for (ranks, zero), trials in runs.items():
        case = f"{ranks} x {cores // ranks}" + (", zero 1" if zero else "")
        if (ranks, zero) in failed:
            print(f"{case:<16} failed: {failed[ranks, zero]}")
            continue
        ours = dp.median_tokens_per_s([steps for steps, _ in trials])
        if ranks == 1:
            print(f"{case:<16} {ours:9.0f} {1:7.3f}")
        else:
            exposed = sum(dp.summary(stderr)["exposed_ms"] for _, stderr in trials) / len(trials)
            print(f"{case:<16} {ours:9.0f} {ours / ref:7.3f} {exposed:8.2f}")
            records.append(dp.record("strong_scaling", f"multi30k_en_de prefix, {ranks} ranks x {cores // ranks} "
                                         f"threads{', zero 1' if zero else ''}", ours, ref,
                                         f"1 process x {cores} threads", "tokens/s", threads=cores,
                                         exposed_ms=exposed))
    dp.add_records(bench_json, records)


if __name__ == "__main__":
    main()
