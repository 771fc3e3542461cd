"""Decisions of the automatic CPU pipeline that a person or the autotuner may fix.

``options={"knobs": {...}}`` in ``polyopt.compile``; a knob left out (None) is decided by
the machine model as usual. Every knob only picks among schedules the pipeline builds with
checked verbs, so no value can make a schedule illegal: an impossible one is skipped, and
for the loop knobs (``order``, ``vector``, ``parallel``, ``split_k``) the schedule's notes
say which value was not honoured and that the model's choice stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from polyopt.errors import OptionError
from polyopt.schedules.marks import MAX_LANES, valid_lanes

# knob -> (type, lowest value, what it decides)
KNOBS: dict[str, tuple[type, int, str]] = {
    "register_tile": (bool, 0, "contractions: True takes the register tile (a GotoBLAS nest) "
                               "where one applies, False never (None: the one the cost model "
                               "predicts faster than the plain nest)"),
    "mr": (int, 1, "register-tile rows (unrolled and jammed)"),
    "nr": (int, 1, "register-tile columns (a multiple of the vector lanes)"),
    "kc": (int, 1, "reduction tile of a register-tiled nest (the packed panels' depth)"),
    "mc": (int, 0, "rows per L2 block of a register-tiled nest, whose column tiles then run "
                   "inside each block (0: no such level; None: the model's, when the "
                   "operand that moves with the rows overflows half of L2)"),
    "pack": (bool, 0, "pack both operands into panels (None: each when the model says it "
                      "pays, see pack_a and pack_b)"),
    "pack_a": (bool, 0, "pack the operand that moves with the register tile's rows, "
                        "A(m,k) -> A_pack(m/MR,k,m%MR) (None: pack, else the model)"),
    "pack_b": (bool, 0, "pack the operand that moves with its columns, B(k,n) -> "
                        "B_pack(n/NR,k,n%NR) (None: pack, else the model)"),
    "block": (int, 0, "channel block of convolution outputs (NCHW[block]c) when useful; "
                      "0: never block (None: the vector lanes)"),
    "cache_tile": (int, 0, "tile size for transposed accesses (0: never tile)"),
    "merge": (bool, 0, "merge two loops that every access walks as one run of memory into "
                       "one (a 1x1 convolution's h, w; polyopt.poly.merge): True where they "
                       "merge, False never (None: when the cost model predicts it faster)"),
    "rows_outer": (bool, 0, "register-tiled nests: row tiles outside column tiles (the "
                            "operand that moves with the rows stays in cache; None: the "
                            "model, rows outside when the output outweighs the operands)"),
    "order": (int, 0, "nests that are not register-tiled: the loop order of that rank among "
                      "the order model's candidates, cheapest predicted first (0: its best, "
                      "even under order_min_gain; None: the model's choice)"),
    "vector": (str, 0, "nests that are not register-tiled: the loop over this iterator (or "
                       "of this name) moved innermost and vectorized"),
    "lanes": (int, 2, "nests that are not register-tiled or time-tiled: their vector loops' "
                      "width, a power of two (None: each loop's from its trip count, "
                      "costmodel/lanes.py)"),
    "parallel": (str, 0, "the loop over this iterator (or of this name, or its outer tile "
                         "NAME_o) runs in parallel in each nest that has it; a reduction's "
                         "loop becomes a parallel reduction (split-K)"),
    "split_k": (bool, 0, "nests that reduce: True runs a reduction loop as a parallel "
                         "reduction (each thread sums a private copy) in place of the model's "
                         "parallel loop; False never splits (default: only when no loop of "
                         "independent iterations has enough iterations)"),
    "time_tile": (int, 0, "time-tiled stencil bands (pipeline/timetile.py): time steps per "
                          "tile (0: no time tiling)"),
    "space_tile": (int, 1, "time-tiled stencil bands: tile size of each space loop of the "
                           "band"),
    "row_tile": (int, 0, "time-tiled stencil bands: tile size of the band's innermost "
                         "(row) level (0: the row stays whole)"),
    "tile_shape": (str, 0, "time-tiled stencil bands: parallelogram (default), diamond "
                           "(concurrent start, pipeline/diamond.py; space_tile sizes its "
                           "faces) or none (no time tiling)"),
}

# The knobs of a register-tiled nest: setting one asks for the register tile (unless
# ``register_tile`` is False), as a person tuning its rows expects one.
REGISTER_KNOBS = frozenset({"mr", "nr", "kc", "mc", "pack", "pack_a", "pack_b", "rows_outer"})

# string knobs that take one of a few words
CHOICES: dict[str, tuple[str, ...]] = {"tile_shape": ("parallelogram", "diamond", "none")}


@dataclass(frozen=True)
class Knobs:
    register_tile: bool | None = None
    mr: int | None = None
    nr: int | None = None
    kc: int | None = None
    mc: int | None = None
    pack: bool | None = None
    pack_a: bool | None = None
    pack_b: bool | None = None
    block: int | None = None
    cache_tile: int | None = None
    merge: bool | None = None
    rows_outer: bool | None = None
    order: int | None = None
    vector: str | None = None
    lanes: int | None = None
    parallel: str | None = None
    split_k: bool | None = None
    time_tile: int | None = None
    space_tile: int | None = None
    row_tile: int | None = None
    tile_shape: str | None = None

    @staticmethod
    def from_options(value: Any) -> Knobs:
        if value is None:
            return Knobs()
        if isinstance(value, Knobs):
            return value
        if not isinstance(value, Mapping) or set(value) - set(KNOBS):
            valid = "; ".join(f"{k}: {v[2]}" for k, v in KNOBS.items())
            raise OptionError(f"option knobs must be a dict of {valid}; not {value!r}")
        for name, v in value.items():
            kind, low, _ = KNOBS[name]
            if not _valid(kind, low, v):
                raise OptionError(f"option knobs {name}={v!r}: expected {_expected(kind, low)}")
            if name == "lanes" and v is not None and not valid_lanes(v):
                raise OptionError(f"option knobs lanes={v!r}: expected a power of two from 2 "
                                  f"to {MAX_LANES}")
            if v is not None and name in CHOICES and v not in CHOICES[name]:
                raise OptionError(f"option knobs {name}={v!r}: expected one of "
                                  f"{', '.join(CHOICES[name])}")
        return Knobs(**dict(value))

    @property
    def register_tiled(self) -> bool | None:
        """True: take the register tile where one applies; False: never; None: the cost
        model's choice (``cpu._faster``)."""
        if self.register_tile is not None:
            return self.register_tile
        return True if any(getattr(self, k) is not None for k in REGISTER_KNOBS) else None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


def _valid(kind: type, low: int, v: Any) -> bool:
    if v is None:
        return True
    if kind is bool:
        return isinstance(v, bool)
    if kind is str:
        return isinstance(v, str) and v.isidentifier()
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _expected(kind: type, low: int) -> str:
    return {bool: "a bool", str: "a loop or iterator name"}.get(kind, f"an int >= {low}")


DEFAULT_KNOBS = Knobs()  # every decision the model's
