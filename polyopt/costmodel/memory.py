"""The scratch memory a schedule's kernel needs, and the most any kernel may ask for.

A call allocates every local tensor of the scheduled program (packed copies of inputs,
blocked outputs, intermediates) at its first call of each shape, zeroed, unless the kernel
keeps that local as per-iteration slices. A packing factor far above the dimension it
blocks pads that dimension to a whole block: ``pack("B", 1, 10**9)`` asks for
``K * 10**9`` elements. Checking the sum against the machine's physical memory turns what
would be a numpy MemoryError at every call (or a machine swapping) into one clear
ScheduleError when the schedule is lowered.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

from polyopt import dtypes, ir
from polyopt.errors import ScheduleError
from polyopt.host import physical_memory


def scratch(program: ir.Program, sizes: Mapping[str, int],
            sliced: Collection[str] = ()) -> list[tuple[int, ir.Tensor, tuple[int, ...]]]:
    """(bytes, tensor, shape) of each local the kernel allocates at ``sizes``, largest
    first; the locals named in ``sliced`` are kept as slices and need no whole tensor."""
    out = []
    for t in program.locals:
        if t.name in sliced:
            continue
        shape = tuple(ir.extent_value(e, sizes) for e in t.shape)
        out.append((math.prod(shape) * dtypes.DTYPES[t.dtype].np.itemsize, t, shape))
    return sorted(out, key=lambda x: -x[0])


def check_scratch(program: ir.Program, sizes: Mapping[str, int] | None = None,
                  sliced: Collection[str] = (), limit: int | None = None) -> None:
    """Raise ScheduleError when the locals of ``program`` (scheduled: its packed copies
    are locals) need more than ``limit`` bytes (default: the physical memory) at
    ``sizes`` (default: the program's own, which must then all be bound)."""
    limit = physical_memory() if limit is None else limit
    if limit is None:
        return
    tensors = scratch(program, sizes or {}, sliced)
    need = sum(n for n, _, _ in tensors)
    if need <= limit:
        return
    _, largest, shape = tensors[0]
    bound = ", ".join(f"{k}={v}" for k, v in sorted({**dict(program.bound),
                                                     **(sizes or {})}.items()))
    raise ScheduleError(
        f"def '{program.name}': its schedule's scratch tensors need {_gib(need)} "
        f"(the largest, {largest.name}, is {largest.dtype} of shape {shape}) at "
        f"{bound or 'these sizes'}, more than this machine's {_gib(limit)} of memory "
        f"(a packing factor far above the dimension it blocks pads that dimension to a "
        f"whole block)")


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.3g} GiB"
