"""Operator suite: 40 operators in six families, polyopt against numpy, torch and TVM, float32.

Run with numpy's BLAS at full speed (the command recorded in BENCHMARKS.md):
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE polyopt bench suite

Smoke test in seconds:  polyopt bench suite --quick
A subset:               ... --families conv,stencil   or   ... --ops mm_square,gelu --repeat 3
Record the result:      ... --update   (rewrites "## CPU: operator suite" in BENCHMARKS.md)
Also:                   --json FILE (raw numbers), --plot FILE (bar chart), --list

Families: contraction (square, odd, skinny, batched, tiny, matrix-vector, attention's QK^T
and PV, a linear layer, a transformer feed-forward layer), elementwise (GELU, SiLU, softmax,
layernorm, RMSnorm), reduction (along each axis of a 3-D tensor, and a max), transpose (2-D
to 4-D permutes), stencil (blur, separable two-stage blur, 3-D 7-point, pooling) and conv
(1x1 to 7x7, strided, dilated, grouped, depthwise, batch 1 and 8; shapes from Inception,
MobileNetV2, UNet, ResNeXt and DeepLab).

Each operator is a TC def: the bundled one from polyopt.kernels where there is one, else
written below. It is compiled with polyopt's default schedule (polyopt.compile(src, name,
sizes=...)), checked against a float64 evaluation of its numpy formulation (rtol 1e-3, atol
1e-3*sqrt(reduction length), as ``polyopt bench ops``), then timed: every system of an operator is
built and checked first, then timed in --rounds interleaved rounds (default 3) of --repeat
calls each, each system after a 0.3 s pause; a cell is the median of all its calls. The
peers: numpy (BLAS matmul for contractions, im2col + tensordot for convolutions), torch (its
library call) and TVM (the schedules of ``tvm_gemm.py`` and ``tvm_conv.py`` here: 2-D
matmul, and convolutions with square kernels, no dilation, groups 1 or depthwise). A peer
that is not installed is '-'; one that fails is ERROR, a wrong answer WRONG; neither aborts
the run. The ratio is the best peer's time over polyopt's (> 1: polyopt is faster).
compile: polyopt.compile to the first result with an empty cache, minus one call.
"""


from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polyopt.bench import markdown, measure, tvm_conv, tvm_gemm
from polyopt.bench.entry import suite_main
from polyopt.bench.measure import Bench, Prepared, Timing
from polyopt.bench.operators import Inputs
from polyopt.bench.peers import Context, Skip
from polyopt.bench.suite_cases import FAMILIES, SuiteCase, all_cases
from polyopt.config import scratch_cache
from polyopt.errors import OptionError

SECTION = "## CPU: operator suite"
COMMAND_PREFIX = "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE polyopt bench suite"
PEERS = ("numpy", "torch", "tvm")
COMPILE_BUDGET_S = 1.0  # issue 15: compile in at most a second per operator


# ------------------------------------------------------------------ measuring
@dataclass
class Result:
    case: SuiteCase
    timings: dict[str, Timing] = field(default_factory=dict)
    compile_s: float | None = None

    @property
    def status(self) -> str:
        got = self.timings.get("polyopt", Timing())
        return "OK" if got.seconds is not None else got.note

    def best_peer(self) -> tuple[str, float] | None:
        times = [(p, t.seconds) for p in PEERS
                 if (t := self.timings.get(p, Timing())).seconds is not None]
        return min(times, key=lambda pt: pt[1]) if times else None

    @property
    def ratio(self) -> float | None:
        """The best peer's time over polyopt's: > 1 means polyopt is faster."""
        mine, best = self.timings.get("polyopt", Timing()).seconds, self.best_peer()
        return best[1] / mine if mine and best else None


def prepare_tvm(bench: Bench, ctx: Any, case: SuiteCase, inputs: Inputs,
                ref: np.ndarray) -> Prepared:
    """TVM where this package has a schedule: tvm_gemm's GEMM, tvm_conv's convolutions."""
    if case.tvm:
        return tvm_gemm.prepare_tvm(bench, case, inputs, ref)
    if case.tvm_layer is None or ctx is None:
        return Prepared()
    try:
        prepared = tvm_conv.prepare_tvm(case.tvm_layer, tuple(inputs), ctx)
    except Skip:
        return Prepared()
    except Exception as exc:
        measure.log(f"  TVM build failed on {case.op}: {measure.describe(exc)}")
        return Prepared(note="ERROR")
    return measure.prepare_baseline(bench, "tvm", prepared.call, ref, case)


def run_case(bench: Bench, ctx: Any, case: SuiteCase) -> Result:
    """polyopt, numpy, torch, TVM on one operator: each built and checked, then timed in
    interleaved rounds (``measure.time_interleaved``)."""
    measure.log(f"{case.family}: {case.op} {case.shape}")
    inputs = measure.make_inputs(case, np.random.default_rng(0))
    ref = case.reference(*[np.asarray(x, np.float64) for x in inputs])
    res = Result(case)
    systems: dict[str, Prepared] = {}
    systems["polyopt"], first_s = measure.prepare_polyopt(bench, case, inputs, ref)
    systems["numpy"] = measure.prepare_baseline(bench, "numpy", lambda: case.reference(*inputs),
                                            ref, case)
    systems["torch"] = measure.prepare_torch(bench, case, inputs, ref)
    systems["tvm"] = prepare_tvm(bench, ctx, case, inputs, ref)
    res.timings = measure.time_interleaved(bench, systems)
    res.compile_s = measure.compile_seconds(first_s, res.timings["polyopt"])
    return res


# ------------------------------------------------------------------ report
HEADER = ("operator", "family", "shape", "polyopt ms", "numpy ms", "torch ms", "TVM ms",
          "best peer", "speed vs best peer", "polyopt throughput", "compile s", "status")


def ms(t: Timing) -> str:
    return t.note if t.seconds is None else markdown.fmt(t.seconds * 1e3)


def row_cells(res: Result) -> list[str]:
    case, got = res.case, res.timings
    mine = got.get("polyopt", Timing())
    best = res.best_peer()
    speed = "-" if mine.seconds is None or not (case.nbytes or case.flops) else \
        f"{markdown.fmt(case.throughput(mine.seconds))} {case.unit}"
    slow = res.compile_s is not None and res.compile_s > COMPILE_BUDGET_S
    return [case.op, case.family, case.shape, *(ms(got.get(s, Timing()))
                                                for s in ("polyopt", *PEERS)),
            best[0] if best else "-", markdown.fmt(res.ratio) if res.ratio else "-", speed,
            "-" if res.compile_s is None
            else markdown.fmt(res.compile_s) + (" (>1)" if slow else ""),
            res.status]


def geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summary(results: Sequence[Result]) -> dict[str, Any]:
    """Geomeans of the ratio per family and overall, the worst operators, failures."""
    fams = [f for f in FAMILIES if any(r.case.family == f for r in results)]
    per_family = {f: geomean([r.ratio for r in results if r.case.family == f and r.ratio])
                  for f in fams}
    ranked = sorted((r for r in results if r.ratio), key=lambda r: r.ratio or 0.0)
    compiles = [r.compile_s for r in results if r.compile_s is not None]
    return {
        "per_family": per_family,
        "overall": geomean([r.ratio for r in ranked if r.ratio]),
        "worst": [(r.case.op, r.ratio, (r.best_peer() or ("-",))[0]) for r in ranked[:3]],
        "failed": [(r.case.op, r.status) for r in results if r.status != "OK"],
        "compile_over_budget": [(r.case.op, r.compile_s) for r in results
                                if r.compile_s is not None and r.compile_s > COMPILE_BUDGET_S],
        "compile_max": max(compiles, default=None),
    }


def summary_lines(s: dict[str, Any]) -> list[str]:
    def g(v: float | None) -> str:
        return "-" if v is None else markdown.fmt(v)

    lines = ["| family | geomean speed vs best peer |", "|---|---|"]
    lines += [f"| {f} | {g(v)} |" for f, v in s["per_family"].items()]
    lines += [f"| **all** | **{g(s['overall'])}** |", ""]
    worst = ", ".join(f"{op} ({markdown.fmt(r)} of {peer})" for op, r, peer in s["worst"])
    lines.append(f"Worst operators: {worst or '-'}.")
    failed = ", ".join(f"{op} ({st})" for op, st in s["failed"])
    lines.append(f"polyopt failures: {failed or 'none'}.")
    slow = ", ".join(f"{op} ({markdown.fmt(t)} s)" for op, t in s["compile_over_budget"])
    lines.append(f"Compile over {COMPILE_BUDGET_S:g} s: {slow or 'none'}"
                 + (f" (slowest {markdown.fmt(s['compile_max'])} s)." if s["compile_max"] else "."))
    return lines


def table_lines(results: Sequence[Result]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row_cells(r)) + " |" for r in results]
    return [*lines, "", *summary_lines(summary(results))]


NOTES = """\
float32. Each system is built and its result checked against a float64 numpy evaluation (rtol
1e-3, atol 1e-3*sqrt(reduction length)), then the systems of an operator are timed in
interleaved rounds (--rounds, default 3), each system after a 0.3 s pause; each cell is the
median of all its calls. polyopt: `polyopt.compile(src, name, sizes=...)`, default
schedule. numpy: BLAS matmul for contractions, im2col (sliding_window_view) + tensordot per group
for convolutions, one multiply-add per tap for depthwise and one maximum/add per tap for pools,
array expressions for the rest. torch: its library call (matmul/bmm, F.conv2d, F.gelu, softmax,
layer_norm, pools, permute().contiguous()). TVM: polyopt/bench/tvm_gemm.py's GEMM schedule (2-D
matmul) and polyopt/bench/tvm_conv.py's (square, undilated, groups 1 or depthwise convolutions).
Speed vs best peer: the fastest peer's time over polyopt's, > 1 means polyopt is faster; the
geomeans leave out operators without a polyopt time. Throughput is GFLOP/s, or GB/s (inputs read
once + output written once) for the memory-bound families. compile: to the first result with an
empty POLYOPT_CACHE_DIR, minus one call (issue 15 wants <= 1 s)."""


def json_record(res: Result) -> dict[str, Any]:
    c = res.case
    return {"op": c.op, "family": c.family, "shape": c.shape, "kernel": c.kernel,
            "input_shapes": [list(s) for s in c.shapes], "sizes": c.sizes, "flops": c.flops,
            "bytes": c.nbytes, "reduction": c.reduction, "status": res.status,
            "seconds": {s: t.seconds for s, t in res.timings.items()},
            "notes": {s: t.note for s, t in res.timings.items() if t.seconds is None},
            "compile_s": res.compile_s, "best_peer": (res.best_peer() or (None,))[0],
            "ratio_vs_best_peer": res.ratio}


def plot(results: Sequence[Result], path: Path) -> None:
    """Horizontal bars, one per operator, speed vs the best peer on a log axis."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        measure.log(f"matplotlib is not installed: no plot written to {path}")
        return
    shown = [r for r in results if r.ratio]
    cmap = plt.get_cmap("tab10")
    colors = {f: cmap(i) for i, f in enumerate(FAMILIES)}
    fig, ax = plt.subplots(figsize=(8, 0.25 * len(shown) + 1.5))
    y = np.arange(len(shown))[::-1]
    ax.barh(y, [r.ratio or 0.0 for r in shown], color=[colors[r.case.family] for r in shown])
    ax.set_yticks(y, [f"{r.case.op} ({(r.best_peer() or ('',))[0]})" for r in shown],
                  fontsize=7)
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", ls="--", lw=0.8)
    ax.set_xlabel("speed vs the best peer (its time / polyopt's; > 1: polyopt faster)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[f]) for f in FAMILIES]
    ax.legend(handles, FAMILIES, fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    measure.log(f"wrote {path}")


# ------------------------------------------------------------------ main
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench suite``."""
    parser.add_argument("--quick", action="store_true", help="tiny shapes, a smoke test")
    parser.add_argument("--ops", default="", help="comma-separated operators (default: all)")
    parser.add_argument("--families", default="",
                        help=f"comma-separated subset of {','.join(FAMILIES)} (default: all)")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds: every system, --repeat calls each")
    parser.add_argument("--omp-bind", action="store_true",
                        help="set OMP_PROC_BIND=spread (see polyopt bench ops --help)")
    parser.add_argument("--json", type=Path, help="write the raw numbers here")
    parser.add_argument("--plot", type=Path, help="write a bar chart here (PNG)")
    parser.add_argument("--list", action="store_true", help="list the operators and exit")
    parser.add_argument("--update", action="store_true",
                        help=f"rewrite the '{SECTION}' section of BENCHMARKS.md")


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def selected(args: argparse.Namespace) -> list[SuiteCase]:
    """The cases the options ask for; a mistake is an OptionError naming the choices."""
    cases = all_cases(args.quick)
    ops, families = _names(args.ops), _names(args.families)
    for what, got, known in (("--ops", ops, {c.op for c in cases}),
                             ("--families", families, set(FAMILIES))):
        unknown = sorted(set(got) - known)
        if unknown:
            raise OptionError(f"unknown {what} {','.join(unknown)}; choose from "
                              f"{','.join(sorted(known))}")
    if args.repeat < 1:
        raise OptionError("--repeat must be at least 1")
    if args.update and args.quick:
        raise OptionError("--update records full-size results; drop --quick")
    return [c for c in cases if (not ops or c.op in ops)
            and (not families or c.family in families)]


def tvm_context(cases: Sequence[SuiteCase]) -> Any:
    """tvm_conv's Context for the convolution layers TVM covers (None when there are none)."""
    if not any(c.tvm_layer for c in cases):
        return None
    return Context(target="c", threads=int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count()
                                           or 1))


def load_line(start: float, end: float) -> str:
    """The 1-minute load average around the run; other processes on the CPUs stall the
    multi-threaded calls (OpenMP, BLAS) by scheduler ticks (~4 ms), so say when there were."""
    cpus = os.cpu_count() or 1
    line = f"- Load average (1 min): {start:.2f} at the start, {end:.2f} at the end, {cpus} CPUs"
    if max(start, end) > 0.5 * cpus:
        line += ("; the machine was loaded by other processes: multi-threaded calls then wait "
                 "for scheduler ticks (~4 ms), and the same cell moves between runs")
    return line


def measure_all(args: argparse.Namespace, cases: Sequence[SuiteCase]
                ) -> tuple[list[str], list[Result]]:
    """The environment bullets and every case's result, in a private kernel cache."""
    measure.configure_omp(args.omp_bind)
    cache_root = Path(tempfile.mkdtemp(prefix="polyopt-suite-"))
    try:
        with scratch_cache(cache_root):  # nothing reaches the user's cache
            bench = Bench(args.repeat, cache_root, False, measure.load_torch(),
                          tvm_gemm.load_tvm(cases),
                          settle_s=0.0 if args.quick else measure.SETTLE_S, rounds=args.rounds)
            ctx = tvm_context(cases)
            env_lines = markdown.environment_lines(bench.torch)
            print("\n".join(env_lines), flush=True)
            measure.warm_up_polyopt(cache_root)
            load_start = os.getloadavg()[0]
            results = [run_case(bench, ctx, case) for case in cases]
            env_lines.append(load_line(load_start, os.getloadavg()[0]))
            print(env_lines[-1], flush=True)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    return env_lines, results


def update(argv: Sequence[str], env_lines: list[str], table: list[str],
           plot_path: Path | None) -> None:
    """Rewrite this suite's section of BENCHMARKS.md (with the plot when it is beside it)."""
    notes = NOTES
    where = markdown.benchmarks_file().parent
    with contextlib.suppress(ValueError):  # a plot inside the checkout: show it there
        shown = plot_path.resolve().relative_to(where) if plot_path else None
        notes += f"\n\n![speed vs the best peer]({shown.as_posix()})" if shown else ""
    section = markdown.section_text(argv, env_lines, table, heading=SECTION,
                                    prefix=COMMAND_PREFIX, notes=notes)
    print(f"\nupdated the '{SECTION}' section of {markdown.update_section(section, SECTION)}")


def run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Run the suite for parsed options (``argv``: the options as given, for the command
    that ``--update`` records; default: this process's); 1 when polyopt computed a wrong
    result."""
    argv = markdown.given_options("suite") if argv is None else list(argv)
    cases = selected(args)
    if args.list:
        for c in cases:
            print(f"{c.family:12} {c.op:18} {c.shape}")
        return 0
    env_lines, results = measure_all(args, cases)
    table = table_lines(results)
    print("\n" + "\n".join(table))
    if args.json:
        args.json.write_text(json.dumps({"environment": env_lines, "argv": argv,
                                         "summary": summary(results),
                                         "operators": [json_record(r) for r in results]},
                                        indent=1) + "\n")
    if args.plot:
        plot(results, args.plot)
    if args.update:
        update(argv, env_lines, table, args.plot)
    return 1 if any(r.status == "WRONG" for r in results) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench suite ...`` as a module of its own (``python3 -m polyopt.bench.suite``)."""
    return suite_main("suite", __doc__, add_arguments, run, argv, pass_argv=True)


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
