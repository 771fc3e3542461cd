"""The operators of ``polyopt bench ops``: one ``Case`` per operator and shape, with its numpy
formulation (also the float64 reference) and torch's call. ``polyopt bench suite``'s cases
(``suite_cases.py``) extend ``Case``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyopt import kernels

OPS = ("matmul", "bmm", "2mm", "softmax", "layernorm", "conv1", "conv2", "conv3", "conv4",
       "dwconv", "conv_bias_relu")
Inputs = list[Any]


@dataclass(frozen=True)
class Case:
    """One operator at one shape."""

    op: str  # the --ops name
    kernel: str  # def name in kernels/*.tc
    shape: str  # as shown in the table
    shapes: tuple[tuple[int, ...], ...]  # input shapes in signature order; () is a scalar
    sizes: dict[str, int]  # every size and <...> parameter, for polyopt.compile(sizes=)
    flops: float
    reduction: int  # length of the reductions behind one output, for the tolerance
    reference: Callable[..., np.ndarray]  # numpy formulation, also the float64 reference
    torch_fn: Callable[..., Any] | None = None  # takes torch tensors (0-d ones for scalars)
    params: dict[str, int] = field(default_factory=dict)  # the <...> parameters alone
    nbytes: float | None = None  # set for memory-bound ops: report GB/s
    unfused: bool = False  # also run options={"fusion": "min"}
    tvm: bool = False  # matmul: also run TVM
    text: str | None = None  # the def's TC source; None: ``kernel`` from polyopt.kernels

    @property
    def source(self) -> str:
        return self.text if self.text is not None else kernel_text(self.kernel)

    @property
    def unit(self) -> str:
        return "GB/s" if self.nbytes else "GFLOP/s"

    def throughput(self, seconds: float) -> float:
        return (self.nbytes or self.flops) / seconds / 1e9



def kernel_text(name: str) -> str:
    """The library's def with its ``<...>`` parameters intact, so sizes= can set them.

    ``kernels.get(name)`` without keywords writes zero paddings into the body as literals and
    drops PH/PW from the parameter list, after which ``sizes={"PH": 1}`` is an unknown size.
    """
    return kernels.source(name)



def matmul_case(m: int, n: int, k: int) -> Case:
    return Case("matmul", "matmul", f"{m}x{n}x{k} (MxNxK)", ((m, k), (k, n)),
                {"M": m, "N": n, "K": k}, 2.0 * m * n * k, k, np.matmul,
                torch_fn=lambda a, b: a @ b, tvm=True)


def bmm_case(b: int, n: int) -> Case:
    return Case("bmm", "batch_matmul", f"B={b}, {n}^3", ((b, n, n), (b, n, n)),
                {"B": b, "M": n, "N": n, "K": n}, 2.0 * b * n**3, n, np.matmul,
                torch_fn=lambda x, y: x.bmm(y))


def np_2mm(alpha: Any, beta: Any, a: Any, b: Any, c: Any, d: Any) -> np.ndarray:
    return beta * d + (alpha * (a @ b)) @ c


def two_mm_case(n: int) -> Case:
    sizes = {"NI": n, "NJ": n, "NK": n, "NL": n}
    return Case("2mm", "polybench_2mm", f"NI=NJ=NK=NL={n}", ((), (), *[(n, n)] * 4), sizes,
                4.0 * n**3, n * n, np_2mm, torch_fn=np_2mm)


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def np_layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + 1e-5) + beta


def norm_cases(n: int, d: int) -> list[Case]:
    def torch_layernorm(x: Any, gamma: Any, beta: Any) -> Any:
        import torch

        return torch.nn.functional.layer_norm(x, (d,), gamma, beta, eps=1e-5)

    def torch_softmax(x: Any) -> Any:
        import torch

        return torch.softmax(x, 1)

    io = 2.0 * n * d * 4
    return [Case("softmax", "softmax", f"N={n}, D={d}", ((n, d),), {"N": n, "D": d},
                 5.0 * n * d, d, np_softmax, torch_softmax, nbytes=io, unfused=True),
            Case("layernorm", "layernorm", f"N={n}, D={d}", ((n, d), (d,), (d,)),
                 {"N": n, "D": d}, 8.0 * n * d, d, np_layernorm, torch_layernorm,
                 nbytes=io + 2.0 * d * 4, unfused=True)]


def conv_window(x: np.ndarray, k: int, stride: int, pad: int) -> np.ndarray:
    """(N, C, Ho, Wo, k, k) view of the zero-padded input (no copy)."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
    return win[:, :, ::stride, ::stride]


def np_conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, *, stride: int,
              pad: int, relu: bool = False) -> np.ndarray:
    """im2col + matmul: tensordot copies the window view into a matrix and calls BLAS."""
    out = np.tensordot(conv_window(x, w.shape[2], stride, pad), w, axes=([1, 4, 5], [1, 2, 3]))
    out = np.ascontiguousarray(out.transpose(0, 3, 1, 2))
    if bias is not None:
        out += bias[None, :, None, None]
    return np.maximum(out, 0) if relu else out


def np_depthwise(x: np.ndarray, w: np.ndarray, *, stride: int, pad: int) -> np.ndarray:
    return np.einsum("nchwij,cij->nchw", conv_window(x, w.shape[2], stride, pad), w[:, 0])


def torch_conv2d(x: Any, w: Any, bias: Any = None, *, stride: int, pad: int, groups: int = 1,
                 relu: bool = False) -> Any:
    import torch

    out = torch.nn.functional.conv2d(x, w, bias, stride=stride, padding=pad, groups=groups)
    return torch.relu(out) if relu else out


def conv_case(op: str, c: int, f: int, hw: int, k: int, stride: int = 1, pad: int = 0, *,
              kernel: str = "conv2d") -> Case:
    """A batch-1 square convolution; ``kernel`` is conv2d, conv2d_bias_relu or depthwise."""
    params = {"SH": stride, "SW": stride} if stride != 1 else {}
    params |= {"PH": pad, "PW": pad} if pad else {}
    depthwise, bias = kernel == "depthwise_conv2d", kernel == "conv2d_bias_relu"
    ho = (hw + 2 * pad - k) // stride + 1
    per_output = k * k * (1 if depthwise else c)
    sizes = {"N": 1, "C": c, "H": hw, "W": hw, "KH": k, "KW": k, **params}
    shapes: tuple[tuple[int, ...], ...] = ((1, c, hw, hw), (c, 1, k, k))
    if depthwise:
        reference: Callable[..., np.ndarray] = np_depthwise
        kw: dict[str, Any] = {"groups": c}
        label = f"dw {k}x{k} {c}ch"
    else:
        sizes["F"] = f
        shapes = ((1, c, hw, hw), (f, c, k, k), *([(f,)] if bias else []))
        reference = functools.partial(np_conv2d, relu=bias)
        kw = {"relu": bias}
        label = f"{k}x{k} {c}->{f}"
    label += f" {hw}x{hw}" + (f" s{stride}" if stride != 1 else "") + (f" p{pad}" if pad else "")

    def ref(*a: Any) -> np.ndarray:
        return reference(*a, stride=stride, pad=pad)

    def torch_fn(*a: Any) -> Any:
        return torch_conv2d(*a, stride=stride, pad=pad, **kw)

    return Case(op, kernel, label, shapes, sizes, 2.0 * ho * ho * f * per_output, per_output,
                ref, torch_fn, params=params)


def all_cases(quick: bool) -> list[Case]:
    """The benchmark set (ResNet-50 layers for conv), or tiny shapes for --quick."""
    if quick:
        mats = [matmul_case(64, 64, 64), matmul_case(30, 20, 25)]
        rest = [bmm_case(2, 32), two_mm_case(32), *norm_cases(64, 64)]
        convs = [(8, 8, 14, 3, 1, 1), (16, 8, 14, 1, 1, 0), (8, 8, 7, 3, 1, 1),
                 (3, 8, 28, 7, 2, 3), (8, 8, 14, 3, 1, 1)]
    else:
        mats = [matmul_case(n, n, n) for n in (256, 512, 1024, 2048)]
        mats.append(matmul_case(1000, 1100, 1200))
        # Normalizations at 16384 x 1024 (64 MB, twice this L3): fusion is about memory
        # traffic, which a working set that stays in the L3 hides.
        rest = [bmm_case(8, 256), two_mm_case(512), *norm_cases(16384, 1024)]
        convs = [(64, 64, 56, 3, 1, 1), (256, 64, 56, 1, 1, 0), (256, 256, 14, 3, 1, 1),
                 (3, 64, 224, 7, 2, 3), (144, 144, 56, 3, 1, 1)]
    conv_ops = [conv_case(f"conv{i + 1}", *cv) for i, cv in enumerate(convs[:4])]
    conv_ops.append(conv_case("dwconv", *convs[4], kernel="depthwise_conv2d"))
    conv_ops.append(conv_case("conv_bias_relu", *convs[0], kernel="conv2d_bias_relu"))
    return [*mats, *rest, *conv_ops]


# ------------------------------------------------------------------ measuring
