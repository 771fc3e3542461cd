"""Issue 17's stencil study: time tiling of jacobi-2d and heat-3d (kernels/stencil.tc) over
tile sizes and shapes, against program order and numpy, in one run.

Variants of each kernel, all timed in the same process, in interleaved rounds (each round
calls every variant once; the table gives the best and the median of the rounds):

- ``program order``: PolyBench 4.2's own loop nest (two sweeps per step, ping-pong between
  A and B, in place), written here in C and compiled with polyopt's gcc flags
  (``polyopt.runtime.compiler.DEFAULT_FLAGS``: -O3 -march=native ...; one thread, as
  PolyBench's code has no OpenMP);
- ``numpy``: the same loop over whole-array slices (float32, one temporary per sweep);
- ``polyopt default``: ``polyopt.compile`` with no options (isl's ``smart`` fusion, which
  puts the border copies into the stencil's band);
- ``untiled``: isl's ``min`` fusion, time tiling off (``knobs={"time_tile": 0}``): the
  space loops of each step in parallel;
- ``model``: ``min`` fusion, the time tile the cost model chose (``CpuPolicy.time_tile``);
- ``HxW``: ``min`` fusion, parallelogram tiles of H steps by W (``time_tile``/``space_tile``
  knobs), run as a wavefront of parallel tiles;
- ``diamond W``: ``min`` fusion, diamond tiles with concurrent start
  (``tile_shape="diamond"``, ``pipeline/diamond.py``), faces W wide (``space_tile``), the
  band's other space loops tiled W (jacobi-2d's j, fused into the band, ``ROW_TILE``);
  ``diamond (model)`` takes the cost model's width. The diamonds
  of a wavefront run in parallel, all tiles of the first one at once.

Every polyopt variant is checked against numpy's result first. The polyopt kernels store
their (T, N, ...) locals contracted (``schedules/storage.py``: one plane per array under
these schedules, 36 MB per jacobi-2d array at N=3000), so the sweep runs at a size of its
own (``--sweep``) only to keep the study short; the target size times the default (the
model's tile) and the tiles of ``--target-tiles``.

    python3 scripts/checks/stencil_study.py [--quick] [--rounds 5] [--plot study.png]
    python3 scripts/checks/stencil_study.py --kernels jacobi_2d,heat_3d --sweep none --rounds 3
"""

from __future__ import annotations

import argparse
import ctypes
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import polyopt
from polyopt import kernels
from polyopt.errors import MissingToolError
from polyopt.runtime.compiler import load_library

C_SOURCE = r"""
void jacobi_2d(int T, int N, float *A, float *B) {
  for (int t = 0; t < T; t++) {
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        B[i * N + j] = 0.2f * (A[i * N + j] + A[i * N + j - 1] + A[i * N + j + 1]
                               + A[(i + 1) * N + j] + A[(i - 1) * N + j]);
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        A[i * N + j] = 0.2f * (B[i * N + j] + B[i * N + j - 1] + B[i * N + j + 1]
                               + B[(i + 1) * N + j] + B[(i - 1) * N + j]);
  }
}

#define H(X, i, j, k) X[((i) * N + (j)) * N + (k)]
static void heat_step(int N, const float *A, float *B) {
  for (int i = 1; i < N - 1; i++)
    for (int j = 1; j < N - 1; j++)
      for (int k = 1; k < N - 1; k++)
        H(B, i, j, k) = 0.125f * (H(A, i + 1, j, k) - 2.0f * H(A, i, j, k) + H(A, i - 1, j, k))
                      + 0.125f * (H(A, i, j + 1, k) - 2.0f * H(A, i, j, k) + H(A, i, j - 1, k))
                      + 0.125f * (H(A, i, j, k + 1) - 2.0f * H(A, i, j, k) + H(A, i, j, k - 1))
                      + H(A, i, j, k);
}

void fdtd_2d(int T, int NX, int NY, float *ex, float *ey, float *hz, const float *fict) {
  for (int t = 0; t < T; t++) {
    for (int j = 0; j < NY; j++) ey[j] = fict[t];
    for (int i = 1; i < NX; i++)
      for (int j = 0; j < NY; j++)
        ey[i * NY + j] = ey[i * NY + j] - 0.5f * (hz[i * NY + j] - hz[(i - 1) * NY + j]);
    for (int i = 0; i < NX; i++)
      for (int j = 1; j < NY; j++)
        ex[i * NY + j] = ex[i * NY + j] - 0.5f * (hz[i * NY + j] - hz[i * NY + j - 1]);
    for (int i = 0; i < NX - 1; i++)
      for (int j = 0; j < NY - 1; j++)
        hz[i * NY + j] = hz[i * NY + j] - 0.7f * (ex[i * NY + j + 1] - ex[i * NY + j]
                                                 + ey[(i + 1) * NY + j] - ey[i * NY + j]);
  }
}

void heat_3d(int T, int N, float *A, float *B) {
  for (int t = 0; t < T; t++) {
    heat_step(N, A, B);
    heat_step(N, B, A);
  }
}
"""


def numpy_jacobi_2d(a: np.ndarray, b: np.ndarray, steps: int) -> tuple[np.ndarray, ...]:
    a, b = a.copy(), b.copy()
    for _ in range(steps):
        b[1:-1, 1:-1] = np.float32(0.2) * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
                                           + a[2:, 1:-1] + a[:-2, 1:-1])
        a[1:-1, 1:-1] = np.float32(0.2) * (b[1:-1, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:]
                                           + b[2:, 1:-1] + b[:-2, 1:-1])
    return a, b


def _heat(x: np.ndarray) -> np.ndarray:
    c, e = x[1:-1, 1:-1, 1:-1], np.float32(0.125)
    return (e * (x[2:, 1:-1, 1:-1] - 2 * c + x[:-2, 1:-1, 1:-1])
            + e * (x[1:-1, 2:, 1:-1] - 2 * c + x[1:-1, :-2, 1:-1])
            + e * (x[1:-1, 1:-1, 2:] - 2 * c + x[1:-1, 1:-1, :-2]) + c)


def numpy_heat_3d(a: np.ndarray, b: np.ndarray, steps: int) -> tuple[np.ndarray, ...]:
    a, b = a.copy(), b.copy()
    for _ in range(steps):
        b[1:-1, 1:-1, 1:-1] = _heat(a)
        a[1:-1, 1:-1, 1:-1] = _heat(b)
    return a, b


def numpy_fdtd_2d(ex: np.ndarray, ey: np.ndarray, hz: np.ndarray, fict: np.ndarray,
                  steps: int) -> tuple[np.ndarray, ...]:
    ex, ey, hz = ex.copy(), ey.copy(), hz.copy()
    half, c = np.float32(0.5), np.float32(0.7)
    for t in range(steps):
        ey[0, :] = fict[t]
        ey[1:, :] -= half * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= half * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= c * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return ex, ey, hz


NUMPY: dict[str, Callable[..., tuple[np.ndarray, ...]]] = {
    "jacobi_2d": numpy_jacobi_2d, "heat_3d": numpy_heat_3d, "fdtd_2d": numpy_fdtd_2d}


def inputs(name: str, n: int, steps: int,
           rng: np.random.Generator) -> tuple[tuple[np.ndarray, ...], dict[str, int]]:
    """The kernel's inputs (float32 in [-1, 1]) and sizes: N x N (x N) arrays A and B, or
    fdtd-2d's ex, ey, hz (N x N) and fict (T)."""
    def rand(*shape: int) -> np.ndarray:
        return rng.uniform(-1, 1, shape).astype(np.float32)
    if name == "fdtd_2d":
        return (rand(n, n), rand(n, n), rand(n, n), rand(steps)), {"NX": n, "NY": n, "T": steps}
    shape = (n,) * (3 if name == "heat_3d" else 2)
    return (rand(*shape), rand(*shape)), {"N": n, "T": steps}


@dataclass
class Variant:
    label: str
    run: Callable[[], Any]
    times: list[float] = field(default_factory=list)
    note: str = ""


def _program_order(name: str, ins: tuple[np.ndarray, ...], steps: int) -> Callable[[], Any]:
    """PolyBench's nest on copies of ``ins`` (it updates its arrays in place); fdtd-2d's
    ``fict`` is only read."""
    fn = getattr(load_library(C_SOURCE), name)
    work = [x.copy() for x in ins]
    dims = [ctypes.c_int(d) for d in ins[0].shape[:1 if name != "fdtd_2d" else 2]]

    def run() -> Any:
        for w, x in zip(work, ins, strict=True):
            w[...] = x  # fresh inputs
        fn(ctypes.c_int(steps), *dims, *(w.ctypes.data_as(ctypes.c_void_p) for w in work))
        return tuple(work[:3 if name == "fdtd_2d" else 2])
    return run


def _tile_note(k: polyopt.Kernel) -> str:
    for n in k.schedule.notes:
        found = re.search(r"diamond tiles .*?, (\d+) wide \(a tile spans about (\d+) steps\)", n)
        if found:
            return f"diamond {found[1]} wide, {found[2]} steps"
        if "diamond refused" in n:
            return "diamond refused: " + n.split("refused: ", 1)[1].split(";", 1)[0]
        if "time tiled" in n:
            return n.split("time tiled ", 1)[1].split(" (", 1)[0]
    return "not time-tiled"


def _polyopt(name: str, sizes: dict[str, int], options: dict[str, Any] | None,
             ins: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...]) -> tuple[Any, str]:
    k = polyopt.compile(kernels.get(name), name, sizes=sizes, options=options)
    got = k(*ins)
    tol = 1e-4 * sizes["T"] ** 0.5
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=tol, atol=tol, err_msg=name)
    return (lambda: k(*ins)), _tile_note(k)


def variants(name: str, n: int, steps: int, tiles: list[tuple[int, int]],
             untiled: bool = True, seed: int = 0,
             diamonds: tuple[int | None, ...] = ()) -> list[Variant]:
    ins, sizes = inputs(name, n, steps, np.random.default_rng(seed))
    want = NUMPY[name](*ins, steps)
    out = [Variant("program order (C, 1 thread)", _program_order(name, ins, steps)),
           Variant("numpy", lambda: NUMPY[name](*ins, steps))]
    configs: list[tuple[str, dict[str, Any] | None]] = [("polyopt default", None)]
    if untiled:  # at the target size only the default (the model's tile): memory
        configs.append(("untiled (min fusion)", {"fusion": "min", "knobs": {"time_tile": 0}}))
        configs.append(("model", {"fusion": "min"}))
    configs += [(f"{h}x{w}", {"fusion": "min", "knobs": {"time_tile": h, "space_tile": w}})
                for h, w in tiles]
    configs += [(f"diamond {w or '(model)'}", {"fusion": "min", "knobs": {
        "tile_shape": "diamond", **({"space_tile": w} if w else {})}}) for w in diamonds]
    for label, options in configs:
        t0 = time.perf_counter()
        run, tile = _polyopt(name, sizes, options, ins, want)
        print(f"  {name} {label}: compiled and checked in {time.perf_counter() - t0:.1f} s "
              f"(tile {tile})", flush=True)
        out.append(Variant(label, run, note=tile))
    return out


def _nothing() -> None:
    return None


def measure(vs: list[Variant], rounds: int) -> None:
    for _ in range(rounds):
        for v in vs:
            t0 = time.perf_counter()
            v.run()
            v.times.append(time.perf_counter() - t0)


def table(name: str, n: int, steps: int, vs: list[Variant]) -> str:
    base = min(vs[0].times)
    ref = min(vs[1].times)
    lines = [f"### {name}, N={n}, T={steps}", "",
             "| variant | tile (steps x space) | best ms | median ms | vs program order "
             "| vs numpy |", "|---|---|---|---|---|---|"]
    for v in vs:
        best = min(v.times)
        lines.append(f"| {v.label} | {v.note} | {best * 1e3:.4g} | "
                     f"{statistics.median(v.times) * 1e3:.4g} | {base / best:.2f}x | "
                     f"{ref / best:.2f}x |")
    tiled = [v for v in vs if v.label[0].isdigit()]  # the sweep's HxW variants
    model = next((v for v in vs if v.label == "model"), vs[2])  # else the default's
    if tiled:
        best = min(tiled, key=lambda v: min(v.times))
        lines += ["", f"Cost model's tile: {model.note} ({min(model.times) * 1e3:.4g} ms); "
                  f"measured best of the sweep: {best.note} ({min(best.times) * 1e3:.4g} ms)."]
    diamonds = [v for v in vs if v.label.startswith("diamond")]
    slanted = [v for v in vs[2:] if v not in diamonds and " x " in v.note]
    if diamonds and slanted:
        d = min(diamonds, key=lambda v: min(v.times))
        p = min(slanted, key=lambda v: min(v.times))
        lines += ["", f"Best diamond: {d.label} ({min(d.times) * 1e3:.4g} ms); best "
                  f"parallelogram: {p.label} ({min(p.times) * 1e3:.4g} ms); diamond "
                  f"{min(p.times) / min(d.times):.2f}x."]
    return "\n".join(lines)


def plot(path: str, results: list[tuple[str, list[Variant]]]) -> None:
    try:
        import matplotlib  # optional: only --plot needs it
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise MissingToolError(f"--plot needs the matplotlib package (pip install "
                               f"matplotlib): {e}") from None
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    for ax, (title, vs) in zip(axes[0], results, strict=True):
        base = min(vs[0].times)
        ax.barh([v.label for v in vs], [base / min(v.times) for v in vs])
        ax.axvline(1.0, color="k", lw=0.5)
        ax.set_title(title)
        ax.set_xlabel("speed-up over program order (best of rounds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _tile(text: str) -> tuple[int, int]:
    h, w = text.split("x")
    return int(h), int(w)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--kernels", default="jacobi_2d",
                   help="comma-separated: jacobi_2d, fdtd_2d, heat_3d")
    p.add_argument("--target", default="3000x60", help="N x T of the target comparison")
    p.add_argument("--sweep", default="1500x60",
                   help="N x T of the tile sweep (jacobi_2d; 'none' skips it)")
    p.add_argument("--target-tiles", default="16x128",
                   help="comma-separated HxW tiles timed at the target size too ('' for none)")
    p.add_argument("--diamonds", default="model,32",
                   help="comma-separated face widths of diamond tiles timed at every size "
                        "('model': the cost model's width; '' for none)")
    p.add_argument("--plot", default=None, help="write a bar chart (PNG) here")
    args = p.parse_args(argv)
    runs: list[tuple[str, int, int, list[tuple[int, int]], bool]] = []
    tiles = [(4, 16), (8, 32), (16, 32), (8, 64), (16, 64), (16, 128), (32, 128)]
    for name in args.kernels.split(","):
        if args.quick:
            runs.append((name, 16 if name == "heat_3d" else 64, 8, [(2, 8), (4, 16)], True))
            continue
        if name == "jacobi_2d":
            if args.sweep != "none":
                sn, st = (int(x) for x in args.sweep.split("x"))
                runs.append((name, sn, st, tiles, True))
            tn, tt = (int(x) for x in args.target.split("x"))
            few = [_tile(x) for x in args.target_tiles.split(",") if x]
            runs.append((name, tn, tt, few, False))  # 4.3 GB per kernel at 3000x60
        elif name == "fdtd_2d":  # 3 locals of T x N x N: 720 MB per kernel at 1000 x 60
            runs.append((name, 1000, 60, [(8, 64), (16, 128)], True))
        else:
            runs.append((name, 120, 60, [(2, 8), (4, 16), (8, 16)], True))
    diamonds = tuple(None if w == "model" else int(w) for w in args.diamonds.split(",") if w)
    results = []
    for name, n, steps, sweep, untiled in runs:
        print(f"{name} N={n} T={steps}: compiling", flush=True)
        vs = variants(name, n, steps, sweep, untiled, diamonds=diamonds)
        measure(vs, args.rounds)
        print(table(name, n, steps, vs), "\n", flush=True)
        # only the times stay: the kernels' planes (GBs at the target size) go now
        results.append((f"{name} N={n} T={steps}",
                        [Variant(v.label, _nothing, v.times, v.note) for v in vs]))
        del vs
    if args.plot:
        plot(args.plot, results)


if __name__ == "__main__":
    main()
