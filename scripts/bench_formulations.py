"""Equivalent formulations of the bundled stencils (tests/stencil_formulations.py, issue 40),
each compiled and run in its own child process: peak RSS (``resource.getrusage`` in the
child: compile, inputs and calls together), the median time per call, against the bundled
def in program order and against NumPy (float32, in place, PolyBench's loops), in one run.

    python scripts/bench_formulations.py            # jacobi-2d N=3000 T=60, the others ~100 ms
    python scripts/bench_formulations.py --quick    # small sizes, to check the script

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
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import stencil_formulations as forms

import polyopt

SIZES = {"jacobi_2d": {"N": 3000, "T": 60}, "jacobi_1d": {"N": 400000, "T": 100},
         "heat_3d": {"N": 100, "T": 20}}
QUICK = {"jacobi_2d": {"N": 200, "T": 10}, "jacobi_1d": {"N": 5000, "T": 20},
         "heat_3d": {"N": 24, "T": 6}}
VARIANTS = (*forms.KINDS, "program-order", "numpy")


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


def child(name: str, variant: str, sizes: dict[str, int], reps: int) -> dict[str, object]:
    """Compile (unless NumPy) and time ``variant`` of ``name`` in this process."""
    n, steps = sizes["N"], sizes["T"]
    shape = {"jacobi_1d": (n,), "jacobi_2d": (n, n), "heat_3d": (n, n, n)}[name]
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(2))
    t0 = time.perf_counter()
    if variant == "numpy":
        def call() -> None:
            x, y = a.copy(), b.copy()
            for _ in range(steps):
                _step(name, x, y)
    else:
        kind = "input" if variant == "program-order" else variant
        schedule = "program-order" if variant == "program-order" else None
        kernel = polyopt.compile(forms.source(name, kind), sizes=dict(sizes),
                                 schedule=schedule, options={"tuned": False})

        def call() -> None:
            kernel(a, b)
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


def run(name: str, variant: str, sizes: dict[str, int], reps: int) -> dict[str, object]:
    cmd = [sys.executable, __file__, "--child", name, variant, json.dumps(sizes), str(reps)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"name": name, "variant": variant, "error": out.stderr.strip()[-300:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[dict[str, object]], sizes: dict[str, dict[str, int]]) -> str:
    lines = ["| stencil | sizes | variant | ms / call | peak RSS MB | vs program order | "
             "vs numpy | first call s |", "|---|---|---|---|---|---|---|---|"]
    for name in sizes:
        mine = {str(r["variant"]): r for r in rows if r["name"] == name}
        po, npy = (mine.get(v, {}).get("ms") for v in ("program-order", "numpy"))
        for v in VARIANTS:
            r = mine.get(v)
            if r is None:
                continue
            if "error" in r:
                lines.append(f"| {name} | | {v} | error: {r['error']} | | | | |")
                continue
            ms = float(r["ms"])  # type: ignore[arg-type]
            ratio = [f"{float(x) / ms:.2f}x" if x else "" for x in (po, npy)]  # type: ignore[arg-type]
            lines.append(f"| {name} | {sizes[name]} | {v} | {ms:.2f} | {float(r['rss_mb']):.0f}"  # type: ignore[arg-type]
                         f" | {ratio[0]} | {ratio[1]} | {float(r['first_s']):.1f} |")  # type: ignore[arg-type]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        name, variant, sizes, reps = sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), \
            int(sys.argv[5])
        print(json.dumps(child(name, variant, sizes, reps)))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--names", nargs="*", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--reps", type=int, default=3, help="timed calls per variant (median)")
    args = ap.parse_args()
    sizes = {n: (QUICK if args.quick else SIZES)[n] for n in args.names}
    rows = [run(n, v, s, args.reps) for n, s in sizes.items() for v in VARIANTS]
    print(table(rows, sizes))


if __name__ == "__main__":
    main()
