"""ATen operators as TC statements: the lowering table of the ``torch.compile`` backend.

Each lowering takes a ``Builder`` (the def being written), the operator's ``Out`` (shape and
TC type from torch's fake tensor) and its arguments with every tensor a ``graph`` value; it
emits statements and returns the result's value. Views emit nothing: they return an index map
over the tensor they read. An argument a lowering cannot take raises ``graph.Unsupported``
with the reason, and the operator stays in torch.

- ``table.py``: the frame (Builder, Statement, Out, literals, broadcast reads).
- ``pointwise.py``, ``reductions.py``, ``contractions.py``, ``views.py``: the lowerings, each
  module's ``LOWERINGS`` joined into ``TABLE`` here.
"""

from __future__ import annotations

from typing import Any

from polyopt.torch.aten import contractions, pointwise, reductions, views
from polyopt.torch.aten.table import Builder, Lowering, Out, Statement

TABLE: dict[Any, Lowering] = {**pointwise.LOWERINGS, **reductions.LOWERINGS,
                              **contractions.LOWERINGS, **views.LOWERINGS}

__all__ = ["TABLE", "Builder", "Out", "Statement"]
