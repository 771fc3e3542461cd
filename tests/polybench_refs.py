"""float64 NumPy references of the PolyBench kernels written as recurrences (kernels/stencil.tc,
kernels/solver.tc and kernels/medley.tc, the datamining ones in kernels/polybench.tc; nussinov's
reference is int32, compared exactly), each following
PolyBench 4.2's loops, with its inputs. ``make(rng, shape) -> (inputs, outputs, reduction
size)`` as in test_kernels.py; the shapes are PolyBench's MINI and SMALL datasets.
``check_kernel`` compiles one and checks it against its reference."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import polyopt
from polyopt import kernels

F32 = np.float32


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(F32)


def _f64(*xs: np.ndarray) -> list[np.ndarray]:
    return [np.array(x, dtype=np.float64) for x in xs]


def jacobi_1d(rng, s):
    a32, b32 = _rand(rng, s["N"]), _rand(rng, s["N"])
    a, b = _f64(a32, b32)
    for _ in range(s["T"]):
        b[1:-1] = 0.33333 * (a[:-2] + a[1:-1] + a[2:])
        a[1:-1] = 0.33333 * (b[:-2] + b[1:-1] + b[2:])
    return (a32, b32), (a, b), 3 * s["T"]


def _five(x: np.ndarray) -> np.ndarray:
    return 0.2 * (x[1:-1, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:] + x[2:, 1:-1] + x[:-2, 1:-1])


def jacobi_2d(rng, s):
    n = s["N"]
    a32, b32 = _rand(rng, n, n), _rand(rng, n, n)
    a, b = _f64(a32, b32)
    for _ in range(s["T"]):
        b[1:-1, 1:-1] = _five(a)
        a[1:-1, 1:-1] = _five(b)
    return (a32, b32), (a, b), 5 * s["T"]


def _heat(x: np.ndarray) -> np.ndarray:
    c = x[1:-1, 1:-1, 1:-1]
    return (0.125 * (x[2:, 1:-1, 1:-1] - 2.0 * c + x[:-2, 1:-1, 1:-1])
            + 0.125 * (x[1:-1, 2:, 1:-1] - 2.0 * c + x[1:-1, :-2, 1:-1])
            + 0.125 * (x[1:-1, 1:-1, 2:] - 2.0 * c + x[1:-1, 1:-1, :-2]) + c)


def heat_3d(rng, s):
    n = s["N"]
    a32, b32 = _rand(rng, n, n, n), _rand(rng, n, n, n)
    a, b = _f64(a32, b32)
    for _ in range(s["T"]):
        b[1:-1, 1:-1, 1:-1] = _heat(a)
        a[1:-1, 1:-1, 1:-1] = _heat(b)
    return (a32, b32), (a, b), 7 * s["T"]


def fdtd_2d(rng, s):
    nx, ny, t = s["NX"], s["NY"], s["T"]
    ex32, ey32, hz32, fict32 = (_rand(rng, nx, ny), _rand(rng, nx, ny), _rand(rng, nx, ny),
                                _rand(rng, t))
    ex, ey, hz, fict = _f64(ex32, ey32, hz32, fict32)
    for k in range(t):
        ey[0, :] = fict[k]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return (ex32, ey32, hz32, fict32), (ex, ey, hz), 6 * t


def seidel_2d(rng, s):
    """Each row's sweep x[j] = (c[j] + x[j-1]) / 9 is solved as one matrix product: x =
    P @ c with P[j, m] = 9^-(j-m+1) below the diagonal (a Python loop over every point took
    seconds at SMALL)."""
    n = s["N"]
    a32 = _rand(rng, n, n)
    (a,) = _f64(a32)
    d = np.arange(n - 2)
    power = np.subtract.outer(d, d) + 1
    p = np.where(power >= 1, 9.0 ** -np.maximum(power, 1), 0.0)
    for _ in range(s["T"]):
        for i in range(1, n - 1):
            up, row, down = a[i - 1], a[i].copy(), a[i + 1]
            c = (up[:-2] + up[1:-1] + up[2:] + row[1:-1] + row[2:]
                 + down[:-2] + down[1:-1] + down[2:])
            c[0] += row[0]
            a[i, 1:-1] = p @ c
    return (a32,), (a,), 9 * s["T"]


def trisolv(rng, s):
    n = s["N"]
    lo = (np.tril(_rand(rng, n, n)) + np.eye(n, dtype=F32) * n).astype(F32)
    b32 = _rand(rng, n)
    low, b = _f64(lo, b32)
    x = np.zeros(n)
    for i in range(n):
        x[i] = (b[i] - low[i, :i] @ x[:i]) / low[i, i]
    return (lo, b32), (x,), n


def _lu(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    n = len(a)
    for i in range(n):
        for j in range(i):
            a[i, j] = (a[i, j] - a[i, :j] @ a[:j, j]) / a[j, j]
        a[i, i:] -= a[i, :i] @ a[:i, i:]
    return a


def _dominant(rng: np.random.Generator, n: int) -> np.ndarray:
    return (_rand(rng, n, n) + np.eye(n, dtype=F32) * n).astype(F32)


def lu(rng, s):
    a32 = _dominant(rng, s["N"])
    (a,) = _f64(a32)
    return (a32,), (_lu(a),), s["N"]


def cholesky(rng, s):
    n = s["N"]
    b = _rand(rng, n, n)
    a32 = (b @ b.T / n + np.eye(n, dtype=F32)).astype(F32)
    (a,) = _f64(a32)
    out = a.copy()
    for i in range(n):
        for j in range(i):
            out[i, j] = (out[i, j] - out[i, :j] @ out[j, :j]) / out[j, j]
        out[i, i] = np.sqrt(out[i, i] - out[i, :i] @ out[i, :i])
    return (a32,), (out,), n


def durbin(rng, s):
    """r is an autocorrelation (0.5^k, perturbed), so the Toeplitz system is positive
    definite and every step's beta stays away from 0."""
    n = s["N"]
    r32 = (0.5 ** np.arange(1, n + 1) * (1 + 0.01 * rng.uniform(-1, 1, n))).astype(F32)
    (r,) = _f64(r32)
    y = np.zeros(n)
    y[0], beta, alpha = -r[0], 1.0, -r[0]
    for k in range(1, n):
        beta = (1 - alpha * alpha) * beta
        alpha = -(r[k] + r[k - 1::-1][:k] @ y[:k]) / beta
        y[:k] = y[:k] + alpha * y[k - 1::-1][:k]
        y[k] = alpha
    return (r32,), (y,), n


def ludcmp(rng, s):
    n = s["N"]
    a32, b32 = _dominant(rng, n), _rand(rng, n)
    a, b = _f64(a32, b32)
    f = _lu(a)
    y = np.zeros(n)
    for i in range(n):
        y[i] = b[i] - f[i, :i] @ y[:i]
    x = np.zeros(n)
    for i in reversed(range(n)):
        x[i] = (y[i] - f[i, i + 1:] @ x[i + 1:]) / f[i, i]
    return (a32, b32), (x,), n


def gramschmidt(rng, s):
    m, n = s["M"], s["N"]
    a32 = _rand(rng, m, n)
    (a,) = _f64(a32)
    r, q = np.zeros((n, n)), np.zeros((m, n))
    for k in range(n):
        r[k, k] = np.sqrt(a[:, k] @ a[:, k])
        q[:, k] = a[:, k] / r[k, k]
        r[k, k + 1:] = q[:, k] @ a[:, k + 1:]
        a[:, k + 1:] -= np.outer(q[:, k], r[k, k + 1:])
    return (a32,), (a, r, q), m * n


def covariance(rng, s):
    d32 = _rand(rng, s["N"], s["M"])
    (d,) = _f64(d32)
    return (d32,), (np.cov(d, rowvar=False),), s["N"]


def correlation(rng, s):
    n = s["N"]
    d32 = _rand(rng, n, s["M"])
    (d,) = _f64(d32)
    mean = d.mean(axis=0)
    sd = np.sqrt(((d - mean) ** 2).mean(axis=0))
    sd = np.where(sd <= 0.1, 1.0, sd)
    z = (d - mean) / (np.sqrt(n) * sd)
    corr = z.T @ z
    np.fill_diagonal(corr, 1.0)
    return (d32,), (corr,), n


# PolyBench 4.2's MINI and SMALL datasets (gramschmidt's MINI has M=20 < N=30, where the
# columns past the 20th are dependent and their norms are rounding noise: M and N swapped).
CASES = {
    "jacobi_1d": (jacobi_1d, ({"T": 20, "N": 30}, {"T": 40, "N": 120})),
    "jacobi_2d": (jacobi_2d, ({"T": 20, "N": 30}, {"T": 40, "N": 90})),
    "heat_3d": (heat_3d, ({"T": 20, "N": 10}, {"T": 40, "N": 20})),
    "fdtd_2d": (fdtd_2d, ({"T": 20, "NX": 20, "NY": 30}, {"T": 40, "NX": 60, "NY": 80})),
    "seidel_2d": (seidel_2d, ({"T": 20, "N": 40}, {"T": 40, "N": 120})),
    "trisolv": (trisolv, ({"N": 40}, {"N": 120})),
    "lu": (lu, ({"N": 40}, {"N": 120})),
    "cholesky": (cholesky, ({"N": 40}, {"N": 120})),
    "durbin": (durbin, ({"N": 40}, {"N": 120})),
    "ludcmp": (ludcmp, ({"N": 40}, {"N": 120})),
    "gramschmidt": (gramschmidt, ({"M": 30, "N": 20}, {"M": 80, "N": 60})),
    "polybench_covariance": (covariance, ({"N": 32, "M": 28}, {"N": 100, "M": 80})),
    "polybench_correlation": (correlation, ({"N": 32, "M": 28}, {"N": 100, "M": 80})),
}


def syr2k(rng, s):
    n, m = s["N"], s["M"]
    alpha, beta = (np.array(rng.uniform(0.5, 1.5), dtype=F32) for _ in range(2))
    a32, b32, c32 = _rand(rng, n, m), _rand(rng, n, m), _rand(rng, n, n)
    al, be, a, b, c = _f64(alpha, beta, a32, b32, c32)
    out = c.copy()
    low = np.tril(np.ones((n, n), bool))
    out[low] = (be * c + al * (a @ b.T + b @ a.T))[low]
    return (alpha, beta, a32, b32, c32), (out,), 2 * m


def symm(rng, s):
    m, n = s["M"], s["N"]
    alpha, beta = (np.array(rng.uniform(0.5, 1.5), dtype=F32) for _ in range(2))
    a32, b32, c32 = _rand(rng, m, m), _rand(rng, m, n), _rand(rng, m, n)
    al, be, a, b, c = _f64(alpha, beta, a32, b32, c32)
    sym = np.tril(a) + np.tril(a, -1).T
    return (alpha, beta, a32, b32, c32), (be * c + al * sym @ b,), m


def trmm(rng, s):
    m, n = s["M"], s["N"]
    alpha = np.array(rng.uniform(0.5, 1.5), dtype=F32)
    a32, b32 = _rand(rng, m, m), _rand(rng, m, n)
    al, a, b = _f64(alpha, a32, b32)
    return (alpha, a32, b32), (al * (np.tril(a, -1) + np.eye(m)).T @ b,), m


def floyd_warshall(rng, s):
    n = s["N"]
    p32 = rng.uniform(1.0, 100.0, size=(n, n)).astype(F32)
    (p,) = _f64(p32)
    for k in range(n):
        p = np.minimum(p, p[:, k:k + 1] + p[k:k + 1, :])
    return (p32,), (p,), n


CASES |= {
    "polybench_syr2k": (syr2k, ({"M": 20, "N": 30}, {"M": 60, "N": 80})),
    "polybench_symm": (symm, ({"M": 20, "N": 30}, {"M": 60, "N": 80})),
    "polybench_trmm": (trmm, ({"M": 20, "N": 30}, {"M": 60, "N": 80})),
    "floyd_warshall": (floyd_warshall, ({"N": 60}, {"N": 180})),
}


def _thomas(lo: float, diag: float, rhs: np.ndarray, first: float) -> np.ndarray:
    """PolyBench adi's sweep along axis 0 of ``rhs`` (rows 1..n-2 used), all lines at once:
    p[j] = -lo/(lo*p[j-1]+diag), q[j] = (rhs[j] - lo*q[j-1])/(lo*p[j-1]+diag) forward from
    p[0] = 0, q[0] = first, then x[j] = p[j]*x[j+1] + q[j] backward from x[n-1] = first."""
    n = len(rhs)
    p, q = np.zeros(n), np.full(rhs.shape[1:], first)
    ps, qs = [p[0]], [q]
    for j in range(1, n - 1):
        den = lo * ps[-1] + diag
        qs.append((rhs[j] - lo * qs[-1]) / den)
        ps.append(-lo / den)
    x = np.full(rhs.shape, first)
    for j in range(n - 2, 0, -1):
        x[j] = ps[j] * x[j + 1] + qs[j]
    return x


def adi(rng, s):
    n, steps = s["N"], s["T"]
    u32 = _rand(rng, n, n)
    (u,) = _f64(u32)
    mul1 = 2.0 * (1.0 / steps) / ((1.0 / n) * (1.0 / n))
    mul2 = 1.0 * (1.0 / steps) / ((1.0 / n) * (1.0 / n))
    a, b, d, e = -mul1 / 2, 1 + mul1, -mul2 / 2, 1 + mul2  # c = a, f = d
    for _ in range(steps):
        # column sweep: line i is column i of u (rows j), into column i of v
        rhs = -d * u[:, :-2] + (1 + 2 * d) * u[:, 1:-1] - d * u[:, 2:]
        v = np.ones((n, n))
        v[:, 1:-1] = _thomas(a, b, rhs, 1.0)
        # row sweep: line i is row i of v (columns j), into row i of u
        rhs = (-a * v[:-2, :] + (1 + 2 * a) * v[1:-1, :] - a * v[2:, :]).T
        u[1:-1, :] = _thomas(d, e, rhs, 1.0).T
    # the sweeps' stability damps rounding: it grows with one line's length, not with T
    return (u32,), (u,), 2 * n



def _deriche_passes(x: np.ndarray, c: tuple[float, ...]) -> np.ndarray:
    """PolyBench deriche's two passes along axis 0 (all lines at once), summed: forward
    y1[j] = k*x[j] + a2*x[j-1] + b1*y1[j-1] + b2*y1[j-2], backward y2[j] = a3*x[j+1] +
    a4*x[j+2] + b1*y2[j+1] + b2*y2[j+2], zero outside the line."""
    k, a2, a3, a4, b1, b2 = c
    y1, y2 = np.zeros_like(x), np.zeros_like(x)
    xm1, ym1, ym2 = (np.zeros(x.shape[1:]) for _ in range(3))
    for j in range(len(x)):
        y1[j] = k * x[j] + a2 * xm1 + b1 * ym1 + b2 * ym2
        xm1, ym2, ym1 = x[j], ym1, y1[j]
    xp1, xp2, yp1, yp2 = (np.zeros(x.shape[1:]) for _ in range(4))
    for j in reversed(range(len(x))):
        y2[j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2
        xp2, xp1, yp2, yp1 = xp1, x[j], yp1, y2[j]
    return y1 + y2


def deriche(rng, s):
    x32 = rng.uniform(0.0, 1.0, size=(s["W"], s["H"])).astype(F32)  # grey levels, as PolyBench's
    alpha32 = np.array(0.25, dtype=F32)  # PolyBench's
    x, al = _f64(x32, alpha32)
    ea = np.exp(-al)
    k = (1 - ea) * (1 - ea) / (1 + 2 * al * ea - np.exp(2 * al))
    c = (k, k * ea * (al - 1), k * ea * (al + 1), -k * np.exp(-2 * al), 2.0 ** -al,
         -np.exp(-2 * al))
    t = _deriche_passes(x.T, c).T  # along each row
    # the filter is stable (poles inside the unit circle): rounding grows with a line's length
    return (x32, alpha32), (_deriche_passes(t, c),), max(s["W"], s["H"])


def nussinov(rng, s):
    n = s["N"]
    seq = rng.integers(0, 4, size=n).astype(np.int8)
    table = rng.integers(0, 3, size=(n, n)).astype(np.int32)  # PolyBench's is 0
    out = table.astype(np.int64)
    for i in reversed(range(n)):
        for j in range(i + 1, n):
            pair = out[i + 1, j - 1] + (i < j - 1 and int(seq[i]) + int(seq[j]) == 3)
            split = (out[i, i + 1:j] + out[i + 2:j + 1, j]).max(initial=out[i, j])
            out[i, j] = max(out[i, j], out[i, j - 1], out[i + 1, j], pair, split)
    return (seq, table), (out.astype(np.int32),), 1


CASES |= {
    "adi": (adi, ({"T": 20, "N": 20}, {"T": 40, "N": 60})),
    "deriche": (deriche, ({"W": 64, "H": 64}, {"W": 192, "H": 128})),
    "nussinov": (nussinov, ({"N": 60}, {"N": 180})),
}


def check_kernel(name: str, sizes: dict[str, int], options: dict[str, Any] | None,
                 seed: int) -> Any:
    """``kernels/``'s ``name`` compiled with ``options`` (a ``polyopt.Kernel``), after checking
    its result against the reference at ``sizes`` (tolerance scaled to the recurrence)."""
    k = polyopt.compile(kernels.get(name), name, sizes=sizes, options=options)
    ins, want, red = CASES[name][0](np.random.default_rng(seed), sizes)
    got = k(*ins)
    got = got if isinstance(got, tuple) else (got,)
    tol = 2e-5 * math.sqrt(red)
    for g, w in zip(got, want, strict=True):
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(np.asarray(g), w, rtol=tol, atol=tol * scale, err_msg=name)
    return k
