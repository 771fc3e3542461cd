"""How well does each cost model rank schedules it has not seen? Measured offline on the
tuning databases of a study run (``scripts/studies/tuning_study.py --keep-dbs DIR``).

For each kernel, every successfully measured configuration of every strategy's run (one per
distinct configuration, its best time) is a sample. Each of ``--splits`` random splits fits
a model on ``--train`` samples and ranks the others; reported per model and kernel:

- rho: Spearman's rank correlation of predicted and measured times on the held-out samples;
- top-5: the best measured time among the model's 5 top-ranked held-out samples over the best
  held-out time (1.00: the model's first five picks contain the best; what a search that
  measures the model's top few gets).

Models: polyopt's two cost-model learners (``polyopt.tuning.search.CostModel``: ridge
regression, and gradient-boosted trees when XGBoost is installed), each on the knob encoding
alone and with the isl features (``polyopt.tuning.features``).

    python3 scripts/checks/cost_model_eval.py --dbdir DIR [--train 32] [--splits 50]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from polyopt import kernels as library
from polyopt.bench.layers import scaled, select
from polyopt.bench.peers import polyopt_definition

Model = Callable[[list[dict[str, Any]], list[float], list[dict[str, Any]]], list[float]]


@dataclass(frozen=True)
class Kernel:
    """A kernel of the study as ``scripts/studies/tuning_study.py`` defines it (its full
    sizes: matmul 1024^3, ResNet-50 conv layers unscaled); ``name`` names its databases."""

    name: str
    source: str
    def_name: str
    sizes: dict[str, int]


def study_kernel(name: str) -> Kernel:
    if name == "matmul":
        return Kernel(name, library.source("matmul"), "matmul", {"M": 1024, "N": 1024,
                                                                  "K": 1024})
    if name.startswith("conv") and name[4:].isdigit():
        def_name, source, sizes = polyopt_definition(scaled(select("resnet50", name[4:])[0], 1))
        return Kernel(name, source, def_name, {**sizes, "N": 1})
    raise SystemExit(f"--kernels: {name!r} is neither matmul nor conv<N> (N a ResNet-50 "
                     "layer number, 1-23)")


def samples(kernel: Any, dbdir: Path) -> tuple[Any, list[dict[str, Any]], list[float]]:
    """(space, configurations, log seconds) of every ok record of the kernel's runs."""
    from polyopt.tuning import Database
    from polyopt.tuning.space import space_for
    from polyopt.tuning.tuner import config_of

    space = space_for(kernel.source, kernel.def_name, kernel.sizes, "c")
    best: dict[str, tuple[dict[str, Any], float]] = {}
    for path in sorted(dbdir.glob(f"{kernel.name}-*.sqlite")):
        with Database(path) as db:
            for rec in db.records():
                if rec.status != "ok" or not rec.times:
                    continue
                config = config_of(space, rec.options)
                key = repr(sorted(config.items()))
                t = min(rec.times)
                if key not in best or t < best[key][1]:
                    best[key] = (config, t)
    configs = [c for c, _ in best.values()]
    return space, configs, [math.log(t) for _, t in best.values()]


def learned(space: Any, extra: Any, learner: str) -> Model | None:
    """polyopt's CostModel with ``learner`` (None: XGBoost is not installed)."""
    from polyopt.tuning.search import CostModel

    if learner == "boosted" and importlib.util.find_spec("xgboost") is None:
        return None

    def fit_predict(train: list[dict[str, Any]], y: list[float],
                    test: list[dict[str, Any]]) -> list[float]:
        model = CostModel.fit(space, [(c, math.exp(t)) for c, t in zip(train, y, strict=True)],
                              extra=extra, learner=learner)
        return model.predict_many(test)

    return fit_predict


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def evaluate(model: Model, configs: list[dict[str, Any]], y: list[float], train: int,
             splits: int, seed: int) -> tuple[float, float]:
    rng = random.Random(seed)
    rhos, tops = [], []
    for _ in range(splits):
        idx = list(range(len(configs)))
        rng.shuffle(idx)
        tr, te = idx[:train], idx[train:]
        pred = model([configs[i] for i in tr], [y[i] for i in tr], [configs[i] for i in te])
        truth = [y[i] for i in te]
        rhos.append(spearman(pred, truth))
        picks = sorted(range(len(te)), key=lambda j: pred[j])[:5]
        tops.append(math.exp(min(truth[j] for j in picks) - min(truth)))
    return statistics.median(rhos), statistics.median(tops)


def main(argv: Sequence[str] | None = None) -> int:
    from polyopt.tuning.features import Footprints

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dbdir", required=True, type=Path)
    p.add_argument("--kernels", default="matmul,conv3,conv11,conv17")
    p.add_argument("--train", type=int, default=32)
    p.add_argument("--splits", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(f"| kernel | samples | model | rho (median of {args.splits}) | top-5 / best |")
    print("|---|---|---|---|---|")
    for kernel in [study_kernel(k.strip()) for k in args.kernels.split(",") if k.strip()]:
        space, configs, y = samples(kernel, args.dbdir)
        if len(configs) <= args.train + 5:
            print(f"| {kernel.name} | {len(configs)} | too few samples | - | - |")
            continue
        fp = Footprints(kernel.source, kernel.def_name, kernel.sizes)
        models = {f"{learner}, {inputs}": learned(space, extra, learner)
                  for learner in ("ridge", "boosted")
                  for inputs, extra in (("knobs", None), ("knobs + isl", fp.of))}
        for name, model in models.items():
            if model is None:
                continue
            rho, top = evaluate(model, configs, y, args.train, args.splits, args.seed)
            print(f"| {kernel.name} | {len(configs)} | {name} | {rho:.2f} | {top:.3f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
