"""L2 row blocks of a matrix product with cold weights: the model's choice against none.

``register_tile.row_block`` cuts a register-tiled product's rows into L2 blocks, each core
then streaming the whole column operand once per block. A model's weights are that operand,
and they are cold at each call (the other layers' weights evict them). Per shape
``Y(M,N) = X(M,K) W(N,K)^T`` this times, in one process, polyopt's kernel as the model
plans it, with ``mc=0`` (no blocks) and torch's ``mm`` (MKL), each called on ``--weights``
distinct weight matrices in turn (as a network's layers: 1 is the warm case), the weights
declared ``constants`` (packed once). Rounds alternate the systems; each row is the fastest
round's time per call:

    python3 scripts/checks/bench_row_block.py --weights 24 --rounds 5

The shapes are BERT-base's feed-forward output at 128 and 256 tokens, a square product and
BERT's at batch 8, where the model blocks.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

import polyopt

SHAPES = ((128, 3072, 768), (256, 3072, 768), (1024, 1024, 1024), (1024, 3072, 768))


def systems(m: int, k: int, n: int, count: int) -> tuple[dict[str, Callable[[int], object]],
                                                          str]:
    """The systems' calls (taking a weight's index) and the model's plan, in words."""
    src = f"def lin(float({m},{k}) X, float({n},{k}) W) -> (Y) {{ Y(i,j) +=! X(i,k) * W(j,k) }}"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k), dtype=np.float32)
    weights = [rng.standard_normal((n, k), dtype=np.float32) for _ in range(count)]
    model = polyopt.compile(src, options={"constants": ["W"]}).build()
    plain = polyopt.compile(src, options={"constants": ["W"], "knobs": {"mc": 0}}).build()
    tx, tws = torch.from_numpy(x), [torch.from_numpy(w) for w in weights]
    plan = "rows in L2 blocks" if "rows in L2 blocks" in str(model.schedule) else "no blocks"
    return {"model": lambda i: model(x, weights[i]), "mc=0": lambda i: plain(x, weights[i]),
            "torch": lambda i: torch.mm(tx, tws[i].t())}, plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weights", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print("| M x K x N | model's plan | model ms | mc=0 ms | torch ms | mc=0 / model |")
    print("|---|---|---|---|---|---|")
    for m, k, n in SHAPES:
        calls, plan = systems(m, k, n, args.weights)
        best = dict.fromkeys(calls, float("inf"))
        for fn in calls.values():  # each weight's packed copy, made once
            for i in range(args.weights):
                fn(i)
        for _ in range(args.rounds):
            for name, fn in calls.items():
                start = time.perf_counter()
                for i in range(args.weights):
                    fn(i)
                best[name] = min(best[name], (time.perf_counter() - start) / args.weights)
        ms = {name: t * 1e3 for name, t in best.items()}
        print(f"| {m} x {k} x {n} | {plan} | {ms['model']:.3f} | {ms['mc=0']:.3f} | "
              f"{ms['torch']:.3f} | {ms['mc=0'] / ms['model']:.2f} |")


if __name__ == "__main__":
    main()
