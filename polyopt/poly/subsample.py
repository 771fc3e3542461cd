"""A compact copy of the elements of an input its reads touch, when they read it at a stride.

A strided 1x1 convolution reads ``I(n, c, 2*h + kh, 2*w + kw)`` with ``kh = kw = 0``: one
element in four, and every row it reads is half padding between the elements it wants, so
its register tiles step through the reduction over rows that share few cache lines and no
page. ``subsample_program(program, "I", 2, 2, 1)`` reads it through
``I_pack(n, h, c, w) = I(n, c, 2*h, 2*w)`` instead: every dimension that each read indexes
at a stride of ``factor`` in one phase (the same residue, after the reads' iterators of
one value are replaced by that value) keeps only that phase, and dimension ``dim`` moves to
position ``outer`` (before the reduction's: the rows a register tile reads for one step of
the reduction are then adjacent to those of the next step, the GotoBLAS panel of its
broadcast operand). The copy is one pass over the elements read, a quarter of the input
here (oneDNN subsamples a strided 1x1 convolution's input the same way, then runs a GEMM).
With a ``factor`` of 1 the copy only moves ``dim`` (the panel of a 1x1 convolution's input,
``I_pack(n, h, c, w) = I(n, c, h, w)``), which a blocked copy cannot do without a block
dimension of one element last.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from polyopt import ir
from polyopt.errors import ScheduleError
from polyopt.ir import fresh_name
from polyopt.poly.copies import copy_of, linear_terms, packable, shared_padding, shifted, term_sum


def subsample_program(program: ir.Program, tensor: str, dim: int, factor: int,
                      outer: int) -> tuple[ir.Program, str]:
    """``program`` with input ``tensor`` read through a compact copy of the phase its reads
    read along each dimension they stride by ``factor`` (the module's docstring), its
    dimension ``dim`` moved to position ``outer``; and the copy's name. ScheduleError when
    no dimension is read that way, one such is padded, or (``factor`` 1) nothing moves."""
    t = packable(program, tensor, dim, factor, outer, padded_dim=True)
    phases = read_phases(program, tensor, factor) if factor > 1 else {}
    pad, fill = shared_padding(program, tensor, dim, padded_dim=True)
    if not phases and factor > 1:
        raise ScheduleError(f"pack: no dimension of {tensor} is read at a stride of {factor} "
                            f"in one phase by every read")
    if factor == 1 and dim == outer:
        raise ScheduleError(f"pack: a subsampled copy of {tensor} with a factor of 1 only "
                            f"moves dimension {dim}, and outer is {outer}: nothing to do")
    if pad is not None and any(not pad[d].is_zero for d in phases):
        raise ScheduleError(f"pack: {tensor} is padded along a dimension read at a stride of "
                            f"{factor}; a subsampled copy holds no padding there")
    extents = list(t.shape) if pad is None else [
        e if p.is_zero else f"({e}) + ({p.before}) + ({p.after})"
        for e, p in zip(t.shape, pad, strict=True)]
    shape = [f"floor(({e} + {factor - 1 - phases[d]})/{factor})" if d in phases else e
             for d, e in enumerate(extents)]
    name = fresh_name(f"{tensor}_pack", set(program.tensors) | set(program.sizes))
    packed = ir.Tensor(name, t.dtype, tuple(_moved(shape, dim, outer)), "local")
    stmts = tuple(_rewrite(st, tensor, name, (dim, factor, outer), phases)
                  for st in program.stmts)
    copy = _copy(program, t, packed, (dim, factor, outer), phases, (pad, fill))
    return replace(program, locals=(*program.locals, packed), stmts=(copy, *stmts)), name


def read_phases(program: ir.Program, tensor: str, factor: int) -> dict[int, int]:
    """{dimension: phase} of the dimensions of ``tensor`` every read indexes as
    ``factor * (an index expression) + phase``, with one phase among all reads."""
    found: dict[int, int] | None = None
    for st in program.stmts:
        fixed = _fixed(st)
        for e in st.rhs.walk():
            if not isinstance(e, ir.Read) or e.tensor != tensor:
                continue
            mine = {}
            for d, ix in enumerate(shifted(e.indices, e.pad)):
                terms = linear_terms(_substituted(ix, fixed))
                if terms is None or not any(v for v in terms if v):
                    continue
                if all(c % factor == 0 for v, c in terms.items() if v):
                    mine[d] = terms.get("", 0) % factor
            found = mine if found is None else {
                d: p for d, p in found.items() if mine.get(d) == p}
    return found or {}


def _fixed(st: ir.Stmt) -> dict[str, int]:
    """The iterators of ``st`` that take one value in its domain (a 1x1 filter's taps)."""
    domain = isl.Set(st.domain)
    out = {}
    for pos, it in enumerate(st.iters):
        low, high = domain.dim_min_val(pos), domain.dim_max_val(pos)
        if low.is_int() and high.is_int() and low.to_python() == high.to_python():
            out[it] = low.to_python()
    return out


def _substituted(ix: ir.Expr, fixed: dict[str, int]) -> ir.Expr:
    def sub(x: ir.Expr) -> ir.Expr:
        if isinstance(x, ir.Var) and x.kind == "index" and x.name in fixed:
            return ir.Const(x.dtype, fixed[x.name])
        return x
    return ir.rewrite(ix, sub)


def _moved(items: list, dim: int, outer: int) -> list:
    out = list(items)
    out.insert(outer, out.pop(dim))
    return out


def _rewrite(st: ir.Stmt, tensor: str, name: str, blocking: tuple[int, int, int],
             phases: dict[int, int]) -> ir.Stmt:
    """``st`` reading ``name`` at ``(x - phase) / factor`` along each subsampled
    dimension (exact: ``read_phases`` checked every coefficient)."""
    dim, factor, outer = blocking
    fixed = _fixed(st)

    def read(e: ir.Expr) -> ir.Expr:
        if not isinstance(e, ir.Read) or e.tensor != tensor:
            return e
        index = list(shifted(e.indices, e.pad))
        for d, phase in phases.items():
            terms = linear_terms(_substituted(index[d], fixed))
            assert terms is not None, index[d]
            terms[""] = (terms.get("", 0) - phase) // factor
            terms = {v: c // factor if v else c for v, c in terms.items()}
            index[d] = term_sum(terms, index[d].dtype) or ir.Const(index[d].dtype, 0)
        return replace(e, tensor=name, indices=tuple(_moved(index, dim, outer)), pad=None)
    return replace(st, rhs=ir.rewrite(st.rhs, read))


def _copy(program: ir.Program, t: ir.Tensor, packed: ir.Tensor,
          blocking: tuple[int, int, int], phases: dict[int, int],
          padding: tuple[tuple[ir.Pad, ...] | None, float]) -> ir.Stmt:
    """``packed(moved index) = t(factor * j + phase, ...)`` over the packed box."""
    dim, factor, outer = blocking
    taken = set(program.sizes) | {n for s in program.stmts for n in s.iters}
    iters = tuple(fresh_name(f"{t.name.lower()}s{d}", taken) for d in range(packed.rank))
    own = _moved(list(range(t.rank)), dim, outer)  # packed position -> t's dimension
    by_dim = {d: iters[k] for k, d in enumerate(own)}
    source: list[ir.Expr] = []
    for d in range(t.rank):
        x: ir.Expr = ir.Var("int32", by_dim[d], "index")
        if d in phases:
            x = ir.Binary("int32", "*", ir.Const("int32", factor), x)
            if phases[d]:
                x = ir.Binary("int32", "+", x, ir.Const("int32", phases[d]))
        source.append(x)
    pad, fill = padding
    return copy_of(program, t, packed, iters, source, pad, fill)
