"""Reverse mode over a checked Program: the gradient def's statements, in order.

The gradient def has three parts:

1. **recompute**: the forward statements whose values the adjoints read, as written (forward
   outputs and locals become locals of the gradient), with a copy (``Y_0``) of every
   intermediate version an adjoint reads before a later statement overwrites it;
2. **argmax**: for each ``max=!``/``min=!`` reduction, the first reduction point (in
   lexicographic order of its reduction indices) that attains the result: the one point that
   receives the gradient;
3. **adjoints**: statements in reverse order. The adjoint of each version is the sum of its
   contributions: the gradient input of an output, the pass-through of ``+=``, and one term per
   read group of each later statement (``inverse.adjoint_stmt``). A single pass-through is not
   copied: the later adjoint serves as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from polyopt import dtypes, ir
from polyopt.autodiff.affine import Range, icst, ivar, substitute, tidy, tidy_indices
from polyopt.autodiff.calculus import Partials, cmp, mul, select
from polyopt.autodiff.forward import Forward, Version
from polyopt.autodiff.inverse import Frame, Term, adjoint_stmt, finish, implied
from polyopt.autodiff.source import GStmt, expr_text
from polyopt.errors import NotDifferentiableError


@dataclass(frozen=True)
class Pending:
    """A contribution to an adjoint: a seed tensor read elementwise, or a statement's term."""

    seed: str | None = None
    stmt: int = -1
    term: Term | None = None
    outside: int = -1  # a seed only outside the elements this statement overwrites


class Planner:
    def __init__(self, fw: Forward, frame: Frame, wrt: dict[str, str],
                 seeds: dict[str, str]) -> None:
        self.fw, self.p, self.frame = fw, fw.p, frame
        self.wrt = wrt  # input -> its gradient's name
        self.active = fw.active(set(wrt))
        self.pending: dict[Version, list[Pending]] = {}
        for out, seed in seeds.items():
            if dtypes.get(self.p.tensors[out].dtype).is_float:
                self.pending[Version(out, fw.final(out))] = [Pending(seed=seed)]
        for st in self.p.stmts:
            for r in st.rhs.walk():
                if isinstance(r, ir.Read) and r.pad is not None:
                    _fill(frame, r.tensor, r.fill)
        self.snapshots: dict[Version, str] = {}
        self.refs: set[Version] = set()
        self.argmax: list[GStmt] = []
        self.backward: list[GStmt] = []
        self.locals: list[str] = []

    # ------------------------------------------------------------ names of versions

    def vname(self, v: Version) -> str:
        """The gradient def's name for version ``v`` (marks it as needed)."""
        if v.k < 0:
            return v.tensor
        self.refs.add(v)
        if v.k == self.fw.final(v.tensor):
            return v.tensor
        if v not in self.snapshots:
            name = ir.fresh_name(f"{v.tensor}_{v.k}", self.frame.taken)
            self.snapshots[v] = name
            self.frame.extents[name] = self.frame.extents[v.tensor]
            if v.tensor in self.frame.fills:
                self.frame.fills[name] = self.frame.fills[v.tensor]
        return self.snapshots[v]

    def versioned(self, i: int, e: ir.Expr) -> ir.Expr:
        """``e`` from statement ``i`` with every read renamed to the version it sees."""
        def fn(x: ir.Expr) -> ir.Expr:
            if isinstance(x, ir.Read):
                return replace(x, tensor=self.vname(self.fw.seen(i, x.tensor)))
            return x
        return ir.rewrite(e, fn)

    # ------------------------------------------------------------ reverse sweep

    def run(self) -> None:
        for i in reversed(range(len(self.p.stmts))):
            v = self.fw.written(i)
            if v not in self.active:
                continue
            adj = self.materialize(v)
            if adj is not None:
                self.propagate(i, adj)
        for name in self.wrt:
            self.materialize(Version(name, -1))

    def propagate(self, i: int, adj: str) -> None:
        s = self.p.stmts[i]
        norm = self.fw.normal(i)
        prev = self.fw.seen(i, s.tensor)
        if norm.passthrough and prev in self.active:
            self.pending.setdefault(prev, []).append(Pending(seed=adj))
        elif prev.k >= 0 and prev in self.active and not self.fw.covers(i):
            # a partial overwrite: the elements it leaves keep the earlier value
            self.pending.setdefault(prev, []).append(Pending(seed=adj, outside=i))

        def is_active(r: ir.Read) -> bool:
            return (self.fw.seen(i, r.tensor) in self.active
                    and dtypes.get(r.dtype).is_float)

        self._check_gathers(i, norm.rhs, is_active)
        terms = Partials(is_active, self.fw.where(i)).run(norm.rhs)
        if not terms:
            return
        d_out = ir.Read(self.p.tensors[s.tensor].dtype, adj, tuple(map(ivar, s.lhs)))
        conds = self._route(i, norm.kind, norm.rhs) if norm.kind in ("max", "min") else ()
        what = f"through {s.name}"
        plain = tuple(map(ivar, s.lhs))
        for (tensor, idx), d in terms.items():
            if (tensor == s.tensor and idx == plain and _is_one(d) and not conds
                    and self.fw.covers(i)):  # T = T + ...: the same adjoint passes on
                self.pending.setdefault(prev, []).append(Pending(seed=adj))
                continue
            read = ir.Read(self.p.tensors[tensor].dtype, tensor, idx)
            factor = mul(d_out, self.versioned(i, d))
            assert factor is not None
            term = Term("", read, factor, conds, what)
            self.pending.setdefault(self.fw.seen(i, tensor), []).append(Pending(stmt=i,
                                                                                term=term))

    def _check_gathers(self, i: int, rhs: ir.Expr,
                       is_active: Callable[[ir.Read], bool]) -> None:
        for r in rhs.walk():
            if (isinstance(r, ir.Read) and is_active(r)
                    and any(isinstance(x, ir.Read) for ix in r.indices for x in ix.walk())):
                raise NotDifferentiableError(
                    f"{self.fw.where(i)}: the read {r} has a data-dependent index (a gather) "
                    f"into '{r.tensor}', which is differentiated; polyopt.grad cannot invert "
                    "it (differentiate with respect to the other inputs: wrt=...)")

    def _route(self, i: int, kind: str, rhs: ir.Expr) -> tuple[ir.Expr, ...]:
        """The argmax local of a max/min reduction, and the condition that routes to it."""
        s = self.p.stmts[i]
        box = self.fw.box(i)
        if not self.fw.is_box(i):
            raise NotDifferentiableError(
                f"{self.fw.where(i)}: a {kind} reduction over a non-rectangular domain "
                f"({s.domain}) has no argmax polyopt.grad can write")
        name = ir.fresh_name(f"{s.tensor}_arg", self.frame.taken)
        self.frame.extents[name] = self.frame.extents[s.tensor]
        self.locals.append(name)
        flat: ir.Expr | None = None
        count: ir.Expr = icst(1)
        for v in s.reduction_iters:
            lo, hi = box[v]
            ext = _sub(hi, lo)
            pos = _sub(ivar(v), lo)
            flat = pos if flat is None else ir.Binary("int32", "+", _times(flat, ext), pos)
            count = _times(count, ext)
        assert flat is not None
        flat, count = tidy(flat), tidy(count)
        value = ir.Read(self.p.tensors[s.tensor].dtype, self.vname(self.fw.written(i)),
                        tuple(map(ivar, s.lhs)))
        hit = cmp("==", self.versioned(i, rhs), value)
        pick = ir.Select("int32", hit, flat, count)
        same = frozenset(r for r in pick.walk() if isinstance(r, ir.Read))
        self.argmax.append(finish(self.frame, name, s.lhs, "min=!", pick, box,
                                  f"first point attaining the {kind} of {s.name}", same))
        arg = ir.Read("int32", name, tuple(map(ivar, s.lhs)))
        return (cmp("==", flat, arg),)

    # ------------------------------------------------------------ adjoint tensors

    def materialize(self, v: Version) -> str | None:
        items = self.pending.pop(v, [])
        name = self.wrt.get(v.tensor) if v.k < 0 else None
        if name is None:
            if not items:
                return None
            if len(items) == 1 and items[0].seed is not None and items[0].outside < 0:
                return items[0].seed
            final = v.k == self.fw.final(v.tensor)
            name = ir.fresh_name(f"d_{v.tensor}" if final else f"d_{v.tensor}_{v.k}",
                                 self.frame.taken)
            self.locals.append(name)
        self.frame.extents[name] = self.frame.extents[v.tensor]
        if not items:
            self.backward.append(self._zero(name, v.tensor))
        for n, item in enumerate(items):
            st = self._emit(name, v.tensor, item)
            self.backward.append(_op(st, n == 0))
        return name

    def _emit(self, name: str, tensor: str, item: Pending) -> GStmt:
        if item.term is None:
            assert item.seed is not None
            lhs = self._dims(tensor)
            read = ir.Read(self.p.tensors[tensor].dtype, item.seed, tuple(map(ivar, lhs)))
            ranges = self._full(tensor, lhs)
            if item.outside < 0:
                return finish(self.frame, name, lhs, "+=!", read, ranges,
                              f"{name} receives {item.seed}")
            over = self.p.stmts[item.outside].name
            inside = self._inside(item.outside, lhs, ranges)
            rhs = select(ir.Unary("bool", "!", inside), read, None)
            assert rhs is not None
            return finish(self.frame, name, lhs, "+=!", rhs, ranges,
                          f"{name} receives {item.seed} where {over} leaves '{tensor}' "
                          "as it was")
        s = self.p.stmts[item.stmt]
        term = replace(item.term, target=name,
                       comment=f"{name} {item.term.comment}: {_stmt_text(s)}")
        st = adjoint_stmt(self.frame, s, self.fw.box(item.stmt), term, "+=!")
        want = self.p.tensors[tensor].dtype
        if st.rhs.dtype != want and tensor in self.wrt:
            st = replace(st, rhs=ir.Cast(want, st.rhs))
        return st

    def _inside(self, i: int, lhs: tuple[str, ...], ranges: dict[str, Range]) -> ir.Expr:
        """The elements statement ``i`` writes, over indices ``lhs`` of its tensor (less
        what ``ranges`` imply)."""
        s, box = self.p.stmts[i], self.fw.box(i)
        to = {v: ivar(n) for v, n in zip(s.lhs, lhs, strict=True)}
        conds = []
        for v in s.lhs:
            lo, hi = (substitute(e, to) for e in box[v])
            conds += [cmp("<=", lo, to[v]), cmp("<", to[v], hi)]
        conds = [c for c in conds if not implied(self.frame, ranges, c)] or [
            ir.Const("bool", True)]
        out = conds[0]
        for c in conds[1:]:
            out = ir.Binary("bool", "&&", out, c)
        return out

    def _zero(self, name: str, tensor: str) -> GStmt:
        lhs = self._dims(tensor)
        zero = ir.Const(self.p.tensors[tensor].dtype, 0.0)
        return finish(self.frame, name, lhs, "=", zero, self._full(tensor, lhs),
                      f"{tensor} does not reach any output")

    def _dims(self, tensor: str) -> tuple[str, ...]:
        taken = set(self.frame.taken)
        out = []
        for j, e in enumerate(self.frame.extents[tensor]):
            text = expr_text(e)
            out.append(ir.fresh_name(text.lower() if text.isidentifier() else f"i{j}", taken))
        return tuple(out)

    def _full(self, tensor: str, lhs: tuple[str, ...]) -> dict[str, Range]:
        return {v: (icst(0), e) for v, e in zip(lhs, self.frame.extents[tensor], strict=True)}


def _is_one(e: ir.Expr) -> bool:
    return isinstance(e, ir.Const) and not isinstance(e.value, bool) and e.value == 1


def _op(st: GStmt, first: bool) -> GStmt:
    if not first:
        return replace(st, op="+=")
    reduces = any(isinstance(x, ir.Var) and x.kind == "index" and x.name not in st.lhs
                  for x in st.rhs.walk())
    return st if reduces else replace(st, op="=")


def _sub(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    if isinstance(b, ir.Const) and b.value == 0:
        return a
    return ir.Binary("int32", "-", a, b)


def _times(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    if isinstance(a, ir.Const) and a.value == 1:
        return b
    if isinstance(b, ir.Const) and b.value == 1:
        return a
    return ir.Binary("int32", "*", a, b)


def _stmt_text(s: ir.Stmt) -> str:
    op = "=" if s.op == "=" else f"{s.op}={'!' if s.init else ''}"
    lhs = f"({', '.join(s.lhs)})" if s.lhs else ""
    return f"{s.tensor}{lhs} {op} {expr_text(tidy_indices(s.rhs))}"


def recompute(pl: Planner) -> list[GStmt]:
    """The forward statements the adjoints need, in order. A version an adjoint reads that a
    later statement overwrites ends a *segment*: the statements up to it write a tensor of
    its own (``Y_0``), and the next segment starts from it (polyopt, like TC, forbids reading
    a tensor that a later statement writes again)."""
    fw, need = pl.fw, _needed(pl)
    out: list[GStmt] = []
    for j in sorted(need):
        s = fw.p.stmts[j]
        k = fw.written(j).k
        seg, prev = _segment(pl, s.tensor, k), _segment(pl, s.tensor, k - 1)
        rhs = tidy_indices(s.rhs)
        starts = k > 0 and seg != prev
        note = ""
        if seg != s.tensor and (k == 0 or starts):
            note = (f"{seg}: '{s.tensor}' as {_last(pl, s.tensor, k)} leaves it (a later "
                    "statement overwrites it)")
        if starts:
            if not (s.op == "=" or s.init) or not fw.covers(j):
                lhs = pl._dims(s.tensor)
                read = ir.Read(pl.p.tensors[s.tensor].dtype, prev, tuple(map(ivar, lhs)))
                start = f"{note}, from {prev}" if note else f"'{s.tensor}' from {prev}"
                out.append(finish(pl.frame, seg, lhs, "=", read, pl._full(s.tensor, lhs),
                                  start))
                note = ""
            else:
                rhs = _rename(rhs, s.tensor, prev)
        op = "=" if s.op == "=" else f"{s.op}={'!' if s.init else ''}"
        rhs = _rename(rhs, s.tensor, seg)
        same = frozenset(r for r in rhs.walk() if isinstance(r, ir.Read))
        out.append(finish(pl.frame, seg, s.lhs, op, rhs, fw.box(j), note, same))
    return out


def _needed(pl: Planner) -> set[int]:
    fw, need = pl.fw, set()
    work = list(pl.refs)
    while work:
        v = work.pop()
        for j in fw.writers[v.tensor][:v.k + 1]:
            if j in need:
                continue
            need.add(j)
            reads = {r.tensor for r in fw.p.stmts[j].rhs.walk() if isinstance(r, ir.Read)}
            work += [u for u in (fw.seen(j, t) for t in reads) if u.k >= 0]
    return need


def _last(pl: Planner, tensor: str, k: int) -> str:
    """The statement that ends the segment holding version ``k``."""
    for j in range(k, pl.fw.final(tensor)):
        if Version(tensor, j) in pl.snapshots:
            return pl.p.stmts[pl.fw.writers[tensor][j]].name
    return pl.p.stmts[pl.fw.writers[tensor][-1]].name


def _segment(pl: Planner, tensor: str, k: int) -> str:
    """The tensor that holds version ``k`` of ``tensor`` in the gradient def."""
    if k < 0:
        return tensor
    for j in range(k, pl.fw.final(tensor)):
        name = pl.snapshots.get(Version(tensor, j))
        if name is not None:
            return name
    return tensor


def _rename(e: ir.Expr, old: str, new: str) -> ir.Expr:
    if old == new:
        return e

    def fn(x: ir.Expr) -> ir.Expr:
        return replace(x, tensor=new) if isinstance(x, ir.Read) and x.tensor == old else x
    return ir.rewrite(e, fn)


def _fill(frame: Frame, tensor: str, fill: float) -> None:
    if frame.fills.setdefault(tensor, fill) != fill:
        raise NotDifferentiableError(
            f"'{tensor}' is padded with two fill values ({frame.fills[tensor]} and {fill}); "
            "polyopt.grad needs one per tensor")
