"""Reads that see through copies: a read whose value a copy statement wrote reads what the
copy read instead, through any chain of copies (issue 40).

A copy is ``X(f(i)) = Y(g(i))``: ``=``, no ``op=!`` fill, one affine, unpadded read of the
same dtype. jacobi-2d with its edges copied from the previous step (``At(t,i,j) =
At(t-1,i,j) where t in 1:T``, the first step's from the input) computes what the bundled
one (edges copied from the input for every step) does, but its copies chain the steps
together: scheduled first, they kept the whole ``(T,N,N)`` local alive and the stencil out
of time tiles. Each edge element is the input's, which this pass makes explicit.

How: ``flow`` finds each read's source instance (exactly); the copy-to-copy sources' exact
transitive closure (``isl.UnionMap.transitive_closure``) follows every chain to its first
copy, whose read is where the value lives. Only a read whose every instance gets a copy's
value, from one affine access of one tensor, is rewritten: redirecting part of a read
would split its statement into a piece per source (a 2-D stencil statement reading edge
copies into 9, a 3-D one into 27), which costs more in scheduling and code than the copies
do. Copies that then feed nothing are dropped (``dead.drop_unread``), without a warning:
the def did not write them in vain, this pass bypassed them; one that still feeds some
read is kept whole (cutting out the corners no stencil reads made the edges of a 2-D
stencil's planes depend on the step, and its local was no longer contracted). Where isl
is not exact, a read is not affine, or a fill writes a copied tensor, the program is left
as written.

Why the copy's read still has its value at the reader: with value semantics every element
is written once; otherwise a statement may not read a tensor that a later statement
writes (the language's rule, checked again here), so nothing writes it after the copy.
"""

from __future__ import annotations

import re
from dataclasses import replace

import islpy as isl

from polyopt import ir
from polyopt.lang.dead import drop_unread
from polyopt.lang.flow import Access, Flow, dataflow, maps_of, union_all

_IN = isl.dim_type.in_
_PARAM = isl.dim_type.param


def is_copy(program: ir.Program, s: ir.Stmt) -> bool:
    """Is ``s`` ``X(...) = Y(...)``: one unpadded read of the same dtype, nothing else?"""
    r = s.rhs
    return (s.op == "=" and not s.init and isinstance(r, ir.Read) and r.pad is None
            and r.dtype == program.tensors[s.tensor].dtype
            and not any(isinstance(e, ir.Read) for ix in r.indices for e in ix.walk()))


def see_through_copies(program: ir.Program) -> ir.Program:
    """``program`` with every read that gets a copy's value, at every instance, reading
    the element the copy chain started from; copies left unread dropped."""
    copies = {s.name for s in program.stmts if is_copy(program, s)}
    copied = {s.tensor for s in program.stmts if s.name in copies}
    if not copies or not any(isinstance(e, ir.Read) and e.tensor in copied
                             for s in program.stmts for e in s.rhs.walk()):
        return program
    if any(s.init and s.tensor in copied for s in program.stmts):
        return program
    flow = dataflow(program)
    if flow is None:
        return program
    new = _redirected(flow, copies, copied)
    if not new:
        return program
    stmts = tuple(_rewritten(s, new.get(s.name, {})) for s in program.stmts)
    out = drop_unread(replace(program, stmts=stmts), copies, pieces=False)
    return _merged(out, set(new)) if out.value_semantics else out


def _redirected(flow: Flow, copies: set[str], copied: set[str]
                ) -> dict[str, dict[int, ir.Read]]:
    """By statement name and read number: the reads that see through copies."""
    doms = _union_sets([flow.domains[c] for c in copies])
    frozen = frozenset(copies)
    sources: dict[Access, isl.UnionMap] = {}
    for a in flow.reads:
        if a.relation is not None and a.read.tensor in copied:
            src = flow.source([a.relation], a.read.tensor, among=frozen).intersect_range(doms)
            if not src.is_empty():
                sources[a] = src
    start = _chain_starts(flow, copies, doms, sources)
    if start is None:
        return {}
    out: dict[str, dict[int, ir.Read]] = {}
    for a, src in sources.items():
        read = _single_read(a, src.apply_range(start), flow.domains[a.stmt.name])
        if read is not None:
            out.setdefault(a.stmt.name, {})[a.k] = read
    return out


def _chain_starts(flow: Flow, copies: set[str], doms: isl.UnionSet,
                  sources: dict[Access, isl.UnionMap]) -> isl.UnionMap | None:
    """copy instance -> the element the first copy of its chain read; None when the chains
    are not exact (or a copy's source may be overwritten before its readers read it)."""
    reads = [a for a in flow.reads if a.stmt.name in copies]
    if any(a.relation is None for a in reads) or not _unchanged_after(flow, reads):
        return None
    step = _union_maps([sources[a] for a in reads if a in sources], doms)
    chains = doms.identity()
    if not step.is_empty():
        closure, exact = step.transitive_closure()
        if not exact:
            return None
        chains = chains.union(closure)
    first = chains.intersect_range(doms.subtract(step.domain()))
    return first.apply_range(_union_maps([a.relation for a in reads
                                          if a.relation is not None], doms))


def _unchanged_after(flow: Flow, reads: list[Access]) -> bool:
    """Does nothing write what a copy reads after the copy (the text's order)?"""
    if flow.program.value_semantics:
        return True
    pos = {s.name: k for k, s in enumerate(flow.program.stmts)}
    for a in reads:
        later = [s for s in flow.program.stmts[pos[a.stmt.name]:] if s.tensor == a.read.tensor]
        if later:
            return False
    return True


def _single_read(a: Access, redirected: isl.UnionMap, domain: isl.Set) -> ir.Read | None:
    """``a``'s read of the one element ``redirected`` maps every instance to, when it is one
    affine access of one tensor over the whole domain."""
    maps = maps_of(redirected.coalesce())
    if len(maps) != 1 or not maps[0].domain().is_equal(domain):
        return None
    m = maps[0]
    if not m.is_single_valued():
        return None
    pieces: list[isl.MultiAff] = []
    m.as_pw_multi_aff().foreach_piece(lambda _set, ma: pieces.append(ma))
    if not pieces or any(not p.plain_is_equal(pieces[0]) for p in pieces[1:]):
        return None
    indices = []
    n = pieces[0].dim(isl.dim_type.out)
    for k in range(n):
        ix = _index(pieces[0].get_aff(k), a.stmt.iters, _fixed(domain, k + len(a.stmt.iters) - n))
        if ix is None:
            return None
        indices.append(ix)
    return ir.Read(a.read.dtype, m.get_tuple_name(isl.dim_type.out), tuple(indices),
                   pos=a.read.pos)


def _fixed(domain: isl.Set, k: int) -> tuple[int, int] | None:
    """(``k``, its value) when iterator ``k`` of ``domain`` takes one value."""
    if not 0 <= k < domain.dim(isl.dim_type.set):
        return None
    lo, hi = domain.dim_min_val(k), domain.dim_max_val(k)
    if not (lo.is_int() and lo.eq(hi)):
        return None
    return k, int(lo.to_python())


def _index(aff: isl.Aff, iters: tuple[str, ...], fixed: tuple[int, int] | None
           ) -> ir.Expr | None:
    """``aff`` as an index expression; None with a division or a rational coefficient.
    ``fixed``: an iterator that takes one value, named rather than its value when ``aff``
    is that constant (isl writes ``A(i) where i in 0:1`` as ``A(0)``; the text kept ``i``)."""
    if aff.dim(isl.dim_type.div) or not aff.get_denominator_val().is_one():
        return None
    if fixed is not None and aff.is_cst() and aff.get_constant_val().to_python() == fixed[1]:
        return ir.Var("int32", iters[fixed[0]], "index")
    terms: list[tuple[int, ir.Expr]] = []
    for kind, names, var_kind in ((_IN, iters, "index"), (_PARAM, None, "size")):
        for i in range(aff.dim(kind)):
            c = int(aff.get_coefficient_val(kind, i).to_python())
            name = names[i] if names is not None else str(aff.get_dim_name(kind, i))
            if c:
                terms.append((c, ir.Var("int32", name, var_kind)))
    const = int(aff.get_constant_val().to_python())
    out: ir.Expr | None = None
    for c, v in terms:
        term = v if abs(c) == 1 else ir.Binary("int32", "*", ir.Const("int32", abs(c)), v)
        out = (ir.Unary("int32", "-", term) if c < 0 else term) if out is None else \
            ir.Binary("int32", "+" if c > 0 else "-", out, term)
    if out is None:
        return ir.Const("int32", const)
    if const:
        out = ir.Binary("int32", "+" if const > 0 else "-", out, ir.Const("int32", abs(const)))
    return out


def _rewritten(s: ir.Stmt, reads: dict[int, ir.Read]) -> ir.Stmt:
    """``s`` with its ``k``-th read (``flow``'s numbering) replaced by ``reads[k]``."""
    if not reads:
        return s
    seen = [0]

    def fn(e: ir.Expr) -> ir.Expr:
        if not isinstance(e, ir.Read):
            return e
        k, seen[0] = seen[0], seen[0] + 1
        return reads.get(k, e)

    return replace(s, rhs=ir.rewrite(s.rhs, fn))


def _merged(program: ir.Program, touched: set[str]) -> ir.Program:
    """``program`` with each rewritten statement merged into an earlier one that computes
    the same (tensor, indices, right-hand side) where their domains together are one
    simple set (``At(t,i) = A(i)`` for ``t in 0:1`` and for ``t in 1:T``: the bundled
    edge statement), then each tensor's statements named ``<tensor>_<k>`` again. Value
    semantics only: there the order of the statements means nothing."""
    kept: list[ir.Stmt] = []
    by_text: dict[tuple[object, ...], list[int]] = {}  # kept statements by _same_text's key
    for s in program.stmts:
        key = _text_key(s)
        for j in by_text.get(key, []) if s.name in touched else []:
            p = kept[j]
            both = isl.Set(p.domain).union(isl.Set(s.domain).set_tuple_name(p.name))
            if both.coalesce().n_basic_set() == 1:
                kept[j] = replace(p, domain=_text(both.coalesce()))
                break
        else:
            by_text.setdefault(key, []).append(len(kept))
            kept.append(s)
    if len(kept) == len(program.stmts):
        return program
    count: dict[str, int] = {}
    named = []
    for s in kept:
        k = count[s.tensor] = count.get(s.tensor, -1) + 1
        name = f"{s.tensor}_{k}"
        domain = re.sub(rf"\b{s.name}\[", f"{name}[", s.domain, count=1)
        named.append(replace(s, name=name, domain=domain))
    return replace(program, stmts=tuple(named))


def _text_key(s: ir.Stmt) -> tuple[object, ...]:
    """What two statements must share to be merged: all but the name and the domain (a
    key, not a comparison of each pair: 2,000,000 pairs at 2000 pieces)."""
    return (s.tensor, s.lhs, s.iters, s.op, s.init, s.rhs)


def _text(dom: isl.Set) -> str:
    text = str(dom)
    return text if text.startswith("[") else f"[] -> {text}"


def _union_sets(sets: list[isl.Set]) -> isl.UnionSet:
    return union_all([isl.UnionSet.from_set(s) for s in sets],
                          isl.UnionSet.empty(sets[0].get_space().params()))


def _union_maps(maps: list[isl.Map] | list[isl.UnionMap], like: isl.UnionSet) -> isl.UnionMap:
    return union_all([m if isinstance(m, isl.UnionMap) else isl.UnionMap.from_map(m)
                           for m in maps], isl.UnionMap.empty(like.get_space()))
