"""``polyopt bench formulations``: equivalent formulations of the bundled stencils
(``stencil_forms``, issue 40), each compiled and run in its own child process: peak RSS
(``resource.getrusage`` in the child: compile, inputs and calls together), the median time
per call, against the bundled def in program order and against NumPy (float32, in place,
PolyBench's loops), in one run.

    polyopt bench formulations            # jacobi-2d N=3000 T=60, the others ~100 ms
    polyopt bench formulations --quick    # small sizes, to check the suite

Prints a markdown table. Times are wall-clock on whatever else the machine runs: say so.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from polyopt import api
from polyopt.bench import stencil_forms as forms
from polyopt.bench.entry import suite_main

SIZES = {"jacobi_2d": {"N": 3000, "T": 60}, "jacobi_1d": {"N": 400000, "T": 100},
         "heat_3d": {"N": 100, "T": 20}}
QUICK = {"jacobi_2d": {"N": 200, "T": 10}, "jacobi_1d": {"N": 5000, "T": 20},
         "heat_3d": {"N": 24, "T": 6}}
VARIANTS = (*forms.KINDS, "program-order", "numpy")
# The directory polyopt is imported from: the child runs there, so that it imports the same
# polyopt (with ``-m``, the working directory comes first on sys.path).
ROOT = Path(__file__).resolve().parents[2]


def _step(name: str, a: np.ndarray, b: np.ndarray) -> None:
    """One PolyBench time step, in place (float32)."""
    for src, dst in ((a, b), (b, a)):
        if name == "jacobi_1d":
            dst[1:-1] = np.float32(0.33333) * (src[:-2] + src[1:-1] + src[2:])
        elif name == "jacobi_2d":
            dst[1:-1, 1:-1] = np.float32(0.2) * (src[1:-1, 1:-1] + src[1:-1, :-2]
                                                 + src[1:-1, 2:] + src[2:, 1:-1]
                                                 + src[:-2, 1:-1])
        else:
            c = src[1:-1, 1:-1, 1:-1]
            e = np.float32(0.125)
            dst[1:-1, 1:-1, 1:-1] = (e * (src[2:, 1:-1, 1:-1] - 2 * c + src[:-2, 1:-1, 1:-1])
                                     + e * (src[1:-1, 2:, 1:-1] - 2 * c + src[1:-1, :-2, 1:-1])
                                     + e * (src[1:-1, 1:-1, 2:] - 2 * c + src[1:-1, 1:-1, :-2])
                                     + c)


def _call(name: str, variant: str, sizes: dict[str, int], a: np.ndarray,
          b: np.ndarray) -> Callable[[], None]:
    """One call of ``variant``: NumPy's steps on copies, or the compiled kernel."""
    if variant == "numpy":
        def steps() -> None:
            x, y = a.copy(), b.copy()
            for _ in range(sizes["T"]):
                _step(name, x, y)
        return steps
    kind = "input" if variant == "program-order" else variant
    schedule = "program-order" if variant == "program-order" else None
    kernel = api.compile(forms.source(name, kind), sizes=dict(sizes), schedule=schedule,
                         options={"tuned": False})
    return lambda: kernel(a, b)


def child(name: str, variant: str, sizes: dict[str, int], reps: int) -> dict[str, object]:
    """Compile (unless NumPy) and time ``variant`` of ``name`` in this process."""
    n = sizes["N"]
    shape = {"jacobi_1d": (n,), "jacobi_2d": (n, n), "heat_3d": (n, n, n)}[name]
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(2))
    t0 = time.perf_counter()
    call = _call(name, variant, sizes, a, b)
    call()  # the first call builds the specialized kernel
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"name": name, "variant": variant, "first_s": first,
            "ms": 1e3 * statistics.median(times), "rss_mb": rss}


def measure(name: str, variant: str, sizes: dict[str, int], reps: int) -> dict[str, object]:
    """``variant`` of ``name`` timed in a child process of its own."""
    cmd = [sys.executable, "-m", "polyopt.bench.formulations", "--child", name, variant,
           json.dumps(sizes), str(reps)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    if out.returncode != 0:
        return {"name": name, "variant": variant, "error": out.stderr.strip()[-300:]}
    row: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def _num(value: object) -> float:
    assert isinstance(value, int | float), value
    return float(value)


def _row(name: str, sizes: dict[str, int], variant: str, r: dict[str, object],
         baselines: Sequence[object]) -> str:
    if "error" in r:
        return f"| {name} | | {variant} | error: {r['error']} | | | | |"
    ms = _num(r["ms"])
    ratio = [f"{_num(x) / ms:.2f}x" if x else "" for x in baselines]
    return (f"| {name} | {sizes} | {variant} | {ms:.2f} | {_num(r['rss_mb']):.0f}"
            f" | {ratio[0]} | {ratio[1]} | {_num(r['first_s']):.1f} |")


def table(rows: list[dict[str, object]], sizes: dict[str, dict[str, int]]) -> str:
    lines = ["| stencil | sizes | variant | ms / call | peak RSS MB | vs program order | "
             "vs numpy | first call s |", "|---|---|---|---|---|---|---|---|"]
    for name in sizes:
        mine = {str(r["variant"]): r for r in rows if r["name"] == name}
        baselines = [mine.get(v, {}).get("ms") for v in ("program-order", "numpy")]
        lines += [_row(name, sizes[name], v, mine[v], baselines) for v in VARIANTS
                  if v in mine]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench formulations``."""
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--names", nargs="*", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--reps", type=int, default=3, help="timed calls per variant (median)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    """Every variant of every stencil of ``--names``, each in a child; one markdown table
    (``--child NAME VARIANT SIZES REPS``: be the child, print one JSON line)."""
    if args.child:
        name, variant, sizes, reps = args.child
        print(json.dumps(child(name, variant, json.loads(sizes), int(reps))))
        return 0
    sizes = {n: (QUICK if args.quick else SIZES)[n] for n in args.names}
    rows = [measure(n, v, s, args.reps) for n, s in sizes.items() for v in VARIANTS]
    print(table(rows, sizes))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench formulations ...`` as a module of its own (``python3 -m
    polyopt.bench.formulations``)."""
    return suite_main("formulations", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
