"""Timing several systems against each other in one process.

The benchmarks (``polyopt bench conv``, ``ops`` and ``suite``) time the same way: every system is
built and checked first, then timed in interleaved rounds, each system in turn (the order rotated by
one each round) after a pause, and its figure is the median of all its timed calls. On this 2-core
VM a block of calls of the same kernel varied 0.7-1.4x between blocks seconds apart while calls
within a block agreed, so one block per system decided a ratio by chance; interleaving hits every
system alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

__all__ = ["BATCH_S", "describe", "sample_seconds", "time_rounds"]

# Calls shorter than this are timed in back-to-back batches this long, per call: a
# microsecond call timed alone measures the timer and the caches the pause cooled.
BATCH_S = 1e-3


def describe(exc: BaseException) -> str:
    """One line: the exception type and the first line of its message."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first}"[:300]


def sample_seconds(fn: Callable[[], object], repeat: int, batch_s: float = BATCH_S
                   ) -> list[float]:
    """``repeat`` per-call times (s) after an untimed call; a call shorter than ``batch_s``
    is timed in batches of back-to-back calls that long."""
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    batch = 1 if once >= batch_s else max(1, min(10_000, int(batch_s / max(once, 1e-7))))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - start) / batch)
    return times


def time_rounds(samplers: Mapping[str, Callable[[], list[float]]], rounds: int,
                settle: float) -> tuple[dict[str, list[float]], dict[str, str]]:
    """(every sample, why a system failed) per system: ``rounds`` rounds, each system in
    turn, in an order rotated by one each round, a ``settle`` pause and then one call of
    its sampler. The pause lets the previous system's spinning threads sleep (libgomp spins
    for milliseconds after a parallel region; a TVM call right after a polyopt call took
    5 ms, not 0.14). A system that raises is dropped with its reason; the others go on."""
    names = list(samplers)
    times: dict[str, list[float]] = {name: [] for name in names}
    failed: dict[str, str] = {}
    for i in range(rounds):
        shift = i % max(1, len(names))
        for name in names[shift:] + names[:shift]:
            if name in failed:
                continue
            time.sleep(settle)
            try:
                times[name] += samplers[name]()
            except Exception as exc:  # this system fails, the others go on
                failed[name] = describe(exc)
    return times, failed
