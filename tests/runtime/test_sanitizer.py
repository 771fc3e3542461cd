"""Generated kernels under AddressSanitizer: stack slices of contracted locals, which the
scratch guard (``POLYOPT_GUARD_SCRATCH``) cannot cover, are sized by the tails their
register tiles' partial tiles read (``AstWalker._slack``). Each case runs in a subprocess
with ASan preloaded and the kernel built with ``-fsanitize=address``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest


def _gcc_lib(name: str) -> str | None:
    """The path of one of GCC's runtime libraries, or None (no such library, or not GCC)."""
    if shutil.which("gcc") is None or os.environ.get("CC", "cc") not in ("cc", "gcc"):
        return None
    path = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True,
                          text=True).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


LIBASAN = _gcc_lib("libasan.so")
# Preloaded after ASan, so its __cxa_throw interceptor finds the real one: islpy throws
# C++ exceptions, and without it ASan aborts at the first ("CHECK failed").
LIBSTDCXX = _gcc_lib("libstdc++.so.6")
pytestmark = pytest.mark.skipif(LIBASAN is None, reason="no GCC AddressSanitizer runtime")

# A depthwise convolution whose input is packed into NCHW16c slices on the stack, one per
# channel block; its last row tiles are partial and read up to 477 elements past a slice.
DEPTHWISE = """
    import numpy as np, polyopt
    from polyopt.codegen import walker
    if {drop}:
        walker.AstWalker._slack = lambda self, tensor: 0
    src = '''def dw(float(N,C,H,W) I, float(C,KH,KW) Wt) -> (O) {{
        O(n,c,h,w) +=! I(n, c, h + r_kh - 1, w + r_kw - 1) * Wt(c, r_kh, r_kw)
            where pad I(0, 0, 1, 1)
    }}'''
    k = polyopt.compile(src, sizes={{"N": 1, "C": 32, "H": 20, "W": 20, "KH": 3, "KW": 3}})
    assert "po_slice_I_pack" in k.source and dict(k.lowered().source.tails)["I_pack"] > 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 32, 20, 20), np.float32)
    w = rng.standard_normal((32, 3, 3), np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = sum(xp[:, :, i:i + 20, j:j + 20] * w[None, :, i, j, None, None]
              for i in range(3) for j in range(3))
    np.testing.assert_allclose(k(x, w), ref, rtol=1e-4, atol=1e-4)
    print("ok")
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    assert LIBASAN is not None
    preload = " ".join(x for x in (LIBASAN, LIBSTDCXX) if x)
    env = {**os.environ, "LD_PRELOAD": preload, "ASAN_OPTIONS": "detect_leaks=0",
           "POLYOPT_NO_CACHE": "1",
           "POLYOPT_CFLAGS": "-fsanitize=address -fno-omit-frame-pointer"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, env=env)


def test_stack_slices_hold_what_partial_tiles_read() -> None:
    got = run(DEPTHWISE.format(drop=False))
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stderr[-2000:]
    without = run(DEPTHWISE.format(drop=True))  # ASan sees the reads the tails cover
    assert without.returncode != 0 and "AddressSanitizer" in without.stderr


def test_cuda_tiles_without_shared_memory_stay_in_bounds() -> None:
    """Emulated CUDA: a register tile that reads its operands from global memory (no
    shared copies, zero outside) must not read the rows and columns of a partial tile's
    outside outputs; 70 x 33 x 90 leaves every 128 x 128 tile partial."""
    got = run("""
        import numpy as np, polyopt
        src = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
        k = polyopt.compile(src, target="cuda-emulated", options={"gpu": {"shared": False}})
        rng = np.random.default_rng(3)
        a = rng.standard_normal((70, 33), np.float32)
        b = rng.standard_normal((33, 90), np.float32)
        np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-4, atol=1e-4)
        print("ok")
    """)
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stderr[-2000:]
