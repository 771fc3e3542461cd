"""Loop marks: what a schedule says about a loop beyond its order of execution.

A ``Loop`` of a schedule tree carries a frozenset of marks, each a typed value:

- ``Tag``: a flag (``parallel``, ``parallel reduction`` (split-K: each thread accumulates
  a private copy of the one element the loop reduces into, combined at the end),
  ``vectorize``, ``unroll``, ``separate``, and the roles of
  a GPU block tile's loops);
- ``VectorLanes``: a vectorized loop's width, in lanes (the C printer's ``simdlen``);
- ``Bind``: the loop runs across a CUDA grid or block axis (``blockIdx.x``);
- ``GpuTile``: the loop is the row loop of a GPU block tile with a ``rows x cols``
  register tile per thread; ``GpuUnroll``: the tile's reduction loop is unrolled by a
  factor.

Marks are text only where a person reads them (a schedule's listing). The isl AST knows a
loop by an isl mark naming it (``loop <name>``): ``loop_mark`` writes that mark and
``marked_loop`` reads it back, the one place where the text is parsed (``marked_name``
reads a mark of a schedule tree written by hand: ``Schedule.from_isl``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

import islpy as isl

from polyopt.errors import ScheduleError


class Tag(enum.Enum):
    PARALLEL = "parallel"
    PARALLEL_REDUCTION = "parallel reduction"  # threads sum partial results, then combine
    VECTORIZE = "vectorize"
    UNROLL = "unroll"  # fully, by isl (a register tile's rows: by the printer)
    SEPARATE = "separate"  # isl separates the full iterations from the partial ones
    GPU_THREADS = "gpu.threads"  # a block tile's threads: the loops a tile maps itself
    GPU_TILE_COLS = "gpu.tile.cols"  # a block tile's column loop
    GPU_TILE_REDUCTION = "gpu.tile.reduction"  # a block tile's reduction loop
    GPU_TILE_GLOBAL = "gpu.tile.global"  # the block tile reads operands from global memory

    def __str__(self) -> str:
        return self.value


GPU_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
            "threadIdx.z")


@dataclass(frozen=True)
class Bind:
    """The loop's iterations run on CUDA axis ``axis`` (one of ``GPU_AXES``)."""
    axis: str

    def __post_init__(self) -> None:
        if self.axis not in GPU_AXES:
            raise ScheduleError(f"bind: unknown axis {self.axis!r}; valid: {', '.join(GPU_AXES)}")

    @property
    def kind(self) -> str:
        """``blockIdx`` or ``threadIdx``."""
        return self.axis.split(".")[0]

    @property
    def dim(self) -> str:
        """``x``, ``y`` or ``z``."""
        return self.axis.split(".")[1]

    @property
    def is_block(self) -> bool:
        return self.kind == "blockIdx"

    @property
    def is_thread(self) -> bool:
        return self.kind == "threadIdx"

    def __str__(self) -> str:
        return self.axis


@dataclass(frozen=True)
class GpuTile:
    """The row loop of a GPU block tile; each thread computes ``rows x cols`` outputs."""
    rows: int
    cols: int

    def __str__(self) -> str:
        return f"gpu.tile {self.rows}x{self.cols}"


@dataclass(frozen=True)
class GpuUnroll:
    """A GPU block tile's reduction loop, unrolled by ``factor``."""
    factor: int

    def __str__(self) -> str:
        return f"gpu.unroll {self.factor}"


@dataclass(frozen=True)
class VectorLanes:
    """A vectorized loop runs ``lanes`` iterations per vector (a power of two)."""
    lanes: int

    def __post_init__(self) -> None:
        if not valid_lanes(self.lanes):
            raise ScheduleError(f"vectorize: lanes must be a power of two from 2 to "
                                f"{MAX_LANES}, got {self.lanes!r}")

    def __str__(self) -> str:
        return f"{self.lanes} lanes"


MAX_LANES = 64  # a 512-bit register of bytes


def valid_lanes(lanes: object) -> bool:
    """Is ``lanes`` a vector width: a power of two from 2 to ``MAX_LANES``?"""
    return (isinstance(lanes, int) and not isinstance(lanes, bool)
            and 2 <= lanes <= MAX_LANES and lanes & (lanes - 1) == 0)

Mark = Tag | Bind | GpuTile | GpuUnroll | VectorLanes
Marks = frozenset[Mark]
NO_MARKS: Marks = frozenset()


def bind_of(marks: Iterable[Mark]) -> Bind | None:
    """The CUDA axis a loop is bound to (the first in ``GPU_AXES`` order), if any."""
    binds = sorted((m for m in marks if isinstance(m, Bind)), key=lambda b: b.axis)
    return binds[0] if binds else None


def gpu_tile_of(marks: Iterable[Mark]) -> GpuTile | None:
    return next((m for m in marks if isinstance(m, GpuTile)), None)


def gpu_unroll_of(marks: Iterable[Mark]) -> int | None:
    return next((m.factor for m in marks if isinstance(m, GpuUnroll)), None)


def lanes_of(marks: Iterable[Mark]) -> int | None:
    """A vectorized loop's width in lanes, if the schedule fixes one."""
    return next((m.lanes for m in marks if isinstance(m, VectorLanes)), None)


def listed(marks: Iterable[Mark]) -> str:
    """The marks as a person reads them, in a stable order."""
    return ", ".join(sorted(str(m) for m in marks))


_MARK_PREFIX = "loop "


def loop_mark(name: str) -> isl.Id:
    """The isl mark that names loop ``name`` in the AST."""
    return isl.Id(_MARK_PREFIX + name)


def marked_loop(node: isl.AstNode) -> str | None:
    """The loop a mark node of the isl AST names (None: not one of polyopt's loop marks)."""
    text = node.mark_get_id().get_name()
    return text[len(_MARK_PREFIX):] if text.startswith(_MARK_PREFIX) else None


_NAME = re.compile(r"[A-Za-z_]\w*")


def marked_name(mark: str) -> str | None:
    """The loop name an isl schedule tree's mark gives the band below it: the mark's name
    when it is an identifier, after ``loop `` if present (``loop_mark``'s); else None."""
    name = mark[len(_MARK_PREFIX):] if mark.startswith(_MARK_PREFIX) else mark
    return name if _NAME.fullmatch(name) else None
