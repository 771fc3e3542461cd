"""Checks of one statement: target, LHS, where items, reductions, types, first writes."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass

from polyopt import dtypes, ir
from polyopt.errors import LanguageError, PolyoptWarning, SizesRequiredError, format_at
from polyopt.lang import syntax as S
from polyopt.lang.affine import Lin, NotAffine, from_expr
from polyopt.lang.lexer import caller_level
from polyopt.lang.parser import MAX_DEPTH
from polyopt.lang.resolve import DefScope, PadInfo, Resolver, StmtScope, TensorInfo

Pos = tuple[int, int]

_OPS = {"=": "=", "+=": "+", "*=": "*", "min=": "min", "max=": "max"}


@dataclass(frozen=True)
class Access:
    """One index of a read, for range inference: ``lin`` is None when data dependent."""

    tensor: str
    dim: int
    lin: Lin | None
    pos: Pos | None


@dataclass
class CheckedStmt:
    name: str
    tensor: str
    lhs: tuple[str, ...]
    iters: tuple[str, ...]
    op: str
    init: bool
    rhs: ir.Expr
    pos: Pos
    reads: tuple[ir.Read, ...]  # every read (RHS, lets, exists), with its pad
    accesses: tuple[Access, ...]
    pads: dict[str, PadInfo]  # effective padding per tensor read here
    ranges: dict[str, tuple[Lin, Lin, Pos]]  # where ranges, half-open [lo, hi)
    var_pos: dict[str, Pos]


def check_stmt(scope: DefScope, st: S.Statement, name: str) -> CheckedStmt:
    t = _target(scope, st)
    lhs = _lhs(scope, st, t.rank)
    s = StmtScope(st.target.id, lhs, {v.id: v.pos for v in st.indices}, {})
    items = _prepass(scope, s, st)
    for k, item in enumerate(st.where):
        s.item = k
        if isinstance(item, S.Let):
            s.let_values[item.name] = Resolver(scope, s, "value").expr(item.value)
    s.item = 1 << 30
    rhs = Resolver(scope, s, "value").expr(st.rhs)
    _check_depth(scope, rhs)
    ranges = _ranges(scope, s, st, items)
    for k, item in enumerate(st.where):
        if isinstance(item, S.Exists):
            s.item = k
            Resolver(scope, s, "value").expr(item.value)
    op = _OPS[st.op.rstrip("!")]
    init = st.op.endswith("!")
    reductions = sorted((v for v in s.index if v not in lhs), key=lambda v: s.index[v])
    if op == "=" and reductions:
        r = reductions[0]
        raise scope.error(f"'=' does not specify a reduction, but index '{r}' is not on the "
                          f"LHS (use +=!, max=!, ... or a where clause)", s.index[r])
    _check_type(scope, st, rhs)
    _first_write(scope, st, name, op, init)
    t.rank = len(lhs)
    scope.written.add(t.name)
    accesses = tuple(_accesses(scope, s))
    return CheckedStmt(name, t.name, lhs, (*lhs, *reductions), op, init, rhs, st.pos,
                       tuple(s.reads), accesses, s.pads, ranges, dict(s.index))


def _check_depth(scope: DefScope, rhs: ir.Expr) -> None:
    stack = [(rhs, 1)]
    while stack:
        e, d = stack.pop()
        if d > MAX_DEPTH:
            raise scope.error(f"expression nested more than {MAX_DEPTH} levels deep once lets "
                              "are inlined", rhs.pos)
        stack.extend((c, d + 1) for c in e.children())


def _target(scope: DefScope, st: S.Statement) -> TensorInfo:
    name = st.target.id
    t = scope.tensors.get(name)
    if t is None:
        outs = [n for n, x in scope.tensors.items() if x.role != "input"]
        raise scope.error(f"'{name}' is written but not declared; add it to the outputs "
                          f"(-> ({name})) or to the locals (local ({name}))"
                          + scope.close(name, outs), st.target.pos)
    if t.role == "input":
        raise scope.error(f"cannot write input '{name}' (TC inputs are immutable)",
                          st.target.pos)
    return t


def _lhs(scope: DefScope, st: S.Statement, rank: int | None) -> tuple[str, ...]:
    seen: set[str] = set()
    for v in st.indices:
        if v.id in seen:
            raise scope.error(f"duplicate LHS index '{v.id}'", v.pos)
        seen.add(v.id)
        if v.id in scope.tensors:
            raise scope.error(f"LHS index '{v.id}' is the name of a tensor", v.pos)
        if v.id in scope.sizes:
            kind = "parameter" if v.id in scope.params else "size"
            warn_at(scope, f"LHS index '{v.id}' shadows the {kind} '{v.id}' in this statement",
                    v.pos)
    if rank is not None and rank != len(st.indices):
        raise scope.error(f"'{st.target.id}' has rank {rank} but is written with "
                          f"{len(st.indices)} indices", st.target.pos)
    return tuple(v.id for v in st.indices)


def _prepass(scope: DefScope, s: StmtScope, st: S.Statement) -> list[S.Range]:
    """Register lets, range variables and pads; return the ranges."""
    ranges: dict[str, S.Range] = {}
    for k, item in enumerate(st.where):
        if isinstance(item, S.Let):
            if item.name in s.lets or item.name in ranges or item.name in s.lhs:
                raise scope.error(f"variable '{item.name}' is constrained twice (a let cannot "
                                  "also be an index or another let)", item.pos)
            s.lets[item.name] = k
        elif isinstance(item, S.Range):
            if item.name in ranges or item.name in s.lets:
                raise scope.error(f"variable '{item.name}' is constrained twice in the where "
                                  "clause", item.pos)
            if item.name not in s.index and (item.name in scope.sizes
                                             or item.name in scope.tensors):
                raise scope.error(f"cannot give a range to '{item.name}': it is a size or a "
                                  "tensor, not an index", item.pos)
            ranges[item.name] = item
            s.index.setdefault(item.name, item.pos)
        elif isinstance(item, S.Pad):
            _pad(scope, s, item)
    return list(ranges.values())


def _pad(scope: DefScope, s: StmtScope, item: S.Pad) -> None:
    name = item.spec.tensor
    t = scope.tensors.get(name)
    if t is None:
        raise scope.error(f"pad of unknown tensor '{name}'"
                          + scope.close(name, list(scope.tensors)), item.spec.pos)
    if name in s.pads:
        raise scope.error(f"tensor '{name}' is padded twice in this statement", item.spec.pos)
    s.pads[name] = pad_info(scope, item.spec, t)


def _ranges(scope: DefScope, s: StmtScope, st: S.Statement,
            items: list[S.Range]) -> dict[str, tuple[Lin, Lin, Pos]]:
    out: dict[str, tuple[Lin, Lin, Pos]] = {}
    for item in items:
        s.item = st.where.index(item)
        lo, hi = (_bound(scope, s, node) for node in (item.lo, item.hi))
        out[item.name] = (lo, hi, item.pos)
    _check_acyclic(scope, out)
    return out


def _bound(scope: DefScope, s: StmtScope, node: S.Node) -> Lin:
    e = Resolver(scope, s, "bound").expr(node)
    if not dtypes.get(e.dtype).is_integral:
        raise scope.error(f"a where bound must be integral, not {e.dtype}", e.pos)
    try:
        lin = from_expr(e, frozenset(s.index))
    except NotAffine as exc:
        raise not_affine(scope, exc) from None
    if lin.compound_names() & set(s.index):
        raise scope.error("a where bound must be affine in the index variables (no /, % or "
                          "min/max of indices)", e.pos)
    return lin


def _check_acyclic(scope: DefScope, ranges: dict[str, tuple[Lin, Lin, Pos]]) -> None:
    deps = {v: (lo.names() | hi.names()) & set(ranges) for v, (lo, hi, _) in ranges.items()}
    state: dict[str, int] = {}

    def visit(v: str, path: list[str]) -> None:
        if state.get(v) == 2:
            return
        if state.get(v) == 1:
            cyc = [*path[path.index(v):], v]
            raise scope.error(f"cyclic where bounds: {' -> '.join(cyc)}", ranges[cyc[0]][2])
        state[v] = 1
        for w in sorted(deps[v]):
            visit(w, [*path, v])
        state[v] = 2

    for v in ranges:
        visit(v, [])


def _check_type(scope: DefScope, st: S.Statement, rhs: ir.Expr) -> None:
    t = scope.tensors[st.target.id]
    if t.dtype is None:
        t.dtype = rhs.dtype
    elif dtypes.promote(rhs.dtype, t.dtype) != t.dtype:
        raise scope.error(f"'{t.name}' has type {t.dtype} but the right-hand side is "
                          f"{rhs.dtype}: a narrower type needs an explicit cast, e.g. "
                          f"{t.dtype}(...)", st.rhs.pos)


def _first_write(scope: DefScope, st: S.Statement, name: str, op: str, init: bool) -> None:
    t = scope.tensors[st.target.id]
    first = t.name not in scope.written
    if first and op != "=" and not init:
        if t.role == "local":
            raise scope.error(f"local '{t.name}' starts uninitialized, so its first write "
                              f"cannot be '{st.op}' (use '{st.op}!')", st.pos)
        warn_at(scope, f"reduction without initialization: {name} uses '{st.op}' on the "
                f"caller's buffer of output '{t.name}' (use '{st.op}!' to initialize)", st.pos)
    elif not first and init:  # said at the end of the def, unless it has recurrences
        scope.reinit.append((f"{name} re-initializes '{t.name}' with '{st.op}' after earlier "
                             "statements wrote it (TC would accumulate instead)", st.pos))


def _accesses(scope: DefScope, s: StmtScope) -> Iterator[Access]:
    index = frozenset(s.index)
    for r in s.reads:
        for d, e in enumerate(r.indices):
            if any(isinstance(x, ir.Read) for x in e.walk()):
                yield Access(r.tensor, d, None, e.pos)
                continue
            try:
                lin = from_expr(e, index)
            except NotAffine as exc:
                cls = SizesRequiredError if exc.needs_sizes else LanguageError
                raise cls(f"index {d} of '{r.tensor}' is not affine in the index "
                          f"variables: {exc}", scope.source, exc.pos) from None
            yield Access(r.tensor, d, lin, e.pos)


def warn_at(scope: DefScope, message: str, pos: Pos | None) -> None:
    warnings.warn(format_at(message, scope.source, pos), PolyoptWarning,
                  stacklevel=caller_level())



def pad_info(scope: DefScope, spec: S.PadSpec, t: TensorInfo) -> PadInfo:
    """Resolve pad widths (size expressions) for tensor ``t``."""
    if t.rank is not None and len(spec.widths) != t.rank:
        raise scope.error(f"'{t.name}' has rank {t.rank} but pad gives {len(spec.widths)} "
                          "widths", spec.pos)
    widths = []
    for pair in spec.widths:
        lins = []
        for node in pair:
            e = Resolver(scope, None, "size").expr(node)
            if not dtypes.get(e.dtype).is_integral:
                raise scope.error(f"a pad width must be integral, not {e.dtype}", e.pos)
            try:
                lin = from_expr(e, frozenset())
            except NotAffine as exc:
                raise not_affine(scope, exc) from None
            if lin.is_const and lin.const < 0:
                raise scope.error(f"a pad width must be >= 0, not {lin.const}", e.pos)
            lins.append(lin)
        widths.append((lins[0], lins[1]))
    return PadInfo(tuple(widths), spec.fill)


def not_affine(scope: DefScope, exc: NotAffine) -> LanguageError:
    cls = SizesRequiredError if exc.needs_sizes else LanguageError
    return cls(str(exc), scope.source, exc.pos)
