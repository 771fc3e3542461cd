"""Data-layout rewrites of a program, made before it is scheduled (or by the ``pack`` verb).

``pack_program(program, "B", dim=1, factor=32)`` adds a local ``B_pack`` whose dimension 1
is split into a block index (moved to position ``outer``, outermost by default) and an
offset in the block (moved innermost): ``B_pack(n / 32, k, n % 32) = B(k, n)``, a copy
statement ``B_pack_0`` that runs before every other statement, and rewrites every read of
``B`` into a read of ``B_pack``. This is GotoBLAS's panel packing done once for the whole
operand (as TVM's CPU GEMM schedule does), and NCHW → NCHWc for convolutions
(``dim=1, factor=16, outer=1``): operand panels become contiguous streams, and strided
rows stop evicting one another from the same cache sets. An output is computed in such a
blocked local instead (``pack_output_program``).

A phase copy (``phase=True``, inputs only) keeps the block index in place and moves the
offset to position ``outer`` instead: ``I_pack(.., p, j) = I(.., factor*j + p)``. A read at
a stride of ``factor`` (a strided convolution's ``I(2*w + kw)``) then moves by one along
``j``: ``I_pack(.., kw % 2, w + kw / 2)``, whole vectors for the register tile.

``relayout(program, packs)`` applies several at once: the program keeps its meaning in
source order, so one dependence analysis of the result serves all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import islpy as isl

from polyopt import ir
from polyopt.errors import ScheduleError
from polyopt.ir import fresh_name
from polyopt.poly.copies import (
    check_blocking,
    copy_of,
    linear_terms,
    packable,
    plus,
    shared_padding,
    shifted,
    term_sum,
)
from polyopt.poly.merge import Merge, check_args, merge_program
from polyopt.poly.subsample import subsample_program


@dataclass(frozen=True)
class Pack:
    """One blocked layout: ``tensor``'s dimension ``dim`` split by ``factor``, the block
    index moved to position ``outer`` (the arguments of the ``pack`` verb). ``subsample``:
    the compact copy of what a read at a stride of ``factor`` touches instead, ``dim`` moved
    to ``outer`` (``poly/subsample.py``)."""

    tensor: str
    dim: int
    factor: int
    outer: int = 0
    phase: bool = False
    subsample: bool = False
    verb = "pack"  # the schedule step that records it

    def __post_init__(self) -> None:
        check_args("pack", (("tensor", self.tensor, str), ("dim", self.dim, int),
                            ("factor", self.factor, int), ("outer", self.outer, int),
                            ("phase", self.phase, bool), ("subsample", self.subsample, bool)))

    @property
    def args(self) -> tuple[str, int, int, int] | tuple[str, int, int, int, bool] | tuple[
            str, int, int, int, bool, bool]:
        base = self.tensor, self.dim, self.factor, self.outer
        if self.subsample:
            return (*base, self.phase, True)
        return (*base, True) if self.phase else base


Layout = Pack | Merge
LAYOUT_VERBS: dict[str, type[Pack] | type[Merge]] = {"pack": Pack, "merge": Merge}


def layout_of(verb: str, args: Sequence[object]) -> Layout:
    """The layout a recorded ``pack`` or ``merge`` step chose; TypeError for bad args."""
    return LAYOUT_VERBS[verb](*args)  # type: ignore[arg-type]


def relayout(program: ir.Program, packs: Sequence[Layout]) -> tuple[ir.Program, tuple[str, ...]]:
    """``program`` with every layout of ``packs`` applied in order (a ``Merge``: two loops
    and the dimensions they walk as one, ``polyopt.poly.merge``), and the names of the
    blocked locals; ScheduleError for one that does not apply."""
    names = []
    for p in packs:
        if isinstance(p, Merge):
            program = merge_program(program, p)
            continue
        program, name = pack(program, *p.args)
        names.append(name)
    return program, tuple(names)


def rewrites_stmts(program: ir.Program, layout: Sequence[Layout]) -> bool:
    """Does ``layout`` rewrite statements (an output blocked, loops merged), so that a
    schedule restarts from program order after it?"""
    return any(isinstance(p, Merge) or (p.tensor in program.tensors
                                         and program.tensors[p.tensor].role == "output")
               for p in layout)


def pack(program: ir.Program, tensor: str, dim: int, factor: int,
         outer: int = 0, phase: bool = False,
         subsample: bool = False) -> tuple[ir.Program, str]:
    """An input read through a blocked copy (or a phase copy, or a subsampled one), or an
    output computed in a blocked local."""
    t = program.tensors.get(tensor)
    if phase and subsample:
        raise ScheduleError(f"pack: a copy of {tensor} is split in phases or subsampled, "
                            f"not both")
    if subsample:
        return subsample_program(program, tensor, dim, factor, outer)
    if phase:
        return phase_program(program, tensor, dim, factor, outer)
    if t is not None and t.role == "output":
        return pack_output_program(program, tensor, dim, factor, outer)
    return pack_program(program, tensor, dim, factor, outer)


def phase_program(program: ir.Program, tensor: str, dim: int, factor: int,
                  outer: int) -> tuple[ir.Program, str]:
    """``program`` with input ``tensor`` read through a phase copy (the module's
    docstring), which also holds its zero padding (along ``dim`` too)."""
    t = packable(program, tensor, dim, factor, outer, padded_dim=True)
    pad, fill = shared_padding(program, tensor, dim, padded_dim=True)
    name = fresh_name(f"{tensor}_pack", set(program.tensors) | set(program.sizes))
    extents = list(t.shape) if pad is None else [
        f"({e}) + ({p.before}) + ({p.after})" for e, p in zip(t.shape, pad, strict=True)]
    shape = list(extents)
    shape[dim] = f"floor(({extents[dim]} + {factor - 1})/{factor})"
    shape.insert(outer, str(factor))
    packed = ir.Tensor(name, t.dtype, tuple(shape), "local")

    def read(e: ir.Expr) -> ir.Expr:
        if not isinstance(e, ir.Read) or e.tensor != tensor:
            return e
        index = list(shifted(e.indices, e.pad))
        index[dim], phase = _phase_split(index[dim], factor)
        index.insert(outer, phase)
        return replace(e, tensor=name, indices=tuple(index), pad=None)
    stmts = tuple(replace(s, rhs=ir.rewrite(s.rhs, read)) for s in program.stmts)
    copy = _phase_copy(program, t, packed, (dim, factor, outer), (pad, fill), extents[dim])
    return replace(program, locals=(*program.locals, packed), stmts=(copy, *stmts)), name


def _phase_split(x: ir.Expr, factor: int) -> tuple[ir.Expr, ir.Expr]:
    """``(x / factor, x % factor)`` (floor division) with the terms of ``x`` whose
    coefficients ``factor`` divides taken out of the division: ``2*w + kw`` by 2 gives
    ``(w + kw / 2, kw % 2)``, whose parts a vector loop over ``w`` reads contiguously (the
    division of ``2*w + kw`` itself read as a gather)."""
    f = ir.Const(x.dtype, factor)
    terms = linear_terms(x)
    if terms is None:
        return ir.Binary(x.dtype, "/", x, f), ir.Binary(x.dtype, "%", x, f)
    whole = {v: c // factor for v, c in terms.items() if v and c % factor == 0}
    rest = {v: c for v, c in terms.items() if v not in whole}
    quotient, rest_x = term_sum(whole, x.dtype), term_sum(rest, x.dtype)
    if rest_x is None or set(rest) <= {""}:  # a constant: quotient and phase are numbers
        q, r = divmod(rest.get("", 0), factor)
        return plus(quotient, ir.Const(x.dtype, q)), ir.Const(x.dtype, r)
    return (plus(quotient, ir.Binary(x.dtype, "/", rest_x, f)),
            ir.Binary(x.dtype, "%", rest_x, f))


def _phase_copy(program: ir.Program, t: ir.Tensor, packed: ir.Tensor,
                blocking: tuple[int, int, int],
                padding: tuple[tuple[ir.Pad, ...] | None, float], extent: str) -> ir.Stmt:
    """``packed(.., p, j) = t(.., factor*j + p)`` over the phase copy's index space, inside
    ``t``'s padded ``extent`` along ``dim`` (the padding read as the fill value)."""
    dim, factor, outer = blocking
    pad, fill = padding
    taken = set(program.sizes) | {n for s in program.stmts for n in s.iters}
    iters = tuple(fresh_name(f"{t.name.lower()}p{d}", taken) for d in range(packed.rank))
    offset = iters[outer]
    rest = [p for d, p in enumerate(iters) if d != outer]
    source: list[ir.Expr] = [ir.Var("int32", p, "index") for p in rest]
    source[dim] = ir.Binary("int32", "+", ir.Binary(
        "int32", "*", ir.Const("int32", factor), source[dim]), ir.Var("int32", offset, "index"))
    return copy_of(program, t, packed, iters, source, pad, fill,
                    f"{factor}*{rest[dim]} + {offset} < {extent}")


def pack_program(program: ir.Program, tensor: str, dim: int, factor: int,
                 outer: int = 0) -> tuple[ir.Program, str]:
    """``program`` with input ``tensor`` read through a blocked copy; and the copy's name."""
    t = packable(program, tensor, dim, factor, outer)
    pad, fill = shared_padding(program, tensor, dim)
    name = fresh_name(f"{tensor}_pack", set(program.tensors) | set(program.sizes))
    extents = list(t.shape) if pad is None else [
        f"({e}) + ({p.before}) + ({p.after})" for e, p in zip(t.shape, pad, strict=True)]
    shape = [e for d, e in enumerate(extents) if d != dim]
    shape.insert(outer, f"floor(({t.shape[dim]} + {factor - 1})/{factor})")
    packed = ir.Tensor(name, t.dtype, (*shape, str(factor)), "local")
    stmts = tuple(_rewrite(s, tensor, name, dim, factor, outer) for s in program.stmts)
    copy = _copy_stmt(program, t, packed, (dim, factor, outer), (pad, fill))
    return replace(program, locals=(*program.locals, packed), stmts=(copy, *stmts)), name


def pack_output_program(program: ir.Program, tensor: str, dim: int, factor: int,
                        outer: int = 0) -> tuple[ir.Program, str]:
    """``program`` computing output ``tensor`` in a blocked local (e.g. NCHW16c), and an
    unpack statement writing ``tensor`` from it at the end. Each statement that writes the
    output runs over the block index and the offset instead of the blocked index
    (strip-mined in its domain), so its left-hand side stays a list of iterators."""
    t = program.tensors.get(tensor)
    if t is None or t.role != "output":
        outputs = ", ".join(x.name for x in program.outputs)
        raise ScheduleError(f"pack: {tensor!r} is not an output of def '{program.name}'; "
                            f"outputs: {outputs}")
    check_blocking(t, dim, factor, outer)
    name = fresh_name(f"{tensor}_pack", set(program.tensors) | set(program.sizes))
    shape = [e for d, e in enumerate(t.shape) if d != dim]
    shape.insert(outer, f"floor(({t.shape[dim]} + {factor - 1})/{factor})")
    packed = ir.Tensor(name, t.dtype, (*shape, str(factor)), "local")
    stmts: list[ir.Stmt] = []
    k = 0
    for st in program.stmts:
        # Strip-mined first, so that a read of the output at the statement's own channel
        # (``16*i_b + i_v``) reads the block ``i_b`` and lane ``i_v`` (``_split_index``), not
        # ``(16*i_b + i_v) / 16`` and ``% 16``, which compilers print as gathers.
        if st.tensor == tensor:
            st = _strip_mine(program, st, name, k, (dim, factor, outer))
            k += 1
        stmts.append(_rewrite(st, tensor, name, dim, factor, outer))
    # Every writer runs in the blocked local, an elementwise epilogue (bias, ReLU) too, in
    # vectors of the block; the unpack is then a plain copy, which the printer transposes
    # in registers (codegen/transpose.py). The epilogue writing the output from the blocked
    # local itself read it a lane at a time instead: MobileNetV2's 3x3 depthwise layers at
    # 14x14 ran 4-10x slower with its min/max (0.26 against 0.023 ms, 576 channels).
    stmts.append(_unpack_stmt(program, t, packed, (dim, factor, outer)))
    return replace(program, locals=(*program.locals, packed), stmts=tuple(stmts)), name


def _strip_mine(program: ir.Program, st: ir.Stmt, name: str, k: int,
                blocking: tuple[int, int, int]) -> ir.Stmt:
    """``st`` writing ``name`` over iterators where LHS dim ``dim``'s index ``x`` becomes a
    block index ``x_b`` (at position ``outer``) and an offset ``x_v`` (last): x = f*x_b+x_v."""
    dim, factor, outer = blocking
    it = st.lhs[dim]
    taken = set(program.sizes) | set(st.iters)
    b, v = fresh_name(f"{it}_b", taken), fresh_name(f"{it}_v", taken)
    lhs = [x for x in st.lhs if x != it]
    lhs.insert(outer, b)
    lhs.append(v)
    iters = (*lhs, *st.reduction_iters)
    value = ir.Binary("int32", "+", ir.Binary("int32", "*", ir.Const("int32", factor),
                                              ir.Var("int32", b, "index")),
                      ir.Var("int32", v, "index"))
    rhs = ir.substitute_indices(st.rhs, {it: value})
    new_name = f"{name}_{k}"
    old = isl.Set(st.domain)
    mapping = isl.Map(f"{program.params} -> {{ {st.name}[{', '.join(st.iters)}] -> "
                      f"{new_name}[{', '.join(iters)}] : {it} = {factor}*{b} + {v} and "
                      f"0 <= {v} < {factor} }}")
    domain = old.apply(mapping)
    for d, x in enumerate(iters):  # isl names the image's dimensions i0, i1, ...
        domain = domain.set_dim_name(isl.dim_type.set, d, x)
    return replace(st, name=new_name, tensor=name, lhs=tuple(lhs), iters=iters, rhs=rhs,
                   domain=str(domain))


def _unpack_stmt(program: ir.Program, t: ir.Tensor, packed: ir.Tensor,
                 blocking: tuple[int, int, int]) -> ir.Stmt:
    """``t(i...) = packed(blocked index of i)``: the output, in its own layout, last."""
    dim, factor, outer = blocking
    taken = set(program.sizes) | {n for s in program.stmts for n in s.iters}
    iters = tuple(fresh_name(f"{t.name.lower()}u{d}", taken) for d in range(t.rank))
    index = tuple(ir.Var("int32", i, "index") for i in iters)
    rhs = ir.Read(t.dtype, packed.name, _packed_index(index, dim, factor, outer))
    bounds = " and ".join(f"0 <= {i} < {e}" for i, e in zip(iters, t.shape, strict=True))
    name = f"{t.name}_0"
    domain = f"{program.params} -> {{ {name}[{', '.join(iters)}] : {bounds} }}"
    return ir.Stmt(name, t.name, iters, iters, "=", False, rhs, domain)


def _packed_index(index: tuple[ir.Expr, ...], dim: int, factor: int,
                  outer: int) -> tuple[ir.Expr, ...]:
    x = index[dim]
    f = ir.Const(x.dtype, factor)
    rest = [e for d, e in enumerate(index) if d != dim]
    rest.insert(outer, ir.Binary(x.dtype, "/", x, f))
    return (*rest, ir.Binary(x.dtype, "%", x, f))


def _rewrite(s: ir.Stmt, tensor: str, name: str, dim: int, factor: int, outer: int) -> ir.Stmt:
    def read(e: ir.Expr) -> ir.Expr:
        if not isinstance(e, ir.Read) or e.tensor != tensor:
            return e
        index = shifted(e.indices, e.pad)
        split = _split_index(s, index[dim], factor)
        packed = _packed_index(index, dim, factor, outer)
        if split is not None:
            packed = (*packed[:outer], split[0], *packed[outer + 1:-1], split[1])
        return replace(e, tensor=name, indices=packed, pad=None)
    return replace(s, rhs=ir.rewrite(s.rhs, read))


def _split_index(s: ir.Stmt, x: ir.Expr, factor: int) -> tuple[ir.Expr, ir.Expr] | None:
    """``(b, v)`` when index ``x`` is ``factor*b + v`` with ``0 <= v < factor`` in ``s``'s
    domain (an output's strip-mined channel, read from weights packed by the same block):
    then ``x / factor`` is ``b`` and ``x % factor`` is ``v``, which the register-tile
    printer can follow when its vectors are narrower than the block."""
    if not (isinstance(x, ir.Binary) and x.op == "+" and isinstance(x.b, ir.Var)
            and isinstance(x.a, ir.Binary) and x.a.op == "*" and isinstance(x.a.a, ir.Const)
            and x.a.a.value == factor and isinstance(x.a.b, ir.Var)):
        return None
    v = x.b.name
    if v not in s.iters:
        return None
    domain = isl.Set(s.domain)
    pos = s.iters.index(v)
    low, high = domain.dim_min_val(pos), domain.dim_max_val(pos)
    if not (low.is_int() and high.is_int() and low.to_python() >= 0
            and high.to_python() < factor):
        return None
    return x.a.b, x.b


def _copy_stmt(program: ir.Program, t: ir.Tensor, packed: ir.Tensor,
               blocking: tuple[int, int, int],
               padding: tuple[tuple[ir.Pad, ...] | None, float]) -> ir.Stmt:
    """``packed(p...) = t(...)`` over the packed index space, inside ``t``'s extent (and its
    padding, read as the fill value)."""
    dim, factor, outer = blocking
    pad, fill = padding
    taken = set(program.sizes) | {n for s in program.stmts for n in s.iters}
    iters = tuple(fresh_name(f"{t.name.lower()}p{d}", taken) for d in range(packed.rank))
    block, offset = iters[outer], iters[-1]
    others = [p for d, p in enumerate(iters[:-1]) if d != outer]
    source: list[ir.Expr] = [ir.Var("int32", p, "index") for p in others]
    source.insert(dim, ir.Binary("int32", "+", ir.Binary(
        "int32", "*", ir.Const("int32", factor), ir.Var("int32", block, "index")),
        ir.Var("int32", offset, "index")))
    return copy_of(program, t, packed, iters, source, pad, fill,
                    f"{factor}*{block} + {offset} < {t.shape[dim]}")

