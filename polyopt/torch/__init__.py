"""PyTorch front ends (``pip install polyopt[torch]``); ``import polyopt`` imports none of this.

- ``ops.py``: a TC definition as a PyTorch custom operator (``op``), with its derived gradient,
  and ``einsum`` as the operator ``polyopt::einsum``.
- ``graph.py``: an FX graph of ATen operators as values (shapes, dtypes, uses) the lowering
  reads.
- ``lowering.py``: each supported ATen operator as TC statements over index maps (views are
  read through, never copied).
- ``partition.py``: a graph cut into maximal runs of supported operators, each one TC def of
  several statements (so fusion across operators is the scheduler's decision).
- ``compiler.py``: ``torch.compile(model, backend="polyopt")`` (AOTAutograd with core ATen
  decompositions) and ``explain``, which prints the partitions and every fallback's reason.
"""

from __future__ import annotations

import torch as torch

from polyopt.torch import ops as ops
from polyopt.torch.compiler import backend, explain
from polyopt.torch.ops import Op, einsum, op

__all__ = ["Op", "backend", "einsum", "explain", "op"]
