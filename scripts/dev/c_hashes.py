"""The generated C of a corpus, hashed: does a change leave polyopt's output unchanged?

Lowers (no C compiler, no run) every library kernel at each shape its tests use (and the
variants they check), every operator of the benchmark suite at its benchmark sizes, and
every ResNet-50 and MobileNetV2 layer as ``polyopt bench conv`` compiles it, with a cold
private cache, and writes one line per case: its name and the SHA-256 of its C source.

    python3 scripts/dev/c_hashes.py --out /tmp/now.txt [--sources DIR]
    PYTHONPATH=/tmp/main-tree python3 /tmp/main-tree/scripts/dev/c_hashes.py --out /tmp/main.txt
    diff /tmp/main.txt /tmp/now.txt

``--sources DIR`` also keeps each case's C (``DIR/<case>.c``) to diff a changed case;
``--only PREFIX`` keeps the cases whose name starts with it (kernels:, suite:, layer:).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
Lower = Callable[[], str]


def kernel_cases() -> Iterator[tuple[str, Lower]]:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import polyopt
    from tests.kernels import test_kernels as tk

    for label, case in [*tk.REFERENCES.items(), *tk.VARIANTS.items()]:
        for k, shape in enumerate(case.shapes):
            sizes = shape if case.bind else (case.sizes or {})

            def lower(case=case, shape=shape, sizes=sizes) -> str:
                src = tk._source(case, shape)
                kernel = polyopt.compile(src, case.kernel, sizes=dict(sizes) or None)
                return str(kernel.lowered().source)
            yield f"kernels:{label}:{k}", lower


def suite_cases() -> Iterator[tuple[str, Lower]]:
    import polyopt
    from polyopt.bench import suite_cases

    for case in suite_cases.all_cases(quick=False):
        def lower(case=case) -> str:
            kernel = polyopt.compile(case.source, case.kernel, sizes=case.sizes)
            return str(kernel.lowered().source)
        yield f"suite:{case.op}:{case.shape}", lower


def layer_cases() -> Iterator[tuple[str, Lower]]:
    import polyopt
    from polyopt.bench.layers import MODELS
    from polyopt.bench.peers import polyopt_definition

    for model, layers in MODELS.items():
        for k, layer in enumerate(layers):
            def lower(layer=layer) -> str:
                name, src, sizes = polyopt_definition(layer)
                sizes["N"] = 1
                return str(polyopt.compile(src, name, sizes=sizes).lowered().source)
            yield f"layer:{model}:{k}", lower


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="file for the 'case hash' lines")
    ap.add_argument("--sources", help="also write each case's C to this folder")
    ap.add_argument("--only", default="", help="cases whose name starts with this")
    args = ap.parse_args(argv)
    os.environ["POLYOPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="polyopt-hashes-")
    warnings.simplefilter("ignore")
    lines = []
    for gen in (kernel_cases, suite_cases, layer_cases):
        for name, lower in gen():
            if not name.startswith(args.only):
                continue
            try:
                text = lower()
            except Exception as e:  # a refusal is part of the output too
                text = f"error: {type(e).__name__}: {e}"
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
            lines.append(f"{name} {digest}")
            if args.sources:
                safe = name.replace("/", "_").replace(" ", "_")
                Path(args.sources).mkdir(parents=True, exist_ok=True)
                (Path(args.sources) / f"{safe}.c").write_text(text)
            print(lines[-1], flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
