"""What code generation hands the runtime: the generated source and how to call it.

Every target's function has one calling convention::

    int polyopt_<def>(void **bufs, const long *dims, long *err)

``bufs`` holds the tensors (inputs, outputs, locals in declaration order); ``dims`` holds the
sizes (``KernelSource.dims`` names each entry) and every tensor extent; ``err`` receives a
run-time error (a data-dependent index out of range): code, gather id, value, dim. A CUDA
source holds one kernel per top-level nest, each launched as its ``Launch`` says.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl

# CUDA's launch limits: gridDim.x up to 2^31 - 1, y and z up to 65535 (grid-stride loops
# cover any rest).
GRID_LIMITS = (2**31 - 1, 65535, 65535)


@dataclass(frozen=True)
class KernelSource:
    """Generated code and what a runtime needs to call it."""

    name: str  # the def
    symbol: str  # the C function
    text: str
    buffers: tuple[str, ...]  # tensor names, in bufs[] order
    dims: tuple[str, ...]  # dims[] entries: size names, then "T.d" for each tensor dim
    gathers: tuple[str, ...]  # error id → the checked read, for run-time messages
    specialized: bool
    target: str = "c"
    slices: tuple[str, ...] = ()  # locals the kernel keeps as per-iteration slices (unused)
    launches: tuple[Launch, ...] = ()  # CUDA: one per kernel, in launch order
    roles: tuple[str, ...] = ()  # per buffer: "input", "output" or "local"
    # packed locals a partial register tile reads past the end of (and discards): the
    # elements to allocate beyond each, so no read leaves the allocation
    tails: tuple[tuple[str, int], ...] = ()
    # the function that makes the locals ``held`` (copies of constant inputs) when the
    # constants are new; the kernel's own function reads them (``schedules.constants``)
    once: str | None = None
    held: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Launch:
    """One kernel of a CUDA ``KernelSource`` and its launch shape, x first. The extents are
    isl piecewise affine text over the sizes (``grid_c``/``block_c``: the same as C, for
    people); ``threads`` bounds the block for every size (``__launch_bounds__``)."""

    symbol: str
    grid: tuple[str, str, str]  # isl text
    block: tuple[str, str, str]
    grid_c: tuple[str, str, str]
    block_c: tuple[str, str, str]
    threads: int | None
    grid_cap: tuple[int, int, int] = GRID_LIMITS  # grid-stride loops cover the rest

    def shape(self, sizes: Mapping[str, int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(grid, block) at ``sizes``; a zero extent means there is nothing to run."""
        grid = tuple(min(evaluate(g, sizes), lim, cap) for g, lim, cap in zip(
            self.grid, GRID_LIMITS, self.grid_cap, strict=True))
        return grid, tuple(evaluate(b, sizes) for b in self.block)

    def describe(self) -> dict[str, object]:
        return {"kernel": self.symbol, "grid": self.grid_c, "block": self.block_c}


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> isl.PwAff:
    return isl.PwAff(text)


def evaluate(text: str, sizes: Mapping[str, int]) -> int:
    """A launch extent at ``sizes``; 0 where it is undefined (no instance runs)."""
    pa = _parsed(text)
    space = pa.get_domain_space()
    point = isl.Point.zero(space)
    for i in range(space.dim(isl.dim_type.param)):
        name = str(space.get_dim_name(isl.dim_type.param, i))
        point = point.set_coordinate_val(isl.dim_type.param, i, isl.Val(int(sizes[name])))
    value = pa.eval(point)
    return 0 if value.is_nan() else max(0, int(value.to_python()))
