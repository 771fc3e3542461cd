"""Analytic features of a configuration, computed with isl on the definition's largest
contraction: what the cost model sees besides the knob values.

CPU: for a register tile of ``mr`` rows, ``nr`` columns and a reduction tile of ``kc`` (the
knobs, or the machine model's blocking for the contraction's element type, as the pipeline
asks its ``CpuPolicy``), laid out as the pipeline lays it out (a convolution
blocked by channels has the channel block as its columns and the output row as its rows;
short reductions such as filter taps run inside the tile), each tensor's footprint is the
number of distinct elements its accesses touch over a box of iterations (isl counts the
image of the box under the access relation, so halos, strides and broadcasts come out
exact). The features:

- the register tile's operand bytes over L1, and the panel bytes (``kc`` deep, every row of
  a column tile, or of its L2 block of ``mc`` rows; every column of a row tile with
  ``rows_outer``) over L2;
- the reuse distance of each operand in the GotoBLAS loop order, in bytes touched between
  two uses of one of its elements, over L1 and L2 (the worst operand): an operand that does
  not move with the inner tiles (the rows, unless ``rows_outer``) is reused by the next
  inner tile (one tile apart), one that does not move with the outer tiles by the next outer
  tile (one panel apart);
- accumulators over vector registers, and whether the tile exceeds the scheduler's register
  budget (accumulators, one vector of each column and a broadcast: ``machine.py``'s fit
  rule; a tile may exceed it and still not spill, ``guided.spills``);
- vector-lane use: the useful fraction of the lanes over all column tiles (partial tiles);
- the stride of each operand along the columns (strided or transposed operands);
- parallel iterations: the row and column tiles per core;
- whether the output is blocked by channels, and the row tile over the rows.

The CPU cost model's prediction (``Predicted``): log2 of the cycles
``polyopt.costmodel.cost.estimate`` predicts for the configuration's schedule, summed over
its top-level nests; the model the pipeline decides with is thus one input of the tuner's.

CUDA: threads per block, the block tile's shared-memory bytes over the limit, registers per
thread (the accumulators) over a full block's share, blocks over the GPU's multiprocessors
and lane use of the tile; unset knobs take the mapping's defaults (``GpuPolicy.tile_for``)
and the limits come from the ``GpuModel`` (the device's, or the named default).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import islpy as isl

from polyopt import ir, lang
from polyopt.costmodel.cost import estimate, printing
from polyopt.costmodel.gpu_machine import GpuModel
from polyopt.costmodel.machine import Machine, host
from polyopt.costmodel.strides import index_use
from polyopt.driver import base_schedule, check_options
from polyopt.dtypes import DTYPES
from polyopt.pipeline.blocked import plan_blocking
from polyopt.pipeline.fusion import nests
from polyopt.pipeline.gpu_policy import gpu_policy
from polyopt.pipeline.knobs import REGISTER_KNOBS
from polyopt.pipeline.policy import cpu_policy
from polyopt.pipeline.register_tile import row_block
from polyopt.poly import build_poly
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.schedules.marks import Tag
from polyopt.schedules.tree import Loop
from polyopt.tuning.space import Config

N_FEATURES = 11
ACCUMULATORS = 4  # the index in ``features``: the accumulators over the vector registers
N_CUDA_FEATURES = 5


class Footprints:
    """The contraction of a definition at fixed sizes, ready to measure tiles of it."""

    def __init__(self, source: str | lang.Definition, name: str | None, sizes: Mapping[str, int],
                 machine: Machine | None = None, gpu: GpuModel | None = None) -> None:
        program = lang.build_program(source, name, sizes)
        self.policy = cpu_policy(machine or host())
        self.machine = self.policy.machine
        self.gpu = gpu_policy(gpu)
        self.pp: PolyProgram = build_poly(program, borders=False)
        self.stmt = _largest_contraction(self.pp)
        self.program = program
        dtype = program.tensors[self.stmt.stmt.tensor].dtype if self.stmt else "float32"
        self.elem = DTYPES[dtype].np.itemsize
        self.blocking = self.policy.blocking(self.elem)  # the pipeline's register tile

    def of(self, config: Config) -> tuple[float, ...]:
        """The features of a CPU or CUDA configuration (by its knobs; unset ones at the
        pipeline's values)."""
        if any(k.startswith("gpu_") for k in config):
            return self.cuda(config.get("gpu_tile"), config.get("gpu_block"),
                             config.get("gpu_regs"), config.get("gpu_shared") is not False)
        b, block = self.blocking, config.get("block")
        return self.features(config.get("mr") or b.mr, config.get("nr") or b.nr,
                             config.get("kc") or b.kc,
                             self._default_block() if block is None else block,
                             bool(config.get("rows_outer")),
                             config.get("mc"))

    def _default_block(self) -> int:
        """The channel block the pipeline picks with no knob (0: none)."""
        plan = plan_blocking(self.program, self.stmt, self.policy) if self.stmt else None
        return plan[2] if plan else 0

    def _lanes(self) -> int:
        return self.blocking.lanes

    @functools.cache  # noqa: B019 -- one per tuning run, configurations repeat
    def features(self, mr: int, nr: int, kc: int, block: int = 0,
                 rows_outer: bool = False, mc: int | None = None) -> tuple[float, ...]:
        """The features of one register tile; ``mc`` None for the rows' L2 blocks the
        pipeline's model picks (``register_tile.row_block``), 0 for none."""
        s, m = self.stmt, self.machine
        if s is None:
            return (0.0,) * N_FEATURES
        lanes = self._lanes()
        row, col, red, col_extent = self._roles(block)
        blocked = col_extent < self._extent(col)
        inner: dict[str | None, int] = {
            it: self._extent(it) for it in s.stmt.reduction_iters
            if it != red and self._extent(it) <= self.policy.small_reduction}
        nr = min(nr, col_extent)
        elem = self.elem
        tile = self._bytes({**inner, row: mr, col: nr, red: kc}) * elem
        if rows_outer:  # a row tile's panel spans every column
            panel = self._bytes({**inner, row: mr, col: col_extent, red: kc}) * elem
        else:  # a column tile's panel spans every row (of an L2 block of ``mc`` rows)
            taps = math.prod(inner.values())
            mc = row_block(self.policy, mc, (mr, nr, lanes),
                           (self._extent(row), col_extent, kc * taps), elem,
                           math.ceil(col_extent / nr))
            rows = min(mc, self._extent(row)) if mc else self._extent(row)
            panel = self._bytes({**inner, row: rows, col: nr, red: kc}) * elem
        inside, outside = (col, row) if rows_outer else (row, col)
        reuse = max(self._reuse(r.read, inside, outside, tile, panel) for r in s.reads)
        accs = mr * max(1, math.ceil(nr / lanes))
        col_tiles = math.ceil(col_extent / nr)
        lane_use = col_extent / (col_tiles * math.ceil(nr / lanes) * lanes)
        strided = sum(1 for r in s.reads if _stride(r.read, col) not in (0, 1))
        tiles = math.ceil(self._extent(row) / mr) * col_tiles * max(
            1, self._extent(col) // col_extent)
        return (tile / m.l1d_bytes, panel / m.l2_bytes, _log_ratio(reuse, m.l1d_bytes),
                _log_ratio(reuse, m.l2_bytes), accs / m.vector_registers,
                float(accs + math.ceil(nr / lanes) + 1 > m.vector_registers), lane_use,
                float(strided), math.log2(max(1.0, tiles / m.cores)),
                float(blocked), mr / max(1, self._extent(row)))

    @functools.cache  # noqa: B019
    def cuda(self, tile: tuple[int, ...] | None, block: tuple[int, ...] | None,
             regs: tuple[int, ...] | None, shared: bool) -> tuple[float, ...]:
        """Features of a CUDA mapping (unset knobs at the mapper's defaults)."""
        s = self.stmt
        if s is None:
            return (0.0,) * N_CUDA_FEATURES
        row, col, _, _ = self._roles(0)
        tm, tn, tk, rm, rn = self.gpu.tile_for(self._extent(row), self._extent(col),
                                               _triple(tile), _pair(regs))
        threads = math.prod(block) if block else (tm // rm) * (tn // rn)
        smem = (tm + tn) * tk * self.elem if shared else 0
        blocks = math.ceil(self._extent(row) / tm) * math.ceil(self._extent(col) / tn)
        use = self._extent(col) / (math.ceil(self._extent(col) / tn) * tn)
        model = self.gpu.model
        return (math.log2(max(1, threads)) / 10, smem / model.shared_bytes_per_block,
                rm * rn / model.registers_per_full_block,
                math.log2(max(1.0, blocks / model.multiprocessors)), use)

    def _roles(self, block: int) -> tuple[str | None, str | None, str | None, int]:
        """(row, column, reduction, column extent), as the CPU pipeline picks them. A
        convolution blocked by channels: the blocked channel is the column (``block``
        wide), the output's last index the row. Otherwise the output's last index is the
        column; the row is the output index most operands do not move with (then the
        longest). The reduction is the longest."""
        s = self.stmt
        assert s is not None
        lhs, reds = s.stmt.lhs, s.stmt.reduction_iters
        red = max(reds, key=self._extent, default=None)
        plan = plan_blocking(self.program, s, self.policy, block) if block else None
        if plan is not None:
            _, dim, width = plan
            return lhs[-1], lhs[dim], red, width
        row = max(lhs[:-1], key=lambda it: (sum(1 for r in s.reads if not r.read.uses(it)),
                                            self._extent(it)), default=None)
        return row, lhs[-1], red, self._extent(lhs[-1])

    def _reuse(self, read: ir.Read, inner: str | None, outer: str | None, tile: int,
               panel: int) -> int:
        """Bytes touched between two uses of one element of ``read``'s tensor, when the
        tiles of ``inner`` run inside those of ``outer``."""
        if inner is not None and not read.uses(inner):
            return tile  # the next inner tile reuses it
        if outer is not None and not read.uses(outer):
            return panel  # the next outer tile reuses it
        return panel * 2  # no reuse across tiles: as far as a whole panel and beyond

    def _extent(self, it: str | None) -> int:
        if it is None or self.stmt is None:
            return 1
        return self.stmt.extent(it) or 1

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


# The prediction leaves the knobs of ``REGISTER_KNOBS`` (the register tile and its packing)
# at the model's values: the isl footprints above describe them. The others (fusion,
# channel block, cache tile, loop order, vector and parallel loops, split-K) take few
# values, so the predictions of a search's pools of candidates come from a handful of
# schedules.


class Predicted:
    """The CPU cost model's predicted cycles of a configuration's schedule (log2), one
    schedule per distinct value of the knobs outside ``REGISTER_KNOBS`` (about 20-700 ms
    each, for an elementwise operator to a convolution; cached)."""

    def __init__(self, source: str | lang.Definition, name: str | None,
                 sizes: Mapping[str, int], machine: Machine | None = None) -> None:
        self.program = lang.build_program(source, name, sizes)
        self.policy = cpu_policy(machine or host())
        self.machine = machine
        self._cache: dict[tuple[tuple[str, str], ...], float] = {}

    def of(self, config: Config) -> float:
        key = tuple(sorted((k, repr(v)) for k, v in config.items()
                           if k not in REGISTER_KNOBS and v is not None))
        if key not in self._cache:
            self._cache[key] = self._log_cycles(config)
        return self._cache[key]

    def _log_cycles(self, config: Config) -> float:
        knobs = {k: v for k, v in config.items()
                 if k not in REGISTER_KNOBS and k != "fusion" and v is not None}
        if config.get("register_tile") is None and any(config.get(k) is not None
                                                        for k in REGISTER_KNOBS):
            knobs["register_tile"] = True  # as the pipeline takes it (``Knobs.register_tiled``)
        options: dict[str, object] = {"tuned": False, "knobs": knobs,
                                      "fusion": config.get("fusion") or "smart"}
        if self.machine is not None:
            options["machine"] = self.machine.spec()
        sched = base_schedule(self.program, check_options(options, "c"), True)
        cycles, printed = 0.0, printing(sched.poly, sched.root, sched.buffers)
        for top in nests(sched.root):  # its parallel loops as scheduled, not the model's
            est = estimate(sched.poly, top, self.policy.machine, parallel=_tagged_parallel,
                           printed=printed, parallel_trips=self.policy.parallel_trips)
            cycles += est.cycles if est is not None else 0.0
        return math.log2(max(1.0, cycles))


def _tagged_parallel(lp: Loop) -> bool:
    return Tag.PARALLEL in lp.tags or Tag.PARALLEL_REDUCTION in lp.tags


def _triple(xs: tuple[int, ...] | None) -> tuple[int, int, int] | None:
    return (xs[0], xs[1], xs[2]) if xs else None


def _pair(xs: tuple[int, ...] | None) -> tuple[int, int] | None:
    return (xs[0], xs[1]) if xs else None


def _log_ratio(value: int, capacity: int) -> float:
    """log2 of how far ``value`` exceeds ``capacity`` (0 when it fits)."""
    return math.log2(max(1.0, value / capacity))


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
    use = index_use(read.indices, it) if it is not None else None
    if use is None or use.rank is None:
        return 0
    return 1 if use.alone else 2 if use.last else 3
