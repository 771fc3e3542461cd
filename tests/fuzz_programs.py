"""Random TC definitions for differential testing of schedules (Csmith-style).

Used by ``tests/schedules/test_fuzz_schedules.py`` and ``scripts/dev/fuzz_schedules.py``. Each
draw is a ``FuzzProgram``: TC source, sizes, and inputs it can fill with data. It does not
import polyopt: it only writes TC text, drawing from a ``random.Random`` (or hypothesis'
``st.randoms()``, whose draws shrink), so seeded campaigns and hypothesis share the code.

Families: ``contraction`` (einsum-like, several reduction operators, triangular ranges),
``elementwise`` (trees of builtins, broadcast and transposed reads, a select on raw
inputs), ``stencil`` (strided and dilated windows, pooling, explicit taps), ``conv``
(zero- and value-padded convolutions, depthwise, an epilogue), ``multi`` (chains of
statements through locals, in-place updates, side outputs) and ``recurrence`` (time-stepped
locals with value semantics, whose storage the compiler contracts to a few planes: shifted
reads, gathers by data, per-step coefficients; time loops of one step at times) and
``sweep`` (2-D recurrences over a declared output at extents a C compiler peels whole,
where GCC 12.2's vectorizer got a diagonal dependence wrong).

Data stays finite and small, so no NaN, inf or integer overflow reaches a comparison (those
are other work): floats in [-1, 1] ([0.5, 1.5] for inputs of products), integers in [-3, 3].
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

FAMILIES = ("contraction", "elementwise", "stencil", "conv", "multi", "recurrence", "sweep")
LETTERS = "ijklm"
SIZE_OF = {"i": "N", "j": "M", "k": "K", "l": "L", "m": "P"}
NUMPY_DTYPES = {"float": np.float32, "double": np.float64, "int32": np.int32}


@dataclass(frozen=True)
class Input:
    name: str
    dtype: str  # a TC type name: float, double or int32
    shape: tuple[str, ...]  # size names
    positive: bool = False  # values in [0.5, 1.5] (a product of many stays near 1)
    index_of: str = ""  # an index into this size: integers in [0, size)


@dataclass(frozen=True)
class FuzzProgram:
    family: str
    source: str
    name: str
    inputs: tuple[Input, ...]
    sizes: Mapping[str, int]

    @property
    def exact(self) -> bool:
        """Integer programs: every schedule must give the same bits."""
        return all(i.dtype == "int32" for i in self.inputs)

    def arrays(self, seed: int) -> list[np.ndarray]:
        """Finite inputs at ``sizes``, the same for the same seed."""
        rng = np.random.default_rng(seed)
        out = []
        for inp in self.inputs:
            shape = tuple(self.sizes[s] for s in inp.shape)
            dt = NUMPY_DTYPES[inp.dtype]
            if inp.index_of:
                out.append(rng.integers(0, self.sizes[inp.index_of], size=shape).astype(dt))
            elif inp.dtype == "int32":
                out.append(rng.integers(-3, 4, size=shape).astype(dt))
            elif inp.positive:
                out.append(rng.uniform(0.5, 1.5, size=shape).astype(dt))
            else:
                out.append(rng.uniform(-1.0, 1.0, size=shape).astype(dt))
        return out


def draw_program(rng: random.Random, family: str | None = None) -> FuzzProgram:
    """One random definition of ``family`` (any family when None)."""
    family = family or rng.choice(FAMILIES)
    prog = _BUILDERS[family](rng)
    used = {s for i in prog.inputs for s in i.shape}  # a size no input declares is no size
    sizes = {k: v for k, v in prog.sizes.items() if k in used}
    if rng.random() < 0.15:
        sizes = _grown(rng, sizes)
    return replace(prog, sizes=sizes)


def _grown(rng: random.Random, sizes: dict[str, int]) -> dict[str, int]:
    """Some sizes large enough for whole register and cache tiles (the micro-kernels),
    while the interpreter still runs in well under a second."""
    big = {k: (rng.randint(9, 40) if k not in ("KH", "KW") and rng.random() < 0.6 else v)
           for k, v in sizes.items()}
    return big if int(np.prod(list(big.values()))) <= 40_000 else sizes


def _extent(rng: random.Random, lo: int = 1, hi: int = 6) -> int:
    """Mostly small, sometimes 1 (a degenerate loop), never zero."""
    return 1 if rng.random() < 0.08 else rng.randint(max(lo, 2), hi)


def _signature(inputs: tuple[Input, ...]) -> str:
    def one(i: Input) -> str:
        return f"{i.dtype}({','.join(i.shape)}) {i.name}" if i.shape else f"{i.dtype} {i.name}"
    return ", ".join(one(i) for i in inputs)


def _def(name: str, inputs: tuple[Input, ...], outs: list[str], body: list[str],
         locs: list[str] = ()) -> str:  # type: ignore[assignment]
    local = f" local ({', '.join(locs)})" if locs else ""
    stmts = "\n".join(f"    {line}" for line in body)
    return f"def {name}({_signature(inputs)}) -> ({', '.join(outs)}){local} {{\n{stmts}\n}}"


# -- contractions ----------------------------------------------------------------------

def _contraction(rng: random.Random) -> FuzzProgram:
    if rng.random() < 0.15:
        return _triangular(rng)
    dtype = rng.choices(["float", "int32", "double"], [0.75, 0.15, 0.1])[0]
    used = rng.sample(LETTERS, rng.randint(1, 4))
    ops = [rng.sample(used, rng.randint(1, min(3, len(used)))) for _ in range(rng.randint(1, 3))]
    present = sorted({c for op in ops for c in op})
    out = rng.sample(present, rng.randint(0, min(3, len(present))))
    reduced = set(present) - set(out)
    ops_menu = ["+=!"] * 6 + ["max=!", "min=!"] + (["*=!"] if dtype != "int32" else [])
    assign = rng.choice(ops_menu) if reduced else rng.choice(["=", "=", "+=!"])
    positive = assign == "*=!"
    inputs = tuple(Input(f"T{k}", dtype, tuple(SIZE_OF[c] for c in op), positive)
                   for k, op in enumerate(ops))
    rhs = " * ".join(f"T{k}({', '.join(_reduction_names(op, reduced))})"
                     for k, op in enumerate(ops))
    if rng.random() < 0.3:
        rhs = f"{rhs} + {rng.choice(['1', '2', '-1'])}" if dtype == "int32" else \
            f"{rhs} * {rng.choice(['0.5', '2.0', '-1.5'])}"
    lhs = f"O({', '.join(out)})" if out else "O"
    src = _def("fc", inputs, ["O"], [f"{lhs} {assign} {rhs}"])
    sizes = {SIZE_OF[c]: _extent(rng) for c in present}
    return FuzzProgram("contraction", src, "fc", inputs, sizes)


def _reduction_names(op: list[str], reduced: set[str]) -> list[str]:
    return [f"r_{c}" if c in reduced else c for c in op]


def _triangular(rng: random.Random) -> FuzzProgram:
    """A reduction over a triangle (``r_k in 0:i+1``): a prefix sum or a lower-triangular
    product, whose domains are not boxes."""
    if rng.random() < 0.5:
        inputs = (Input("x", "float", ("N",)),)
        body = ["y(i) +=! x(r_j) where i in 0:N, r_j in 0:i+1"]
        return FuzzProgram("contraction", _def("tri", inputs, ["y"], body), "tri", inputs,
                           {"N": _extent(rng, 1, 9)})
    inputs = (Input("A", "float", ("N", "N")), Input("B", "float", ("N", "M")))
    body = ["C(i,j) +=! A(i,r_k) * B(r_k,j) where r_k in 0:i+1"]
    return FuzzProgram("contraction", _def("tri", inputs, ["C"], body), "tri", inputs,
                       {"N": _extent(rng), "M": _extent(rng)})


# -- elementwise trees -----------------------------------------------------------------

# Builtins on any finite value, and guarded forms of those with a restricted domain.
UNARY = ("exp({})", "tanh({})", "fabs({})", "sin({})", "cos({})", "(-{})", "erf({})",
         "sqrt(fabs({}))", "log(1 + fabs({}))", "expm1(tanh({}))", "atan({})")
BINARY = ("({} + {})", "({} - {})", "({} * {})", "fmax({}, {})", "fmin({}, {})",
          "({} / (1 + fabs({})))", "max({}, {})", "min({}, {})")
LEAVES = ("x(i, j)", "y(i, j)", "b(j)", "xt(j, i)")


def _tree(rng: random.Random, depth: int, leaves: tuple[str, ...],
          raw: tuple[str, ...] = ()) -> str:
    """An expression over ``leaves``; selects compare two ``raw`` (input) leaves."""
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.15:
            return rng.choice(["0.5", "2.0", "-1.25"])
        return rng.choice(leaves)
    kind = rng.random()
    if kind < 0.4:
        return rng.choice(UNARY).format(_tree(rng, depth - 1, leaves, raw))
    if kind < 0.9 or len(raw) < 2:
        return rng.choice(BINARY).format(_tree(rng, depth - 1, leaves, raw),
                                         _tree(rng, depth - 1, leaves, raw))
    # A select on raw inputs only: the float32 kernel and the float64 reference then
    # compare the same values and take the same branch.
    a, b = rng.sample(raw, 2)
    then, other = _tree(rng, depth - 1, leaves, raw), _tree(rng, depth - 1, leaves, raw)
    return f"({a} > {b} ? {then} : {other})"


def _elementwise(rng: random.Random) -> FuzzProgram:
    inputs = (Input("x", "float", ("N", "M")), Input("y", "float", ("N", "M")),
              Input("b", "float", ("M",)), Input("xt", "float", ("M", "N")))
    leaves = LEAVES
    if rng.random() < 0.25:  # a gather: rows of a table picked by data
        inputs = (*inputs, Input("Tab", "float", ("V", "M")),
                  Input("Idx", "int32", ("N",), index_of="V"))
        leaves = (*LEAVES, "Tab(Idx(i), j)")
    body = [f"z(i, j) = {_tree(rng, 3, leaves, LEAVES)} where exists x(i, j)"]
    outs = ["z"]
    if rng.random() < 0.25:  # an in-place update of the first
        body.append(f"z(i, j) = {_tree(rng, 1, ('z(i, j)', 'b(j)'))} where exists x(i, j)")
    if rng.random() < 0.4:  # a second output, reading the first
        body.append(f"w(i, j) = {_tree(rng, 2, (*LEAVES, 'z(i, j)'), LEAVES)} "
                    f"where exists x(i, j)")
        outs.append("w")
    return FuzzProgram("elementwise", _def("ew", inputs, outs, body), "ew", inputs,
                       {"N": _extent(rng, 1, 7), "M": _extent(rng, 1, 7), "V": _extent(rng)})


# -- stencils --------------------------------------------------------------------------

def _stencil(rng: random.Random) -> FuzzProgram:
    kind = rng.choice(["taps", "window", "pool"])
    s, d = rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2])
    dtype = rng.choices(["float", "int32"], [0.8, 0.2])[0]
    kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    sizes = {"H": rng.randint(d * (kh - 1) + 1, 9), "W": rng.randint(kw, 9)}
    inputs: tuple[Input, ...] = (Input("I", dtype, ("H", "W")),)
    if kind == "taps":
        taps = {(rng.randint(0, 2), rng.randint(0, 2)) for _ in range(rng.randint(1, 4))}
        lo_a, lo_b = min(a for a, _ in taps), min(b for _, b in taps)  # outputs start at 0
        taps = {(a - lo_a, b - lo_b) for a, b in taps}
        sizes = {"H": rng.randint(3, 9), "W": rng.randint(3, 9)}
        coef = ["2", "-1", "3"] if dtype == "int32" else ["0.5", "-1.0", "0.25"]
        terms = [f"{rng.choice(coef)} * I({_affine(s, 'h', a)}, {_affine(1, 'w', b)})"
                 for a, b in sorted(taps)]
        body = [f"O(h, w) = {' + '.join(terms)}"]
    elif kind == "window":
        inputs = (*inputs, Input("K", dtype, ("KH", "KW")))
        sizes |= {"KH": kh, "KW": kw}
        body = [f"O(h, w) +=! I({_affine(s, 'h', d, 'r_u')}, {_affine(s, 'w', 1, 'r_v')}) * "
                f"K(r_u, r_v)"]
    else:
        op = rng.choice(["max=!", "min=!", "+=!"])
        body = [f"O(h, w) {op} I({_affine(s, 'h', d, 'r_u')}, {_affine(s, 'w', 1, 'r_v')}) "
                f"where r_u in 0:{kh}, r_v in 0:{kw}"]
    return FuzzProgram("stencil", _def("st", inputs, ["O"], body), "st", inputs, sizes)


def _affine(coef: int, var: str, *rest: int | str) -> str:
    """``coef*var`` plus terms: ``(c, name)`` pairs and constants, as ``2*h + r_u - 1``."""
    text = var if coef == 1 else f"{coef}*{var}"
    items = list(rest)
    while items:
        item = items.pop(0)
        if isinstance(item, int) and items and isinstance(items[0], str):
            name = items.pop(0)
            text += f" + {name}" if item == 1 else f" + {item}*{name}"
        elif isinstance(item, int) and item:
            text += f" + {item}" if item > 0 else f" - {-item}"
    return text


# -- padded convolutions ---------------------------------------------------------------

def _pad_width(rng: random.Random) -> str:
    before, after = rng.randint(0, 2), rng.randint(0, 2)
    return str(before) if before == after and rng.random() < 0.7 else f"{before}:{after}"


def _conv(rng: random.Random) -> FuzzProgram:
    two_d, depthwise = rng.random() < 0.6, rng.random() < 0.2
    s, d = rng.choice([1, 1, 2]), rng.choice([1, 1, 2])
    sizes = {"C": _extent(rng, 1, 3), "F": _extent(rng, 1, 3), "KH": rng.randint(1, 3),
             "H": rng.randint(2, 7)}
    widths = [_pad_width(rng)]
    win = [_affine(s, "h", d, "r_kh", -int(widths[0].split(":")[0]))]
    out_ix, k_ix = ["h"], ["r_kh"]
    if two_d:
        sizes |= {"KW": rng.randint(1, 3), "W": rng.randint(2, 7)}
        widths.append(_pad_width(rng))
        win.append(_affine(s, "w", 1, "r_kw", -int(widths[1].split(":")[0])))
        out_ix, k_ix = ["h", "w"], ["r_kh", "r_kw"]
    chan = "c" if depthwise else "r_c"
    fch = "c" if depthwise else "f"
    i_shape = ("C", "H", "W") if two_d else ("C", "H")
    w_shape = ("C", "KH", "KW") if depthwise else ("F", "C", "KH", "KW")
    w_shape = w_shape if two_d else w_shape[:-1]
    w_ix = [chan, *k_ix] if depthwise else [fch, chan, *k_ix]
    fill = f" = {rng.choice(['0.5', '-1.0'])}" if rng.random() < 0.25 else ""
    pad = f"pad I(0, {', '.join(widths)}){fill}"
    in_signature = rng.random() < 0.3
    inputs = [Input("I", "float", i_shape), Input("Wt", "float", w_shape)]
    _check_fits(sizes, widths, s, d)
    body = [f"O({fch}, {', '.join(out_ix)}) +=! I({chan}, {', '.join(win)}) * "
            f"Wt({', '.join(w_ix)})" + ("" if in_signature else f" where {pad}")]
    if rng.random() < 0.35:
        inputs.append(Input("bias", "float", ("C",) if depthwise else ("F",)))
        o = f"O({fch}, {', '.join(out_ix)})"
        body.append(f"{o} = fmax({o} + bias({fch}), 0)")
    src = _def("cv", tuple(inputs), ["O"], body)
    if in_signature:
        src = src.replace(" I,", f" I {pad[4:].replace('I(', 'pad(', 1)},", 1)
    return FuzzProgram("conv", src, "cv", tuple(inputs), sizes)


def _check_fits(sizes: dict[str, int], widths: list[str], s: int, d: int) -> None:
    """Grow the input until every output extent is at least one."""
    for dim, k, width in zip(("H", "W"), ("KH", "KW"), widths, strict=False):
        lo, _, hi = width.partition(":")
        padded = int(lo) + int(hi or lo)
        sizes[dim] = max(sizes[dim], d * (sizes[k] - 1) + 1 - padded, 1)


# -- multi-statement chains through locals ---------------------------------------------

@dataclass
class _Chain:
    rng: random.Random
    inputs: list[Input]
    body: list[str]
    tensors: list[str]
    full: bool = True  # the current tensor spans (N, M): inputs of that shape fit it
    rows: str = "N"  # size name of its second dimension, when full
    cols: str = "M"
    ahead: tuple[int, int] = (0, 0)  # rows and columns the shifted reads reach ahead

    def new_input(self, shape: tuple[str, ...], positive: bool = False) -> str:
        name = f"a{len(self.inputs)}"
        self.inputs.append(Input(name, "float", shape, positive))
        return name

    def new_tensor(self) -> str:
        self.tensors.append(f"t{len(self.tensors)}")
        return self.tensors[-1]


def _stage(ch: _Chain) -> None:
    cur = ch.tensors[-1]
    kind = ch.rng.choice(["matmul", "ew", "norm", "shift", "update", "side"] +
                         (["accumulate"] if ch.full else []))
    if kind == "update":  # an in-place rewrite: reads its target at the LHS indices
        ch.body.append(f"{cur}(i, j) = {_tree(ch.rng, 1, (f'{cur}(i, j)',))} "
                       f"where exists {cur}(i, j)")
        return
    if kind == "accumulate":  # op= without !, onto what the chain computed
        a = ch.new_input((ch.rows, "R"))
        b = ch.new_input(("R", ch.cols))
        ch.body.append(f"{cur}(i, j) += {a}(i, r_r) * {b}(r_r, j)")
        return
    new = ch.new_tensor()
    if kind == "matmul":
        if ch.full:
            w = ch.new_input((ch.cols, "K"))
            ch.body.append(f"{new}(i, k) +=! {cur}(i, r_j) * {w}(r_j, k)")
        else:  # the current extents are no size names: a row sum times a vector
            w = ch.new_input(("K",))
            ch.body.append(f"{new}(i, k) +=! {cur}(i, r_j) * {w}(k)")
        ch.cols = "K"
    elif kind == "ew":
        ch.body.append(f"{new}(i, j) = {_tree(ch.rng, 2, (f'{cur}(i, j)',))} "
                       f"where exists {cur}(i, j)")
    elif kind == "norm":  # a row reduction, then a broadcast over the row
        s = ch.new_tensor()
        ch.tensors[-2], ch.tensors[-1] = s, new
        ch.body.append(f"{s}(i) +=! {cur}(i, r_j)")
        ch.body.append(f"{new}(i, j) = {cur}(i, j) / (1 + fabs({s}(i)))")
    elif kind == "shift":  # neighbours: the consumer needs its producer one row ahead
        di, dj = ch.rng.choice([(1, 0), (0, 1), (1, 1), (2, 0)])
        ch.body.append(f"{new}(i, j) = {cur}(i, j) + 0.5 * {cur}(i + {di}, j + {dj})")
        ch.full = False
        ch.ahead = (ch.ahead[0] + di, ch.ahead[1] + dj)
    else:  # side: an independent output from the chain's first input
        ch.tensors.pop()
        side = f"u{len(ch.body)}"
        ch.body.append(f"{side}(i) +=! a0(i, r_j) * a0(i, r_j)" if ch.rng.random() < 0.5
                       else f"{side}(i, j) = exp(a0(i, j))")
        ch.tensors.insert(0, side)


def _multi(rng: random.Random) -> FuzzProgram:
    ch = _Chain(rng, [Input("a0", "float", ("N", "M"))], [], [])
    first = ch.new_tensor()
    ch.body.append(f"{first}(i, j) = {_tree(rng, 1, ('a0(i, j)',))} where exists a0(i, j)")
    for _ in range(rng.randint(1, 3)):
        _stage(ch)
    last = ch.tensors[-1]
    outs = [t for t in ch.tensors if t == last or t.startswith("u") or rng.random() < 0.25]
    locs = [t for t in ch.tensors if t not in outs]
    # Each shifted stage reads rows and columns ahead: the last one must keep at least one.
    rows, cols = (max(3, n + 1) for n in ch.ahead)
    sizes = {"N": rng.randint(rows, rows + 3), "M": rng.randint(cols, cols + 3),
             "K": _extent(rng),
             "R": _extent(rng, 1, 4)}
    src = _def("ml", tuple(ch.inputs), outs, ch.body, locs)
    return FuzzProgram("multi", src, "ml", tuple(ch.inputs), sizes)


# -- recurrences -----------------------------------------------------------------------

def _recurrence(rng: random.Random) -> FuzzProgram:
    """Plane 0 of a ``(T, N)`` local from an input, each later plane from earlier ones
    (reference §5.5), the output its last plane or a sum over planes. The time extent is 1
    at times (the recurrence's piece is empty), a ``<T=..>`` parameter or the size of an
    input of per-step coefficients; every size is bound when a pair is specialized, so
    storage contraction keeps a few planes of the local (schedules/storage.py)."""
    steps = 1 if rng.random() < 0.3 else rng.randint(2, 6)
    inputs = [Input("A0", "float", ("N",))]
    terms = ["A(t-1, i)"]
    if rng.random() < 0.5:  # a gather by data: its range check meets the contracted planes
        inputs.append(Input("idx", "int32", ("N",), index_of="N"))
        terms.append(rng.choice(["A(t-1, idx(i))", "A(t - 1, idx(i))", "A0(idx(i))"]))
    if rng.random() < 0.3:  # two steps back: a third plane stays alive
        terms.append("A(t-2, i)")
    coef = rng.random() < 0.3  # T is then a size (of c), not a <...> parameter
    if coef:
        inputs.append(Input("c", "float", ("T",)))
        terms.append("c(t)")
    first = "A(t,i) = A0(i) where t in 0:1, i in 0:N"
    if "A(t-2, i)" in terms:
        first = "A(t,i) = A0(i) where t in 0:2, i in 0:N"
    body = [first, f"A(t,i) = ({' + '.join(terms)}) * {1 / len(terms):.4f} "
                   f"where t in {2 if 'A(t-2, i)' in terms else 1}:T, i in 0:N"]
    if rng.random() < 0.5:
        body.append("B(i) = A(T-1, i)")
    else:
        body.append("B(i) +=! A(r_t, i)")
    sizes = {"N": rng.randint(1, 7)}
    if "A(t-2, i)" in terms:
        steps = max(steps, 2)  # plane 1 comes from the input too: T >= 2 (T = 2: no step)
    name = "rc"
    src = _def(name, tuple(inputs), ["B"], body, ["float(T,N) A"])
    if coef:
        sizes["T"] = steps
    else:
        src = src.replace(f"def {name}(", f"def {name}<T={steps}>(", 1)
    return FuzzProgram("recurrence", src, name, tuple(inputs), sizes)


# Neighbours an element of a sweep may read, (rows, columns) back: each computed before it.
_SWEEP_OFFSETS = ((1, 1), (1, 0), (0, 1), (1, -1), (2, 1), (1, 2), (2, -1))


def _sweep(rng: random.Random) -> FuzzProgram:
    """A 2-D recurrence over a declared output, its borders from an input and each inner
    element from one to three neighbours computed before it (``S(i,j) = c * S(i-1,j-1)``
    and the like), at extents of 2-17: a C compiler peels such loops completely and may then
    vectorize the loop that carries the dependence (GCC 12.2 did, wrongly: the class that
    ``codegen.dialect.Dialect.carried_loop_guard`` keeps it from)."""
    offsets = rng.sample(_SWEEP_OFFSETS, rng.randint(1, 3))
    top = max(a for a, _ in offsets)
    left, right = max(0, *(b for _, b in offsets)), max(0, *(-b for _, b in offsets))
    n, m = rng.randint(top + 1, 17), rng.randint(left + right + 1, 17)
    coef = [round(rng.uniform(0.2, 0.9) / len(offsets), 3) for _ in offsets]
    terms = " + ".join(f"{c} * S(i-{a}, j{-b:+d})" for c, (a, b) in zip(coef, offsets, strict=True))
    body = [*([f"S(i,j) = B(i,j) where i in 0:{top}, j in 0:M"] if top else []),
            *([f"S(i,j) = B(i,j) where i in {top}:N, j in 0:{left}"] if left else []),
            *([f"S(i,j) = B(i,j) where i in {top}:N, j in M-{right}:M"] if right else []),
            f"S(i,j) = {terms} + 0.1 * B(i,j) where i in {top}:N, j in {left}:M-{right}"]
    inputs = (Input("B", "float", ("N", "M")),)
    src = _def("sw", inputs, ["float(N,M) S"], body)
    return FuzzProgram("sweep", src, "sw", inputs, {"N": n, "M": m})


_BUILDERS = {"contraction": _contraction, "elementwise": _elementwise, "stencil": _stencil,
             "conv": _conv, "multi": _multi, "recurrence": _recurrence, "sweep": _sweep}
