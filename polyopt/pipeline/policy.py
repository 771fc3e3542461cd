"""The CPU pipeline's and the CPU tuner's thresholds for one machine model: :class:`CpuPolicy`.

The pipeline (blocked, cpu, register_tile, parallel, order, timetile) and the tuner
(``tuning/space.py``, ``features.py``) read the same instances, so a changed machine model
moves both. The facts of the core (loads and bandwidths, the TLB, the fork's cost) are
fields of the machine model, :class:`~polyopt.costmodel.machine.Machine`; code limits are
:class:`~polyopt.schedules.limits.Caps`; the CUDA mapping's thresholds are in
``gpu_policy.py``. Each field says where its value comes from: derived from the machine
model (a method over ``machine``), a classification or a limit, or measured (BENCHMARKS.md,
"Decisions and how to re-measure them": the figures and the command). Most measured ones
decide what a micro-kernel's registers and loads do, below the cost model's grain of lines,
pages and loop levels.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from polyopt.costmodel.machine import Blocking, Machine, gemm_blocking
from polyopt.schedules.limits import CAPS, Caps


@dataclass(frozen=True)
class TimeTile:
    """A time tile's sizes (``CpuPolicy.time_tile``) and the rule's numbers."""

    height: int
    width: int
    row: int
    """The row's tile; 0 keeps the row whole."""
    why: str


@dataclass(frozen=True)
class CpuPolicy:
    """The CPU pipeline's and the CPU tuner's thresholds for one machine model
    (:func:`cpu_policy`). Derived values are methods over ``machine``; the others are
    fields, each saying where its value comes from."""

    machine: Machine
    """The model the derived values come from (``costmodel/machine.py``, the host's or
    ``POLYOPT_MACHINE``/``options={"machine": ...}``)."""

    # ---- blocked layouts (pipeline/blocked.py) ----
    natural_vectors: int = 4
    """An output whose last extent is a multiple of the lanes and at least this many vectors
    keeps its natural layout (no channel blocks): its register tiles are full vectors. Chosen,
    not measured (the cost model has no term for a layout's register tile): BENCHMARKS.md."""

    wide_rows: int = 28
    """Output rows (the last extent) from which a convolution with filter taps gets channel
    blocks of ``wide_block_vectors`` vectors. Measured (a near tie the cost model cannot break,
    settled toward two vectors on wide rows): BENCHMARKS.md, Decisions."""

    wide_block_vectors: int = 2
    """Vectors per channel block of a wide convolution: two accumulators per output pixel.
    Measured with ``wide_rows`` (the tuner also offers 4: ``tuning.space.CpuSpace``)."""

    small_reduction: int = 16
    """Reductions this short besides the longest are filter taps: they run inside the register
    tile and make a convolution 'with taps' (so do channel reductions this short). A
    classification: every window of the bundled networks and the suite (1-7 wide) is below."""

    phase_min_lane_fill: float = 0.5
    """A convolution's input read at a stride along the vector loop is copied split in phases
    (``relayout.phase_program``) only when that loop fills at least this share of its lanes
    (``lane_fill``). Measured (the model prices the copy, not the gain): see Decisions."""

    # ---- register tiles (pipeline/register_tile.py) ----
    max_rows: int = 28
    """Most rows of a register tile with fewer vectors per row than the model's
    (``register_rows``). A code-size limit, not measured: more unrolled rows grow the
    micro-kernel for little gain (32 registers would hold 30 rows of one vector)."""

    pack_min_reduction: int = 64
    """Operands are packed into panels only when the reduction is at least this long (a copy
    pays once each element is reused this often). Set with packing on the GEMMs, not measured
    alone; its gain (TLB misses, set conflicts) is below the model's grain: see Decisions."""

    pack_min_sweeps: int = 2
    """...and each operand only when the register tiles sweep it this many times (``B`` once per
    row tile, ``A`` once per column tile; one in half of L1 stays there:
    ``register_tile._pays_to_pack``). Measured, a crossover between 1 and 4: see Decisions."""

    pack_l2_min_sweeps: int = 16
    """...and an operand that half of L2 holds: the row operand ``A`` only when swept at least
    this many times, the column operand ``B`` only when its lanes are not unit-stride (a
    transposed ``B``). Measured on the suite's contractions: BENCHMARKS.md, Decisions."""

    panel_l2_max_share: float = 0.1
    """...but a 1x1 convolution's input in half of L2 is copied in panel order
    (``blocked._panel_copies``) only when the copy's predicted cycles (fork and join, bytes
    at ``Machine.l2_bytes_per_cycle``) are at most this share of the contraction's (FMAs at
    ``fma_units`` vectors a cycle), both over the cores. Measured on 1x1 layers:
    BENCHMARKS.md, Decisions."""

    row_block: int | None = None
    """Rows per L2 block of a register-tiled nest (GotoBLAS's MC), 0 for none; None derives
    them from the machine model (``register_tile.row_block``: the operand panel in L2, whole
    rounds of the cores, when predicted faster than no blocks, which read the other operand
    once; BENCHMARKS.md, Decisions). Knob ``mc``; the tuner offers ``CpuSpace.mc``."""

    cache_tile_min_tiles: int = 2
    """A transposed access is cache-tiled (``cache_tile``) only when its loop has at least this
    many tiles. Neither measured nor derived: one tile is the untiled loop, so 2 is the least
    count at which tiling changes anything."""

    parallel_trips_per_core: int = 2
    """The parallel loop is the outermost dependence-free one with at least this many
    iterations per core (``parallel_trips``). From static scheduling, not measured: ``k`` per
    core leave at most ``1 / k`` of a core's share idle; 2 keeps the loop outer (fewer forks)."""

    # ---- the loop order (pipeline/order.py) ----
    order_min_gain: float = 1.5
    """The model changes a nest's loop order (or distributes or strip-mines it) only when it
    predicts at least this speedup: it is coarse (bandwidths not measured per machine), so a
    smaller gain is noise. Measured on the 55 network layers: BENCHMARKS.md, Decisions."""

    order_max_permuted: int = 4
    """Chains of up to this many loops are tried in every order (24 estimates); longer ones
    only with each loop moved innermost. A limit on compile work."""

    strip_min_vectors: int = 4
    """Smallest strip (in vectors) of a strip-mined parallel loop the model considers: a shorter
    run per row defeats the hardware prefetcher. A guess, neither measured nor derived (the
    machine model holds no prefetcher): four lines on AVX-512."""

    time_tile_cache_share: float = 0.5
    """Share of L2 one step of a time tile may use (``time_tile``): the other half holds the
    neighbouring tiles' halo rows and the prefetcher's lines (as ``cube_tile``'s budget).
    Checked against the measured best tiles: BENCHMARKS.md, Decisions."""

    time_tile_space_max: int = 256
    """Largest space size of a time tile: above it a wavefront has too few tiles to share out.
    Measured on jacobi-2d and heat-3d: BENCHMARKS.md, Decisions."""

    time_tile_rows: int = 3
    """Rows of each plane a stencil's row loop keeps in L1 for the next row: its own and the
    two it reads beside it (a first-order stencil, as all of PolyBench's). ``time_tile`` cuts
    the row when these outgrow L1."""

    caps: Caps = CAPS
    """Code-size and stack limits (machine-independent)."""

    def blocking(self, elem_bytes: int) -> Blocking:
        """The machine model's GEMM blocking (``gemm_blocking``: register tile ``mr x nr``
        from the vector registers and FMA latency, ``kc``/``mc``/``nc`` from L1/L2/L3)."""
        return gemm_blocking(self.machine, elem_bytes)

    def lanes(self, elem_bytes: int) -> int:
        """Elements per vector register (``Machine.lanes``)."""
        return self.machine.lanes(elem_bytes)

    def lane_fill(self, extent: int, elem_bytes: int) -> float:
        """The fraction of the lanes a vector loop of ``extent`` iterations fills (7 of 16:
        0.44; 56: 3.5 of 4 vectors, 0.875)."""
        lanes = self.lanes(elem_bytes)
        return extent / (-(-extent // lanes) * lanes) if extent > 0 else 0.0

    def register_rows(self, vectors: int) -> int:
        """Rows of a register tile of ``vectors`` vectors per row when that is fewer than the
        model's: as many as the vector registers hold (``rows * vectors`` accumulators,
        ``vectors`` operand vectors and one broadcast), at most ``max_rows``."""
        rows = (self.machine.vector_registers - 1 - vectors) // vectors
        return max(1, min(rows, self.max_rows))

    def cache_tile(self, elem_bytes: int) -> int:
        """Tile of a transposed access: one cache line of elements square (16 x 16 floats
        on 64-byte lines), the least that uses each line whole; larger, L2-sized tiles
        measured slower (a page per row exhausts the TLB: BENCHMARKS.md, Decisions)."""
        return max(2, self.machine.line_bytes // elem_bytes)

    def time_tile(self, point_bytes: int, dims: int, slope: int, steps: int,
                  row: int, elem_bytes: int) -> TimeTile:
        """The parallelogram tile of a skewed stencil band (``pipeline/timetile.py``): the one
        rule for its sizes. ``point_bytes``: what a step touches per point (every plane the
        band reads or writes); ``dims``: the band's space loops above its innermost level
        (the row, ``row`` iterations long); ``slope``: how far the skew moves per step.

        - Row: whole while ``time_tile_rows`` rows of it fit in L1 (the next row reuses
          them); else cut into the fewest equal tiles that do, a whole number of vectors.
        - Width ``W`` of the other space loops: the largest power of two up to
          ``time_tile_space_max`` whose step working set, ``point_bytes * row * (W + 2 *
          slope) ** dims`` with the halo the previous step's reads reach, stays within
          ``time_tile_cache_share`` of L2, so each step finds the last one in L2; at least
          ``4 * slope``, so that a tile spans two steps.
        - Height: ``W // (2 * slope)`` steps (a tile leans by half its width) and at most
          ``steps / cores``, so a wavefront has a tile per core; then evened out over a
          multiple of the cores' count of tiles, so that no wavefront leaves a core idle
          for a round (60 steps by at most 16: four tiles of 15, not 16, 16, 16, 12; 59
          steps by at most 29 on 2 cores: four of 15, not three of 20; measured:
          BENCHMARKS.md, Decisions)."""
        lanes = self.lanes(elem_bytes)
        l1 = self.machine.l1d_bytes
        cut = 0
        if self.time_tile_rows * point_bytes * row > l1:
            pieces = _ceil(self.time_tile_rows * point_bytes * row, l1)
            cut = _ceil(_ceil(row, pieces), lanes) * lanes
        width_row = cut or row
        budget = self.time_tile_cache_share * self.machine.l2_bytes
        low = 4 * max(1, slope)
        width = low
        while (width * 2 <= self.time_tile_space_max
               and point_bytes * width_row * (2 * width + 2 * slope) ** dims <= budget):
            width *= 2
        most = max(1, min(steps // self.machine.cores, width // (2 * max(1, slope))))
        cores = self.machine.cores
        count = _ceil(_ceil(steps, most), cores) * cores  # whole rounds of the cores
        height = _ceil(steps, count)
        ws = point_bytes * width_row * (width + 2 * slope) ** dims
        why = (f"row {cut or 'whole'}: {self.time_tile_rows} rows x {row} x "
               f"{point_bytes} B {'<=' if not cut else '>'} L1 {l1} B; space {width}: a "
               f"step's working set {point_bytes} B x {width_row} x ({width} + 2*{slope})^"
               f"{dims} = {ws} B {'<=' if ws <= budget else '>'} {self.time_tile_cache_share}"
               f" x L2 {self.machine.l2_bytes} B (at least {low}); height {height}: {width} "
               f"// (2 * slope {slope}), at most {steps} steps / {self.machine.cores} cores, "
               f"{count} tiles of the steps")
        return TimeTile(height, width, cut, why)

    @property
    def parallel_trips(self) -> int:
        """Iterations the parallel loop should have: ``parallel_trips_per_core`` per core."""
        return self.parallel_trips_per_core * self.machine.cores


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=16)
def cpu_policy(machine: Machine) -> CpuPolicy:
    """The CPU policy for ``machine`` (the pipeline, its layout and the tuner all ask here)."""
    return CpuPolicy(machine)
