"""Autotuning, in two layers.

The read path, below ``polyopt.api`` (``compile`` asks it directly for each new shape):

key       what a record's times are valid for: a canonical hash of the definition, shapes,
          dtypes, target, machine, version
db        the tuning database (SQLite, WAL): records, the best per key, the nearest shapes
lookup    which database a compile reads, and its best record for a definition at sizes
replay    that record's schedule replayed and checked, or the default with a TuningWarning

The search, above ``polyopt.api`` (``polyopt.tune(...)`` is ``tuner.tune``):

space     a definition's knobs: the configurations to try
features  what isl and the cost model say of a configuration before it is measured
model     the learned cost model (ridge or boosted trees)
history   the measurements of one search
guided    the model-guided strategy; ``search`` the strategies (random, genetic, model)
measure   compiling, checking and timing candidates in worker processes (``worker``:
          ``python -m polyopt.tuning.worker``)
tuner     ``tune``: the search, its records, the confirmation of the fastest

This package's own names are the read path's, so that importing it loads no search.
Named ``tuning`` so that no package shares the name of the function ``polyopt.tune``.
"""

from __future__ import annotations

from polyopt.tuning.db import Database, DatabaseError, Record, default_path
from polyopt.tuning.key import Key, canonical_hash, machine_id
from polyopt.tuning.replay import TuningWarning

__all__ = ["Database", "DatabaseError", "Key", "Record", "TuningWarning", "canonical_hash",
           "default_path", "machine_id"]
