"""Where einsum's result lives: its memory layout under ``order=``, and the views numpy returns.

``memory_order`` gives the result's axes from outermost to innermost in memory, as numpy's
iterator allocates them: 'C' in order, 'F' reversed, 'A' as 'F' when every operand is
Fortran-contiguous and else as 'C', and 'K' as close to the operands' own layout as their
strides say (``_keep_order``: numpy's stable insertion sort of the iteration axes by stride,
where a conflict between operands goes to C order). The kernel then computes the result with
its dimensions in that order and einsum returns a transposed view of it, so no layout costs
a copy.

``memory_views``: an operand that is a permuted view of C-contiguous memory (``a.T``, or
the transposed view einsum itself returns for a path's intermediate under 'K') is read in
place, its labels permuted to its memory's order, rather than copied to C order first: the
copy is a pass over it, and the kernel then reads the copy against the layout of the other
operands (the bilinear form ``bi,ij,bj->b``'s second step, ``jb,bj->b`` on the first's
transposed view, ran 1.95 ms on 1024 x 512; see ``memory_views``).

``single_view``: an einsum of one operand that sums over nothing only takes diagonals and
permutes axes, and numpy returns a view of the operand for it (``einsum("ii->i", a)``,
``einsum("ji", a)``); polyopt does the same, with numpy's own view operations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["memory_order", "memory_views", "single_view"]


def memory_order(order: str, out: Sequence[str], ins: Sequence[Sequence[str]],
                 arrays: Sequence[np.ndarray]) -> tuple[int, ...]:
    """The result's axes (indices into ``out``) from outermost to innermost in memory.

    ``out`` labels the result's axes and ``ins[k]`` operand ``k``'s (a label repeated in an
    operand is a diagonal); ``arrays`` are the operands as given (their strides, before any
    cast).
    """
    ndim = len(out)
    if order == "A":
        order = "F" if all(a.flags.f_contiguous for a in arrays) else "C"
    if order == "C" or ndim < 2:
        return tuple(range(ndim))
    if order == "F":
        return tuple(reversed(range(ndim)))
    reduced = sorted({lab for labels in ins for lab in labels} - set(out))
    axes = [*out, *reduced]  # numpy's iteration axes: the output's, then the summed ones
    strides = [[_stride(lab, labels, a) for labels, a in zip(ins, arrays, strict=True)]
               for lab in axes]
    inner_first = _keep_order(strides[::-1])  # numpy sorts from the innermost axis out
    outer_first = [len(axes) - 1 - j for j in reversed(inner_first)]
    return tuple(j for j in outer_first if j < ndim)


def _stride(label: str, labels: Sequence[str], a: np.ndarray) -> int:
    """The operand's stride along ``label``: the sum over its dims with that label (a
    diagonal), 0 where it lacks the label or broadcasts it (extent 1), as numpy's iterator
    sees it."""
    dims = [k for k, lab in enumerate(labels) if lab == label]
    if not dims or a.shape[dims[0]] == 1:
        return 0
    return sum(a.strides[k] for k in dims)


def _keep_order(strides: list[list[int]]) -> list[int]:
    """numpy's order 'K' (``npyiter_find_best_axis_ordering``): a stable insertion sort of
    the axes (``strides[axis][operand]``, innermost axis first) from the smallest stride to
    the largest, comparing two axes only through operands that move along both. An axis
    moves inward past another only while the first operand that decides says so and no
    later one says otherwise (so a conflict keeps C order)."""
    perm = list(range(len(strides)))
    for i in range(1, len(perm)):
        moving = strides[perm[i]]
        pos = i
        for j in range(i - 1, -1, -1):
            verdict = _inner(moving, strides[perm[j]])
            if verdict is None:
                continue  # no operand moves along both: look further
            if not verdict:
                break
            pos = j
        perm.insert(pos, perm.pop(i))
    return perm


def _inner(a: list[int], b: list[int]) -> bool | None:
    """Should the axis with strides ``a`` sit inside the one with ``b``? None: undecided."""
    verdict = None
    for sa, sb in zip(a, b, strict=True):
        if sa and sb:
            if abs(sb) <= abs(sa):
                verdict = False
            elif verdict is None:
                verdict = True
    return verdict


def single_view(a: np.ndarray, labels: Sequence[str], out: Sequence[str]) -> np.ndarray:
    """``a`` (its dims labelled ``labels``) as a view with dims ``out``: each repeated label
    becomes one diagonal, then the axes are permuted. Writeable when ``a`` is."""
    view, current = a, list(labels)
    for lab in out:
        while current.count(lab) > 1:
            first = current.index(lab)
            second = current.index(lab, first + 1)
            view = view.diagonal(0, first, second)  # the diagonal axis goes last
            current = [c for k, c in enumerate(current) if k not in (first, second)] + [lab]
    view = view.transpose([current.index(lab) for lab in out])
    if a.flags.writeable and not view.flags.writeable:
        view.flags.writeable = True  # numpy's diagonal() is read-only; einsum's view is not
    return view


def memory_views(arrays: Sequence[np.ndarray]) -> tuple[tuple[int, ...] | None, ...]:
    """Per operand, the permutation of its axes under which it is C-contiguous, where it is
    a permuted view of contiguous memory and not already C-contiguous; else None (it is
    taken as it is: copied to C order if it is not)."""
    perms: list[tuple[int, ...] | None] = []
    for a in arrays:
        perm = tuple(sorted(range(a.ndim), key=lambda d: -a.strides[d]))  # stable on ties
        keep = a.ndim < 2 or a.flags.c_contiguous or perm == tuple(range(a.ndim)) \
            or not a.transpose(perm).flags.c_contiguous
        perms.append(None if keep else perm)
    return tuple(perms)
