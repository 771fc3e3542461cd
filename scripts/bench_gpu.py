"""GPU benchmark: polyopt's CUDA kernels against torch (cuBLAS, cuDNN; TF32 off), float32.

Run on a machine with an NVIDIA GPU and PyCUDA (torch optional):
    python scripts/bench_gpu.py                      # matmul 4096^3 and five conv layers
    python scripts/bench_gpu.py --quick              # small shapes, a smoke test
    python scripts/bench_gpu.py --json r.json --md r.md --repeat 50
    python scripts/bench_gpu.py --compile-only       # no GPU: lower and nvcc every case

Each case is compiled with polyopt.compile(target="cuda") at fixed sizes and called on PyCUDA
GPUArrays with outputs=[a GPUArray], so no host copy is timed. Its first result is checked
against torch on the GPU (same buffers), or without torch against a float64 numpy reference
on the host (matmul: the first 64 rows); a relative L2 error above 1e-4 is WRONG. Timing:
--warmup calls, then the median of --repeat calls, each between two CUDA events on the
default stream. A polyopt call also allocates, checks and frees its 32-byte error flag and
synchronizes (what every Kernel call costs); torch's calls are timed the same way, with
torch.backends.{cuda.matmul,cudnn}.allow_tf32 = False and cudnn.benchmark at its default.
Without torch (or a CUDA build of it) its columns are "-": nothing is estimated.
Conv layers are the survey's (batch 1, NCHW): ResNet-50's 3x3 64->64 56x56, 1x1 256->64
56x56, 3x3 256->256 14x14 and 7x7 3->64 224x224 stride 2, and MobileNetV2's depthwise 3x3
144 channels 56x56. Exit status: 0; 1 when a polyopt result is WRONG or failed; 2 without
PyCUDA or a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import math
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import polyopt
from polyopt.errors import PolyoptError
from polyopt.runtime import cuda as cuda_runtime
from polyopt.runtime import nvcc

# Installed from kernels/ (setup.cfg package_dir), which type checkers cannot follow.
kernels = importlib.import_module("polyopt.kernels")

TOLERANCE = 1e-4  # relative L2 error, as polyopt bench conv
SAMPLED_ROWS = 64  # rows of a large matmul that the numpy fallback checks
HEADER = ("op", "shape", "polyopt ms", "polyopt GFLOP/s", "torch ms", "torch GFLOP/s",
          "polyopt/torch speed", "matched")


# ------------------------------------------------------------------ cases
@dataclass(frozen=True)
class Case:
    """One operator at one shape: polyopt's definition and torch's equivalent."""

    op: str  # matmul, conv2d or depthwise
    kernel: str  # def name in polyopt.kernels
    shape: str  # as shown in the table
    source: str  # TC text, strides and paddings already set by kernels.get
    sizes: dict[str, int]
    inputs: tuple[tuple[int, ...], ...]
    output: tuple[int, ...]
    flops: float
    stride: int = 1
    pad: int = 0
    groups: int = 1  # torch's conv2d groups (the channels, for depthwise)


def matmul_case(m: int, n: int, k: int) -> Case:
    return Case("matmul", "matmul", f"{m}x{n}x{k} (MxNxK)", kernels.source("matmul"),
                {"M": m, "N": n, "K": k}, ((m, k), (k, n)), (m, n), 2.0 * m * n * k)


def conv_case(c: int, f: int, hw: int, k: int, stride: int = 1, pad: int = 0, *,
              depthwise: bool = False) -> Case:
    """A batch-1 square convolution (depthwise: ``f`` must equal ``c``)."""
    ho = (hw + 2 * pad - k) // stride + 1
    sizes = {"N": 1, "C": c, "H": hw, "W": hw, "KH": k, "KW": k}
    name = "depthwise_conv2d" if depthwise else "conv2d"
    source = kernels.get(name, stride=stride, padding=pad)
    if depthwise:
        label, weight, per_output = f"dw {k}x{k} {c}ch", (c, 1, k, k), k * k
    else:
        sizes["F"] = f
        label, weight, per_output = f"{k}x{k} {c}->{f}", (f, c, k, k), k * k * c
    label += f" {hw}x{hw}" + (f" s{stride}" if stride != 1 else "") + (f" p{pad}" if pad else "")
    return Case("depthwise" if depthwise else "conv2d", name, label, source, sizes,
                ((1, c, hw, hw), weight), (1, f, ho, ho), 2.0 * ho * ho * f * per_output,
                stride, pad, c if depthwise else 1)


def all_cases(quick: bool) -> list[Case]:
    """The benchmark set, or small shapes (partial tiles included) for --quick."""
    if quick:
        mats = [matmul_case(256, 256, 256), matmul_case(100, 70, 30)]
        convs = [(8, 8, 14, 3, 1, 1), (16, 8, 14, 1), (8, 8, 7, 3, 1, 1), (3, 8, 28, 7, 2, 3)]
        dw = conv_case(8, 8, 14, 3, 1, 1, depthwise=True)
    else:
        mats = [matmul_case(4096, 4096, 4096)]
        convs = [(64, 64, 56, 3, 1, 1), (256, 64, 56, 1), (256, 256, 14, 3, 1, 1),
                 (3, 64, 224, 7, 2, 3)]
        dw = conv_case(144, 144, 56, 3, 1, 1, depthwise=True)
    return [*mats, *(conv_case(*cv) for cv in convs), dw]


# ------------------------------------------------------------------ results
@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float


@dataclass
class Row:
    case: Case
    polyopt: Timing | None = None
    torch: Timing | None = None
    matched: bool | None = None  # None: nothing to compare with
    rel_error: float | None = None
    reference: str = "-"
    compile_s: float | None = None  # polyopt.compile + first call (lowering, nvcc, load)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # why polyopt has no time
    torch_error: str | None = None

    def record(self) -> dict[str, Any]:
        """The JSON form: the table's values plus what explains them."""
        case = self.case
        return {"op": case.op, "kernel": case.kernel, "shape": case.shape, "sizes": case.sizes,
                "gflop": case.flops / 1e9,
                "polyopt": asdict(self.polyopt) if self.polyopt else None,
                "polyopt_gflops": gflops(case, self.polyopt),
                "torch": asdict(self.torch) if self.torch else None,
                "torch_gflops": gflops(case, self.torch), "speed_vs_torch": self.speed(),
                "matched": self.matched, "rel_error": finite_or_text(self.rel_error),
                "reference": self.reference, "compile_s": self.compile_s,
                "kernels": self.kernels, "error": self.error, "torch_error": self.torch_error}

    def speed(self) -> float | None:
        """torch's time over polyopt's: > 1 means polyopt is faster."""
        if self.polyopt is None or self.torch is None:
            return None
        return self.torch.median_ms / self.polyopt.median_ms


def finite_or_text(value: float | None) -> float | str | None:
    """JSON has no infinity: a NaN-poisoned result's error is written as "inf"."""
    return value if value is None or math.isfinite(value) else "inf"


def gflops(case: Case, timing: Timing | None) -> float | None:
    return None if timing is None else case.flops / (timing.median_ms * 1e-3) / 1e9


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def describe(exc: BaseException, lines: int = 6) -> str:
    """The exception's type and the first lines of its message (nvcc logs are long)."""
    text = str(exc).splitlines() or [""]
    more = f" [... {len(text) - lines} more lines]" if len(text) > lines else ""
    return f"{type(exc).__name__}: " + " | ".join(text[:lines]) + more


# ------------------------------------------------------------------ timing
def summarize(times_ms: Sequence[float]) -> Timing:
    return Timing(float(np.median(times_ms)), min(times_ms), max(times_ms))


def time_pycuda(drv: Any, fn: Callable[[], Any], repeat: int, warmup: int) -> Timing:
    """Median of ``repeat`` calls, each between two events on the default stream."""
    for _ in range(warmup):
        fn()
    drv.Context.synchronize()
    times = []
    for _ in range(repeat):
        start, stop = drv.Event(), drv.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(stop.time_since(start))
    return summarize(times)


def time_torch(torch: Any, fn: Callable[[], Any], repeat: int, warmup: int) -> Timing:
    """As ``time_pycuda``, with torch's events on its current (default) stream."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return summarize(times)


# ------------------------------------------------------------------ one case
@dataclass(frozen=True)
class Gpu:
    """PyCUDA's driver and gpuarray modules, a context on device 0, and its architecture."""

    drv: Any
    gpuarray: Any
    arch: str


def load_gpu() -> Gpu:
    """Raises PolyoptError (saying what is missing) without PyCUDA or a usable GPU."""
    drv, gpuarray = cuda_runtime.pycuda()
    major, minor = drv.Context.get_device().compute_capability()
    return Gpu(drv, gpuarray, f"sm_{major}{minor}")


def load_torch() -> tuple[Any | None, str]:
    """torch with TF32 off, or None and the reason its columns are '-'."""
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        return None, f"torch is not installed ({exc})"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} has no CUDA device (CUDA {torch.version.cuda})"
    # Full float32 on both sides: TF32 would trade accuracy for a speed polyopt cannot use.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch, f"torch {torch.__version__}"


def kernel_resources(kernel: polyopt.Kernel, arch: str) -> list[dict[str, Any]]:
    """Per CUDA kernel: launch shape (C expressions of the sizes) and ptxas' report. nvcc's
    output is cached, so this costs no second compile."""
    _, report = nvcc.build_cubin(kernel.source, arch)
    out = []
    for launch in kernel.launch:
        res = report.get(launch["kernel"])
        out.append({**launch, "registers": res.registers if res else None,
                    "shared_bytes": res.shared_bytes if res else None,
                    "spills": res.spills if res else None})
    return out


def numpy_reference(case: Case, host: Sequence[np.ndarray]) -> tuple[np.ndarray, int | None]:
    """float64 reference on the host, and how many leading rows of the output it covers
    (a 4096^3 matmul is checked on its first rows: the whole would take seconds)."""
    a, b = (x.astype(np.float64) for x in host)
    if case.op == "matmul":
        rows = SAMPLED_ROWS if a.shape[0] > 4 * SAMPLED_ROWS else None
        return (a[:rows] if rows else a) @ b, rows
    k = b.shape[2]
    xp = np.pad(a, ((0, 0), (0, 0), (case.pad, case.pad), (case.pad, case.pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
    win = win[:, :, ::case.stride, ::case.stride]
    if case.op == "depthwise":
        return np.einsum("nchwij,cij->nchw", win, b[:, 0]), None
    return np.einsum("nchwij,fcij->nfhw", win, b, optimize=True), None


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    got = got.astype(np.float64)
    if not np.isfinite(got).all():
        return math.inf
    return float(np.linalg.norm(got - ref) / max(float(np.linalg.norm(ref)), 1e-30))


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


def torch_call(torch: Any, case: Case, dev: Sequence[Any]) -> Callable[[], Any]:
    """torch on polyopt's own input buffers (zero copy through __cuda_array_interface__)."""
    x, w = (torch.as_tensor(a, device="cuda") for a in dev)
    if case.op == "matmul":
        return lambda: torch.matmul(x, w)
    conv2d = torch.nn.functional.conv2d
    return lambda: conv2d(x, w, stride=case.stride, padding=case.pad, groups=case.groups)


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
        kernel = polyopt.compile(case.source, case.kernel, target="cuda", sizes=case.sizes)
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


# ------------------------------------------------------------------ report
def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def matched_cell(row: Row) -> str:
    if row.error is not None:
        return "ERROR"
    if row.matched is None:
        return "-"
    word = "yes" if row.matched else "WRONG"
    return f"{word} ({row.rel_error:.1e} vs {row.reference})"


def cells(row: Row) -> list[str]:
    case = row.case
    mine = fmt(row.polyopt.median_ms) if row.polyopt else "ERROR" if row.error else "-"
    theirs = fmt(row.torch.median_ms) if row.torch else "ERROR" if row.torch_error else "-"
    return [case.op, case.shape, mine, fmt(gflops(case, row.polyopt)), theirs,
            fmt(gflops(case, row.torch)), fmt(row.speed()), matched_cell(row)]


def table_lines(rows: Sequence[Row]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return lines + ["| " + " | ".join(cells(row)) + " |" for row in rows]


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def nvcc_version() -> str:
    path = nvcc.nvcc_path()
    if path is None:
        return "not found"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                              check=False)
        lines = proc.stdout.strip().splitlines()
        return f"{path}: {lines[-1] if lines else 'no output'}"
    return f"{path}: did not run"


def cuda_version(code: int) -> str:
    """The driver's CUDA version from its integer form (12040 -> 12.4)."""
    return f"{code // 1000}.{code % 1000 // 10}"


def environment(gpu: Gpu, torch: Any, torch_note: str) -> dict[str, Any]:
    dev = gpu.drv.Context.get_device()
    torch_info = torch_note if torch is None else (
        f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
        f"{torch.backends.cudnn.version()}), cudnn.benchmark={torch.backends.cudnn.benchmark},"
        " TF32 off")
    return {"device": dev.name(), "arch": gpu.arch,
            "memory_gib": round(dev.total_memory() / 2**30, 1),
            "driver_cuda": cuda_version(gpu.drv.get_driver_version()),
            "pycuda_built_for_cuda": ".".join(map(str, gpu.drv.get_version())),
            "nvcc": nvcc_version(), "torch": torch_info,
            "versions": {"python": platform.python_version(), "numpy": np.__version__,
                         "polyopt": polyopt.__version__, "pycuda": version("pycuda"),
                         "torch": version("torch")}}


def header_lines(env: dict[str, Any], args: argparse.Namespace) -> list[str]:
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    return [f"- GPU: {env['device']} ({env['arch']}, {env['memory_gib']} GiB), driver CUDA "
            f"{env['driver_cuda']}; PyCUDA built for CUDA {env['pycuda_built_for_cuda']}",
            f"- nvcc: {env['nvcc']}", f"- Peer: {env['torch']}", f"- Versions: {versions}",
            f"- float32; median of {args.repeat} calls after {args.warmup} warm-up calls, "
            "CUDA events around each call (a polyopt call includes its error-flag check and "
            "synchronize); speed ratio = torch ms / polyopt ms (> 1: polyopt faster); "
            f"matched: relative L2 error <= {TOLERANCE:g}"]


def write_outputs(args: argparse.Namespace, env: dict[str, Any], rows: Sequence[Row]) -> None:
    """Rewritten after every case, so a run cut short still leaves the cases it finished."""
    if args.json:
        data = {**env, "command": ["scripts/bench_gpu.py", *args.argv],
                "settings": {"repeat": args.repeat, "warmup": args.warmup, "quick": args.quick,
                             "tf32": False, "tolerance": TOLERANCE},
                "rows": [row.record() for row in rows]}
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    if args.md:
        text = "\n".join([*header_lines(env, args), "", *table_lines(rows)])
        Path(args.md).write_text(text + "\n")


# ------------------------------------------------------------------ main
def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, a smoke test")
    parser.add_argument("--repeat", type=int, default=20, help="timed calls per cell (20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls first (3)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--md", metavar="PATH", help="write the table as Markdown")
    parser.add_argument("--compile-only", action="store_true",
                        help=f"no GPU needed: lower every case and compile it with nvcc for "
                        f"{nvcc.DEFAULT_ARCH}, print ptxas' report")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.warmup < 0:
        parser.error("--repeat must be at least 1 and --warmup at least 0")
    args.argv = list(argv)
    return args


def compile_only(cases: Sequence[Case]) -> int:
    """What the GPU run compiles, checked here: every case lowers and nvcc accepts it."""
    failed = 0
    print("| op | shape | kernels (registers, smem bytes, spills) | compile s |\n|---|---|---|---|")
    for case in cases:
        start = time.perf_counter()
        try:
            kernel = polyopt.compile(case.source, case.kernel, target="cuda", sizes=case.sizes)
            res = kernel_resources(kernel, nvcc.DEFAULT_ARCH)
        except Exception as exc:
            failed += 1
            print(f"| {case.op} | {case.shape} | ERROR: {describe(exc)} | - |")
            continue
        shown = ", ".join(f"{r['kernel']} ({r['registers']}, {r['shared_bytes']}, "
                          f"{'yes' if r['spills'] else 'no'})" for r in res)
        print(f"| {case.op} | {case.shape} | {shown} | {time.perf_counter() - start:.2f} |")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    cases = all_cases(args.quick)
    if args.compile_only:
        return compile_only(cases)
    try:
        gpu = load_gpu()
    except PolyoptError as exc:
        log(f"bench_gpu: needs PyCUDA and an NVIDIA GPU, and found none usable: {exc}")
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


if __name__ == "__main__":
    sys.exit(main())
