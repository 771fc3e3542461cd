"""einsum's subscripts read against the operands' shapes: each dim's label and extent.

A label is a subscript letter, or ``...k`` for the k-th of the dims a '...' stands for,
numbered so that the operands' broadcast dims align on the right, as numpy broadcasts;
extents of 1 broadcast.
"""

from __future__ import annotations

import string
from collections import Counter
from functools import lru_cache

from polyopt.errors import OptionError, ShapeError

__all__ = ["spec"]

_LETTERS = frozenset(string.ascii_letters)


@lru_cache(maxsize=1024)
def spec(subscripts: str, shapes: tuple[tuple[int, ...], ...]) -> tuple[
        tuple[tuple[str, ...], ...], tuple[str, ...], dict[str, int]]:
    """Each operand's dim labels, the output's, and each label's extent, checked (once per
    distinct subscripts and shapes: the callers only read the results)."""
    terms, out_term = _split(subscripts)
    if len(terms) != len(shapes):
        raise ShapeError(f"einsum subscripts {subscripts!r} name {len(terms)} operand(s) "
                         f"but {len(shapes)} were given")
    ins, out_labels = _labels(terms, out_term, list(shapes))
    return tuple(map(tuple, ins)), tuple(out_labels), _extents(ins, list(shapes))


def _split(subscripts: str) -> tuple[list[str], str | None]:
    """The input terms and the output term (None in implicit mode), without spaces, checked."""
    lhs, arrow, rhs = subscripts.replace(" ", "").partition("->")
    terms = lhs.split(",")
    for k, term in enumerate([*terms, rhs] if arrow else terms):
        what = "the output" if k == len(terms) else f"operand {k}"
        letters = term.replace("...", "", 1)
        if "." in letters:
            raise OptionError(f"einsum subscripts {subscripts!r} have a '.' that is not part of "
                              f"a single ellipsis ('...') in {what}")
        bad = [c for c in letters if c not in _LETTERS]
        if bad:
            raise OptionError(f"einsum subscripts {subscripts!r} have the invalid character "
                              f"{bad[0]!r} in {what}; subscripts must be letters")
    return terms, rhs if arrow else None


def _labels(terms: list[str], out_term: str | None,
            shapes: list[tuple[int, ...]]) -> tuple[list[list[str]], list[str]]:
    """Each operand's label per dim, and the output's; the k-th '...' dim is labelled '...k'."""
    ranks = []
    for k, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        n = len(term.replace("...", ""))
        if len(shape) < n or ("..." not in term and len(shape) != n):
            raise ShapeError(f"einsum operand {k} has {len(shape)} dimension(s) but its "
                             f"subscripts {term!r} name {n}")
        ranks.append(len(shape) - n)
    nb = max(ranks, default=0)
    ins = []
    for term, r in zip(terms, ranks, strict=True):
        head, _, tail = term.partition("...")
        ins.append([*head, *(f"...{nb - r + j}" for j in range(r)), *tail])
    dots = [f"...{j}" for j in range(nb)]
    counts = Counter(c for term in terms for c in term.replace("...", ""))
    if out_term is None:
        return ins, [*dots, *sorted(c for c, n in counts.items() if n == 1)]
    head, _, tail = out_term.partition("...")
    for c, n in Counter(head + tail).items():
        if n > 1:
            raise OptionError(f"einsum output subscript {c!r} appears more than once in "
                              f"{out_term!r}")
        if c not in counts:
            raise OptionError(f"einsum output subscript {c!r} does not appear in any input")
    if nb and "..." not in out_term:
        raise ShapeError(f"einsum operands have {nb} broadcast ('...') dimension(s) but the "
                         f"output subscripts {out_term!r} have no '...'")
    return ins, [*head, *dots, *tail]


def _extents(ins: list[list[str]], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    """Each label's extent, in order of first appearance; size-1 dims broadcast across operands."""
    ext: dict[str, int] = {}
    source: dict[str, int] = {}  # the operand that gave ext[label]
    for k, (labels, shape) in enumerate(zip(ins, shapes, strict=True)):
        mine: dict[str, int] = {}
        for lab, n in zip(labels, shape, strict=True):
            if mine.setdefault(lab, n) != n:
                raise ShapeError(f"einsum operand {k} repeats subscript {_show(lab)} with "
                                 f"extents {mine[lab]} and {n}")
        for lab, n in mine.items():
            if lab not in ext or ext[lab] == 1:
                ext[lab], source[lab] = n, k
            elif n not in (ext[lab], 1):
                raise ShapeError(f"einsum subscript {_show(lab)} has extent {n} in operand {k} "
                                 f"but {ext[lab]} in operand {source[lab]}")
    return ext


def _show(label: str) -> str:
    return f"'...' dimension {label[3:]}" if label.startswith("...") else repr(label)
