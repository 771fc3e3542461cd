"""Operator speed: polyopt against program order, numpy, torch and TVM, float32, in one run.

Run with numpy's BLAS at full speed (the command recorded in BENCHMARKS.md):
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE polyopt bench ops

Smoke test in seconds:  polyopt bench ops --quick
A subset:               ... polyopt bench ops --ops matmul,softmax --repeat 3
Record the result:      ... polyopt bench ops --update   (rewrites "## CPU: operators")

Every system is built and its result checked first, then the systems are timed in --rounds
interleaved rounds (default 3) of --repeat calls each, and a cell is the median of all those
calls: on this VM the same kernel timed in blocks seconds apart moves by 0.7-1.4x, so one
block per system would decide a ratio by chance. Results are checked
against a float64 numpy reference (rtol 1e-3, atol 1e-3*sqrt(reduction size)); a mismatch
shows as WRONG. Throughput is GFLOP/s, or GB/s for the memory-bound softmax and layernorm
(bytes = inputs read once + output written once). Columns:
- polyopt: polyopt.compile's default schedule; program-order: schedule="program-order"
  (skipped above 2 GFLOP unless --all-baselines); polyopt fusion=min: options={"fusion": "min"}
  (softmax and layernorm only).
- numpy: BLAS matmul; convolutions as im2col (sliding_window_view) + tensordot; depthwise
  as einsum. torch: torch.matmul/bmm, F.conv2d, torch.softmax, F.layer_norm, 2 threads.
  TVM: matmul only, the blocked/packed/vectorized/parallel schedule of TVM's CPU GEMM tutorial.
- compile: polyopt.compile up to the first result with a fresh POLYOPT_CACHE_DIR (cold
  cache), minus one steady-state call. overhead: median time of a call on 1-element inputs.
- Each measurement starts after a 0.3 s pause, so that the previous runtime's spinning worker
  threads have gone idle (on 2 cores they stall the next OpenMP call by ~8 ms).
- Thread counts stay at their defaults. --omp-bind sets OMP_PROC_BIND=spread: on VMs whose
  kernel packs threads onto one vCPU (sched_vcpu_pack in /proc/cmdline) unpinned OpenMP teams
  (polyopt's and torch's) otherwise lose a 4 ms scheduler tick at every barrier.
Shapes: odd matmul is M=1000, N=1100, K=1200; conv_bias_relu uses conv1's shape (N=1);
softmax and layernorm are 16384 x 1024 (each tensor 64 MB: beyond the L3).
"""


from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from polyopt.bench import markdown, measure, tvm_gemm
from polyopt.bench.entry import suite_main
from polyopt.bench.measure import Bench, Prepared, Timing
from polyopt.bench.operators import OPS, Case, all_cases
from polyopt.config import scratch_cache
from polyopt.errors import OptionError

SECTION = "## CPU: operators"
COMMAND_PREFIX = "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE polyopt bench ops"
PROGRAM_ORDER_MAX_FLOP = 2e9
SYSTEMS = ("polyopt", "program-order", "fusion=min", "numpy", "torch", "tvm")


@dataclass
class Row:
    case: Case
    timings: dict[str, Timing] = field(default_factory=dict)
    compile_s: float | None = None
    overhead_us: float | None = None



# ------------------------------------------------------------------ one row
def run_case(bench: Bench, case: Case) -> Row:
    measure.log(f"{case.op} {case.shape}")
    inputs = measure.make_inputs(case, np.random.default_rng(0))
    ref = case.reference(*[np.asarray(x, np.float64) for x in inputs])
    row = Row(case)
    systems: dict[str, Prepared] = {}
    systems["polyopt"], first_s = measure.prepare_polyopt(bench, case, inputs, ref)
    if case.flops > PROGRAM_ORDER_MAX_FLOP and not bench.all_baselines:
        systems["program-order"] = Prepared(note="skipped")
    else:
        systems["program-order"], _ = measure.prepare_polyopt(bench, case, inputs, ref,
                                                      schedule="program-order")
    if case.unfused:
        systems["fusion=min"], _ = measure.prepare_polyopt(bench, case, inputs, ref,
                                                   options={"fusion": "min"})
    systems["numpy"] = measure.prepare_baseline(bench, "numpy", lambda: case.reference(*inputs),
                                        ref, case)
    systems["torch"] = measure.prepare_torch(bench, case, inputs, ref)
    systems["tvm"] = tvm_gemm.prepare_tvm(bench, case, inputs, ref)
    row.timings = measure.time_interleaved(bench, systems)
    row.compile_s = measure.compile_seconds(first_s, row.timings["polyopt"])
    row.overhead_us = measure.call_overhead_us(bench, case)
    return row


# ------------------------------------------------------------------ report
HEADER = ("operator", "shape", "unit", "polyopt", "program-order", "polyopt fusion=min",
          "numpy", "torch", "TVM", "polyopt/numpy", "polyopt/torch", "polyopt/program-order",
          "compile s (cold cache)", "call overhead µs")





def cells(row: Row) -> list[str]:
    case, got = row.case, row.timings
    mine = got.get("polyopt", Timing())

    def speed(name: str) -> str:
        t = got.get(name, Timing())
        return t.note if t.seconds is None else markdown.fmt(case.throughput(t.seconds))

    def ratio(name: str) -> str:
        other = got.get(name, Timing())
        if mine.seconds is None or other.seconds is None:
            return "-"
        return markdown.fmt(other.seconds / mine.seconds)

    extra = [markdown.fmt(row.compile_s) if row.compile_s is not None else "-",
             f"{row.overhead_us:.1f}" if row.overhead_us is not None else "-"]
    return [case.op, case.shape, case.unit, *map(speed, SYSTEMS),
            *map(ratio, ("numpy", "torch", "program-order")), *extra]


def table_lines(rows: Sequence[Row]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return lines + ["| " + " | ".join(cells(row)) + " |" for row in rows]


NOTES = """\
float32, batch 1 for conv; each system is built and checked, then the systems are timed in
interleaved rounds (--rounds, default 3) and each cell is the median of all its calls.
Throughput in GFLOP/s, or GB/s for softmax and layernorm (inputs read once + output written
once). Ratios are polyopt (default schedule) over the other, >1 means polyopt is faster.
program-order: `schedule="program-order"`, skipped above 2 GFLOP unless `--all-baselines`;
polyopt fusion=min: `options={"fusion": "min"}`. numpy: BLAS matmul, conv as im2col
(sliding_window_view) + tensordot, depthwise as einsum. TVM: the blocked/packed/vectorized/parallel
schedule of TVM's CPU GEMM tutorial, matmul only. compile: `polyopt.compile` to first result with
an empty POLYOPT_CACHE_DIR, minus one steady-state call; call overhead: median call with every
extent 1. The odd matmul is M=1000, N=1100, K=1200; conv_bias_relu has conv1's shape. Each
measurement starts after a 0.3 s pause, so the previous runtime's spinning threads (OpenBLAS,
libgomp) have gone idle: on 2 cores they otherwise stall OpenMP calls by ~8 ms. `--omp-bind`
sets OMP_PROC_BIND=spread (see Threads above)."""


# ------------------------------------------------------------------ entry points
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench ops``."""
    parser.add_argument("--quick", action="store_true", help="tiny shapes, a smoke test")
    parser.add_argument("--ops", default=",".join(OPS),
                        help=f"comma-separated subset of {','.join(OPS)} (default: all)")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds: every system, --repeat calls each")
    parser.add_argument("--all-baselines", action="store_true",
                        help="also run program order above 2 GFLOP (slow)")
    parser.add_argument("--omp-bind", action="store_true",
                        help="set OMP_PROC_BIND=spread (unless set) before any OpenMP runtime "
                        "loads, so polyopt's and torch's threads sit on different cores")
    parser.add_argument("--update", action="store_true",
                        help=f"rewrite the '{SECTION}' section of BENCHMARKS.md")


def selected(args: argparse.Namespace) -> list[Case]:
    """The cases the options ask for; a mistake is an OptionError naming the choices."""
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        raise OptionError(f"unknown --ops {','.join(unknown)}; choose from {','.join(OPS)}")
    if args.repeat < 1:
        raise OptionError("--repeat must be at least 1")
    if args.update and args.quick:
        raise OptionError("--update records full-size results; drop --quick")
    return [c for c in all_cases(args.quick) if c.op in ops]


def run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Run the benchmark for parsed options (``argv``: the options as given, for the command
    that ``--update`` records; default: this process's)."""
    argv = markdown.given_options("ops") if argv is None else list(argv)
    cases = selected(args)
    measure.configure_omp(args.omp_bind)
    cache_root = Path(tempfile.mkdtemp(prefix="polyopt-bench-"))
    try:
        with scratch_cache(cache_root):  # nothing reaches the user's cache
            bench = Bench(args.repeat, cache_root, args.all_baselines, measure.load_torch(),
                          tvm_gemm.load_tvm(cases),
                          settle_s=0.0 if args.quick else measure.SETTLE_S, rounds=args.rounds)
            env_lines = markdown.environment_lines(bench.torch)
            print("\n".join(env_lines), flush=True)
            measure.warm_up_polyopt(cache_root)
            rows = [run_case(bench, case) for case in cases]
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    table = table_lines(rows)
    print("\n" + "\n".join(table))
    if args.update:
        section = markdown.section_text(argv, env_lines, table, heading=SECTION,
                                        prefix=COMMAND_PREFIX, notes=NOTES)
        path = markdown.update_section(section, SECTION)
        print(f"\nupdated the '{SECTION}' section of {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench ops ...`` as a module of its own (``python3 -m polyopt.bench.ops``)."""
    return suite_main("ops", __doc__, add_arguments, run, argv, pass_argv=True)


if __name__ == "__main__":
    sys.exit(main())
