"""A long-lived process stays within bounds (issue 40): a kernel's plans, variants and
scratch, the extents' cache, and the libraries loaded, which close with their last user.
Counted, never timed; ``polyopt bench memory`` shows RSS over 100k calls."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

import polyopt
from polyopt import ir, variants
from polyopt.runtime import calls, compiler
from polyopt.subscripts import call as EINSUM  # the module (polyopt.einsum is the function)

pytestmark = pytest.mark.cc

PARAMETRIC = "def add(float(N,M) A, float(N,M) B) -> (O) { O(i,j) = A(i,j) * B(i,j) + 1.0 }"
MATMUL = "def mm(float(N,K) A, float(K,M) B) -> (C) { C(i,j) +=! A(i,r_k) * B(r_k,j) }"
MAPS = Path("/proc/self/maps")


def map_entries() -> int:
    return len(MAPS.read_text().splitlines())


def test_a_parametric_kernel_at_new_shapes_keeps_its_bounds() -> None:
    kernel = polyopt.compile(PARAMETRIC, parametric=True)
    kernel(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))  # loads its library
    gc.collect()
    before = compiler.loaded_count()
    rng = np.random.default_rng(0)
    for _ in range(3000):
        a = np.ones(tuple(int(n) for n in rng.integers(1, 200, 2)), np.float32)
        kernel(a, a)
        assert len(kernel._calls.plans) <= calls.MAX_PLANS
    assert len(kernel._variants) == 1
    assert compiler.loaded_count() == before
    assert ir._eval_extent.cache_info().currsize <= 4096


def test_a_packed_kernel_keeps_a_few_scratch_sets() -> None:
    kernel = polyopt.compile(MATMUL, parametric=True)
    ready = kernel._variants.ready
    assert ready is not None and ready.signature.locals  # packs A and B
    for n in range(1, 40):
        c = kernel(np.ones((n, 7), np.float32), np.ones((7, n + 3), np.float32))
        np.testing.assert_allclose(c, np.full((n, n + 3), 7.0))
        assert len(kernel._calls._scratch.buffers) <= calls.MAX_SCRATCH


def test_specialized_variants_are_bounded_and_their_libraries_close(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(variants, "MAX_VARIANTS", 2)
    monkeypatch.setattr(calls, "MAX_PLANS", 2)
    kernel = polyopt.compile(PARAMETRIC)
    gc.collect()  # earlier tests' kernels
    before = compiler.loaded_count()
    for n in range(1, 7):
        a = np.full((n, 3), 2.0, np.float32)
        np.testing.assert_allclose(kernel(a, a), np.full((n, 3), 5.0))
        assert len(kernel._variants) <= 2
    gc.collect()
    assert compiler.loaded_count() - before <= 2  # the plans and variants still held
    del kernel
    gc.collect()
    assert compiler.loaded_count() == before


def test_einsum_caches_are_bounded() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        n, k, m = (int(x) for x in rng.integers(1, 30, 3))
        polyopt.einsum("ij,jk->ik", np.ones((n, k), np.float32), np.ones((k, m), np.float32))
    assert len(EINSUM._FAST) <= 256
    for cached in (EINSUM._definition, EINSUM._kernel, EINSUM._generic_kernel):
        info = cached.cache_info()
        assert info.maxsize is not None and info.currsize <= info.maxsize


@pytest.mark.skipif(not MAPS.exists(), reason="needs /proc/self/maps")
def test_deleted_libraries_leave_no_mappings() -> None:
    """200 libraries loaded and dropped: /proc/self/maps is back where it was (each one
    mapped 5 entries while open)."""
    warm = compiler.load_library("int warm(void) { return 1; }", flags=["-O0"])
    assert warm.warm() == 1
    gc.collect()
    base, loaded = map_entries(), compiler.loaded_count()
    for i in range(200):
        lib = compiler.load_library(f"int f{i}(void) {{ return {i}; }}", flags=["-O0"])
        assert lib[f"f{i}"]() == i
        if i == 0:
            assert map_entries() > base
        del lib
    gc.collect()
    assert compiler.loaded_count() == loaded
    assert map_entries() <= base + 2  # the allocator's own arenas may move


@pytest.mark.skipif(not MAPS.exists(), reason="needs /proc/self/maps")
def test_a_deleted_kernel_unloads_its_library() -> None:
    gc.collect()
    base, loaded = map_entries(), compiler.loaded_count()
    kernels = [polyopt.compile(f"def d{k}(float(N) A) -> (O) {{ O(i) = A(i) * {k}.0 }}",
                               parametric=True) for k in range(4)]
    for k, kernel in enumerate(kernels):
        np.testing.assert_allclose(kernel(np.ones(8, np.float32)), np.full(8, float(k)))
    assert compiler.loaded_count() == loaded + 4
    del kernels, kernel
    gc.collect()
    assert compiler.loaded_count() == loaded
    assert map_entries() <= base + 2
