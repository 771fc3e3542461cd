"""Epilogues written into their contraction's tensor: a partition's statements after lowering.

A lowering writes each operator's result to a tensor of its own, so a convolution followed by
its bias and ReLU is three tensors. Where a pointwise statement reads a contraction's result
only at its own index, and nothing else reads that result, the statement can update the
contraction's tensor in place instead (``O(..) +=! ..`` then ``O(..) = max(O(..) + b, 0)``,
as the bundled ``conv2d_bias_relu`` is written): the contraction then writes the
partition's output, and the CPU pipeline's layout search (channel blocks of an output,
``pipeline/blocked.py``) applies to it as to a single-operator def.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from polyopt.torch.aten import Statement

NARROW = ("float16", "bfloat16")


def fold_epilogues(stmts: Sequence[Statement], inputs: set[str], outputs: set[str],
                   narrow: bool = False) -> tuple[list[Statement], dict[str, str]]:
    """``stmts`` with each contraction's pointwise epilogue chain written into its tensor,
    and the renames (epilogue tensor -> contraction tensor). A tensor the def returns keeps
    its value: nothing is written into it. Defs with 16-bit tensors (``narrow``) are left
    as they are."""
    out = list(stmts)
    renames: dict[str, str] = {}
    if any(s.dtype in NARROW for s in out) or narrow:
        return out, renames  # a reduction over 16-bit values is typed by them, not as lowered
    for k, s in enumerate(out):
        if s.op != "+=!" or s.target in inputs:
            continue
        target, last = s.target, k
        while (target not in outputs and (j := _sole_reader(out, last, target)) is not None
               and _folds(out[j], target) and out[j].shape == s.shape
               and out[j].dtype == s.dtype):
            old = out[j].target
            out[j] = _written_into(out[j], target)
            for m in range(j + 1, len(out)):
                out[m] = _renamed(out[m], old, target)
            renames = {a: (target if b == old else b) for a, b in renames.items()}
            renames[old] = target
            outputs = {target if o == old else o for o in outputs}
            last = j
    return out, renames


def _sole_reader(stmts: Sequence[Statement], last: int, name: str) -> int | None:
    """The one statement after ``last`` (the last that writes ``name``) that reads it."""
    readers = [j for j in range(last + 1, len(stmts)) if name in stmts[j].reads]
    return readers[0] if len(readers) == 1 else None


def _folds(s: Statement, name: str) -> bool:
    """Is ``s`` pointwise in ``name`` (read at ``s``'s own indices only), of its shape?"""
    if s.op != "=" or s.target == name:
        return False
    own = ", ".join(f"i{d}" for d in range(len(s.shape)))
    reads = re.findall(rf"\b{re.escape(name)}\(([^()]*)\)", s.text.split(" = ", 1)[1])
    return bool(reads) and all(r == own for r in reads)


def _written_into(s: Statement, name: str) -> Statement:
    lhs, rest = s.text.split("(", 1)
    assert lhs == s.target
    return replace(s, target=name, text=f"{name}({rest}")


def _renamed(s: Statement, old: str, new: str) -> Statement:
    if old not in s.reads and s.target != old:
        return s
    text = re.sub(rf"\b{re.escape(old)}\(", f"{new}(", s.text)
    reads = frozenset(new if r == old else r for r in s.reads)
    return replace(s, target=new if s.target == old else s.target, text=text, reads=reads)
