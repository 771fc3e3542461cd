"""An einsum contraction as one TC definition, real or complex, in a canonical form.

Real dtypes: one statement, ``O(a_,c_) +=! T0(a_,b_) * T1(b_,c_)`` for ``ij,jk->ik``. A
size-1 dim that broadcasts against a larger one is declared ``1`` and read at ``0``; the
sizes are ``N0, N1, ...`` in order of first appearance. The output's dims are listed in the
result's memory order, so the kernel writes the layout ``order=`` asked for.

The form is canonical, so that contractions that differ only in how they are written share
one kernel (each distinct definition costs a C compiler run): the operands are ordered by
rank (stably), the labels are renamed ``a, b, c, ...`` in order of first appearance, and
two labels that are adjacent, in the same order, in every operand that has either (and in
the output, if they are output labels) are merged into one, as numpy's iterator coalesces
axes: ``...i->...`` on a 3-d array is ``ab->a`` on a 2-d view of it, the same kernel as
``ij->i``. The operands, cast C-contiguous, are reshaped to the merged dims for free.

Complex dtypes: TC and its code generator know only real types, so a complex contraction is
lowered here to one real definition over the real and imaginary parts. A complex operand is
passed as a real array with a trailing dim of 2 (numpy's own memory layout of complex
values: real, imaginary) and the product of the operands is expanded symbolically into two
statements, one per output part::

    O(a_,c_)  +=! T0(a_,b_,0) * T1(b_,c_,0) - T0(a_,b_,1) * T1(b_,c_,1)
    Oi(a_,c_) +=! T0(a_,b_,0) * T1(b_,c_,1) + T0(a_,b_,1) * T1(b_,c_,0)

A real operand of a complex contraction enters with its real part only (its imaginary part
is 0, so the terms that would read it vanish). With ``c`` complex operands each statement
has ``2**(c-1)`` terms; the scheduler sees two ordinary reductions over the same domain.
"""

from __future__ import annotations

import itertools
import math
import string
from collections.abc import Sequence
from dataclasses import dataclass

from polyopt.errors import OptionError

__all__ = ["MAX_COMPLEX_OPERANDS", "Form", "kernel_form", "points", "tc_text"]

MAX_COMPLEX_OPERANDS = 8  # 128 terms per statement; more would be a slow, huge kernel


@dataclass(frozen=True)
class Form:
    """A contraction in canonical form: what the kernel's definition says."""

    operands: tuple[int, ...]  # the einsum operand each kernel operand is
    labels: tuple[tuple[str, ...], ...]  # each kernel operand's dim labels
    shapes: tuple[tuple[int, ...], ...]  # each kernel operand's shape (merged dims)
    pairs: tuple[bool, ...]  # kernel operands passed as (real, imaginary) pairs
    out: tuple[str, ...]  # the output's labels, in memory order
    ext: tuple[tuple[str, int], ...]  # each label's extent, in order of first appearance


def kernel_form(ins: Sequence[Sequence[str]], out: Sequence[str],
                shapes: Sequence[tuple[int, ...]], ext: dict[str, int],
                pairs: Sequence[bool]) -> Form:
    """The canonical form of the contraction of operands labelled ``ins`` (shapes ``shapes``)
    into ``out`` (in memory order), labels' extents ``ext``."""
    order = sorted(range(len(ins)), key=lambda k: (len(ins[k]), pairs[k]))
    labels = [list(ins[k]) for k in order]
    # A dim broadcast against a larger extent keeps the label of its extent-1 read: '1'.
    labels = [[lab if n == ext[lab] else "1" for lab, n in zip(labs, shapes[k], strict=True)]
              for labs, k in zip(labels, order, strict=True)]
    extent = {lab: n for lab, n in ext.items()}
    outs = list(out)
    while _merge_one(labels, outs, extent):
        pass
    names = _names(labels, outs)
    new_labels = tuple(tuple(names.get(lab, "1") for lab in labs) for labs in labels)
    first = dict.fromkeys(lab for labs in new_labels for lab in labs if lab != "1")
    new_ext = {names[lab]: n for lab, n in extent.items() if lab in names}
    kshapes = tuple(tuple(new_ext.get(lab, 1) for lab in labs) for labs in new_labels)
    return Form(tuple(order), new_labels, kshapes, tuple(pairs[k] for k in order),
                tuple(names[lab] for lab in outs), tuple((lab, new_ext[lab]) for lab in first))


def _merge_one(labels: list[list[str]], out: list[str], extent: dict[str, int]) -> bool:
    """Merge one pair of labels that are adjacent, in order, wherever either appears (each
    once; never a broadcast dim); False when no pair can be."""
    for labs in labels:
        for a, b in itertools.pairwise(labs):
            if a != b and "1" not in (a, b) and _mergeable(a, b, labels, out):
                for other in labels:
                    if b in other:
                        other.remove(b)
                if b in out:
                    out.remove(b)
                extent[a] *= extent.pop(b)
                return True
    return False


def _mergeable(a: str, b: str, labels: list[list[str]], out: list[str]) -> bool:
    if (a in out) != (b in out) or (a in out and out.index(b) != out.index(a) + 1):
        return False
    for labs in labels:
        na, nb = labs.count(a), labs.count(b)
        if (na, nb) == (0, 0):
            continue
        if (na, nb) != (1, 1) or labs.index(b) != labs.index(a) + 1:
            return False
    return True


def _names(labels: list[list[str]], out: list[str]) -> dict[str, str]:
    """Canonical names ``a, b, ..., Z, a1, ...`` in order of first appearance."""
    seen = dict.fromkeys(lab for labs in labels for lab in labs if lab != "1")
    letters = string.ascii_lowercase + string.ascii_uppercase
    return {lab: letters[j % 52] + (str(j // 52) if j >= 52 else "")
            for j, lab in enumerate(seen)}


def tc_text(form: Form, tc_type: str) -> tuple[str, dict[str, int]]:
    """The TC definition ``einsum`` of ``form`` on elements of ``tc_type``, and the value
    of each of its sizes."""
    size = {lab: f"N{j}" for j, (lab, _) in enumerate(form.ext)}
    params, reads = [], []
    for k, labels in enumerate(form.labels):
        dims = [size.get(lab, "1") for lab in labels] + (["2"] if form.pairs[k] else [])
        index = [f"{lab}_" if lab != "1" else "0" for lab in labels]
        params.append(f"{tc_type}({','.join(dims)}) T{k}" if dims else f"{tc_type} T{k}")
        reads.append([_read(k, index, part) for part in ((0, 1) if form.pairs[k] else (None,))])
    outs = ["O", "Oi"] if any(form.pairs) else ["O"]
    # numpy's bool sum of products is OR of ANDs: max=! keeps every value 0 or 1.
    summed = len(form.ext) > len(form.out)
    op = ("max=!" if tc_type == "bool" else "+=!") if summed else "="
    lhs = f"({','.join(f'{lab}_' for lab in form.out)})" if form.out else ""
    stmts = [f"{name}{lhs} {op} {rhs}" for name, rhs in zip(outs, _parts(reads), strict=False)]
    text = f"def einsum({', '.join(params)}) -> ({', '.join(outs)}) {{ {'  '.join(stmts)} }}"
    return text, {size[lab]: n for lab, n in form.ext}


def points(form: Form) -> int:
    """The contraction's iteration points (the product of its extents)."""
    return math.prod(n for _, n in form.ext)


def _read(k: int, index: list[str], part: int | None) -> str:
    subscripts = [*index, str(part)] if part is not None else index
    return f"T{k}({','.join(subscripts)})" if subscripts else f"T{k}"


def _parts(reads: list[list[str]]) -> list[str]:
    """The product of the operands, expanded into its real part and (when some operand is a
    pair) its imaginary part: each term picks one part per operand, and ``m`` imaginary
    picks contribute ``i**m`` (+1, +i, -1, -i for m = 0, 1, 2, 3 mod 4)."""
    if sum(len(r) > 1 for r in reads) > MAX_COMPLEX_OPERANDS:
        raise OptionError(f"einsum multiplies at most {MAX_COMPLEX_OPERANDS} complex operands "
                          f"in one contraction, got {sum(len(r) > 1 for r in reads)}")
    terms: list[list[tuple[int, str]]] = [[], []]
    for choice in itertools.product(*(range(len(r)) for r in reads)):
        m = sum(choice)
        product = " * ".join(r[c] for r, c in zip(reads, choice, strict=True))
        terms[m % 2].append((-1 if m % 4 >= 2 else 1, product))
    out = []
    for part in terms:
        if part:
            part.sort(key=lambda t: -t[0])  # stable: the positive terms first, in order
            text = part[0][1] + "".join(f" {'+' if s > 0 else '-'} {p}" for s, p in part[1:])
            out.append(text)
    return out
