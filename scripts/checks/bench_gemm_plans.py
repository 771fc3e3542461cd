"""Register-tiled contraction plans against each other: the pipeline's choice and knob
variants (packing each operand, the reduction tile) of ``C(m,n) +=! A(m,r_k) * B(r_k,n)``,
with numpy's BLAS in the same run. The measurements behind the packing and ``kc`` fields of
``polyopt.pipeline.policy.CpuPolicy``.

    python scripts/checks/bench_gemm_plans.py --shapes 4096x16x1024,1024x1024x1024 \\
        --variants pack_a=False pack_b=False kc=1024 --cpu

``--cpu`` times one thread by its CPU time (``time.process_time``; the command sets
OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 for its workers): on a machine other jobs
load, wall time of a 2-thread OpenMP call waits on scheduler ticks, CPU time does not.
Without it: wall time at the default thread counts. Each cell is the median over
``--rounds`` rounds (systems interleaved, a pause before each) of the best of a few calls,
every result first checked against a float64 product.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

import polyopt

SOURCE = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
SETTLE_S = 0.15  # idle BLAS workers spin ~0.15 s after a call and stall the next one


def knobs_of(text: str) -> dict[str, object]:
    """``"pack_a=False,kc=1024"`` -> ``{"pack_a": False, "kc": 1024}``."""
    out: dict[str, object] = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        out[key.strip()] = {"True": True, "False": False}.get(value.strip()) \
            if value.strip() in ("True", "False") else int(value)
    return out


def run_shape(shape: tuple[int, int, int], variants: list[str], rounds: int,
              cpu: bool) -> list[tuple[str, float]]:
    m, n, k = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    sizes = {"M": m, "N": n, "K": k}
    systems = [("default", polyopt.compile(SOURCE, "mm", sizes=sizes))]
    systems += [(v, polyopt.compile(SOURCE, "mm", sizes=sizes, options={"knobs": knobs_of(v)}))
                for v in variants]
    calls = [(name, lambda kern=kern: kern(a, b)) for name, kern in systems]
    calls.append(("numpy", lambda: a @ b))
    ref = a.astype(np.float64) @ b
    for name, fn in calls:
        if not np.allclose(fn(), ref, rtol=1e-3, atol=1e-3 * np.sqrt(k)):
            raise SystemExit(f"{name} on {m}x{n}x{k}: wrong result")
    clock = time.process_time if cpu else time.perf_counter
    reps = max(3, int(0.05 / max(1e-5, 2.0 * m * n * k / 5e10)))
    best: dict[str, list[float]] = {name: [] for name, _ in calls}
    for _ in range(rounds):
        for name, fn in calls:
            time.sleep(SETTLE_S)
            fn()
            times = []
            for _ in range(reps):
                start = clock()
                fn()
                times.append(clock() - start)
            best[name].append(min(times))
    return [(name, float(np.median(v))) for name, v in best.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4096x16x1024,2048x128x1024,1024x1024x1024",
                    help="MxNxK list")
    ap.add_argument("--variants", nargs="*", default=["pack_a=False", "pack_a=True"],
                    help="knob sets, each 'key=value,...' (see polyopt/pipeline/knobs.py)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", action="store_true", help="one thread, CPU time")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        m, n, k = (int(x) for x in args.worker.split("x"))
        for name, sec in run_shape((m, n, k), args.variants, args.rounds, args.cpu):
            print(f"| {args.worker} | {name} | {sec * 1e3:.3f} |")
        return
    env = dict(os.environ)
    if args.cpu:
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    print(f"{'one thread, CPU time' if args.cpu else 'wall time, default threads'}; "
          f"median of {args.rounds} rounds\n\n| shape MxNxK | plan | ms |\n|---|---|---|")
    for shape in args.shapes.split(","):
        cmd = [sys.executable, __file__, "--worker", shape, "--rounds", str(args.rounds),
               "--variants", *args.variants, *(["--cpu"] if args.cpu else [])]
        subprocess.run(cmd, env=env, check=True)


if __name__ == "__main__":
    main()
