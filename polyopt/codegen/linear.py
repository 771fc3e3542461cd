"""Linear forms: index arithmetic as {name: coefficient} maps ("" is the constant).

The register-tile printer reasons about addresses with these: which operands move with
the unrolled rows or the vector lanes, and where each load starts. Floor division and
modulo by a constant stay linear when the part they cut lies inside one block, as in
packed layouts (``n / 32`` and ``n % 32`` for ``n = 32*c1 + lane``). With ``atoms``, a
division whose operand does not move with the lanes, and that does not cut whole blocks (a
grouped convolution's input channel ``(f / 4) * 4 + c`` at an outer ``f``), is a term of its
own: a floor-division atom, which ``text`` prints as ``po_floord``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import islpy as isl

from polyopt import ir

Lin = dict[str, int]
LANE = "@lane"  # the position inside a vector, in [0, lanes)
ATOM = "@floord"  # prefix of a floor-division atom's name: "@floord 4 c0*1 *-1"


def ast_lin(e: isl.AstExpr) -> Lin | None:
    """An isl AST expression as a linear form, when it is one."""
    kind = e.get_type()
    if kind == isl.ast_expr_type.int:
        return {"": int(e.int_get_val().to_python())}
    if kind == isl.ast_expr_type.id:
        return {e.get_id().get_name(): 1}
    op = e.get_op_type()
    args = [ast_lin(e.get_op_arg(i)) for i in range(e.get_op_n_arg())]
    if any(a is None for a in args):
        return None
    parts: list[Lin] = [a for a in args if a is not None]
    if op == isl.ast_expr_op_type.add:
        return add(parts[0], parts[1])
    if op == isl.ast_expr_op_type.sub:
        return add(parts[0], _scale(parts[1], -1))
    if op == isl.ast_expr_op_type.minus:
        return _scale(parts[0], -1)
    if op == isl.ast_expr_op_type.mul:
        a, b = parts
        if set(a) <= {""}:
            return _scale(b, a.get("", 0))
        if set(b) <= {""}:
            return _scale(a, b.get("", 0))
    return None


def add(a: Lin, b: Lin) -> Lin:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return {k: v for k, v in out.items() if v or k == ""}


def _scale(a: Lin, f: int) -> Lin:
    return {k: v * f for k, v in a.items() if v * f or k == ""}


def index_lin(e: ir.Expr, env: Mapping[str, Lin], lanes: int = 1,
              atoms: bool = False) -> Lin | None:
    """An index expression over a statement's iterators as a linear form over ``env``'s
    (``atoms``: with floor-division atoms, see the module's docstring)."""
    if isinstance(e, ir.Const) and not isinstance(e.value, float):
        return {"": int(e.value)}
    if isinstance(e, ir.Var):
        return dict(env[e.name]) if e.kind == "index" and e.name in env else (
            None if e.kind == "index" else {e.name: 1})
    if isinstance(e, ir.Cast) and not e.dtype.startswith("float"):
        return index_lin(e.x, env, lanes, atoms)
    if isinstance(e, ir.Unary) and e.op == "-":
        a = index_lin(e.x, env, lanes, atoms)
        return None if a is None else _scale(a, -1)
    if not isinstance(e, ir.Binary):
        return None
    a, b = index_lin(e.a, env, lanes, atoms), index_lin(e.b, env, lanes, atoms)
    if a is None or b is None:
        return None
    if e.op == "+":
        return add(a, b)
    if e.op == "-":
        return add(a, _scale(b, -1))
    if e.op == "*":
        if set(a) <= {""}:
            return _scale(b, a.get("", 0))
        return _scale(a, b.get("", 0)) if set(b) <= {""} else None
    if e.op in ("/", "%") and set(b) == {""} and b[""] > 0:
        qr = divmod_lin(a, b[""], lanes) or (_atom(a, b[""]) if atoms else None)
        return None if qr is None else qr[0 if e.op == "/" else 1]
    return None


def _atom(a: Lin, d: int) -> tuple[Lin, Lin] | None:
    """``(a // d, a % d)`` with the part of ``a`` that does not move in whole blocks of
    ``d`` (``kw`` of ``2*w + kw``) cut by a floor-division atom, when that part does not
    move with the lanes and holds no atom itself."""
    whole = {k: v for k, v in a.items() if k and v % d == 0}
    rest = {k: v for k, v in a.items() if k not in whole}
    if LANE in rest or any(k.startswith(ATOM) for k in a):
        return None
    name = " ".join([f"{ATOM} {d}", *(f"{k}*{v}" for k, v in sorted(rest.items()))])
    quotient = add({k: v // d for k, v in whole.items()}, {name: 1})
    return quotient, add(rest, {name: -d})


def names_in(a: Lin) -> set[str]:
    """The names a linear form reads, those inside its atoms included."""
    out = set()
    for k in a:
        if k.startswith(ATOM):
            out |= {term.split("*")[0] for term in k.split()[2:]} - {""}
        elif k:
            out.add(k)
    return out


def divmod_lin(a: Lin, d: int, lanes: int) -> tuple[Lin, Lin] | None:
    """``(a // d, a % d)`` when every variable but the lane moves in whole blocks of ``d``
    and the lane stays inside one block."""
    rest = {k: v for k, v in a.items() if k not in ("", LANE)}
    if any(v % d for v in rest.values()):
        return None
    q, r = divmod(a.get("", 0), d)
    lane = a.get(LANE, 0)
    if lane < 0 or r + lane * (lanes - 1) >= d:
        return None
    quotient = {k: v // d for k, v in rest.items()}
    quotient[""] = q
    rem = {"": r, LANE: lane} if lane else {"": r}
    return quotient, rem


def substitute(a: Lin, values: Mapping[str, Lin]) -> Lin:
    """``a`` with some names replaced by linear forms."""
    out: Lin = {"": a.get("", 0)}
    for k, v in a.items():
        if k:
            out = add(out, _scale(values[k], v) if k in values else {k: v})
    return out


def text(a: Lin, name: Callable[[str], str]) -> str:
    """C ``long`` text of a linear form (the lane taken as 0)."""
    terms = [f"{v}L * {_name(k, name)}" if v != 1 else _name(k, name)
             for k, v in sorted(a.items()) if k not in ("", LANE) and v]
    if a.get("", 0) or not terms:
        terms.append(f"{a.get('', 0)}L")
    return "(" + " + ".join(terms) + ")"


def _name(k: str, name: Callable[[str], str]) -> str:
    """C text of one term's name: a variable's, or a floor-division atom's."""
    if not k.startswith(ATOM):
        return name(k)
    d, *terms = k.split()[1:]
    form = {var: int(v) for var, v in (term.rsplit("*", 1) for term in terms)}
    return f"po_floord({text(form, name)}, {d}L)"


def const_trip(loop: isl.AstNode) -> tuple[int, int] | None:
    """(first value, trip count) of a unit-stride loop with constant bounds."""
    lo, cond = ast_lin(loop.for_get_init()), loop.for_get_cond()
    if lo is None or set(lo) - {""} or ast_lin(loop.for_get_inc()) != {"": 1} \
            or cond.get_type() != isl.ast_expr_type.op:
        return None
    op, it = cond.get_op_type(), loop.for_get_iterator().get_id().get_name()
    hi = ast_lin(cond.get_op_arg(1))
    if op not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt) or hi is None \
            or set(hi) - {""} or ast_lin(cond.get_op_arg(0)) != {it: 1}:
        return None
    first = lo.get("", 0)
    return first, hi.get("", 0) - first + (op == isl.ast_expr_op_type.le)
