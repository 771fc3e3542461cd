"""Array contraction (schedules/contraction.py): the program-order check of a local's reads
decides as the check under each schedule did."""

from __future__ import annotations

import pytest

import polyopt
from polyopt import kernels
from polyopt.errors import ScheduleError
from polyopt.schedules import contraction
from polyopt.schedules.tree import loops

CONV = kernels.source("conv2d")


def _decisions(s) -> list[tuple[str, str, object]]:
    """``contracted_dim`` for every local at every loop of ``s``: the dimension, or the
    first words of the refusal."""
    out = []
    for t in s.poly.program.locals:
        for lp in loops(s.root):
            try:
                got: object = contraction.contracted_dim(lp, s.poly, t.name, s.map)
            except ScheduleError as e:
                got = str(e).split(":")[1][:40]
            out.append((t.name, lp.name, got))
    return out


@pytest.mark.parametrize("src, name, sizes", [
    (kernels.source("softmax"), "softmax", dict(N=6, D=10)),
    (CONV, "conv2d", dict(N=1, C=16, H=5, W=5, F=32, KH=3, KW=3, PH=1, PW=1)),
])
def test_program_order_check_decides_as_the_schedules_did(src, name, sizes, monkeypatch):
    """The pipeline's schedule (with its blocked locals for the convolution) and program
    order, every local at every loop: the same dimension or refusal with the program-order
    check as with the check under each schedule alone."""
    schedules = [polyopt.schedule(src, name, sizes=sizes),
                 polyopt.schedule(src, name, auto=False, sizes=sizes)]
    fast = [_decisions(s) for s in schedules]
    assert any(isinstance(d, int) for ds in fast for _, _, d in ds)
    monkeypatch.setattr(contraction, "_sourced", lambda poly, tensor: False)
    assert [_decisions(s) for s in schedules] == fast


def test_every_read_of_a_local_sees_a_write_in_program_order():
    """The language refuses a local read before it is written (and reads outside what is
    written): the program-order check holds, so the check under the schedule (left for
    when it does not) is not run."""
    conv = polyopt.schedule(CONV, "conv2d", sizes=dict(N=1, C=16, H=5, W=5, F=32, KH=3, KW=3,
                                                       PH=1, PW=1))
    assert sorted(t.name for t in conv.poly.program.locals) == ["I_pack", "O_pack", "Wt_pack"]
    assert all(contraction._sourced(conv.poly, t.name) for t in conv.poly.program.locals)
    soft = polyopt.schedule(kernels.source("softmax"), "softmax", sizes=dict(N=6, D=10))
    assert all(contraction._sourced(soft.poly, t.name) for t in soft.poly.program.locals)
