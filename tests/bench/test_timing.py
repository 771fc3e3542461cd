"""The shared timing loop: batched samples and interleaved rounds."""
from __future__ import annotations

from collections.abc import Callable

from polyopt.bench import timing


def test_short_calls_are_sampled_in_batches_per_call() -> None:
    calls: list[int] = []
    times = timing.sample_seconds(lambda: calls.append(1), repeat=3, batch_s=1e-3)
    assert len(times) == 3 and all(t < 1e-3 for t in times)
    assert len(calls) > 4  # an untimed call, then batches of more than one call


def test_rounds_rotate_and_keep_every_sample() -> None:
    log: list[str] = []

    def sampler(name: str) -> Callable[[], list[float]]:
        def sample() -> list[float]:
            log.append(name)
            return [1.0]
        return sample

    times, failed = timing.time_rounds({s: sampler(s) for s in "ab"}, rounds=2, settle=0.0)
    assert log == ["a", "b", "b", "a"] and times == {"a": [1.0, 1.0], "b": [1.0, 1.0]}
    assert not failed


def test_a_raising_sampler_is_reported_once() -> None:
    def broken() -> list[float]:
        raise RuntimeError("lost the device\nmore")
    times, failed = timing.time_rounds({"x": broken, "y": lambda: [2.0]}, rounds=3, settle=0.0)
    assert failed == {"x": "RuntimeError: lost the device"} and times["y"] == [2.0] * 3
