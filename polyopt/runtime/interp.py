"""Reference interpreter: runs an ``ir.Program`` with numpy, statement by statement.

It is the float64 oracle that the tests and ``polyopt run --check`` compare compiled kernels
against, so it is deliberately simple and shares nothing with the code generator:

- each statement's domain is enumerated at the given sizes (bounding box, then membership
  from the isl constraints, in lexicographic order, in slabs of at most ``_SLAB`` box points);
- the right-hand side is evaluated vectorized over the points; float values are held and
  computed in ``dtype`` (float64), integral and bool values in their own dtype (so they wrap
  like C), tensor indices in int64 with floor ``/`` and ``%`` (division by zero gives 0);
- the store applies ``op`` with ``ufunc.at`` in point order, which is the sequential order.

Gathers (and every other read) are checked eagerly, also in an unselected ``?:`` branch, as
the generated code does. A statement that reads its own target (only possible at the LHS
indices) and has reduction indices runs in rounds, one reduction point per LHS element each.

A def with recurrences (value semantics, reference §5.5) runs in rounds too: each round
runs every instance whose reads are final (no instance left that writes their elements),
until none is left; a round that runs nothing means a dependence cycle.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence

import islpy as isl
import numpy as np

from polyopt import dtypes, ir
from polyopt.errors import BoundsError, OptionError, PolyoptError, ShapeError

_SLAB = 1 << 20  # box points enumerated at once
_SET, _PARAM = isl.dim_type.set, isl.dim_type.param


def evaluate(program: ir.Program, inputs: Sequence[np.ndarray], sizes: Mapping[str, int], *,
             dtype: type | np.dtype = np.float64,
             outputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """Run ``program`` on ``inputs``; return its outputs in declared order.

    ``sizes`` binds ``program.sizes`` (a size missing there is read off an input dim whose
    extent is exactly that name). Float tensors are held as ``dtype``; ``outputs`` gives the
    initial contents of the outputs (copied), which ``op=`` without ``!`` accumulates onto.
    """
    fdt = np.dtype(dtype)
    if fdt.kind != "f":
        raise OptionError(f"the interpreter's float dtype must be a float type, not {fdt}")
    if len(inputs) != len(program.inputs):
        raise ShapeError(f"def '{program.name}' takes {len(program.inputs)} inputs, "
                         f"got {len(inputs)}")
    interp = _Interp(program, _bind_sizes(program, inputs, sizes), fdt)
    interp.load(inputs, outputs)
    if program.value_semantics:
        _run_by_value(interp)
        return [interp.arrays[t.name] for t in program.outputs]
    first: set[str] = set()
    for stmt in program.stmts:
        interp.run(stmt, stmt.tensor not in first)
        first.add(stmt.tensor)
    return [interp.arrays[t.name] for t in program.outputs]


def _run_by_value(interp: _Interp) -> None:
    program, sizes = interp.program, interp.sizes
    pending: dict[str, np.ndarray] = {}
    left = {t: np.zeros(interp.arrays[t].size, np.int64) for t in
            {s.tensor for s in program.stmts}}  # instances left to write each element
    for stmt in program.stmts:
        interp.where = stmt.name
        slabs = list(domain_points(stmt.domain, sizes))
        pts = np.concatenate(slabs) if slabs else np.zeros((0, len(stmt.iters)), np.int64)
        pending[stmt.name] = pts
        np.add.at(left[stmt.tensor], interp.flat(interp.arrays[stmt.tensor],
                                                 pts[:, :len(stmt.lhs)]), 1)
        if stmt.init:
            ident = dtypes.identity(stmt.op, interp.tensors[stmt.tensor].dtype)
            arr = interp.arrays[stmt.tensor]
            for lhs in domain_points(_lhs_range(stmt), sizes):
                arr.reshape(-1)[interp.flat(arr, lhs)] = ident
    with np.errstate(all="ignore"):
        while any(len(p) for p in pending.values()):
            progress = False
            for stmt in program.stmts:
                pts = pending[stmt.name]
                if not len(pts):
                    continue
                interp.where = stmt.name
                ready = interp.ready(stmt, pts, left)
                if not ready.any():
                    continue
                run = pts[ready]
                interp.update(stmt, run)
                arr = interp.arrays[stmt.tensor]
                np.subtract.at(left[stmt.tensor], interp.flat(arr, run[:, :len(stmt.lhs)]), 1)
                pending[stmt.name] = pts[~ready]
                progress = True
            if not progress:
                stuck = [n for n, p in pending.items() if len(p)]
                raise PolyoptError(f"def '{program.name}': statements {', '.join(stuck)} wait "
                                   f"on each other (a dependence cycle)")


def _lhs_range(stmt: ir.Stmt) -> str:
    """The LHS elements a ``op=!`` statement initializes: its domain without the
    constraints on its reduction indices, projected onto the LHS (an empty reduction range
    still gives the identity)."""
    nl, nr = len(stmt.lhs), len(stmt.reduction_iters)
    dom = isl.Set(stmt.domain).drop_constraints_involving_dims(_SET, nl, nr)
    return str(dom.project_out(_SET, nl, nr))


def _bind_sizes(program: ir.Program, inputs: Sequence[np.ndarray],
                sizes: Mapping[str, int]) -> dict[str, int]:
    out = {k: int(v) for k, v in sizes.items()}
    for t, x in zip(program.inputs, inputs, strict=True):
        for d, ext in enumerate(t.shape):
            if ext in program.sizes and ext not in out and d < np.ndim(x):
                out[ext] = int(np.shape(x)[d])
    missing = [n for n in program.sizes if n not in out]
    if missing:
        raise ShapeError(f"def '{program.name}': no value for size(s) {', '.join(missing)}")
    return out


def domain_points(domain: str, sizes: Mapping[str, int]) -> Iterator[np.ndarray]:
    """The integer points of isl set text ``domain`` at ``sizes``: (n, dims) int64 arrays,
    in slabs along the first dim, each and all together in lexicographic order."""
    s = isl.Set(domain)
    for i in range(s.dim(_PARAM)):
        name = str(s.get_dim_name(_PARAM, i))
        if name not in sizes:
            raise ShapeError(f"no value for size {name} (domain {domain})")
        s = s.fix_val(_PARAM, i, ir.sizes_val(sizes[name]))
    s = s.project_out(_PARAM, 0, s.dim(_PARAM))
    if s.is_empty():
        return
    d = s.dim(_SET)
    if d == 0:
        yield np.zeros((1, 0), np.int64)
        return
    lo, hi = _box(s, domain)
    pieces = [_piece(b) for b in s.get_basic_sets()]
    step = max(1, _SLAB // int(np.prod(hi[1:] - lo[1:] + 1)))
    for a in range(int(lo[0]), int(hi[0]) + 1, step):
        slo, shi = lo.copy(), hi.copy()
        slo[0], shi[0] = a, min(a + step - 1, int(hi[0]))
        shape = tuple(int(x) for x in shi - slo + 1)
        grid = np.indices(shape, np.int64).reshape(d, -1).T + slo
        mask = np.zeros(len(grid), bool)
        for p in pieces:
            mask |= p(grid, slo, shi, shape)
        yield grid if mask.all() else grid[mask]


def _box(s: isl.Set, domain: str) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = [], []
    for i in range(s.dim(_SET)):
        a, b = s.dim_min_val(i), s.dim_max_val(i)
        if not (a.is_int() and b.is_int()):
            raise PolyoptError(f"domain {domain} is unbounded in dim {i}")
        lo.append(a.to_python())
        hi.append(b.to_python())
    return np.array(lo, np.int64), np.array(hi, np.int64)


Piece = Callable[[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]], np.ndarray]


def _piece(b: isl.BasicSet) -> Piece:
    """The membership test of one basic set, for the points of a slab's box."""
    d = b.dim(_SET)
    if b.dim(isl.dim_type.div) > 0:  # existentially quantified dims: let isl enumerate
        pts: list[list[int]] = []
        isl.Set.from_basic_set(b).foreach_point(lambda p: pts.append(
            [p.get_coordinate_val(_SET, i).to_python() for i in range(d)]))
        arr = np.array(pts, np.int64).reshape(-1, d)

        def marked(grid, slo, shi, shape):
            mask = np.zeros(len(grid), bool)
            sel = arr[(arr[:, 0] >= slo[0]) & (arr[:, 0] <= shi[0])] - slo
            mask[np.ravel_multi_index(tuple(sel.T), shape)] = True
            return mask
        return marked
    cons = [([c.get_coefficient_val(_SET, i).to_python() for i in range(d)],
             c.get_constant_val().to_python(), c.is_equality()) for c in b.get_constraints()]

    def inside(grid, slo, shi, shape):
        mask = np.ones(len(grid), bool)
        for coef, k, eq in cons:
            box = zip(coef, slo.tolist(), shi.tolist(), strict=True)
            ends = [(a * x, a * y) for a, x, y in box]
            lo, hi = k + sum(map(min, ends)), k + sum(map(max, ends))
            if lo >= 0 and (not eq or hi == 0):
                continue  # holds on the whole box
            v = k + sum(a * grid[:, i] for i, a in enumerate(coef) if a)
            mask &= (v == 0) if eq else (v >= 0)
        return mask
    return inside


def _round(x: np.ndarray) -> np.ndarray:
    """C ``round``: half away from zero."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def _pyfunc(f: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    u = np.frompyfunc(f, 1, 1)
    return lambda x: np.asarray(u(x), dtype=x.dtype)


_erf, _erfc = _pyfunc(math.erf), _pyfunc(math.erfc)

BUILTINS: dict[str, Callable[..., np.ndarray]] = {
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atan2": np.arctan2, "atanh": np.arctanh, "cbrt": np.cbrt,
    "ceil": np.ceil, "copysign": np.copysign, "cos": np.cos, "cosh": np.cosh, "erf": _erf,
    "erfc": _erfc, "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x),
    "expm1": np.expm1, "fabs": np.abs, "floor": np.floor, "fmax": np.fmax, "fmin": np.fmin,
    "fdim": lambda a, b: np.where(a > b, a - b, np.where(np.isnan(a) | np.isnan(b), np.nan, 0.0)),
    "fma": lambda a, b, c: a * b + c, "fmod": np.fmod, "hypot": np.hypot, "log": np.log,
    "log10": np.log10, "log1p": np.log1p, "log2": np.log2, "pow": np.power, "round": _round,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "sinh": np.sinh, "sqrt": np.sqrt,
    "tan": np.tan, "tanh": np.tanh, "trunc": np.trunc, "rcbrt": lambda x: 1.0 / np.cbrt(x),
    "rhypot": lambda a, b: 1.0 / np.hypot(a, b), "fdivide": np.divide,
    "normcdf": lambda x: 0.5 * _erfc(-x / math.sqrt(2.0)), "nextafter": np.nextafter,
    "cospi": lambda x: np.cos(math.pi * x), "sinpi": lambda x: np.sin(math.pi * x),
    "norm3d": lambda a, b, c: np.sqrt(a * a + b * b + c * c),
    "rnorm3d": lambda a, b, c: 1.0 / np.sqrt(a * a + b * b + c * c),
    "norm4d": lambda a, b, c, e: np.sqrt(a * a + b * b + c * c + e * e),
    "rnorm4d": lambda a, b, c, e: 1.0 / np.sqrt(a * a + b * b + c * c + e * e),
}

_COMBINE = {"+": np.add, "*": np.multiply, "min": np.minimum, "max": np.maximum}
_COMPARE = {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal,
            "==": np.equal, "!=": np.not_equal}


def _int_op(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer arithmetic: floor ``/``, ``%`` with the divisor's sign, x / 0 = x % 0 = 0."""
    if op in ("/", "%"):
        zero = b == 0
        q = (np.floor_divide if op == "/" else np.mod)(a, np.where(zero, 1, b).astype(b.dtype))
        return np.where(zero, 0, q).astype(a.dtype)
    if op == "min":
        return np.where(b < a, b, a)
    if op == "max":
        return np.where(b > a, b, a)
    return {"+": np.add, "-": np.subtract, "*": np.multiply}[op](a, b)


def convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` as ``dtype``; a float to an integer saturates and maps NaN to 0 (the generated
    code's ``po_cvt``; numpy leaves out-of-range conversions undefined)."""
    if x.dtype.kind != "f" or dtype.kind not in "iu":
        return x.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    wide = x.astype(np.float64)
    out = np.trunc(np.nan_to_num(wide, nan=0.0, posinf=info.max, neginf=info.min))
    low, high = out <= info.min, out >= float(info.max)
    safe = np.where(low | high, 0, out).astype(dtype)
    return np.where(low, info.min, np.where(high, info.max, safe)).astype(dtype)


def _ravel(idx: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Flat positions of in-range (n, rank) index rows."""
    return np.ravel_multi_index(tuple(idx.T), shape) if shape else np.zeros(len(idx), np.intp)


def _groups(lhs: np.ndarray) -> np.ndarray:
    """For lexicographically sorted rows: True where a new LHS tuple starts."""
    new = np.ones(len(lhs), bool)
    new[1:] = np.any(lhs[1:] != lhs[:-1], axis=1)
    return new


class _Interp:
    def __init__(self, program: ir.Program, sizes: dict[str, int], fdt: np.dtype) -> None:
        self.program, self.sizes, self.fdt = program, sizes, fdt
        self.tensors = program.tensors
        self.arrays: dict[str, np.ndarray] = {}
        self.where = ""  # the statement being run, for error messages
        self.cols: dict[str, np.ndarray] = {}
        self.n = 0

    def dt(self, dtype: str) -> np.dtype:
        d = dtypes.DTYPES[dtype]
        return self.fdt if d.is_float else d.np

    def shape(self, t: ir.Tensor) -> tuple[int, ...]:
        return tuple(ir.extent_value(e, self.sizes) for e in t.shape)

    def load(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray] | None) -> None:
        p = self.program
        if outputs is not None and len(outputs) != len(p.outputs):
            raise ShapeError(f"def '{p.name}' has {len(p.outputs)} outputs, got {len(outputs)}")
        given = [*zip(p.inputs, inputs, strict=True)]
        given += [*zip(p.outputs, outputs, strict=True)] if outputs is not None else []
        for t, x in given:
            x = np.asarray(x)
            if x.shape != self.shape(t):
                raise ShapeError(f"{t.role} {t.name}: expected shape {self.shape(t)} "
                                 f"({', '.join(t.shape)}), got {x.shape}")
            self.arrays[t.name] = np.array(x, dtype=self.dt(t.dtype), order="C", copy=True)
        for t in self.tensors.values():
            if t.name not in self.arrays:
                self.arrays[t.name] = np.zeros(self.shape(t), self.dt(t.dtype))

    def run(self, stmt: ir.Stmt, first: bool) -> None:
        self.where = stmt.name
        arr = self.arrays[stmt.tensor]
        nl = len(stmt.lhs)
        if stmt.init:
            ident = dtypes.identity(stmt.op, self.tensors[stmt.tensor].dtype)
            if first:
                arr[...] = ident
            else:
                for pts in domain_points(stmt.domain, self.sizes):
                    arr.reshape(-1)[self.flat(arr, pts[:, :nl])] = ident  # a view
        self_read = any(isinstance(e, ir.Read) and e.tensor == stmt.tensor
                        for e in stmt.rhs.walk())
        with np.errstate(all="ignore"):
            for pts in domain_points(stmt.domain, self.sizes):
                if not (self_read and stmt.reduction_iters):
                    self.update(stmt, pts)
                    continue
                new = _groups(pts[:, :nl])
                rank = np.arange(len(pts)) - np.flatnonzero(new)[np.cumsum(new) - 1]
                for r in range(int(rank.max(initial=-1)) + 1):
                    self.update(stmt, pts[rank == r])

    def ready(self, stmt: ir.Stmt, pts: np.ndarray, left: dict[str, np.ndarray]) -> np.ndarray:
        """Which instances at ``pts`` read only final elements (out-of-range reads count
        as ready: running them raises the bounds error)."""
        self.cols = {name: pts[:, k] for k, name in enumerate(stmt.iters)}
        self.n = len(pts)
        ok = np.ones(len(pts), bool)
        for e in stmt.rhs.walk():
            if not isinstance(e, ir.Read) or e.tensor not in left:
                continue
            shape = self.arrays[e.tensor].shape
            idx = np.array([self.index(x) for x in e.indices], np.int64).T.reshape(self.n, -1)
            inside = np.all((idx >= 0) & (idx < np.array(shape, np.int64)), axis=1)
            safe = np.where(inside[:, None], idx, 0)
            ok &= ~inside | (left[e.tensor][_ravel(safe, shape)] == 0)
        return ok

    def flat(self, arr: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Flat positions of the (n, rank) LHS index rows in ``arr``, range-checked."""
        if np.any((idx < 0) | (idx >= np.array(arr.shape, np.int64))):
            raise BoundsError(f"statement {self.where} writes outside its tensor {arr.shape}")
        return _ravel(idx, arr.shape)

    def update(self, stmt: ir.Stmt, pts: np.ndarray) -> None:
        if not len(pts):
            return
        self.cols = {name: pts[:, k] for k, name in enumerate(stmt.iters)}
        self.n = len(pts)
        arr = self.arrays[stmt.tensor]
        vals = convert(self.eval(stmt.rhs), arr.dtype)
        flat = self.flat(arr, pts[:, :len(stmt.lhs)])
        view = arr.reshape(-1)  # a view: every array here is C-contiguous
        if stmt.op == "=":
            last = np.append(_groups(pts[:, :len(stmt.lhs)])[1:], True)
            view[flat[last]] = vals[last]
        else:
            _COMBINE[stmt.op].at(view, flat, vals)

    def eval(self, e: ir.Expr) -> np.ndarray:
        """``e`` at every point, as an (n,) array of dtype ``self.dt(e.dtype)``."""
        out = getattr(self, f"_{type(e).__name__.lower()}")(e)
        return np.broadcast_to(convert(np.asarray(out), self.dt(e.dtype)), (self.n,))

    def _const(self, e: ir.Const) -> np.ndarray:
        return np.full(self.n, np.array(e.value).astype(self.dt(e.dtype)))

    def _var(self, e: ir.Var) -> np.ndarray:
        if e.kind == "index":
            return self.cols[e.name]
        return np.full(self.n, self.sizes[e.name], np.int64)

    def index(self, e: ir.Expr) -> np.ndarray:
        """An integral index expression in int64 (no wrapping; floor ``/`` and ``%``)."""
        if isinstance(e, ir.Const):
            return np.full(self.n, int(e.value), np.int64)
        if isinstance(e, ir.Var):
            return np.asarray(self._var(e), np.int64)
        if isinstance(e, ir.Cast) and not dtypes.DTYPES[e.dtype].is_float:
            return self.index(e.x)
        if isinstance(e, ir.Unary) and e.op == "-":
            return -self.index(e.x)
        if isinstance(e, ir.Binary) and e.op in ("+", "-", "*", "/", "%", "min", "max"):
            return _int_op(e.op, self.index(e.a), self.index(e.b))
        return convert(self.eval(e), np.dtype(np.int64))

    def _read(self, e: ir.Read) -> np.ndarray:
        arr = self.arrays[e.tensor]
        idx = np.array([self.index(x) for x in e.indices], np.int64).T.reshape(self.n, -1)
        ext = np.array(arr.shape, np.int64)
        inside = np.all((idx >= 0) & (idx < ext), axis=1)
        if e.pad is None and not inside.all():
            bad = idx[np.argmin(inside)]
            raise BoundsError(f"{e} in statement {self.where}: index {tuple(bad.tolist())} "
                              f"is outside {e.tensor}{tuple(arr.shape)}")
        if e.pad is None:
            return arr.reshape(-1)[_ravel(idx, arr.shape)]
        lo = np.array([-ir.extent_value(p.before, self.sizes) for p in e.pad], np.int64)
        hi = ext + np.array([ir.extent_value(p.after, self.sizes) for p in e.pad], np.int64)
        if np.any((idx < lo) | (idx >= hi)):
            raise BoundsError(f"{e} in statement {self.where}: index beyond the padding")
        out = np.full(self.n, e.fill, arr.dtype)
        if arr.size:
            safe = np.where(inside[:, None], idx, 0)
            out[inside] = arr.reshape(-1)[_ravel(safe, arr.shape)][inside]
        return out

    def _unary(self, e: ir.Unary) -> np.ndarray:
        x = self.eval(e.x)
        if e.op == "!":
            return ~x.astype(bool)
        return x.astype(bool) if e.dtype == "bool" else np.negative(x.astype(self.dt(e.dtype)))

    def _binary(self, e: ir.Binary) -> np.ndarray:
        a, b = self.eval(e.a), self.eval(e.b)
        if e.op in ("&&", "||"):
            return (np.logical_and if e.op == "&&" else np.logical_or)(a, b)
        if e.op in _COMPARE:
            t = self.dt(dtypes.promote(e.a.dtype, e.b.dtype))
            return _COMPARE[e.op](a.astype(t), b.astype(t))
        t = self.dt(e.dtype)
        a, b = a.astype(t), b.astype(t)
        if t.kind == "f":
            if e.op == "/":
                return a / b
            if e.op == "%":
                return a - np.floor(a / b) * b
            if e.op in ("min", "max"):  # NaN propagates, as in the generated code
                return (np.minimum if e.op == "min" else np.maximum)(a, b)
            return _int_op(e.op, a, b)  # + - * work alike on floats
        if t.kind == "b":
            return _int_op(e.op, a.astype(np.int64), b.astype(np.int64)).astype(bool)
        return _int_op(e.op, a, b)

    def _select(self, e: ir.Select) -> np.ndarray:
        return np.where(self.eval(e.cond).astype(bool), self.eval(e.a), self.eval(e.b))

    def _cast(self, e: ir.Cast) -> np.ndarray:
        return convert(self.eval(e.x), self.dt(e.dtype))

    def _call(self, e: ir.Call) -> np.ndarray:
        fn = BUILTINS.get(e.fn)
        if fn is None:
            raise NotImplementedError(f"builtin {e.fn!r} is not supported by the interpreter")
        return fn(*(self.eval(a).astype(self.fdt) for a in e.args))
