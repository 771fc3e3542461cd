"""Limits on the size of generated code and stack, and on the compiler's own work: the
verbs, isl's scheduler, the printers and the cost model's searches stop at them, on every
machine and target (none is derived from the machine model)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caps:
    """Limits on the size of generated code and stack, and on the compiler's own work, the
    same on every machine and target (none is derived from the machine model): past one, a
    construct prints as plain loops, a verb is refused or isl's scheduler gives way to
    program order, so a cap never changes a result, only how it is computed."""

    max_accumulators: int = 32
    """Vector accumulators a register-tile micro-kernel may hold (``codegen/microkernel.py``);
    a larger tile prints as plain loops. 32 is the largest vector register file polyopt
    targets (AVX-512, NEON). Not the machine's own count: the model's tiles stay within it
    (``CpuPolicy.register_rows``), and a tile the knobs force past it spills."""

    max_reduction_loops: int = 4
    """Reduction loops a micro-kernel keeps its accumulators across (``c, kh, kw`` of a
    convolution, and a split of one of them); deeper nests print as plain loops."""

    max_transpose_blocks: int = 16
    """``lanes x lanes`` blocks a transposed copy prints per tile (``codegen/transpose.py``),
    each ``2 x lanes`` vector loads and stores; more prints as plain loops (code size)."""

    min_transpose_lanes: int = 4
    """Narrowest block a transposed copy prints; narrower blocks (two rounds of shuffles or
    fewer) save little over plain loops."""

    max_full_unroll: int = 64
    """Most iterations the ``unroll`` verb (and ``gpu_tile``'s reduction unroll, and a
    replayed record's factors, ``tuning/replay.py``) unrolls fully (code size)."""

    max_unrolled_updates: int = 64
    """Vector updates one step of a register tile may print when a short reduction loop is
    unrolled into it (``codegen/microkernel.py``: a filter's rows, whose loads the tile's
    rows share); past it the loop stays a loop. 64, not 128: at 128 a depthwise 3x3's 28-row
    tile unrolls (84 updates), and MobileNetV2's depthwise layers 3, 6, 9 and 14 ran no
    faster within the noise (``polyopt bench conv --model mobilenetv2 --layers 3,6,9,14
    --repeat 20``, 64 and 128 alternating twice) while dwconv_3x3_s2_b8 compiled in 1.24 s
    instead of 0.64 s (``scripts/dev/compile_split.py``; the issue's limit is 1 s)."""

    max_slice_bytes: int = 64 * 1024
    """Largest slice of a contracted local (``schedules/contraction.py``): it lives on each
    thread's stack, whose size (a few MB by default) the generated code does not control.
    A larger one stays a whole tensor in memory."""

    scheduler_work: int = 200_000_000
    """isl's scheduler's budget (``pipeline/auto.py``), in isl's own operations (tableau
    pivots and the like) times statements: each operation costs more the more statements
    share isl's linear programs, so the budget per call is this divided by the statements
    (at most ``max_scheduler_operations``). Past it the def's base schedule is program
    order, checked, with a ``PolyoptWarning`` (the CPU pipeline still fuses its nests where
    legal). Measured: a chain of 160 elementwise statements needs 576k operations (0.3 s),
    of 320 1.28M (2.2 s); the bundled kernels need at most 400k (a padded conv2d with sizes
    unbound, 4 statements); past the budget, 2000 statements gave up within 0.01 s, where
    1M operations took 20 s. Re-measure: ``polyopt/bench/compile_time.py``."""

    max_scheduler_operations: int = 4_000_000
    """isl's scheduler's operations per call, however few the statements (see
    ``scheduler_work``)."""

    scheduler_max_coefficient: int = 8
    """Largest absolute coefficient of a loop iterator or size in the schedules isl's
    scheduler computes (isl's ``schedule_max_coefficient``; unbounded by default). The
    operation budget above does not count the pivots of the scheduler's integer programs
    (``isl_tab_basic_set_non_trivial_lexmin``), and unbounded coefficients let them grow:
    a 1-D padded convolution with a bias, ``O(f,h) +=! I(r_c, h + r_kh - 2) * Wt(f, r_c,
    r_kh)`` at C=1, F=3, KH=2, H=6 or 8, did not finish within 10 minutes (found by
    ``scripts/dev/fuzz_schedules.py``); bounded, it takes 0.03 s. The bundled kernels' schedules
    need at most 2: bounded by 1, the C of the stencils (jacobi, heat, seidel) and
    layernorm changes; by 2 or 8, the C of none of 233 kernels does (the suite's operators,
    the ResNet-50 and MobileNetV2 layers, bench_kernels' and tests/kernels' cases). A def
    isl finds no schedule for within the bound gets program order, as on isl's other
    failures (``pipeline/auto.py``)."""

    model_statements: int = 256
    """The loop-order model (``pipeline/order.py``) weighs distributing a fused nest only
    when it holds at most this many statements: it estimates each statement's nest apart,
    which took 4.2 s of a 7.6 s lowering (cProfile) for 1000 fused independent statements.
    Such a nest keeps the pipeline's fusion. Re-measure: ``polyopt/bench/compile_time.py``."""

    legality_whole_order: int = 64
    """Schedules of at most this many statements (pieces) are checked against the
    dependences through their whole lexicographic order, built once (quadratic in the
    statements); larger ones through each dependence's ends only (``lex_lt_at``, linear
    but slower per dependence). Measured under cProfile on ResNet-50's conv1 (15 checks):
    1.69 s the per-dependence way against 0.86-1.18 s the whole-order way; a chain of 2000
    statements: 3.0 s the whole-order way against 0.8 s (commit f95a3ef). Re-measure:
    ``polyopt/bench/compile_time.py`` and ``scripts/dev/compare_commits.py``."""


CAPS = Caps()
