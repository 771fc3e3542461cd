"""What the derivation needs to know of the forward program: versions, normal forms, boxes.

A tensor written by several statements holds a *version* after each (``Version(T, k)``: after
its k-th writer; k = -1 is an input). A read in statement i sees the version left by the last
writer of its tensor before i (a self-read, the one before i's own write).

Each statement is brought to one of three normal forms:

- ``map``: ``T_k(lhs) = R`` with no reduction (``=``, and ``op=!`` or ``op=`` without
  reduction indices, which combine with ``T_{k-1}(lhs)`` through an explicit read);
- ``sum``: ``T_k(lhs) = [T_{k-1}(lhs) +] sum R`` (``+=!``, or ``+=`` which passes ``T_{k-1}``
  through);
- ``max`` / ``min``: ``T_k(lhs) = max R`` over the reduction (``max=!``, ``min=!``).

Product reductions, ``max=``/``min=`` combining a reduction with an earlier value and a first
write that reads the caller's buffer are refused. A later write over part of a tensor passes
the gradient of the elements it leaves to the earlier version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl

from polyopt import dtypes, ir
from polyopt.autodiff.affine import Range, ivar, set_range
from polyopt.errors import NotDifferentiableError
from polyopt.poly import affine_text


@dataclass(frozen=True)
class Version:
    tensor: str
    k: int  # -1: the input itself


@dataclass(frozen=True)
class Normal:
    kind: str  # "map" | "sum" | "max" | "min"
    rhs: ir.Expr
    passthrough: bool  # T_{k-1} reaches T_k unchanged (``+=`` over a reduction)


class Forward:
    def __init__(self, program: ir.Program, context: isl.Set) -> None:
        self.p = program
        self.context = context
        self.writers: dict[str, list[int]] = {}
        for i, s in enumerate(program.stmts):
            self.writers.setdefault(s.tensor, []).append(i)
        self.boxes: dict[int, dict[str, Range]] = {}

    def written(self, i: int) -> Version:
        s = self.p.stmts[i]
        return Version(s.tensor, self.writers[s.tensor].index(i))

    def seen(self, i: int, tensor: str) -> Version:
        """The version of ``tensor`` that a read in statement ``i`` sees."""
        return Version(tensor, sum(1 for j in self.writers.get(tensor, ()) if j < i) - 1)

    def final(self, tensor: str) -> int:
        return len(self.writers.get(tensor, ())) - 1

    def where(self, i: int) -> str:
        s = self.p.stmts[i]
        return f"statement {s.name} of def '{self.p.name}'"

    def active(self, wrt: set[str]) -> set[Version]:
        """Versions that depend on a differentiated input through floating-point values."""
        out = {Version(t, -1) for t in wrt}
        for i, s in enumerate(self.p.stmts):
            if not dtypes.get(self.p.tensors[s.tensor].dtype).is_float:
                continue
            reads = [r for r in s.rhs.walk() if isinstance(r, ir.Read)]
            if any(self.seen(i, r.tensor) in out for r in reads) or (
                    not s.init and s.op != "=" and self.seen(i, s.tensor) in out):
                out.add(self.written(i))
        return out

    def normal(self, i: int) -> Normal:
        s = self.p.stmts[i]
        red = bool(s.reduction_iters)
        op = "=" if s.op == "=" else f"{s.op}={'!' if s.init else ''}"
        what = f"{self.where(i)} ({s.tensor}(...) {op} ...)"
        if s.op == "=" or (s.init and not red):
            return Normal("map", s.rhs, False)
        if s.init:
            if s.op == "+":
                return Normal("sum", s.rhs, False)
            if s.op in ("max", "min"):
                return Normal(s.op, s.rhs, False)
            raise NotDifferentiableError(f"{what}: a product reduction is not differentiable "
                                         "as written (its gradient needs the product of the "
                                         "other factors); write it as exp of a sum of logs")
        if self.writers[s.tensor][0] == i:
            raise NotDifferentiableError(f"{what}: '{op}' on the first write reads the "
                                         "caller's buffer, which the gradient cannot see")
        prev = ir.Read(self.p.tensors[s.tensor].dtype, s.tensor, tuple(map(ivar, s.lhs)))
        if not red:
            fn = {"+": "+", "*": "*", "max": "max", "min": "min"}[s.op]
            return Normal("map", ir.Binary(s.rhs.dtype, fn, prev, s.rhs), False)
        if s.op == "+":
            return Normal("sum", s.rhs, True)
        raise NotDifferentiableError(f"{what}: '{op}' over a reduction that combines with an "
                                     "earlier value is not differentiable as written; reduce "
                                     "into a new tensor with '" + s.op + "=!' first")

    def covers(self, i: int) -> bool:
        """Does statement ``i`` write every element of its tensor?"""
        s = self.p.stmts[i]
        n, nred = len(s.lhs), len(s.reduction_iters)
        proj = self.domain(i).project_out(isl.dim_type.set, n, nred).set_tuple_name(s.name)
        cons = " and ".join(f"0 <= {v} < {e}" for v, e in
                            zip(s.lhs, self.p.tensors[s.tensor].shape, strict=True))
        box = isl.Set(f"{self.p.params} -> {{ {s.name}[{', '.join(s.lhs)}] : "
                      f"{cons or '0 = 0'} }}").intersect_params(self.context)
        return bool(proj.is_equal(box))

    def domain(self, i: int) -> isl.Set:
        return isl.Set(self.p.stmts[i].domain).intersect_params(self.context)

    def box(self, i: int) -> dict[str, Range]:
        """Each iterator's range ``[lo, hi)``, affine in the sizes and the iterators before it
        (``0 <= r_j < i + 1``); the domain must be exactly these ranges."""
        if i in self.boxes:
            return self.boxes[i]
        s, dom = self.p.stmts[i], self.domain(i)
        out: dict[str, Range] = {}
        iters = set(s.iters)

        def index(e: ir.Expr) -> ir.Expr:
            if isinstance(e, ir.Var) and e.name in iters:
                return ivar(e.name)
            return e

        nparam = dom.dim(isl.dim_type.param)
        for k, v in enumerate(s.iters):
            part = dom.move_dims(isl.dim_type.param, nparam, isl.dim_type.set, 0, k)
            part = part.project_out(isl.dim_type.set, 1, len(s.iters) - k - 1)
            lo, hi = set_range(part, self.context, f"{v} in {s.name}")
            out[v] = (ir.rewrite(lo, index), ir.rewrite(hi, index))
        self._check_box(i, dom, out)
        self.boxes[i] = out
        return out

    def is_box(self, i: int) -> bool:
        """Are the ranges of statement ``i`` independent of its iterators?"""
        iters = set(self.p.stmts[i].iters)
        return not any(isinstance(x, ir.Var) and x.name in iters
                       for lo, hi in self.box(i).values() for x in (*lo.walk(), *hi.walk()))

    def _check_box(self, i: int, dom: isl.Set, box: Mapping[str, Range]) -> None:
        s = self.p.stmts[i]
        cons = " and ".join(f"{affine_text(lo)} <= {v} < {affine_text(hi)}"
                            for v, (lo, hi) in box.items())
        rect = isl.Set(f"{self.p.params} -> {{ {s.name}[{', '.join(s.iters)}] : "
                       f"{cons or '0 = 0'} }}").intersect_params(self.context)
        if not rect.is_equal(dom):
            raise NotDifferentiableError(
                f"{self.where(i)} runs over a domain ({s.domain}) that is not a range per "
                "iterator (affine in the sizes and earlier iterators); polyopt.grad cannot "
                "differentiate it")
