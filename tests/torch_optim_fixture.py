"""Writes tests/torch_optim_fixture.json: parameters after each step of
torch.optim.Adam and torch.optim.AdamW, which tests/test_optim.cpp compares
with optim::Adam.

Usage: python3 torch_optim_fixture.py OUT.json     (writes the fixture)
       python3 torch_optim_fixture.py --check FILE (exit 0 when FILE holds what
                                                    this script writes now)

Each case runs one optimizer of the options optim::AdamOptions has (betas,
eps, weight_decay, decoupled for AdamW; there is no amsgrad) on three
parameters whose sizes cover optim's vector body and scalar tail (21, 3x5, 1
elements), for 10 steps at a learning rate given per step, as a schedule sets
it. The gradients of each step are fixed numbers spanning 1e-6 to 1e3, with
zeros (the moments decay, the parameters still move) and some below eps (where
eps decides the step). Inputs come from Python's random module with a fixed
seed, so they are the same on every machine; every number is a float32 value,
written in the 9 significant digits that give it back exactly. The fixture's "tolerance" is the largest relative difference
(of max(|value|, 1), per element) allowed between a float32 implementation and
these values: each step rounds a few operations differently, ~1e-7 each, and
10 steps gather them. --check allows the same between two versions of torch.
"""
import json
import math
import random
import sys

import torch

STEPS = 10
SHAPES = [[21], [3, 5], [1]]
TOLERANCE = 1e-6


def float32(x):
    return float(torch.tensor(x, dtype=torch.float32))


def cosine_with_warmup(peak, warmup):
    """The schedule "cosine" of optim/schedule.cpp over STEPS steps."""
    def lr(step):
        if step <= warmup:
            return peak * step / warmup
        progress = (step - warmup) / (STEPS - warmup)
        return peak * 0.5 * (1 + math.cos(math.pi * progress))
    return [float32(lr(s)) for s in range(1, STEPS + 1)]


CASES = [
    {"name": "adam, torch's defaults, constant lr", "decoupled": False, "betas": [0.9, 0.999], "eps": 1e-8,
     "weight_decay": 0.0, "lr": [1e-3] * STEPS},
    {"name": "adam with L2 decay, the Transformer's betas and eps, cosine lr", "decoupled": False,
     "betas": [0.9, 0.98], "eps": 1e-9, "weight_decay": 0.01, "lr": cosine_with_warmup(0.05, 3)},
    {"name": "adamw, decoupled decay, cosine lr", "decoupled": True, "betas": [0.8, 0.99], "eps": 1e-6,
     "weight_decay": 0.1, "lr": cosine_with_warmup(0.02, 4)},
]


def gradient(rng, numel):
    """One step's gradient: normal numbers at a random scale each, some zeros
    and some below eps."""
    values = []
    for _ in range(numel):
        kind = rng.random()
        if kind < 0.1:
            values.append(0.0)
        elif kind < 0.2:
            values.append(rng.gauss(0, 1e-9))
        else:
            values.append(rng.gauss(0, 1) * 10 ** rng.uniform(-6, 3))
    return values


def run(case, rng):
    """The case with its inputs drawn from rng and torch's parameters after each step."""
    numels = [math.prod(shape) for shape in SHAPES]
    start = [[float32(rng.gauss(0, 1)) for _ in range(n)] for n in numels]
    grads = [[[float32(g) for g in gradient(rng, n)] for n in numels] for _ in range(STEPS)]
    params = [torch.tensor(values, dtype=torch.float32).reshape(shape).requires_grad_()
              for values, shape in zip(start, SHAPES)]
    kind = torch.optim.AdamW if case["decoupled"] else torch.optim.Adam
    optimizer = kind(params, lr=case["lr"][0], betas=tuple(case["betas"]), eps=case["eps"],
                     weight_decay=case["weight_decay"])
    after = []
    for step in range(STEPS):
        for group in optimizer.param_groups:
            group["lr"] = case["lr"][step]
        for p, g in zip(params, grads[step]):
            p.grad = torch.tensor(g, dtype=torch.float32).reshape(p.shape)
        optimizer.step()
        after.append([p.detach().reshape(-1).tolist() for p in params])
    return dict(case, shapes=SHAPES, start=start, grads=grads, after=after)


def fixture():
    rng = random.Random(23)
    return {"torch": torch.__version__, "tolerance": TOLERANCE, "cases": [run(case, rng) for case in CASES]}


def text(x, indent=""):
    """x as JSON: a list of numbers on one line, each number in 9 digits."""
    if isinstance(x, dict):
        inner = indent + " "
        return "{\n" + ",\n".join(f"{inner}{json.dumps(k)}: {text(v, inner)}" for k, v in x.items()) + "\n" + indent + "}"
    if isinstance(x, list) and any(isinstance(v, (list, dict)) for v in x):
        inner = indent + " "
        return "[\n" + ",\n".join(inner + text(v, inner) for v in x) + "\n" + indent + "]"
    if isinstance(x, list):
        return "[" + ", ".join(text(v) for v in x) + "]"
    if isinstance(x, float):
        return "%.9g" % x
    return json.dumps(x)


def close(a, b):
    """Whether the nested lists of numbers a and b agree to TOLERANCE."""
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return abs(a - b) <= TOLERANCE * max(abs(b), 1.0)


def check(path):
    with open(path) as f:
        committed = json.load(f)
    now = json.loads(text(fixture()))
    ok = len(committed["cases"]) == len(now["cases"]) and committed["tolerance"] == now["tolerance"]
    for old, new in zip(committed["cases"], now["cases"]):
        inputs_same = all(old[key] == new[key] for key in new if key != "after")
        if not inputs_same or not close(old["after"], new["after"]):
            print(f"{path}: case '{new['name']}' is not what torch {torch.__version__} gives now"
                  f" ({'inputs' if not inputs_same else 'parameters'} differ); rerun {sys.argv[0]} {path}")
            ok = False
    return ok


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(0 if check(sys.argv[2]) else 1)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], "w") as f:
        f.write(text(fixture()) + "\n")


if __name__ == "__main__":
    main()
