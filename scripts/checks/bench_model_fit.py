"""How close the cost model's predicted time is to the measured one, with the host's measured
memory system (its profile, ``polyopt machine --calibrate``) and without it (the default
machine's memory fields and sysfs's L3): the figure behind ``Machine.MEASURED``.

Each suite operator (``polyopt bench suite``) is compiled once, with the host's model as it is,
and its schedule priced under both machines (``order.schedule_estimate``: from cache when
its data fit the last level, else from memory) at the core's measured cycle, then timed
(median of ``--repeat`` batched calls). The schedule is the same for both prices; where the
profile changes decisions, ``polyopt.compile`` made this one with it.

    python3 scripts/checks/bench_model_fit.py --ops sum_axis0,transpose_2d,gelu
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

import polyopt
from polyopt import config
from polyopt.bench.measure import make_inputs, median_seconds
from polyopt.bench.suite_cases import all_cases
from polyopt.costmodel import machine as mm
from polyopt.pipeline.order import schedule_estimate
from polyopt.pipeline.policy import cpu_policy
from polyopt.runtime import probe


def predicted(kernel: polyopt.Kernel, model: mm.Machine, cycle: float) -> float | None:
    est = schedule_estimate(kernel.schedule, cpu_policy(model))
    if est is None:
        return None
    return (est.warm if est.warm is not None else est.cycles) * cycle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", help="comma-separated suite operators (default: every one)")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    model = mm.host()
    profile = config.machine_profile()
    if profile is None or not profile.exists():
        raise SystemExit("no profile: run `polyopt machine --calibrate` first")
    plain = mm.unmeasured()
    cycle = probe.cycle_seconds(model)
    wanted = set(args.ops.split(",")) if args.ops else None
    rng = np.random.default_rng(0)
    print(f"cycle {cycle * 1e9:.3f} ns; profile: {model.describe()}")
    print("| op | measured ms | predicted, profile | predicted, default | ratio, profile | "
          "ratio, default |\n|---|---|---|---|---|---|")
    errors: dict[str, list[float]] = {"profile": [], "default": []}
    for case in all_cases(False):
        if wanted is not None and case.op not in wanted:
            continue
        kernel = polyopt.compile(case.source, case.kernel, sizes=case.sizes,
                                 options={"tuned": False})
        inputs = make_inputs(case, rng)
        kernel(*inputs)
        took = median_seconds(lambda k=kernel, x=inputs: k(*x), args.repeat)
        got = {"profile": predicted(kernel, model, cycle), "default": predicted(kernel, plain,
                                                                                 cycle)}
        if None in got.values():
            continue
        ratio = {k: v / took for k, v in got.items() if v is not None}
        for k, r in ratio.items():
            errors[k].append(abs(math.log(r)))
        print(f"| {case.op} | {took * 1e3:.4g} | {got['profile'] * 1e3:.4g} | "
              f"{got['default'] * 1e3:.4g} | {ratio['profile']:.2f} | {ratio['default']:.2f} |")
    for k, e in errors.items():
        if e:
            print(f"{k}: geomean |log(predicted/measured)| -> factor "
                  f"{math.exp(statistics.mean(e)):.2f} over {len(e)} operators")


if __name__ == "__main__":
    main()
