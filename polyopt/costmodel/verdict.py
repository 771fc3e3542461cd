"""Which of two predictions wins: the one comparison behind every choice the CPU pipeline
makes between candidates (a layout, merged loops, a register tile or a plain nest, a
register tile's rows, a loop order), returning its verdict and what decided it.

``compare`` weighs two estimates in the regime they share: from cache when both nests'
data fit the last level (``Estimate.warm``: the roofline would charge a copy a second pass
from memory although it is read back from cache); when both wait on memory, with their
cores' own work added (the roofline's max hides it, and the one whose cores do less
overlaps memory better: a blur 3x3 over 4096^2 past an 84 MiB last level took 23 rows, its
tap not unrolled, on a 0.6% smaller prediction than 21 rows', and ran 22 ms against 12);
at the same cycles (one stream, summed in two orders) by their cores' work; else by cycles.
``clear_gain`` is the stricter rule for leaving a loop order as it is: a margin on cycles,
or no more cycles and the margin on arithmetic, or the margin on cycles from cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from polyopt.costmodel.cost import Estimate


@dataclass(frozen=True)
class Verdict:
    order: int  # < 0: the first is predicted faster; 0: a tie; > 0: the second is
    basis: str  # what was compared
    first: str  # each prediction, as the schedule's notes print it
    second: str

    @property
    def first_no_slower(self) -> bool:
        return self.order <= 0


def compare(first: Estimate, second: Estimate) -> Verdict:
    """``first`` against ``second``, in the regime they share (see the module's doc)."""
    if first.warm is not None and second.warm is not None:
        return _verdict(first.warm, second.warm, "cycles from cache",
                        f"{first.warm:.3g} cycles from cache",
                        f"{second.warm:.3g} cycles from cache")
    if _waits(first) and _waits(second):
        return _verdict(first.cycles + first.core, second.cycles + second.core,
                        "cycles from memory and the cores' own work", first.describe(),
                        second.describe())
    if math.isclose(first.cycles, second.cycles, rel_tol=1e-9):
        return _verdict(first.core, second.core, "the cores' own work at the same cycles",
                        first.describe(), second.describe())
    return _verdict(first.cycles, second.cycles, "cycles", first.describe(),
                    second.describe())


def clear_gain(new: Estimate, old: Estimate, margin: float) -> Verdict:
    """Does ``new`` beat ``old`` by ``margin`` (order < 0): that many times fewer cycles, or
    no more cycles and that many times less arithmetic? The second for nests the roofline
    calls bound by memory: it counts their data as coming from memory each call, while a
    kernel called on data already in cache runs at the speed of its arithmetic (UNet's 2x2
    max pool of 8 MB: the same cycles either way, but 6.4x the compute with the window
    innermost). Or the margin from cache, where both nests' data fit the last level: a
    column sum's init split from it (a few more lines written) lets the rows run outside
    the vector loop (256 x 1024: 0.10 ms with the column innermost, torch 0.018)."""
    texts = new.describe(), old.describe()
    if new.cycles * margin <= old.cycles:
        return Verdict(-1, f"cycles by {margin}x", *texts)
    if new.cycles <= old.cycles and new.compute * margin <= old.compute:
        return Verdict(-1, f"arithmetic by {margin}x at no more cycles", *texts)
    if new.warm is not None and old.warm is not None and new.warm * margin <= old.warm:
        return Verdict(-1, f"cycles from cache by {margin}x", *texts)
    return Verdict(1, f"no gain of {margin}x", *texts)


def _verdict(a: float, b: float, basis: str, first: str, second: str) -> Verdict:
    return Verdict((a > b) - (a < b), basis, first, second)


def _waits(e: Estimate) -> bool:
    """Is ``e`` from memory, its cores' own time under the whole (they wait on memory)?"""
    return e.warm is None and e.core < e.cycles
