"""Contraction paths for einsum: numpy's ``einsum_path``, from subscripts and shapes alone.

A multi-operand einsum run as one loop nest costs the product of every extent; contracted
two operands at a time it costs far less (``ea,fb,abcd,gc,hd->efgh`` goes from 8 nested
loops to four of 5). A *path* says which operands each step contracts, as numpy writes it:
positions in the current operand list, each step's result appended at the end::

    ['einsum_path', (2, 3), (2, 3), (1, 2), (0, 1)]

``contraction_path(subscripts, shapes, optimize)`` finds one (or checks a given one) and
returns the steps with their own subscripts, e.g. ``'bcde,fb->cdef'``; nothing is computed
or compiled here. The search minimises flops, numpy's way of counting them, and keeps every
intermediate within ``memory_limit`` elements (default: the largest operand or result):

- ``greedy``: numpy's (from opt_einsum): repeatedly contract the pair that removes the most
  elements, flops breaking ties, outer products only when nothing else is left; the same
  choices as numpy in the same order, so the same path;
- ``optimal``: numpy's cheapest path, by dynamic programming over groups of operands (3^n
  where numpy enumerates n! sequences: 10 operands in seconds). Still exponential.

Where no pair fits the memory limit the rest is contracted in one step, as numpy does.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from itertools import combinations
from typing import Any

from polyopt.errors import (
    EinsumPathError,
    IncompletePathError,
    OptionError,
    PathIndexError,
    PathNameError,
    PathTypeError,
    ShapeError,
)

__all__ = ["ContractionPath", "Step", "contraction_path", "greedy_path", "optimal_path"]

# numpy's subscript letters in numpy's order: its sublist integers map into it, and its
# '...' dims take the unused ones from the end.
SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
METHODS = ("greedy", "optimal")
Labels = frozenset[str]
Path = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Step:
    """One contraction of a path."""

    operands: tuple[int, ...]  # positions in the operand list, descending: numpy's pop order
    subscripts: str  # this step's einsum, e.g. 'bcde,fb->cdef'
    remaining: tuple[str, ...]  # the terms left after it, its result last
    flops: int  # numpy's count: product of the extents involved times the operations per point
    scaling: int  # how many distinct indices the step loops over
    size: int  # elements of its result


@dataclass(frozen=True)
class ContractionPath:
    """A path through an einsum (letters only: '...' is spelled out) and what it costs."""

    inputs: tuple[str, ...]  # each operand's subscripts
    output: str
    sizes: tuple[tuple[str, int], ...]  # each index's extent, in order of appearance
    path: Path  # as numpy writes it, without the 'einsum_path' head
    steps: tuple[Step, ...]
    naive_flops: int  # of the whole contraction as one loop nest

    @property
    def optimized_flops(self) -> int:
        return sum(s.flops for s in self.steps) + 1  # numpy's + 1

    def as_list(self) -> list[Any]:
        """numpy's form of the path: ``['einsum_path', (0, 1), ...]``."""
        return ["einsum_path", *self.path]

    def report(self) -> str:
        """numpy's printed summary: flop counts, speedup, largest intermediate, the steps."""
        indices = len({c for term in self.inputs for c in term})
        lines = [
            f"  Complete contraction:  {','.join(self.inputs)}->{self.output}",
            f"         Naive scaling:  {indices}",
            f"     Optimized scaling:  {max(s.scaling for s in self.steps)}",
            f"      Naive FLOP count:  {self.naive_flops:.3e}",
            f"  Optimized FLOP count:  {self.optimized_flops:.3e}",
            f"   Theoretical speedup:  {self.naive_flops / self.optimized_flops:3.3f}",
            f"  Largest intermediate:  {max(s.size for s in self.steps):.3e} elements",
            "-" * 74,
            f"{'scaling':>6} {'current':>24} {'remaining':>40}",
            "-" * 74,
        ]
        lines += [f"{s.scaling:4d}    {s.subscripts:>24} "
                  f"{','.join(s.remaining) + '->' + self.output:>40}" for s in self.steps]
        return "\n".join(lines)


def contraction_path(subscripts: str, shapes: Sequence[tuple[int, ...]],
                     optimize: Any = "greedy") -> ContractionPath:
    """The path numpy's ``einsum_path`` would give for operands of ``shapes``.

    ``optimize`` takes numpy's values: False or None (one step), True or 'greedy', 'optimal',
    ``(method, memory_limit)``, or an explicit ``['einsum_path', (i, j), ...]``, which is
    checked: ``PathIndexError`` for a position not in the operand list at that step,
    ``IncompletePathError`` when it leaves more than one operand. Results are cached per
    (subscripts, shapes, optimize).
    """
    shapes = tuple(tuple(s) for s in shapes)
    try:
        return _cached(subscripts, shapes, _freeze(optimize))
    except (EinsumPathError, TypeError):  # an unhashable path (arrays in it?), or an error
        return _solve(subscripts, shapes, optimize)  # to raise naming ``optimize`` as given


@lru_cache(maxsize=512, typed=True)  # typed: optimize=1 is no True
def _cached(subscripts: str, shapes: tuple[tuple[int, ...], ...], optimize: Any) -> ContractionPath:
    return _solve(subscripts, shapes, optimize)


def _solve(subscripts: str, shapes: tuple[tuple[int, ...], ...],
           optimize: Any) -> ContractionPath:
    method, limit, given = _method(optimize)
    inputs, output = normalize(subscripts, shapes)
    dots = "".join(c for c in SYMBOLS if c not in subscripts and any(c in t for t in inputs))
    sizes = _sizes(inputs, shapes, dots)
    sets = [frozenset(t) for t in inputs]
    out_set = frozenset(output)
    if limit is None:
        limit = max(_size(t, sizes) for t in [*inputs, output])
    if given is not None:
        path = _check(given, len(inputs))
    elif method is None or len(inputs) <= 2 or set(sizes) == out_set:
        path = (tuple(range(len(inputs))),)  # nothing a path could save
    elif method == "greedy":
        path = tuple(greedy_path(sets, out_set, sizes, limit))
    else:
        path = tuple(optimal_path(sets, out_set, sizes, limit))
    every = frozenset(sizes)
    # numpy's naive count calls the nest an inner product when some index is shared.
    inner = sum(len(s) for s in sets) > len(every)
    return ContractionPath(tuple(inputs), output, tuple(sizes.items()), path,
                           _steps(inputs, output, sizes, path),
                           _flops(every, inner, len(inputs), sizes))


def _freeze(optimize: Any) -> Any:
    """``optimize`` as a cache key: lists become tuples, recursively."""
    if isinstance(optimize, list | tuple):
        return tuple(_freeze(x) for x in optimize)
    return optimize


def _method(optimize: Any) -> tuple[str | None, float | None, Sequence[Any] | None]:
    """The search method (None: one step), the memory limit and a given path, of ``optimize``."""
    if optimize is None or optimize is False:
        return None, None, None
    if optimize is True:
        return "greedy", None, None
    if isinstance(optimize, str):
        if optimize not in METHODS:
            raise PathNameError(f"einsum optimize={optimize!r} is not a path method; the "
                                f"methods are {', '.join(map(repr, METHODS))}")
        return optimize, None, None
    if isinstance(optimize, list | tuple) and optimize and isinstance(optimize[0], str) \
            and optimize[0] == "einsum_path":
        return None, None, optimize[1:]
    if (isinstance(optimize, list | tuple) and len(optimize) == 2
            and isinstance(optimize[0], str) and isinstance(optimize[1], int | float)):
        method, limit = _method(optimize[0])[0], float(optimize[1])
        return method, limit, None
    raise PathTypeError(f"einsum did not understand the path optimize={optimize!r}: expected "
                        "False, True, 'greedy', 'optimal', (method, memory_limit) or "
                        "['einsum_path', (i, j), ...]")


def _check(given: Sequence[Any], n: int) -> Path:
    """The explicit path ``given``, checked against an operand list that starts ``n`` long."""
    path = []
    for k, step in enumerate(given):
        try:
            pos = tuple(operator.index(p) for p in step)
        except TypeError as e:
            raise PathTypeError(f"einsum path step {k} is {step!r}, not a tuple of operand "
                                "positions") from e
        bad = [p for p in pos if not 0 <= p < n]
        if not pos or bad or len(set(pos)) != len(pos):
            what = (f"position {bad[0]} is not in [0, {n})" if bad else
                    "names no operand" if not pos else "repeats an operand")
            raise PathIndexError(f"einsum path step {k} {step!r} {what}: {n} operand(s) are "
                                 "left at that step")
        path.append(pos)
        n += 1 - len(pos)
    if n != 1 or not path:
        raise IncompletePathError(f"Invalid einsum_path is specified: {n - 1} more operands "
                                  f"has to be contracted (path {list(given)!r})")
    return tuple(path)


def normalize(subscripts: str, shapes: Sequence[tuple[int, ...]]) -> tuple[list[str], str]:
    """Each operand's subscripts and the output's, as numpy parses them: '...' spelled out
    with unused letters (the last ones of ``SYMBOLS``), the implicit output made explicit."""
    subs = subscripts.replace(" ", "")
    bad = [c for c in subs if c not in SYMBOLS and c not in ".,->"]
    if bad:
        raise OptionError(f"einsum subscripts {subscripts!r} have the invalid character "
                          f"{bad[0]!r}; subscripts must be letters")
    if ("-" in subs or ">" in subs) and (subs.count("-") > 1 or subs.count(">") > 1
                                         or subs.count("->") != 1):
        raise OptionError(f"einsum subscripts {subscripts!r} may hold one '->' and no other "
                          "'-' or '>'")
    lhs, arrow, rhs = subs.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ShapeError(f"einsum subscripts {subscripts!r} name {len(terms)} operand(s) but "
                         f"{len(shapes)} were given")
    unused = [c for c in SYMBOLS if c not in subs]
    longest = 0
    for k, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        n = _ellipsis_rank(term, shape, subscripts, k)
        longest = max(longest, n)
        terms[k] = term.replace("...", "".join(unused[len(unused) - n:]) if n else "")
    dots = "".join(unused[len(unused) - longest:]) if longest else ""
    if arrow:
        if rhs.replace("...", "", 1).count("."):
            raise OptionError(f"einsum subscripts {subscripts!r} have a '.' that is not part "
                              "of a single ellipsis ('...') in the output")
        if dots and "..." not in rhs:  # numpy's einsum refuses to sum them (einsum_path would)
            raise ShapeError(f"einsum operands have {longest} broadcast ('...') dimension(s) "
                             f"but the output subscripts {rhs!r} have no '...'")
        output = rhs.replace("...", dots)
    else:
        counts = Counter("".join(terms))
        output = dots + "".join(sorted(c for c, m in counts.items() if m == 1 and c not in dots))
    _check_output(output, terms, subscripts)
    return terms, output


def _ellipsis_rank(term: str, shape: tuple[int, ...], subscripts: str, k: int) -> int:
    """How many dims operand ``k``'s '...' stands for (0 without one)."""
    if "." not in term:
        return 0
    if term.count(".") != 3 or "..." not in term:
        raise OptionError(f"einsum subscripts {subscripts!r} have a '.' that is not part of a "
                          f"single ellipsis ('...') in operand {k}")
    n = len(shape) - (len(term) - 3)
    if n < 0:
        raise ShapeError(f"einsum operand {k} has {len(shape)} dimension(s) but its subscripts "
                         f"{term!r} name {len(term) - 3}")
    return n


def _check_output(output: str, terms: list[str], subscripts: str) -> None:
    for c, m in Counter(output).items():
        if m > 1:
            raise OptionError(f"einsum output subscript {c!r} appears more than once in "
                              f"{subscripts!r}")
        if not any(c in t for t in terms):
            raise OptionError(f"einsum output subscript {c!r} does not appear in any input "
                              f"of {subscripts!r}")


def _sizes(inputs: list[str], shapes: Sequence[tuple[int, ...]], dots: str) -> dict[str, int]:
    """Each index's extent; a size-1 dim broadcasts against a larger one, as in numpy.
    ``dots`` are the letters standing for '...' dims, named as such in errors."""
    sizes: dict[str, int] = {}
    source: dict[str, int] = {}  # the operand that gave sizes[c]
    for k, (term, shape) in enumerate(zip(inputs, shapes, strict=True)):
        if len(term) != len(shape):
            raise ShapeError(f"einsum operand {k} has {len(shape)} dimension(s) but its "
                             f"subscripts {term!r} name {len(term)}")
        for c, n in zip(term, shape, strict=True):
            if sizes.get(c, 1) == 1:
                sizes[c], source[c] = n, k
            elif n not in (1, sizes[c]):
                what = f"'...' dimension {dots.index(c)}" if c in dots else repr(c)
                raise ShapeError(f"einsum subscript {what} has extent {n} in operand {k} but "
                                 f"{sizes[c]} in operand {source[c]}")
    return sizes


def _size(labels: str | Labels, sizes: dict[str, int]) -> int:
    return math.prod(sizes[c] for c in labels)


def _flops(labels: Labels, inner: bool, terms: int, sizes: dict[str, int]) -> int:
    """numpy's flop count: a multiply per extra term, an add when something is summed."""
    return _size(labels, sizes) * (max(1, terms - 1) + int(inner))


def _result(pair: Sequence[Labels], rest: Sequence[Labels], output: Labels) -> Labels:
    """The indices a contraction of ``pair`` keeps: those the rest or the output still need."""
    joined = frozenset().union(*pair)
    return joined & output.union(*rest)


def _steps(inputs: list[str], output: str, sizes: dict[str, int],
           path: Path) -> tuple[Step, ...]:
    """Each step of ``path``: its subscripts (intermediates sorted by extent, then letter, as
    numpy names them), its cost, and the terms left after it."""
    terms = list(inputs)
    steps = []
    for k, positions in enumerate(path):
        pos = tuple(sorted(positions, reverse=True))
        taken = [terms[p] for p in pos]
        for p in pos:
            del terms[p]
        joined = frozenset("".join(taken))
        kept = _result([frozenset(t) for t in taken], [frozenset(t) for t in terms],
                       frozenset(output))
        result = output if k == len(path) - 1 else \
            "".join(sorted(kept, key=lambda c: (sizes[c], c)))
        terms.append(result)
        steps.append(Step(pos, f"{','.join(taken)}->{result}", tuple(terms),
                          _flops(joined, bool(joined - kept), len(pos), sizes), len(joined),
                          _size(kept, sizes)))
    return tuple(steps)


@dataclass(frozen=True)
class _Candidate:
    """A pair the greedy search may contract, keyed as numpy sorts them."""

    key: tuple[int, int]  # (-elements removed, flops)
    ids: tuple[int, int]  # the two tensors, by identity (positions shift as the list shrinks)
    result: Labels


def greedy_path(inputs: Sequence[Labels], output: Labels, sizes: dict[str, int],
                memory_limit: float) -> list[tuple[int, ...]]:
    """numpy's greedy path: at each step the pair whose contraction removes the most elements
    (then the fewest flops; then the first found, in numpy's order), leaving outer products
    until no other pair is left. Pairs whose result exceeds ``memory_limit`` elements, or
    that would take the path past the naive cost, are not considered."""
    if len(inputs) <= 2:
        return [tuple(range(len(inputs)))]
    every = frozenset().union(*inputs)
    naive = _flops(every, bool(every - output), len(inputs), sizes)
    tensors, ids = list(inputs), list(range(len(inputs)))
    pairs: list[tuple[int, int]] = list(combinations(range(len(tensors)), 2))
    known: list[_Candidate] = []
    path: list[tuple[int, ...]] = []
    cost = 0
    for _ in range(len(inputs) - 1):
        bound = (output, sizes, memory_limit, naive - cost)
        known += _candidates(pairs, tensors, ids, bound, outer=False)
        if not known:
            known = _candidates(list(combinations(range(len(tensors)), 2)), tensors, ids,
                                bound, outer=True)
            if not known:
                path.append(tuple(range(len(tensors))))
                break
        best = min(known, key=lambda c: c.key)  # the first of equals, as numpy's min
        x, y = sorted(ids.index(i) for i in best.ids)
        path.append((x, y))
        cost += best.key[1]
        known = [c for c in known if not set(c.ids) & set(best.ids)]
        del tensors[y], tensors[x], ids[y], ids[x]
        tensors.append(best.result)
        ids.append(len(inputs) + len(path))
        pairs = [(i, len(tensors) - 1) for i in range(len(tensors) - 1)]
    return path


def _candidates(pairs: list[tuple[int, int]], tensors: list[Labels], ids: list[int],
                bound: tuple[Labels, dict[str, int], float, int],
                outer: bool) -> list[_Candidate]:
    """The pairs among ``pairs`` (positions) worth considering, as candidates."""
    output, sizes, limit, budget = bound
    found = []
    for i, j in pairs:
        if not outer and tensors[i].isdisjoint(tensors[j]):
            continue
        rest = [t for k, t in enumerate(tensors) if k not in (i, j)]
        result = _result((tensors[i], tensors[j]), rest, output)
        size = _size(result, sizes)
        if size > limit:
            continue
        joined = tensors[i] | tensors[j]
        flops = _flops(joined, bool(joined - result), 2, sizes)
        if flops > budget:
            continue
        removed = _size(tensors[i], sizes) + _size(tensors[j], sizes) - size
        found.append(_Candidate((-removed, flops), (ids[i], ids[j]), result))
    return found


def optimal_path(inputs: Sequence[Labels], output: Labels, sizes: dict[str, int],
                 memory_limit: float) -> list[tuple[int, ...]]:
    """The path of fewest flops whose intermediates all fit in ``memory_limit`` elements.

    numpy's rules, so numpy's path: where the limit stops every path early, the path of most
    pairwise steps, the cheapest of those, then the rest in one step; among equals, the first
    in numpy's order of enumeration (the first pair, at each step, that an optimal path
    starts with). numpy tries every sequence of pairs (n! ways); here the cost of a group of
    operands depends only on the group, so a dynamic programme over groups does (3^n).
    """
    if len(inputs) <= 2:
        return [tuple(range(len(inputs)))]
    groups = _Groups(inputs, output, sizes, memory_limit)
    state = [1 << k for k in range(len(inputs))]  # each tensor as the operands it holds
    path: list[tuple[int, ...]] = []
    while len(state) > 1:
        goal = groups.best(frozenset(state))
        if goal[0] == 0:  # no pair fits the limit
            path.append(tuple(range(len(state))))
            break
        for i, j in combinations(range(len(state)), 2):
            a, b = state[i], state[j]
            if groups.size(a | b) > memory_limit:
                continue
            steps, flops = groups.best(frozenset(state) - {a, b} | {a | b})
            if (steps - 1, flops + groups.flops(a, b)) == goal:
                break
        path.append((i, j))
        state = [*state[:i], *state[i + 1:j], *state[j + 1:], a | b]
    return path


class _Groups:
    """Costs of contracting groups of operands, each group a bit mask over the operands; a
    tensor is a group already contracted, and what it keeps depends only on the group."""

    def __init__(self, inputs: Sequence[Labels], output: Labels, sizes: dict[str, int],
                 limit: float) -> None:
        self.inputs, self.output, self.sizes, self.limit = inputs, output, sizes, limit
        self.all = (1 << len(inputs)) - 1
        self._labels: dict[int, Labels] = {}
        self._trees: dict[frozenset[int], int | None] = {}
        self._best: dict[frozenset[int], tuple[int, int]] = {}

    def labels(self, group: int) -> Labels:
        """The indices of the tensor ``group`` contracts to (an operand keeps all of its)."""
        if group & (group - 1) == 0:
            return self.inputs[group.bit_length() - 1]
        if group not in self._labels:
            inside = [t for k, t in enumerate(self.inputs) if group >> k & 1]
            outside = [t for k, t in enumerate(self.inputs) if not group >> k & 1]
            self._labels[group] = _result(inside, outside, self.output)
        return self._labels[group]

    def size(self, group: int) -> int:
        return _size(self.labels(group), self.sizes)

    def flops(self, a: int, b: int) -> int:
        joined = self.labels(a) | self.labels(b)
        return _flops(joined, bool(joined - self.labels(a | b)), 2, self.sizes)

    def tree(self, tensors: frozenset[int]) -> int | None:
        """Fewest flops to contract ``tensors`` into one, every result within the limit."""
        if len(tensors) == 1:
            return 0
        if tensors not in self._trees:
            best = None
            if self.size(_union(tensors)) <= self.limit:
                for part in _halves(tensors):
                    a, b = self.tree(part), self.tree(tensors - part)
                    if a is not None and b is not None:
                        cost = a + b + self.flops(_union(part), _union(tensors - part))
                        best = cost if best is None else min(best, cost)
            self._trees[tensors] = best
        return self._trees[tensors]

    def best(self, tensors: frozenset[int]) -> tuple[int, int]:
        """(-pairwise steps, flops) of the best way on from ``tensors``: the most steps, then
        the fewest flops, with what is left over contracted in one step."""
        if not tensors:
            return 0, 0
        if tensors not in self._best:
            choices = []
            for part in _halves(tensors, whole=True):  # what the smallest is contracted with
                cost = self.tree(part)  # 0 for the smallest alone: there is always a choice
                if cost is not None:
                    steps, flops = self.best(tensors - part)
                    choices.append((steps - len(part) + 1, flops + cost))
            self._best[tensors] = min(choices)
        return self._best[tensors]


def _halves(tensors: frozenset[int], whole: bool = False) -> list[frozenset[int]]:
    """The subsets holding the smallest of ``tensors`` (so each split is seen once); the
    whole set only if ``whole``."""
    first, *rest = sorted(tensors)
    out = []
    for bits in range(1 << len(rest)):
        part = frozenset([first, *(t for k, t in enumerate(rest) if bits >> k & 1)])
        if whole or len(part) < len(tensors):
            out.append(part)
    return out


def _union(tensors: frozenset[int]) -> int:
    return reduce(operator.or_, tensors, 0)
