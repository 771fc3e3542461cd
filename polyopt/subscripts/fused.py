"""A contraction path as one TC definition: each step a statement, the intermediates locals.

Along a path, ``einsum`` runs each pairwise step as a kernel call of its own. Where every
step is small (at most ``call.FUSED_POINTS`` iteration points), a call's fixed cost (a
few microseconds: argument checks, output allocation) is of the order of the step's work,
so the steps run as one definition, one call, a plain size-generic loop nest on one thread:
``ij,jk,kl->il`` along ``(0, 1), (0, 1)`` becomes::

    def einsum_path(float(N0,N1) T0, float(N1,N2) T1, float(N2,N3) T2) -> (O) local (S0) {
        S0(a_,c_) +=! T0(a_,b_) * T1(b_,c_)
        O(a_,d_) +=! S0(a_,c_) * T2(c_,d_)
    }

Larger steps keep a kernel each, scheduled on its own (the scheduler tiles one contraction
of a definition at a time best). Real operands only, each label with one extent (no
broadcast of a size-1 dim), no label repeated within a term (a diagonal).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from polyopt.subscripts.path import ContractionPath

__all__ = ["fused_text"]


def fused_text(path: ContractionPath, shapes: Sequence[tuple[int, ...]], tc_type: str,
               max_points: int) -> tuple[str, dict[str, int]] | None:
    """The TC definition ``einsum_path`` computing ``path`` on operands of ``shapes`` in
    ``tc_type``, and its sizes; None when a step has more than ``max_points`` iteration
    points or the operands are not of the plain kind the module docstring says."""
    extent: dict[str, int] = {}
    for term, shape in zip(path.inputs, shapes, strict=True):
        if len(set(term)) != len(term) or len(term) != len(shape):
            return None
        for label, n in zip(term, shape, strict=True):
            if extent.setdefault(label, n) != n:
                return None
    size = {label: f"N{j}" for j, label in enumerate(extent)}
    params = [_decl(tc_type, [size[lab] for lab in term], f"T{k}")
              for k, term in enumerate(path.inputs)]
    names = [f"T{k}" for k in range(len(path.inputs))]
    stmts: list[str] = []
    for j, step in enumerate(path.steps):
        ins, out = step.subscripts.split("->")
        terms = ins.split(",")
        labels = set("".join(terms))
        if math.prod(extent[lab] for lab in labels) > max_points:
            return None
        reads = [_ref(names.pop(p), term) for p, term in zip(step.operands, terms, strict=True)]
        target = "O" if j == len(path.steps) - 1 else f"S{j}"
        op = "+=!" if labels - set(out) else "="
        stmts.append(f"{_ref(target, out)} {op} {' * '.join(reads)}")
        names.append(target)
    local = f" local ({', '.join(f'S{j}' for j in range(len(stmts) - 1))})" if len(stmts) > 1 \
        else ""
    text = (f"def einsum_path({', '.join(params)}) -> (O){local} {{\n    "
            + "\n    ".join(stmts) + "\n}\n")
    return text, {size[lab]: n for lab, n in extent.items()}


def _decl(tc_type: str, dims: list[str], name: str) -> str:
    return f"{tc_type}({','.join(dims)}) {name}" if dims else f"{tc_type} {name}"


def _ref(name: str, term: str) -> str:
    return f"{name}({','.join(f'{lab}_' for lab in term)})" if term else name
