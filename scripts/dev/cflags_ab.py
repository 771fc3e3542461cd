"""Run time of suite operators under two values of ``POLYOPT_CFLAGS`` (the same tree, the
same C), or under two values of a C dialect attribute (the same flags, other C), one thread,
CPU time, alternating child processes with a kernel cache each.

    python3 scripts/dev/cflags_ab.py --b=-fsplit-loops --ops mm_square,conv_3x3 --rounds 5
    python3 scripts/dev/cflags_ab.py --b-dialect carried_loop_guard= --ops blur_3x3 --rounds 5
    python3 scripts/dev/cflags_ab.py --b=-O2 --ops "lib:lu:N=120,lib:jacobi_2d:N=250;T=20"

An operator is a suite operator (scripts/studies/search_vs_random.py) or ``lib:<kernel>:<sizes>``,
a bundled kernel at sizes separated by ``;``, its inputs uniform in [1, 2) (square
matrices plus N on the diagonal, which solvers divide by; integers in [0, 4)).

prints, per operator, the median over rounds of each setting's least of 9 calls and B/A.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = r'''
import sys, time, json
import numpy as np, polyopt
from polyopt.bench.suite_cases import all_cases
from polyopt.codegen.dialect import Dialect
for setting in filter(None, sys.argv[2].split(";")):
    attr, _, value = setting.partition("=")
    setattr(Dialect, attr, value)
cases = {c.op: c for c in all_cases(False)}; out = {}
for op in sys.argv[1].split(","):
    rng = np.random.default_rng(0)
    if op.startswith("lib:"):  # lib:<kernel>:<size>=<n>;...: a bundled kernel
        _, name, spec = op.split(":")
        sizes = {k: int(v) for k, v in (kv.split("=") for kv in spec.split(";"))}
        k = polyopt.compile(polyopt.kernels.get(name), sizes=sizes, options={"tuned": False})
        xs = [(rng.uniform(1, 2, sh) if np.dtype(t.dtype).kind == "f" else
               rng.integers(0, 4, sh)).astype(t.dtype)
              for t in k.program.inputs for sh in [tuple(int(d) for d in t.shape)]]
        for x in xs:  # solvers divide by the diagonal
            if x.ndim == 2 and x.shape[0] == x.shape[1]:
                x += (x.shape[0] * np.eye(x.shape[0])).astype(x.dtype)
    else:
        c = cases[op]
        k = polyopt.compile(c.source, c.kernel, sizes=c.sizes, options={"tuned": False})
        xs = [rng.standard_normal(sh).astype(np.float32) for sh in c.shapes]
    k(*xs); ts = []
    for _ in range(9):
        t = time.thread_time(); k(*xs); ts.append(time.thread_time() - t)
    out[op] = min(ts) * 1e3
print(json.dumps(out))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", default="", help="POLYOPT_CFLAGS of setting A (default: none)")
    ap.add_argument("--b", default="", help="POLYOPT_CFLAGS of setting B (default: none)")
    ap.add_argument("--a-dialect", default="", help="ATTR=VALUE[;...]: C dialect attributes "
                    "of setting A (polyopt.codegen.dialect.Dialect)")
    ap.add_argument("--b-dialect", default="", help="the same for setting B")
    ap.add_argument("--ops", required=True, help="comma-separated suite operators or "
                    "lib:<kernel>:<size>=<n>;...")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ops = args.ops.split(",")
    caches = {tag: tempfile.mkdtemp(prefix=f"cflags_{tag}_") for tag in "ab"}
    times: dict[str, dict[str, list[float]]] = {op: {"a": [], "b": []} for op in ops}
    for r in range(args.rounds):
        order = (("a", args.a, args.a_dialect), ("b", args.b, args.b_dialect))
        for tag, flags, dialect in order if r % 2 == 0 else order[::-1]:
            env = dict(os.environ, POLYOPT_CFLAGS=flags, OMP_NUM_THREADS="1",
                       POLYOPT_CACHE_DIR=caches[tag])
            run = subprocess.run([sys.executable, "-c", CHILD, args.ops, dialect],
                                 env=env, cwd=ROOT, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"setting {tag}: {run.stderr.strip()[-2000:]}")
            for op, ms in json.loads(run.stdout.strip().splitlines()[-1]).items():
                times[op][tag].append(ms)
    for op, t in times.items():
        a, b = statistics.median(t["a"]), statistics.median(t["b"])
        print(f"{op:18s} A {a:8.3f} ms  B {b:8.3f} ms  B/A {b / a:5.2f}")


if __name__ == "__main__":
    main()
