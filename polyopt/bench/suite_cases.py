"""The operators of ``polyopt bench suite``: 40 in six families (contraction, elementwise,
reduction, transpose, stencil, conv), each a TC def (the bundled one where there is one), its
numpy formulation and torch's call, at benchmark sizes or tiny ones (``quick``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyopt import kernels
from polyopt.bench.layers import Layer
from polyopt.bench.operators import Case, norm_cases

FAMILIES = ("contraction", "elementwise", "reduction", "transpose", "stencil", "conv")



@dataclass(frozen=True)
class SuiteCase(Case):
    """operators.Case with a family, and the TVM convolution layer where TVM has one."""

    family: str = ""
    tvm_layer: Layer | None = None


def torch_mod() -> Any:
    import torch

    return torch


def torch_f() -> Any:
    return torch_mod().nn.functional


def nbytes(*shapes: tuple[int, ...]) -> float:
    """float32 bytes of the tensors: every input read once, the output written once."""
    return 4.0 * sum(math.prod(s) for s in shapes)


# ------------------------------------------------------------------ contractions
def einsum_def(name: str, spec: str) -> str:
    """The TC def of an einsum contraction: size names are the upper-case letters, reduction
    indices get ``r_``; ``"bmk,bkn->bmn"`` reads ``Z(b,m,n) +=! X0(b,m,r_k) * X1(b,r_k,n)``."""
    ins, out = spec.split("->")
    terms = ins.split(",")

    def idx(term: str) -> str:
        return ",".join(c if c in out else f"r_{c}" for c in term)

    params = ", ".join(f"float({','.join(t.upper())}) X{i}" for i, t in enumerate(terms))
    product = " * ".join(f"X{i}({idx(t)})" for i, t in enumerate(terms))
    return f"def {name}({params}) -> (Z) {{\n    Z({idx(out)}) +=! {product}\n}}\n"


def contraction(op: str, shape: str, spec: str, sizes: dict[str, int],
                reference: Callable[..., Any], torch_fn: Callable[..., Any] | None = None, *,
                kernel: str | None = None, **kw: Any) -> SuiteCase:
    """A contraction given as einsum subscripts (or a bundled ``kernel`` of the same form)."""
    ins, out = spec.split("->")
    shapes = tuple(tuple(sizes[c.upper()] for c in t) for t in ins.split(","))
    flops = 2.0 * math.prod(sizes.values())
    reduction = math.prod(sizes[c.upper()] for c in set(ins) - set(out) - {","})
    text = None if kernel else einsum_def(op, spec)
    return SuiteCase(op, kernel or op, shape, shapes, sizes, flops, reduction, reference,
                     torch_fn or reference, text=text, family="contraction", **kw)


GELU = "0.5 * {x} * (1 + tanh(0.7978845608 * ({x} + 0.044715 * {x} * {x} * {x})))"


def np_gelu(x: Any) -> Any:
    """tanh-approximated GELU (numpy has no erf); works on numpy arrays and torch tensors."""
    lib = torch_mod() if not isinstance(x, np.ndarray) else np
    return 0.5 * x * (1 + lib.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


# A transformer feed-forward layer: Y = gelu(X @ W1 + b1) @ W2 + b2.
FFN = f"""
def ffn(float(N,D) X, float(D,F) W1, float(F) b1, float(F,D) W2, float(D) b2) -> (Y) local (Z) {{
    Z(n,f) +=! X(n,r_d) * W1(r_d,f)
    Z(n,f)  = Z(n,f) + b1(f)
    Z(n,f)  = {GELU.format(x="Z(n,f)")}
    Y(n,d) +=! Z(n,r_f) * W2(r_f,d)
    Y(n,d)  = Y(n,d) + b2(d)
}}
"""


def np_ffn(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    return np_gelu(x @ w1 + b1) @ w2 + b2


def contractions(sz: Callable[[int, int], int]) -> list[SuiteCase]:
    def mm(op: str, m: int, n: int, k: int, **kw: Any) -> SuiteCase:
        return contraction(op, f"{m}x{n}x{k} (MxNxK)", "mk,kn->mn", {"M": m, "N": n, "K": k},
                           np.matmul, lambda a, b: a @ b, kernel="matmul", tvm=True, **kw)

    n, b, s = sz(1024, 48), sz(8, 2), sz(512, 32)
    heads, d, t = sz(12, 2), 64, sz(256, 16)
    dm, df = sz(768, 32), sz(3072, 64)
    ffn_sizes = {"N": t, "D": dm, "F": df}
    return [
        mm("mm_square", n, n, n),
        mm("mm_odd", sz(1023, 33), sz(1025, 31), sz(1021, 29)),
        mm("mm_skinny_n", sz(4096, 128), sz(16, 4), sz(1024, 32)),
        mm("mm_skinny_k", sz(1024, 64), sz(1024, 64), sz(16, 4)),
        mm("mm_tiny", 16, 16, 16),
        contraction("bmm", f"B={b}, {s // 2}^3", "bmk,bkn->bmn",
                    {"B": b, "M": s // 2, "N": s // 2, "K": s // 2}, np.matmul,
                    lambda x, y: x.bmm(y), kernel="batch_matmul"),
        contraction("matvec", f"{sz(4096, 64)}x{sz(4096, 64)}", "mk,k->m",
                    {"M": sz(4096, 64), "K": sz(4096, 64)}, np.matmul,
                    lambda a, x: a @ x, kernel="matvec"),
        contraction("linear", f"{s}x{dm} @ ({3 * dm}x{dm})^T", "mk,nk->mn",
                    {"M": s, "N": 3 * dm, "K": dm}, lambda x, w: x @ w.T,
                    kernel="matmul_nt"),
        contraction("attn_qk", f"H={heads}, S={s}, D={d}", "hsd,htd->hst",
                    {"H": heads, "S": s, "T": s, "D": d},
                    lambda q, k: q @ k.swapaxes(-1, -2), lambda q, k: q @ k.transpose(-1, -2)),
        contraction("attn_pv", f"H={heads}, S={s}, D={d}", "hst,htd->hsd",
                    {"H": heads, "S": s, "T": s, "D": d}, np.matmul, lambda p, v: p @ v),
        SuiteCase("ffn", "ffn", f"N={t}, D={dm}, F={df}", ((t, dm), (dm, df), (df,), (df, dm),
                  (dm,)), ffn_sizes, 4.0 * t * dm * df, max(dm, df), np_ffn, np_ffn, text=FFN,
                  family="contraction"),
    ]


# ------------------------------------------------------------------ elementwise chains
ELEMENTWISE = f"""
def gelu(float(N,D) X) -> (Y) {{
    Y(n,d) = {GELU.format(x="X(n,d)")}
}}

def silu(float(N,D) X) -> (Y) {{
    Y(n,d) = X(n,d) / (1 + exp(-X(n,d)))
}}

def rmsnorm(float(N,D) X, float(D) g) -> (Y) local (ms) {{
    ms(n) +=! X(n,r_d) * X(n,r_d)
    Y(n,d)  = g(d) * X(n,d) * rsqrt(ms(n) / D + 1e-6)
}}
"""


def np_silu(x: Any) -> Any:
    lib = torch_mod() if not isinstance(x, np.ndarray) else np
    return x / (1 + lib.exp(-x))


def np_rmsnorm(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    return g * x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6)


def torch_rmsnorm(x: Any, g: Any) -> Any:
    return g * x * torch_mod().rsqrt(x.square().mean(1, keepdim=True) + 1e-6)


def elementwise(sz: Callable[[int, int], int]) -> list[SuiteCase]:
    n, d = sz(8192, 64), sz(1024, 48)
    x, v = (n, d), (d,)
    norm = norm_cases(n, d)  # bench ops' softmax and layernorm: bundled defs, references

    def case(op: str, flops_per: int, ref: Callable[..., Any], torch_fn: Callable[..., Any],
             shapes: tuple[tuple[int, ...], ...] = (x,), reduction: int = 1) -> SuiteCase:
        return SuiteCase(op, op, f"{n}x{d}", shapes, {"N": n, "D": d}, flops_per * n * d,
                         reduction, ref, torch_fn, nbytes=nbytes(*shapes, x), text=ELEMENTWISE,
                         family="elementwise")

    return [
        case("gelu", 9, np_gelu, lambda t: torch_f().gelu(t, approximate="tanh")),
        case("silu", 4, np_silu, lambda t: torch_f().silu(t)),
        *(SuiteCase(**{**c.__dict__, "shape": f"{n}x{d}"}, family="elementwise")
          for c in norm),
        case("rmsnorm", 5, np_rmsnorm, torch_rmsnorm, (x, v), d),
    ]


# ------------------------------------------------------------------ reductions
REDUCTIONS = """
def sum_axis0(float(A,B,C) X) -> (Y) {
    Y(b,c) +=! X(r_a,b,c)
}

def sum_axis1(float(A,B,C) X) -> (Y) {
    Y(a,c) +=! X(a,r_b,c)
}

def sum_axis2(float(A,B,C) X) -> (Y) {
    Y(a,b) +=! X(a,b,r_c)
}

def max_axis2(float(A,B,C) X) -> (Y) {
    Y(a,b) max=! X(a,b,r_c)
}
"""


def reductions(sz: Callable[[int, int], int]) -> list[SuiteCase]:
    a, b, c = sz(64, 8), sz(512, 24), sz(512, 40)

    def case(op: str, axis: int, how: str = "sum") -> SuiteCase:
        out = tuple(e for i, e in enumerate((a, b, c)) if i != axis)

        def ref(x: Any) -> Any:  # numpy arrays and torch tensors
            if how == "max":
                return x.max(axis) if isinstance(x, np.ndarray) else x.amax(axis)
            return x.sum(axis)

        return SuiteCase(op, op, f"{a}x{b}x{c}, axis {axis}", ((a, b, c),),
                         {"A": a, "B": b, "C": c}, float(a * b * c), (a, b, c)[axis], ref, ref,
                         nbytes=nbytes((a, b, c), out), text=REDUCTIONS, family="reduction")

    return [case("sum_axis0", 0), case("sum_axis1", 1), case("sum_axis2", 2),
            case("max_axis2", 2, "max")]


# ------------------------------------------------------------------ transposes
TRANSPOSES = """
def transpose_2d(float(M,N) X) -> (Y) {
    Y(n,m) = X(m,n)
}

def permute_021(float(A,B,C) X) -> (Y) {
    Y(a,c,b) = X(a,b,c)
}

def permute_210(float(A,B,C) X) -> (Y) {
    Y(c,b,a) = X(a,b,c)
}

def nchw_to_nhwc(float(N,C,H,W) X) -> (Y) {
    Y(n,h,w,c) = X(n,c,h,w)
}

def split_heads(float(B,S,H,D) X) -> (Y) {
    Y(b,h,s,d) = X(b,s,h,d)
}
"""


def transposes(sz: Callable[[int, int], int]) -> list[SuiteCase]:
    def case(op: str, names: str, dims: tuple[int, ...], perm: tuple[int, ...]) -> SuiteCase:
        def ref(x: Any) -> Any:
            if isinstance(x, np.ndarray):
                return np.ascontiguousarray(x.transpose(perm))
            return x.permute(perm).contiguous()

        return SuiteCase(op, op, "x".join(map(str, dims)) + f" -> {perm}", (dims,),
                         dict(zip(names, dims, strict=True)), 0.0, 1, ref, ref,
                         nbytes=nbytes(dims, dims), text=TRANSPOSES, family="transpose")

    return [
        case("transpose_2d", "MN", (sz(4096, 40), sz(4096, 56)), (1, 0)),
        case("permute_021", "ABC", (sz(64, 4), sz(512, 24), sz(512, 40)), (0, 2, 1)),
        case("permute_210", "ABC", (sz(128, 8), sz(256, 24), sz(256, 40)), (2, 1, 0)),
        case("nchw_to_nhwc", "NCHW", (sz(8, 2), sz(64, 8), sz(112, 12), sz(112, 12)),
             (0, 2, 3, 1)),
        case("split_heads", "BSHD", (sz(8, 2), sz(512, 24), sz(12, 3), 64), (0, 2, 1, 3)),
    ]


# ------------------------------------------------------------------ stencils and pooling
STENCILS = """
def blur_3x3(float(H,W) X) -> (Y) {
    Y(i,j) +=! X(i + r_y, j + r_x) / 9 where r_y in 0:3, r_x in 0:3
}

def blur_separable(float(H,W) X) -> (Y) local (T) {
    T(i,j) = (X(i,j) + X(i,j+1) + X(i,j+2)) / 3
    Y(i,j) = (T(i,j) + T(i+1,j) + T(i+2,j)) / 3
}

def stencil_3d7(float(D,H,W) X) -> (Y) {
    Y(i,j,k) = 0.4 * X(i+1,j+1,k+1) + 0.1 * (X(i,j+1,k+1) + X(i+2,j+1,k+1) + X(i+1,j,k+1)
                                           + X(i+1,j+2,k+1) + X(i+1,j+1,k) + X(i+1,j+1,k+2))
}
"""


def np_blur(x: Any) -> Any:
    h, w = x.shape
    return sum(x[dy:h - 2 + dy, dx:w - 2 + dx] for dy in range(3) for dx in range(3)) / 9


def np_blur_separable(x: Any) -> Any:
    h, w = x.shape
    t = (x[:, :w - 2] + x[:, 1:w - 1] + x[:, 2:]) / 3
    return (t[:h - 2] + t[1:h - 1] + t[2:]) / 3


def np_stencil_3d7(x: Any) -> Any:
    c = x[1:-1, 1:-1, 1:-1]
    return 0.4 * c + 0.1 * (x[:-2, 1:-1, 1:-1] + x[2:, 1:-1, 1:-1] + x[1:-1, :-2, 1:-1]
                            + x[1:-1, 2:, 1:-1] + x[1:-1, 1:-1, :-2] + x[1:-1, 1:-1, 2:])


def window_slices(x: np.ndarray, kh: int, kw: int, s: int, d: int, ho: int, wo: int
                  ) -> list[tuple[int, int, np.ndarray]]:
    """(dy, dx, view) for each tap of a strided, dilated window over the padded ``x``: one
    strided view of shape (N, C, ho, wo) per tap, no copy."""
    hs, ws = s * (ho - 1) + 1, s * (wo - 1) + 1  # the extent one tap's view spans
    return [(dy, dx, x[:, :, d * dy:d * dy + hs:s, d * dx:d * dx + ws:s])
            for dy in range(kh) for dx in range(kw)]


def np_pool(x: np.ndarray, k: int, s: int, p: int, how: str) -> np.ndarray:
    """One np.maximum / np.add per window tap over strided views (faster than reducing a
    sliding_window_view)."""
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)),
                constant_values=-np.inf if how == "max" else 0)
    ho, wo = (x.shape[2] + 2 * p - k) // s + 1, (x.shape[3] + 2 * p - k) // s + 1
    taps = [v for _, _, v in window_slices(xp, k, k, s, 1, ho, wo)]
    out = taps[0].copy()
    for v in taps[1:]:
        (np.maximum if how == "max" else np.add)(out, v, out=out)
    return out if how == "max" else out / (k * k)


def pool_case(op: str, net: str, shape: tuple[int, int, int, int], k: int, s: int, p: int,
              how: str) -> SuiteCase:
    n, c, h, w = shape
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    text = kernels.get(f"{how}pool2d", kernel_size=k, stride=s, padding=p)

    def ref(x: np.ndarray) -> np.ndarray:
        return np_pool(x, k, s, p, how)

    def torch_fn(x: Any) -> Any:
        return getattr(torch_f(), f"{how}_pool2d")(x, k, s, p)

    label = f"{net} {c}x{h}x{w} k{k} s{s} p{p}" + (f" N={n}" if n > 1 else "")
    return SuiteCase(op, f"{how}pool2d", label, (shape,), {"N": n, "C": c, "H": h, "W": w},
                     float(n * c * ho * wo * k * k), k * k, ref, torch_fn,
                     nbytes=nbytes(shape, (n, c, ho, wo)), text=text, family="stencil")


def stencils(sz: Callable[[int, int], int]) -> list[SuiteCase]:
    h, w, d = sz(4096, 50), sz(4096, 70), sz(192, 12)

    def case(op: str, dims: tuple[int, ...], per_point: int, ref: Callable[..., Any]) -> SuiteCase:
        out = tuple(e - 2 for e in dims)
        return SuiteCase(op, op, "x".join(map(str, dims)), (dims,),
                         dict(zip("HW" if len(dims) == 2 else "DHW", dims, strict=True)),
                         float(per_point * math.prod(out)), per_point, ref, ref,
                         nbytes=nbytes(dims, out), text=STENCILS, family="stencil")

    return [
        case("blur_3x3", (h, w), 9, np_blur),
        case("blur_separable", (h, w), 6, np_blur_separable),
        case("stencil_3d7", (d, d, d), 8, np_stencil_3d7),
        pool_case("maxpool_3x3s2", "Inception stem", (1, sz(64, 4), sz(112, 14), sz(112, 14)),
                  3, 2, 1, "max"),
        pool_case("maxpool_2x2", "UNet", (1, sz(128, 4), sz(128, 16), sz(128, 16)),
                  2, 2, 0, "max"),
        pool_case("avgpool_3x3s1", "Inception branch", (1, sz(192, 8), sz(28, 9), sz(28, 9)),
                  3, 1, 1, "avg"),
        pool_case("global_avgpool", "MobileNetV2 head", (sz(8, 2), sz(1280, 16), 7, 7),
                  7, 7, 0, "avg"),
    ]


# ------------------------------------------------------------------ convolutions
@dataclass(frozen=True)
class Conv:
    """A 2-D convolution, NCHW, PyTorch's weight layout (F, C // groups, KH, KW)."""

    net: str
    n: int
    c: int
    f: int
    h: int
    w: int
    kh: int
    kw: int
    stride: int = 1
    pad: tuple[int, int] = (0, 0)
    dilation: int = 1
    groups: int = 1

    @property
    def out_hw(self) -> tuple[int, int]:
        d, s, (ph, pw) = self.dilation, self.stride, self.pad
        return ((self.h + 2 * ph - d * (self.kh - 1) - 1) // s + 1,
                (self.w + 2 * pw - d * (self.kw - 1) - 1) // s + 1)

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.c == self.f

    def tvm_layer(self) -> Layer | None:
        """The layer for polyopt/bench/tvm_conv.py's schedule, when it covers this shape."""
        square = self.h == self.w and self.kh == self.kw and self.pad[0] == self.pad[1]
        if not square or self.dilation != 1 or self.groups not in (1, self.c) or (
                self.groups > 1 and not self.depthwise):
            return None
        return Layer(0, self.net, self.c, self.f, self.h, self.kh, self.stride, self.pad[0],
                     self.groups, 1)


def np_conv(x: np.ndarray, w: np.ndarray, cv: Conv) -> np.ndarray:
    """im2col (a strided window view) + one tensordot (BLAS) per group; depthwise: a
    multiply-add per tap."""
    (ph, pw), d, s, g = cv.pad, cv.dilation, cv.stride, cv.groups
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = np.lib.stride_tricks.sliding_window_view(
        xp, (d * (cv.kh - 1) + 1, d * (cv.kw - 1) + 1), axis=(2, 3))[:, :, ::s, ::s, ::d, ::d]
    if cv.depthwise:  # one multiply-add per tap over strided views
        out = np.zeros((cv.n, cv.c, *cv.out_hw), np.result_type(x, w))
        for dy, dx, v in window_slices(xp, cv.kh, cv.kw, s, d, *cv.out_hw):
            out += v * w[None, :, 0, dy, dx, None, None]
        return out
    cg, fg = cv.c // g, cv.f // g
    parts = [np.tensordot(win[:, i * cg:(i + 1) * cg], w[i * fg:(i + 1) * fg],
                          axes=([1, 4, 5], [1, 2, 3])) for i in range(g)]
    return np.ascontiguousarray(np.concatenate(parts, axis=3).transpose(0, 3, 1, 2))


def conv_case(op: str, cv: Conv) -> SuiteCase:
    params: dict[str, Any] = {"stride": cv.stride, "padding": cv.pad, "dilation": cv.dilation}
    kernel = "depthwise_conv2d" if cv.depthwise else "conv2d"
    if cv.groups > 1 and not cv.depthwise:
        params |= {"groups": cv.groups, "in_channels": cv.c, "out_channels": cv.f}
    per_output = cv.c // cv.groups * cv.kh * cv.kw
    ho, wo = cv.out_hw
    sizes = {"N": cv.n, "C": cv.c, "H": cv.h, "W": cv.w, "KH": cv.kh, "KW": cv.kw}
    if not cv.depthwise:
        sizes |= {"F": cv.f, "CK": cv.c // cv.groups} if cv.groups > 1 else {"F": cv.f}
    kind = f"dw {cv.c}ch" if cv.depthwise else f"{cv.c}->{cv.f}"
    label = (f"{cv.net} {cv.kh}x{cv.kw} {kind} {cv.h}x{cv.w}"
             + (f" s{cv.stride}" if cv.stride > 1 else "")
             + (f" p{cv.pad[0]}" if cv.pad[0] == cv.pad[1] and cv.pad[0] else
                f" p{cv.pad[0]},{cv.pad[1]}" if any(cv.pad) else "")
             + (f" d{cv.dilation}" if cv.dilation > 1 else "")
             + (f" g{cv.groups}" if cv.groups > 1 and not cv.depthwise else "")
             + f" N={cv.n}")

    def ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np_conv(x, w, cv)

    def torch_fn(x: Any, w: Any) -> Any:
        return torch_f().conv2d(x, w, stride=cv.stride, padding=cv.pad, dilation=cv.dilation,
                                groups=cv.groups)

    return SuiteCase(op, kernel, label, ((cv.n, cv.c, cv.h, cv.w),
                                         (cv.f, cv.c // cv.groups, cv.kh, cv.kw)),
                     sizes, 2.0 * cv.n * cv.f * ho * wo * per_output, per_output, ref,
                     torch_fn, text=kernels.get(kernel, **params), family="conv",
                     tvm_layer=cv.tvm_layer())


def convolutions(sz: Callable[[int, int], int]) -> list[SuiteCase]:
    def ch(c: int) -> int:  # channels: a quarter (at least 2) for --quick
        return sz(c, max(2, c // 16))

    convs = {
        "conv_1x1": Conv("MobileNetV2", 1, ch(32), ch(192), sz(28, 7), sz(28, 7), 1, 1),
        "conv_3x3": Conv("UNet", 1, ch(128), ch(128), sz(64, 10), sz(64, 10), 3, 3, pad=(1, 1)),
        "conv_5x5": Conv("Inception-v3", 1, ch(48), ch(64), sz(35, 9), sz(35, 9), 5, 5,
                         pad=(2, 2)),
        "conv_7x7_s2": Conv("Inception-v1", 1, 3, ch(64), sz(224, 20), sz(224, 20), 7, 7, 2,
                            (3, 3)),
        "conv_1x7": Conv("Inception-v3", 1, ch(128), ch(128), sz(17, 9), sz(17, 9), 1, 7,
                         pad=(0, 3)),
        "conv_3x3_s2": Conv("MobileNetV2", 1, 3, ch(32), sz(224, 20), sz(224, 20), 3, 3, 2,
                            (1, 1)),
        "conv_3x3_dil2": Conv("DeepLab", 1, ch(128), ch(128), sz(33, 11), sz(33, 11), 3, 3,
                              pad=(2, 2), dilation=2),
        "conv_3x3_g32": Conv("ResNeXt-50", 1, sz(128, 16), sz(128, 16), sz(56, 8), sz(56, 8),
                             3, 3, pad=(1, 1), groups=sz(32, 4)),
        "dwconv_3x3": Conv("MobileNetV2", 1, ch(144), ch(144), sz(56, 10), sz(56, 10), 3, 3,
                           pad=(1, 1), groups=ch(144)),
        "conv_1x1_b8": Conv("MobileNetV2", 8, ch(64), ch(384), sz(14, 5), sz(14, 5), 1, 1),
        "conv_3x3_b8": Conv("UNet", 8, ch(64), ch(64), sz(32, 6), sz(32, 6), 3, 3, pad=(1, 1)),
        "dwconv_3x3_s2_b8": Conv("MobileNetV2", 8, ch(96), ch(96), sz(112, 12), sz(112, 12), 3,
                                 3, 2, (1, 1), groups=ch(96)),
    }
    return [conv_case(op, cv) for op, cv in convs.items()]


def all_cases(quick: bool) -> list[SuiteCase]:
    """Every operator of the suite, at benchmark sizes or (``quick``) tiny ones."""
    def sz(full: int, small: int) -> int:
        return small if quick else full

    return [case for build in (contractions, elementwise, reductions, transposes, stencils,
                               convolutions) for case in build(sz)]
