"""The pieces the data-layout rewrites share (``relayout``, ``subsample``): index
arithmetic on linear index expressions, the checks a packed copy of an input needs, and the
copy statement itself."""

from __future__ import annotations

from polyopt import ir
from polyopt.errors import ScheduleError


def linear_terms(e: ir.Expr) -> dict[str, int] | None:
    """An index expression as {index variable: coefficient, "": constant}, when linear."""
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return {"": e.value}
    if isinstance(e, ir.Var) and e.kind == "index":
        return {e.name: 1}
    if not (isinstance(e, ir.Binary) and e.op in ("+", "-", "*")):
        return None
    a, b = linear_terms(e.a), linear_terms(e.b)
    if a is None or b is None:
        return None
    if e.op == "*":
        if set(a) <= {""} or set(b) <= {""}:
            k, other = (a.get("", 0), b) if set(a) <= {""} else (b.get("", 0), a)
            return {v: c * k for v, c in other.items()}
        return None
    sign = 1 if e.op == "+" else -1
    out = dict(a)
    for v, c in b.items():
        out[v] = out.get(v, 0) + sign * c
    return {v: c for v, c in out.items() if c or v == ""}


def term_sum(terms: dict[str, int], dtype: str) -> ir.Expr | None:
    """``sum(c * v)`` over ``terms`` (None when there are none; "" is the constant)."""
    out: ir.Expr | None = None
    for v, c in sorted(terms.items()):
        if not c:
            continue
        term: ir.Expr = ir.Const(dtype, c) if not v else ir.Var(dtype, v, "index")
        if v and c != 1:
            term = ir.Binary(dtype, "*", ir.Const(dtype, c), term)
        out = plus(out, term)
    return out


def plus(a: ir.Expr | None, b: ir.Expr) -> ir.Expr:
    return b if a is None else ir.Binary(b.dtype, "+", a, b)


def check_blocking(t: ir.Tensor, dim: int, factor: int, outer: int) -> None:
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < t.rank:
        raise ScheduleError(f"pack: dim must be in 0..{t.rank - 1} for {t.name}, not {dim!r}")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise ScheduleError(f"pack: factor must be a positive integer, not {factor!r}")
    if isinstance(outer, bool) or not isinstance(outer, int) or not 0 <= outer < t.rank:
        raise ScheduleError(f"pack: outer must be in 0..{t.rank - 1}, not {outer!r}")


def packable(program: ir.Program, tensor: str, dim: int, factor: int,
              outer: int, padded_dim: bool = False) -> ir.Tensor:
    t = program.tensors.get(tensor)
    if t is None or t.role != "input":
        names = ", ".join(x.name for x in (*program.inputs, *program.outputs))
        raise ScheduleError(f"pack: {tensor!r} is not an input or output of def "
                            f"'{program.name}'; they are: {names}")
    check_blocking(t, dim, factor, outer)
    shared_padding(program, tensor, dim, padded_dim)
    return t


def shared_padding(program: ir.Program, tensor: str, dim: int,
             padded_dim: bool = False) -> tuple[tuple[ir.Pad, ...] | None, float]:
    """The zero padding every read of ``tensor`` shares (the copy then holds it), or None;
    along ``dim`` only when ``padded_dim`` (a phase copy)."""
    kinds = {(e.pad, e.fill) for s in program.stmts for e in s.rhs.walk()
             if isinstance(e, ir.Read) and e.tensor == tensor}
    if len(kinds) > 1:
        raise ScheduleError(f"pack: the reads of {tensor} pad it differently; a packed copy "
                            f"holds one padding")
    pad, fill = next(iter(kinds)) if kinds else (None, 0.0)
    if pad is not None:
        if any(size_expr(w) is None for p in pad for w in (p.before, p.after)):
            widths = ", ".join(map(str, pad))
            raise ScheduleError(f"pack: {tensor}'s padding {widths} is not a size or a number")
        if not pad[dim].is_zero and not padded_dim:
            raise ScheduleError(f"pack: {tensor} is padded along dim {dim}, the one to block")
    return pad, fill


def size_expr(text: str) -> ir.Expr | None:
    """A padding width (a number or a size name) as an index expression."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return ir.Const("int32", int(text))
    return ir.Var("int32", text, "size") if text.isidentifier() else None


def width(text: str) -> ir.Expr:
    """A width ``_padding`` accepted, as an index expression."""
    e = size_expr(text)
    assert e is not None, text
    return e


def shifted(index: tuple[ir.Expr, ...],
             pad: tuple[ir.Pad, ...] | None) -> tuple[ir.Expr, ...]:
    """Indices into the padded copy: each moved by its dimension's leading padding."""
    if pad is None:
        return index
    out = []
    for ix, p in zip(index, pad, strict=True):
        width = size_expr(p.before)
        out.append(ix if p.before == "0" or width is None else ir.Binary(ix.dtype, "+", ix, width))
    return tuple(out)


def copy_of(program: ir.Program, t: ir.Tensor, packed: ir.Tensor, iters: tuple[str, ...],
             source: list[ir.Expr], pad: tuple[ir.Pad, ...] | None, fill: float,
             within: str = "") -> ir.Stmt:
    """The statement ``packed[iters] = t[source]`` over ``packed``'s box and ``within`` (the
    split dimension's last block is partial); ``source`` in ``t``'s unpadded coordinates
    when ``pad`` (packed coordinates are padded ones)."""
    if pad is not None:
        source = [ix if p.before == "0" else ir.Binary("int32", "-", ix, width(p.before))
                  for ix, p in zip(source, pad, strict=True)]
    bounds = [f"0 <= {p} < {e}" for p, e in zip(iters, packed.shape, strict=True)]
    if within:
        bounds.append(within)
    name = f"{packed.name}_0"
    domain = f"{program.params} -> {{ {name}[{', '.join(iters)}] : {' and '.join(bounds)} }}"
    rhs = ir.Read(t.dtype, t.name, tuple(source), pad, fill)
    return ir.Stmt(name, packed.name, iters, iters, "=", False, rhs, domain)
