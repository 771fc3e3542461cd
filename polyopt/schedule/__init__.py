"""Schedules: loop trees with checked transformations, isl's scheduler, legality."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from polyopt.errors import ScheduleError
from polyopt.schedule.auto import FUSION, compute_schedule, program_order
from polyopt.schedule.legality import carried, check_legal
from polyopt.schedule.schedule import VERBS, Schedule, Step

__all__ = ["FUSION", "VERBS", "Schedule", "Step", "carried", "check_legal", "compute_schedule",
           "program_order"]


class _ScheduleModule(types.ModuleType):
    """``polyopt.schedule`` is both this package and the function ``polyopt.schedule(...)``
    (the public API names both), so the package is callable. The function is the API's
    (a layer above this one), which registers it when imported."""

    function: Callable[..., Schedule] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Schedule:
        if self.function is None:
            raise ScheduleError("polyopt.schedule(...) needs the API: import polyopt")
        return self.function(*args, **kwargs)


sys.modules[__name__].__class__ = _ScheduleModule
