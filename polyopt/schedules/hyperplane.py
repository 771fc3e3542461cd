"""Replace a band of loops by affine hyperplanes of them (``Schedule.hyperplanes``).

A band is a chain of perfectly nested loops ``x_0 .. x_{n-1}``. Each row ``r`` of an integer
matrix gives a new loop ``sum_k r[k] * x_k``, plus a constant per statement when asked
(``offsets``: Pluto's hyperplanes have a constant term per statement, which two statements
of one time step need to lean apart). The rows are applied with isl's
``MultiUnionPwAff.apply_multi_aff`` on the band's loop expressions, so quasi-affine loops
(tile loops, ``floor``/``mod``) combine as isl computes them.

Besides legality (``Schedule._step`` checks the new order against the exact dependences),
the rows must determine the band: for each statement, the new loops' values must fix the
old ones, so no two instances that the band told apart share a time (``_check_determines``).
A matrix with more rows than loops keeps some loops as they were and adds others (a diamond
tile's faces above the loops that scan a tile, ``pipeline/diamond.py``); fewer rows drop
loops that the others determine (after tiling, the point loops ``x mod s`` below ``x``).
The new loops carry no marks.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as Seq

import islpy as isl

from polyopt.errors import ScheduleError
from polyopt.ir import fresh_name
from polyopt.schedules import transform as tf
from polyopt.schedules.tree import Loop, Node, filter_domain, loops, restrict, stmts_of

Offsets = tuple[tuple[str, tuple[int, ...]], ...]


def offset_pairs(offsets: Mapping[str, Seq[int]] | Seq[Seq[object]] | None) -> Offsets | None:
    """``offsets`` as sorted ``(statement, constants)`` pairs (how a step records them: the
    same after a trip through JSON); None for none."""
    if offsets is None:
        return None
    bad = ScheduleError(f"hyperplanes: offsets must map statement names to one integer "
                        f"per row, not {offsets!r}")
    if isinstance(offsets, str) or not isinstance(offsets, Mapping | Seq):
        raise bad
    items = list(offsets.items()) if isinstance(offsets, Mapping) else list(offsets)
    out: list[tuple[str, tuple[int, ...]]] = []
    for item in items:
        if not isinstance(item, Seq) or isinstance(item, str) or len(item) != 2 or \
                not isinstance(item[0], str) or not isinstance(item[1], Seq) or \
                isinstance(item[1], str):
            raise bad
        out.append((item[0], tuple(item[1])))  # type: ignore[arg-type]
    return tuple(sorted(out))


def replace_band(root: Node, band: Seq[str], rows: Seq[Seq[int]], names: Seq[str] | None,
                 offsets: Offsets | None, domain: isl.UnionSet) -> Node:
    """``root`` with the perfectly nested loops ``band`` (outermost first, adjacent)
    replaced by one loop per row of ``rows`` (module docstring)."""
    if isinstance(band, str) or not band:
        raise ScheduleError(f"hyperplanes: give the band's loops as a sequence of names, "
                            f"not {band!r}")
    ch = tf.chain(root, band)
    if [lp.name for lp in ch] != list(band):
        raise ScheduleError(f"hyperplanes: loops {', '.join(band)} must be adjacent and in "
                            f"nest order; the nest is {', '.join(lp.name for lp in ch)}")
    matrix = _matrix(rows, len(ch))
    labels = _names(root, ch, matrix, names)
    stmts = stmts_of(ch[0])
    shifts = _offsets(offsets, stmts, len(matrix))
    exprs = _apply(ch, matrix)
    exprs = [_shifted(e, [(s, c[r]) for s, c in shifts], stmts, domain)
             for r, e in enumerate(exprs)]
    _check_determines(ch, exprs, stmts, domain, matrix)
    child = ch[-1].child
    for label, e in reversed(list(zip(labels, exprs, strict=True))):
        child = Loop(label, e, child)
    return tf.substitute(root, ch[0], child)


def _matrix(rows: object, width: int) -> list[list[int]]:
    if isinstance(rows, str) or not isinstance(rows, Seq) or not rows:
        raise ScheduleError(f"hyperplanes: rows must be a non-empty integer matrix, not "
                            f"{rows!r}")
    out = []
    for k, row in enumerate(rows):
        if isinstance(row, str) or not isinstance(row, Seq) or len(row) != width or any(
                isinstance(v, bool) or not isinstance(v, int) for v in row):
            raise ScheduleError(f"hyperplanes: row {k} must hold {width} integers (one per "
                                f"loop of the band), not {row!r}")
        if not any(row):
            raise ScheduleError(f"hyperplanes: row {k} is zero (a loop of one value)")
        out.append(list(row))
    return out


def _names(root: Node, ch: list[Loop], matrix: list[list[int]],
           names: Seq[str] | None) -> list[str]:
    """The caller's names, else a copied loop's own (a row that is a unit vector) and
    ``h<k>`` for the others."""
    if names is not None:
        if isinstance(names, str) or len(names) != len(matrix):
            raise ScheduleError(f"hyperplanes: names must give one loop name per row "
                                f"({len(matrix)}), not {names!r}")
        out = [str(n) for n in names]
    else:
        taken = {lp.name for lp in loops(root)} - {lp.name for lp in ch}
        out = []
        for k, row in enumerate(matrix):
            unit = sorted(row) == [0] * (len(row) - 1) + [1]
            out.append(fresh_name(ch[row.index(1)].name if unit else f"h{k}", taken))
    tf.check_names(root, out, freed={lp.name for lp in ch})
    return out


def _offsets(offsets: Offsets | None, stmts: tuple[str, ...],
             n: int) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    for s, consts in offsets or ():
        if s not in stmts:
            raise ScheduleError(f"hyperplanes: offsets name statement {s!r}, not one of the "
                                f"band's: {', '.join(stmts)}")
        if len(consts) != n or any(isinstance(c, bool) or not isinstance(c, int)
                                   for c in consts):
            raise ScheduleError(f"hyperplanes: offsets of {s} must be {n} integers (one "
                                f"per row), not {consts!r}")
        out.append((s, consts))
    return out


def _apply(ch: list[Loop], matrix: list[list[int]]) -> list[isl.UnionPwAff]:
    """The rows applied to the band's loop expressions, by isl."""
    ctx = ch[0].expr.get_ctx()
    exprs = isl.UnionPwAffList.alloc(ctx, len(ch))
    for lp in ch:
        exprs = exprs.add(lp.expr)
    space = ch[0].expr.get_space().add_dims(isl.dim_type.set, len(ch))
    band = isl.MultiUnionPwAff.from_union_pw_aff_list(space, exprs)
    xs = [f"x{d}" for d in range(len(ch))]
    terms = ["".join(f" {'-' if v < 0 else '+'} {abs(v)}{x}"
                     for v, x in zip(row, xs, strict=True) if v) for row in matrix]
    ma = isl.MultiAff(f"{{ [{', '.join(xs)}] -> [{', '.join(f'(0{t})' for t in terms)}] }}",
                      context=ctx)
    out = band.apply_multi_aff(ma)
    return [out.get_union_pw_aff(r) for r in range(len(matrix))]


def _shifted(expr: isl.UnionPwAff, consts: list[tuple[str, int]], stmts: tuple[str, ...],
             domain: isl.UnionSet) -> isl.UnionPwAff:
    moved = [s for s, c in consts if c]
    if not moved:
        return expr
    out = restrict(expr, domain, tuple(s for s in stmts if s not in moved))
    for s, c in consts:
        if c:
            mine = restrict(expr, domain, (s,))
            out = out.union_add(mine.add(isl.UnionPwAff.val_on_domain(mine.domain(),
                                                                      isl.Val(c))))
    return out


def _check_determines(ch: list[Loop], exprs: list[isl.UnionPwAff], stmts: tuple[str, ...],
                      domain: isl.UnionSet, matrix: list[list[int]]) -> None:
    """Refuse rows whose values leave some statement's old band values open."""
    old, new = _as_map([lp.expr for lp in ch]), _as_map(exprs)
    for s in stmts:
        mine = filter_domain(domain, (s,))
        back = new.intersect_domain(mine).reverse().apply_range(old.intersect_domain(mine))
        if not back.is_single_valued():
            raise ScheduleError(
                f"hyperplanes{tuple(map(tuple, matrix))}: the new loops do not determine "
                f"the band's loops {', '.join(lp.name for lp in ch)} for statement {s}: "
                f"instances it runs at different times would share one (rows of rank "
                f"{_rank(matrix)} for {len(ch)} loops)")


def _as_map(exprs: list[isl.UnionPwAff]) -> isl.UnionMap:
    out = isl.UnionMap.from_union_pw_aff(exprs[0])
    for e in exprs[1:]:
        out = out.flat_range_product(isl.UnionMap.from_union_pw_aff(e))
    return out


def _rank(matrix: list[list[int]]) -> int:
    """The rank of an integer matrix (fraction-free elimination)."""
    m = [row[:] for row in matrix]
    rank, cols = 0, len(m[0])
    for c in range(cols):
        pivot = next((r for r in range(rank, len(m)) if m[r][c]), None)
        if pivot is None:
            continue
        m[rank], m[pivot] = m[pivot], m[rank]
        for r in range(rank + 1, len(m)):
            m[r] = [m[rank][c] * a - m[r][c] * b for a, b in zip(m[r], m[rank], strict=True)]
        rank += 1
    return rank
