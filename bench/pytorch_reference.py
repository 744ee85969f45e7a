"""PyTorch's side of `make bench`'s end-to-end comparisons.

Usage:
  python3 bench/pytorch_reference.py train --model tiny|small --threads N [--precision fp32|bf16]
                                     [--warmup 5] [--steps 20] [--device cpu|cuda]
  python3 bench/pytorch_reference.py decode --threads N [--warmup 3] [--steps 20] [--device cpu|cuda]

Prints one JSON line on stdout:
  train:  {"step_ms", "peak_rss_mib", "torch_threads", "blas_threads"}
  decode: {"decode_ms", "peak_rss_mib", "torch_threads", "blas_threads"}
and {"error": ...} with exit status 3 when torch cannot be imported.

The model is the reference Transformer of tests/pytorch_parity.py, imported,
not copied. The training step mirrors bench/train_step.cpp: random-token
batches framed as training frames them, forward, label-smoothed cross-entropy,
backward, Adam, zero_grad; the decode is greedy without a KV cache. With
--precision bf16 the forward pass and the loss run under
torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch's mixed precision: its
matrix products in bf16 through oneDNN, float32 master weights), as
bench/train_step.cpp runs ours under an AutocastGuard. With --device cuda the
model and batches live on the GPU (the reference for our OpenCL backend on
one), and each timed step or decode ends when the GPU has finished it.

N threads is PyTorch's best use of N cores: PyTorch's own OpenMP threads or
OpenBLAS's threads. Each split runs in a child process (OpenBLAS reads its
thread count from the environment when it loads, before `import torch` ends),
a brief probe of each picks the faster, and its full measurement is printed.
`--torch-threads T --blas-threads B` measures one split in this process.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAD, SOS, EOS = 1, 2, 3

# The sizes of bench/train_step.cpp: a toy task (tiny) and a small real corpus (small).
MODELS = {
    "tiny": dict(d_model=128, N=2, h=4, d_ff=512, seq_len=32, batch=32, vocab=4000),
    "small": dict(d_model=256, N=3, h=8, d_ff=1024, seq_len=64, batch=32, vocab=8000),
}
DECODE_SOURCE_TOKENS = 20  # one source sentence of 20 tokens ...
DECODE_NEW_TOKENS = 20     # ... and exactly 20 greedy steps, EOS or not: fixed work


def splits(threads):
    """(torch threads, BLAS threads) candidates for `threads` cores: PyTorch's
    OpenMP threads or OpenBLAS's threads, not both: the two pools busy-wait
    against each other (20x slower steps on 2 cores)."""
    return list(dict.fromkeys([(threads, 1), (1, threads)]))


def import_torch():
    """torch and the reference model module, or the error line and exit status 3."""
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install failing inside torch
        print(json.dumps({"error": f"cannot import torch: {e}"}), flush=True)
        sys.exit(3)
    sys.path.insert(0, os.path.join(REPO, "tests"))
    import pytorch_parity
    return torch, pytorch_parity


def build_model(torch, seed, c, device):
    """The reference Transformer with Xavier-uniform initialisation of every 2-D+ parameter, on `device`."""
    torch.manual_seed(42)
    model = seed.Transformer(c["vocab"], c["vocab"], c["seq_len"], c["seq_len"],
                             c["d_model"], c["N"], c["h"], c["d_ff"], dropout=0.1)
    for p in model.parameters():
        if p.dim() > 1:
            torch.nn.init.xavier_uniform_(p)
    return model.to(device)


def finished(torch, device):
    """Waits until the device has done what was queued (a no-op on the CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def masks(seed, src, tgt):
    """The masks (1 = keep): [B, 1, 1, S] not-pad; [B, 1, T, T] not-pad & causal."""
    src_mask = (src != PAD).unsqueeze(1).unsqueeze(1).int()
    tgt_mask = (tgt != PAD).unsqueeze(1).unsqueeze(1).int() & seed.causal_mask(tgt.shape[1]).unsqueeze(0)
    return src_mask, tgt_mask


def random_batch(torch, seed, c, gen):
    """Random tokens framed as in training, framed lengths uniform in [S/2, S-1]:
    encoder [SOS] x [EOS] [PAD]..., decoder [SOS] y [PAD]..., label y [EOS] [PAD]..."""
    b, s, vocab = c["batch"], c["seq_len"], c["vocab"]
    src = torch.full((b, s), PAD, dtype=torch.long)
    tgt = torch.full((b, s), PAD, dtype=torch.long)
    label = torch.full((b, s), PAD, dtype=torch.long)
    for i in range(b):
        n = s // 2 - 2 + int(torch.randint(s // 2, (1,), generator=gen))  # tokens besides SOS/EOS
        x = torch.randint(4, vocab, (n,), generator=gen)
        y = torch.randint(4, vocab, (n,), generator=gen)
        src[i, 0], src[i, 1:n + 1], src[i, n + 1] = SOS, x, EOS
        tgt[i, 0], tgt[i, 1:n + 1] = SOS, y
        label[i, :n], label[i, n] = y, EOS
    return (src, tgt, label) + masks(seed, src, tgt)


def train_step_ms(torch, seed, c, precision, warmup, steps, device):
    """Median milliseconds of `steps` training steps after `warmup`, over 4 batches in turn,
    the forward pass and the loss autocast to bf16 when `precision` is "bf16"."""
    model = build_model(torch, seed, c, device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, eps=1e-9)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    gen = torch.Generator().manual_seed(7)
    batches = [tuple(t.to(device) for t in random_batch(torch, seed, c, gen)) for _ in range(4)]
    times = []
    for i in range(warmup + steps):
        src, tgt, label, src_mask, tgt_mask = batches[i % len(batches)]
        start = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            memory = model.encode(src, src_mask)
            logprobs = model.project(model.decode(memory, src_mask, tgt, tgt_mask))
            loss = loss_fn(logprobs.view(-1, c["vocab"]), label.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        finished(torch, device)
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def decode_ms(torch, seed, warmup, steps, device):
    """Median milliseconds of one greedy decode with the tiny model, without a
    cache: encode once, then re-run the decoder on the whole prefix per token."""
    c = MODELS["tiny"]
    model = build_model(torch, seed, c, device)
    model.eval()
    gen = torch.Generator().manual_seed(7)
    # [SOS] x [EOS] padded to seq_len, as training frames a source sentence.
    src = torch.full((1, c["seq_len"]), PAD, dtype=torch.long)
    src[0, 0], src[0, DECODE_SOURCE_TOKENS + 1] = SOS, EOS
    src[0, 1:DECODE_SOURCE_TOKENS + 1] = torch.randint(4, c["vocab"], (DECODE_SOURCE_TOKENS,), generator=gen)
    src = src.to(device)
    src_mask = (src != PAD).unsqueeze(1).unsqueeze(1).int()
    times = []
    with torch.no_grad():
        for i in range(warmup + steps):
            start = time.perf_counter()
            memory = model.encode(src, src_mask)
            out = torch.full((1, 1), SOS, dtype=torch.long, device=device)
            for _ in range(DECODE_NEW_TOKENS):
                tgt_mask = seed.causal_mask(out.shape[1]).type_as(src_mask)
                logprobs = model.project(model.decode(memory, src_mask, out, tgt_mask)[:, -1])
                out = torch.cat([out, logprobs.argmax(dim=1, keepdim=True)], dim=1)
            finished(torch, device)
            if i >= warmup:
                times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run_here(args):
    """Measure one split in this process, re-executed first if its environment
    does not yet give the threads (they must be set before torch loads)."""
    env = {"OMP_NUM_THREADS": str(args.torch_threads), "OPENBLAS_NUM_THREADS": str(args.blas_threads),
           "MKL_NUM_THREADS": str(args.blas_threads)}
    if any(os.environ.get(k) != v for k, v in env.items()):
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                  dict(os.environ, **env))
    torch, seed = import_torch()
    torch.set_num_threads(args.torch_threads)
    if args.mode == "train":
        result = {"step_ms": train_step_ms(torch, seed, MODELS[args.model], args.precision, args.warmup,
                                           args.steps, args.device)}
    else:
        result = {"decode_ms": decode_ms(torch, seed, args.warmup, args.steps, args.device)}
    result.update(peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  torch_threads=torch.get_num_threads(), blas_threads=args.blas_threads)
    print(json.dumps(result), flush=True)


def run_split(args, split, warmup, steps):
    """The JSON result of one (torch threads, BLAS threads) split, measured in a
    child; a failing child's line (torch missing: {"error"}, exit 3) ends this
    process the same way."""
    command = [sys.executable, os.path.abspath(__file__), args.mode, "--model", args.model,
               "--precision", args.precision, "--device", args.device,
               "--warmup", str(warmup), "--steps", str(steps),
               "--torch-threads", str(split[0]), "--blas-threads", str(split[1])]
    child = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    lines = child.stdout.strip().splitlines()
    if child.returncode != 0 or not lines:
        print(lines[-1] if lines else json.dumps({"error": f"child exited {child.returncode}"}), flush=True)
        sys.exit(child.returncode or 1)
    return json.loads(lines[-1])


def run_best(args):
    """Probe each thread split briefly (2 warm-up, 3 timed), then measure the
    fastest in full: a full run of every split would double the time."""
    key = "step_ms" if args.mode == "train" else "decode_ms"
    candidates = splits(args.threads)
    best = min(candidates, key=lambda split: run_split(args, split, 2, 3)[key]) if len(candidates) > 1 \
        else candidates[0]
    print(json.dumps(run_split(args, best, args.warmup, args.steps)), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["train", "decode"])
    parser.add_argument("--model", choices=sorted(MODELS), default="tiny",
                        help="train: the model (decode: always tiny)")
    parser.add_argument("--threads", type=int, default=1, help="cores to use, split as fits PyTorch best")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="train: fp32, or bf16 autocast (torch.autocast on the CPU)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where the model runs")
    parser.add_argument("--warmup", type=int, help="untimed runs first (train 5, decode 3)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps, or timed whole decodes")
    parser.add_argument("--torch-threads", type=int, help="one split, in this process: PyTorch's threads")
    parser.add_argument("--blas-threads", type=int, help="... and the BLAS library's threads")
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = 5 if args.mode == "train" else 3
    if (args.torch_threads is None) != (args.blas_threads is None):
        parser.error("--torch-threads and --blas-threads go together")
    if args.torch_threads is None:
        run_best(args)
    else:
        run_here(args)


if __name__ == "__main__":
    main()
