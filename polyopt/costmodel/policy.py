"""Every threshold of the automatic pipelines and of the tuner, one frozen dataclass per target.

:class:`CpuPolicy` holds the decisions of the CPU pipeline (``pipeline/blocked.py``,
``cpu.py``, ``register_tile.py``, ``parallel.py``, ``order.py``) and the CPU tuning space
(``tuning/space.py``, ``tuning/features.py``);
:class:`~polyopt.schedules.limits.Caps` (``schedules/limits.py``) bounds the code the
printers and verbs generate, on every target; the CUDA mapping's are in
``costmodel/gpu_policy.py``. The tuner reads the same instances the
pipelines do (no copies), so a changed machine model moves both.

Each field says where its value comes from: derived from the machine model (``Machine``:
registers, caches, cores) by a stated formula, a limit on generated code, a fact of the
core the host does not report (load ports, bandwidths, fork cost), or measured - on what,
and with which command to measure it again (on ResNet-50, MobileNetV2 and a few GEMMs,
float32, on the 2-core AVX-512 VM of BENCHMARKS.md). Each measured one also says why the
cost model (``costmodel/cost.py``) does not derive it: most decide what a micro-kernel's
registers and loads do, below the model's grain of lines, pages and loop levels. Which
nests run in parallel is the model's (``parallel_pays``), from its cycles and the fork.
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
    (:func:`cpu_policy`). Derived values are methods over ``machine``; measured ones are
    fields, each with the measurement."""

    machine: Machine
    """The model the derived values come from (``costmodel/machine.py``, the host's or
    ``POLYOPT_MACHINE``/``options={"machine": ...}``)."""

    # ---- blocked layouts (pipeline/blocked.py) ----
    natural_vectors: int = 4
    """An output whose last extent is a multiple of the lanes and at least this many vectors keeps
    its natural layout (no channel blocks): its register tiles are then full vectors, with at
    most a partial row tile. Not measured; ``options={"knobs": {"block": 0}}`` against the
    default on ``polyopt bench conv`` compares the two layouts. Not derived: the cost model
    (``cost.py``) ranks loop orders over a fixed layout and has no term for what a layout does
    to the register tile (how many of its vectors are full, how many broadcasts feed each FMA),
    which is what decides here."""

    wide_rows: int = 28
    """Output rows (the last extent) from which a convolution with filter taps gets channel blocks
    of ``wide_block_vectors`` vectors. Measured on ResNet-50 (23 layers, count-weighted, batch
    1): 51.8 ms against 59.3 ms with one-vector blocks; the 3x3 layers on 28- and 56-wide rows
    ran 1.4-1.6x faster, the 14- and 7-wide ones and 1x1 layers slower. Re-measure: ``polyopt
    bench conv --model resnet50`` (or ``polyopt/bench/conv.py``) with ``options={"knobs":
    {"block": 2 * lanes}}`` against ``{"block": lanes}``. That gap was GCC's predictive
    commoning spilling the one-vector tiles' broadcasts (``Dialect``) and the two-vector
    blocks' weights copied from 32 streams at once (``codegen/transpose.py``). Without both,
    same process (2026-12-05, 30 calls, median), two vectors take 0.96-1.03x the time of one
    on ResNet-50's 3x3 layers (1, 3, 7, 11, 13, 17, 23), 1.00-1.03x on the suite's conv_3x3,
    conv_5x5 and conv_7x7_s2, and 0.87x on conv_3x3_dil2: a near tie that this rule breaks
    toward two vectors on wide rows. Not derived: the cost model predicts the layers' two
    blocks within 5% of each other too, and pricing both layouts would lower a convolution
    twice more (its compile is up to 0.87 s of the 1 s budget)."""

    wide_block_vectors: int = 2
    """Vectors per channel block of a wide convolution (above): the register tile then holds
    two accumulators per output pixel. Measured with ``wide_rows`` (same command; the tuning
    space also offers 4 vectors, ``space_block_vectors``). Not derived, as ``wide_rows``."""

    small_reduction: int = 16
    """Reductions this short besides the longest are filter taps: they run inside the register
    tile (its accumulators stay in registers across them) and make a convolution 'with taps'.
    Not measured, and not a cost but a classification (no model of time says which reductions
    are filter windows): every window of the bundled networks and the suite (1 to 7 wide) is
    below it, and channel reductions of 16 or fewer (a first layer's 3 channels, small groups)
    join the taps."""

    store_forward_cycles: int = 5
    """Cycles from a store to a load of the same address forwarded from the store buffer:
    the model's cost of a sum kept in memory between two filter taps (with the FMA's
    latency), ``blocked.streamed_costs``. Not detected: 4-5 on Intel's cores since Skylake
    and AMD's since Zen (Agner Fog's tables); a core that differs sets it here."""

    copy_loads_per_cycle: int = 2
    """Element loads a core issues per cycle in a copy that gathers one element per lane
    (a depthwise input copied into channel blocks: ``blocked.streamed_costs``). Not
    detected: two load ports on Intel's cores since Haswell and AMD's since Zen."""

    phase_min_lane_fill: float = 0.5
    """An unblocked convolution's input read at a stride along the output's last index (the vector
    loop) is copied split in phases (``relayout.phase_program``: unit-stride vectors, a register
    tile) only when that loop fills at least this fraction of its vectors' lanes
    (``lane_fill``): a shorter row gains little from whole vectors, and the cost model then
    orders its taps outside a partial vector. Measured on MobileNetV2's stride-2 depthwise
    layers (one thread, ``scripts/dev/compare_commits.py --cases mv2:6,mv2:11,mv2:16,mv2:25`` with
    ``OMP_NUM_THREADS=1``): 56, 28 and 14 of 16 lanes ran 0.38x, 0.51x and 0.56x the time
    without the split; 7 of 16 lanes 1.37x. Not derived: the split's gain is whole vectors in
    the micro-kernel, and its loss a copy per phase; the roofline model predicts the copy but
    not the gain."""

    # ---- register tiles (pipeline/register_tile.py) ----
    max_rows: int = 28
    """Most rows of a register tile that uses fewer vectors per row than the model's
    (``register_rows``): more unrolled rows make the micro-kernel's code large for little
    gain. A code-size bound, not measured (a 32-register file would hold 30 rows of one
    vector)."""

    pack_min_reduction: int = 64
    """Operands are packed into panels when the reduction is at least this long (packing is one
    pass over each operand; it pays once each element is reused this often). Set with packing on
    ``polyopt/bench/ops.py``'s GEMMs, not measured on its own: re-measure with
    ``options={"knobs": {"pack": True}}`` against ``False`` at short reductions. Not derived: a
    copy's cost is in the model (one pass over the operand), but its gain, fewer TLB misses and
    cache-set conflicts in the micro-kernel's strided panel loads, is below the model's grain
    (it counts lines and pages per loop level, not conflicts)."""

    pack_min_sweeps: int = 2
    """...and each operand only when the register tiles sweep it at least this many times: the
    column operand (``B``) once per row tile, the row operand (``A``) once per column tile; a
    pass that reads an operand once reuses nothing of its copy (and an operand that fits in half
    of L1 stays there between passes: ``register_tile._pays_to_pack``). Measured on one thread,
    CPU time, ``python scripts/checks/bench_gemm_plans.py --cpu --shapes
    4096x16x1024,2048x128x1024,1024x1024x1024 --variants pack_a=False pack_a=True``: A swept
    once (16 output columns) 8.5 ms packed against 3.2 ms not; 4 times 7.2 against 10.5 ms; 32
    times (1024^3) 26.2 against 44.8 ms. Not derived, as ``pack_min_reduction``: a sweep count
    is the model's kind of quantity, but the crossover between 1 and 4 sweeps comes from the
    gain it cannot predict."""

    pack_l2_min_sweeps: int = 16
    """...and an operand that half of L2 holds (read from there between the passes): the row
    operand (``A``, whose broadcasts a copy makes contiguous) only when swept at least this many
    times, the column operand (``B``, loaded as vectors) only when its lanes are not unit-stride
    (a transposed ``B``). Same-run A/B against packing by the rules above alone (each rule
    compiled in one process, timed alternately, 10-12 rounds, new/old): attn_pv (A 1 MB a head,
    2 sweeps) 0.81 and 0.80, bmm (A 256 KB, 8 sweeps) 0.92 and 0.91, conv_3x3 0.92 and 0.92,
    mm_skinny_n (B 64 KB) 0.87 and 0.97; A left unpacked at 16 sweeps (attn_qk) 1.17, at 96
    (ffn) 1.10: hence the 16. Not derived, as ``pack_min_reduction``."""

    panel_l2_max_share: float = 0.1
    """...but a 1x1 convolution's input that fits in half of L2, where it stays between
    the channel blocks' sweeps (each reduction step's rows an L2 hit, not a miss to
    memory), is copied in panel order (``blocked._panel_copies``, unit stride) only when
    the copy's predicted cycles (``fork_join_cycles``, and its bytes read and written at
    ``l2_bytes_per_cycle``, over the cores) are at most this share of the contraction's
    (its multiply-adds at ``fma_units`` full vectors per cycle, over the cores). Measured,
    2 threads, checkouts alternating in subprocesses, 6 rounds (share: time copied over
    not): ResNet-50 layer 2 (64->64 at 56x56, 0.20) 1.38x, MobileNetV2 layers 18 (0.22)
    1.25x, 22 (0.10) 1.09x, 26 (0.26) 1.52x, 27 (0.14) 1.02x, 29 (0.18) 1.16x; copied
    below the share: MobileNetV2 30 (0.09) 0.94x, 31 (0.05) 0.80x, ResNet-50 4 (0.05)
    0.88x, 16 (0.05) 0.75x, 14 (0.03) 0.92x. Re-measure with ``scripts/dev/compare_commits.py
    OLD NEW --cases r50:2,r50:16,mv2:18,mv2:22,mv2:30``."""

    row_block: int | None = None
    """Rows per L2 block of a register-tiled nest (GotoBLAS's MC) for every such nest, 0
    for none; None derives them from the machine model (``register_tile.row_block``:
    blocks whose operand panel fits in half of L2, a whole number of rounds of the cores).
    The tuner offers ``space_mc``, and ``options={"knobs": {"mc": 0}}`` turns it off."""

    cache_tile_min_tiles: int = 2
    """A transposed access is cache-tiled (``cache_tile``) only when the loop it moves with has at
    least this many tiles. Not measured and not derived: a single tile is the untiled loop
    itself, so 2 is the least count at which tiling changes anything."""

    parallel_trips_per_core: int = 2
    """The parallel loop is the outermost dependence-free one with at least this many iterations
    per core (``parallel_trips``): two per core leave room to balance. Not measured: with static
    scheduling and whole iterations, ``k`` per core leave at most ``1 / k`` of a core's share
    idle at the end; two bound that at a half iteration per core while keeping the loop
    outermost (fewer forks). The model's estimate uses the same rule, so it does not rank it
    against others."""

    # ---- the loop-order cost model (costmodel/cost.py, pipeline/order.py) ----
    loads_per_cycle: int = 2
    """Loads a core issues per cycle (two load ports on every x86 core since Sandy Bridge
    and on Neoverse); with ``Machine.fma_units`` it sets the model's compute time."""

    l2_bytes_per_cycle: float = 32.0
    """Bytes per cycle from L2 into L1 (half a line per cycle: Zen 2-4, Skylake). A read
    stream of AVX-512 loads over 128-512 KiB measured 46-62 on the AMD EPYC host of
    BENCHMARKS.md's thirteenth round (``scripts/calibrate/bench_cache_bandwidth.py``); kept at 32
    until an A/B of the orders it ranks says otherwise (``order_min_gain`` absorbs its
    error)."""

    l3_bytes_per_cycle: float = 16.0
    """Bytes per cycle from L3 into L2, per core (a quarter line: Zen, Skylake-SP)."""

    page_bytes: int = 4096
    """Page size: the TLB's granule in the model (Linux's default pages)."""

    l1_tlb_entries: int = 64
    """First-level data TLB entries (Zen 2-4: 64-72; Skylake: 64): a strip of a
    transposed access whose rows are pages apart keeps no more rows than this
    (``cpu._pages_apart``). ``python3 scripts/calibrate/bench_tlb.py`` (a chase over one
    line of each of N pages): up to 64 pages 4 cycles a load, 96-512 pages 11. Not detected: CPUID
    describes it, sysfs does not."""

    tlb_entries: int = 2048
    """Second-level TLB entries (Zen 2-3: 2048; Skylake: 1536). A loop whose consecutive
    iterations touch more pages than this takes a page walk per access."""

    tlb_miss_cycles: float = 30.0
    """Cycles of a page walk that hits the caches. With it the model predicts the two-stage
    blur of 2050^2 walked by columns at ~200 ms; measured 236 ms (``scripts/checks/bench_nests.py
    --cases blur``, main before the model)."""

    order_min_gain: float = 1.5
    """The model changes a nest's loop order (or distributes a fused nest, or strip-mines
    it) only when it predicts at least this speedup over the pipeline's order: it is coarse
    (bandwidths not measured per machine), so a small predicted gain is noise. Of the 55
    ResNet-50/MobileNetV2 conv layers, 8 MobileNetV2 layers change (the zeroing nest of 5,
    the taps of 3 depthwise ones): 0.57-0.86x the time on main, or within the run's noise,
    by ``scripts/dev/compare_commits.py`` (BENCHMARKS.md, loop order model)."""

    order_max_permuted: int = 4
    """Chains of up to this many loops are tried in every order (24 estimates); longer
    ones only with each loop moved innermost (compile time)."""

    max_vector_stride: int = 4
    """Reads strided by at most this many elements along the innermost loop still vectorize
    in the model (a pooling window's ``I(2*w + x)``), at one vector load per element of
    stride and a shuffle per extra load: GCC 12 loads the vectors a stride spans and permutes
    them (``vpermt2ps``) up to stride 4 and gives up the permutes from 5. Measured on the
    2-core AVX-512 Xeon VM, ``o[i] = o[i] > x[k*i] ? o[i] : x[k*i]`` over 2048 floats under
    ``omp simd``: 0.069, 0.109, 0.140, 0.191 ns per element for k = 1..4, 0.375 at 5, and
    0.64-1.0 ns scalar. Re-measure: ``scripts/calibrate/bench_strided_loads.py``."""

    strip_min_vectors: int = 4
    """Smallest strip (in vectors) of a strip-mined parallel loop the model considers: a shorter
    contiguous run per row defeats the hardware prefetcher. Not derived: the machine model holds
    no prefetcher; four vectors are four lines on AVX-512, a guess at the run a stride
    prefetcher needs, not measured here."""

    # ---- the tuning space (tuning/space.py) ----
    conv_rank: int = 4
    """Outputs of this rank or more (NCHW) are convolutions to the tuner: it offers channel
    blocks (``space_block_vectors``) instead of L2 row blocks (a convolution's rows are too
    short to cut)."""

    space_mr: tuple[int, ...] = (4, 6, 8, 12, 14, 16, 20, 24, 28)
    """Register-tile rows the tuner tries besides the model's (up to ``max_rows``)."""

    space_nr_vectors: tuple[int, ...] = (1, 2, 3, 4)
    """Register-tile columns the tuner tries, in vectors of the contraction's lanes."""

    space_kc: tuple[int, ...] = (32, 64, 96, 128, 192, 256, 384, 512)
    """Reduction tiles the tuner tries (the model's kc lies in [16, 512])."""

    space_mc: tuple[int, ...] = (64, 128, 256, 512)
    """L2 row blocks the tuner tries for contractions that are not convolutions."""

    space_block_vectors: tuple[int, ...] = (2, 4)
    """Channel blocks the tuner tries besides one vector (the default) and none, in vectors."""

    space_cache_tile: tuple[int, ...] = (8, 32, 64)
    """Cache tiles the tuner tries for transposed accesses besides the line (default) and
    none."""

    time_tile_cache_share: float = 0.5
    """Share of L2 one step of a time tile may use (``time_tile``): the other half holds the
    halo rows of neighbouring tiles and the hardware prefetcher's lines. As ``cube_tile``'s
    budget; checked against the measured best by ``scripts/checks/stencil_study.py``."""

    time_tile_space_max: int = 256
    """Largest space size of a time tile: above it a wavefront has too few tiles to share
    out (jacobi-2d, ``scripts/checks/stencil_study.py``). The old floor of 64 (measured with every
    plane streaming to memory, before storage contraction) is gone: contracted, tiles from
    4 x 16 to 32 x 128 ran within 10% at N=1500, and heat-3d's 64-wide tiles at N=120 left
    a wavefront fewer tiles than cores (1.5x slower than no time tiling)."""

    time_tile_rows: int = 3
    """Rows of each plane a stencil's innermost (row) loop keeps in L1 for the next row to
    reuse: its own and the two it reads beside it (a first-order stencil; PolyBench's all
    are). ``time_tile`` tiles the row when these outgrow L1."""

    caps: Caps = CAPS
    """Code-size and stack limits (machine-independent)."""

    def blocking(self, elem_bytes: int) -> Blocking:
        """The machine model's GEMM blocking (``gemm_blocking``: register tile ``mr x nr``
        from the vector registers and FMA latency, ``kc``/``mc``/``nc`` from L1/L2/L3)."""
        return gemm_blocking(self.machine, elem_bytes)

    def lanes(self, elem_bytes: int) -> int:
        """Elements per vector register."""
        return self.blocking(elem_bytes).lanes

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
        measured 1.5x slower at 4096^2 (a page per row exhausts the TLB)."""
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
          steps by at most 29 on 2 cores: four of 15, not three of 20, measured 1.2x
          faster on fdtd-2d at N=1000, ``scripts/checks/stencil_study.py``)."""
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
    def fork_join_cycles(self) -> float:
        """The machine's fork and join (``Machine.fork_join_cycles``, which calibration
        measures)."""
        return self.machine.fork_join_cycles

    def parallel_pays(self, serial_cycles: float) -> bool:
        """Whether a nest the model predicts at ``serial_cycles`` on one core gains from a
        parallel region: the most the other cores can save, ``serial_cycles * (1 - 1 /
        cores)`` with the work evenly shared, must exceed one fork and join
        (``fork_join_cycles``). Where the model has no estimate, a statement instance counts
        one cycle (``parallel.py``): on 2 cores at 15000 cycles that is 30000 instances, the
        2**15 instances this rule replaces."""
        cores = self.machine.cores
        return cores > 1 and serial_cycles * (cores - 1) / cores > self.fork_join_cycles

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
