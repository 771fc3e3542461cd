"""How many lanes a vector loop runs: the vector iterations a loop of ``trip`` iterations
costs at each width the machine offers, as the C compiler splits it.

GCC (12) vectorizes an ``omp simd`` loop of ``v`` lanes as a main loop of whole vectors,
one epilogue vector of ``v / 2`` lanes when that many iterations remain, and scalar code
for the rest; a read strided over a group with gaps (``2 * w + x``) keeps the last
iteration out of the vector loops, so they never read past the group. Seen in the
assembly of this machine's kernels (``-fopt-info-vec`` and ``objdump``):

- a row of 28 (avgpool): at 16 lanes 16 + 8 + 4 scalar, at 8 lanes 3 x 8 + 4;
- a stride-2 row of 64 (maxpool 2x2): at 16 lanes 3 x 16 + 8 + 8 scalar, at 8 lanes
  7 x 8 + 4 + 4 scalar.

A scalar remainder iteration costs what one vector iteration does, but for its calls: it
is the vector body one lane wide, the same instructions, with its selects as branches
(measured, avgpool 3x3 and maxpool 2x2 ran 2.1x and 1.5x slower at 16 lanes than at 8 in
one process, where these counts say 6 against 4 and 12 against 12). A builtin call costs
what ``polyopt.costmodel.calls`` measured at each width (libmvec's 8-lane tanhf is dearer a
vector than its 16-lane one, a scalar tanhf 3.6 times the 16-lane vector), so the width is
the one predicted fastest for the loop's body (``Split.cycles``). The printer writes the
chosen width as the loop's ``simdlen``, so the compiler's default width (256 bits on
AVX-512 hosts) does not decide it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Cost = Callable[[int], float]
"""Predicted cycles of one iteration of a loop's body at a width (1: a scalar iteration)."""


def _one_each(lanes: int) -> float:
    return 1.0


@dataclass(frozen=True)
class Split:
    """A loop of ``trip`` iterations at ``lanes`` lanes: whole vectors, the half-width
    epilogue (0 or 1) and the scalar remainder."""

    lanes: int
    vectors: int
    epilogue: int
    scalar: int

    @property
    def iterations(self) -> int:
        """Vector iterations, a scalar one counted as one (see the module docstring)."""
        return self.vectors + self.epilogue + self.scalar

    def cycles(self, cost: Cost = _one_each) -> float:
        """Predicted cycles of the loop: each part's iterations at its width's ``cost``
        (the default, one a vector iteration, gives ``iterations``)."""
        return (self.vectors * cost(self.lanes) + self.epilogue * cost(self.lanes // 2)
                + self.scalar * cost(1))

    def __str__(self) -> str:
        parts = [f"{self.vectors} x {self.lanes}"]
        if self.epilogue:
            parts.append(f"{self.lanes // 2}")
        if self.scalar:
            parts.append(f"{self.scalar} scalar")
        return " + ".join(parts)


def split(trip: int, lanes: int, gap: bool = False) -> Split:
    """How the compiler runs ``trip`` iterations at ``lanes`` lanes; ``gap``: a read strided
    over a group with gaps keeps the last iteration scalar."""
    keep = 1 if gap and trip > 0 else 0
    vectors = max(0, trip - keep) // lanes
    rest = trip - vectors * lanes
    half = lanes // 2
    epilogue = 1 if half >= 2 and rest - keep >= half else 0
    return Split(lanes, vectors, epilogue, rest - epilogue * half)


def candidates(register_lanes: int) -> tuple[int, ...]:
    """The widths a vector loop may run at: a whole register and half of one (the
    compiler's other vector width; narrower ones only fill a register's remainder)."""
    return tuple(v for v in (register_lanes, register_lanes // 2) if v >= 2) or (1,)


def choose(trip: int | None, register_lanes: int, gap: bool = False,
           cost: Cost = _one_each) -> tuple[Split, ...]:
    """Each candidate width's split of ``trip``, the best first: the fewest predicted
    cycles (``Split.cycles`` at ``cost``; by default the fewest iterations), the narrower on
    a tie (the wider must be predicted faster to be chosen). An unknown trip runs whole
    registers."""
    widths = candidates(register_lanes)
    if trip is None:
        return tuple(Split(v, 0, 0, 0) for v in widths)
    splits = [split(trip, v, gap) for v in widths]
    return tuple(sorted(splits, key=lambda s: (s.cycles(cost), s.lanes)))
