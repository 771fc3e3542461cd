"""Common-subexpression elimination on the program.

Two rewrites, both exact (the values every output receives are unchanged):

- **Duplicate locals.** A local computed by the same statements as an earlier one (up to the
  names of the tensor and its indices), from tensors that no later statement changes, is
  replaced by the earlier one.
- **Shared calls.** A builtin call (``exp(X(n,d) - mx(n))``) evaluated in several statements
  at the same points is computed once into a new local ``cse<k>`` over the union of the points
  it is used at, written just before its first use; the uses read it. Calls are the
  expensive part of an expression (and the compiler cannot share them across loop nests);
  cheaper arithmetic is left to the C compiler, which shares it within a statement. Array
  contraction later shrinks the new local to a slice when its nests are fused.

A subexpression qualifies only if every tensor it reads is final by its first use (no
statement from there on writes it) and it is not under a ``?:`` (which may not evaluate it).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, replace

import islpy as isl

from polyopt import ir
from polyopt.lang.affine import context

# Builtins no cheaper to recompute than to load: never worth a new local.
CHEAP = frozenset({"fmax", "fmin", "fabs", "copysign", "floor", "ceil", "trunc", "round",
                   "fma", "fdim"})


def eliminate_common(program: ir.Program) -> ir.Program:
    """``program`` with duplicate locals merged and shared calls computed once."""
    program = _merge_duplicate_locals(program)
    for _ in range(64):  # each round hoists one shared call; nested ones vanish with it
        hoisted = next(filter(None, (_hoist(program, uses, _fresh(program))
                                     for uses in _shared_calls(program))), None)
        if hoisted is None:
            break
        program = hoisted
    return program


# ------------------------------------------------------------------ duplicate locals
def _merge_duplicate_locals(program: ir.Program) -> ir.Program:
    seen: dict[tuple[object, ...], str] = {}
    # Each tensor's statements and its last write, found once: a scan of the statements
    # per local was quadratic (2.2 s of 5 for 2000 statements).
    writes: dict[str, list[int]] = {}
    for i, s in enumerate(program.stmts):
        writes.setdefault(s.tensor, []).append(i)
    for t in program.locals:
        sig = _local_signature(program, t, writes)
        if sig is None:
            continue
        if sig in seen:
            return _merge_duplicate_locals(_replace_local(program, t.name, seen[sig]))
        seen[sig] = t.name
    return program


def _local_signature(program: ir.Program, t: ir.Tensor,
                     writes: dict[str, list[int]]) -> tuple[object, ...] | None:
    """What ``t``'s statements compute, free of its name; None if what they read may change
    after ``t`` is complete (``writes``: each tensor's statements' positions)."""
    idx = writes.get(t.name, [])
    reads = {r.tensor for i in idx for r in _reads(program.stmts[i].rhs)} - {t.name}
    if any(writes.get(r, [-1])[-1] >= idx[0] for r in reads):
        return None
    parts: list[object] = [t.dtype, t.shape]
    for i in idx:
        s = program.stmts[i]
        names = {v: f"#{k}" for k, v in enumerate(s.iters)}
        rhs = ir.rewrite(s.rhs, functools.partial(_renamed, names=names, self_name=t.name))
        parts.append((s.op, s.init, tuple(names[v] for v in s.lhs), rhs,
                      _canonical_domain(s.domain)))
    return tuple(parts)


def _renamed(e: ir.Expr, names: dict[str, str], self_name: str) -> ir.Expr:
    if isinstance(e, ir.Var) and e.kind == "index":
        return replace(e, name=names[e.name])
    if isinstance(e, ir.Read) and e.tensor == self_name:
        return replace(e, tensor="#self")
    return e


def _canonical_domain(domain: str) -> str:
    d = isl.Set(domain).set_tuple_name("S")
    for i in range(d.dim(isl.dim_type.set)):
        d = d.set_dim_name(isl.dim_type.set, i, f"i{i}")
    return str(d)


def _replace_local(program: ir.Program, dup: str, keep: str) -> ir.Program:
    def read_keep(e: ir.Expr) -> ir.Expr:
        return replace(e, tensor=keep) if isinstance(e, ir.Read) and e.tensor == dup else e

    stmts = tuple(replace(s, rhs=ir.rewrite(s.rhs, read_keep))
                  for s in program.stmts if s.tensor != dup)
    return replace(program, stmts=stmts,
                   locals=tuple(t for t in program.locals if t.name != dup))


# ------------------------------------------------------------------ shared calls
@dataclass(frozen=True)
class _Use:
    stmt: int  # index in program.stmts
    expr: ir.Call
    vars: tuple[str, ...]  # its index variables in order of first appearance


def _shared_calls(program: ir.Program) -> list[list[_Use]]:
    """The uses of each call shared by two or more statements, largest call first."""
    groups: dict[tuple[str, ir.Expr], list[_Use]] = {}
    for i, s in enumerate(program.stmts):
        for call in _calls(s.rhs):
            vars_ = _index_vars(call)
            groups.setdefault(_key(call, vars_), []).append(_Use(i, call, vars_))
    shared = [uses for uses in groups.values() if len({u.stmt for u in uses}) > 1
              and uses[0].vars and _final(program, uses)]
    return sorted(shared, key=lambda uses: -ir.node_count(uses[0].expr))


def _calls(e: ir.Expr) -> Iterator[ir.Call]:
    """Float-valued, non-trivial calls that read a tensor and are always evaluated."""
    if isinstance(e, ir.Select):
        return
    if (isinstance(e, ir.Call) and e.fn not in CHEAP and e.dtype.startswith("float")
            and any(isinstance(x, ir.Read) for x in e.walk())):
        yield e
    for c in e.children():
        yield from _calls(c)


def _index_vars(e: ir.Expr) -> tuple[str, ...]:
    names = (x.name for x in e.walk() if isinstance(x, ir.Var) and x.kind == "index")
    return tuple(dict.fromkeys(names))


def _key(call: ir.Call, vars_: tuple[str, ...]) -> tuple[str, ir.Expr]:
    names = {v: f"#{k}" for k, v in enumerate(vars_)}
    return call.dtype, ir.rewrite(call, lambda e: _renamed(e, names, ""))


def _final(program: ir.Program, uses: list[_Use]) -> bool:
    first = min(u.stmt for u in uses)
    reads = {r.tensor for r in _reads(uses[0].expr)}
    return not any(s.tensor in reads for s in program.stmts[first:])


def _reads(e: ir.Expr) -> Iterator[ir.Read]:
    return (x for x in e.walk() if isinstance(x, ir.Read))


def _fresh(program: ir.Program) -> str:
    taken = set(program.tensors) | set(program.sizes)
    taken |= {v for s in program.stmts for v in s.iters}
    k = 0
    while f"cse{k}" in taken:
        k += 1
    return f"cse{k}"


def _hoist(program: ir.Program, uses: list[_Use], name: str) -> ir.Program | None:
    """Compute the shared call into local ``name`` before its first use, the uses reading
    it; None if its points have no affine bounding box starting at 0."""
    first = min(uses, key=lambda u: u.stmt)
    domain = _points(program, uses, name)
    shape = _shape(domain, program.sizes)
    if shape is None:
        return None
    stmt = ir.Stmt(f"{name}_0", name, first.vars, first.vars, "=", False, first.expr,
                   str(domain), pos=program.stmts[first.stmt].pos)
    key = _key(first.expr, first.vars)
    stmts = list(program.stmts)
    for i in {u.stmt for u in uses}:
        s = stmts[i]
        stmts[i] = replace(s, rhs=ir.rewrite(s.rhs, lambda e: _read_of(e, key, name)))
    stmts.insert(first.stmt, stmt)
    local = ir.Tensor(name, first.expr.dtype, shape, "local", pos=stmt.pos)
    return replace(program, stmts=tuple(stmts), locals=(*program.locals, local))


def _read_of(e: ir.Expr, key: tuple[str, ir.Expr], name: str) -> ir.Expr:
    if isinstance(e, ir.Call) and _key(e, vars_ := _index_vars(e)) == key:
        index_vars = {x.name: x for x in e.walk() if isinstance(x, ir.Var)}
        return ir.Read(e.dtype, name, tuple(index_vars[v] for v in vars_), pos=e.pos)
    return e


def _points(program: ir.Program, uses: list[_Use], name: str) -> isl.Set:
    """The union of the points (tuple ``<name>_0``) at which the uses evaluate the call."""
    params = program.params
    parts = []
    for u in uses:
        s = program.stmts[u.stmt]
        dims = ", ".join(f"v{k}" for k in range(len(u.vars)))
        image = ", ".join(u.vars)
        m = isl.Map(f"{params} -> {{ {s.name}[{', '.join(s.iters)}] -> T[{image}] }}")
        canon = isl.Map(f"{params} -> {{ T[{image}] -> {name}_0[{dims}] : "
                        f"{' and '.join(f'v{k} = {v}' for k, v in enumerate(u.vars))} }}")
        parts.append(isl.Set(s.domain).apply(m.apply_range(canon)))
    out = functools.reduce(isl.Set.union, parts).coalesce()
    first = min(uses, key=lambda u: u.stmt)
    for k, v in enumerate(first.vars):
        out = out.set_dim_name(isl.dim_type.set, k, v)
    return out


def _shape(domain: isl.Set, sizes: tuple[str, ...]) -> tuple[str, ...] | None:
    """Extents (max + 1) of a set whose dims start at 0, as affine text over the sizes."""
    dom = domain.intersect_params(context(sizes))
    shape = []
    for k in range(dom.dim(isl.dim_type.set)):
        lo, hi = _single_aff(dom.dim_min(k)), _single_aff(dom.dim_max(k))
        if lo is None or hi is None or lo.is_cst() is False or lo.get_constant_val().sgn() < 0:
            return None
        text = _aff_text(hi.add_constant_val(isl.Val("1")))
        if text is None:
            return None
        shape.append(text)
    return tuple(shape)


def _single_aff(pa: isl.PwAff) -> isl.Aff | None:
    pieces: list[isl.Aff] = []
    pa.foreach_piece(lambda _set, aff: pieces.append(aff))
    return pieces[0] if len(pieces) == 1 else None


def _aff_text(aff: isl.Aff) -> str | None:
    if aff.dim(isl.dim_type.div) or not aff.get_denominator_val().is_one():
        return None
    const = aff.get_constant_val()
    terms = [] if const.is_zero() else [str(const)]
    for i in range(aff.dim(isl.dim_type.param)):
        c = aff.get_coefficient_val(isl.dim_type.param, i).to_python()
        name = str(aff.get_dim_name(isl.dim_type.param, i))
        if c:
            terms.append(name if c == 1 else f"{c}*{name}")
    return " + ".join(terms).replace("+ -", "- ") or "0"
