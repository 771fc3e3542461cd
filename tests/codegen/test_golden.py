"""Golden files: the generated C of a few kernels, byte for byte.

A change in code generation shows up here as a diff to review. After an intended change,
regenerate with ``POLYOPT_UPDATE_GOLDEN=1 python3 -m pytest tests/codegen``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import polyopt
from polyopt import kernels

# Schedules and register tiles follow the machine model; the golden files assume this one
# (AVX-512, 32 KiB L1d, 1 MiB L2, 2 cores), whatever machine runs the test.
MACHINE = ("vector_bytes=64,vector_registers=32,cores=2,l1d_bytes=32768,l2_bytes=1048576,"
           "l3_bytes=33554432,line_bytes=64")


@pytest.fixture(autouse=True)
def fixed_machine(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("POLYOPT_MACHINE", MACHINE)
    yield

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "matmul": ("matmul", {"M": 64, "K": 32, "N": 48}),
    "conv2d_pad1": ("conv2d", {"N": 1, "C": 3, "H": 8, "W": 8, "F": 4, "KH": 3, "KW": 3}),
    "softmax": ("softmax", {"N": 16, "D": 10}),
    "syrk_parametric": ("polybench_syrk", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_c_matches_golden(case: str) -> None:
    name, sizes = CASES[case]
    src = kernels.get(name, padding=1) if name == "conv2d" else kernels.get(name)
    text = polyopt.compile(src, name, sizes=sizes, parametric=sizes is None).source
    text = text[text.index("int polyopt_"):]  # the shared prelude is not what varies
    path = GOLDEN / f"{case}.c"
    if os.environ.get("POLYOPT_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with POLYOPT_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"generated C for {case} changed; see {path}"


def test_generation_is_deterministic() -> None:
    src = kernels.get("matmul")
    assert polyopt.compile(src).source == polyopt.compile(src).source
