"""Transposing copies: ``for r { for v (vectorize) { T[.., v] = U[.., r] } }`` printed as
blocks of ``lanes x lanes`` elements transposed in vector registers.

Such a nest (a blocked output's copy back, ``O(f, h, w) = O_pack(f/32, h, w, f%32)``; a
cache-tiled ``B(j, i) = A(i, j)``) reads each vector's lanes one element apart in memory
at a stride: compilers print it as one scalar load and insert per lane. Here each block
is ``lanes`` contiguous vector loads along ``r``, a transpose of log2(lanes) rounds of
two-vector shuffles, and ``lanes`` contiguous vector stores along ``v``. Blocks are as
wide as the machine's vectors, or narrower for fewer rows or columns (8 x 8 for a
14-wide copy); the last block along each side ends flush with the tile, overlapping the
one before it, so no element is left to scalar code.

Two printers: ``NestEmitter`` when ``r`` is a nest of loops whose values the source reads as
one contiguous run and the constant strides allow it (packing a 3x3 filter's weights along
``c, kh, kw``: one C loop over the flattened rows); ``Emitter`` otherwise, with its blocks
unrolled, so indices that divide (``f / 32``, ``f % 32``) stay exact per block.

They apply only where that is exact: a plain copy (``=`` of one affine read of the same
type, no check: a padded read only in its interior piece, where every load lands inside
its tensor), a source contiguous along the rows and a target along ``v``,
and whole tiles (constant trip counts; other instances print plain loops).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import islpy as isl

from polyopt import ir
from polyopt.codegen.exprs import AstExprPrinter, ctype
from polyopt.codegen.linear import LANE, Lin, add, ast_lin, index_lin, substitute, text
from polyopt.codegen.microkernel import unit_dims, vector_type
from polyopt.codegen.tilematch import only_for, only_user, trip_text
from polyopt.dtypes import DTYPES
from polyopt.poly.model import PolyStmt
from polyopt.schedules.limits import CAPS
from polyopt.schedules.marks import Marks, Tag

# Blocks printed per tile, at most (each is 2 x lanes loads and stores).
MAX_BLOCKS = CAPS.max_transpose_blocks
# Smaller blocks are left to plain loops (two rounds of shuffles save little).
MIN_LANES = CAPS.min_transpose_lanes
# Copies of this many blocks or more loop over each row's blocks (``Emitter._rolled``); fewer
# stay unrolled (gcc's time is small, and two rolled blocks ran 2% slower for conv_1x7).
ROLLED_BLOCKS = 4
# The column of a block in the rolled loop over a row's blocks (``Emitter._rolled``).
_COLUMN = "@column"


@dataclass(frozen=True)
class Transpose:
    stmt: PolyStmt
    r: isl.AstNode  # the loop the source is contiguous along (the innermost of ``rows``)
    v: isl.AstNode  # the vectorized loop the target is contiguous along
    call: isl.AstExpr  # the statement instance
    args: tuple[isl.AstExpr, ...]
    rows: int
    cols: int
    outer: tuple[isl.AstNode, ...] = ()  # loops above ``r`` whose rows are contiguous too


def match(r: isl.AstNode, tags: dict[str, Marks], trips: dict[str, int | None],
          loop: str, stmt_of: Callable[[str], PolyStmt]) -> Transpose | None:
    """The transposing copy rooted at for-loop ``r`` (named ``loop``), or None: ``r`` and
    any untagged loops right inside it, then a vectorized loop over one plain copy."""
    if tags.get(loop, frozenset()) - {Tag.SEPARATE} or r.for_is_degenerate():
        return None
    rows = [r]
    while True:
        v, v_name = only_for(rows[-1].for_get_body())
        if v is None or v.for_is_degenerate():
            return None
        if Tag.VECTORIZE in tags.get(v_name, frozenset()):
            break
        if tags.get(v_name, frozenset()) - {Tag.SEPARATE}:
            return None
        rows.append(v)
    call = only_user(v.for_get_body())
    if call is None:
        return None
    s = stmt_of(call.get_op_arg(0).get_id().get_name())
    rhs = s.stmt.rhs
    # An unguarded piece of a padded read is its interior (``poly/model.py``): plain loads.
    if (s.kind != "update" or s.stmt.op != "=" or s.guarded or not isinstance(rhs, ir.Read)
            or rhs.tensor == s.stmt.tensor or not all(x.affine for x in s.reads)):
        return None
    n_rows, cols = (trips.get(loop), trips.get(v_name)) if len(rows) == 1 else (0, 0)
    if n_rows is None or cols is None:
        return None
    args = tuple(call.get_op_arg(i + 1) for i in range(call.get_op_n_arg() - 1))
    return Transpose(s, rows[-1], v, call, args, n_rows, cols, tuple(rows[:-1]))


class Emitter:
    """Prints one transposing copy; ``sp`` is the statement's printer (flat addresses)."""

    def __init__(self, tp: Transpose, sp: Any, ast_expr: AstExprPrinter, dtype: str,
                 vector_bytes: int) -> None:
        self.tp, self.sp, self.ast_expr, self.dtype = tp, sp, ast_expr, dtype
        most = min(vector_bytes // DTYPES[dtype].np.itemsize, tp.rows, tp.cols)
        self.lanes = 1 << (most.bit_length() - 1) if most > 0 else 0  # a power of two
        self.r_it, self.v_it = (n.for_get_iterator().get_id().get_name()
                                for n in (tp.r, tp.v))

    def full_tile(self) -> str | None:
        r, v = trip_text(self.tp.r, self.ast_expr), trip_text(self.tp.v, self.ast_expr)
        if r is None or v is None:
            return None
        return f"{r} == {self.tp.rows}L && {v} == {self.tp.cols}L"

    def n_blocks(self) -> int:
        """How many blocks ``blocks`` gives, counted without making them: a copy of
        131072 x 131072 would have listed 67 million (and run out of memory) only to be
        refused for having more than ``MAX_BLOCKS``."""
        return -(-self.tp.rows // self.lanes) * -(-self.tp.cols // self.lanes)

    def starts(self, n: int) -> list[int]:
        """Block origins along a side of ``n``: every ``lanes``, and a last block flush with
        the end that overlaps the one before (it copies the same values again)."""
        out = list(range(0, n - self.lanes + 1, self.lanes))
        return [*out, n - self.lanes] if n % self.lanes else out

    def blocks(self) -> list[tuple[int, int]]:
        """Block origins, row-major."""
        return [(i, j) for i in self.starts(self.tp.rows) for j in self.starts(self.tp.cols)]

    def lines(self, pad: str) -> list[str] | None:
        """The whole blocks (None when the copy does not fit the pattern)."""
        tp, lanes = self.tp, self.lanes
        if not _vectors_fit(tp, self.dtype, lanes) or not 0 < self.n_blocks() <= MAX_BLOCKS:
            return None
        blocks = self.blocks()
        args = [ast_lin(a) for a in tp.args]
        bases = [ast_lin(n.for_get_init()) for n in (tp.r, tp.v)]
        if any(a is None for a in args) or any(b is None or self.r_it in b for b in bases):
            return None
        self.args = dict(zip(tp.stmt.iters, args, strict=True))
        self.bases = bases
        typedef, vec = vector_type(self.dtype, lanes)
        out = [f"{pad}{{ /* transposed copy {tp.stmt.name}: {tp.rows} x {tp.cols} */",
               f"{pad}  {typedef}", f"{pad}  {vec} po_t[{lanes}];"]
        rolled = len(self.starts(tp.cols)) > 1 and len(blocks) >= ROLLED_BLOCKS
        body = self._rolled(pad + "  ") if rolled else None
        for i, j in blocks if body is None else []:
            block = self._block(i, {"": j}, pad + "  ")
            if block is None:
                return None
            out += block
        return [*out, *(body or []), f"{pad}}}"]

    def _rolled(self, pad: str) -> list[str] | None:
        """The blocks of each row as a C loop over the columns (None when an index along
        them divides, which only unrolled blocks keep exact). Unrolled, each block inlines
        its transpose: 14 blocks of a 32 x 112 copy took 0.5 s of gcc's 0.7 s."""
        cols, lanes = self.tp.cols, self.lanes
        inner = pad + "  "
        out = [f"{pad}for (long po_j = 0; po_j < {cols}L; po_j += {lanes}L) {{",
               f"{inner}const long po_c = po_j + {lanes}L <= {cols}L ? po_j : "
               f"{cols - lanes}L;"]
        for i in self.starts(self.tp.rows):
            block = self._block(i, {_COLUMN: 1}, inner)
            if block is None:
                return None
            out += block
        return [*out, f"{pad}}}"]

    def _block(self, i: int, j: Lin, pad: str) -> list[str] | None:
        """One block at row ``i`` and column ``j`` (a number, or the rolled loop's)."""
        s = self.tp.stmt.stmt
        read = s.rhs
        assert isinstance(read, ir.Read)
        loads, stores = [], []
        for k in range(self.lanes):
            src = self._dims(read.tensor, read.indices, {"": i, LANE: 1}, add(j, {"": k}))
            dst = self._dims(s.tensor, tuple(ir.Var("int32", x, "index") for x in s.lhs),
                             {"": i + k}, add(j, {LANE: 1}))
            if src is None or dst is None:
                return None
            loads.append(f"{pad}__builtin_memcpy(&po_t[{k}], {self._address(read.tensor, src)}, "
                         f"sizeof po_t[{k}]);")
            stores.append(f"{pad}__builtin_memcpy({self._address(s.tensor, dst)}, &po_t[{k}], "
                          f"sizeof po_t[{k}]);")
        return [*loads, f"{pad}{helper_name(self.dtype, self.lanes)}(po_t);", *stores]

    def _ident(self, name: str) -> str:
        return "po_c" if name == _COLUMN else self.ast_expr.ident(name)

    def _dims(self, tensor: str, indices: tuple[ir.Expr, ...], r: Lin,
              v: Lin) -> list[Lin] | None:
        """The index at row offset ``r`` and column offset ``v`` when its lanes are
        contiguous: along the last dimension of extent above one, and nowhere else."""
        r0, v0 = self.bases
        values = {self.r_it: add(r0, r), self.v_it: add(v0, v)}  # type: ignore[arg-type]
        env = {it: substitute(a, values) for it, a in self.args.items()}  # type: ignore[arg-type]
        found = [index_lin(ix, env, self.lanes) for ix in indices]
        dims = [d for d in found if d is not None]
        last = len(dims) - 1 - unit_dims(self.sp, tensor)
        if len(dims) != len(found) or last < 0:
            return None
        if any(LANE in d for n, d in enumerate(dims) if n != last) or dims[last].get(LANE) != 1:
            return None
        return dims

    def _address(self, tensor: str, dims: list[Lin]) -> str:
        t = self.sp.ctx.poly.program.tensors[tensor]
        index = [text(d, self._ident) for d in dims]
        return f"&{self.sp.ref(t)}[{self.sp.flat(t, index)}]"


class NestEmitter:
    """A copy over a nest of row loops that the source reads as one contiguous run and the
    target writes a vector apart (packing ``Wt(f, c, kh, kw)`` into
    ``Wt_pack(f/16, c, kh, kw, f%16)``: the rows ``c, kh, kw`` flatten to one index ``q``):
    one transpose per ``lanes`` values of ``q`` and of the vector loop, in C loops whose
    last block ends flush with the end. Needs a specialized kernel (constant strides)."""

    def __init__(self, tp: Transpose, sp: Any, ast_expr: AstExprPrinter, dtype: str,
                 vector_bytes: int) -> None:
        self.tp, self.sp, self.ast_expr, self.dtype = tp, sp, ast_expr, dtype
        self.lanes = vector_bytes // DTYPES[dtype].np.itemsize
        self.loops = (*tp.outer, tp.r)

    def full_tile(self) -> str:
        return ""  # constant trips: every instance is whole

    def lines(self, pad: str) -> list[str] | None:
        tp, lanes = self.tp, self.lanes
        trips = [_const_trip(n) for n in (*self.loops, tp.v)]
        if None in trips or not _vectors_fit(tp, self.dtype, lanes):
            return None
        sizes = [n for n in trips if n is not None]
        rows, cols = math.prod(sizes[:-1]), sizes[-1]
        read = tp.stmt.stmt.rhs
        assert isinstance(read, ir.Read)
        lhs = tuple(ir.Var("int32", x, "index") for x in tp.stmt.stmt.lhs)
        src, dst = self._flat(read.tensor, read.indices), self._flat(tp.stmt.stmt.tensor, lhs)
        its = [n.for_get_iterator().get_id().get_name() for n in (*self.loops, tp.v)]
        s_row, d_row = (_row_stride(f, its[:-1], sizes[:-1]) if f else None for f in (src, dst))
        if (src is None or dst is None or s_row != 1 or d_row is None or dst.get(its[-1]) != 1
                or not src.get(its[-1]) or rows < lanes or cols < lanes):
            return None
        inits = [ast_lin(n.for_get_init()) for n in (*self.loops, tp.v)]
        if any(i is None or set(i) & set(its) for i in inits):
            return None
        at = dict(zip(its, inits, strict=True))
        bases = [text(substitute(f, at), self.ast_expr.ident)  # type: ignore[arg-type]
                 for f in (src, dst)]
        return self._print(pad, rows, cols, bases, (src.get(its[-1], 0), d_row), read.tensor)

    def _print(self, pad: str, rows: int, cols: int, bases: list[str],
               strides: tuple[int, int], source: str) -> list[str]:
        tp, lanes = self.tp, self.lanes
        tensors = self.sp.ctx.poly.program.tensors
        s_ref, d_ref = (self.sp.ref(tensors[x]) for x in (source, tp.stmt.stmt.tensor))
        typedef, vec = vector_type(self.dtype, lanes)
        s_col, d_row = strides
        loads = [f"__builtin_memcpy(&po_t[{k}], &{s_ref}[{bases[0]} + (po_c + {k}L) * "
                 f"{s_col}L + po_r], sizeof po_t[{k}]);" for k in range(lanes)]
        stores = [f"__builtin_memcpy(&{d_ref}[{bases[1]} + (po_r + {k}L) * {d_row}L + po_c], "
                  f"&po_t[{k}], sizeof po_t[{k}]);" for k in range(lanes)]
        inner = pad + "      "
        row_loop = [f"for (long po_i = 0; po_i < {rows}L; po_i += {lanes}L) {{",
                    f"  const long po_r = po_i + {lanes}L <= {rows}L ? po_i : {rows - lanes}L;"]
        col_loop = [f"for (long po_j = 0; po_j < {cols}L; po_j += {lanes}L) {{",
                    f"  const long po_c = po_j + {lanes}L <= {cols}L ? po_j : {cols - lanes}L;"]
        # The column groups outside: a pass reads ``lanes`` source rows whole (each a
        # stream the prefetchers follow), not every column's row at once. ResNet-50 layer
        # 23's weights in 32-channel blocks (4608 x 32): 32 streams ran its call 1.14x slower.
        return [f"{pad}{{ /* transposed copy {tp.stmt.name}: {rows} x {cols} */",
                f"{pad}  {typedef}", f"{pad}  {vec} po_t[{lanes}];",
                f"{pad}  {col_loop[0]}", f"{pad}  {col_loop[1]}",
                f"{pad}    {row_loop[0]}", f"{pad}    {row_loop[1]}",
                *(inner + x for x in loads),
                f"{inner}{helper_name(self.dtype, lanes)}(po_t);",
                *(inner + x for x in stores), f"{pad}    }}", f"{pad}  }}", f"{pad}}}"]

    def _flat(self, tensor: str, indices: tuple[ir.Expr, ...]) -> Lin | None:
        """The element offset of ``tensor[indices]`` as a linear form of the AST
        iterators (a specialized kernel's extents are constants)."""
        ctx = self.sp.ctx
        t = ctx.poly.program.tensors[tensor]
        if ctx.values is None or tensor in ctx.contracted:
            return None
        args = [ast_lin(a) for a in self.tp.args]
        if any(a is None for a in args):
            return None
        env = dict(zip(self.tp.stmt.iters, args, strict=True))
        flat: Lin = {"": 0}
        stride = 1
        for d in reversed(range(t.rank)):
            dim = index_lin(indices[d], env)  # type: ignore[arg-type]
            if dim is None:
                return None
            flat = add(flat, {k: v * stride for k, v in dim.items()})
            stride *= ctx.values[f"{tensor}.{d}"]
        return flat


def _vectors_fit(tp: Transpose, dtype: str, lanes: int) -> bool:
    """Whether the copy moves ``dtype`` unchanged, in 4- or 8-byte elements, ``lanes`` of
    them (at least ``MIN_LANES``) to a vector."""
    return (lanes >= MIN_LANES and DTYPES[dtype].np.itemsize in (4, 8)
            and tp.stmt.stmt.rhs.dtype == dtype)


def _row_stride(flat: Lin, its: list[str], trips: list[int]) -> int | None:
    """The stride of the flattened rows when loops ``its`` (outermost first, ``trips``
    values each) step through ``flat`` as one index, else None."""
    stride = flat.get(its[-1], 0)
    expect = stride
    for it, trip in zip(reversed(its), reversed(trips), strict=True):
        if flat.get(it, 0) != expect or not expect:
            return None
        expect *= trip
    return stride


def _const_trip(loop: isl.AstNode) -> int | None:
    """The trip count of ``for (it = a; it <= b; it += 1)`` with constant ``a`` and ``b``."""
    init = ast_lin(loop.for_get_init())
    cond = loop.for_get_cond()
    if (init is None or set(init) - {""} or ast_lin(loop.for_get_inc()) != {"": 1}
            or cond.get_type() != isl.ast_expr_type.op):
        return None
    op = cond.get_op_type()
    bound = ast_lin(cond.get_op_arg(1))
    if op not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt) or bound is None or \
            set(bound) - {""}:
        return None
    return bound.get("", 0) - init.get("", 0) + (op == isl.ast_expr_op_type.le)


def helper_name(dtype: str, lanes: int) -> str:
    return f"po_transpose_{lanes}_{dtype}"


def helper(dtype: str, lanes: int) -> str:
    """C for ``helper_name``: transposes ``lanes`` vectors in place, as a square matrix.

    Round ``d`` (lanes/2 down to 1) swaps the off-diagonal ``d x d`` blocks of each
    ``2d x 2d`` block; each output vector is one two-vector shuffle. Compilers without
    ``__builtin_shufflevector`` (GCC before 12) get a scalar loop."""
    typedef, vec = vector_type(dtype, lanes)
    c = ctype(dtype)
    name = helper_name(dtype, lanes)
    rounds = []
    names = [f"r[{i}]" for i in range(lanes)]
    d, n = lanes // 2, 0
    while d >= 1:
        for i in (i for i in range(lanes) if not i & d):
            lo = [j if not j & d else lanes + j - d for j in range(lanes)]
            hi = [j + d if not j & d else lanes + j for j in range(lanes)]
            for dst, idx in ((i, lo), (i + d, hi)):
                rounds.append(f"  {vec} s{n}_{dst} = __builtin_shufflevector({names[i]}, "
                              f"{names[i + d]}, {', '.join(map(str, idx))});")
        names = [f"s{n}_{i}" for i in range(lanes)]
        d, n = d // 2, n + 1
    copy_back = [f"  r[{i}] = {x};" for i, x in enumerate(names)]
    scalar = [f"  {c} m[{lanes}][{lanes}], t[{lanes}][{lanes}];",
              "  __builtin_memcpy(m, r, sizeof m);",
              f"  for (int i = 0; i < {lanes}; i++) for (int j = 0; j < {lanes}; j++) "
              "t[i][j] = m[j][i];",
              "  __builtin_memcpy(r, t, sizeof t);"]
    return "\n".join([typedef, f"static inline void {name}({vec} *r) {{",
                      "#ifdef PO_HAS_SHUFFLEVECTOR", *rounds, *copy_back, "#else", *scalar,
                      "#endif", "}"])


# Which compilers have ``__builtin_shufflevector`` (clang; GCC from 12);
# ``-DPO_NO_SHUFFLEVECTOR`` takes the scalar path (the tests check both).
SHUFFLE_CHECK = """#if defined(__has_builtin) && !defined(PO_NO_SHUFFLEVECTOR)
#if __has_builtin(__builtin_shufflevector)
#define PO_HAS_SHUFFLEVECTOR 1
#endif
#endif"""
