"""The ``polyopt`` command line: compile a definition and print any stage, or run it."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from polyopt import api, config, dtypes, ir
from polyopt.autodiff import grad
from polyopt.bench import (  # import neither torch nor TVM
    compile_time,
    contention,
    conv,
    einsum_paths,
    formulations,
    gpu,
    latency,
    memory,
    model,
    ops,
    suite,
)
from polyopt.costmodel import machine
from polyopt.errors import OptionError, PolyoptError
from polyopt.runtime import probe
from polyopt.runtime.interp import evaluate
from polyopt.tuning.db import Database
from polyopt.tuning.tuner import Trial, tune
from polyopt.views import show
from polyopt.views.roofplot import plot_roofline

EMIT = ("c", "schedule", "domains", "deps", "ir", "ast")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except PolyoptError as e:
        print(f"polyopt: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"polyopt: error: {e}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="polyopt", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile a definition and print what it generates")
    _common(c)
    c.add_argument("--emit", choices=EMIT, default="c", help="which stage to print")
    c.set_defaults(func=_compile)
    r = sub.add_parser("run", help="run a definition on random inputs and time it")
    _common(r)
    r.add_argument("--check", action="store_true",
                   help="compare with a float64 numpy reference of the same definition")
    r.add_argument("--repeat", type=int, default=10, help="timed runs (median is reported)")
    r.add_argument("--seed", type=int, default=0)
    r.set_defaults(func=_run)
    _stats_parser(sub)
    _show_parser(sub)
    _bench_parser(sub)
    _db_parser(sub)
    _machine_parser(sub)
    _tune_parser(sub)
    g = sub.add_parser("grad", help="print the gradient of a definition as TC source")
    g.add_argument("file", help="a .tc file, or the name of a kernel in polyopt.kernels")
    g.add_argument("--name", help="the def to differentiate (needed when the file has several)")
    g.add_argument("--wrt", help="the inputs to differentiate, e.g. A,B (default: every "
                   "floating-point input)")
    g.set_defaults(func=_grad)
    return p


def _grad(args: argparse.Namespace) -> int:
    wrt = None if args.wrt is None else [w.strip() for w in args.wrt.split(",") if w.strip()]
    print(grad(_read_source(args.file), args.name, wrt=wrt), end="")
    return 0


def _stats_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    st = sub.add_parser("stats", help="flops, compulsory traffic, intensity, footprints per "
                        "loop, parallel and vector loops, roofline (Kernel.stats())")
    _common(st)
    st.add_argument("--json", action="store_true", help="print the stats as JSON")
    st.add_argument("--plot", metavar="OUT", help="draw a roofline chart (.png, .svg, .pdf; "
                    "needs matplotlib)")
    st.add_argument("--time", action="store_true", help="run the kernel on random inputs "
                    "(every input size given) and place the measured point")
    st.add_argument("--repeat", type=int, default=10, help="timed runs with --time (median)")
    st.add_argument("--seed", type=int, default=0)
    st.add_argument("--bandwidth", type=float, help="memory bandwidth in GB/s (default: "
                    "measured by a numpy copy)")
    st.add_argument("--freq", type=float, help="clock in GHz (default: the CPU's)")
    st.set_defaults(func=_stats)


def _stats(args: argparse.Namespace) -> int:
    sizes = parse_sizes(args.sizes)
    kernel = api.compile(_read_source(args.file), args.name, sizes=sizes,
                         parametric=args.parametric)
    seconds = _timed(kernel, sizes, args.repeat, args.seed) if args.time else None
    stats = kernel.stats(seconds=seconds, freq_ghz=args.freq, bandwidth_gbs=args.bandwidth)
    print(json.dumps(stats.as_dict(), indent=2) if args.json else stats)
    if args.plot:
        plot_roofline(stats, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def _timed(kernel: api.Kernel, sizes: dict[str, int], repeat: int, seed: int) -> float:
    """The median seconds of ``repeat`` calls on random inputs (after one warm call)."""
    rng = np.random.default_rng(seed)
    inputs = [_random(t, sizes, rng) for t in kernel.program.inputs]
    kernel(*inputs)
    times = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        kernel(*inputs)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _show_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sh = sub.add_parser("show", help="the schedule tree and the dependence graph, as text, "
                        "DOT, or SVG/PNG through graphviz")
    _common(sh)
    sh.add_argument("--tree", action="store_true", help="the schedule tree (default: both)")
    sh.add_argument("--deps", action="store_true", help="the dependence graph")
    out = sh.add_mutually_exclusive_group()
    out.add_argument("--svg", metavar="OUT", help="draw to an SVG file with graphviz's dot")
    out.add_argument("--png", metavar="OUT", help="draw to a PNG file with graphviz's dot")
    out.add_argument("--dot", action="store_true", help="print the graph as DOT text")
    sh.add_argument("--text", action="store_true", help="print the text form too")
    sh.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    kernel = api.compile(_read_source(args.file), args.name, sizes=parse_sizes(args.sizes),
                         parametric=args.parametric)
    sched = kernel.schedule
    tree, deps = (args.tree, args.deps) if args.tree or args.deps else (True, True)
    fmt, path = ("svg", args.svg) if args.svg else ("png", args.png) if args.png else ("", "")
    drawn = bool(path) and show.dot_program() is not None
    if drawn:
        show.render(show.to_dot(sched, tree, deps), fmt, path)
        print(f"wrote {path}", file=sys.stderr)
    elif path:
        print(f"polyopt: graphviz's `dot` is not on PATH: {path} not written; the text form "
              f"follows", file=sys.stderr)
    if args.dot:
        print(show.to_dot(sched, tree, deps), end="")
    if args.text or not (drawn or args.dot):
        parts = ([show.tree_text(sched)] if tree else []) + ([show.deps_text(sched)] if deps
                                                             else [])
        print("\n\n".join(parts))
    return 0


# The benchmarks: each module has ``add_arguments(parser)`` and ``run(args) -> int``.
BENCHMARKS: dict[str, tuple[Any, str]] = {
    "conv": (conv, "per-layer convolution benchmark (ResNet-50, MobileNetV2)"),
    "contention": (contention, "kernels timed quiet and next to a CPU-bound competitor"),
    "suite": (suite, "40 operators in six families against numpy, torch and TVM"),
    "ops": (ops, "eleven operators against program order, numpy, torch and TVM"),
    "latency": (latency, "import, first result and call overhead of fresh processes"),
    "memory": (memory, "RSS and mapped files of a long-running process"),
    "compile-time": (compile_time, "compile-time reproducers, each in a child under limits"),
    "formulations": (formulations, "equivalent formulations of the bundled stencils against "
                     "program order and numpy"),
    "einsum-paths": (einsum_paths, "multi-operand einsum along a path against numpy's"),
    "gpu": (gpu, "CUDA matmul and conv layers against torch on an NVIDIA GPU (PyCUDA)"),
    "model": (model, "whole models (ResNet-50, MobileNetV2, BERT-base) through eager, "
              "Inductor and torch.compile(backend=\"polyopt\")"),
}


def _bench_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    b = sub.add_parser("bench", help="benchmarks against other systems")
    kinds = b.add_subparsers(dest="benchmark", required=True)
    for name, (module, summary) in BENCHMARKS.items():
        k = kinds.add_parser(name, help=summary, description=module.__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(k)
        k.set_defaults(func=module.run)


def _tune_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    t = sub.add_parser("tune", help="search a definition's schedules at given sizes and "
                       "record them in the tuning database (polyopt.compile then uses the best)")
    t.add_argument("file", help="a .tc file, or the name of a kernel in polyopt.kernels")
    t.add_argument("--name", help="the def to tune (needed when the file has several)")
    t.add_argument("--sizes", required=True, help="size bindings, e.g. M=1024,N=1024,K=1024")
    t.add_argument("--trials", type=int, default=64, help="measurements (default 64)")
    t.add_argument("--strategy", default="model", choices=("random", "genetic", "model"))
    t.add_argument("--target", default="c", choices=("c", "cuda", "cuda-emulated"))
    t.add_argument("--db", help="the database file (default: tuning.sqlite in the cache dir)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--repeat", type=int, default=5, help="timed calls per candidate")
    t.add_argument("--timeout", type=float, default=120.0, help="seconds per candidate")
    t.add_argument("--scheduler", help="a Dask scheduler address: measure on its workers")
    t.set_defaults(func=_tune)


def _tune(args: argparse.Namespace) -> int:
    executor = _dask_client(args.scheduler) if args.scheduler else None

    def progress(done: int, total: int, trial: Trial) -> None:
        bar = "#" * (30 * done // total)
        ms = f"{trial.result.best * 1e3:.4g} ms" if trial.result.status == "ok" else \
            trial.result.status
        print(f"\r[{bar:30}] {done}/{total}  last: {ms:12}", end="", file=sys.stderr,
              flush=True)

    result = tune(_read_source(args.file), args.name, sizes=parse_sizes(args.sizes),
                  target=args.target, trials=args.trials, strategy=args.strategy, db=args.db,
                  executor=executor, seed=args.seed, repeat=args.repeat,
                  timeout=args.timeout, progress=progress)
    print(file=sys.stderr)
    confirmed = {i: r for i, r in result.confirmed if r.status == "ok"}
    ranked = sorted(range(len(result.trials)), key=lambda i: result.trials[i].result.best)
    print("| rank | ms | confirmed ms | status | options |\n|---|---|---|---|---|")
    for rank, i in enumerate(ranked[:10], 1):
        t, again = result.trials[i], confirmed.get(i)
        print(f"| {rank} | {t.result.best * 1e3:.4g} | "
              f"{'-' if again is None else f'{again.best * 1e3:.4g}'} | {t.result.status} | "
              f"{t.options} |")
    print(result)
    return 0


def _dask_client(address: str) -> Any:
    try:
        from dask.distributed import Client
    except ImportError as e:
        raise OptionError(f"--scheduler needs dask.distributed (pip install "
                          f"'dask[distributed]'): {e}") from e
    return Client(address)


def _db_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    d = sub.add_parser("db", help="the autotuning database: list, show, export, import")
    ops = d.add_subparsers(dest="db_command", required=True)
    ops.add_parser("list", help="one line per key: def, target, shapes, records, best time")
    ops.add_parser("show", help="every record of one key").add_argument(
        "key", help="a key id from `polyopt db list`, or a unique prefix of one")
    ops.add_parser("export", help="every record as JSON lines").add_argument(
        "file", nargs="?", help="where to write (default: stdout)")
    ops.add_parser("import", help="add the records of an export").add_argument(
        "file", help="JSON lines written by `polyopt db export`")
    for p in ops.choices.values():
        p.add_argument("--db", help="the database file (default: tuning.sqlite in the cache "
                       "dir, $POLYOPT_CACHE_DIR or the user's)")
        p.set_defaults(func=_db)


def _db(args: argparse.Namespace) -> int:
    with Database(args.db) as db:
        if args.db_command == "list":
            summary = db.summary()  # a malformed record: one error line, no table
            print(f"{'key':12}  {'def':16} {'target':13} {'records':>7} {'best ms':>10}  "
                  f"{'last record':19}  shapes")
            for s in summary:
                shapes = " ".join("x".join(map(str, shape)) for shape in s.shapes)
                print(f"{s.key_id[:12]:12}  {s.def_name:16} {s.target:13} {s.records:7d} "
                      f"{s.best * 1e3:10.4f}  {s.last[:19]:19}  {shapes}")
        elif args.db_command == "show":
            key_id = db.find_key(args.key)
            for i, r in enumerate(db.records(key_id)):
                if i == 0:
                    print(f"key {key_id}: {r.key.as_dict()}")
                times = ", ".join(f"{t * 1e3:.4f}" for t in r.times)
                print(f"-- {r.created}  {r.status}  best {r.best * 1e3:.4f} ms  times [{times}] "
                      f"ms  options {r.options}{'  error: ' + r.error if r.error else ''}")
                print(r.schedule_json)
        elif args.db_command == "export" and args.file:
            with open(args.file, "w", encoding="utf-8") as f:
                print(f"exported {db.export(f)} records to {args.file}", file=sys.stderr)
        elif args.db_command == "export":
            db.export(sys.stdout)
        else:
            with open(args.file, encoding="utf-8") as f:
                print(f"imported {db.import_(f)} new records into {db.path}")
    return 0


def _machine_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = sub.add_parser("machine", help="the machine model schedules are made for; "
                       "--calibrate measures this host's memory system into its profile")
    m.add_argument("--calibrate", action="store_true",
                   help="measure the memory system (some 15 s, nothing else running) and "
                   "save it as this host's profile, which later compiles use")
    m.add_argument("--dry-run", action="store_true", help="with --calibrate: print, save nothing")
    m.set_defaults(func=_machine)


def _machine(args: argparse.Namespace) -> int:
    path = config.machine_profile()
    if args.calibrate:
        found = probe.calibrate(machine.unmeasured(), say=print)  # sizes from sysfs
        print(found.describe())
        if args.dry_run or path is None:
            print("not saved" + (" (POLYOPT_PROFILE=none)" if path is None else ""))
        else:
            machine.save_profile(path, found.fields, found.readings)
            print(f"saved {path}")
    where = "none (POLYOPT_PROFILE=none)" if path is None else \
        f"{path}{'' if path.exists() else ' (none yet: `polyopt machine --calibrate`)'}"
    print(f"profile: {where}")
    print(f"model: {machine.host().describe()}")
    print(f"fields: {machine.host().spec()}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a .tc file, or the name of a kernel in polyopt.kernels")
    p.add_argument("--name", help="the def to compile (needed when the file has several)")
    p.add_argument("--sizes", default="", help="size bindings, e.g. M=64,N=32,K=16")
    p.add_argument("--parametric", action="store_true", help="one size-generic kernel")


def parse_sizes(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip().lstrip("-").isdigit():
            raise OptionError(f"--sizes item {item!r} is not NAME=INTEGER")
        out[name.strip()] = int(value)
    return out


def _read_source(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        kernels = importlib.import_module("polyopt.kernels")  # installed from kernels/
        if path in kernels.names():
            return kernels.get(path)
        raise OptionError(f"no file {path!r}, and no kernel of that name in "
                          f"polyopt.kernels") from None


def _compile(args: argparse.Namespace) -> int:
    source = _read_source(args.file)
    kernel = api.compile(source, args.name, sizes=parse_sizes(args.sizes),
                         parametric=args.parametric)
    print(kernel.lowered().emit(args.emit))
    return 0


def _run(args: argparse.Namespace) -> int:
    source = _read_source(args.file)
    sizes = parse_sizes(args.sizes)
    kernel = api.compile(source, args.name, sizes=sizes, parametric=args.parametric)
    program = kernel.program
    rng = np.random.default_rng(args.seed)
    inputs = [_random(t, sizes, rng) for t in program.inputs]
    start = time.perf_counter()
    result = kernel(*inputs)
    first = time.perf_counter() - start
    times = []
    for _ in range(max(1, args.repeat)):
        start = time.perf_counter()
        kernel(*inputs)
        times.append(time.perf_counter() - start)
    print(f"{kernel.name}: first call {first * 1e3:.2f} ms (includes compiling), "
          f"median {np.median(times) * 1e3:.4f} ms over {len(times)} runs")
    if args.check:
        return _check(program, inputs, sizes, result)
    return 0


def _random(t: ir.Tensor, sizes: dict[str, int], rng: np.random.Generator) -> np.ndarray:
    try:
        shape = tuple(ir.extent_value(e, sizes) for e in t.shape)
    except Exception as e:  # an unbound size: say which sizes are needed
        raise OptionError(f"give every input size with --sizes (input {t.name} has extents "
                          f"{', '.join(t.shape)})") from e
    d = dtypes.DTYPES[t.dtype]
    if d.is_float:
        return rng.standard_normal(shape).astype(d.np)
    if d.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    # Small non-negative integers: valid as gather indices into any non-empty dimension.
    return rng.integers(0, 2, shape).astype(d.np)


def _check(program: ir.Program, inputs: list[np.ndarray], sizes: dict[str, int],
           result: object) -> int:
    got = result if isinstance(result, tuple) else (result,)
    ref = evaluate(program, inputs, sizes)
    worst = 0.0
    for t, g, r in zip(program.outputs, got, ref, strict=True):
        diff = float(np.linalg.norm(np.asarray(g, np.float64) - r))
        err = diff / max(float(np.linalg.norm(r)), 1e-30)
        worst = max(worst, err)
        print(f"  {t.name}: relative L2 error {err:.3e} against the float64 reference")
    tol = 1e-2 if any(t.dtype in ("float16", "bfloat16") for t in program.outputs) else 1e-4
    ok = worst <= tol
    print("check: OK" if ok else f"check: FAILED (tolerance {tol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
