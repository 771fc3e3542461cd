"""Semantic checks of one def: names, types, lets inlined, statement rules (reference §3)."""

from __future__ import annotations

import operator
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

from polyopt import dtypes
from polyopt.errors import OptionError, ShapeError
from polyopt.lang import syntax as S
from polyopt.lang.affine import Lin
from polyopt.lang.resolve import (
    BUILTINS,
    INT32_MAX,
    DefScope,
    TensorInfo,
)
from polyopt.lang.stmts import CheckedStmt, check_stmt, pad_info, warn_at

__all__ = ["CheckedDef", "CheckedStmt", "check_def"]


@dataclass
class CheckedDef:
    name: str
    source: str
    sizes: tuple[str, ...]  # unbound sizes, signature order
    bound: tuple[tuple[str, int], ...]
    scope: DefScope
    stmts: list[CheckedStmt]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    locals: tuple[str, ...]
    recurrent: tuple[str, ...] = ()  # tensors with a recurrence read (§5.5), sorted


def check_def(d: S.Def, source: str, sizes: Mapping[str, int] | None) -> CheckedDef:
    size_names = _size_names(d, source)
    values = _bindings(d, size_names, dict(sizes or {}), source)
    lins = {n: Lin.num(values[n]) if n in values else Lin.var(n)
            for n in (*(p.name for p in d.params), *size_names)}
    scope = DefScope(source, lins, {p.name for p in d.params}, {})
    _declare_tensors(d, scope)
    scope.targets = {st.target.id for st in d.stmts}
    stmts: list[CheckedStmt] = []
    counts: dict[str, int] = {}
    for st in d.stmts:
        k = counts.get(st.target.id, 0)
        stmts.append(check_stmt(scope, st, f"{st.target.id}_{k}"))
        counts[st.target.id] = k + 1
    for decl in (*d.outputs, *d.locals):
        if decl.name not in scope.written:
            role = "output" if decl in d.outputs else "local"
            raise scope.error(f"{role} '{decl.name}' is never written", decl.pos)
    _check_order(scope, stmts)
    if not scope.recurrent:
        for message, pos in scope.reinit:
            warn_at(scope, message, pos)
    unbound = tuple(n for n in size_names if n not in values)
    bound = tuple((n, values[n]) for n in lins if n in values)
    return CheckedDef(d.name, source, unbound, bound, scope, stmts,
                      tuple(t.name for t in d.inputs), tuple(t.name for t in d.outputs),
                      tuple(t.name for t in d.locals), tuple(sorted(scope.recurrent)))


# ---------------------------------------------------------------- sizes and parameters

def _size_names(d: S.Def, source: str) -> list[str]:
    scope = DefScope(source, {}, set(), {})
    params: set[str] = set()
    for p in d.params:
        if p.name in params:
            raise scope.error(f"duplicate parameter '{p.name}'", p.pos)
        _not_builtin(scope, p.name, p.pos)
        params.add(p.name)
    names: list[str] = []
    for t in d.inputs:
        assert t.type is not None
        for dim in t.type.dims:
            if dim.name is None or dim.name in names:
                continue
            if dim.name in params:
                raise scope.error(f"size '{dim.name}' is also a <...> parameter", dim.pos)
            _not_builtin(scope, dim.name, dim.pos)
            names.append(dim.name)
    return names


def _not_builtin(scope: DefScope, name: str, pos: S.Pos) -> None:
    if name in BUILTINS:
        raise scope.error(f"'{name}' is a builtin function and cannot be declared", pos)


def _bindings(d: S.Def, size_names: list[str], given: dict[str, object],
              source: str) -> dict[str, int]:
    valid = [p.name for p in d.params] + size_names
    unknown = [k for k in given if k not in valid]
    if unknown:
        raise OptionError(f"unknown size(s) {', '.join(map(repr, unknown))} for def "
                          f"'{d.name}'; valid names: {', '.join(valid) or '(none)'}")
    values: dict[str, int] = {}
    for k, v in given.items():
        if isinstance(v, bool):
            raise OptionError(f"size {k!r} must be an integer, not {v!r}")
        try:
            values[k] = operator.index(v)  # type: ignore[call-overload,arg-type]
        except TypeError:
            raise OptionError(f"size {k!r} must be an integer, not {v!r}") from None
        if values[k] > INT32_MAX:
            raise ShapeError(f"size {k} = {values[k]} does not fit in int32")
    for p in d.params:
        if p.name not in values:
            if p.default is None:
                raise scope_error(source, f"parameter '{p.name}' has no default; bind it "
                                  f"with sizes={{'{p.name}': ...}}", p.pos)
            values[p.name] = p.default
        if values[p.name] < 0:
            raise ShapeError(f"parameter {p.name} = {values[p.name]} must be >= 0")
    for t in d.inputs:
        assert t.type is not None
        for i, dim in enumerate(t.type.dims):
            if dim.name in given and values[dim.name] < 0:
                raise ShapeError(f"size {dim.name} = {values[dim.name]} (input '{t.name}', "
                                 f"dim {i}) must be >= 0")
    return values


def scope_error(source: str, message: str, pos: S.Pos) -> Exception:
    return DefScope(source, {}, set(), {}).error(message, pos)


# ---------------------------------------------------------------- tensors

def _declare_tensors(d: S.Def, scope: DefScope) -> None:
    for role, decls in (("input", d.inputs), ("output", d.outputs), ("local", d.locals)):
        for decl in decls:
            old = scope.tensors.get(decl.name)
            if old is not None:
                raise scope.error(_duplicate_message(decl.name, old.role, role), decl.pos)
            _not_builtin(scope, decl.name, decl.pos)
            if decl.name in scope.sizes:
                raise scope.error(f"'{decl.name}' is already a size name", decl.pos)
            t = TensorInfo(decl.name, role, decl.pos)
            if decl.type is not None:
                t.dtype = dtypes.TYPE_NAMES[decl.type.name]
                t.dims = tuple(_dim(scope, dim) for dim in decl.type.dims)
                t.rank = len(t.dims)
            scope.tensors[decl.name] = t
            if decl.pad is not None:
                if role != "input":
                    raise scope.error("only inputs can be padded in the signature", decl.pos)
                t.pad = pad_info(scope, decl.pad, t)


def _duplicate_message(name: str, old: str, new: str) -> str:
    if old == new:
        return f"duplicate {new} '{name}'"
    return f"'{name}' is declared both as an {old} and as an {new}"


def _dim(scope: DefScope, dim: S.Dim) -> Lin:
    if dim.value is not None:
        return Lin.num(dim.value)
    assert dim.name is not None
    if dim.name not in scope.sizes:
        raise scope.error(f"unknown size '{dim.name}' (output and local dims must be sizes "
                          "of the inputs or <...> parameters)"
                          + scope.close(dim.name, list(scope.sizes)), dim.pos)
    return scope.sizes[dim.name]


# ---------------------------------------------------------------- statement order (§3.4)

def _check_order(scope: DefScope, stmts: list[CheckedStmt]) -> None:
    writers: dict[str, list[int]] = {}  # each tensor's statements, found once (not per read)
    for k, s in enumerate(stmts):
        writers.setdefault(s.tensor, []).append(k)
    for k, s in enumerate(stmts):
        for r in s.reads:
            if r.tensor == s.tensor or r.tensor in scope.recurrent:
                continue
            after = writers.get(r.tensor, [])
            at = bisect_right(after, k)
            if at == len(after):
                continue
            info = scope.tensors[r.tensor]
            if info.dtype is not None and info.dims is not None:
                scope.recurrent.add(r.tensor)  # read before a later write: a recurrence
                continue
            later = stmts[after[at]]
            if any(x.tensor == s.tensor for x in later.reads):
                raise scope.error(f"cycle between tensors '{s.tensor}' and '{r.tensor}': "
                                  f"{s.name} reads {r.tensor} and {later.name} reads "
                                  f"{s.tensor}", later.pos)
            raise scope.error(
                f"{later.name} writes '{r.tensor}' after {s.name} (line {s.pos[0]}) read it; "
                f"TC would give {s.name} the final value of '{r.tensor}', so this is an error "
                f"(write '{r.tensor}' completely before reading it, use a new tensor, or declare "
                f"its type and shape to make it a recurrence)",
                later.pos)
