"""The CPU pipeline's outer search: each def is lowered whole in its own layout and, where
its outputs want channel blocks, in those, merged and unmerged where its loops merge, and the
cost model keeps the candidate it predicts fastest (``cpu.faster_layout``,
``cpu.faster_merge``); ``laid_out`` is the base every candidate (and the CUDA mapping)
starts from: isl's schedule, or program order, after a layout.

Options are the driver's checked ones (``fusion``, ``openmp``, ``machine``, ``knobs``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from polyopt import ir
from polyopt.pipeline.auto import compute_schedule
from polyopt.pipeline.blocked import blocked_layout, layout_notes, own_layout, plan_layout
from polyopt.pipeline.cpu import faster_layout, faster_merge, optimize
from polyopt.poly import analyze, model_of
from polyopt.poly.merge import Merge, merge_all
from polyopt.poly.relayout import Layout, relayout, rewrites_stmts
from polyopt.schedules import Schedule, Step, check_legal, program_order


def cpu_pipeline(program: ir.Program, options: Mapping[str, Any]) -> Schedule:
    """The automatic CPU pipeline after its layout: a def whose outputs want channel
    blocks (``blocked_layout``) is optimized in both layouts and the one the cost model
    predicts faster is kept (``cpu.faster_layout``), unless the ``block`` knob fixes it
    (0: its own layout, without the padded copies ``own_layout`` adds). A def whose loops
    merge (``polyopt.poly.merge``) is weighed merged too (``cpu.faster_merge``), unless
    the ``merge`` knob fixes it."""
    knob = options["knobs"].merge
    merges, merged = merge_all(program) if knob is not False else ((), program)
    plain = _in_layouts(program, options, (), program) \
        if knob is not True or not merges else None
    if not merges:
        assert plain is not None
        return plain
    chosen = _in_layouts(program, options, merges, merged)
    return chosen if plain is None else faster_merge(chosen, plain, options["machine"])


def _in_layouts(program: ir.Program, options: Mapping[str, Any],
                       merges: Sequence[Merge], merged: ir.Program) -> Schedule:
    """The pipeline's choice of channel blocks (see ``cpu_pipeline``) after ``merges``
    (``merged``: ``program`` with them applied).

    Merged loops are weighed in the def's own layout only, against the best of both
    layouts unmerged. A merge serves the own layout, whose vector loop then runs along the
    whole run (a 1x1 convolution's 3136 pixels at 56x56, where a row was 3.5 vectors); in
    channel blocks the vectors run along the channels and the pixels are the register
    tile's rows, which a merge changes little. Measured (``scripts/dev/compare_commits.py``, 3
    rounds, call time merged in blocks over unmerged in blocks): ResNet-50 layers 14 and
    18 (14x14) 1.12 and 1.18, MobileNetV2 layers 17, 18, 22 1.01-1.07; and each candidate
    is a whole lowering (ResNet-50 layer 18 lowered in 0.82 s with it, 0.38 without any
    merge)."""
    machine, block = options["machine"], options["knobs"].block
    if block == 0:
        return _optimized(program, options, merges, ())
    if block is not None or merges:
        pp = model_of(merged)
        packs = plan_layout(pp, machine, block) if block is not None \
            else own_layout(pp, machine)
        return _optimized(program, options, (*merges, *packs), layout_notes(pp, machine))
    own, blocked = layout_candidates(program, options)
    return own if blocked is None else faster_layout(blocked, own, machine)


def layout_candidates(program: ir.Program, options: Mapping[str, Any]
                      ) -> tuple[Schedule, Schedule | None]:
    """The CPU pipeline's schedules of ``program`` in its own layout and, where its outputs
    want channel blocks, in those (else None): the two ``cpu.faster_layout`` weighs."""
    machine = options["machine"]
    pp = model_of(program)
    notes = layout_notes(pp, machine)
    own = _optimized(program, options, own_layout(pp, machine), notes)
    blocked = blocked_layout(pp, machine)
    return own, _optimized(program, options, blocked, notes) if blocked else None


def _optimized(program: ir.Program, options: Mapping[str, Any], layout: Sequence[Layout],
               notes: Sequence[str]) -> Schedule:
    sched = laid_out(program, options, True, layout)
    for note in notes:
        sched = sched.note(note)
    return optimize(sched, openmp=options["openmp"], machine=options["machine"],
                    knobs=options["knobs"])


def laid_out(program: ir.Program, options: Mapping[str, Any], isl_base: bool,
             layout: Sequence[Layout], *, borders: bool = True) -> Schedule:
    """isl's schedule (or program order) of ``program`` with ``layout`` applied: when it
    blocks an output the nests restart from program order, so the program is analysed once,
    after its layout; layouts of inputs add their copies' nests to the original's.
    ``borders``: padded reads as border pieces (the CPU's; CUDA guards its reads)."""
    if rewrites_stmts(program, layout):
        laid, names = relayout(program, layout)
        pp, deps = analyze(laid, borders)
        steps = tuple(Step(p.verb, p.args) for p in layout)
        sched = replace(program_order(pp, deps), base="isl" if isl_base else "program-order",
                        fusion=options["fusion"], steps=steps, buffers=names)
        check_legal(sched.map, deps, "the layout")
        return sched
    pp, deps = analyze(program, borders)
    sched = compute_schedule(pp, deps, fusion=options["fusion"]) if isl_base else \
        program_order(pp, deps)
    return sched.relayout(layout) if layout else sched
