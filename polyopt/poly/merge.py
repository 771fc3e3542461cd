"""Merging two loops that every access walks as one run of memory (loop coalescing).

A statement's iterators ``a, b`` merge into one, ``p = B*a + b``, when every access of the
statement, its write too, indexes them as two neighbouring dimensions ``(.., a, b, ..)``,
exactly (a filter tap of one point, ``h + r_kh`` with ``r_kh = 0``, counts as ``h``), uses
them in no other index and no value, the second dimension's extent is ``B``, and the
statement's domain is a box. Each such tensor's two dimensions become one of ``E * B``
elements: the same bytes in the same order (a row-major reshape), so the kernel takes the
caller's arrays as they are. A tensor merges in every statement that accesses it or in
none, so the merges are a fixpoint over tensors and statements (``mergeable``).

Merged, a 1x1 convolution over 56 x 56 pixels is a matrix product whose rows are 3136
pixels, 196 whole vectors of 16, where each of its 56-pixel rows was 3.5 vectors.
``merge_program(program, Merge("O", 2))`` merges the component of tensor ``O``'s
dimensions 2 and 3: every tensor and statement linked to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from numbers import Integral

import islpy as isl

from polyopt import ir
from polyopt.errors import ScheduleArgumentError, ScheduleError
from polyopt.lang.affine import NotAffine, from_expr


@dataclass(frozen=True)
class Merge:
    """Dimensions ``dim`` and ``dim + 1`` of ``tensor`` as one, with every tensor and
    statement that must merge with them (the ``merge`` verb's arguments)."""

    tensor: str
    dim: int
    verb = "merge"  # the schedule step that records it

    def __post_init__(self) -> None:
        check_args("merge", (("tensor", self.tensor, str), ("dim", self.dim, int)))

    @property
    def args(self) -> tuple[str, int]:
        return self.tensor, self.dim


# As the schedule verbs' checks word them (``schedules/verb_args.py``).
_KIND_TEXT = {str: "a name (str)", int: "an int (|n| < 2**31)", bool: "a bool"}


def check_args(verb: str, values: tuple[tuple[str, object, type], ...]) -> None:
    """ScheduleArgumentError for a layout argument of the wrong kind (a list for a tensor
    name, a float or a 40-digit int for a dimension): a JSON schedule's leading layout steps
    reach ``Merge`` and ``Pack`` without the verbs' own checks. ``values``: (argument,
    value, kind) of each."""
    for name, value, kind in values:
        ok = not isinstance(value, bool) and isinstance(value, Integral) and \
            -2**31 < int(value) < 2**31 if kind is int else isinstance(value, kind)
        if not ok:
            text = repr(value)
            usage = ", ".join(f"{n}: {_KIND_TEXT[k]}" for n, _, k in values)
            raise ScheduleArgumentError(
                f"{verb}: argument {name!r} must be {_KIND_TEXT[kind]}, not "
                f"{type(value).__name__} {text if len(text) <= 60 else text[:60] + '...'}; "
                f"{verb}({usage})")


# an access: (tensor, its index per dimension as a lone iterator, or None)
_Access = tuple[str, tuple[str | None, ...]]


@dataclass(frozen=True)
class _Stmt:
    """What merging needs of one statement: its accesses' lone iterators, the iterators
    used elsewhere (an index that is no lone iterator, a value), and its box."""

    accesses: tuple[_Access, ...]
    other: frozenset[str]
    box: dict[str, tuple[int, int]] | None  # None: not a box
    fixed: frozenset[str] = frozenset()  # iterators of one point (their uses are constants)


def mergeable(program: ir.Program) -> tuple[Merge, ...]:
    """The merges ``program`` admits, each named by its first tensor dimension, innermost
    first: apply one (``merge_program``), then ask again (merged dimensions may merge
    again). None where a size is unbound or the def has value semantics."""
    if program.sizes or program.value_semantics:
        return ()
    info = {s.name: _info(program, s) for s in program.stmts}
    out, seen = [], set()
    for t in program.tensors.values():
        for d in range(t.rank - 2, -1, -1):
            comp = _component(program, info, t.name, d)
            if comp is not None and (t.name, d) not in seen:
                seen |= comp[0]
                out.append(Merge(t.name, d))
    return tuple(out)


def merge_all(program: ir.Program) -> tuple[tuple[Merge, ...], ir.Program]:
    """Every merge ``program`` admits, applied in turn until none is left (a merged pair
    may merge again: ``c, hw`` of an elementwise def), and the merged program. Each merge
    lowers a tensor's rank, so this ends."""
    out: list[Merge] = []
    while found := mergeable(program):
        out.append(found[0])
        program = merge_program(program, found[0])
    return tuple(out), program


def merge_program(program: ir.Program, merge: Merge) -> ir.Program:
    """``program`` with ``merge``'s component merged; ScheduleError where it does not
    apply."""
    if program.sizes or program.value_semantics:
        raise ScheduleError(f"merge: def '{program.name}' has unbound sizes or value "
                            "semantics; only a def of known sizes merges loops")
    info = {s.name: _info(program, s) for s in program.stmts}
    comp = _component(program, info, merge.tensor, merge.dim)
    if comp is None:
        raise ScheduleError(f"merge: dimensions {merge.dim} and {merge.dim + 1} of "
                            f"{merge.tensor} are not walked as one run by every access")
    dims, pairs = comp
    tensors = {name: _merged_tensor(t, [d for n, d in dims if n == name])
               for name, t in program.tensors.items()}
    stmts = tuple(_merged_stmt(program, s, info[s.name], pairs.get(s.name), dims)
                  for s in program.stmts)
    return replace(program, inputs=tuple(tensors[t.name] for t in program.inputs),
                   outputs=tuple(tensors[t.name] for t in program.outputs),
                   locals=tuple(tensors[t.name] for t in program.locals), stmts=stmts)


def _component(program: ir.Program, info: dict[str, _Stmt], tensor: str, dim: int
               ) -> tuple[set[tuple[str, int]], dict[str, tuple[str, str]]] | None:
    """The tensor dimensions and statement iterator pairs that merge with ``tensor``'s
    ``dim`` and ``dim + 1``, or None where one of them cannot."""
    dims: set[tuple[str, int]] = {(tensor, dim)}
    pairs: dict[str, tuple[str, str]] = {}
    todo = [(tensor, dim)]
    while todo:
        name, d = todo.pop()
        t = program.tensors.get(name)
        if t is None or not 0 <= d < t.rank - 1 or not any(
                acc == name for st in info.values() for acc, _ in st.accesses):
            return None  # a tensor no statement accesses has nothing to gain
        for s in program.stmts:
            for acc, its in info[s.name].accesses:
                if acc != name:
                    continue
                a, b = its[d], its[d + 1]
                if a is None or b is None or a == b:
                    return None
                if pairs.setdefault(s.name, (a, b)) != (a, b):
                    return None
                for link in _links(info[s.name], a, b, program):
                    if link is None:
                        return None
                    if link not in dims:
                        dims.add(link)
                        todo.append(link)
    return dims, pairs


def _links(st: _Stmt, a: str, b: str, program: ir.Program
           ) -> Iterator[tuple[str, int] | None]:
    """Each tensor dimension where statement ``st`` indexes ``a, b`` (None: it uses them
    otherwise, or its domain is no box of ``b`` over the dimension's extent)."""
    if st.box is None or {a, b} & (st.other | st.fixed) or a not in st.box \
            or b not in st.box:
        yield None
        return
    lo, hi = st.box[b]
    for name, its in st.accesses:
        uses = [k for k, it in enumerate(its) if it in (a, b)]
        if not uses:
            continue
        if len(uses) != 2 or its[uses[0]] != a or uses[1] != uses[0] + 1:
            yield None
            return
        extent = _extent(program.tensors[name], uses[1])
        if lo != 0 or extent is None or hi != extent - 1:
            yield None
            return
        yield name, uses[0]


def _info(program: ir.Program, s: ir.Stmt) -> _Stmt:
    box = _box(program, s)
    fixed = {it: lo for it, (lo, hi) in (box or {}).items() if lo == hi}
    accesses: list[_Access] = [(s.tensor, tuple(s.lhs))]
    other: set[str] = set()

    def visit(e: ir.Expr) -> None:
        if isinstance(e, ir.Read):
            lone = [_lone(ix, fixed) for ix in e.indices]
            pads = e.pad or ()
            for k, ix in enumerate(e.indices):
                if lone[k] is None or (k < len(pads) and not pads[k].is_zero):
                    other.update(ir.index_names(ix))
                    lone[k] = None
                    visit(ix)  # a gather's index reads are accesses too
            accesses.append((e.tensor, tuple(lone)))
            return
        if isinstance(e, ir.Var) and e.kind == "index":
            other.add(e.name)
        for c in e.children():
            visit(c)

    visit(s.rhs)
    return _Stmt(tuple(accesses), frozenset(other - set(fixed)), box, frozenset(fixed))


def _lone(ix: ir.Expr, fixed: dict[str, int]) -> str | None:
    """The iterator ``ix`` is, once the iterators of one point are fixed; else None."""
    if any(isinstance(e, ir.Read) for e in ix.walk()):
        return None
    try:
        lin = from_expr(ix, frozenset())
    except NotAffine:
        return None
    const, terms = lin.const, []
    for atom, c in lin.terms:
        if isinstance(atom, str) and atom in fixed:
            const += c * fixed[atom]
        else:
            terms.append((atom, c))
    if const or len(terms) != 1 or terms[0][1] != 1 or not isinstance(terms[0][0], str):
        return None
    return terms[0][0]


def _box(program: ir.Program, s: ir.Stmt) -> dict[str, tuple[int, int]] | None:
    """Each iterator's constant bounds, where the domain is exactly their product."""
    dom = isl.Set(s.domain)
    bounds: dict[str, tuple[int, int]] = {}
    box = isl.Set.universe(dom.get_space())
    for k, it in enumerate(s.iters):
        lo, hi = dom.dim_min_val(k), dom.dim_max_val(k)
        if not (lo.is_int() and hi.is_int()):
            return None
        bounds[it] = (int(lo.to_python()), int(hi.to_python()))
        box = box.lower_bound_val(isl.dim_type.set, k, lo).upper_bound_val(
            isl.dim_type.set, k, hi)
    return bounds if box.is_equal(dom) else None


def _extent(t: ir.Tensor, d: int) -> int | None:
    try:
        return ir.extent_value(t.shape[d], {})
    except isl.Error:
        return None


def _merged_tensor(t: ir.Tensor, dims: list[int]) -> ir.Tensor:
    shape = list(t.shape)
    for d in sorted(dims, reverse=True):
        a, b = _extent(t, d), _extent(t, d + 1)
        assert a is not None and b is not None  # checked by _links
        shape[d:d + 2] = [str(a * b)]
    return replace(t, shape=tuple(shape)) if dims else t


def _merged_stmt(program: ir.Program, s: ir.Stmt, st: _Stmt, pair: tuple[str, str] | None,
                 dims: set[tuple[str, int]]) -> ir.Stmt:
    """``s`` with its pair ``a, b`` as one iterator over the merged dimensions."""
    if pair is None:
        return s
    a, b = pair
    assert st.box is not None
    taken = set(s.iters) | {t for t in program.tensors}
    p = ir.fresh_name(f"{a}{b}", taken)
    width = st.box[b][1] + 1
    lo, hi = st.box[a][0] * width, st.box[a][1] * width + width - 1
    iters = tuple(p if it == a else it for it in s.iters if it != b)

    def merged(e: ir.Expr) -> ir.Expr:
        if not isinstance(e, ir.Read):
            return e
        ds = [d for n, d in dims if n == e.tensor]
        if not ds:
            return e
        (d,) = ds
        indices = (*e.indices[:d], ir.Var(e.indices[d].dtype, p, "index"), *e.indices[d + 2:])
        pad = None if e.pad is None else (*e.pad[:d], e.pad[d], *e.pad[d + 2:])
        return replace(e, indices=indices, pad=pad)

    bounds = [f"{st.box[it][0]} <= {it} <= {st.box[it][1]}" for it in iters if it != p]
    text = (f"{program.params} -> {{ {s.name}[{', '.join(iters)}] : "
            f"{' and '.join([f'{lo} <= {p} <= {hi}', *bounds])} }}")
    return replace(s, lhs=tuple(p if it == a else it for it in s.lhs if it != b),
                   iters=iters, rhs=ir.rewrite(s.rhs, merged), domain=text)
