"""Caches kept within a bound: what a long-lived kernel remembers per shape (call plans,
scratch, variants) or per set of constants (``held``) must not grow with every new one."""

from __future__ import annotations

from typing import Any


def bounded_put(cache: dict[Any, Any], key: Any, value: Any, most: int) -> None:
    """``cache[key] = value``, the oldest entries dropped to keep at most ``most``."""
    cache.pop(key, None)
    for old in list(cache)[:max(0, len(cache) - most + 1)]:  # a copy: threads may share it
        cache.pop(old, None)
    cache[key] = value
