"""Data-layout transformations: copy an input into a blocked layout before it is used.

``pack_program(program, "B", dim=1, factor=32)`` adds a local ``B_pack`` whose dimension 1
is split into a block index (moved to position ``outer``, outermost by default) and an
offset in the block (moved innermost): ``B_pack(n / 32, k, n % 32) = B(k, n)``, a copy
statement ``B_pack_0`` that runs before every other statement, and rewrites every read of
``B`` into a read of ``B_pack``. This is GotoBLAS's panel packing done once for the whole
operand (as TVM's CPU GEMM schedule does), and NCHW → NCHWc for convolutions
(``dim=1, factor=16, outer=1``): operand panels become contiguous streams, and strided
rows stop evicting one another from the same cache sets.

The program keeps its meaning in source order, so dependences are simply recomputed.
"""

from __future__ import annotations

from dataclasses import replace

from polyopt import ir
from polyopt.errors import ScheduleError
from polyopt.schedule.tree import fresh_name


def pack_program(program: ir.Program, tensor: str, dim: int, factor: int,
                 outer: int = 0) -> tuple[ir.Program, str]:
    """``program`` with input ``tensor`` read through a blocked copy; and the copy's name."""
    t = _packable(program, tensor, dim, factor, outer)
    name = fresh_name(f"{tensor}_pack", set(program.tensors) | set(program.sizes))
    shape = [e for d, e in enumerate(t.shape) if d != dim]
    shape.insert(outer, f"floor(({t.shape[dim]} + {factor - 1})/{factor})")
    packed = ir.Tensor(name, t.dtype, (*shape, str(factor)), "local")
    stmts = tuple(_rewrite(s, tensor, name, dim, factor, outer) for s in program.stmts)
    copy = _copy_stmt(program, t, packed, dim, factor, outer)
    return replace(program, locals=(*program.locals, packed), stmts=(copy, *stmts)), name


def _packable(program: ir.Program, tensor: str, dim: int, factor: int,
              outer: int) -> ir.Tensor:
    t = program.tensors.get(tensor)
    if t is None or t.role != "input":
        inputs = ", ".join(x.name for x in program.inputs)
        raise ScheduleError(f"pack: {tensor!r} is not an input of def '{program.name}'; "
                            f"inputs: {inputs}")
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < t.rank:
        raise ScheduleError(f"pack: dim must be in 0..{t.rank - 1} for {tensor}, not {dim!r}")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise ScheduleError(f"pack: factor must be a positive integer, not {factor!r}")
    if isinstance(outer, bool) or not isinstance(outer, int) or not 0 <= outer < t.rank:
        raise ScheduleError(f"pack: outer must be in 0..{t.rank - 1}, not {outer!r}")
    for s in program.stmts:
        for e in s.rhs.walk():
            if isinstance(e, ir.Read) and e.tensor == tensor and e.pad is not None:
                raise ScheduleError(f"pack: statement {s.name} reads {tensor} through zero "
                                    f"padding, which a packed copy does not model yet")
    return t


def _packed_index(index: tuple[ir.Expr, ...], dim: int, factor: int,
                  outer: int) -> tuple[ir.Expr, ...]:
    x = index[dim]
    f = ir.Const(x.dtype, factor)
    rest = [e for d, e in enumerate(index) if d != dim]
    rest.insert(outer, ir.Binary(x.dtype, "/", x, f))
    return (*rest, ir.Binary(x.dtype, "%", x, f))


def _rewrite(s: ir.Stmt, tensor: str, name: str, dim: int, factor: int, outer: int) -> ir.Stmt:
    def read(e: ir.Read) -> ir.Expr:
        if e.tensor != tensor:
            return e
        return replace(e, tensor=name, indices=_packed_index(e.indices, dim, factor, outer))
    return replace(s, rhs=map_reads(s.rhs, read))


def map_reads(e: ir.Expr, fn: object) -> ir.Expr:
    """``e`` with every Read (also inside indices) replaced by ``fn(read)``."""
    if isinstance(e, ir.Read):
        inner = replace(e, indices=tuple(map_reads(i, fn) for i in e.indices))
        return fn(inner)  # type: ignore[operator,no-any-return]
    if isinstance(e, (ir.Unary, ir.Cast)):
        return replace(e, x=map_reads(e.x, fn))
    if isinstance(e, ir.Binary):
        return replace(e, a=map_reads(e.a, fn), b=map_reads(e.b, fn))
    if isinstance(e, ir.Select):
        return replace(e, cond=map_reads(e.cond, fn), a=map_reads(e.a, fn),
                       b=map_reads(e.b, fn))
    if isinstance(e, ir.Call):
        return replace(e, args=tuple(map_reads(a, fn) for a in e.args))
    return e


def _copy_stmt(program: ir.Program, t: ir.Tensor, packed: ir.Tensor, dim: int, factor: int,
               outer: int) -> ir.Stmt:
    """``packed(p...) = t(...)`` over the packed index space, inside ``t``'s extent."""
    taken = set(program.sizes) | {n for s in program.stmts for n in s.iters}
    iters = tuple(fresh_name(f"{t.name.lower()}p{d}", taken) for d in range(packed.rank))
    block, offset = iters[outer], iters[-1]
    others = [p for d, p in enumerate(iters[:-1]) if d != outer]
    source: list[ir.Expr] = [ir.Var("int32", p, "index") for p in others]
    source.insert(dim, ir.Binary("int32", "+", ir.Binary(
        "int32", "*", ir.Const("int32", factor), ir.Var("int32", block, "index")),
        ir.Var("int32", offset, "index")))
    bounds = [f"0 <= {p} < {e}" for p, e in zip(iters, packed.shape, strict=True)]
    bounds.append(f"{factor}*{block} + {offset} < {t.shape[dim]}")
    name = f"{packed.name}_0"
    domain = f"{program.params} -> {{ {name}[{', '.join(iters)}] : {' and '.join(bounds)} }}"
    rhs = ir.Read(t.dtype, t.name, tuple(source))
    return ir.Stmt(name, packed.name, iters, iters, "=", False, rhs, domain)
