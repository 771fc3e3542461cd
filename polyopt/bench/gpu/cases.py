"""The GPU suite's cases (``polyopt bench gpu``): each operator at one shape as polyopt's
definition, torch's equivalent call, and a float64 numpy reference for when torch is absent.

Conv layers are the survey's (batch 1, NCHW): ResNet-50's 3x3 64->64 56x56, 1x1 256->64
56x56, 3x3 256->256 14x14 and 7x7 3->64 224x224 stride 2, and MobileNetV2's depthwise 3x3
144 channels 56x56; ``--quick`` takes small shapes of the same kinds (partial tiles included).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyopt import kernels

TOLERANCE = 1e-4  # relative L2 error above which a result is WRONG, as polyopt bench conv
SAMPLED_ROWS = 64  # rows of a large matmul that the numpy fallback checks


@dataclass(frozen=True)
class Case:
    """One operator at one shape: polyopt's definition and torch's equivalent."""

    op: str  # matmul, conv2d or depthwise
    kernel: str  # def name in polyopt.kernels
    shape: str  # as shown in the table
    source: str  # TC text, strides and paddings already set by kernels.get
    sizes: dict[str, int]
    inputs: tuple[tuple[int, ...], ...]
    output: tuple[int, ...]
    flops: float
    stride: int = 1
    pad: int = 0
    groups: int = 1  # torch's conv2d groups (the channels, for depthwise)


def matmul_case(m: int, n: int, k: int) -> Case:
    return Case("matmul", "matmul", f"{m}x{n}x{k} (MxNxK)", kernels.source("matmul"),
                {"M": m, "N": n, "K": k}, ((m, k), (k, n)), (m, n), 2.0 * m * n * k)


def conv_case(c: int, f: int, hw: int, k: int, stride: int = 1, pad: int = 0, *,
              depthwise: bool = False) -> Case:
    """A batch-1 square convolution (depthwise: ``f`` must equal ``c``)."""
    ho = (hw + 2 * pad - k) // stride + 1
    sizes = {"N": 1, "C": c, "H": hw, "W": hw, "KH": k, "KW": k}
    name = "depthwise_conv2d" if depthwise else "conv2d"
    source = kernels.get(name, stride=stride, padding=pad)
    if depthwise:
        label, weight, per_output = f"dw {k}x{k} {c}ch", (c, 1, k, k), k * k
    else:
        sizes["F"] = f
        label, weight, per_output = f"{k}x{k} {c}->{f}", (f, c, k, k), k * k * c
    label += f" {hw}x{hw}" + (f" s{stride}" if stride != 1 else "") + (f" p{pad}" if pad else "")
    return Case("depthwise" if depthwise else "conv2d", name, label, source, sizes,
                ((1, c, hw, hw), weight), (1, f, ho, ho), 2.0 * ho * ho * f * per_output,
                stride, pad, c if depthwise else 1)


def all_cases(quick: bool) -> list[Case]:
    """The benchmark set, or small shapes (partial tiles included) for --quick."""
    if quick:
        mats = [matmul_case(256, 256, 256), matmul_case(100, 70, 30)]
        convs = [(8, 8, 14, 3, 1, 1), (16, 8, 14, 1), (8, 8, 7, 3, 1, 1), (3, 8, 28, 7, 2, 3)]
        dw = conv_case(8, 8, 14, 3, 1, 1, depthwise=True)
    else:
        mats = [matmul_case(4096, 4096, 4096)]
        convs = [(64, 64, 56, 3, 1, 1), (256, 64, 56, 1), (256, 256, 14, 3, 1, 1),
                 (3, 64, 224, 7, 2, 3)]
        dw = conv_case(144, 144, 56, 3, 1, 1, depthwise=True)
    return [*mats, *(conv_case(*cv) for cv in convs), dw]


def torch_call(torch: Any, case: Case, dev: Sequence[Any]) -> Callable[[], Any]:
    """torch on polyopt's own input buffers (zero copy through __cuda_array_interface__)."""
    x, w = (torch.as_tensor(a, device="cuda") for a in dev)
    if case.op == "matmul":
        return lambda: torch.matmul(x, w)
    conv2d = torch.nn.functional.conv2d
    return lambda: conv2d(x, w, stride=case.stride, padding=case.pad, groups=case.groups)


def numpy_reference(case: Case, host: Sequence[np.ndarray]) -> tuple[np.ndarray, int | None]:
    """float64 reference on the host, and how many leading rows of the output it covers
    (a 4096^3 matmul is checked on its first rows: the whole would take seconds)."""
    a, b = (x.astype(np.float64) for x in host)
    if case.op == "matmul":
        rows = SAMPLED_ROWS if a.shape[0] > 4 * SAMPLED_ROWS else None
        return (a[:rows] if rows else a) @ b, rows
    k = b.shape[2]
    xp = np.pad(a, ((0, 0), (0, 0), (case.pad, case.pad), (case.pad, case.pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
    win = win[:, :, ::case.stride, ::case.stride]
    if case.op == "depthwise":
        return np.einsum("nchwij,cij->nchw", win, b[:, 0]), None
    return np.einsum("nchwij,fcij->nfhw", win, b, optimize=True), None


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    """The relative L2 error of ``got``; infinite when it holds a NaN or an infinity."""
    got = got.astype(np.float64)
    if not np.isfinite(got).all():
        return math.inf
    return float(np.linalg.norm(got - ref) / max(float(np.linalg.norm(ref)), 1e-30))
