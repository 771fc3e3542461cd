"""A memo keyed by the identities of objects that do not compare (isl's)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Memo(Generic[T]):
    """Values keyed by the identities of the objects they are made from (and a hashable
    extra). Each entry holds its key objects, so their ids cannot be reused while it lives;
    past ``limit`` entries the memo starts again empty."""

    def __init__(self, limit: int) -> None:
        self._entries: dict[tuple[tuple[int, ...], Hashable], tuple[tuple[Any, ...], T]] = {}
        self._limit = limit

    def get(self, objects: tuple[Any, ...], extra: Hashable, make: Callable[[], T]) -> T:
        key = (tuple(map(id, objects)), extra)
        hit = self._entries.get(key)
        if hit is not None:
            return hit[1]
        if len(self._entries) >= self._limit:
            self._entries.clear()
        value = make()
        self._entries[key] = (objects, value)
        return value
