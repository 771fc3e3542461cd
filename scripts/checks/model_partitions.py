"""Where a whole model's time goes under the torch backend: each distinct partition's time.

Compiles one of ``polyopt bench model``'s networks with ``backend="polyopt"``, times every
partition call over ``--runs`` forward passes, and prints, per distinct partition source
(repeated blocks share one), the time per forward, the calls per forward and its
contraction; then the forward's total against the partitions' sum (the rest is the call
path: Dynamo's and AOTAutograd's wrappers, the views and the per-call conversions):

    python3 scripts/checks/model_partitions.py --model bert --runs 5

With ``--torch``, each distinct partition is also timed against torch running its operators
one by one on random inputs of its shapes (``choice.measure``: alternating calls, each side's
fastest), and its row gives torch's time per forward and torch's time over polyopt's: where a
model loses to torch at a batch size, the partitions that lose it.
"""

from __future__ import annotations

import argparse
import collections
import time
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from polyopt.bench.model import networks
from polyopt.torch import choice, compiler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50", choices=sorted(networks.NETWORKS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--torch", action="store_true",
                        help="time each partition's operators in torch too")
    args = parser.parse_args()
    net = networks.build(args.model)
    x = net.example(args.batch)
    spent: dict[str, list[float]] = collections.defaultdict(list)
    call = compiler.PartitionCall.__call__

    def timed(self: compiler.PartitionCall, *tensors: Any) -> Any:
        start = time.perf_counter()
        out = call(self, *tensors)
        spent[self.part.source].append(time.perf_counter() - start)
        return out
    compiler.PartitionCall.__call__ = timed  # type: ignore[method-assign]
    theirs = _capture_subgraphs() if args.torch else {}
    with torch.no_grad():
        fast = torch.compile(net.module, backend="polyopt")
        fast(x)
        spent.clear()
        start = time.perf_counter()
        for _ in range(args.runs):
            fast(x)
        total = (time.perf_counter() - start) / args.runs * 1e3
    rows = sorted(((sum(v) / args.runs * 1e3, len(v) // args.runs, k) for k, v in spent.items()),
                  reverse=True)
    print(f"forward {total:.2f} ms; partitions {sum(r[0] for r in rows):.2f} ms")
    for ms, calls, source in rows[:args.top]:
        first = next((ln.strip() for ln in source.splitlines() if "+=!" in ln), "")
        if source in theirs:
            module, inputs, ours = theirs[source]
            v = choice.measure(ours, module, inputs)
            against = v.torch_ms / v.polyopt_ms
            print(f"{ms:8.2f} ms  torch {v.torch_ms * calls:8.2f} ms  torch/polyopt "
                  f"{against:5.2f}  x{calls:<3d} {first[:90]}")
        else:
            print(f"{ms:8.2f} ms  x{calls:<3d} {first[:110]}")


def _capture_subgraphs() -> dict[str, tuple[Any, list[torch.Tensor], Any]]:
    """Per partition source, torch's subgraph of its operators, random inputs and the
    partition's call, taken as the backend rewrites each graph (before the rewrite)."""
    taken: dict[str, tuple[Any, list[torch.Tensor], Any]] = {}
    rewrite = compiler.rewrite

    def capture(gm: torch.fx.GraphModule, cut: Any, calls: dict[str, Any]) -> None:
        for part in cut.partitions:
            if part.source not in taken:
                with unset_fake_temporarily():
                    inputs = choice.example(gm, part)
                taken[part.source] = (choice.subgraph(gm, part), inputs, calls[part.name])
        rewrite(gm, cut, calls)
    compiler.rewrite = capture  # type: ignore[assignment]
    return taken


if __name__ == "__main__":
    main()
