"""Range inference (reference §3.6): the box of values each index variable ranges over."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from polyopt.errors import LanguageError
from polyopt.lang.affine import Floor, Lin, box_bounds, minmax
from polyopt.lang.stmts import CheckedStmt

Interval = tuple[Lin, Lin]  # inclusive (lo, hi), over sizes


@dataclass(frozen=True)
class Constraint:
    """``lo <= e <= hi``: ``e`` affine in index variables and sizes, ``lo``/``hi`` in sizes."""

    e: Lin
    lo: Lin
    hi: Lin


def constraints(cs: CheckedStmt, dim_bounds: Callable[[str, int], Interval]) -> list[Constraint]:
    """The usable constraints of the statement's accesses (data-dependent ones are skipped)."""
    index = set(cs.iters)
    out = []
    for a in cs.accesses:
        if a.lin is None:
            continue
        lo, hi = dim_bounds(a.tensor, a.dim)
        c = _normalize(Constraint(a.lin, lo, hi), index)
        if c is not None:
            out.append(c)
    return out


def _normalize(c: Constraint, index: set[str]) -> Constraint | None:
    """Keep affine constraints; rewrite ``lo <= ±floor(n/d) + rest <= hi`` (rest free of
    indices) as a constraint on ``n``; drop other quasi-affine ones."""
    if not c.e.compound_names() & index:
        return c
    inner = [(a, k) for a, k in c.e.terms if not isinstance(a, str) and
             Lin(((a, 1),)).names() & index]
    if len(inner) != 1 or c.e.top_names() & index:
        return None
    atom, k = inner[0]
    if not isinstance(atom, Floor) or abs(k) != 1 or atom.num.compound_names() & index:
        return None
    rest = c.e.without_atoms([atom])
    lo, hi = c.lo - rest, c.hi - rest
    if k < 0:
        lo, hi = -hi, -lo
    d = atom.den
    return Constraint(atom.num, lo.scale(d), hi.scale(d) + (d - 1))


def infer(cs: CheckedStmt, cons: list[Constraint], source: str,
          known: tuple[str, ...] = ()) -> dict[str, Interval]:
    """Resolve every index variable of ``cs`` in rounds; error when a round makes no
    progress."""
    index = set(cs.iters)
    resolved: dict[str, Interval] = {}
    pending = {v: r for v, r in cs.ranges.items()}
    todo = [v for v in cs.iters if v not in pending]
    while todo or pending:
        new: dict[str, Interval] = {}
        for v in todo:
            iv = _solve(v, cons, resolved, index)
            if iv is not None:
                new[v] = iv
        for v, (lo, hi, _) in pending.items():
            if (lo.names() | hi.names()) & index <= resolved.keys():
                new[v] = (box_bounds(lo, resolved)[0], box_bounds(hi, resolved)[1] - 1)
        if not new:
            _no_progress(cs, todo, pending, source, known)
        resolved.update(new)
        todo = [v for v in todo if v not in new]
        pending = {v: r for v, r in pending.items() if v not in new}
    return {v: resolved[v] for v in cs.iters}


def _solve(v: str, cons: list[Constraint], resolved: dict[str, Interval],
           index: set[str]) -> Interval | None:
    los: list[Lin] = []
    his: list[Lin] = []
    for c in cons:
        names = c.e.top_names() & index
        a = c.e.coeff(v)
        if a == 0 or not names - {v} <= resolved.keys():
            continue
        rmin, rmax = box_bounds(c.e.without([v]), resolved)
        low, high = c.lo - rmin, c.hi - rmax  # low <= a*v <= high for every resolved value
        if a > 0:
            los.append(low.ceildiv(a))
            his.append(high.floordiv(a))
        else:
            los.append((-high).ceildiv(-a))
            his.append((-low).floordiv(-a))
    if not los:
        return None
    return minmax("max", los), minmax("min", his)


def _no_progress(cs: CheckedStmt, todo: list[str], pending: dict, source: str,
                 known: tuple[str, ...]) -> None:
    if todo:
        v = todo[0]
        near = difflib.get_close_matches(v, list(known), n=1)
        hint = f" (or is it a typo for '{near[0]}'?)" if near else ""
        raise LanguageError(f"could not infer the range of index '{v}' in statement "
                            f"{cs.name}: no access bounds it; use a where clause, e.g. "
                            f"'where {v} in 0:N'{hint}", source, cs.var_pos[v])
    v = next(iter(pending))
    raise LanguageError(f"could not infer the range of index '{v}' in statement {cs.name}: "
                        "its where bounds depend on indices that cannot be resolved first",
                        source, pending[v][2])
