"""PyTorch's side of the data-parallel table (bench/data_parallel.py): the model
of bench/pytorch_reference.py trained with DistributedDataParallel over gloo,
one process of one thread per rank:

  python3 bench/pytorch_ddp.py [--ranks 2] [--model small] [--precision fp32|bf16] [--warmup 3] [--steps 10]

starts the ranks as torchrun would (env:// rendezvous: MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE), since Debian's torchrun (torch 1.13 under
Python 3.11) fails before starting any: Std.from_str("0") returns None there,
Python 3.11's Flag iteration leaving out the zero member.

Each rank takes its share of every global batch (rows r*B/n to (r+1)*B/n of
the same random batch: the split our ranks make), so the global batch is the
model's `batch`. The step is pytorch_reference.py's: forward, label-smoothed
cross-entropy (both under torch.autocast("cpu", dtype=torch.bfloat16) with
--precision bf16, as pytorch_reference.py trains), backward (DDP all-reduces gradient buckets while it runs), Adam,
zero_grad, loss.item(). Rank 0 prints one JSON line: {"step_ms", "ranks",
"torch_threads"}, the median step after the warm-up; {"error"} with exit
status 3 when torch cannot be imported.

What differs from our run (bench/data_parallel.py) is said there.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_reference as reference  # noqa: E402 (after the path it is found on)


def launch(args):
    """Starts args.ranks copies of this script as ranks 0..n-1 of one job, each
    on one thread (OpenBLAS's and OpenMP's thread counts are read when torch
    loads, so they go in the environment), and exits with the worst status."""
    with socket.socket() as s:  # a free port for rank 0's rendezvous store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(args.ranks),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    ranks = [subprocess.Popen([sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in range(args.ranks)]
    sys.exit(max(rank.wait() for rank in ranks))


def train(args):
    """One rank's run; rank 0 prints the median step."""
    torch, parity = reference.import_torch()
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo")
    rank, ranks = torch.distributed.get_rank(), torch.distributed.get_world_size()
    c = reference.MODELS[args.model]

    class Step(torch.nn.Module):
        """The reference model's whole forward as one call: DDP prepares its
        gradient buckets in forward(), which the reference model lacks."""

        def __init__(self):
            super().__init__()
            self.model = reference.build_model(torch, parity, c, "cpu")

        def forward(self, src, tgt, src_mask, tgt_mask):
            return self.model.project(self.model.decode(self.model.encode(src, src_mask), src_mask, tgt, tgt_mask))

    # The only buffers are the positional tables, which never change: no
    # broadcast of them before each forward.
    model = torch.nn.parallel.DistributedDataParallel(Step(), broadcast_buffers=False)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, eps=1e-9)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=reference.PAD, label_smoothing=0.1)
    gen = torch.Generator().manual_seed(7)
    share = slice(rank * c["batch"] // ranks, (rank + 1) * c["batch"] // ranks)
    batches = [tuple(t[share] for t in reference.random_batch(torch, parity, c, gen)) for _ in range(4)]
    times = []
    for i in range(args.warmup + args.steps):
        src, tgt, label, src_mask, tgt_mask = batches[i % len(batches)]
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            logprobs = model(src, tgt, src_mask, tgt_mask)
            loss = loss_fn(logprobs.view(-1, c["vocab"]), label.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        if i >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)
    if rank == 0:
        print(json.dumps({"step_ms": statistics.median(times), "ranks": ranks,
                          "torch_threads": torch.get_num_threads()}), flush=True)
    torch.distributed.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2, help="processes, one thread each")
    parser.add_argument("--model", choices=sorted(reference.MODELS), default="small")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="bf16: forward and loss under torch.autocast on the CPU")
    # Its steps take seconds here and are steady from the second on: few suffice.
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    args = parser.parse_args()
    train(args) if "RANK" in os.environ else launch(args)


if __name__ == "__main__":
    main()
