"""Vector math speed: transcendental-heavy elementwise kernels, float32, in one run.

    python3 scripts/checks/bench_vector_math.py            (the command recorded in BENCHMARKS.md)
    python3 scripts/checks/bench_vector_math.py --quick    (small shapes, seconds)

Columns, each the median of --repeat calls after a checked warm-up call, in ms:
- polyopt: the default build (libmvec's vector functions where glibc has them).
- own: -DPOLYOPT_OWN_MATH, libmvec left out as on a system without it: polyopt's own
  vector exp, log, tanh and erf (polyopt.codegen.vmath); sin, cos and pow stay scalar.
- scalar: -DPOLYOPT_SCALAR_MATH, every transcendental a scalar libm call. Before vector math
  (issue 15) main vectorized exp and log through libmvec already, but not tanh and erf: its
  GELU and erf were this column, its softmax, SiLU, exp and log the polyopt one.
- numpy: the same formula in numpy float32 (scipy.special.erf for erf, if installed).
Each output is checked against a float64 numpy reference (rtol 1e-5, atol 1e-6).
"""

from __future__ import annotations

import argparse
import math
import platform
import subprocess
from collections.abc import Callable

import numpy as np

import polyopt
from polyopt import kernels
from polyopt.bench.measure import median_seconds

F32 = np.float32
GELU = """def gelu(float(N,M) X) -> (Y) {
    Y(i,j) = 0.5 * X(i,j)
           * (1 + tanh(0.7978845608 * (X(i,j) + 0.044715 * X(i,j)*X(i,j)*X(i,j))))
}"""


def unary(name: str, expr: str) -> str:
    return f"def {name}(float(N,M) X) -> (Y) {{\n    Y(i,j) = {expr}\n}}"


def np_gelu(x: np.ndarray) -> np.ndarray:
    return F32(0.5) * x * (1 + np.tanh(F32(0.7978845608) * (x + F32(0.044715) * x * x * x)))


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_erf() -> Callable[[np.ndarray], np.ndarray] | None:
    try:
        from scipy.special import erf
    except ImportError:
        return None
    return erf


def erf64(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


# name, TC source, rows, numpy float32 version, input generator, float64 reference
CASES = [
    ("GELU-tanh", GELU, 4096, np_gelu, "randn", None),
    ("softmax", kernels.get("softmax"), 16384, np_softmax, "randn", None),
    ("SiLU", unary("silu", "X(i,j) / (1 + exp(-X(i,j)))"), 4096,
     lambda x: x / (1 + np.exp(-x)), "randn", None),
    ("exp", unary("vexp", "exp(X(i,j))"), 4096, np.exp, "randn", None),
    ("log", unary("vlog", "log(X(i,j))"), 4096, np.log, "positive", None),
    ("erf", unary("verf", "erf(X(i,j))"), 4096, np_erf(), "randn", erf64),
]
VARIANTS = {"polyopt": [], "own": ["-DPOLYOPT_OWN_MATH"], "scalar": ["-DPOLYOPT_SCALAR_MATH"]}


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Milliseconds: bench_ops' median of ``repeat`` calls, after a warm-up call."""
    fn()
    return median_seconds(fn, repeat) * 1e3


def run_case(case: tuple, cols: int, scale: int, repeat: int) -> list[str]:
    name, src, rows, np_fn, kind, ref64 = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows // scale, cols)).astype(F32)
    if kind == "positive":
        x = np.abs(x) + F32(1e-3)
    wide = x.astype(np.float64)
    want = ref64(wide) if ref64 else np.asarray((np_fn or np.exp)(wide))  # np_fn is float-generic
    cells = [name, f"{x.shape[0]}x{x.shape[1]}"]
    for flags in VARIANTS.values():
        kernel = polyopt.compile(src, options={"cflags": flags})
        ok = np.allclose(kernel(x), want, rtol=1e-5, atol=1e-6)
        cells.append(f"{timed(lambda k=kernel: k(x), repeat):.2f}" if ok else "WRONG")
    cells.append(f"{timed(lambda: np_fn(x), repeat):.2f}" if np_fn else "-")
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1/16 of the rows")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout
    print(f"{platform.machine()}, {platform.libc_ver()}, numpy {np.__version__}, "
          f"{gcc.splitlines()[0] if gcc else 'no gcc'}")
    head = ["kernel", "shape", *(f"{v} ms" for v in VARIANTS), "numpy ms",
            "speedup vs scalar", "speedup vs numpy"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for case in CASES:
        cells = run_case(case, 1024, 16 if args.quick else 1, args.repeat)
        cells += [ratio(cells[4], cells[2]), ratio(cells[5], cells[2])]
        print("| " + " | ".join(cells) + " |", flush=True)


def ratio(num: str, den: str) -> str:
    try:
        return f"{float(num) / float(den):.2f}x"
    except ValueError:
        return "-"


if __name__ == "__main__":
    main()
