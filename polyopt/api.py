"""The public entry point: ``compile`` a TC definition into a callable ``Kernel``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from polyopt import ir, lang
from polyopt.driver import Lowered, check_options, check_schedule, schedule_of
from polyopt.errors import OptionError
from polyopt.runtime.calls import Calls
from polyopt.schedules import Schedule
from polyopt.variants import Variants
from polyopt.views.stats import Stats, schedule_stats


def compile(source: str, name: str | None = None, *, target: str = "c",
            sizes: Mapping[str, int] | None = None, parametric: bool = False,
            schedule: Schedule | str | None = None,
            options: Mapping[str, Any] | None = None) -> Kernel:
    """Compile def ``name`` of ``source`` (TC language) for ``target``.

    ``sizes`` fixes size names and ``<...>`` parameters at compile time. By default every
    distinct tuple of input shapes gets its own specialized kernel, built at its first call;
    with ``parametric=True`` one size-generic kernel serves every shape.
    """
    if not isinstance(source, str):
        raise OptionError(f"source must be a string of TC definitions, not {type(source).__name__}")
    opts = check_options(options, target)
    check_schedule(schedule)
    return Kernel(source, name, dict(sizes or {}), parametric, schedule, opts)


def schedule(source: str, name: str | None = None, *, auto: bool | str = True,
             sizes: Mapping[str, int] | None = None,
             options: Mapping[str, Any] | None = None, target: str = "c") -> Schedule:
    """The schedule of def ``name``, to transform and pass to ``compile(schedule=...)``.

    ``auto=True`` is what ``compile`` would use for ``target``; ``"isl"`` is isl's scheduler
    before the CPU or GPU pipeline; ``False`` is program order. Without ``sizes`` it is
    size-generic.
    """
    if not isinstance(source, str):
        raise OptionError(f"source must be a string of TC definitions, not {type(source).__name__}")
    return schedule_of(source, name, sizes, check_options(options, target), auto)



class Kernel:
    """A compiled definition. Call it with numpy arrays in signature order.

    A facade: its variants (``polyopt.variants``: the lowering at the compile-time sizes and
    one per tuple of sizes a call brings) and its calls (``polyopt.runtime.calls``: inputs
    checked, a call plan per tuple of input shapes, the hot path in C)."""

    def __init__(self, source: str, name: str | None, sizes: dict[str, int], parametric: bool,
                 schedule: Schedule | str | None, options: dict[str, Any]) -> None:
        definition = lang.define(source, name)  # parsed here, once
        self.name = definition.name
        constants = options.get("constants", ())
        inputs = [d.name for d in definition.syntax.inputs]
        unknown = [c for c in constants if c not in inputs]
        if unknown:
            raise OptionError(f"option constants names {', '.join(unknown)}, not an input of "
                              f"def '{self.name}'; its inputs: {', '.join(inputs)}")
        self._variants = Variants(definition, sizes, parametric, schedule, options)
        self._calls = Calls(self.name, definition.syntax.inputs, sizes,
                            options["target"] == "cuda", self._variants.variant, constants)

    # -- introspection -------------------------------------------------------------------
    @property
    def program(self) -> ir.Program:
        """The def's program at the compile-time sizes, as written: the tensors its callers
        pass and receive. What the kernel computes after its layout (packed copies, merged
        loops: ``Schedule.merge``) is ``lowered().program``."""
        return self._variants.program()

    @property
    def source(self) -> str:
        """Generated code: specialized when all sizes were given, size-generic otherwise."""
        ready = self._variants.ready  # the lowering's own source, recorded or just made
        return ready.source.text if ready is not None else self.lowered().source.text

    @property
    def schedule(self) -> Schedule:
        return self.lowered().schedule

    @property
    def launch(self) -> list[dict[str, Any]]:
        """CUDA targets: each kernel's name, grid and block (x first), as C expressions of
        the sizes; empty for C."""
        return [ln.describe() for ln in self.lowered().source.launches]

    def stats(self, *, seconds: float | None = None, freq_ghz: float | None = None,
              bandwidth_gbs: float | None = None) -> Stats:
        """Flops, traffic, intensity, footprints, marked loops of the compile-time lowering
        and, for C when every size is known, the roofline (``polyopt.views.stats``).
        ``seconds``: a measured run; ``freq_ghz``, ``bandwidth_gbs``: the ceilings' own."""
        if seconds is not None and not (isinstance(seconds, int | float) and seconds > 0):
            raise OptionError(f"stats: seconds must be a positive number, not {seconds!r}")
        options = self._variants.options
        if options["target"] == "c":
            return schedule_stats(self.lowered().schedule, options["machine"],
                                  seconds=seconds, freq_ghz=freq_ghz,
                                  bandwidth_gbs=bandwidth_gbs)
        got = schedule_stats(self.lowered().schedule, None, seconds=seconds)
        return replace(got, notes=(*got.notes, "no roofline: the machine model is a CPU's"))

    def lowered(self) -> Lowered:
        """Every stage's artifact for the compile-time sizes."""
        return self._variants.lowered()

    # -- calling -------------------------------------------------------------------------
    def build(self) -> Kernel:
        """Compile and load the code for the compile-time sizes now, not at the first call
        (so a first call, or a measurement, runs no C compiler); a kernel whose sizes are
        not all known yet builds at each call's sizes, as before. Returns the kernel."""
        if self._variants.ready is not None:
            self._variants.variant(dict(self._variants.sizes))
        return self

    def __call__(self, *inputs: Any, outputs: Sequence[np.ndarray] | None = None) -> Any:
        calls = self._calls
        if outputs is None:
            hot = calls.hot  # checks, allocates and calls in C; None for other inputs
            if hot is not None:
                result = hot(inputs)
                if result is not None:
                    return result
        return calls(inputs, outputs)

    def __repr__(self) -> str:
        v = self._variants
        return f"<polyopt.Kernel {self.name} sizes={v.sizes} parametric={v.parametric}>"
