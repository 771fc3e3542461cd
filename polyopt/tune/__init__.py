"""Autotuning: search spaces (``space``), strategies and the cost model (``search``),
measurement in worker processes (``measure``), the tuning database (``db``) and the
``polyopt.tune(...)`` entry point (``tuner``).

``polyopt.tune`` is both this package and the function ``polyopt.tune(source, ...)``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from polyopt import api
from polyopt.tune.db import Database, Record, default_path, state
from polyopt.tune.key import Key, canonical_hash, machine_id
from polyopt.tune.replay import TuningWarning, tuned_schedule
from polyopt.tune.tuner import TuneResult, tune

api.use_tuning(tuned_schedule, state)  # compile() asks the database through these

__all__ = ["Database", "Key", "Record", "TuneResult", "TuningWarning", "canonical_hash",
           "default_path", "machine_id", "tune"]


class _TuneModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> TuneResult:
        return tune(*args, **kwargs)


sys.modules[__name__].__class__ = _TuneModule
