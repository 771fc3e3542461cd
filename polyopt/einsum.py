"""``einsum``: a drop-in for ``numpy.einsum`` on real dtypes, computed by a compiled TC kernel.

The subscripts are parsed and checked as numpy does them: implicit and explicit output,
repeated subscripts in one operand (diagonals), ``...`` broadcasting, and size-1 dims that
broadcast against larger ones. The contraction then becomes one TC statement; for
``ij,jk->ik`` on float32 operands of shapes (2,3) and (3,4)::

    def einsum(float32(N0,N1) T0, float32(N1,N2) T1) -> (O) { O(i_,k_) +=! T0(i_,j_) * T1(j_,k_) }

with sizes ``{N0: 2, N1: 3, N2: 4}``. Letter ``x`` becomes the index ``x_`` and the k-th
``...`` dim the index ``ek_``; a size-1 dim that broadcasts is declared ``1`` and read at
``0``. ``polyopt.compile`` turns the text into a kernel, cached per (text, sizes), i.e. per
normalized subscripts, shapes and dtype. Numpy only casts the operands; it never computes.
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, get_args

import numpy as np

from polyopt import api, dtypes
from polyopt.einsum_path import ContractionPath, contraction_path
from polyopt.errors import OptionError, PolyoptError, ShapeError

__all__ = ["EinsumPlan", "einsum", "einsum_path", "einsum_plan", "use_array_type"]

_LETTERS = frozenset(string.ascii_letters)
_SUBLIST_LETTERS = string.ascii_uppercase + string.ascii_lowercase  # numpy's int -> letter map
Casting = Literal["no", "equiv", "safe", "same_kind", "unsafe"]
_CASTINGS: tuple[str, ...] = get_args(Casting)
_array_types: dict[type, Callable[..., Any]] = {}  # see use_array_type


@dataclass(frozen=True)
class EinsumPlan:
    """What one einsum call computes: the TC text, its sizes, and the cast operands."""

    text: str  # the TC definition, named "einsum"
    sizes: dict[str, int]  # a value for every size name in ``text``
    shape: tuple[int, ...]  # the result's shape
    dtype: np.dtype  # the computation and result dtype
    operands: tuple[np.ndarray, ...]  # cast to ``dtype``, C-contiguous, in signature order
    empty: bool  # some extent is 0: the result is all zeros and nothing is compiled


def einsum(subscripts: Any, *operands: Any, out: np.ndarray | None = None,
           dtype: Any = None, casting: Casting = "safe", optimize: Any = True,
           **unsupported: Any) -> Any:
    """``numpy.einsum(subscripts, *operands, out=, dtype=, casting=)`` for real dtypes.

    Also accepts numpy's interleaved form ``einsum(op0, sublist0, op1, sublist1, ..., [out])``.
    Returns a numpy scalar for a 0-d result (as numpy does) unless ``out`` is given.
    ``optimize`` takes numpy's values (see ``einsum_path``); the default, True, contracts
    three or more operands pairwise along the greedy path, a kernel per step, where numpy's
    default (False, one loop nest over every index) is kept for False or None.
    Raises ``ShapeError`` for operands that do not fit the subscripts and ``OptionError`` for
    malformed subscripts and unsupported dtypes or options.
    """
    # One nest for one or two operands, or when asked (numpy's default); else a path.
    one_nest = optimize is False or optimize is None or (optimize is True and len(operands) < 3)
    if out is None and one_nest and not unsupported:  # see _fast_call
        result = _fast_call(subscripts, operands, dtype, casting)
        if result is not None:
            return result
    for cls, handler in _array_types.items():  # torch tensors in, torch tensors out
        if any(isinstance(x, cls) for x in (subscripts, *operands)):
            return handler(subscripts, *operands, out=out, dtype=dtype, casting=casting,
                           optimize=optimize, **unsupported)
    if unsupported:
        raise OptionError(f"einsum does not support the option(s) {', '.join(unsupported)}")
    if not isinstance(subscripts, str):
        subscripts, operands = _from_sublists((subscripts, *operands))
    # A path for three or more operands (numpy's default is one nest); for one or two,
    # True's path is the one nest, known without asking.
    one_nest = optimize is False or optimize is None or (optimize is True and len(operands) < 3)
    if not one_nest:
        path = contraction_path(subscripts, [np.shape(op) for op in operands], optimize)
        if len(path.steps) > 1:
            return _run_path(path, operands, out, dtype, casting)
        return einsum(subscripts, *operands, out=out, dtype=dtype, casting=casting,
                      optimize=False)  # one step: the one nest, by the fast path
    plan = einsum_plan(subscripts, *operands, dtype=dtype, casting=casting)
    if out is not None:
        _check_out(out, plan, casting)
    if plan.empty:
        result = np.zeros(plan.shape, plan.dtype)
    else:
        result = _kernel(plan.text, tuple(plan.sizes.items()))(*plan.operands)
        if isinstance(result, (tuple, list)):
            result = result[0]
        result = np.asarray(result).reshape(plan.shape)
    if out is None:
        return result[()] if result.ndim == 0 else result
    out[...] = result
    return out


def use_array_type(cls: type, handler: Callable[..., Any]) -> None:
    """Make ``einsum`` hand operands of type ``cls`` to ``handler`` (called with einsum's
    arguments): a front end for another array library (polyopt.torch) returns its own arrays."""
    _array_types[cls] = handler


def einsum_plan(subscripts: str, *operands: Any, dtype: Any = None,
                casting: Casting = "safe") -> EinsumPlan:
    """Parse and check ``subscripts`` against ``operands``; build the TC text and its sizes."""
    terms, out_term = _split(subscripts)
    arrays = [np.asarray(op) for op in operands]
    if len(terms) != len(arrays):
        raise ShapeError(f"einsum subscripts {subscripts!r} name {len(terms)} operand(s) "
                         f"but {len(arrays)} were given")
    dt = _computation_dtype(arrays, dtype, casting)
    shapes = [a.shape for a in arrays]
    ins, out_labels = _labels(terms, out_term, shapes)
    ext = _extents(ins, shapes)
    text, sizes = _tc_text(ins, out_labels, shapes, ext, dt.name)
    cast = tuple(np.asarray(a, dtype=dt.np, order="C") for a in arrays)  # keeps 0-d as 0-d
    return EinsumPlan(text, sizes, tuple(ext[lab] for lab in out_labels), dt.np, cast,
                      0 in ext.values())


def _computation_dtype(arrays: list[np.ndarray], dtype: Any, casting: Casting) -> dtypes.DType:
    """``dtype`` or the operands' result type, after checking every operand can be cast to it."""
    if casting not in _CASTINGS:
        raise OptionError(f"einsum casting={casting!r} is not one of {', '.join(_CASTINGS)}")
    for k, a in enumerate(arrays):
        if dtypes.from_numpy(a.dtype.newbyteorder("=")) is None:
            raise OptionError(f"einsum does not support dtype {a.dtype} (operand {k}); "
                              "only bool, integer, bfloat16 and float16/32/64 operands are")
    try:
        dt = np.dtype(dtype) if dtype is not None else np.result_type(*arrays)
    except TypeError as e:
        raise OptionError(f"einsum dtype={dtype!r} is not a numpy dtype") from e
    tc = dtypes.from_numpy(dt.newbyteorder("="))
    if tc is None:
        raise OptionError(f"einsum does not support dtype={dt}; only bool, integer, bfloat16 and "
                          "float16/32/64 are")
    for k, a in enumerate(arrays):
        if not np.can_cast(a.dtype, tc.np, casting):
            raise ShapeError(f"einsum operand {k} of dtype {a.dtype} cannot be cast to {tc.np} "
                             f"under casting={casting!r}")
    return tc


def _from_sublists(args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """numpy's interleaved form ``(op0, sublist0, op1, sublist1, ..., [out])`` as a string."""
    def letter(s: Any) -> str:
        if s is Ellipsis:
            return "..."
        if isinstance(s, int | np.integer) and not isinstance(s, bool) and 0 <= s < 52:
            return _SUBLIST_LETTERS[s]
        raise OptionError(f"einsum sublists must hold ints in [0, 52) and Ellipsis, not {s!r}")

    def term(sublist: Any) -> str:
        if not isinstance(sublist, list | tuple):
            raise OptionError(f"einsum expected a sublist (list of ints), not {sublist!r}")
        return "".join(letter(s) for s in sublist)

    pairs = args if len(args) % 2 == 0 else args[:-1]
    ins = ",".join(term(s) for s in pairs[1::2])
    return (ins if pairs is args else f"{ins}->{term(args[-1])}"), pairs[0::2]


def _split(subscripts: str) -> tuple[list[str], str | None]:
    """The input terms and the output term (None in implicit mode), without spaces, checked."""
    lhs, arrow, rhs = subscripts.replace(" ", "").partition("->")
    terms = lhs.split(",")
    for k, term in enumerate([*terms, rhs] if arrow else terms):
        what = "the output" if k == len(terms) else f"operand {k}"
        letters = term.replace("...", "", 1)
        if "." in letters:
            raise OptionError(f"einsum subscripts {subscripts!r} have a '.' that is not part of "
                              f"a single ellipsis ('...') in {what}")
        bad = [c for c in letters if c not in _LETTERS]
        if bad:
            raise OptionError(f"einsum subscripts {subscripts!r} have the invalid character "
                              f"{bad[0]!r} in {what}; subscripts must be letters")
    return terms, rhs if arrow else None


def _labels(terms: list[str], out_term: str | None,
            shapes: list[tuple[int, ...]]) -> tuple[list[list[str]], list[str]]:
    """Each operand's label per dim, and the output's; the k-th '...' dim is labelled '...k'."""
    ranks = []
    for k, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        n = len(term.replace("...", ""))
        if len(shape) < n or ("..." not in term and len(shape) != n):
            raise ShapeError(f"einsum operand {k} has {len(shape)} dimension(s) but its "
                             f"subscripts {term!r} name {n}")
        ranks.append(len(shape) - n)
    nb = max(ranks, default=0)
    ins = []
    for term, r in zip(terms, ranks, strict=True):
        head, _, tail = term.partition("...")
        ins.append([*head, *(f"...{nb - r + j}" for j in range(r)), *tail])
    dots = [f"...{j}" for j in range(nb)]
    counts = Counter(c for term in terms for c in term.replace("...", ""))
    if out_term is None:
        return ins, [*dots, *sorted(c for c, n in counts.items() if n == 1)]
    head, _, tail = out_term.partition("...")
    for c, n in Counter(head + tail).items():
        if n > 1:
            raise OptionError(f"einsum output subscript {c!r} appears more than once in "
                              f"{out_term!r}")
        if c not in counts:
            raise OptionError(f"einsum output subscript {c!r} does not appear in any input")
    if nb and "..." not in out_term:
        raise ShapeError(f"einsum operands have {nb} broadcast ('...') dimension(s) but the "
                         f"output subscripts {out_term!r} have no '...'")
    return ins, [*head, *dots, *tail]


def _extents(ins: list[list[str]], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    """Each label's extent, in order of first appearance; size-1 dims broadcast across operands."""
    ext: dict[str, int] = {}
    source: dict[str, int] = {}  # the operand that gave ext[label]
    for k, (labels, shape) in enumerate(zip(ins, shapes, strict=True)):
        mine: dict[str, int] = {}
        for lab, n in zip(labels, shape, strict=True):
            if mine.setdefault(lab, n) != n:
                raise ShapeError(f"einsum operand {k} repeats subscript {_show(lab)} with "
                                 f"extents {mine[lab]} and {n}")
        for lab, n in mine.items():
            if lab not in ext or ext[lab] == 1:
                ext[lab], source[lab] = n, k
            elif n not in (ext[lab], 1):
                raise ShapeError(f"einsum subscript {_show(lab)} has extent {n} in operand {k} "
                                 f"but {ext[lab]} in operand {source[lab]}")
    return ext


def _tc_text(ins: list[list[str]], out: list[str], shapes: list[tuple[int, ...]],
             ext: dict[str, int], tc_type: str) -> tuple[str, dict[str, int]]:
    """The TC definition computing the contraction, and the value of each of its sizes."""
    size = {lab: f"N{j}" for j, lab in enumerate(ext)}
    params, factors = [], []
    for k, (labels, shape) in enumerate(zip(ins, shapes, strict=True)):
        # A dim of extent 1 where its label's extent is not broadcasts: declared 1, read at 0.
        full = [(lab, n == ext[lab]) for lab, n in zip(labels, shape, strict=True)]
        dims = ",".join(size[lab] if f else "1" for lab, f in full)
        index = ",".join(_index(lab) if f else "0" for lab, f in full)
        params.append(f"{tc_type}({dims}) T{k}" if labels else f"{tc_type} T{k}")
        factors.append(f"T{k}({index})" if labels else f"T{k}")
    lhs = f"O({','.join(map(_index, out))})" if out else "O"
    # numpy's bool sum of products is OR of ANDs: max=! keeps every value 0 or 1.
    op = ("max=!" if tc_type == "bool" else "+=!") if set(ext) - set(out) else "="
    text = f"def einsum({', '.join(params)}) -> (O) {{ {lhs} {op} {' * '.join(factors)} }}"
    return text, {size[lab]: n for lab, n in ext.items()}


def _index(label: str) -> str:
    """The TC index variable of a label: ``x_`` for letter ``x``, ``ek_`` for '...' dim k."""
    return f"e{label[3:]}_" if label.startswith("...") else f"{label}_"


def _show(label: str) -> str:
    return f"'...' dimension {label[3:]}" if label.startswith("...") else repr(label)


def _check_out(out: Any, plan: EinsumPlan, casting: Casting) -> None:
    if not isinstance(out, np.ndarray):
        raise OptionError(f"einsum out= must be a numpy array, not {type(out).__name__}")
    if out.shape != plan.shape:
        raise ShapeError(f"einsum out= has shape {out.shape} but the result has shape "
                         f"{plan.shape}")
    if not np.can_cast(plan.dtype, out.dtype, casting):
        raise ShapeError(f"einsum result of dtype {plan.dtype} cannot be written to out= of "
                         f"dtype {out.dtype} under casting={casting!r}")


# -- the fast path: a call like one made before, planned once ------------------------------
# Parsing the subscripts and building the plan cost ~30 us a call; the kernel call ~1 us.
# A call is keyed by its subscripts, options and operands' types, shapes and dtypes, which
# decide everything einsum_plan decides; the operands' layout does not (the kernel copies
# what is not C-contiguous and aligned, as the plan's cast would). Calls that cannot be
# keyed (operands that are not ndarrays, out=) take the full path above.


@dataclass(frozen=True)
class _FastPlan:
    kernel: Any  # None when the result is empty (all zeros)
    shape: tuple[int, ...]
    dtype: np.dtype
    cast: tuple[bool, ...]  # per operand: not of the computation dtype itself

    def __call__(self, operands: tuple[np.ndarray, ...]) -> Any:
        if self.kernel is None:
            result = np.zeros(self.shape, self.dtype)
        else:
            if any(self.cast):
                operands = tuple(np.asarray(x, dtype=self.dtype, order="C") if c else x
                                 for x, c in zip(operands, self.cast, strict=True))
            result = self.kernel(*operands)
            if result.shape != self.shape:
                result = result.reshape(self.shape)
        return result[()] if result.ndim == 0 else result


_FAST: dict[tuple[Any, ...], _FastPlan | None] = {}


def _fast_call(subscripts: Any, operands: tuple[Any, ...], dtype: Any, casting: Any) -> Any:
    """The result by a plan made at an earlier call with this key, or None (not keyed)."""
    try:
        key = (subscripts, dtype, casting, *[(type(x), x.shape, x.dtype) for x in operands])
        plan = _FAST.get(key, _FAST)
    except (AttributeError, TypeError):  # operands without shapes, unhashable options
        return None
    if plan is _FAST:
        plan = _fast_plan(subscripts, operands, dtype, casting)
        if len(_FAST) >= 256:
            _FAST.clear()
        _FAST[key] = plan
    return None if plan is None else plan(operands)  # type: ignore[operator]


def _fast_plan(subscripts: Any, operands: tuple[Any, ...], dtype: Any,
               casting: Any) -> _FastPlan | None:
    """The plan of a call of string subscripts on ndarrays; None otherwise, or when the
    call is refused (the full path raises the error)."""
    if not isinstance(subscripts, str) or any(type(x) is not np.ndarray for x in operands):
        return None
    try:
        plan = einsum_plan(subscripts, *operands, dtype=dtype, casting=casting)
    except PolyoptError:
        return None
    kernel = None if plan.empty else _kernel(plan.text, tuple(plan.sizes.items()))
    return _FastPlan(kernel, plan.shape, plan.dtype,
                     tuple(x.dtype is not plan.dtype for x in operands))


@lru_cache(maxsize=256)
def _kernel(text: str, sizes: tuple[tuple[str, int], ...]) -> Any:
    """The compiled kernel of ``text`` at ``sizes``, compiled once per process."""
    return api.compile(text, "einsum", sizes=dict(sizes))


def einsum_path(subscripts: Any, *operands: Any, optimize: Any = "greedy") -> tuple[list[Any], str]:
    """``numpy.einsum_path``: the contraction path ``einsum`` takes for ``optimize`` as
    ``['einsum_path', (i, j), ...]``, and numpy's printed report of it. See
    ``polyopt.einsum_path`` (the module) for the methods; nothing is compiled."""
    if not isinstance(subscripts, str):
        subscripts, operands = _from_sublists((subscripts, *operands))
    path = contraction_path(subscripts, [np.shape(op) for op in operands], optimize)
    return path.as_list(), path.report()


def _run_path(path: ContractionPath, operands: tuple[Any, ...], out: np.ndarray | None,
              dtype: Any, casting: Casting) -> Any:
    """``path``'s steps one after another, each an einsum of its own (one kernel), in the
    dtype of the whole contraction; the last writes ``out``."""
    ops = [np.asarray(op) for op in operands]
    dt = np.result_type(*ops) if dtype is None else dtype  # each step's own would drift
    for k, step in enumerate(path.steps):
        args = [ops.pop(p) for p in step.operands]
        last = k == len(path.steps) - 1
        result = einsum(step.subscripts, *args, out=out if last else None, dtype=dt,
                        casting=casting, optimize=False)
        ops.append(result if last else np.asarray(result))  # a 0-d step: an array (fast path)
    return ops[0]
