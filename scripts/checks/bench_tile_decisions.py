"""The cost model's structural decisions against measurement: for each nest, the schedule with
the decision one way and the other, the model's prediction of each, and their times.

``--decision register`` (default): a contraction as a register tile (a GotoBLAS nest) or as
the plain nest (knob ``register_tile`` True / False); the pipeline's own choice
(``cpu._faster``) is read from the default schedule's notes. ``--decision layout``: a
convolution with its output in channel blocks (knob ``block`` at the vector lanes) or in
its own layout with no copies (``block=0``); the model's column says which one the cost
model predicts faster (every nest, the copies included, at its scheduled parallel loop;
from cache when both fit the last level). The pipeline itself weighs the channel blocks
(of the lanes, or of two vectors for wide rows with taps) against its own layout with its
padded input copied (``cpu.faster_layout``), so its choice can be neither of these two
("other"). ``--decision candidates``: those two, as the pipeline builds them
(``pipeline.search.layout_candidates``), on the layout nests and three convolutions more.
``--decision rows``: a register tile's rows (knob ``mr``) swept, and the rows the pipeline
takes (the cost model's, ``register_tile._fewest_cycles``), on products whose row operand
is read in place, its rows a power of two of lines apart (one L1 set: the measurement
behind ``register_tile._conflict_rows``) or not, and on others.

Each pair is compiled in this process and timed alternately, the median of ``--calls``
calls each (2 threads here); the last column says whether the faster predicted is the
faster measured (within ``--tie`` both count).

    python3 scripts/checks/bench_tile_decisions.py
    python3 scripts/checks/bench_tile_decisions.py --decision layout
    python3 scripts/checks/bench_tile_decisions.py --decision candidates --calls 60
    python3 scripts/checks/bench_tile_decisions.py --decision rows
"""

from __future__ import annotations

import argparse
import re
import time
import warnings
from dataclasses import dataclass

import numpy as np

import polyopt
from polyopt import driver, ir, kernels, lang
from polyopt.bench import layers, peers
from polyopt.costmodel import cost
from polyopt.costmodel.machine import host
from polyopt.costmodel.verdict import compare
from polyopt.pipeline import search
from polyopt.pipeline.fusion import nests
from polyopt.pipeline.policy import cpu_policy
from polyopt.schedules.marks import Tag
from polyopt.schedules.tree import Loop


@dataclass(frozen=True)
class Nest:
    label: str
    source: str
    name: str | None
    sizes: dict[str, int]
    shapes: tuple[tuple[int, ...], ...]


def _mm(label: str, a: str, b: str, body: str, sizes: dict[str, int]) -> Nest:
    """A product of ``a`` and ``b`` (their dims over M, N, K) into C(i,j)."""
    shapes = tuple(tuple(sizes[d] for d in dims) for dims in (a, b))
    src = (f"def mm(float({','.join(a)}) A, float({','.join(b)}) B) -> (C) "
           f"{{ C(i,j) +=! {body} }}")
    return Nest(label, src, None, sizes, shapes)


def register_nests() -> list[Nest]:
    """Contractions the register tile was not tuned on, and ones it should not take."""
    out = [
        _mm("mm 24x3136x96", "MK", "KN", "A(i,r_k) * B(r_k,j)", {"M": 24, "N": 3136, "K": 96}),
        _mm("mm 6x2000x300", "MK", "KN", "A(i,r_k) * B(r_k,j)", {"M": 6, "N": 2000, "K": 300}),
        _mm("A^T B 384x512x256", "KM", "KN", "A(r_k,i) * B(r_k,j)",
            {"M": 384, "N": 512, "K": 256}),
        _mm("A B^T 100x300x50", "MK", "NK", "A(i,r_k) * B(j,r_k)",
            {"M": 100, "N": 300, "K": 50}),
    ]
    out.append(Nest("X(a,b,c) W(c,d) 8x96x200x72",
                    "def f(float(A,B,C) X, float(C,D) W) -> (Y) "
                    "{ Y(a,b,d) +=! X(a,b,r_c) * W(r_c,d) }", None,
                    {"A": 8, "B": 96, "C": 200, "D": 72}, ((8, 96, 200), (200, 72))))
    out.append(Nest("batched matvec 23x512x512",
                    "def f(float(B,M,N) X, float(B,N) Y) -> (Z) "
                    "{ Z(b,i) +=! X(b,i,r_j) * Y(b,r_j) }", None,
                    {"B": 23, "M": 512, "N": 512}, ((23, 512, 512), (23, 512))))
    out.append(Nest("outer-axis sum 16x256x512",
                    "def f(float(A,B,C) X) -> (Y) { Y(b,c) +=! X(r_a,b,c) }", None,
                    {"A": 16, "B": 256, "C": 512}, ((16, 256, 512),)))
    for name, m, n in (("polybench_syr2k", 500, 600), ("polybench_symm", 500, 600),
                       ("polybench_trmm", 500, 600)):
        program = lang.build_program(kernels.get(name), name, {"M": m, "N": n})
        shapes = tuple(tuple(int(ir.extent_value(e, {})) for e in t.shape)
                       for t in program.inputs)
        out.append(Nest(f"{name[10:]} {m}x{n}", kernels.get(name), name, {"M": m, "N": n},
                        shapes))
    return out


def layout_nests() -> list[Nest]:
    out = []
    for model, idx in (("resnet50", 0), ("resnet50", 2), ("resnet50", 5), ("resnet50", 11),
                       ("resnet50", 20), ("mobilenetv2", 3), ("mobilenetv2", 7),
                       ("mobilenetv2", 10), ("mobilenetv2", 20)):
        layer = layers.select(model)[idx]
        name, src, sizes = peers.polyopt_definition(layer)
        sizes = {**sizes, "N": 1}
        out.append(Nest(f"{model} layer {layer.number} ({layer.name})", src, name, sizes,
                        ((1, layer.cin, layer.hw, layer.hw),
                         (layer.cout, layer.cin // layer.groups, layer.k, layer.k))))
    return out


def candidate_nests() -> list[Nest]:
    """Convolutions beyond the layer list whose two layouts the model weighs closely."""
    out = []
    for label, layer in (("MobileNetV2 layer 1", layers.select("mobilenetv2")[0]),
                         ("5x5 48->64 35^2", layers.Layer(0, "5x5", 48, 64, 35, 5, 1, 2, 1, 1)),
                         ("3x3 64->64 32^2", layers.Layer(0, "3x3", 64, 64, 32, 3, 1, 1, 1, 1))):
        name, src, sizes = peers.polyopt_definition(layer)
        out.append(Nest(label, src, name, {**sizes, "N": 1},
                        ((1, layer.cin, layer.hw, layer.hw),
                         (layer.cout, layer.cin // layer.groups, layer.k, layer.k))))
    return out


def rows_nests() -> list[Nest]:
    """Products whose row tiles read a large operand in place, and two that pack it."""
    body = "A(i,r_k) * B(r_k,j)"
    return [_mm("mm 4096x16x1024", "MK", "KN", body, {"M": 4096, "N": 16, "K": 1024}),
            _mm("mm 4096x16x1040", "MK", "KN", body, {"M": 4096, "N": 16, "K": 1040}),
            _mm("mm 128x16x1024", "MK", "KN", body, {"M": 128, "N": 16, "K": 1024}),
            _mm("mm 2048x48x2048", "MK", "KN", body, {"M": 2048, "N": 48, "K": 2048}),
            _mm("mm 1024x1024x1024", "MK", "KN", body, {"M": 1024, "N": 1024, "K": 1024}),
            _mm("mm 1000x1100x1200", "MK", "KN", body, {"M": 1000, "N": 1100, "K": 1200})]


ROWS = (4, 6, 8, 10, 12, 14, 16, 20, 28)


def rows_row(nest: Nest, calls: int) -> str:
    """The nest's times with each count of rows of ``ROWS``, and the pipeline's."""
    ks = {str(m): polyopt.compile(nest.source, nest.name, sizes=nest.sizes,
                                  options={"knobs": {"mr": m}}) for m in ROWS}
    ks["pipeline"] = polyopt.compile(nest.source, nest.name, sizes=nest.sizes)
    tiles = [m.group(1) for n in ks["pipeline"].schedule.notes
             if (m := re.search(r"register tile (\d+x\d+) ", n))]
    rng = np.random.default_rng(0)
    t = timed(ks, [rng.random(sh, dtype=np.float32) for sh in nest.shapes], calls)
    return (f"| {nest.label} | {', '.join(tiles)} | {t['pipeline'] * 1e3:.3f} | "
            + " | ".join(f"{t[str(m)] * 1e3:.3f}" for m in ROWS) + " |")


def _tagged(lp: Loop) -> bool:
    return Tag.PARALLEL in lp.tags or Tag.PARALLEL_REDUCTION in lp.tags


def predicted(kernel: polyopt.Kernel) -> cost.Estimate | None:
    """The model's estimate of every nest of the kernel's schedule, summed."""
    s, policy = kernel.schedule, cpu_policy(host())
    printed = cost.printing(s.poly, s.root, s.buffers)
    got = [cost.estimate(s.poly, top, policy.machine, parallel=_tagged, printed=printed,
                         parallel_trips=policy.parallel_trips) for top in nests(s.root)]
    if any(e is None for e in got):
        return None
    est = [e for e in got if e is not None]
    warm = [e.warm for e in est]
    return cost.Estimate(sum(e.cycles for e in est), sum(e.compute for e in est), (), None,
                         (), sum(e.core for e in est),
                         None if None in warm else sum(w for w in warm if w is not None))


def timed(kernels_: dict[str, polyopt.Kernel], inputs: list[np.ndarray],
          calls: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in kernels_}
    for k in kernels_.values():
        k(*inputs)
    for _ in range(calls):
        for label, k in kernels_.items():
            t0 = time.perf_counter()
            k(*inputs)
            times[label].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def _verbs(s: polyopt.Schedule) -> str:
    return repr([(st.verb, st.args, st.kwargs) for st in s.steps])


def _pair(nest: Nest, decision: str) -> dict[str, polyopt.Kernel] | None:
    """The two kernels of a decision: ``on`` the register tile (or channel blocks)."""
    if decision == "register":
        return {side: polyopt.compile(nest.source, nest.name, sizes=nest.sizes, options={
            "knobs": {"register_tile": side == "on"}}) for side in ("on", "off")}
    if decision == "layout":
        lanes = cpu_policy(host()).lanes(4)
        return {side: polyopt.compile(nest.source, nest.name, sizes=nest.sizes, options={
            "knobs": {"block": lanes if side == "on" else 0}}) for side in ("on", "off")}
    program = lang.build_program(nest.source, nest.name, nest.sizes)
    own, blocked = search.layout_candidates(program, driver.check_options({}, "c"))
    if blocked is None:
        return None  # its outputs want no channel blocks: nothing to weigh
    return {side: polyopt.compile(nest.source, nest.name, sizes=nest.sizes, schedule=s)
            for side, s in (("on", blocked), ("off", own))}


def _chosen(nest: Nest, decision: str, ks: dict[str, polyopt.Kernel]) -> str:
    default = polyopt.schedule(nest.source, nest.name, sizes=nest.sizes)
    if decision == "register":
        return "off" if any("no register tile" in n for n in default.notes) else "on"
    # the default's verbs are one side's, or neither's (a block of several vectors)
    verbs = {side: _verbs(k.schedule) for side, k in ks.items()}
    return next((side for side, v in verbs.items() if v == _verbs(default)), "other")


def row(nest: Nest, decision: str, calls: int, tie: float) -> str:
    ks = _pair(nest, decision)
    if ks is None:
        return f"| {nest.label} | off | (no channel blocks wanted) | - | - | - |"
    chose = _chosen(nest, decision, ks)
    rng = np.random.default_rng(0)
    t = timed(ks, [rng.random(sh, dtype=np.float32) for sh in nest.shapes], calls)
    e = {side: predicted(k) for side, k in ks.items()}
    if e["on"] is None or e["off"] is None:
        return (f"| {nest.label} | {chose} | - | {t['on'] * 1e3:.3f} | {t['off'] * 1e3:.3f} "
                "| - |")
    v = compare(e["off"], e["on"])
    off_faster, p_off, p_on = v.first_no_slower, v.first, v.second
    model = "off" if off_faster else "on"
    fast = "off" if t["off"] <= t["on"] else "on"
    agrees = "yes" if model == fast or abs(t["on"] / t["off"] - 1) <= tie else "no"
    return (f"| {nest.label} | {chose} | {model}: {p_on} / {p_off} | "
            f"{t['on'] * 1e3:.3f} | {t['off'] * 1e3:.3f} | {agrees} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decision", choices=("register", "layout", "candidates", "rows"),
                    default="register")
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--tie", type=float, default=0.05, help="relative difference of a tie")
    ap.add_argument("--quick", action="store_true", help="the first two nests, 3 calls")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    todo = register_nests() if args.decision == "register" else layout_nests()
    if args.decision == "candidates":
        todo = [*todo, *candidate_nests()]
    if args.quick:
        todo, args.calls = todo[:2], 3
    if args.decision == "rows":
        print("| nest | pipeline's tile | pipeline ms | "
              + " | ".join(f"{m} rows ms" for m in ROWS) + " |")
        print("|---" * (3 + len(ROWS)) + "|")
        for nest in rows_nests()[: 1 if args.quick else None]:
            print(rows_row(nest, args.calls), flush=True)
        print(f"\ntimes are medians of {args.calls} alternating calls")
        return
    on, off = {"register": ("register tile", "plain nest"),
               "layout": ("channel blocks", "own layout"),
               "candidates": ("channel blocks", "own layout, copies")}[args.decision]
    print(f"| nest | pipeline's choice | model's prediction ({on} / {off}) | {on} ms | "
          f"{off} ms | model agrees |")
    print("|---|---|---|---|---|---|")
    for nest in todo:
        print(row(nest, args.decision, args.calls, args.tie), flush=True)
    print(f"\non: {on}, off: {off}; times are medians of {args.calls} alternating calls")


if __name__ == "__main__":
    main()
