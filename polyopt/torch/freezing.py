"""Inference with frozen weights: a graph's parameters as constants, folded at compile time.

In an inference graph (``torch.no_grad()`` or ``inference_mode()``) the parameters and
buffers are inputs of the graph, which Dynamo marks static; the backend reads their values
there.
Like Inductor's ``freezing``, the backend then treats them as constants: a batch norm after
a convolution becomes the convolution's own weights and bias, computed once here, so no
kernel spends a pass on it. A model whose weights change after compiling must be compiled
again (``torch._dynamo.reset()``), as with Inductor's freezing.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

aten = torch.ops.aten


def parameters(example_inputs: Sequence[Any]) -> list[torch.Tensor | None]:
    """Per input of a Dynamo graph, its value when it is a parameter or a buffer (Dynamo
    marks those inputs static), else None. An inference graph's inputs are these, in order."""
    return [e if isinstance(e, torch.Tensor) and getattr(e, "_dynamo_static_input_type", None)
            else None for e in example_inputs]


def fold_batch_norms(gm: torch.fx.GraphModule, params: Sequence[torch.Tensor | None]) -> int:
    """Fold each inference batch norm whose input is a convolution read by nothing else, and
    whose statistics, affine weights and the convolution's weights are all ``params``, into
    that convolution. Returns how many were folded."""
    known = _known(gm, params)
    folded = 0
    for bn in list(gm.graph.nodes):
        if bn.target is not aten._native_batch_norm_legit_no_training.default:
            continue
        conv = bn.args[0]
        if (not isinstance(conv, torch.fx.Node) or conv.target is not aten.convolution.default
                or len(conv.users) != 1 or conv.args[6]):
            continue
        values = _constants(known, conv.args[1], conv.args[2], *bn.args[1:5])
        items = list(bn.users)
        if values is None or any(u.target is not operator.getitem or u.args[1] != 0 for u in items):
            continue
        with unset_fake_temporarily():  # AOTAutograd compiles under fake tensors
            weight, bias = _fold(*values, eps=float(bn.args[6]))
        with gm.graph.inserting_before(conv):
            w_node = _constant(gm, f"_polyopt_frozen_w{folded}", weight)
            b_node = _constant(gm, f"_polyopt_frozen_b{folded}", bias)
            new = gm.graph.call_function(aten.convolution.default,
                                         (conv.args[0], w_node, b_node, *conv.args[3:]))
        new.meta = dict(conv.meta)
        for item in items:
            item.replace_all_uses_with(new)
            gm.graph.erase_node(item)
        gm.graph.erase_node(bn)
        gm.graph.erase_node(conv)
        folded += 1
    if folded:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return folded


def constant_nodes(gm: torch.fx.GraphModule, params: Sequence[torch.Tensor | None]
                   ) -> frozenset[str]:
    """The names of ``gm``'s nodes whose values are the same at every call: its inputs that
    are ``params``, and the constants folding made. A kernel reading one is told so (the
    ``constants`` option), and packs its weights once rather than at each call."""
    known = _known(gm, params)
    return frozenset(n.name for n in gm.graph.nodes if n in known or n.op == "get_attr")


def _known(gm: torch.fx.GraphModule, params: Sequence[torch.Tensor | None]
           ) -> dict[torch.fx.Node, torch.Tensor]:
    """``gm``'s inputs that are ``params``, with their values."""
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {n: p for n, p in zip(inputs, params, strict=False)
            if p is not None and _same(n.meta.get("val"), p)}


def _constants(known: dict[torch.fx.Node, torch.Tensor], *nodes: Any
               ) -> list[torch.Tensor | None] | None:
    """Each node's value (None for an absent optional argument); None when one is not a
    known parameter."""
    out: list[torch.Tensor | None] = []
    for node in nodes:
        if node is None:
            out.append(None)
        elif isinstance(node, torch.fx.Node) and node in known:
            out.append(known[node])
        else:
            return None
    if out[0] is None or out[4] is None or out[5] is None:  # weight, mean, var
        return None
    return out


def _fold(weight: Any, bias: torch.Tensor | None, gamma: torch.Tensor | None,
          beta: torch.Tensor | None, mean: Any, var: Any, *, eps: float
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """``bn(conv(x, w, b))`` as ``conv(x, w', b')``, in float64 and rounded once."""
    scale = torch.rsqrt(var.double() + eps)
    if gamma is not None:
        scale = scale * gamma.double()
    shape = (-1,) + (1,) * (weight.dim() - 1)
    w = (weight.double() * scale.reshape(shape)).to(weight.dtype).contiguous()
    b = (bias.double() if bias is not None else torch.zeros_like(scale)) - mean.double()
    b = b * scale + (beta.double() if beta is not None else 0.0)
    return w, b.to(weight.dtype).contiguous()


def _same(fake: Any, value: torch.Tensor) -> bool:
    return (isinstance(fake, torch.Tensor) and tuple(fake.shape) == tuple(value.shape)
            and fake.dtype == value.dtype)


def _constant(gm: torch.fx.GraphModule, name: str, value: torch.Tensor) -> torch.fx.Node:
    gm.register_buffer(name, value)  # a get_attr must name a buffer, parameter or module
    node = gm.graph.get_attr(name)
    node.meta["val"] = value
    return node
