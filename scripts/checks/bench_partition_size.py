"""How many contractions one partition of the torch backend should hold (issue 42).

``polyopt.torch.partition.MAX_CONTRACTIONS`` cuts a run of supported operators before each
contraction past the limit. This script compiles two small networks (a chain of 3x3 conv +
batch norm + ReLU blocks, and one ``nn.TransformerEncoderLayer``) with limits 1, 2 and none,
each with an empty kernel cache, and times the compiled models against eager in one process,
taking turns (``--rounds`` rounds, the best of ``--repeat`` batches each):

    python3 scripts/checks/bench_partition_size.py --rounds 5

Report: per network and limit, compile seconds, partitions, and eager/polyopt time ratio.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import timeit
from typing import Any

import torch
from torch import nn

from polyopt.torch import compiler


def conv_chain() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)

    def block(c: int) -> nn.Module:
        bn = nn.BatchNorm2d(c)
        bn.running_mean.normal_(0, 0.1)
        bn.running_var.uniform_(0.5, 2)
        return nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), bn, nn.ReLU())
    model = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), *[block(32) for _ in range(6)],
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    return model.eval(), torch.randn(1, 3, 64, 64)


def encoder() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(128, 4, 512, batch_first=True)
    return layer.eval(), torch.randn(1, 64, 128)


def measure(model: nn.Module, x: torch.Tensor, limit: int | None, rounds: int,
            repeat: int) -> dict[str, Any]:
    os.environ["POLYOPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="partition-size-")
    record = compiler.Record()
    torch._dynamo.reset()
    start = time.perf_counter()
    fast = torch.compile(model, backend=compiler.make_backend(record, max_contractions=limit))
    fast(x)
    seconds = time.perf_counter() - start
    times: dict[str, list[float]] = {"eager": [], "polyopt": []}
    for _ in range(rounds):
        for name, fn in (("eager", model), ("polyopt", fast)):
            times[name].append(min(timeit.repeat(lambda f=fn: f(x), number=repeat, repeat=3))
                               / repeat)
    return {"compile": seconds, "parts": sum(len(p.partitions) for p in record.plans),
            "ratio": min(times["eager"]) / min(times["polyopt"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print("| network | limit | compile s | partitions | eager / polyopt time |")
    print("|---|---|---|---|---|")
    with torch.no_grad():
        for name, make in (("conv chain", conv_chain), ("encoder layer", encoder)):
            model, x = make()
            for limit in (1, 2, None):
                r = measure(model, x, limit, args.rounds, args.repeat)
                print(f"| {name} | {limit or 'none'} | {r['compile']:.1f} | {r['parts']} | "
                      f"{r['ratio']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
