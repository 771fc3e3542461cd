"""``einsum``: a drop-in for ``numpy.einsum``, computed by compiled TC kernels.

Every calling form numpy accepts (``polyopt.subscripts.args``) and every dtype numpy computes
but object: bool, integers, float16/32/64, longdouble (C's ``long double``) and
complex64/128/clongdouble. The subscripts are parsed and checked as numpy does them:
implicit and explicit output, repeated subscripts in one operand (diagonals), ``...``
broadcasting, and size-1 dims that broadcast against larger ones. The contraction then
becomes one TC definition in a canonical form (``polyopt.subscripts.tc``; a complex one is
lowered to real parts there); for ``ij,jk->ik`` on float32 operands of shapes (2,3), (3,4)::

    def einsum(float32(N0,N1) T0, float32(N1,N2) T1) -> (O) { O(a_,c_) +=! T0(a_,b_) * T1(b_,c_) }

with sizes ``{N0: 2, N1: 3, N2: 4}``. ``polyopt.compile`` turns the text into a kernel. A
problem of at most ``GENERIC_POINTS`` iteration points gets one size-generic kernel per
definition, which serves every such shape: compiling (a C compiler run, ~0.2 s) would
dwarf the work of small contractions, and numpy's users call einsum on many small shapes.
Larger problems get a kernel specialized to their sizes (scheduled, faster code), cached
per shape. ``contraction`` derives everything from the call's metadata (subscripts,
shapes, dtypes, strides, options), never from the data, so a caller may memoize it.

The result is laid out as ``order=`` says (``polyopt.subscripts.layout``): the kernel writes its
dims in that memory order. One operand summed over nothing is returned as a view, as numpy
does. numpy only casts the operands and copies results; it never computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from polyopt import api, dtypes
from polyopt.errors import (
    InputTypeError,
    OptionTypeError,
    PolyoptError,
    ShapeError,
)
from polyopt.subscripts.args import Casting, EinsumArgs, parse_args
from polyopt.subscripts.fused import fused_text
from polyopt.subscripts.labels import spec
from polyopt.subscripts.layout import memory_order, memory_views, single_view
from polyopt.subscripts.path import ContractionPath, contraction_path
from polyopt.subscripts.tc import Form, kernel_form, points, tc_text

__all__ = ["GENERIC_POINTS", "Contraction", "EinsumPlan", "contraction", "einsum",
           "einsum_path", "einsum_plan", "use_array_type"]

GENERIC_POINTS = 1 << 16  # iteration points up to which a size-generic kernel is used
# Iteration points up to which a path's steps run fused, as one definition (einsum_fused):
# where a step's work (about 1 ns a point in a plain loop nest) is of the order of a kernel
# call's fixed cost (3-5 us, polyopt/bench/latency.py). At GENERIC_POINTS, fused paths at 4x
# opt_einsum's extents ran up to 2.4x slower than a kernel per step (their loops unmerged).
FUSED_POINTS = 1 << 12
_array_types: dict[type, Callable[..., Any]] = {}  # see use_array_type


@dataclass(frozen=True)
class Contraction:
    """What one einsum call computes, derived from its subscripts, its operands' shapes,
    dtypes and strides and its options, never from the data (so it can be reused for any
    call that has the same)."""

    labels: tuple[tuple[str, ...], ...]  # each operand's dim labels ('...k': a '...' dim)
    out: tuple[str, ...]  # the result's dim labels
    shape: tuple[int, ...]  # the result's shape
    dtype: np.dtype  # the result's dtype
    view: bool  # one operand summed over nothing: the result is a view of it
    text: str = ""  # the TC definition (none for a view)
    sizes: tuple[tuple[str, int], ...] = ()  # a value for every size name in ``text``
    form: Form | None = None  # the canonical form ``text`` computes
    cast: np.dtype | None = None  # the operands' values: ``dtype``, or its real part's
    part: np.dtype | None = None  # the kernel's element type, of ``cast``'s size
    order: tuple[int, ...] = ()  # the result's axes from outermost to innermost in memory
    empty: bool = False  # some extent is 0: the result is all zeros, nothing is compiled
    generic: bool = False  # computed by the definition's size-generic kernel
    views: tuple[tuple[int, ...] | None, ...] = ()  # operands read as permuted views
    # of their memory (``einsum_layout.memory_views``), their labels permuted alike


@dataclass(frozen=True)
class EinsumPlan:
    """A contraction with its operands prepared: what ``einsum`` hands the kernel."""

    text: str  # the TC definition, named "einsum"
    sizes: dict[str, int]  # a value for every size name in ``text``
    shape: tuple[int, ...]  # the result's shape
    dtype: np.dtype  # the result's dtype
    operands: tuple[np.ndarray, ...]  # cast, C-contiguous, complex ones as (..., 2) parts
    empty: bool  # some extent is 0: the result is all zeros and nothing is compiled


def einsum(*operands: Any, out: np.ndarray | None = None, dtype: Any = None,
           order: str = "K", casting: Casting = "safe", optimize: Any = True,
           **unknown: Any) -> Any:
    """``numpy.einsum(subscripts, *operands, out=, dtype=, order=, casting=, optimize=)``.

    Also numpy's interleaved form ``einsum(op0, sublist0, op1, sublist1, ..., [out])``.
    Returns a numpy scalar for a 0-d result (as numpy does) unless ``out`` is given.
    ``optimize`` takes numpy's values (see ``einsum_path``); the default, True, contracts
    three or more operands pairwise along the greedy path, a kernel per step, where numpy's
    default (False, one loop nest over every index) is kept for False or None.
    Raises ``ShapeError`` (a ValueError) for operands that do not fit the subscripts,
    ``OptionError`` (a ValueError) for malformed subscripts and options, and their
    ``TypeError`` subclasses where numpy raises a TypeError (a cast that ``casting=``
    forbids, an argument of the wrong kind).
    """
    if out is None and not unknown and _one_nest(optimize, len(operands) - 1):
        result = _fast_call(operands, dtype, order, casting)  # see _fast_call
        if result is not None:
            return result
    for cls, handler in _array_types.items():  # torch tensors in, torch tensors out
        if any(isinstance(x, cls) for x in operands):
            layout = {"order": order} if order != "K" else {}
            return handler(*operands, out=out, dtype=dtype, casting=casting,
                           optimize=optimize, **layout, **unknown)
    args = parse_args(operands, out=out, dtype=dtype, order=order, casting=casting,
                      unknown=unknown)
    path = _path(args, optimize)
    if path is not None:
        return _along(path, args)
    c = contraction(args.subscripts, args.operands, dtype=args.dtype, casting=args.casting,
                    order=args.order, out=args.out)
    result = (single_view(args.operands[0], c.labels[0], c.out) if c.view
              else _compute(c, args.operands))
    if args.out is None:
        return result[()] if result.ndim == 0 else result
    np.copyto(args.out, result, casting="unsafe")  # ``contraction`` checked ``casting``
    return args.out


def _path(args: EinsumArgs, optimize: Any) -> ContractionPath | None:
    """einsum's one use of ``optimize=``: the pairwise path to run (one step: one loop nest),
    or None for one loop nest over every index (numpy's False; True's path for one or two
    operands)."""
    if _one_nest(optimize, len(args.operands)):
        return None
    return contraction_path(args.subscripts, [op.shape for op in args.operands], optimize)


def _along(path: ContractionPath, args: EinsumArgs) -> Any:
    """The result of ``path`` (one step: the one nest, by the fast path from the next call
    on). An ``out=`` is assigned the result as numpy's optimized path assigns it: its shape
    checked, its dtype not (numpy's plain path checks ``casting=``, this one does not)."""
    if len(path.steps) > 1:
        dt = _result_dtype(list(args.operands), args.dtype, args.casting)  # steps' own drift
        result = _fused(path, args, dt)
        if result is None:
            result = _run_path(path, replace(args, out=None), dt)
    else:
        result = einsum(args.subscripts, *args.operands, dtype=args.dtype, order=args.order,
                        casting=args.casting, optimize=False)
    if args.out is None:
        return result
    if args.out.shape != np.shape(result) or not args.out.flags.writeable:
        _check_out(args.out, np.shape(result), args.out.dtype, "unsafe")
    np.copyto(args.out, result, casting="unsafe")
    return args.out


def _fused(path: ContractionPath, args: EinsumArgs, dt: np.dtype) -> Any:
    """``path`` in ``dt`` as one kernel call when all its steps are small
    (``einsum_fused``); None when it runs a kernel per step."""
    ops = args.operands
    if dt.kind != "f" or dt.itemsize not in (4, 8) or args.order not in ("K", "C") or any(
            op.dtype.kind == "c" for op in ops):
        return None
    kernel = _fused_kernel(path, tuple(op.shape for op in ops), str(dt))
    if kernel is None:
        return None
    result = np.asarray(kernel(*[np.asarray(op, dtype=dt, order="C") for op in ops]))
    return result[()] if result.ndim == 0 else result


@lru_cache(maxsize=256)
def _fused_kernel(path: ContractionPath, shapes: tuple[tuple[int, ...], ...],
                  tc_type: str) -> Any:
    """The kernel of ``path`` as one definition (None: a kernel per step), found once per
    path, shapes and type; size-generic, compiled once per definition."""
    fused = fused_text(path, shapes, tc_type, FUSED_POINTS)
    return None if fused is None else _generic_text_kernel(fused[0])


@lru_cache(maxsize=256)
def _generic_text_kernel(text: str) -> Any:
    """The size-generic kernel of a fused path (def ``einsum_path``), compiled once per
    process, as ``_generic_kernel`` compiles one contraction's (every step is small)."""
    return _plain_kernel(text, "einsum_path")


def _one_nest(optimize: Any, n: int) -> bool:
    """One loop nest for ``n`` operands: asked (False, None: numpy's default), or True's
    path for one or two operands."""
    return optimize is False or optimize is None or (optimize is True and n < 3)


def _run_path(path: ContractionPath, args: EinsumArgs, dt: np.dtype) -> Any:
    """``path``'s steps one after another, each an einsum of its own (one kernel), in
    ``dt``, the dtype of the whole contraction; the last in ``order``."""
    ops = list(args.operands)
    for k, step in enumerate(path.steps):
        step_ops = [ops.pop(p) for p in step.operands]
        last = k == len(path.steps) - 1
        result = einsum(step.subscripts, *step_ops, dtype=dt, order=args.order if last else "K",
                        casting=args.casting, optimize=False)
        ops.append(result if last else np.asarray(result))  # a 0-d step: an array (fast path)
    return ops[0]


def use_array_type(cls: type, handler: Callable[..., Any]) -> None:
    """Make ``einsum`` hand operands of type ``cls`` to ``handler`` (called with einsum's
    arguments): a front end for another array library (polyopt.torch) returns its own arrays."""
    _array_types[cls] = handler


def einsum_path(*operands: Any, optimize: Any = "greedy") -> tuple[list[Any], str]:
    """``numpy.einsum_path``: the contraction path ``einsum`` takes for ``optimize`` as
    ``['einsum_path', (i, j), ...]``, and numpy's printed report of it. See
    ``polyopt.subscripts.path`` for the methods; nothing is compiled."""
    args = parse_args(operands)
    path = contraction_path(args.subscripts, [op.shape for op in args.operands], optimize)
    return path.as_list(), path.report()


def einsum_plan(subscripts: str, *operands: Any, dtype: Any = None, casting: Casting = "safe",
                order: str = "K") -> EinsumPlan:
    """Parse and check ``subscripts`` against ``operands``; build the TC text and its sizes,
    and cast the operands for the kernel (also for one operand that einsum would view)."""
    args = parse_args((subscripts, *operands), dtype=dtype, casting=casting, order=order)
    c = contraction(args.subscripts, args.operands, dtype=args.dtype, casting=args.casting,
                    order=args.order, view=False)
    return EinsumPlan(c.text, dict(c.sizes), c.shape, c.dtype, _operands(c, args.operands),
                      c.empty)


def contraction(subscripts: str, operands: Sequence[np.ndarray], *, dtype: np.dtype | None,
                casting: Casting, order: str, out: np.ndarray | None = None,
                view: bool = True) -> Contraction:
    """Check ``subscripts`` against the operands (their shapes, dtypes and, for the layout of
    ``order`` 'K' or 'A', strides) and derive the contraction. With ``out``, the result is
    laid out as ``out`` is, so that the final copy runs through memory in order."""
    shapes = tuple(a.shape for a in operands)
    labels, out_labels, ext = spec(subscripts, shapes)
    ins = [list(labs) for labs in labels]
    shape = tuple(ext[lab] for lab in out_labels)
    dt = _result_dtype(operands, dtype, casting)
    if out is not None:
        _check_out(out, shape, dt, casting)
    # numpy's view, of the operand's own dtype (``dtype == None`` holds for float64: numpy
    # reads None as its default dtype)
    own = dtype is None or dtype == operands[0].dtype
    if view and out is None and len(operands) == 1 and own and set(ins[0]) == set(out_labels):
        return Contraction(labels, out_labels, shape, operands[0].dtype, view=True)
    cast, part, pairs = _kernel_dtype(operands, dt)
    mem = _out_order(out) if out is not None else memory_order(order, out_labels, ins, operands)
    views = memory_views(operands)
    kin = tuple(tuple(labs[d] for d in p) if p else labs for labs, p in zip(labels, views,
                                                                            strict=True))
    kshapes = tuple(tuple(s[d] for d in p) if p else s for s, p in zip(shapes, views,
                                                                      strict=True))
    form, text, sizes = _definition(kin, tuple(out_labels[j] for j in mem), kshapes,
                                    tuple(ext.items()), pairs, part.name)
    return Contraction(labels, out_labels, shape, dt, False, text, sizes, form, cast,
                       part.np, mem, 0 in ext.values(), points(form) <= GENERIC_POINTS, views)


@lru_cache(maxsize=1024)
def _definition(ins: tuple[tuple[str, ...], ...], out: tuple[str, ...],
                shapes: tuple[tuple[int, ...], ...], ext: tuple[tuple[str, int], ...],
                pairs: tuple[bool, ...],
                tc_type: str) -> tuple[Form, str, tuple[tuple[str, int], ...]]:
    """The canonical form and TC text of a contraction, made once per distinct call: the
    text costs more than the rest of a small einsum call."""
    form = kernel_form(ins, out, shapes, dict(ext), pairs)
    text, sizes = tc_text(form, tc_type)
    return form, text, tuple(sizes.items())


def _result_dtype(arrays: Sequence[np.ndarray], dtype: np.dtype | None,
                  casting: Casting) -> np.dtype:
    """``dtype`` or the operands' result type, after checking every operand can be cast to
    it under ``casting`` (a TypeError, as numpy's)."""
    try:
        dt = dtype if dtype is not None else np.result_type(*arrays)
    except TypeError as e:  # numpy's DTypePromotionError: strings with numbers, ...
        kinds = ", ".join(str(a.dtype) for a in arrays)
        raise OptionTypeError(f"einsum operands of dtypes {kinds} have no common dtype") from e
    for k, a in enumerate(arrays):
        if not np.can_cast(a.dtype, dt, casting):
            raise InputTypeError(f"einsum operand {k} of dtype {a.dtype} cannot be cast to "
                                 f"{dt} under casting={casting!r}")
    return dt


def _kernel_dtype(arrays: Sequence[np.ndarray],
                  dt: np.dtype) -> tuple[np.dtype, dtypes.DType, tuple[bool, ...]]:
    """What the operands are cast to, the kernel's element type, and which operands it takes
    as (real, imaginary) pairs: a complex result is computed on real parts, and only
    complex operands have an imaginary one."""
    cast = (np.empty((), dt).real.dtype if dt.kind == "c" else dt).newbyteorder("=")
    part = _SAME_BITS.get(cast.name) or dtypes.from_numpy(cast)
    if part is None:
        culprit = next((f" (operand {k})" for k, a in enumerate(arrays) if a.dtype == dt), "")
        raise OptionTypeError(f"einsum does not support dtype {dt}{culprit}; only bool, "
                              "integer, float16/32/64, longdouble and complex operands are")
    pairs = tuple(dt.kind == "c" and a.dtype.kind == "c" for a in arrays)
    return cast, part, pairs


# Integers of one width share one kernel: + and * give the same bits in two's complement
# whether the values are signed or not. Each width computes in the C type whose arithmetic
# wraps without undefined behaviour: a 16-bit unsigned product promotes to int, where
# 65535 * 65535 overflows; signed 32- and 64-bit overflow is undefined in C.
_SAME_BITS = {f"{sign}int{bits}": dtypes.DTYPES[name] for bits, name in (
    (8, "uint8"), (16, "int16"), (32, "uint32"), (64, "uint64")) for sign in ("", "u")}


def _out_order(out: np.ndarray) -> tuple[int, ...]:
    """``out``'s axes from the largest stride to the smallest (C order on ties)."""
    return tuple(sorted(range(out.ndim), key=lambda j: -abs(out.strides[j])))


def _operands(c: Contraction, arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The operands as the kernel takes them, in its order: cast, C-contiguous, viewed as
    its element type, a complex one as a real array of its parts (numpy's layout: a
    trailing dim of 2, real then imaginary), reshaped to the form's merged dims."""
    assert c.form is not None and c.cast is not None and c.part is not None
    out = []
    for k, shape, pair in zip(c.form.operands, c.form.shapes, c.form.pairs, strict=True):
        a = arrays[k] if not c.views or c.views[k] is None else arrays[k].transpose(c.views[k])
        if pair:
            z = np.asarray(a, dtype=c.dtype.newbyteorder("="), order="C")
            out.append(z.reshape(-1).view(c.part).reshape(*shape, 2))
        else:
            x = np.asarray(a, dtype=c.cast, order="C")
            x = x if c.part is c.cast else x.view(c.part)
            out.append(x if x.shape == shape else x.reshape(shape))  # a new view costs
    return tuple(out)


def _compute(c: Contraction, arrays: Sequence[np.ndarray], kernel: Any = None) -> np.ndarray:
    """The result of a contraction that is not a view, laid out in ``c.order``."""
    assert c.cast is not None
    mem_shape = tuple(c.shape[j] for j in c.order)
    if c.empty:
        result = np.zeros(mem_shape, c.dtype)
    else:
        kernel = kernel or _kernel_of(c)
        outs = kernel(*_operands(c, arrays))
        parts = [_as_result(o, c.cast, mem_shape)
                 for o in (outs if isinstance(outs, tuple | list) else [outs])]
        if len(parts) == 2:  # the real and imaginary parts of a complex result
            result = np.empty(mem_shape, c.dtype)
            result.real, result.imag = parts
        else:  # a complex dtype= of real operands has no imaginary part
            result = parts[0] if parts[0].dtype == c.dtype else parts[0].astype(c.dtype)
    if c.order == tuple(range(len(c.order))):
        return result
    return result.transpose(np.argsort(c.order))


def _as_result(o: Any, cast: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """A kernel output as the result's values (the signedness ``cast`` says) and shape."""
    o = np.asarray(o)
    o = o if o.dtype is cast else o.view(cast)
    return o if o.shape == shape else o.reshape(shape)


def _check_out(out: np.ndarray, shape: tuple[int, ...], dt: np.dtype, casting: Casting) -> None:
    if out.shape != shape:
        raise ShapeError(f"einsum out= has shape {out.shape} but the result has shape {shape}")
    if not np.can_cast(dt, out.dtype, casting):
        raise InputTypeError(f"einsum result of dtype {dt} cannot be written to out= of "
                             f"dtype {out.dtype} under casting={casting!r}")
    if not out.flags.writeable:
        raise ShapeError("einsum out= is read-only")


def _kernel_of(c: Contraction) -> Any:
    return _generic_kernel(c.text) if c.generic else _kernel(c.text, c.sizes)


# -- the fast path: a call like one made before, planned once ------------------------------
# Parsing and planning cost tens of us a call, the kernel call a few. A call is keyed by its
# subscripts, options and operands' types, shapes, dtypes and strides, which decide
# everything ``contraction`` decides (strides: the layout of order='K' and 'A'). Calls that
# cannot be keyed (interleaved sublists, operands that are not ndarrays, out=) and calls
# the full path refuses take the full path, which raises the error.


@dataclass(frozen=True)
class _FastPlan:
    c: Contraction
    kernel: Any  # None for a view or an empty result
    # When the kernel takes the operands as they come (their dtype, C order, the form's
    # shapes) and its output is the result (one real output, in C order): the operands'
    # order in the kernel's signature. ``_compute``'s conversions cost several us a call.
    direct: tuple[int, ...] | None = None

    def __call__(self, operands: tuple[np.ndarray, ...]) -> Any:
        c = self.c
        if self.direct is not None:
            result = self.kernel(*[operands[k] for k in self.direct])
            if result.shape != c.shape:
                result = result.reshape(c.shape)
        else:
            result = (single_view(operands[0], c.labels[0], c.out) if c.view
                      else _compute(c, operands, self.kernel))
        return result[()] if result.ndim == 0 else result


def _direct(c: Contraction, arrays: Sequence[np.ndarray]) -> tuple[int, ...] | None:
    """``_FastPlan.direct`` for these operands (a key of the fast path fixes their dtypes,
    shapes and strides), or None where ``_compute`` must convert something."""
    form = c.form
    if c.view or c.empty or form is None or any(form.pairs) or c.part != c.cast:
        return None
    if c.dtype != c.cast or c.order != tuple(range(len(c.order))):
        return None
    for k, shape in zip(form.operands, form.shapes, strict=True):
        a = arrays[k]
        if a.dtype != c.cast or not a.flags.c_contiguous or a.shape != tuple(shape):
            return None
    return tuple(form.operands)


_FAST: dict[tuple[Any, ...], _FastPlan | None] = {}


def _fast_call(operands: tuple[Any, ...], dtype: Any, order: Any, casting: Any) -> Any:
    """The result by a plan made at an earlier call with this key, or None (not keyed)."""
    try:
        key = (operands[0], dtype, order, casting,
               *[(type(x), x.shape, x.dtype, x.strides) for x in operands[1:]])
        plan = _FAST.get(key, _FAST)
    except (AttributeError, TypeError, IndexError):  # no shapes, unhashable options
        return None
    if plan is _FAST:
        plan = _fast_plan(operands, dtype, order, casting)
        if len(_FAST) >= 256:
            _FAST.clear()
        _FAST[key] = plan
    return None if plan is None else plan(operands[1:])  # type: ignore[operator]


def _fast_plan(operands: tuple[Any, ...], dtype: Any, order: Any,
               casting: Any) -> _FastPlan | None:
    """The plan of a call of string subscripts on ndarrays; None otherwise, or when the
    call is refused (the full path raises the error)."""
    if not isinstance(operands[0], str) or any(type(x) is not np.ndarray for x in operands[1:]):
        return None
    try:
        args = parse_args(operands, dtype=dtype, order=order, casting=casting)
        c = contraction(args.subscripts, args.operands, dtype=args.dtype,
                        casting=args.casting, order=args.order)
    except PolyoptError:
        return None
    return _FastPlan(c, None if c.view or c.empty else _kernel_of(c),
                     _direct(c, args.operands))


@lru_cache(maxsize=256)
def _kernel(text: str, sizes: tuple[tuple[str, int], ...]) -> Any:
    """The kernel of ``text`` specialized to ``sizes``, compiled once per process."""
    return api.compile(text, "einsum", sizes=dict(sizes))


@lru_cache(maxsize=256)
def _generic_kernel(text: str) -> Any:
    """The size-generic kernel of ``text``, compiled once per process for every shape: its
    loops in program order on one thread, since the work is small (scheduling and threads
    pay off only on large problems) and the plain loop nest compiles several times faster."""
    return _plain_kernel(text, "einsum")


def _plain_kernel(text: str, name: str) -> Any:
    """Def ``name`` of ``text`` as a size-generic loop nest in program order on one thread."""
    return api.compile(text, name, parametric=True, schedule="program-order",
                       options={"openmp": False})

