"""What CUDA kernels need at a call, whether they run on a GPU or in the emulator: the
launch shapes at the call's sizes, and the ``err`` report of a data-dependent index that
fell outside its tensor (the same one the C kernels give)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from polyopt.codegen.contract import KernelSource, Launch
from polyopt.errors import BoundsError


class LaunchPlan:
    """The kernels of one CUDA ``KernelSource`` in order, with their launch shapes."""

    def __init__(self, source: KernelSource) -> None:
        self.source = source
        self.sizes = tuple(d for d in source.dims if "." not in d)

    @staticmethod
    def dims_array(dims: Sequence[int]) -> tuple[int, ...]:
        return tuple(int(d) for d in dims)

    def launches(self, dims: Sequence[int]) -> Iterator[tuple[Launch, tuple[int, ...],
                                                              tuple[int, ...]]]:
        """(launch, grid, block) for each kernel with work at these ``dims``."""
        sizes = dict(zip(self.sizes, dims, strict=False))
        for launch in self.source.launches:
            grid, block = launch.shape(sizes)
            if all(grid) and all(block):
                yield launch, grid, block

    def scalar_args(self, dims: Sequence[int]) -> list[int]:
        """The ``dims`` entries a size-generic kernel takes by value (none when specialized)."""
        return [] if self.source.specialized else [int(d) for d in dims]

    def check(self, err: Any) -> None:
        """Raise the ``BoundsError`` a kernel reported through ``err`` (four longs)."""
        if not err[0]:
            return
        gathers = self.source.gathers
        what = gathers[int(err[1])] if int(err[1]) < len(gathers) else "a read"
        raise BoundsError(
            f"data-dependent index out of range in def '{self.source.name}': {what} "
            f"computed index {int(err[2])} in dim {int(err[3])}, outside the tensor's extent")
