"""A training step through the torch backend against eager and Inductor (issue 42, item 6).

Three networks, a three-layer MLP at two sizes and one ``nn.TransformerEncoderLayer``
(dropout 0, so that every system computes the same step), each as copies with the same
weights: eager, ``torch.compile`` (Inductor), ``torch.compile(backend="polyopt")``, and
AOTAutograd alone (``aot``: the same capture and decompositions as polyopt's backend, its
graphs run by torch op by op), the floor any backend of that capture starts from. A step is
the forward pass, a mean squared error against a fixed target and the backward pass (no
optimizer, so the weights stay equal and every step's gradients can be compared). The first
step compiles (its seconds are reported); then single steps are timed in rounds, the systems
in an order rotated each round (each sample the mean of ``STEPS`` steps back to back), and
each system's gradients, all parameters' together, are checked against eager's:

    python3 scripts/checks/bench_training.py --rounds 15 --threads 2

Report: per network and system, the compile seconds, the median step in ms, eager's median
over this one (above 1: faster than eager) and the largest relative L2 error of the
gradients (one vector of every parameter's: a parameter whose gradient is zero in exact
arithmetic, such as attention's key bias, has only rounding noise to compare).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from polyopt.bench import timing
from polyopt.bench.model.child import relative_error
from polyopt.torch import compiler
from polyopt.torch.decompositions import decompositions

STEPS = 5  # steps per sample, back to back; a sample is their mean


def mlp() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.Tanh(),
                          nn.Linear(512, 16))
    return model, torch.randn(64, 256), torch.randn(64, 16)


def wide_mlp() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.Tanh(),
                          nn.Linear(1024, 16))
    return model, torch.randn(256, 512), torch.randn(256, 16)


def encoder() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
    return model, torch.randn(4, 64, 128), torch.randn(4, 64, 128)


def as_is(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    """An AOTAutograd compiler that compiles nothing: torch runs the graph's ops."""
    return make_boxed_func(gm.forward)


def step_of(model: nn.Module, fn: Callable[..., Any], x: torch.Tensor, target: torch.Tensor
            ) -> Callable[[], list[torch.Tensor]]:
    """One step of ``fn`` (``model`` compiled or not): its parameters' gradients."""
    def step() -> list[torch.Tensor]:
        model.zero_grad(set_to_none=True)
        ((fn(x) - target) ** 2).mean().backward()
        return [p.grad for p in model.parameters() if p.grad is not None]
    return step


def run(make: Callable[[], tuple[nn.Module, torch.Tensor, torch.Tensor]], rounds: int
        ) -> list[tuple[str, float, float, float, float]]:
    base, x, target = make()
    models = {name: copy.deepcopy(base) for name in ("eager", "inductor", "polyopt", "aot")}
    backends: dict[str, Any] = {
        "inductor": "inductor", "polyopt": compiler.make_backend(),
        "aot": aot_autograd(fw_compiler=as_is, bw_compiler=as_is,
                            decompositions=decompositions())}
    steps, compile_s = {}, {"eager": 0.0}
    torch._dynamo.reset()
    for name, model in models.items():
        fn = model if name == "eager" else torch.compile(model, backend=backends[name])
        steps[name] = step_of(model, fn, x, target)
        start = time.perf_counter()
        steps[name]()  # compiles
        compile_s[name] = time.perf_counter() - start
    errors = {name: 0.0 for name in models}
    reference = steps["eager"]()

    def sampler(name: str) -> Callable[[], list[float]]:
        def one() -> list[float]:
            start = time.perf_counter()
            for _ in range(STEPS):
                grads = steps[name]()
            spent = (time.perf_counter() - start) * 1e3 / STEPS
            errors[name] = max(errors[name], relative_error(
                torch.cat([g.flatten() for g in grads]),
                torch.cat([r.flatten() for r in reference])))
            return [spent]
        return one

    # No pause between samples: on this VM a step after a 50 ms sleep took 5-7x as long,
    # eager's and polyopt's alike (the cores wake slowly), which swamps a millisecond step.
    times, failed = timing.time_rounds({n: sampler(n) for n in models}, rounds, 0.0)
    if failed:
        raise SystemExit(f"failed: {failed}")
    eager = statistics.median(times["eager"])
    return [(name, compile_s[name], statistics.median(times[name]),
             eager / statistics.median(times[name]), errors[name]) for name in models]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=0, help="torch's threads (0: its own)")
    parser.add_argument("--networks", default="mlp,wide_mlp,encoder",
                        help="comma-separated, from mlp, wide_mlp, encoder")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print("| network | system | compile s | median step ms | eager / this | gradient error |")
    print("|---|---|---|---|---|---|")
    networks = {"mlp": ("MLP 256-512-512-16, batch 64", mlp),
                "wide_mlp": ("MLP 512-1024-1024-16, batch 256", wide_mlp),
                "encoder": ("encoder layer 128/4/512, 4 x 64", encoder)}
    for label, make in (networks[name] for name in args.networks.split(",")):
        for name, seconds, ms, ratio, error in run(make, args.rounds):
            print(f"| {label} | {name} | {seconds:.1f} | {ms:.2f} | {ratio:.2f}x | "
                  f"{error:.1e} |", flush=True)


if __name__ == "__main__":
    main()
