"""The systems a convolution layer is timed on: polyopt itself, numpy and torch.

Each ``prepare_*`` function builds what one timed call needs and returns it as a
``Prepared``; a system that is not installed or does not apply raises ``Skip`` (reported as
skipped, with the reason), anything else it raises is reported as a failure. TVM lives in
``tvm_conv.py``. Nothing here imports torch or TVM before a layer asks for it, so a missing
peer costs nothing and ``polyopt bench conv --help`` stays fast.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyopt import api, kernels
from polyopt.bench.layers import Layer
from polyopt.tuning.lookup import lookup

__all__ = [
    "Context",
    "Prepared",
    "Skip",
    "conv_reference",
    "numpy_conv",
    "polyopt_definition",
    "prepare_numpy",
    "prepare_polyopt",
    "prepare_torch",
]

Inputs = tuple[np.ndarray, np.ndarray]  # the activation (N, C, H, W) and the weight


class Skip(Exception):
    """A system that cannot run here (not installed, no device): reported as skipped."""


@dataclass
class Context:
    """Settings every system needs, and the modules loaded for the run (loaded once)."""

    target: str  # "c" or "cuda"
    threads: int
    tvm_trials: int = 0
    use_db: bool = False  # polyopt: the tuning database's best schedules (--tuned)
    tuned: dict[int, str] = field(default_factory=dict)  # layer -> tuned TVM library or why not
    modules: dict[str, Any] = field(default_factory=dict)

    def load(self, name: str, what: str) -> Any:
        """Import ``name`` once; a missing module becomes a ``Skip`` naming ``what``."""
        if name not in self.modules:
            try:
                self.modules[name] = importlib.import_module(name)
            except ImportError as exc:
                self.modules[name] = exc
        module = self.modules[name]
        if isinstance(module, ImportError):
            raise Skip(f"{what} is not installed ({module})")
        return module


@dataclass
class Prepared:
    """One system ready to run one layer."""

    call: Callable[[], Any]  # one run; returns the output in the system's own type
    variant: str  # what exactly runs, e.g. the schedule or the library path taken
    to_numpy: Callable[[Any], np.ndarray] = np.asarray
    sync: Callable[[], None] = lambda: None  # waits for a device; called inside the timing


# ------------------------------------------------------------------ numpy formulations
def _windows(x: np.ndarray, layer: Layer) -> np.ndarray:
    """(N, C, Ho, Wo, k, k) view of the zero-padded input (the padded copy is numpy's)."""
    p = layer.pad
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))) if p else x
    win = np.lib.stride_tricks.sliding_window_view(xp, (layer.k, layer.k), axis=(2, 3))
    return win[:, :, ::layer.stride, ::layer.stride]


def numpy_conv(x: np.ndarray, w: np.ndarray, layer: Layer) -> np.ndarray:
    """im2col + one BLAS matmul per group: the usual way to run a convolution on numpy."""
    n, g, k = x.shape[0], layer.groups, layer.k
    cg, fg, ho = layer.cin // g, layer.cout // g, layer.hw_out
    win = _windows(x, layer).reshape(n, g, cg, ho, ho, k, k)
    # The reshape copies the strided window view into a contiguous (Ho*Wo, Cg*k*k) matrix.
    cols = win.transpose(0, 1, 3, 4, 2, 5, 6).reshape(n, g, ho * ho, cg * k * k)
    mats = w.reshape(g, fg, cg * k * k).transpose(0, 2, 1)
    out = np.matmul(cols, mats)  # (N, G, Ho*Wo, Fg)
    return np.ascontiguousarray(out.transpose(0, 1, 3, 2).reshape(n, layer.cout, ho, ho))


def conv_reference(x: np.ndarray, w: np.ndarray, layer: Layer) -> np.ndarray:
    """The float64 result, by einsum over the window view (a formulation no peer uses)."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    win = _windows(x64, layer)
    if layer.groups == 1:
        return np.einsum("nchwij,fcij->nfhw", win, w64, optimize=True)
    n, g, k, ho = x.shape[0], layer.groups, layer.k, layer.hw_out
    win = win.reshape(n, g, layer.cin // g, ho, ho, k, k)
    wg = w64.reshape(g, layer.cout // g, layer.cin // g, k, k)
    out = np.einsum("ngchwij,gfcij->ngfhw", win, wg, optimize=True)
    return out.reshape(n, layer.cout, ho, ho)


def prepare_numpy(layer: Layer, inputs: Inputs, ctx: Context) -> Prepared:
    x, w = inputs
    variant = "im2col (sliding_window_view) + np.matmul"
    if layer.groups > 1:
        variant += f", one per group ({layer.groups})"
    return Prepared(lambda: numpy_conv(x, w, layer), f"{variant}; {_blas()}")


def _blas() -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas.get('version', '')}".strip()
    except Exception:  # numpy's build info moves between releases: it is only a label
        return "BLAS unknown"


# ------------------------------------------------------------------ polyopt
def polyopt_definition(layer: Layer) -> tuple[str, str, dict[str, int]]:
    """(def name, TC source, sizes) from the kernels library; padding stays in the def."""
    geometry: dict[str, object] = {"stride": layer.stride, "padding": layer.pad}
    sizes = {"N": 0, "C": layer.cin, "H": layer.hw, "W": layer.hw, "KH": layer.k, "KW": layer.k}
    if layer.kind == "depthwise":
        return "depthwise_conv2d", kernels.get("depthwise_conv2d", **geometry), sizes
    sizes["F"] = layer.cout
    if layer.groups > 1:
        geometry |= {"groups": layer.groups, "in_channels": layer.cin,
                     "out_channels": layer.cout}
        sizes["CK"] = layer.cin // layer.groups
    return "conv2d", kernels.get("conv2d", **geometry), sizes


def prepare_polyopt(layer: Layer, inputs: Inputs, ctx: Context) -> Prepared:
    x, w = inputs
    name, source, sizes = polyopt_definition(layer)
    sizes["N"] = x.shape[0]
    # Compiling for an unsupported target raises a PolyoptError here: the caller reports
    # it as this layer's failure, whatever the target.
    kernel = api.compile(source, name, target=ctx.target, sizes=sizes,
                             options={"tuned": ctx.use_db})
    record = lookup(source, name, sizes, ctx.target) if ctx.use_db else None
    # A record compile could not use (a TuningWarning) leaves the automatic schedule.
    found = record is not None and kernel.schedule.as_json() == record.schedule_json
    variant = f"{name}, {'tuned' if found else 'automatic'} schedule, target {ctx.target}"
    if ctx.target == "c":
        variant += f", OpenMP threads {os.environ.get('OMP_NUM_THREADS', 'default')}"
    return Prepared(lambda: kernel(x, w), variant)


# ------------------------------------------------------------------ torch
def prepare_torch(layer: Layer, inputs: Inputs, ctx: Context) -> Prepared:
    torch = ctx.load("torch", "torch")
    functional = torch.nn.functional
    if ctx.target == "cuda":
        if not torch.cuda.is_available():
            raise Skip("torch has no CUDA device here")
        device, sync = torch.device("cuda"), torch.cuda.synchronize
        variant = f"torch {torch.__version__} F.conv2d on {torch.cuda.get_device_name()}"
    else:
        device, sync = torch.device("cpu"), (lambda: None)
        torch.set_num_threads(ctx.threads)
        variant = f"torch {torch.__version__} F.conv2d, {torch.get_num_threads()} threads"
    x, w = (torch.from_numpy(a).to(device) for a in inputs)
    kw = {"stride": layer.stride, "padding": layer.pad, "groups": layer.groups}

    def call() -> Any:
        with torch.no_grad():
            return functional.conv2d(x, w, **kw)

    return Prepared(call, variant, lambda out: out.detach().cpu().numpy(), sync)
