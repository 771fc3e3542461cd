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
    """Vector accumulators a micro-kernel may hold (``codegen/microkernel.py``); larger tiles
    print as plain loops. 32: the largest register file polyopt targets (AVX-512, NEON); the
    model's tiles fit the machine's own (``CpuPolicy.register_rows``), a knob's may spill."""

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
    """Vector updates one step of a register tile may print when a short reduction loop (a
    filter's rows) is unrolled into it (``codegen/microkernel.py``); past it the loop stays a
    loop. Measured, compile time against speed: BENCHMARKS.md, Decisions."""

    max_slice_bytes: int = 64 * 1024
    """Largest slice of a contracted local (``schedules/contraction.py``): it lives on each
    thread's stack, whose size (a few MB by default) the generated code does not control.
    A larger one stays a whole tensor in memory."""

    scheduler_work: int = 200_000_000
    """isl's scheduler's budget (``pipeline/auto.py``) in operations times statements (an
    operation costs more the more statements share isl's programs): a call gets this over its
    statements, at most ``max_scheduler_operations``; past it the base schedule is program
    order, checked, with a ``PolyoptWarning``. Measured: BENCHMARKS.md, Decisions."""

    max_scheduler_operations: int = 4_000_000
    """isl's scheduler's operations per call, however few the statements (see
    ``scheduler_work``)."""

    scheduler_max_coefficient: int = 8
    """Largest absolute coefficient of an iterator or size in isl's schedules (isl's
    ``schedule_max_coefficient``, unbounded by default): unbounded ones let the pivots the
    budget above does not count grow. A def with no schedule within it gets program order.
    Measured: BENCHMARKS.md, Decisions."""

    model_statements: int = 256
    """The loop-order model (``pipeline/order.py``) weighs distributing a fused nest only when
    it holds at most this many statements (it estimates each statement's nest apart); a larger
    nest keeps the pipeline's fusion. A limit on compile work, measured: see Decisions."""

    legality_whole_order: int = 64
    """Schedules of at most this many statements are checked through their whole lexicographic
    order, built once (quadratic); larger ones through each dependence's ends (``lex_lt_at``,
    linear, slower per dependence). Measured: BENCHMARKS.md, Decisions."""


CAPS = Caps()
