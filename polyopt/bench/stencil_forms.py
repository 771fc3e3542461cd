"""Equivalent formulations of the bundled stencils (kernels/stencil.tc), for issue 40: each
computes what the bundled def computes, written another way, and should compile to the
same storage and the same time tiling (``lang.copyflow`` sees through their copies).

- ``input``: the bundled def: every step's edges copied from the input;
- ``previous``: the first step's edges from the input, each later step's copied from the
  step before (``At(t,i) = At(t-1,i) where t in 1:T``), a chain of copies;
- ``staged``: the input first copied whole into a local (``A_s(i) = A(i)``), which the def
  then reads in place of the input (as a layout pass stages a padded copy);
- ``piecewise``: one statement per local over its whole planes, its edges a condition
  (``At(t,i) = (1 <= i && i < N-1) ? <stencil> : A(i) where t in 0:T, i in 0:N``; the first
  step's stencil, which reads the input, is a ``t == 0 ?`` arm).

``source(name, kind)`` is the text of def ``name`` (renamed ``<name>_<kind>``). ``polyopt
bench formulations`` times them; tests/pipeline/test_formulations.py checks them."""

from __future__ import annotations

import re

from polyopt import kernels

NAMES = ("jacobi_1d", "jacobi_2d", "heat_3d")
KINDS = ("input", "previous", "staged", "piecewise")
_INPUTS = ("A", "B")
# an edge statement: ``At(t,i,j) = A(i,j) where t in 0:T, <the edge's ranges>``
_EDGE = re.compile(r"^(\s*)(\w+)\(t,([\w,]+)\) = (\w+)\(\3\) where t in 0:T, (.*)$")


def source(name: str, kind: str) -> str:
    """Def ``name`` of kernels/stencil.tc written as ``kind`` (see the module's doc)."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}; valid: {', '.join(KINDS)}")
    text = kernels.get(name).replace(f"def {name}<", f"def {name}_{kind}<")
    if kind == "previous":
        text = "\n".join(_previous(line) for line in text.splitlines())
    elif kind == "staged":
        text = _staged(text)
    elif kind == "piecewise":
        text = _piecewise(text)
    return text


def _previous(line: str) -> str:
    m = _EDGE.match(line)
    if m is None:
        return line
    pad, local, idx, inp, ranges = m.groups()
    return (f"{pad}{local}(t,{idx}) = {inp}({idx}) where t in 0:1, {ranges}\n"
            f"{pad}{local}(t,{idx}) = {local}(t-1,{idx}) where t in 1:T, {ranges}")


def _staged(text: str) -> str:
    head, body = text.split("{", 1)
    shape = re.search(r"float\(([\w,]+)\) A\b", head)
    assert shape is not None, head
    dims = shape.group(1)
    idx = ",".join("ijk"[:dims.count(",") + 1])
    staged = [f"float({dims}) {x}_s" for x in _INPUTS]
    head = head.replace("local (", f"local ({', '.join(staged)}, ")
    for x in _INPUTS:  # every read of the input reads the staged copy
        body = re.sub(rf"\b{x}\(", f"{x}_s(", body)
    copies = "".join(f"\n    {x}_s({idx}) = {x}({idx})" for x in _INPUTS)
    return f"{head}{{{copies}{body}"


# a stencil statement: ``Bt(t,i) = <rhs> where t in <lo>:<hi>, <the interior's ranges>``
_INTERIOR = re.compile(r"^\s*(\w+)\(t,([\w,]+)\) = (.*) where t in (\w+):(\w+), (.*)$")


def _piecewise(text: str) -> str:
    head, body = text.split("{", 1)
    edges: dict[str, str] = {}  # local -> the input its edges copy
    arms: dict[str, list[tuple[str, str]]] = {}  # local -> (rhs, the interior's ranges)
    rest = []
    for line in body.splitlines():
        if (m := _EDGE.match(line)) is not None:
            edges[m.group(2)] = m.group(4)
        elif (m := _INTERIOR.match(line)) is not None:
            local, _, rhs, _, _, ranges = m.groups()
            arms.setdefault(local, []).append((rhs, ranges))
        else:
            rest.append(line)
    stmts = []
    for local, parts in arms.items():  # in the order of the stencils
        ranges = [r.split(" in ") for r in parts[0][1].split(", ")]
        dims = ",".join(v for v, _ in ranges)
        inside = " && ".join(f"{r.split(':')[0]} <= {v} && {v} < {r.split(':')[1]}"
                             for v, r in ranges)
        rhs = parts[0][0] if len(parts) == 1 else f"t == 0 ? {parts[0][0]} : {parts[1][0]}"
        whole = ", ".join(f"{v} in 0:N" for v, _ in ranges)
        stmts.append(f"    {local}(t,{dims}) = ({inside}) ? ({rhs}) : {edges[local]}({dims}) "
                     f"where t in 0:T, {whole}")
    return f"{head}{{\n" + "\n".join(stmts + rest)
