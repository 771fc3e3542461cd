"""Reductions into 16-bit floats accumulate in float32, as numpy and cuBLAS do.

A float16 sum of 20,000 values in [0, 1) stalls at 2048 when every partial sum is rounded to
float16 (the spacing of float16 numbers reaches 2 there). So a tensor of a 16-bit float type
that some statement reduces into (``+=``/``*=`` over reduction indices) is held in float32
while the def runs:

- an output ``T`` gets a float32 local ``T_acc``; every statement that wrote ``T`` writes it
  instead (keeping its name), and a last statement ``T_<n>`` stores it back rounded to
  ``T``'s type. When the first writer may leave elements of ``T`` unset, a first statement
  ``T_widen`` loads the caller's buffer into it (``op=`` without ``!`` combines with it);
- a local is simply retyped to float32;
- reads of the widened tensor see its value rounded to the declared type (what a store in
  that type would have kept);
- the right-hand side of each accumulating statement is computed in float32: reads and
  explicit casts of 16-bit values are widened, arithmetic on them runs in float32 (numpy's
  float16 dot product multiplies in float32 too).
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from polyopt import ir
from polyopt.lang.affine import context

NARROW = frozenset({"float16", "bfloat16"})
WIDE = "float32"


def widen_reductions(program: ir.Program) -> ir.Program:
    """``program`` with every 16-bit float reduction target held in float32 (module doc)."""
    for t in (*program.outputs, *program.locals):
        if t.dtype in NARROW and any(_accumulates(s) for s in program.stmts
                                     if s.tensor == t.name):
            program = _widen(program, t)
    return program


def _accumulates(s: ir.Stmt) -> bool:
    return s.op in ("+", "*") and bool(s.reduction_iters)


def _widen(program: ir.Program, t: ir.Tensor) -> ir.Program:
    if t.role == "local":
        acc = replace(t, dtype=WIDE)
        locals_ = tuple(acc if x.name == t.name else x for x in program.locals)
    else:
        taken = set(program.tensors) | set(program.sizes)
        acc = ir.Tensor(ir.fresh_name(f"{t.name}_acc", taken), WIDE, t.shape, "local", pos=t.pos)
        locals_ = (*program.locals, acc)
    stmts = [_redirect(s, t, acc) for s in program.stmts]
    if t.role == "output":
        writers = [s for s in program.stmts if s.tensor == t.name]
        stmts.append(_copy(program, f"{t.name}_{len(writers)}", t, acc, writers[0].lhs))
        if not _covers(program, writers[0], t):
            first = next(i for i, s in enumerate(program.stmts) if s.tensor == t.name)
            stmts.insert(first, _copy(program, f"{t.name}_widen", acc, t, writers[0].lhs))
    return replace(program, locals=locals_, stmts=tuple(stmts))


def _redirect(s: ir.Stmt, t: ir.Tensor, acc: ir.Tensor) -> ir.Stmt:
    """``s`` writing ``acc`` where it wrote ``t``, reading ``t``'s values from ``acc``."""
    def read_acc(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Read) and e.tensor == t.name:
            return ir.Cast(t.dtype, replace(e, tensor=acc.name, dtype=WIDE), pos=e.pos)
        return e

    rhs = ir.rewrite(s.rhs, read_acc)
    if s.tensor != t.name:
        return s if rhs == s.rhs else replace(s, rhs=rhs)
    if _accumulates(s):
        rhs = ir.rewrite(rhs, _in_wide)
    return replace(s, tensor=acc.name, rhs=rhs)


def _in_wide(e: ir.Expr) -> ir.Expr:
    """One node of an accumulating right-hand side, computed in float32 (children first)."""
    if e.dtype not in NARROW:
        return e
    if isinstance(e, ir.Read | ir.Cast):  # a stored or explicitly rounded value: widen it
        return ir.Cast(WIDE, e, pos=e.pos)
    return replace(e, dtype=WIDE)


def _copy(program: ir.Program, name: str, dst: ir.Tensor, src: ir.Tensor,
          names: tuple[str, ...]) -> ir.Stmt:
    """``dst(i...) = dst.dtype(src(i...))`` over the whole shape."""
    iters = tuple(names) if len(names) == dst.rank else tuple(f"d{k}" for k in range(dst.rank))
    index = tuple(ir.Var("int32", i, "index") for i in iters)
    rhs = ir.Cast(dst.dtype, ir.Read(src.dtype, src.name, index))
    box = " and ".join(f"0 <= {i} < {e}" for i, e in zip(iters, dst.shape, strict=True))
    domain = f"{program.params} -> {{ {name}[{', '.join(iters)}]{' : ' + box if box else ''} }}"
    return ir.Stmt(name, dst.name, iters, iters, "=", False, rhs, domain)


def _covers(program: ir.Program, s: ir.Stmt, t: ir.Tensor) -> bool:
    """Does ``s``, the first statement writing ``t``, set every element of ``t`` (so its
    earlier contents do not matter)? An ``op=!`` does: it fills the tensor's whole box."""
    if s.init:
        return True
    if s.op != "=" or any(isinstance(e, ir.Read) and e.tensor == t.name for e in s.rhs.walk()):
        return False
    lhs = ", ".join(s.lhs)
    written = isl.Set(s.domain).apply(isl.Map(
        f"{program.params} -> {{ {s.name}[{', '.join(s.iters)}] -> [{lhs}] }}"))
    names = [f"d{k}" for k in range(t.rank)]
    box = " and ".join(f"0 <= {n} < {e}" for n, e in zip(names, t.shape, strict=True))
    shape = isl.Set(f"{program.params} -> {{ [{', '.join(names)}]{' : ' + box if box else ''} }}")
    ctx = context(program.sizes)
    return bool(shape.intersect_params(ctx).is_subset(written.intersect_params(ctx)))
