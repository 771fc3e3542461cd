"""Kernels timed on a quiet machine and next to a CPU-bound competitor (``polyopt bench
contention``).

A laptop, a CI runner or a shared server is rarely quiet. This benchmark times stencils,
floyd-warshall, lu, a GEMM and ResNet-50 and MobileNetV2 layers, in polyopt and, for
reference, in torch where it has the operation, in rounds that alternate a quiet machine
with one where a competitor process keeps one core busy (a Python loop, which never
sleeps). Each figure is the median of a round's calls; the table gives each kernel's quiet
and busy times and busy/quiet. With one competitor on a 2-core machine, a fair share is
2x. Nothing else should run meanwhile.

    polyopt bench contention                       # every case, 3 rounds
    polyopt bench contention --cases floyd_warshall,heat_3d --rounds 5
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyopt import api, kernels
from polyopt.bench import layers
from polyopt.bench.peers import polyopt_definition
from polyopt.bench.timing import sample_seconds
from polyopt.errors import OptionError

# The competitor: one process that keeps a core busy and never sleeps.
COMPETITOR = "while True: pass"
SETTLE_S = 0.3  # lets the competitor get its core, or the kernel's threads fall asleep


@dataclass(frozen=True)
class Case:
    """One kernel: polyopt's def and sizes, its inputs' shapes and torch's formulation."""

    name: str
    source: Callable[[], tuple[str, str, dict[str, int]]]  # (def, TC source, sizes)
    shapes: tuple[tuple[int, ...], ...]
    torch: Callable[[Any, list[Any]], Callable[[], Any]] | None = None
    dominant: bool = False  # its first input diagonally dominant (a solver divides by it)


def _library(name: str, sizes: dict[str, int]) -> Callable[[], tuple[str, str, dict[str, int]]]:
    return lambda: (name, kernels.get(name), dict(sizes))


def _layer(model: str, number: int) -> Case:
    layer = layers.select(model, str(number))[0]

    def source() -> tuple[str, str, dict[str, int]]:
        name, src, sizes = polyopt_definition(layer)
        return name, src, {**sizes, "N": 1}

    def conv(torch: Any, xs: list[Any]) -> Callable[[], Any]:
        kw = {"stride": layer.stride, "padding": layer.pad, "groups": layer.groups}
        return lambda: torch.nn.functional.conv2d(xs[0], xs[1], **kw)

    return Case(f"{model} layer {number}", source,
                (layer.input_shape(1), layer.weight_shape()), conv)


def _torch_mm(torch: Any, xs: list[Any]) -> Callable[[], Any]:
    return lambda: torch.mm(xs[0], xs[1])


def _torch_floyd(torch: Any, xs: list[Any]) -> Callable[[], Any]:
    def run() -> Any:
        d = xs[0]
        for k in range(d.shape[0]):
            d = torch.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
        return d
    return run


def _torch_jacobi_2d(steps: int) -> Callable[[Any, list[Any]], Callable[[], Any]]:
    def make(torch: Any, xs: list[Any]) -> Callable[[], Any]:
        def run() -> Any:
            a, b = xs[0].clone(), xs[1].clone()
            for _ in range(steps):
                b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
                                       + a[2:, 1:-1] + a[:-2, 1:-1])
                a[1:-1, 1:-1] = 0.2 * (b[1:-1, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:]
                                       + b[2:, 1:-1] + b[:-2, 1:-1])
            return a
        return run
    return make


CASES: tuple[Case, ...] = (
    Case("floyd_warshall", _library("floyd_warshall", {"N": 180}), ((180, 180),),
         _torch_floyd),
    Case("heat_3d", _library("heat_3d", {"N": 10}), ((10, 10, 10), (10, 10, 10))),
    Case("jacobi_2d", _library("jacobi_2d", {"N": 250}), ((250, 250), (250, 250)),
         _torch_jacobi_2d(20)),
    Case("seidel_2d", _library("seidel_2d", {"N": 120}), ((120, 120),)),
    Case("jacobi_1d", _library("jacobi_1d", {"N": 400}), ((400,), (400,))),
    Case("lu", _library("lu", {"N": 120}), ((120, 120),), dominant=True),
    Case("matmul 256", _library("matmul", {"M": 256, "N": 256, "K": 256}),
         ((256, 256), (256, 256)), _torch_mm),
    _layer("resnet50", 7), _layer("resnet50", 19), _layer("mobilenetv2", 2),
    _layer("mobilenetv2", 20),
)


def _inputs(case: Case, rng: np.random.Generator) -> list[np.ndarray]:
    # Positive values: floyd-warshall adds path lengths.
    xs = [rng.uniform(1, 2, s).astype(np.float32) for s in case.shapes]
    if case.dominant:
        xs[0] += np.float32(case.shapes[0][0]) * np.eye(case.shapes[0][0], dtype=np.float32)
    return xs


def _system(case: Case, system: str, xs: list[np.ndarray]) -> Callable[[], Any]:
    if system == "torch":
        torch = importlib.import_module("torch")
        if case.torch is None:
            raise OptionError(f"{case.name} has no torch formulation")
        return case.torch(torch, [torch.from_numpy(x) for x in xs])
    name, source, sizes = case.source()
    kernel = api.compile(source, name, sizes=sizes)
    return lambda: kernel(*xs)


def _sample(fn: Callable[[], Any], repeat: int) -> float:
    return statistics.median(sample_seconds(fn, repeat))


def measure(case: Case, system: str, rounds: int, repeat: int) -> dict[str, list[float]]:
    """{"quiet": [...], "busy": [...]}: one median per round and condition, the conditions
    alternating, the competitor started anew for each busy sample. Run in a process of its
    own: two systems' thread pools in one process (torch's and polyopt's may be one libgomp)
    wait on each other's spinning threads."""
    fn = _system(case, system, _inputs(case, np.random.default_rng(0)))
    times: dict[str, list[float]] = {"quiet": [], "busy": []}
    for r in range(rounds):
        for busy in (r % 2 == 1, r % 2 == 0):
            competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR]) if busy else None
            try:
                time.sleep(SETTLE_S)
                times["busy" if busy else "quiet"].append(_sample(fn, repeat))
            finally:
                if competitor is not None:
                    competitor.kill()
                    competitor.wait()
    return times


def measure_apart(case: Case, system: str, rounds: int, repeat: int
                  ) -> dict[str, list[float]] | None:
    """:func:`measure` in a child process; None when the system cannot run the case."""
    argv = [sys.executable, "-m", "polyopt.bench.contention", "--child", case.name, system,
            str(rounds), str(repeat)]
    run = subprocess.run(argv, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        print(f"{case.name}, {system}: {run.stderr.strip().splitlines()[-1:]}",
              file=sys.stderr)
        return None
    return json.loads(run.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def table(results: dict[str, dict[str, dict[str, list[float]]]]) -> str:
    """Markdown: per kernel, each system's quiet and busy medians (ms) and their ratio."""
    head = ("| kernel | polyopt quiet ms | busy ms | busy/quiet | torch quiet ms | busy ms "
            "| busy/quiet |\n|---|---|---|---|---|---|---|")
    rows = [head]
    for name, per_system in results.items():
        cells = [name]
        for system in ("polyopt", "torch"):
            t = per_system.get(system)
            if t is None:
                cells += ["", "", ""]
                continue
            quiet, busy = statistics.median(t["quiet"]), statistics.median(t["busy"])
            cells += [f"{quiet * 1e3:.3f}", f"{busy * 1e3:.3f}", f"{busy / quiet:.2f}"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cases", help="comma-separated kernels (default: all): "
                   + ", ".join(c.name for c in CASES))
    p.add_argument("--rounds", type=int, default=4, help="rounds, half of them busy")
    p.add_argument("--repeat", type=int, default=5, help="timed calls per sample")
    p.add_argument("--no-torch", action="store_true", help="polyopt alone")


def chosen(names: str | None) -> list[Case]:
    if not names:
        return list(CASES)
    known = {c.name: c for c in CASES}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise OptionError(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in wanted]


def run(args: argparse.Namespace) -> int:
    systems = ["polyopt"]
    if not args.no_torch:
        if importlib.util.find_spec("torch") is None:
            print("torch is not installed: polyopt alone", file=sys.stderr)
        else:
            systems.append("torch")
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    for case in chosen(args.cases):
        print(f"{case.name} ...", file=sys.stderr, flush=True)
        results[case.name] = {}
        for system in systems:
            if system == "torch" and case.torch is None:
                continue
            got = measure_apart(case, system, args.rounds, args.repeat)
            if got is not None:
                results[case.name][system] = got
    print(table(results))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:  # measure_apart's child: one case and system
        case = chosen(argv[1])[0]
        print(json.dumps(measure(case, argv[2], int(argv[3]), int(argv[4]))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
