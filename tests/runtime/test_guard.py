"""Scratch that ends at an inaccessible page (``POLYOPT_GUARD_SCRATCH``): a read past a
local faults at once, so partial register tiles are checked to stay within the tails their
kernels ask for. Each case runs in a subprocess, since the failure it looks for is a
segmentation fault."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from polyopt.runtime.guard import guarded_zeros

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="mmap/mprotect guard pages")


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "POLYOPT_GUARD_SCRATCH": "1",
                               "POLYOPT_NO_CACHE": "1", **env})


def test_guarded_zeros_are_zeros_that_fault_one_byte_past_the_end() -> None:
    a = guarded_zeros((3, 5), np.dtype(np.float64))
    assert a.shape == (3, 5) and not a.any()
    a[...] = 1.0  # writable
    got = run("""
        import ctypes, numpy as np
        from polyopt.runtime.guard import guarded_zeros
        a = guarded_zeros((1000,), np.float32)
        ctypes.c_float.from_address(a.ctypes.data + 3996).value  # the last element
        print("last", flush=True)
        ctypes.c_float.from_address(a.ctypes.data + 4000).value  # one past it
    """)
    assert got.stdout.strip() == "last" and got.returncode == -signal.SIGSEGV


# A batched matrix-vector product register-tiled, X copied (the knobs: the cost model predicts its
# plain nest faster): X_pack(i/32, b, j, i%32) is whole blocks along i only, and with 23
# rows of b (no row tile size divides them) the last row tile reads rows of b past its end.
ROWS_PAST_THE_END = """
    import dataclasses, numpy as np, polyopt
    from polyopt.variants import Variants
    from polyopt.pipeline import register_tile
    register_tile.invariant_reads = lambda s, it: 1
    if {drop_tails}:
        variant = Variants.variant
        def without_tails(self, sizes):
            compiled, kernel = variant(self, sizes)
            object.__setattr__(kernel, "source", dataclasses.replace(kernel.source, tails=()))
            return compiled, kernel
        Variants.variant = without_tails
    src = "def bmv(float(B,M,N) X, float(B,N) Y) -> (Z) {{ Z(b,i) +=! X(b,i,r_j) * Y(b,r_j) }}"
    k = polyopt.compile(src, sizes={{"B": 23, "M": 512, "N": 512}},
                        options={{"knobs": {{"register_tile": True, "pack_a": True}}}})
    assert "X_pack" in k.source and dict(k.lowered().source.tails)["X_pack"] > 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal((23, 512, 512), np.float32)
    y = rng.standard_normal((23, 512), np.float32)
    np.testing.assert_allclose(k(x, y), np.einsum("bij,bj->bi", x, y), rtol=1e-4, atol=1e-3)
    print("ok")
"""


def test_partial_tiles_stay_within_the_tails_their_kernel_asks_for() -> None:
    got = run(ROWS_PAST_THE_END.format(drop_tails=False))
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stderr[-2000:]
    without = run(ROWS_PAST_THE_END.format(drop_tails=True))
    assert without.returncode == -signal.SIGSEGV  # the guard sees the reads the tails cover


def test_kernels_with_partial_tiles_run_under_the_guard() -> None:
    """Products and a depthwise convolution whose sizes leave partial register tiles."""
    got = run("""
        import numpy as np, polyopt
        from polyopt import kernels
        rng = np.random.default_rng(1)
        mm = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
        for m, k, n in ((100, 130, 90), (1000, 64, 1000)):
            a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
            got = polyopt.compile(mm, sizes={"M": m, "K": k, "N": n})(a, b)
            np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-3)
        dw = kernels.get("depthwise_conv2d", PH=1, PW=1)
        sizes = {"N": 1, "C": 48, "H": 29, "W": 29, "KH": 3, "KW": 3}
        x = rng.standard_normal((1, 48, 29, 29), np.float32)
        w = rng.standard_normal((48, 1, 3, 3), np.float32)
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        ref = sum(xp[:, :, i:i + 29, j:j + 29] * w[None, :, 0, i, j, None, None]
                  for i in range(3) for j in range(3))
        got = polyopt.compile(dw, "depthwise_conv2d", sizes=sizes)(x, w)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        print("ok")
    """)
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stderr[-2000:]
