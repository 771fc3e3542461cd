"""Schedules: isl schedule trees, the automatic scheduler, legality checks."""

from __future__ import annotations

from polyopt.schedule.auto import FUSION, compute_schedule, program_order
from polyopt.schedule.legality import check_legal
from polyopt.schedule.tree import Schedule

__all__ = ["FUSION", "Schedule", "check_legal", "compute_schedule", "program_order"]
