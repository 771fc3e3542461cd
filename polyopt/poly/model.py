"""Program → polyhedral model: isl iteration domains and access relations per statement.

Each ``ir.Stmt`` becomes one or more isl statements (``PolyStmt``):

- ``C_0_init`` for the ``op=!`` forms: the identity fill over the statement's LHS range;
- ``C_0`` the update itself; when it reads through zero padding it is split, in the
  polyhedral domain, into ``C_0`` (the interior: every padded read lands inside its tensor,
  loads are plain) and ``C_0_border`` (the rest: padded loads are guarded).

Access relations are intersected with their statement's domain. A read whose index is not
affine (a gather, ``Tab(Idx(b), e)``) is a may-access of the whole dimension; its values are
checked by the generated code at run time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import cached_property

import islpy as isl

from polyopt import ir
from polyopt.errors import PolyoptError

_SET = isl.dim_type.set
_PARAM = isl.dim_type.param


@dataclass(frozen=True, eq=False)
class ReadAccess:
    read: ir.Read
    relation: isl.Map  # stmt[iters] -> tensor[dims], restricted to the statement's domain
    affine: bool  # False: some index is data dependent (the relation over-approximates)


@dataclass(frozen=True, eq=False)
class PolyStmt:
    name: str  # isl tuple name
    stmt: ir.Stmt
    kind: str  # "init" | "update"
    guarded: bool  # border piece: padded reads are guarded in the generated code
    domain: isl.Set
    write: isl.Map
    reads: tuple[ReadAccess, ...]

    @property
    def iters(self) -> tuple[str, ...]:
        return self.stmt.lhs if self.kind == "init" else self.stmt.iters

    def extent(self, it: str) -> int | None:
        """How many values iterator ``it`` takes in the domain's bounding box (0 when the
        domain is empty, None when it is unbounded: sizes not given)."""
        if self.domain.is_empty():
            return 0
        k = self.iters.index(it)
        lo, hi = self.domain.dim_min_val(k), self.domain.dim_max_val(k)
        if not (lo.is_int() and hi.is_int()):
            return None
        return int(hi.to_python()) - int(lo.to_python()) + 1

    @property
    def accumulates(self) -> bool:
        """Does this piece read its target (``op=`` combines with the current value)?"""
        return self.kind == "update" and self.stmt.op != "="


@dataclass(frozen=True, eq=False)
class PolyProgram:
    program: ir.Program
    stmts: tuple[PolyStmt, ...]  # in program order
    context: isl.Set  # admissible sizes: non-negative, every extent non-negative
    # Padded reads split their statement into an unguarded interior and a guarded border
    # piece (the C pipeline); without borders the whole statement guards them (CUDA).
    borders: bool = True

    @cached_property
    def domain(self) -> isl.UnionSet:
        out = isl.UnionSet.empty(self.context.get_space())
        for s in self.stmts:
            out = out.union(isl.UnionSet.from_set(s.domain))
        return out

    @cached_property
    def writes(self) -> isl.UnionMap:
        return _union([s.write for s in self.stmts], self.context)

    @cached_property
    def reads(self) -> isl.UnionMap:
        rel = [r.relation for s in self.stmts for r in s.reads]
        rel += [s.write for s in self.stmts if s.accumulates]
        return _union(rel, self.context)

    @cached_property
    def program_order(self) -> isl.UnionMap:
        """Sequential source order: statement position, then its iterators lexicographically."""
        depth = max((len(s.iters) for s in self.stmts), default=0)
        maps = []
        for pos, s in enumerate(self.stmts):
            its = ", ".join(s.iters)
            pad = ", 0" * (depth - len(s.iters))
            text = f"{self.program.params} -> {{ {s.name}[{its}] -> [{pos}{_lead(its)}{pad}] }}"
            maps.append(isl.Map(text).intersect_domain(s.domain))
        return _union(maps, self.context)

    def stmt(self, name: str) -> PolyStmt:
        return self._by_name[name]

    @functools.cached_property
    def _by_name(self) -> dict[str, PolyStmt]:
        return {s.name: s for s in self.stmts}

    def border_of(self, name: str) -> PolyStmt | None:
        """The border piece of TC statement ``name`` (its padded reads guarded), if any."""
        return next((s for s in self.stmts if s.guarded and s.stmt.name == name), None)

    def __str__(self) -> str:
        lines = [f"context: {self.context}"]
        for s in self.stmts:
            lines.append(f"{s.name}: {s.domain}")
            lines.append(f"  write: {s.write}")
            lines += [f"  read:  {r.relation}" for r in s.reads]
        return "\n".join(lines)


def _lead(its: str) -> str:
    return f", {its}" if its else ""


def _union(maps: list[isl.Map], context: isl.Set) -> isl.UnionMap:
    out = isl.UnionMap.empty(context.get_space())
    for m in maps:
        out = out.union(isl.UnionMap.from_map(m))
    return out


def build_poly(program: ir.Program, borders: bool = True) -> PolyProgram:
    """The polyhedral model of ``program`` (statements in program order); ``borders``:
    split statements with padded reads into interior and border pieces."""
    try:
        context = _context(program)
        stmts: list[PolyStmt] = []
        first_writer: set[str] = set()
        for stmt in program.stmts:
            # With value semantics a tensor is written piecewise: no statement owns its box.
            is_first = stmt.tensor not in first_writer and not program.value_semantics
            first_writer.add(stmt.tensor)
            stmts += _lower_stmt(program, stmt, context, is_first, borders)
        return PolyProgram(program, tuple(stmts), context, borders)
    except isl.Error as e:
        raise PolyoptError(f"isl failed while modelling def '{program.name}': {e}") from e


def _context(program: ir.Program) -> isl.Set:
    cons = [f"{n} >= 0" for n in program.sizes]
    for t in program.tensors.values():
        cons += [f"{e} >= 0" for e in t.shape if any(n in e for n in program.sizes)]
    return isl.Set(f"{program.params} -> {{ : {' and '.join(cons)} }}")


def tensor_box(program: ir.Program, name: str, pad: tuple[ir.Pad, ...] | None = None
               ) -> isl.Set:
    """``{ T[d...] : 0 <= d < extent }`` (widened by ``pad`` when given)."""
    t = program.tensors[name]
    dims = [f"d{i}" for i in range(t.rank)]
    cons = []
    for i, (d, ext) in enumerate(zip(dims, t.shape, strict=True)):
        lo, hi = (pad[i].before, pad[i].after) if pad else ("0", "0")
        cons.append(f"-({lo}) <= {d} < ({ext}) + ({hi})")
    body = " and ".join(cons)
    return isl.Set(f"{program.params} -> {{ {name}[{', '.join(dims)}] : {body} }}"
                   if cons else f"{program.params} -> {{ {name}[] }}")


def _lower_stmt(program: ir.Program, stmt: ir.Stmt, context: isl.Set, is_first: bool,
                borders: bool = True) -> list[PolyStmt]:
    domain = isl.Set(stmt.domain).intersect_params(context)
    out = []
    if stmt.init:
        out.append(_init_stmt(program, stmt, domain, context, is_first))
    reads = _read_accesses(program, stmt, domain)
    padded = [r for r in reads if r.read.pad is not None]
    if not padded or not borders or not all(r.affine for r in padded):
        # A data-dependent padded read cannot split the domain: guard it everywhere.
        out.append(_update(program, stmt, stmt.name, bool(padded), domain, reads))
        return out
    inside = domain
    for r in padded:
        box = tensor_box(program, r.read.tensor)
        inside = inside.intersect(r.relation.intersect_range(box).domain())
    border = domain.subtract(inside).coalesce()
    for name, part, guarded in ((stmt.name, inside, False), (f"{stmt.name}_border", border, True)):
        if not part.is_empty():  # _update restricts the accesses to the piece
            out.append(_update(program, stmt, name, guarded, part, reads))
    return out


def _update(program: ir.Program, stmt: ir.Stmt, name: str, guarded: bool, domain: isl.Set,
            reads: list[ReadAccess]) -> PolyStmt:
    domain = domain.set_tuple_name(name)
    write = _access_map(program, stmt.iters, stmt.lhs, stmt.tensor).set_tuple_name(
        isl.dim_type.in_, name).intersect_domain(domain)
    renamed = tuple(
        ReadAccess(r.read, r.relation.set_tuple_name(isl.dim_type.in_, name)
                   .intersect_domain(domain), r.affine)
        for r in reads)
    return PolyStmt(name, stmt, "update", guarded, domain, write, renamed)


def _init_stmt(program: ir.Program, stmt: ir.Stmt, domain: isl.Set, context: isl.Set,
               is_first: bool) -> PolyStmt:
    name = f"{stmt.name}_init"
    nred = len(stmt.reduction_iters)
    if is_first:
        # The tensor's shape was inferred from this statement's LHS range, so the box is exact
        # and, unlike a projection, survives an empty reduction range.
        box = tensor_box(program, stmt.tensor)
        lhs_dom = _rename_box(box, name, stmt.lhs).intersect_params(context)
    else:
        lhs_dom = domain.drop_constraints_involving_dims(_SET, len(stmt.lhs), nred)
        lhs_dom = lhs_dom.project_out(_SET, len(stmt.lhs), nred).set_tuple_name(name)
    write = _access_map(program, stmt.lhs, stmt.lhs, stmt.tensor).set_tuple_name(
        isl.dim_type.in_, name).intersect_domain(lhs_dom)
    return PolyStmt(name, stmt, "init", False, lhs_dom, write, ())


def _rename_box(box: isl.Set, name: str, iters: tuple[str, ...]) -> isl.Set:
    box = box.set_tuple_name(name)
    for i, it in enumerate(iters):
        box = box.set_dim_name(_SET, i, it)
    return box


def _read_accesses(program: ir.Program, stmt: ir.Stmt, domain: isl.Set) -> list[ReadAccess]:
    out = []
    for e in stmt.rhs.walk():
        if isinstance(e, ir.Read):
            out.append(_read_access(program, stmt, e, domain))
    return out


def _read_access(program: ir.Program, stmt: ir.Stmt, read: ir.Read, domain: isl.Set
                 ) -> ReadAccess:
    texts = [affine_text(ix) for ix in read.indices]
    rel = None
    if all(t is not None for t in texts):
        try:
            rel = _access_map(program, stmt.iters, tuple(texts), read.tensor)  # type: ignore[arg-type]
        except isl.Error:
            rel = None
    affine = rel is not None
    if rel is None:
        rel = _gather_map(program, stmt.iters, texts, read.tensor)
    rel = rel.set_tuple_name(isl.dim_type.in_, stmt.name).intersect_domain(domain)
    if read.pad is not None:
        rel = rel.intersect_range(tensor_box(program, read.tensor))
    return ReadAccess(read, rel, affine)


def _access_map(program: ir.Program, iters: tuple[str, ...], index: tuple[str, ...],
                tensor: str) -> isl.Map:
    body = f"[{', '.join(iters)}] -> {tensor}[{', '.join(index)}]"
    return isl.Map(f"{program.params} -> {{ {body} }}")


def _gather_map(program: ir.Program, iters: tuple[str, ...], texts: list[str | None],
                tensor: str) -> isl.Map:
    """A may-access: affine indices exact, data-dependent ones anywhere in the extent."""
    t = program.tensors[tensor]
    outs, cons = [], []
    for i, text in enumerate(texts):
        if text is not None and _is_affine(program, iters, text):
            outs.append(text)
        else:
            outs.append(f"g{i}")
            cons.append(f"0 <= g{i} < {t.shape[i]}")
    where = f" : {' and '.join(cons)}" if cons else ""
    body = f"[{', '.join(iters)}] -> {tensor}[{', '.join(outs)}]{where}"
    return isl.Map(f"{program.params} -> {{ {body} }}")


def _is_affine(program: ir.Program, iters: tuple[str, ...], text: str) -> bool:
    try:
        isl.Map(f"{program.params} -> {{ [{', '.join(iters)}] -> [{text}] }}")
        return True
    except isl.Error:
        return False


def affine_text(e: ir.Expr) -> str | None:
    """isl text for an integral index expression, or None when it reads data or selects.

    isl's parser takes only bare integer literals as factors and divisors, so constants are
    printed bare and products keep the constant outside the parentheses.
    """
    if isinstance(e, ir.Const):
        return str(int(e.value))
    if isinstance(e, ir.Var):
        return e.name
    if isinstance(e, ir.Cast):
        return affine_text(e.x) if _integral(e.dtype) else None
    if isinstance(e, ir.Unary) and e.op == "-":
        x = affine_text(e.x)
        return None if x is None else f"(-({x}))"
    if isinstance(e, ir.Binary) and e.op in ("+", "-", "*", "/", "%", "min", "max"):
        a, b = affine_text(e.a), affine_text(e.b)
        if a is None or b is None:
            return None
        return _binary_text(e.op, a, b)
    return None


def _binary_text(op: str, a: str, b: str) -> str | None:
    if op in ("+", "-"):
        return f"(({a}) {op} ({b}))"
    if op in ("min", "max"):
        return f"{op}({a}, {b})"
    if op == "*":
        if _is_int(a):
            a, b = b, a
        if not _is_int(b):
            return f"(({a}) * ({b}))"  # not affine; isl will say so
        c = int(b)
        return f"({c}*({a}))" if c >= 0 else f"(-{-c}*({a}))"
    if not _is_int(b) or int(b) <= 0:
        return None
    return f"floor(({a})/{b})" if op == "/" else f"(({a}) mod {b})"


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _integral(dtype: str) -> bool:
    return not dtype.startswith("float")
