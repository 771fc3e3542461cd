"""The driver: the compilation pipeline, one pure stage after another, and its options.

``source → lang.build_program → poly.build_poly (+ check_bounds) → poly.compute_deps →
schedule → codegen.build_ast → codegen.render``. ``lower`` runs them all and keeps every
artifact, so each stage can be printed (``polyopt compile --emit``, ``POLYOPT_DEBUG``).
``lower_or_load`` first asks the cache for what an earlier process lowered the same program
to (``polyopt.runtime.warm``), and records what it lowers.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import islpy as isl
import numpy as np

from polyopt import config, ir, lang
from polyopt.codegen import Ast, KernelSource, build_ast, render
from polyopt.codegen.cuda import render_cuda
from polyopt.codegen.dialect import dialect_for
from polyopt.costmodel.machine import configured
from polyopt.costmodel.memory import check_scratch
from polyopt.errors import OptionError, PolyoptError, PolyoptWarning, ScheduleError
from polyopt.pipeline import FUSION
from polyopt.pipeline.gpu import GpuMapping, map_to_gpu
from polyopt.pipeline.knobs import Knobs
from polyopt.pipeline.search import cpu_pipeline, laid_out
from polyopt.poly import Deps, PolyProgram, analyze, check_bounds, model_of
from polyopt.poly.relayout import LAYOUT_VERBS, Layout, layout_of, relayout
from polyopt.runtime import warm
from polyopt.runtime.warm import Compiled, Signature
from polyopt.schedules import Schedule
from polyopt.schedules.constants import hoisted
from polyopt.schedules.storage import Modulo, modulo_storage, stored

OPTIONS: dict[str, str] = {
    "fusion": "isl scheduler fusion strategy: 'min', 'smart' (default) or 'max'",
    "openmp": "parallelize the outermost parallel loop with OpenMP (default True)",
    "cflags": "extra C compiler flags, a list of strings",
    "tuned": "use the tuning database's best schedule for these shapes when it has one: "
             "True (default: the user's database), False, or a database's pathlib.Path (or "
             "a polyopt.tuning.Database); see polyopt.tune",
    "knobs": "CPU pipeline decisions to fix (polyopt.pipeline.knobs): mr, nr, kc (register "
             "and reduction tiles), pack, block (NCHW16c convolutions), cache_tile, order, "
             "vector, parallel, split_k (loop order, vector and parallel loops)",
    "gpu": "CUDA mapping options (polyopt.pipeline.gpu.GpuMapping): 'block' (threads per "
           "block, x first, default (32, 8)), 'tiles' (register-tile contractions, default "
           "True), 'tile' (rows, columns, reduction), 'regs' (rows, columns per thread), "
           "'shared' (stage tile operands in shared memory, default True), 'unroll' (the "
           "tile's reduction loop), 'grid' (most blocks per dimension)",
    "constants": "inputs whose values are the same at every call (a model's weights), a "
                 "list of names: the C kernel makes their packed copies when they are new "
                 "(another array, or a new shape) and keeps them, instead of at every call; "
                 "values changed in place are not seen",
    "machine": "machine-model overrides for tile sizes and vector width, e.g. "
               "{'l2_bytes': 1 << 20} or 'vector_bytes=32' (default: the host, see "
               "POLYOPT_MACHINE)",
}
# "cuda-emulated" is the CUDA source run on the CPU with a race checker (no GPU needed).
TARGETS = ("c", "cuda", "cuda-emulated")
# POLYOPT_DEBUG level at which each stage is dumped to stderr.
DEBUG_STAGES = {"ir": 1, "domains": 2, "deps": 2, "schedule": 3, "c": 4}


@dataclass(frozen=True, eq=False)
class Lowered:
    """Every artifact of one compilation."""

    program: ir.Program
    poly: PolyProgram
    deps: Deps
    schedule: Schedule
    ast: Ast
    source: KernelSource

    def emit(self, stage: str) -> str:
        """The text of one stage: ir, domains, deps, schedule, ast or c."""
        texts = {"ir": self.program, "domains": self.poly, "deps": self.deps,
                 "schedule": self.schedule, "ast": self.ast, "c": self.source}
        if stage not in texts:
            raise OptionError(f"unknown stage {stage!r}; valid: {', '.join(texts)}")
        return str(texts[stage])


def check_options(options: Mapping[str, Any] | None, target: str) -> dict[str, Any]:
    """Validated options with defaults filled in."""
    if target not in TARGETS:
        raise OptionError(f"unknown or unsupported target {target!r}; valid targets: "
                          f"{', '.join(TARGETS)}")
    opts: dict[str, Any] = {"fusion": "smart", "openmp": True, "cflags": (), "target": target}
    for key, value in (options or {}).items():
        if key not in OPTIONS:
            valid = "; ".join(f"{k}: {v}" for k, v in OPTIONS.items())
            raise OptionError(f"unknown option {key!r}; valid options are {valid}")
        opts[key] = value
    if opts["fusion"] not in FUSION:
        raise OptionError(f"option fusion={opts['fusion']!r}; valid: {', '.join(FUSION)}")
    if not isinstance(opts["cflags"], (list, tuple)) or not all(
            isinstance(f, str) for f in opts["cflags"]):
        raise OptionError("option cflags must be a list of strings")
    opts["cflags"] = tuple(opts["cflags"])
    if not isinstance(opts["openmp"], bool | np.bool_):  # "no" would be truthy
        raise OptionError(f"option openmp must be True or False, not {opts['openmp']!r}")
    opts["openmp"] = bool(opts["openmp"])
    _check_constants(opts)
    opts["tuned"] = _tuned_option(opts.get("tuned", True))
    opts["machine"] = configured(opts.get("machine"))
    opts["gpu"] = GpuMapping.from_options(opts.get("gpu"))
    opts["knobs"] = Knobs.from_options(opts.get("knobs"))
    return opts


def _check_constants(opts: dict[str, Any]) -> None:
    """The ``constants`` option as a sorted tuple of names, kept only when not empty (so
    every other kernel's options, and cache keys, stay as they were)."""
    names = opts.pop("constants", ())
    if isinstance(names, str) or not isinstance(names, (list, tuple, set, frozenset)) or not all(
            isinstance(n, str) for n in names):
        raise OptionError(f"option constants must be a list of input names, not {names!r}")
    if names:
        opts["constants"] = tuple(sorted(set(names)))


def _tuned_option(value: object) -> bool | Path:
    """The ``tuned`` option: a bool, or a tuning database as a ``pathlib.Path`` or another
    PathLike (a ``polyopt.tuning.Database`` is one); not a str, which might be "no"."""
    if isinstance(value, bool | np.bool_):  # "no" would be truthy: only a real bool says it
        return bool(value)
    path = os.fspath(value) if isinstance(value, os.PathLike) else None
    if not isinstance(path, str) or not path:
        raise OptionError(f"option tuned must be True or False, or a tuning database's path "
                          f"as a pathlib.Path (or a polyopt.tuning.Database), not {value!r}")
    return Path(path)


SCHEDULES = ("auto", "program-order")


def check_schedule(schedule: object) -> None:
    """Refuse a ``schedule=`` argument that is none of None, a name in SCHEDULES or a
    Schedule, when it is given rather than at the first call."""
    if schedule is None or isinstance(schedule, Schedule):
        return
    if not isinstance(schedule, str) or schedule not in SCHEDULES:
        raise OptionError(f"schedule must be {' or '.join(map(repr, SCHEDULES))} or a "
                          f"polyopt.Schedule, not {schedule!r}")


def is_cuda(options: Mapping[str, Any]) -> bool:
    return str(options.get("target", "c")).startswith("cuda")


def lower(definition: lang.Definition, sizes: Mapping[str, int] | None,
          options: Mapping[str, Any], schedule: Schedule | str | None = None) -> Lowered:
    """Run every stage for one def at the given (possibly partial) sizes."""
    return lower_program(lang.build_program(definition, sizes=sizes), options, schedule)


def lower_program(program: ir.Program, options: Mapping[str, Any],
                  schedule: Schedule | str | None = None) -> Lowered:
    try:
        sched = _schedule(program, options, schedule)
        # Layout steps (pack) add tensors and statements: later stages see the schedule's.
        pp, deps = sched.poly, sched.deps
        storage = () if is_cuda(options) else modulo_storage(sched)
        if is_cuda(options):
            ast = build_ast(pp, sched, deps, storage)
            src = render_cuda(ast, specialized=not program.sizes, grid_cap=options["gpu"].grid)
        else:
            ast, src = _render_c(sched, storage, options)
        if not program.sizes:  # every size known: what its first call will allocate
            check_scratch(stored(pp.program, ast.storage), sliced=src.slices)
    except isl.Error as e:  # every isl failure reaches the user with context
        raise PolyoptError(f"internal isl error while compiling '{program.name}': {e}") from e
    lowered = Lowered(pp.program, pp, deps, sched, ast, src)
    _debug_dump(lowered)
    return lowered


def _render_c(sched: Schedule, storage: tuple[Modulo, ...], options: Mapping[str, Any]
              ) -> tuple[Ast, KernelSource]:
    """The C kernel of ``sched``: with constant inputs, the packed copies of them it can make
    once apart (``schedules.constants``), in a function of their own."""
    pp, deps = sched.poly, sched.deps
    split = hoisted(sched, options.get("constants", ()), {m.tensor for m in storage})
    ast = build_ast(pp, sched, deps, storage, only=split.each if split else None)
    once = build_ast(pp, sched, deps, storage, only=split.once) if split else None
    return ast, render(ast, dialect_for(options["machine"]), specialized=not pp.program.sizes,
                       once=once, held=split.buffers if split else ())


def lower_or_load(program: ir.Program, options: Mapping[str, Any],
                  schedule: Callable[[], Schedule | str | None],
                  asked: str | None) -> tuple[Compiled, Lowered | None]:
    """What ``program`` lowers to with ``options`` and the schedule ``schedule()`` gives: an
    earlier process's record when there is one (then no Lowered: nothing was lowered), else
    lowered now and recorded. ``asked`` names what ``schedule()`` depends on (the schedule
    asked for, the tuning database's state); None keeps to lowering (a user's Schedule)."""
    key = warm.variant_key(program, options, asked) if asked is not None else None
    found = warm.load(key) if key is not None else None
    if found is not None:
        for message in found.warnings:  # as the lowering said it
            warnings.warn(message, PolyoptWarning, stacklevel=2)
        return found, None
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lowered = lower_program(program, options, schedule())
    finally:  # what the lowering said before it failed too
        _reemit(caught)
    # the caller's arrays as the def declares them: a merge reshapes them in place
    said = tuple(str(w.message) for w in caught if issubclass(w.category, PolyoptWarning))
    compiled = Compiled(replace(Signature.of(stored(lowered.program, lowered.ast.storage)),
                                inputs=program.inputs, outputs=program.outputs),
                        lowered.source, said)
    # A warm start says polyopt's warnings again (a def whose schedule ran out of isl's
    # budget loads in milliseconds, not the budget's 20 s); another library's warning is not
    # kept, so that def is lowered again, where it is said.
    if key is not None and len(said) == len(caught):
        warm.save(key, compiled)
    return compiled, lowered


def check_accesses(program: ir.Program) -> None:
    """``check_bounds`` of a size-generic program, once per program for this cache."""
    if not warm.is_checked(program):
        check_bounds(model_of(program))
        warm.note_checked(program)


def _reemit(caught: Sequence[warnings.WarningMessage]) -> None:
    """Warn again, as the code that warned would have, what ``lower_or_load`` caught (to
    tell whether the lowering warned): same module, filters and once-per-place registry."""
    for w in caught:
        module = next((m for m in list(sys.modules.values())
                       if getattr(m, "__file__", None) == w.filename), None)
        registry = None if module is None else vars(module).setdefault("__warningregistry__",
                                                                          {})
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno,
                               module=None if module is None else module.__name__,
                               registry=registry, source=w.source)


def base_schedule(program: ir.Program, options: Mapping[str, Any],
                  auto: bool | str, layout: Sequence[Layout] = ()) -> Schedule:
    """``auto=True``: the full automatic pipeline (its own layout first, for the CPU);
    ``"isl"``: isl's scheduler alone; ``False``: program order; each after ``layout``."""
    if auto not in (True, False, "isl"):
        raise OptionError(f"auto must be True, False or 'isl', not {auto!r}")
    if auto is True and not is_cuda(options):
        return cpu_pipeline(program, options)
    sched = laid_out(program, options, auto is not False, layout, borders=not is_cuda(options))
    if auto is not True:
        return sched
    return map_to_gpu(sched, options["gpu"])


def schedule_of(definition: str | lang.Definition, name: str | None,
                sizes: Mapping[str, int] | None, options: Mapping[str, Any],
                auto: bool | str, layout: Sequence[Layout] = ()) -> Schedule:
    """The base schedule (``base_schedule``) of def ``name`` of ``definition`` at
    ``sizes``, with checked ``options``."""
    return base_schedule(lang.build_program(definition, name, sizes), options, auto, layout)


def schedule_from_json(text: str, source: str | lang.Definition, name: str | None = None, *,
                       sizes: Mapping[str, int] | None = None) -> Schedule:
    """Replay a schedule saved with ``Schedule.as_json()`` on def ``name`` of ``source``
    (its leading ``pack`` steps with one analysis)."""
    data, steps = Schedule.parse_steps(text)
    name = name or data.get("def")
    if data.get("base") == "from_isl":  # its base is the isl text it keeps, read again
        if not isinstance(data.get("isl"), str):
            raise ScheduleError("schedule JSON of base 'from_isl' needs its isl text ('isl')")
        return _with_notes(Schedule.from_isl(source, data["isl"], name=name, sizes=sizes)
                           .replay(steps), data)
    bases: dict[str, bool | str] = {"isl": "isl", "program-order": False}
    base = bases.get(str(data.get("base", "")))
    if base is None:
        raise OptionError(f"schedule JSON has unknown base {data.get('base')!r}; "
                          f"valid: 'isl', 'program-order'")
    options = check_options({"fusion": data.get("fusion", "smart")}, "c")
    lead = 0
    while lead < len(steps) and steps[lead].verb in LAYOUT_VERBS and not steps[lead].kwargs:
        lead += 1
    try:
        layout = [layout_of(st.verb, st.args) for st in steps[:lead]]
    except TypeError as e:
        raise ScheduleError(f"bad arguments for schedule verb pack: {e}") from e
    return _with_notes(schedule_of(source, name, sizes, options, base, layout)
                       .replay(steps[lead:]), data)


def _with_notes(out: Schedule, data: Mapping[str, Any]) -> Schedule:
    """``out`` with the cost model's reasons that the JSON kept with its steps."""
    notes = data.get("notes", [])
    return replace(out, notes=tuple(str(n) for n in notes)) if isinstance(
        notes, list) and notes else out



def _schedule(program: ir.Program, options: Mapping[str, Any],
              schedule: Schedule | str | None) -> Schedule:
    if schedule is None or schedule == "auto":
        return base_schedule(program, options, True)
    if schedule == "program-order":
        return base_schedule(program, options, False)
    if isinstance(schedule, Schedule):
        if schedule.poly.program.name != program.name:
            raise ScheduleError(f"the schedule is for def '{schedule.poly.program.name}', "
                                f"not '{program.name}'")
        try:
            laid, _ = relayout(program, schedule.layout)
            pp, deps = analyze(laid, borders=not is_cuda(options))
            return schedule.specialize(pp, deps, dict(program.bound))
        except isl.Error as e:
            raise ScheduleError(f"the schedule does not fit def '{program.name}': {e}") from e
    check_schedule(schedule)
    raise AssertionError(schedule)  # check_schedule refuses everything else


def _debug_dump(lowered: Lowered) -> None:
    level = config.debug_level()
    for stage in (s for s, at in DEBUG_STAGES.items() if at <= level):
        print(f"--- polyopt {lowered.program.name}: {stage} ---\n{lowered.emit(stage)}",
              file=sys.stderr)
