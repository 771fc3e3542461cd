"""The automatic schedules: isl's scheduler, then the CPU or the CUDA pipeline.

- ``auto``: isl's scheduler under a limit (``compute_schedule``), the base of both pipelines;
- ``search``: the CPU pipeline's outer search (a def lowered in each layout, merged or not,
  the cost model keeping the fastest), and ``laid_out``, every candidate's base;
- ``cpu``: the CPU pipeline (fusion, layouts, tiles, vectors, threads), with ``fusion``,
  ``order`` (loop orders from the cost model), ``register_tile`` (GotoBLAS nests),
  ``blocked`` (blocked layouts), ``parallel``, ``timetile`` and ``diamond`` (time tiles of
  stencils), and ``knobs`` (the decisions a person or the tuner may fix);
- ``policy``: the CPU pipeline's thresholds (``CpuPolicy``, ``cpu_policy``), which the tuner
  reads too;
- ``gpu``: the CUDA mapping, with ``gpu_policy`` (its thresholds, ``GpuPolicy``).
"""

from __future__ import annotations

from polyopt.pipeline.auto import FUSION, compute_schedule

__all__ = ["FUSION", "compute_schedule"]
