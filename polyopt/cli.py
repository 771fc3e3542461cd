"""The ``polyopt`` command line: compile a definition and print any stage, or run it."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence

import numpy as np

from polyopt import api, dtypes, ir
from polyopt.errors import OptionError, PolyoptError

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
    _bench_parser(sub)
    return p


def _bench_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from polyopt.bench import conv  # imports neither torch nor TVM

    b = sub.add_parser("bench", help="benchmarks against other systems")
    kinds = b.add_subparsers(dest="benchmark", required=True)
    c = kinds.add_parser("conv", help="per-layer convolution benchmark (ResNet-50, MobileNetV2)",
                         description=conv.__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    conv.add_arguments(c)
    c.set_defaults(func=_bench_conv)


def _bench_conv(args: argparse.Namespace) -> int:
    from polyopt.bench import conv

    return conv.run(args)


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
    program = kernel.lowered().program
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
    from polyopt.runtime.interp import evaluate
    got = result if isinstance(result, tuple) else (result,)
    ref = evaluate(program, inputs, sizes)
    worst = 0.0
    for t, g, r in zip(program.outputs, got, ref, strict=True):
        diff = float(np.linalg.norm(np.asarray(g, np.float64) - r))
        err = diff / max(float(np.linalg.norm(r)), 1e-30)
        worst = max(worst, err)
        print(f"  {t.name}: relative L2 error {err:.3e} against the float64 reference")
    tol = 1e-2 if any(t.dtype == "float16" for t in program.outputs) else 1e-4
    ok = worst <= tol
    print("check: OK" if ok else f"check: FAILED (tolerance {tol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
