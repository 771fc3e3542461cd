"""Analytic features of a CPU configuration, computed with isl on the definition's largest
contraction: what the cost model sees besides the knob values.

For a register tile of ``mr`` rows, ``nr`` columns and a reduction tile of ``kc`` (the
knobs, or the machine model's values), each tensor's footprint is the number of distinct
elements its accesses touch over that box of iterations (isl counts the image of the box
under the access relation, so halos, strides and broadcasts come out exact). The features:
the register tile's operand bytes over L1, the panel bytes (``kc`` deep, all columns of a
row tile) over L2, accumulators over vector registers, the stride of each operand along the
vector lanes (the column index), and the number of tiles per core (parallel slack).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import islpy as isl

from polyopt import ir, lang
from polyopt.poly import build_poly
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.schedule.machine import Machine, host
from polyopt.tune.space import Config

N_FEATURES = 6


class Footprints:
    """The contraction of a definition at fixed sizes, ready to measure tiles of it."""

    def __init__(self, source: str, name: str | None, sizes: Mapping[str, int],
                 machine: Machine | None = None) -> None:
        program = lang.build_program(source, name, sizes)
        self.machine = machine or host()
        self.pp: PolyProgram = build_poly(program, borders=False)
        self.stmt = _largest_contraction(self.pp)
        self.program = program

    @functools.cache  # noqa: B019 -- one per tuning run, configurations repeat
    def features(self, mr: int, nr: int, kc: int) -> tuple[float, ...]:
        s, m = self.stmt, self.machine
        if s is None:
            return (0.0,) * N_FEATURES
        lanes = max(1, m.vector_bytes // 4)
        row, col, red = self._roles()
        elem = 4
        tile = self._bytes({row: mr, col: nr, red: kc}) * elem
        panel = self._bytes({row: mr, col: self._extent(col), red: kc}) * elem
        accs = mr * max(1, math.ceil(nr / lanes))
        strided = sum(1 for r in s.reads if _stride(r.read, col) not in (0, 1))
        tiles = math.ceil(self._extent(row) / mr) * math.ceil(self._extent(col) / nr)
        return (tile / m.l1d_bytes, panel / m.l2_bytes, accs / m.vector_registers,
                float(accs + math.ceil(nr / lanes) + 1 > m.vector_registers), float(strided),
                math.log2(max(1.0, tiles / m.cores)))

    def of(self, config: Config) -> tuple[float, ...]:
        lanes = max(1, self.machine.vector_bytes // 4)
        return self.features(config.get("mr") or 14, config.get("nr") or 2 * lanes,
                             config.get("kc") or 88)

    def _roles(self) -> tuple[str | None, str | None, str | None]:
        """(row, column, reduction), as the CPU pipeline picks them: the output's last
        index is the column; the row is the output index most operands do not move with
        (then the longest); the reduction is the longest."""
        s = self.stmt
        assert s is not None
        lhs, reds = s.stmt.lhs, s.stmt.reduction_iters
        row = max(lhs[:-1], key=lambda it: (sum(1 for r in s.reads if not r.read.uses(it)),
                                            self._extent(it)), default=None)
        red = max(reds, key=self._extent, default=None)
        return row, lhs[-1], red

    def _extent(self, it: str | None) -> int:
        if it is None or self.stmt is None:
            return 1
        k = self.stmt.iters.index(it)
        dom = self.stmt.domain
        lo, hi = dom.dim_min_val(k), dom.dim_max_val(k)
        return int(hi.to_python()) - int(lo.to_python()) + 1 if hi.is_int() else 1

    def _bytes(self, box: Mapping[str | None, int]) -> int:
        """Distinct elements the operands touch over ``box`` (iterations from the domain's
        start; iterators not in the box fixed at their first value)."""
        s = self.stmt
        assert s is not None
        dom = s.domain
        for k, it in enumerate(s.iters):
            lo = int(dom.dim_min_val(k).to_python())
            size = max(1, box.get(it, 1))
            dom = dom.lower_bound_val(isl.dim_type.set, k, isl.Val(lo)).upper_bound_val(
                isl.dim_type.set, k, isl.Val(lo + size - 1))
        total = 0
        for r in s.reads:
            image = r.relation.intersect_domain(dom).range()
            count = image.count_val()
            total += int(count.to_python()) if count.is_int() else 0
        return total


def _largest_contraction(pp: PolyProgram) -> PolyStmt | None:
    best: PolyStmt | None = None
    best_n = -1
    for s in pp.stmts:
        if s.kind != "update" or s.stmt.op != "+" or not s.stmt.reduction_iters or \
                len(s.stmt.lhs) < 2:
            continue
        n = s.domain.count_val()
        size = int(n.to_python()) if n.is_int() else 0
        if size > best_n:
            best, best_n = s, size
    return best


def _stride(read: ir.Read, it: str | None) -> int:
    """How a read moves along ``it``: 0 not at all (a broadcast), 1 with unit stride, 2
    scaled in its last dim (a strided convolution), 3 along another dim (transposed)."""
    if it is None or not read.indices or not read.uses(it):
        return 0
    last = read.indices[-1]
    if isinstance(last, ir.Var) and last.name == it:
        return 1
    in_last = any(isinstance(v, ir.Var) and v.name == it for v in last.walk())
    return 2 if in_last else 3
