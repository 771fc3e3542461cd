"""A kernel's variants: the lowering at the compile-time sizes, and one specialized
variant per tuple of sizes a call brings (``parametric``: the one size-generic variant for
all), each lowered once (or loaded from what an earlier process lowered), with the schedule
asked for or the tuning database's best, and kept loaded within ``MAX_VARIANTS``."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from polyopt import ir, lang
from polyopt.codegen.contract import KernelSource
from polyopt.driver import Lowered, check_accesses, lower, lower_or_load
from polyopt.errors import PolyoptWarning, SizesRequiredError
from polyopt.runtime.bounded import bounded_put
from polyopt.runtime.cpu import CpuKernel, flags_for
from polyopt.runtime.cuda import CudaKernel
from polyopt.runtime.emulated import EmulatedKernel
from polyopt.runtime.warm import Compiled
from polyopt.schedules import Schedule
from polyopt.tuning.db import state as database_state
from polyopt.tuning.replay import tuned_schedule

MAX_VARIANTS = 16  # specialized variants, by sizes: each a compiled library, loaded


class Variants:
    """The variants of def ``definition`` at compile-time ``sizes`` with checked
    ``options``; ``schedule``: the one asked for (None: automatic, or the tuned one)."""

    def __init__(self, definition: lang.Definition, sizes: dict[str, int], parametric: bool,
                 schedule: Schedule | str | None, options: dict[str, Any]) -> None:
        self.definition = definition
        self.sizes = sizes
        self.parametric = parametric
        self.options = options
        self._schedule = schedule
        self._variants: dict[tuple[tuple[str, int], ...], tuple[Compiled, Any]] = {}
        self._lock = threading.Lock()
        # Check now what can be checked now, so errors show at compile time; lower now only
        # what a call will use (a size-generic lowering is costly and per-shape calls
        # lower their own specialized variants). What an earlier process lowered (or
        # checked) with the same key is not lowered again: static stays None until asked.
        self.static: Lowered | None = None
        self.ready: Compiled | None = None  # what calls at the compile-time sizes run
        self.declared: ir.Program | None = None  # built on first ask (Kernel.program)
        try:
            program = lang.build_program(definition, sizes=sizes)
        except SizesRequiredError:
            if parametric:  # a size-generic kernel is impossible for this def
                raise
            return
        self.declared = program
        if parametric or not program.sizes or isinstance(schedule, Schedule):
            self.ready, self.static = lower_or_load(  # a user's Schedule is checked here
                program, options, lambda: schedule if schedule is not None or parametric
                else self.tuned(sizes), self.asked())
        else:
            check_accesses(program)

    def __len__(self) -> int:
        """How many variants are loaded now."""
        return len(self._variants)

    def program(self) -> ir.Program:
        """The def's program at the compile-time sizes, as written."""
        if self.declared is None:
            self.declared = lang.build_program(self.definition, sizes=self.sizes)
        return self.declared

    def lowered(self) -> Lowered:
        """Every stage's artifact at the compile-time sizes."""
        with self._lock:
            if self.static is None:  # raises the reason when it cannot be built
                with warnings.catch_warnings():  # shown at compile time already
                    warnings.simplefilter("ignore", PolyoptWarning)
                    self.static = lower(self.definition, self.sizes, self.options,
                                        self._schedule or self.tuned(self.sizes))
            return self.static

    def variant(self, sizes: dict[str, int]) -> tuple[Compiled, Any]:
        """The compiled variant for a call at ``sizes`` and its loaded kernel."""
        key = () if self.parametric else tuple(sorted(sizes.items()))  # one kernel per shape
        hit = self._variants.get(key)
        if hit is not None:
            return hit
        with self._lock:
            if key not in self._variants:
                if self._reuses_static(sizes):
                    assert self.ready is not None
                    compiled = self.ready
                else:
                    with warnings.catch_warnings():  # a def's warnings show at compile
                        warnings.simplefilter("ignore", PolyoptWarning)
                        program = lang.build_program(self.definition, sizes=sizes)
                        compiled, _ = lower_or_load(
                            program, self.options,
                            lambda: self._schedule or self.tuned(sizes), self.asked())
                # An evicted variant's library closes once no plan holds its kernel.
                bounded_put(self._variants, key, (compiled, load(compiled.source,
                                                                 self.options)),
                            MAX_VARIANTS)
            return self._variants[key]

    def tuned(self, sizes: Mapping[str, int]) -> Schedule | None:
        """The tuning database's best schedule for these sizes, when there is one and the
        caller chose neither a schedule nor the size-generic kernel (``tuned`` option)."""
        if not self._may_tune():
            return None
        # Never raises: a record that cannot be used is a TuningWarning and the default.
        return tuned_schedule(self.definition, sizes, self.options["target"], self._database())

    def _may_tune(self) -> bool:
        return self.options.get("tuned", True) is not False and not self.parametric

    def _database(self) -> Path | None:
        """The tuning database the ``tuned`` option names: a path, or None for the user's."""
        tuned = self.options.get("tuned", True)
        return tuned if isinstance(tuned, Path) else None

    def asked(self) -> str | None:
        """What a variant's schedule depends on besides its program and the options, for the
        warm-start key: the schedule asked for and, when the tuning database may choose, its
        state (a few system calls, where a lookup costs ms); None when that cannot be named
        (a Schedule object)."""
        if isinstance(self._schedule, Schedule):
            return None
        if self._schedule is not None or not self._may_tune():
            return f"schedule={self._schedule}"
        return f"tuning={database_state(self._database())}"

    def _reuses_static(self, sizes: dict[str, int]) -> bool:
        """Does the compile-time lowering already serve a call at ``sizes``?"""
        if self.ready is None:
            return False
        return self.parametric or (not self.ready.signature.sizes and sizes == self.sizes)


def load(source: KernelSource, options: Mapping[str, Any]) -> Any:
    """The runtime kernel for ``source``'s target (CpuKernel, EmulatedKernel...)."""
    if source.target == "cuda" and options["target"] == "cuda-emulated":
        return EmulatedKernel(source)
    if source.target == "cuda":
        return CudaKernel(source)  # imports PyCUDA
    return CpuKernel(source, flags_for(options["openmp"], options["cflags"]))
