"""The operator library on the CUDA target, without a GPU: every kernel and variant runs in
the emulator (``target="cuda-emulated"``: the exact CUDA source on the CPU, shared memory
race-checked) against the same float64 references as the C tests."""

from __future__ import annotations

import pytest
from test_kernels import REFERENCES, VARIANTS, Case, run_case


def _first_shapes(cases: dict[str, Case]) -> list[pytest.param]:
    return [pytest.param(key, id=key) for key in cases]


@pytest.mark.cc
@pytest.mark.parametrize("key", _first_shapes(REFERENCES))
def test_kernel_emulated(key: str) -> None:
    case = REFERENCES[key]
    # PolyBench's datasets at MINI only: SMALL adds compile time, not paths.
    for i, shape in enumerate(case.shapes[:1] if case.bind else case.shapes[:2]):
        run_case(case, shape, seed=3000 + i, target="cuda-emulated")


@pytest.mark.cc
@pytest.mark.parametrize("key", _first_shapes(VARIANTS))
def test_variant_emulated(key: str) -> None:
    case = VARIANTS[key]
    run_case(case, case.shapes[0], seed=4000, target="cuda-emulated")
