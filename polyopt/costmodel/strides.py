"""Where an access moves: the one stride analysis every decision asks.

- On a schedule (``stride``): an access's stride class along the next iteration of one loop
  (the cost model's first ingredient, ``costmodel/cost``), exact after any transformation:
  the access relation composed with "the next iteration of that loop, the other loops of
  the statement's path fixed", whose deltas are one vector (``invariant`` if zero, ``unit``
  if one element in row-major order, else ``strided``) or several (``gather``: a
  data-dependent index).
- Its fast path on the IR, where no schedule exists yet (``index_use``): where an iterator
  appears in an access's indices, and its coefficient in the last (stride-1) one. The CPU
  pipeline's layout and register-tile choices, the CUDA mapping and the tuner's space and
  features read it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import islpy as isl

from polyopt import ir
from polyopt.dtypes import DTYPES
from polyopt.lang import affine
from polyopt.poly.model import PolyProgram, PolyStmt, tensor_box
from polyopt.schedules.memo import Memo
from polyopt.schedules.tree import Loop, pieces

INVARIANT, UNIT, STRIDED, GATHER = "invariant", "unit", "strided", "gather"
_SET = isl.dim_type.set


@dataclass(frozen=True)
class Access:
    """One read or write of a statement: its relation restricted to the domain."""

    stmt: str
    tensor: str
    write: bool
    relation: isl.Map


@dataclass(frozen=True)
class Stride:
    """How an access moves along one loop: a class and, unless a gather, the bytes (and
    the signed elements of the flat, row-major index)."""

    kind: str
    bytes: int = 0
    elems: int = 0


# Shared by every estimate (see ``cost``): candidate orders rebuild their Loop nodes but keep
# the loops' ``expr`` objects, which these key on.
_MAPS: Memo[dict[str, isl.Map]] = Memo(1024)
_STEPS: Memo[isl.Map | None] = Memo(2048)
_STRIDES: Memo[Stride] = Memo(2048)
_ACCESSES: Memo[tuple[Access, ...]] = Memo(1024)


def accesses(poly: PolyProgram, stmt: str) -> tuple[Access, ...]:
    """The reads and the write of statement ``stmt`` (the same objects for every
    estimate, which the memos key on)."""
    return _ACCESSES.get((poly,), stmt, lambda: _accesses(poly, stmt))


def _accesses(poly: PolyProgram, stmt: str) -> tuple[Access, ...]:
    s = poly.stmt(stmt)
    out = [Access(stmt, r.read.tensor, False, r.relation) for r in s.reads]
    write = s.write.intersect_domain(s.domain)
    out.append(Access(stmt, s.stmt.tensor, True, write))
    return tuple(out)


def elem_bytes(poly: PolyProgram, tensor: str) -> int:
    return int(DTYPES[poly.program.tensors[tensor].dtype].np.itemsize)


@functools.lru_cache(maxsize=256)  # per model (compared by identity) and tensor
def extents(poly: PolyProgram, tensor: str) -> tuple[int, ...] | None:
    box = tensor_box(poly.program, tensor)
    out = []
    for k in range(box.dim(_SET)):
        hi = box.dim_max_val(k)
        if not hi.is_int():
            return None
        out.append(int(hi.to_python()) + 1)
    return tuple(out)


def loop_map(lp: Loop, stmt: str) -> isl.Map | None:
    """``stmt[i] -> [value of lp]``."""
    return _loop_maps(lp).get(stmt)


def _loop_maps(lp: Loop) -> dict[str, isl.Map]:
    """Each statement's ``stmt[i] -> [value of lp]``: one pass over the loop's pieces (a
    loop over n statements has n of them; a lookup each was quadratic)."""
    return _MAPS.get((lp.expr,), None, lambda: {
        pa.get_domain_space().get_tuple_name(_SET): isl.Map.from_pw_aff(pa)
        for pa in pieces(lp.expr)})


def _same(m: isl.Map) -> isl.Map:
    return m.apply_range(m.reverse())


def step_map(path: list[Loop], lp: Loop, s: PolyStmt) -> isl.Map | None:
    """``s[i] -> s[i']``: the next iteration of ``lp`` with the other loops of ``path``
    (the loops above ``s``) unchanged, within the domain."""
    others = sorted((o.expr for o in path if o is not lp), key=id)  # their order: no matter
    return _STEPS.get((s, lp.expr, *others), len(others), lambda: _step_map(path, lp, s))


def _step_map(path: list[Loop], lp: Loop, s: PolyStmt) -> isl.Map | None:
    m = loop_map(lp, s.name)
    if m is None:
        return None
    plus = isl.Map("{ [v] -> [v + 1] }").align_params(m.get_space())
    out = m.apply_range(plus).apply_range(m.reverse())
    for other in path:
        om = loop_map(other, s.name) if other is not lp else None
        if om is not None:
            out = out.intersect(_same(om))
    return out.intersect_domain(s.domain).intersect_range(s.domain)


def stride(poly: PolyProgram, acc: Access, step: isl.Map) -> Stride:
    """The stride class of ``acc`` along the loop whose next iteration is ``step``."""
    return _STRIDES.get((poly, acc.relation, step), acc.tensor,
                        lambda: _stride(poly, acc, step))


def _stride(poly: PolyProgram, acc: Access, step: isl.Map) -> Stride:
    moves = acc.relation.reverse().apply_range(step).apply_range(acc.relation)
    if moves.is_empty():
        return Stride(INVARIANT)
    deltas = moves.deltas()
    lo, hi = deltas.lexmin(), deltas.lexmax()
    if not lo.is_equal(hi) or not lo.is_singleton():
        return Stride(GATHER)
    point = lo.sample_point()
    ext = extents(poly, acc.tensor)
    if ext is None:
        return Stride(GATHER)
    flat, scale = 0, 1
    for k in range(len(ext) - 1, -1, -1):
        flat += int(point.get_coordinate_val(_SET, k).to_python()) * scale
        scale *= ext[k]
    size = elem_bytes(poly, acc.tensor)
    kind = INVARIANT if flat == 0 else UNIT if abs(flat) == 1 else STRIDED
    return Stride(kind, abs(flat) * size, flat)


def iterator_bytes(poly: PolyProgram, tensor: str, indices: tuple[ir.Expr, ...],
                   it: str) -> int | None:
    """Bytes between the elements of ``tensor`` that ``indices`` name at consecutive
    values of index ``it`` (row-major at known extents): a register tile's rows apart, a
    transposed access's pages apart; None when an extent or an index is not known
    affine."""
    ext = extents(poly, tensor)
    if ext is None:
        return None
    gap = 0
    for d, ix in enumerate(indices):
        try:
            coeff = dict(affine.from_expr(ix, frozenset(ir.index_names(ix))).terms)
        except affine.NotAffine:
            return None
        gap += coeff.get(it, 0) * math.prod(ext[d + 1:])
    return abs(gap) * elem_bytes(poly, tensor)


@dataclass(frozen=True)
class IndexUse:
    """Where iterator ``it`` appears in an access's indices (``index_use``)."""

    rank: int | None  # dimensions before the last of the nearest index using it; None: unused
    alone: bool  # the last index is ``it`` itself: unit stride along it
    coefficient: int | None  # its coefficient in the last index; None: that is not affine

    @property
    def last(self) -> bool:
        """Does the last (stride-1) index use ``it``?"""
        return self.rank == 0


def index_use(indices: tuple[ir.Expr, ...], it: str) -> IndexUse:
    """Where iterator ``it`` appears in ``indices`` (an access's, outermost first)."""
    ranks = [len(indices) - 1 - d for d, ix in enumerate(indices) if _uses(ix, it)]
    if not indices:
        return IndexUse(None, False, 0)
    last = indices[-1]
    alone = isinstance(last, ir.Var) and last.name == it
    return IndexUse(min(ranks, default=None), alone, _coefficient(last, it))


def _uses(e: ir.Expr, it: str) -> bool:
    return any(isinstance(v, ir.Var) and v.kind == "index" and v.name == it for v in e.walk())


def _coefficient(e: ir.Expr, it: str) -> int | None:
    """The coefficient of ``it`` in affine ``e`` (inside a floor it counts as none, as in
    isl's form of the access; a min or max has no one coefficient)."""
    try:
        lin = affine.from_expr(e, frozenset({it}))
    except affine.NotAffine:
        return None
    if any(isinstance(atom, affine.MinMax) for atom, _ in lin.terms):
        return None
    return sum(c for atom, c in lin.terms if atom == it)
