"""Markers that skip with a reason when a tool is missing: ``cc`` (the system C compiler),
``cuda`` (nvcc) and ``gpu`` (PyCUDA and an NVIDIA GPU)."""

from __future__ import annotations

import functools
import importlib
import os
import shlex
import shutil

import pytest

from polyopt.runtime.nvcc import nvcc_path

# An AVX-512 core with a 32 KB, 8-way L1 (Skylake-SP's, Zen 4's) and a 1 MB L2: every field a
# schedule test's decision reads from the caches is set, so that the host does not pick them
# (a 48 KB 12-way L1 left its ways to 12, which spread rows 4 KB apart over its sets).
AVX512 = ("vector_bytes=64,vector_registers=32,l1d_bytes=32768,l1d_ways=8,"
          "l2_bytes=1048576")

# A host's measured profile (``polyopt machine --calibrate``) would make schedules depend on
# the machine the tests run on beyond what sysfs says; tests of the profile set their own.
os.environ["POLYOPT_PROFILE"] = "none"


def have_cc() -> bool:
    """Whether the compiler the runtime would use (``CC`` or ``cc``) is on PATH."""
    words = shlex.split(os.environ.get("CC", "")) or ["cc"]
    return shutil.which(words[0]) is not None


@functools.cache
def gpu_missing() -> str | None:
    """Why the ``gpu`` tests cannot run here, or None."""
    try:
        importlib.import_module("pycuda.autoprimaryctx")
    except ImportError as e:
        return f"needs PyCUDA (pip install -e '.[cuda]'): {e}"
    except Exception as e:  # PyCUDA's driver errors: no driver library, no device
        return f"needs an NVIDIA GPU: {e}"
    return None


@pytest.fixture(autouse=True)
def _skip_without_tools(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("cc") and not have_cc():
        pytest.skip("needs the system C compiler: `cc` (or $CC) is not on PATH")
    if request.node.get_closest_marker("cuda") and nvcc_path() is None:
        pytest.skip("needs nvcc (set NVCC or CUDA_HOME, or put it on PATH)")
    if request.node.get_closest_marker("gpu") and gpu_missing():
        pytest.skip(str(gpu_missing()))


@pytest.fixture
def avx512(monkeypatch: pytest.MonkeyPatch) -> object:
    """Schedules and register tiles for an AVX-512 machine, whatever machine runs the test."""
    monkeypatch.setenv("POLYOPT_MACHINE", AVX512)
    yield
