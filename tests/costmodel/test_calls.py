"""What builtin calls cost the CPU model (``polyopt.costmodel.calls``): the measured table,
its agreement with what the C kernels vectorize, and the decisions it moves (the vector
width, whether a loop vectorizes, whether a nest runs in parallel)."""

from __future__ import annotations

import numpy as np
import pytest

import polyopt
from polyopt.codegen import vmath
from polyopt.costmodel import calls, cost
from polyopt.costmodel import lanes as vl
from polyopt.costmodel.machine import Machine
from polyopt.lang.resolve import BUILTINS
from polyopt.pipeline.policy import cpu_policy

MACHINE = ("vector_bytes=64,vector_registers=32,l1d_bytes=32768,l2_bytes=1048576,"
           "l3_bytes=33554432,cores=2")
AVX512 = Machine(vector_bytes=64, vector_registers=32, cores=2, l3_bytes=32 << 20)


def _unary(fn: str) -> str:
    return f"def f(float(N) A) -> (O) {{ O(i) = {fn}(A(i)) }}"


def test_every_builtin_is_measured() -> None:
    assert calls.known() == frozenset(BUILTINS)
    assert set(calls._VECTOR64) == set(calls._VECTOR)  # float64 measured for each


def test_the_table_agrees_with_the_c_kernels_vector_math() -> None:
    """libmvec's functions and polyopt's own have vector variants; a function the table
    calls scalar is neither (its measured 16-lane loop cost 16 scalar calls a vector)."""
    for fn in (*vmath.MVEC, *vmath.OWN, "sqrt", "fmax", "fmin"):
        assert calls.vectorizes(fn), fn
    for fn in ("acos", "lgamma", "tgamma", "cosh", "exp10"):
        assert not calls.vectorizes(fn) and fn not in vmath.MVEC and fn not in vmath.OWN


def test_call_costs_follow_the_width() -> None:
    """libmvec's 16-lane tanhf is cheaper a vector than its 8-lane one; a scalar call is
    per element; a call costs at least one operation."""
    assert calls.call_ops("tanh", 16, 4) < calls.call_ops("tanh", 8, 4)
    assert calls.call_ops("tanh", 8, 8) > 2 * calls.call_ops("tanh", 16, 4)  # float64's
    assert calls.call_ops("acos", 8, 8) == calls.call_ops("acos", 16, 4)  # both scalar
    assert calls.call_ops("tanh", 1, 4) > 3 * calls.call_ops("tanh", 16, 4)
    assert calls.call_ops("acos", 16, 4) == calls.call_ops("acos", 1, 4)
    assert calls.call_ops("fabs", 16, 4) == 1.0


def test_choose_takes_the_fewest_predicted_cycles() -> None:
    """24 iterations: 16 + 8 is two iterations against three of 8 lanes, but with a
    16-lane body five times dearer than an 8-lane one, three 8-lane vectors cost less."""
    assert vl.choose(24, 16)[0].lanes == 16
    dear = {16: 10.0, 8: 2.0, 4: 2.0, 1: 1.0}
    best = vl.choose(24, 16, cost=dear.__getitem__)
    assert best[0].lanes == 8 and best[0].cycles(dear.__getitem__) == 6.0
    assert best[1].cycles(dear.__getitem__) == 12.0


def test_the_model_prices_a_call_by_its_measured_cost() -> None:
    """A tanh loop's compute is its calls': 23 operations a 16-lane vector, not one."""
    policy, sizes = cpu_policy(AVX512), {"N": 4096}

    def compute(source: str) -> float:
        s = polyopt.schedule(source, sizes=sizes, auto=False)
        est = cost.estimate(s.poly, s.root, policy.machine, parallel_trips=policy.parallel_trips)
        assert est is not None
        return est.compute

    scale = compute("def f(float(N) A) -> (O) { O(i) = A(i) * 2 }")
    tanh = compute(_unary("tanh"))
    per_vector = calls.call_ops("tanh", 16, 4) / AVX512.fma_units
    assert tanh - scale == pytest.approx(4096 / 16 * (per_vector - 0.5), rel=0.01)


def test_a_loop_calling_a_scalar_function_is_not_a_vector_loop() -> None:
    s = polyopt.schedule(_unary("acos"), sizes={"N": 1000}, options={"machine": MACHINE})
    assert any("not vectorized: it calls acos" in n for n in s.notes), s.notes
    k = polyopt.compile(_unary("acos"), sizes={"N": 1000}, options={"machine": MACHINE})
    assert "omp simd" not in k.source
    a = np.random.default_rng(0).uniform(-1, 1, 1000).astype(np.float32)
    np.testing.assert_allclose(k(a), np.arccos(a), rtol=1e-6)


@pytest.mark.parametrize(("fn", "parallel"), [("acos", True), ("fabs", False)])
def test_a_calls_cost_moves_the_parallel_decision(fn: str, parallel: bool) -> None:
    """4000 elements: 4000 scalar acos calls (about 28 cycles each) are worth a fork and
    join on 2 cores; 4000 absolute values (250 vectors) are not."""
    s = polyopt.schedule(_unary(fn), sizes={"N": 4000}, options={"machine": MACHINE})
    why = next(n for n in s.notes if "thread" in n or ": parallel" in n)
    assert (": parallel" in why) is parallel, why
