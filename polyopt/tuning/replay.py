"""The tuning database's best schedule for one compile, replayed and checked.

A record is data anyone may have written (``polyopt db import`` takes files from other
machines; SQLite keeps whatever a column was given), so ``polyopt.compile`` treats it as
untrusted input: a database it cannot read, a record it cannot parse, or a schedule that
does not replay, has a size or factor no search would pick, or would allocate more than the
machine's memory, is not used. Compile then takes the default schedule and says why in one
:class:`TuningWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import islpy as isl

from polyopt import lang
from polyopt.costmodel.memory import check_scratch
from polyopt.driver import schedule_from_json
from polyopt.errors import PolyoptError, ScheduleError
from polyopt.schedules import Schedule, Step
from polyopt.schedules.transform import MAX_FULL_UNROLL
from polyopt.tuning.db import Database, Record
from polyopt.tuning.lookup import best_record, has_database, make_key

# Far above any tile, split or packing factor the pipeline or the tuner picks (at most 512),
# and small enough for isl and for the C ints of the generated code.
MAX_FACTOR = 1 << 16
# verb -> {argument position: the largest value}: sizes and factors, each from 1 to that.
FACTORS: dict[str, dict[int, int]] = {
    "split": {1: MAX_FACTOR}, "pack": {2: MAX_FACTOR},
    "unroll": {1: MAX_FULL_UNROLL}, "unroll_and_jam": {1: MAX_FULL_UNROLL},
    "gpu_tile": {1: MAX_FULL_UNROLL}}
# A replay runs every verb's checks on the record's arguments; those raise PolyoptError for
# what they recognize, and anything else a malformed argument trips on is the same case.
REPLAY_ERRORS = (PolyoptError, isl.Error, ArithmeticError, LookupError, TypeError,
                 ValueError, AttributeError, RecursionError)


class TuningWarning(UserWarning):
    """A record of the tuning database was not used; the default schedule was.

    Not a PolyoptWarning: those speak about the definition and show once at compile time,
    while this one can come at the first call of a new shape.
    """


def tuned_schedule(definition: lang.Definition, sizes: Mapping[str, int], target: str,
                   db: str | Path | Database | None = None) -> Schedule | None:
    """The best recorded schedule of ``definition`` at ``sizes`` on ``target``, replayed and
    checked; None (with one TuningWarning when a record was there) otherwise."""
    try:
        if not has_database(db):  # most compiles: no front end run for a key
            return None
        # OptionError for a size left unbound: the size-generic kernel has no key.
        key = make_key(definition, None, sizes, target)
    except PolyoptError:  # the definition at these sizes: compile itself reports that
        return None
    try:
        record = best_record(key, db)
    except PolyoptError as e:  # an unreadable database or a malformed record
        _warn(f"cannot read the tuning database ({e})")
        return None
    if record is None:
        return None
    try:
        if record.key.id != key.id:
            raise ScheduleError(f"its key fields ({record.key.as_dict()}) do not give its key "
                                f"id {key.id}")
        return replay(record, definition, sizes)
    except REPLAY_ERRORS as e:
        what = f"{type(e).__name__}: " if not isinstance(e, PolyoptError) else ""
        _warn(f"the best record of def '{key.def_name}' at these shapes (`polyopt db show "
              f"{key.id[:12]}`) cannot be used: {what}{str(e)[:400]}")
        return None


def replay(record: Record, definition: lang.Definition, sizes: Mapping[str, int]) -> Schedule:
    """``record``'s schedule on def ``name`` at ``sizes``, after checking its steps' sizes
    and factors, and the memory its scratch tensors take there."""
    _, steps = Schedule.parse_steps(record.schedule_json)
    for step in steps:
        check_step(step)
    schedule = schedule_from_json(record.schedule_json, definition, sizes=sizes)
    check_scratch(schedule.poly.program, sliced={t for t, _, _ in schedule.contractions})
    return schedule


def check_step(step: Step) -> None:
    """Plain arguments (names, ints, bools, short lists), ints of at most MAX_FACTOR, and
    each size or factor from 1 to its verb's limit; ScheduleError otherwise."""
    limits = FACTORS.get(step.verb, {})
    if step.verb == "tile":  # one level of sizes per argument after the loops
        limits = {i: MAX_FACTOR for i in range(1, len(step.args))}
    for i, arg in enumerate(step.args):
        _check_plain(arg, step)
        if i in limits:
            _check_factor(arg, limits[i], step)
    for key, value in step.kwargs:
        _check_plain(value, step)
        if step.verb == "gpu_tile" and key == "unroll" and value is not None:
            _check_factor(value, MAX_FULL_UNROLL, step)


def _check_plain(value: Any, step: Step, depth: int = 0) -> None:
    if isinstance(value, (list, tuple)) and depth < 2:
        for v in value:
            _check_plain(v, step, depth + 1)
    elif isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > MAX_FACTOR:
            raise ScheduleError(f"{_name(step)}: {value} is beyond {MAX_FACTOR}")
    elif value is not None and not isinstance(value, (str, bool)):
        raise ScheduleError(f"{_name(step)}: argument {str(value)[:40]} is not a loop or "
                            f"tensor name, an int or a bool")


def _check_factor(value: Any, most: int, step: Step) -> None:
    values = value if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= most:
            raise ScheduleError(f"{_name(step)}: size or factor {str(v)[:40]} is not an int "
                                f"from 1 to {most}")


def _name(step: Step) -> str:
    return f"{step.verb}{tuple(step.args)!r}"[:120]


def _warn(message: str) -> None:
    warnings.warn(f"polyopt: {message}; compiling with the default schedule", TuningWarning,
                  stacklevel=3)
