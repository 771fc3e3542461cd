"""Adjoint statements through the inverse of an access relation.

A statement ``T(lhs) op ... U(f(iters)) ...`` over the box ``iters`` sends, to every element
``x`` of ``U``, the sum of its terms over the iterations that read ``x``: the preimage of ``x``
under the access ``f``. ``adjoint_stmt`` writes that sum as a TC statement whose LHS indices
are ``x`` and whose reduction indices are the iterators it keeps:

- each dimension ``x_j = f_j(iters)`` eliminates one iterator ``v`` that occurs in it linearly
  with coefficient ``a``: ``v = (x_j - rest) / a``, under ``(x_j - rest) % a == 0`` when
  ``|a| > 1`` (a stride); an iterator of T's LHS is eliminated first (so a convolution keeps
  its window, not its output, as the reduction); a dimension with no such iterator left
  becomes an equality condition (``A(r_i, r_i)``: ``i == j``);
- an eliminated iterator must stay in its range: a multiplicative factor that reads it as a
  plain index of a tensor of that extent enforces it by zero padding (``d_O(n, f, y - r_kh,
  ...)`` reads 0 outside ``d_O``); otherwise a condition says it;
- isl checks that the kept and the new indices determine the old ones (the access, joined
  with the kept iterators, is injective), and computes how far each read of the new
  statement can fall outside its tensor: that is its pad.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from polyopt import ir
from polyopt.autodiff.affine import (
    Lin,
    Range,
    icst,
    ivar,
    linear,
    pw_expr,
    substitute,
    tidy,
    tidy_indices,
)
from polyopt.autodiff.calculus import cmp, select
from polyopt.autodiff.source import GStmt, PadSpec, expr_text
from polyopt.errors import NotDifferentiableError
from polyopt.poly import affine_text

# ---------------------------------------------------------------- the adjoint statement

@dataclass
class Frame:
    """What an adjoint statement needs of the def it is emitted into."""

    params: str  # isl parameter list
    context: isl.Set
    extents: dict[str, tuple[ir.Expr, ...]]  # true extents of every tensor of the grad def
    fills: dict[str, float]  # forward pad fill of tensors read through padding
    always_pad: set[str]  # tensors whose declared extents are not their true ones
    taken: set[str]  # names in use in the grad def


@dataclass(frozen=True)
class Term:
    """``factor`` (over the forward iterators) to add into ``target`` at ``read``'s indices."""

    target: str
    read: ir.Read
    factor: ir.Expr
    conds: tuple[ir.Expr, ...] = ()
    comment: str = ""


def adjoint_stmt(frame: Frame, stmt: ir.Stmt, box: Mapping[str, Range], term: Term,
                 op: str) -> GStmt:
    """The statement adding ``term`` into its target, indexed by the read's element."""
    read = term.read
    marks = [f"__x{j}" for j in range(len(read.indices))]
    subst, conds = _eliminate(stmt, read, marks)
    _check_injective(frame, stmt, box, read, subst)
    kept = [v for v in stmt.iters if v not in subst]
    names = _names(frame, stmt, read, kept)
    rename = {v: ivar(names[v]) for v in (*marks, *kept)}
    lhs = tuple(names[m] for m in marks)
    ranges: dict[str, Range] = {
        names[m]: (icst(0), ext)
        for m, ext in zip(marks, frame.extents[read.tensor], strict=True)}
    ranges |= {names[v]: _moved(box[v], subst, rename) for v in kept}
    bounds = [tidy_indices(substitute(c, rename)) for c in _range_conds(box, subst)]
    bounds = [c for c in bounds if not implied(frame, ranges, c)]
    if bounds and _enforced(frame, term.factor, subst, box):
        bounds = []
    conds += [substitute(c, subst) for c in term.conds]
    guard = [tidy_indices(substitute(c, rename)) for c in conds] + bounds
    body = tidy_indices(substitute(substitute(term.factor, subst), rename))
    rhs = body if not guard else select(_conj(guard), body, None)
    assert rhs is not None
    same = _renamings(frame, read, box, subst) | set(kept)
    moved = (tidy_indices(substitute(substitute(r, subst), rename))
             for e in (term.factor, *term.conds) for r in e.walk()
             if isinstance(r, ir.Read) and ir.index_names(r) <= same)
    inherited = frozenset(r for r in moved if isinstance(r, ir.Read))
    return finish(frame, term.target, lhs, op, rhs, ranges, term.comment, inherited)


def _renamings(frame: Frame, read: ir.Read, box: Mapping[str, Range],
               subst: Mapping[str, ir.Expr]) -> set[str]:
    """Eliminated iterators that are only renamed: ``v = x_j`` over v's whole range. A read
    indexed by these and kept iterators reads what the forward statement read, over the
    same box: it needs no padding the forward read did not have."""
    out = set()
    for v, value in subst.items():
        if isinstance(value, ir.Var) and value.name.startswith("__x"):
            j = int(value.name[3:])
            lo, hi = box[v]
            ext = frame.extents[read.tensor][j]
            if expr_text(lo) == "0" and expr_text(hi) == expr_text(ext):
                out.add(v)
    return out


def finish(frame: Frame, tensor: str, lhs: tuple[str, ...], op: str, rhs: ir.Expr,
           ranges: Mapping[str, Range], comment: str = "",
           inherited: frozenset[ir.Read] = frozenset()) -> GStmt:
    """The statement with the pads its reads need and the ``where`` ranges that range
    inference would not find by itself. ``inherited`` reads are the forward's, over its box:
    they keep the forward's padding, no more."""
    try:
        pads = pads_for(frame, rhs, ranges, inherited)
    except NotDifferentiableError as e:
        raise NotDifferentiableError(f"{e}, in the gradient statement writing '{tensor}' "
                                     f"({comment or expr_text(rhs)})") from None
    padded = {p.tensor for p in pads}
    implicit = _implicit(frame, rhs, ranges, padded)
    order = [v for v in lhs] + [v for v in _order(rhs) if v in ranges and v not in lhs]
    where = tuple((v, *ranges[v]) for v in order if v not in implicit)
    return GStmt(tensor, lhs, op, rhs, where, pads, comment)


def _order(e: ir.Expr) -> list[str]:
    seen: list[str] = []
    for x in e.walk():
        if isinstance(x, ir.Var) and x.kind == "index" and x.name not in seen:
            seen.append(x.name)
    return seen


def _conj(cs: Sequence[ir.Expr]) -> ir.Expr:
    out = cs[0]
    for c in cs[1:]:
        out = ir.Binary("bool", "&&", out, c)
    return out


def _eliminate(stmt: ir.Stmt, read: ir.Read, marks: list[str]
               ) -> tuple[dict[str, ir.Expr], list[ir.Expr]]:
    subst: dict[str, ir.Expr] = {}
    conds: list[ir.Expr] = []
    for j, ix in enumerate(read.indices):
        x = Lin({(marks[j], "index"): 1})
        lin = linear(substitute(ix, subst))
        cands = [(v, c) for (v, k), c in lin.coefs.items()
                 if k == "index" and v in stmt.iters and v not in subst and not lin.uses(v)]
        if not cands:
            conds.append(cmp("==", x.expr(), lin.expr()))
            continue
        v, a = min(cands, key=lambda vc: (vc[0] not in stmt.lhs, abs(vc[1]) != 1,
                                          stmt.iters.index(vc[0])))
        rest = lin.plus(Lin({(v, "index"): -a}))
        num = (x.plus(rest.times(-1)) if a > 0 else rest.plus(x.times(-1))).expr()
        value = num if abs(a) == 1 else ir.Binary("int32", "/", num, icst(abs(a)))
        if abs(a) != 1:
            mod = ir.Binary("int32", "%", num, icst(abs(a)))
            conds.append(cmp("==", mod, icst(0)))
        subst = {k: substitute(e, {v: value}) for k, e in subst.items()}
        conds = [substitute(c, {v: value}) for c in conds]
        subst[v] = value
    return subst, conds


def _check_injective(frame: Frame, stmt: ir.Stmt, box: Mapping[str, Range], read: ir.Read,
                     subst: Mapping[str, ir.Expr]) -> None:
    """The read's element and the kept iterators must determine the eliminated ones."""
    texts = [affine_text(i) for i in read.indices]
    if any(t is None for t in texts):
        return
    kept = [v for v in stmt.iters if v not in subst]
    its = ", ".join(stmt.iters)
    dom = " and ".join(f"{_isl(lo)} <= {v} < {_isl(hi)}" for v, (lo, hi) in box.items())
    m = isl.Map(f"{frame.params} -> {{ [{its}] -> [{', '.join([*texts, *kept])}] : "  # type: ignore[list-item]
                f"{dom or '0 = 0'} }}").intersect_params(frame.context)
    if not m.is_injective():
        raise NotDifferentiableError(
            f"statement {stmt.name}: the read {read} does not determine the iterators it "
            "eliminates; polyopt.grad cannot invert this access")


def _isl(e: ir.Expr) -> str:
    t = affine_text(e)
    assert t is not None, e
    return t


def _moved(r: Range, subst: Mapping[str, ir.Expr], rename: Mapping[str, ir.Expr]) -> Range:
    """A kept iterator's range, in the new statement's indices."""
    lo, hi = (tidy(substitute(substitute(e, subst), rename)) for e in r)
    return lo, hi


def _range_conds(box: Mapping[str, Range], subst: Mapping[str, ir.Expr]) -> list[ir.Expr]:
    """Conditions keeping each eliminated iterator in its range."""
    out = []
    for v, value in subst.items():
        lo, hi = (substitute(e, subst) for e in box[v])
        out.append(cmp("<=", lo, value))
        out.append(cmp("<", value, hi))
    return out


def implied(frame: Frame, ranges: Mapping[str, Range], cond: ir.Expr) -> bool:
    """Does the box ``ranges`` imply ``cond`` (a comparison of affine indices)?"""
    assert isinstance(cond, ir.Binary)
    a, b = affine_text(cond.a), affine_text(cond.b)
    if a is None or b is None:
        return False
    negated = {"<=": ">", "<": ">="}[cond.op]
    its = ", ".join(ranges)
    cons = [f"{_isl(lo)} <= {v} < {_isl(hi)}" for v, (lo, hi) in ranges.items()]
    cons.append(f"{a} {negated} {b}")
    bad = isl.Set(f"{frame.params} -> {{ [{its}] : {' and '.join(cons)} }}")
    return bad.intersect_params(frame.context).is_empty()


def _factors(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.Binary) and e.op == "*":
        return _factors(e.a) + _factors(e.b)
    if isinstance(e, ir.Unary) and e.op == "-":
        return _factors(e.x)
    return [e]


def _enforced(frame: Frame, factor: ir.Expr, subst: Mapping[str, ir.Expr],
              box: Mapping[str, Range]) -> bool:
    """Does a zero-padded multiplicative factor keep every eliminated iterator in range?"""
    return all(_enforced1(frame, factor, v, *box[v]) for v in subst)


def _enforced1(frame: Frame, factor: ir.Expr, v: str, lo: ir.Expr, hi: ir.Expr) -> bool:
    if expr_text(lo) != "0":
        return False
    for f in _factors(factor):
        if not isinstance(f, ir.Read) or frame.fills.get(f.tensor, 0.0) != 0.0:
            continue
        for d, ix in enumerate(f.indices):
            if tidy(ix) == ivar(v) and expr_text(frame.extents[f.tensor][d]) == expr_text(hi):
                return True
    return False


def _names(frame: Frame, stmt: ir.Stmt, read: ir.Read, kept: list[str]) -> dict[str, str]:
    """Readable index names: a plain ``r_k`` becomes ``k`` on the LHS; a kept LHS index
    ``n`` becomes the reduction index ``r_n``."""
    taken = set(frame.taken)
    out: dict[str, str] = {}
    for j, ix in enumerate(read.indices):
        t = tidy(ix)
        if isinstance(t, ir.Var) and t.kind == "index":
            base = t.name[2:] if t.name.startswith("r_") and len(t.name) > 2 else t.name
        else:
            dim = expr_text(frame.extents[read.tensor][j])
            base = dim.lower() if dim.isidentifier() else f"i{j}"
        out[f"__x{j}"] = ir.fresh_name(base, taken)
    for v in kept:
        out[v] = ir.fresh_name(v if v in stmt.reduction_iters else f"r_{v}", taken)
    return out


# ---------------------------------------------------------------- pads and ranges

def pads_for(frame: Frame, rhs: ir.Expr, ranges: Mapping[str, Range],
             inherited: frozenset[ir.Read] = frozenset()) -> tuple[PadSpec, ...]:
    """Zero padding (or the forward fill) wide enough for every read of ``rhs`` over the
    box ``ranges``; an ``inherited`` read keeps the forward's."""
    its = list(ranges)
    cons = " and ".join(f"{_isl(lo)} <= {v} < {_isl(hi)}" for v, (lo, hi) in ranges.items())
    dom = isl.Set(f"{frame.params} -> {{ [{', '.join(its)}] : {cons or '0 = 0'} }}")
    dom = dom.intersect_params(frame.context)
    need: dict[str, list[list[tuple[isl.PwAff, isl.PwAff]]]] = {}
    given: dict[str, tuple[ir.Pad, ...]] = {}
    for r in rhs.walk():
        if not isinstance(r, ir.Read) or not r.indices:
            continue
        if r.pad is not None:
            given[r.tensor] = r.pad
        widths = need.setdefault(r.tensor, [[] for _ in r.indices])
        if r in inherited:
            continue
        for d, ix in enumerate(r.indices):
            widths[d] += _overhang(frame, dom, its, ix, frame.extents[r.tensor][d])
    out = []
    for t, widths in need.items():
        forced = t in frame.always_pad or t in given
        if not any(widths[d] for d in range(len(widths))) and not forced:
            continue
        pads = given.get(t)
        pair = tuple(_width(frame, w[0::2], f"the pad of {t}",
                            None if pads is None else pads[d].before)
                     for d, w in enumerate(widths))
        hi = tuple(_width(frame, w[1::2], f"the pad of {t}",
                          None if pads is None else pads[d].after)
                   for d, w in enumerate(widths))
        pair, hi = tuple(map(tidy, pair)), tuple(map(tidy, hi))
        out.append(PadSpec(t, tuple(zip(pair, hi, strict=True)), frame.fills.get(t, 0.0)))
    return tuple(out)


def _overhang(frame: Frame, dom: isl.Set, its: list[str], ix: ir.Expr, ext: ir.Expr
              ) -> list[tuple[isl.PwAff, isl.PwAff]]:
    """[before, after]: how far index ``ix`` reaches outside ``[0, ext)`` (exactly, and a
    looser bound); [] if never."""
    text = affine_text(ix)
    if text is None:
        return []
    image = isl.Map(f"{frame.params} -> {{ [{', '.join(its)}] -> [{text}] }}")
    rng = image.intersect_domain(dom).range()
    if rng.is_empty():
        return []
    box = isl.Set(f"{frame.params} -> {{ [d] : 0 <= d < {_isl(ext)} }}")
    if rng.is_subset(box.intersect_params(frame.context)):
        return []
    zero = isl.PwAff(f"{frame.params} -> {{ [(0)] }}")
    before = rng.dim_min(0).neg()
    extent = isl.PwAff(f"{frame.params} -> {{ [({_isl(ext)})] }}")
    after = rng.dim_max(0).add(isl.PwAff(f"{frame.params} -> {{ [(1)] }}")).sub(extent)
    return [(before.max(zero), before.max(zero)),
            (after.max(zero), rng.dim_max(0).max(zero))]


def _width(frame: Frame, parts: list[tuple[isl.PwAff, isl.PwAff]], what: str,
           given: str | None = None) -> ir.Expr:
    """A pad width: the forward read's if it covers the overhang, else the overhang if one
    affine expression gives it, else the (looser) reach of the index past the tensor's first
    or last element."""
    if not parts:
        return icst(0) if given is None else _width_text(frame, given, what)
    need, loose = parts[0]
    for p, q in parts[1:]:
        need, loose = need.max(p), loose.max(q)
    dom = need.domain().intersect_params(frame.context)
    if given is not None:
        pa = isl.PwAff(f"{frame.params} -> {{ [({given})] }}")
        if dom.is_subset(need.le_set(pa)):
            return _width_text(frame, given, what)
    most = need.intersect_params(dom).max_val()
    if most.is_int():  # a constant that serves every size reads best
        return icst(int(most.to_python()))
    for pa in (need, loose):
        try:
            return pw_expr(pa.coalesce(), frame.context, what, nonneg=True)
        except NotDifferentiableError:
            pass
    raise NotDifferentiableError(f"cannot write {what} ({need}) as one affine expression")


def _width_text(frame: Frame, text: str, what: str) -> ir.Expr:
    return pw_expr(isl.PwAff(f"{frame.params} -> {{ [({text})] }}"), frame.context, what)


def _implicit(frame: Frame, rhs: ir.Expr, ranges: Mapping[str, Range],
              padded: set[str]) -> set[str]:
    """Indices whose range a plain, unpadded read of a tensor of that extent gives."""
    out = set()
    for r in rhs.walk():
        if not isinstance(r, ir.Read) or r.tensor in padded or r.tensor in frame.always_pad:
            continue
        for d, ix in enumerate(r.indices):
            if isinstance(ix, ir.Var) and ix.kind == "index" and ix.name in ranges:
                lo, hi = ranges[ix.name]
                if expr_text(lo) == "0" and (expr_text(hi)
                                             == expr_text(frame.extents[r.tensor][d])):
                    out.add(ix.name)
    return out

