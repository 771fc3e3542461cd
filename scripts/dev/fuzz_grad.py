"""Differentiate random TC programs (tests/fuzz_programs.py) with polyopt.grad and compare
each gradient, compiled by polyopt, with central finite differences of the compiled forward
in float64. Prints one line per program that is refused, crashes or disagrees, then the
counts (ok / refused / wrong / crash / integer-only).

    python3 scripts/dev/fuzz_grad.py --first 0 --count 80
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import fuzz_programs  # noqa: E402

import polyopt  # noqa: E402
import polyopt.lang  # noqa: E402
from polyopt.errors import NotDifferentiableError  # noqa: E402

EPS = 1e-6


def numeric(fwd: polyopt.Kernel, args: list[np.ndarray], seeds: list[np.ndarray],
            k: int) -> np.ndarray:
    """d(sum(seeds * outputs)) / d(args[k]) by central differences."""
    def loss() -> float:
        outs = fwd(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return sum(float(np.sum(s * o)) for s, o in zip(seeds, outs, strict=True))

    x, out = args[k], np.empty_like(args[k])
    for i in np.ndindex(*x.shape):
        keep = x[i]
        x[i] = keep + EPS
        up = loss()
        x[i] = keep - EPS
        down = loss()
        x[i] = keep
        out[i] = (up - down) / (2 * EPS)
    return out


def check(seed: int) -> str:
    fp = fuzz_programs.draw_program(random.Random(seed))
    if fp.exact:
        return "integer-only"
    src = fp.source.replace("double(", "float64(").replace("float(", "float64(")
    try:
        text = polyopt.grad(src, fp.name)
    except NotDifferentiableError as e:
        print(f"{seed} {fp.family} refused: {e}")
        return "refused"
    args = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in fp.arrays(seed)]
    try:
        fwd = polyopt.compile(src, fp.name)
        outs = fwd(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        rng = np.random.default_rng(seed)
        seeds = [rng.standard_normal(o.shape).astype(o.dtype) if o.dtype.kind == "f"
                 else np.zeros_like(o) for o in outs]  # an output's own dtype: a constant
        # output (z = 0.5) stays float32 in a float64 def
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = polyopt.compile(text, f"{fp.name}_grad")(*args, *seeds)
    except Exception as e:
        print(f"{seed} {fp.family} crash: {type(e).__name__}: {e}\n{fp.source}\n{text}")
        return "crash"
    got = got if isinstance(got, tuple) else (got,)
    inputs = polyopt.lang.build_program(src, fp.name).inputs
    floats = [k for k, t in enumerate(inputs) if t.dtype.startswith("float")]
    for g, k in zip(got, floats, strict=True):
        want = numeric(fwd, args, seeds, k)
        err = float(np.max(np.abs(g - want), initial=0.0)) / (1 + float(np.max(
            np.abs(want), initial=0.0)))
        if not err < 1e-5:
            print(f"{seed} {fp.family} wrong: d_{inputs[k].name} off by {err:.3g}\n"
                  f"{fp.source}\n{text}")
            return "wrong"
    return "ok"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--first", type=int, default=0, help="the first seed")
    p.add_argument("--count", type=int, default=40, help="how many programs")
    args = p.parse_args()
    counts = collections.Counter(check(s) for s in range(args.first, args.first + args.count))
    print(dict(counts))
    return 0 if counts["crash"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
