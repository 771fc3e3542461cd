"""``polyopt bench gpu``: polyopt's CUDA kernels against torch (cuBLAS, cuDNN; TF32 off),
float32, on a machine with an NVIDIA GPU and PyCUDA (torch optional):

    polyopt bench gpu                        # matmul 4096^3 and five conv layers
    polyopt bench gpu --quick                # small shapes, a smoke test
    polyopt bench gpu --json r.json --md r.md --repeat 50
    polyopt bench gpu --compile-only         # no GPU: lower and nvcc every case

Each case (``gpu_cases``) is compiled with polyopt.compile(target="cuda") at fixed sizes and
called on PyCUDA GPUArrays with outputs=[a GPUArray], so no host copy is timed. Its first
result is checked against torch on the GPU (same buffers), or without torch against a float64
numpy reference on the host (matmul: the first 64 rows); a relative L2 error above 1e-4 is
WRONG. Timing (``gpu_device``): --warmup calls, then the median of --repeat calls, each between
two CUDA events on the default stream; torch's calls are timed the same way, with
torch.backends.{cuda.matmul,cudnn}.allow_tf32 = False and cudnn.benchmark at its default.
Without torch (or a CUDA build of it) its columns are "-": nothing is estimated.
Exit status: 0; 1 when a polyopt result is WRONG or failed; 2 without PyCUDA or a GPU.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polyopt import api
from polyopt.bench.entry import suite_main
from polyopt.bench.gpu.cases import (
    TOLERANCE,
    Case,
    all_cases,
    numpy_reference,
    relative_error,
    torch_call,
)
from polyopt.bench.gpu.device import (
    Gpu,
    environment,
    kernel_resources,
    load_gpu,
    load_torch,
    time_pycuda,
    time_torch,
)
from polyopt.bench.gpu.records import Row, header_lines, table_lines, write_outputs
from polyopt.errors import OptionError, PolyoptError
from polyopt.runtime import nvcc


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def describe(exc: BaseException, lines: int = 6) -> str:
    """The exception's type and the first lines of its message (nvcc logs are long)."""
    text = str(exc).splitlines() or [""]
    more = f" [... {len(text) - lines} more lines]" if len(text) > lines else ""
    return f"{type(exc).__name__}: " + " | ".join(text[:lines]) + more


def check(row: Row, out: Any, host: Sequence[np.ndarray], torch: Any, expected: Any) -> None:
    """Compare polyopt's first result with torch's (on the GPU), else with numpy's."""
    if expected is not None:
        mine = torch.as_tensor(out, device="cuda").double()
        ref = expected.double()
        err = float((mine - ref).norm() / ref.norm().clamp_min(1e-30))
        row.rel_error = err if math.isfinite(err) else math.inf
        row.reference = "torch"
    else:
        ref, rows = numpy_reference(row.case, host)
        got = out.get()
        row.rel_error = relative_error(got[:rows] if rows else got, ref)
        row.reference = f"numpy (first {rows} rows)" if rows else "numpy"
    row.matched = row.rel_error <= TOLERANCE


def run_torch(row: Row, torch: Any, dev: Sequence[Any], repeat: int, warmup: int) -> Any:
    """Time torch into ``row``; its first result, or None when it failed."""
    try:
        with torch.no_grad():
            call = torch_call(torch, row.case, dev)
            expected = call()
            torch.cuda.synchronize()
            row.torch = time_torch(torch, call, repeat, warmup)
        return expected
    except Exception as exc:  # report torch's failure in its cells, keep polyopt's
        row.torch_error = describe(exc)
        log(f"  torch failed on {row.case.shape}: {row.torch_error}")
        return None


def run_polyopt(row: Row, gpu: Gpu, dev: Sequence[Any], out: Any) -> Callable[[], Any] | None:
    """Compile and make the first call; the call to time, or None (``row.error`` says why)."""
    case = row.case
    try:
        start = time.perf_counter()
        kernel = api.compile(case.source, case.kernel, target="cuda", sizes=case.sizes)
        kernel(*dev, outputs=[out])
        gpu.drv.Context.synchronize()
        row.compile_s = time.perf_counter() - start
        row.kernels = kernel_resources(kernel, gpu.arch)
    except Exception as exc:  # a case polyopt cannot build or run is a row, not a crash
        row.error = describe(exc)
        log(f"  polyopt failed on {case.shape}: {row.error}")
        return None
    return lambda: kernel(*dev, outputs=[out])


def run_case(case: Case, gpu: Gpu, torch: Any, args: argparse.Namespace) -> Row:
    """One case on both systems: polyopt's first result checked, then both timed."""
    row = Row(case)
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(shape, dtype=np.float32) for shape in case.inputs]
    dev = [gpu.gpuarray.to_gpu(a) for a in host]
    out = gpu.gpuarray.empty(case.output, np.float32)
    out.fill(np.float32(np.nan))  # a kernel that skips outputs must not pass the check
    call = run_polyopt(row, gpu, dev, out)
    expected = run_torch(row, torch, dev, args.repeat, args.warmup) if torch else None
    if call is None:
        return row
    try:
        check(row, out, host, torch, expected)
        row.polyopt = time_pycuda(gpu.drv, call, args.repeat, args.warmup)
    except Exception as exc:
        row.error = describe(exc)
        log(f"  polyopt failed on {case.shape}: {row.error}")
    return row


def compile_only(cases: Sequence[Case]) -> int:
    """What the GPU run compiles, checked here: every case lowers and nvcc accepts it."""
    failed = 0
    print("| op | shape | kernels (registers, smem bytes, spills) | compile s |\n|---|---|---|---|")
    for case in cases:
        start = time.perf_counter()
        try:
            kernel = api.compile(case.source, case.kernel, target="cuda", sizes=case.sizes)
            res = kernel_resources(kernel, nvcc.DEFAULT_ARCH)
        except Exception as exc:
            failed += 1
            print(f"| {case.op} | {case.shape} | ERROR: {describe(exc)} | - |")
            continue
        shown = ", ".join(f"{r['kernel']} ({r['registers']}, {r['shared_bytes']}, "
                          f"{'yes' if r['spills'] else 'no'})" for r in res)
        print(f"| {case.op} | {case.shape} | {shown} | {time.perf_counter() - start:.2f} |")
    return 1 if failed else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polyopt bench gpu``."""
    parser.add_argument("--quick", action="store_true", help="small shapes, a smoke test")
    parser.add_argument("--repeat", type=int, default=20, help="timed calls per cell (20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls first (3)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--md", metavar="PATH", help="write the table as Markdown")
    parser.add_argument("--compile-only", action="store_true",
                        help=f"no GPU needed: lower every case and compile it with nvcc for "
                        f"{nvcc.DEFAULT_ARCH}, print ptxas' report")


def run(args: argparse.Namespace) -> int:
    """Every case on the GPU (or only compiled, with --compile-only); the table on stdout,
    the files rewritten after each case."""
    if args.repeat < 1 or args.warmup < 0:
        raise OptionError("--repeat must be at least 1 and --warmup at least 0")
    cases = all_cases(args.quick)
    if args.compile_only:
        return compile_only(cases)
    try:
        gpu = load_gpu()
    except PolyoptError as exc:
        log(f"polyopt bench gpu: needs PyCUDA and an NVIDIA GPU, and found none usable: {exc}")
        return 2
    torch, torch_note = load_torch()
    env = environment(gpu, torch, torch_note)
    print("\n".join(header_lines(env, args)), flush=True)
    rows: list[Row] = []
    for i, case in enumerate(cases, 1):
        log(f"[{i}/{len(cases)}] {case.op} {case.shape}")
        rows.append(run_case(case, gpu, torch, args))
        write_outputs(args, env, rows)
    print("\n" + "\n".join(table_lines(rows)), flush=True)
    bad = [row for row in rows if row.error is not None or row.matched is False]
    return 1 if bad else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``polyopt bench gpu ...`` as a module of its own (``python3 -m polyopt.bench.gpu``)."""
    return suite_main("gpu", __doc__, add_arguments, run, argv)

