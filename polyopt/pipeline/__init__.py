"""The automatic schedules: isl's scheduler, then the CPU or the CUDA pipeline.

- ``auto``: isl's scheduler under a limit (``compute_schedule``), the base of both pipelines;
- ``cpu``: the CPU pipeline (fusion, layouts, tiles, vectors, threads), with ``fusion``,
  ``order`` (loop orders from the cost model), ``register_tile`` (GotoBLAS nests),
  ``blocked`` (blocked layouts), ``parallel``, ``timetile`` and ``diamond`` (time tiles of
  stencils), and ``knobs`` (the decisions a person or the tuner may fix);
- ``gpu``: the CUDA mapping.
"""

from __future__ import annotations

from polyopt.pipeline.auto import FUSION, compute_schedule

__all__ = ["FUSION", "compute_schedule"]
