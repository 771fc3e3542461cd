"""Piecewise statements: ``X(i) = c ? a : b``, with ``c`` affine in the iterators and
sizes, becomes a statement where ``c`` holds (``X(i) = a``) and one where it does not
(``X(i) = b``), each over its part of the domain; arms that are such selects again are cut
likewise, and a part that is not convex becomes one statement per convex piece.

Why: C evaluates one arm, so an arm's reads are made only where it is taken (a stencil's
``At(t-1,i-1)`` in the arm for ``0 < i``). The range checks, the dataflow and storage
contraction must see that, or a stencil written as one statement with its edges as a
condition is refused for reading outside its planes (``BoundsError``), and its edges chain
every step to the previous one. A loop over each piece also tests nothing per element: such
a stencil compiles as the one written with its edges as statements of their own (issue 40).

Only ``=`` statements are cut (an accumulation's pieces would each need the fill); a
condition that reads a tensor or is not affine stays a select.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import islpy as isl

from polyopt import ir
from polyopt.lang.affine import NotAffine, context, from_expr

# comparison -> isl's operator, for the conditions isl can write as one constraint
_COMPARE = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "="}


def split_pieces(program: ir.Program) -> ir.Program:
    """``program`` with every piecewise statement cut into its pieces (the statements of
    each tensor numbered again in order, ``<tensor>_<k>``)."""
    cut = {s.name: _pieces(program, s) for s in program.stmts
           if _condition(program, s) is not None}
    if not cut:
        return program
    stmts = [p for s in program.stmts for p in cut.get(s.name, [s])]
    return replace(program, stmts=tuple(_numbered(stmts)))


def _condition(program: ir.Program, s: ir.Stmt) -> isl.Set | None:
    """The set where ``s``'s select takes its first arm, if ``s`` is a piecewise statement.
    In program order a statement that reads its own tensor is left whole: its pieces would
    run one after the other, not interleaved as its instances (and PolyBench's correlation,
    ``corr(i,j) = i == j ? 1.0 : corr(i,j)``, lost its register-tiled product to a diagonal
    statement that isl's scheduler fused with it)."""
    if s.op != "=" or s.init or not isinstance(s.rhs, ir.Select):
        return None
    if not program.value_semantics and any(isinstance(e, ir.Read) and e.tensor == s.tensor
                                           for e in s.rhs.walk()):
        return None
    return _cond_set(program, s, s.rhs.cond)


def _pieces(program: ir.Program, s: ir.Stmt) -> list[ir.Stmt]:
    sizes = context(program.sizes)  # sizes >= 0
    out = []
    for domain, rhs in _arms(program, s, isl.Set(s.domain), s.rhs):
        pieces = [isl.Set.from_basic_set(p) for p in
                  domain.intersect_params(sizes).make_disjoint().get_basic_sets()]
        out += [(piece, rhs) for piece in pieces if not piece.is_empty()]
    out.sort(key=lambda piece_rhs: _first_point(piece_rhs[0]))
    return [replace(s, rhs=rhs, domain=str(piece)) for piece, rhs in out]


def _first_point(piece: isl.Set) -> list[int]:
    """The coordinates of ``piece``'s first instance (at some sizes): pieces in the order
    their loops would reach them."""
    point = piece.lexmin().sample_point()
    return [point.get_coordinate_val(isl.dim_type.set, k).to_python()
            for k in range(piece.dim(isl.dim_type.set))]


def _arms(program: ir.Program, s: ir.Stmt, domain: isl.Set,
          rhs: ir.Expr) -> Iterator[tuple[isl.Set, ir.Expr]]:
    """(part of ``domain``, the expression computed there) for each arm of ``rhs``."""
    cond = _cond_set(program, s, rhs.cond) if isinstance(rhs, ir.Select) else None
    if cond is None or not isinstance(rhs, ir.Select):
        yield domain, rhs
        return
    yield from _arms(program, s, domain.intersect(cond), rhs.a)
    yield from _arms(program, s, domain.subtract(cond), rhs.b)


def _cond_set(program: ir.Program, s: ir.Stmt, e: ir.Expr) -> isl.Set | None:
    """The instances of ``s`` where ``e`` holds, or None when ``e`` is not an affine
    condition of the iterators and sizes."""
    whole = isl.Set(f"{program.params} -> {{ {s.name}[{', '.join(s.iters)}] }}")
    if isinstance(e, ir.Unary) and e.op == "!":
        inner = _cond_set(program, s, e.x)
        return None if inner is None else whole.subtract(inner)
    if not isinstance(e, ir.Binary):
        return None
    if e.op in ("&&", "||"):
        left, right = _cond_set(program, s, e.a), _cond_set(program, s, e.b)
        if left is None or right is None:
            return None
        return left.intersect(right) if e.op == "&&" else left.union(right)
    if e.op not in (*_COMPARE, "!="):
        return None
    try:
        a, b = (from_expr(x, frozenset(s.iters)) for x in (e.a, e.b))
    except NotAffine:
        return None
    op = _COMPARE.get(e.op, "=")
    try:
        held = isl.Set(f"{program.params} -> {{ {s.name}[{', '.join(s.iters)}] : "
                       f"({a}) {op} ({b}) }}")
    except isl.Error:  # a name isl does not know (not an iterator or a size)
        return None
    return whole.subtract(held) if e.op == "!=" else held


def _numbered(stmts: list[ir.Stmt]) -> Iterator[ir.Stmt]:
    """``stmts`` named ``<tensor>_<k>`` again, k counting each tensor's statements."""
    count: dict[str, int] = {}
    for s in stmts:
        k = count.get(s.tensor, 0)
        count[s.tensor] = k + 1
        name = f"{s.tensor}_{k}"
        yield s if s.name == name else replace(s, name=name,
                                               domain=_renamed(s.domain, s.name, name))


def _renamed(domain: str, old: str, new: str) -> str:
    return str(isl.Set(domain).set_tuple_name(new)) if old != new else domain
