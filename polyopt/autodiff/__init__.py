"""Derived gradients: ``grad(source, name, wrt)`` returns the backward def as TC source.

The derivation works on the checked, range-inferred ``ir.Program`` (``lang``), with isl
(``poly``) for the access relations it inverts; it sits above ``poly`` and below ``api``, and
its result is ordinary TC that ``polyopt.compile`` schedules like any definition.

- ``forward``: versions of multiply-written tensors, statement normal forms, domains as
  ranges per iterator (affine in the sizes and earlier iterators);
- ``calculus``: reverse mode through one right-hand side, with each builtin's derivative;
- ``affine``: index expressions as linear forms, isl's ranges and extents as TC;
- ``inverse``: one adjoint statement per read group, through the inverse of its access;
- ``plan``: the reverse sweep, recomputation of forward values, argmax routing;
- ``source``: the gradient def as data and its TC text.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

import islpy as isl

from polyopt import dtypes, ir, lang
from polyopt.autodiff.affine import set_range
from polyopt.autodiff.forward import Forward
from polyopt.autodiff.inverse import Frame
from polyopt.autodiff.plan import Planner, recompute
from polyopt.autodiff.source import GradDef
from polyopt.errors import NotDifferentiableError, OptionError, PolyoptError
from polyopt.lang.resolve import BUILTINS
from polyopt.poly import model_of

__all__ = ["grad"]

_RESERVED = {"def", "where", "in", "exists", "min", "max", "local", "pad", "float", "double",
             *dtypes.TYPE_NAMES}


def grad(source: str, name: str | None = None, wrt: Sequence[str] | None = None) -> str:
    """TC source of one def, ``<name>_grad``, computing the gradients of def ``name``.

    Its parameters are the forward inputs (same names, types and sizes), then ``d_<out>``
    for each forward output in order (the gradient of the loss with respect to it, with the
    output's shape); its outputs are ``d_<x>`` for each input ``x`` in ``wrt`` (default: every
    floating-point input, in parameter order). Names are made unique where they clash.
    Raises ``NotDifferentiableError`` for what cannot be differentiated as written and
    ``OptionError`` for an unknown or repeated ``wrt`` name.

    ``<...>`` parameters (strides, padding) take their defaults and are written into the
    gradient as numbers: pick them with ``polyopt.kernels.get(name, stride=2)`` or in the
    source. An output whose extent is an expression (a convolution's ``H - KH + 1``) declares its
    gradient input with new size names (``H_O``): pass it with the output's shape. An integer
    output's gradient input has the output's type and is not read. A ``max=!``/``min=!``
    reduction sends the gradient to the first point, in lexicographic order of its reduction
    indices, that attains the result; ``fmax``/``max`` pass it to their first argument on a
    tie, ``fabs`` counts 0 as positive.
    """
    program = lang.build_program(source, name)
    if program.value_semantics:
        raise NotDifferentiableError(
            f"def '{program.name}' has recurrences ({', '.join(program.recurrent)}): its "
            f"adjoint runs the dataflow backwards through every step, which polyopt.grad does "
            f"not derive yet")
    try:
        return _derive(program, _wrt(program, wrt))
    except isl.Error as e:
        raise PolyoptError(f"isl failed while differentiating def '{program.name}': {e}"
                           ) from None


def _wrt(program: ir.Program, wrt: Sequence[str] | None) -> list[str]:
    inputs = {t.name: t for t in program.inputs}
    if wrt is None:
        wrt = [t.name for t in program.inputs if dtypes.get(t.dtype).is_float]
        if not wrt:
            raise NotDifferentiableError(f"def '{program.name}' has no floating-point input "
                                         "to differentiate")
    if isinstance(wrt, str):
        wrt = [wrt]
    if not wrt:
        raise OptionError("wrt is empty: name at least one input to differentiate")
    out: list[str] = []
    for w in wrt:
        if w not in inputs:
            raise OptionError(f"wrt={w!r}: def '{program.name}' has no input named so; its "
                              f"inputs are {', '.join(inputs) or '(none)'}")
        if w in out:
            raise OptionError(f"wrt names {w!r} twice")
        if not dtypes.get(inputs[w].dtype).is_float:
            raise NotDifferentiableError(f"wrt={w!r}: input '{w}' of def '{program.name}' is "
                                         f"{inputs[w].dtype}; only floating-point inputs have "
                                         "gradients")
        out.append(w)
    return out


def _derive(program: ir.Program, wrt: list[str]) -> str:
    context = model_of(program).context
    taken = {*program.sizes, *program.tensors, *BUILTINS, *_RESERVED}
    frame = Frame(program.params, context, {}, {}, set(), taken)
    for t in program.tensors.values():
        frame.extents[t.name] = tuple(_extent(program, context, e) for e in t.shape)
    seeds, seed_decls = _seeds(program, frame)
    grads = {w: ir.fresh_name(f"d_{w}", taken) for w in wrt}
    planner = Planner(Forward(program, context), frame, grads, seeds)
    planner.run()
    stmts = [*recompute(planner), *planner.argmax, *planner.backward]
    inputs = tuple((t.name, t.dtype, t.shape) for t in program.inputs) + seed_decls
    written = list(dict.fromkeys(s.tensor for s in stmts))
    given = ", ".join(f"{d} = dL/d{t}" for t, d in seeds.items())
    wanted = ", ".join(f"{d} = dL/d{x}" for x, d in grads.items())
    header = f"Gradient of {program.name} (polyopt.grad). Given {given}; computes {wanted}."
    if planner.argmax:
        header += (" A max/min reduction sends the gradient to the first point (in "
                   "lexicographic order of its reduction indices) that attains the result.")
    header = "\n".join(textwrap.wrap(header, 96))
    text = str(GradDef(f"{program.name}_grad", inputs, tuple(grads.values()),
                       tuple(t for t in written if t not in grads.values()), tuple(stmts),
                       header))
    _verify(text, program.name)
    return text


def _extent(program: ir.Program, context: isl.Set, text: str) -> ir.Expr:
    dims = isl.Set(f"{program.params} -> {{ [x] : 0 <= x < {text} }}")
    return set_range(dims, context, f"an index of extent {text}")[1]


def _seeds(program: ir.Program, frame: Frame
           ) -> tuple[dict[str, str], tuple[tuple[str, str, tuple[str, ...]], ...]]:
    """One gradient input per output; an extent that is not a size or a number is declared
    with a new size name (the caller passes the output's shape; reads of it are guarded)."""
    seeds: dict[str, str] = {}
    decls = []
    for t in program.outputs:
        d = ir.fresh_name(f"d_{t.name}", frame.taken)
        seeds[t.name] = d
        first = next(s for s in program.stmts if s.tensor == t.name)
        dims = []
        for j, e in enumerate(t.shape):
            if re.fullmatch(r"[A-Za-z_]\w*|\d+", e):
                dims.append(e)
            else:
                dims.append(ir.fresh_name(f"{first.lhs[j].upper()}_{t.name}", frame.taken))
                frame.always_pad.add(d)
        frame.extents[d] = frame.extents[t.name]
        decls.append((d, t.dtype, tuple(dims)))
    return seeds, tuple(decls)


def _verify(text: str, name: str) -> None:
    """The gradient must read back through polyopt's own front end."""
    try:
        lang.build_program(text)
    except PolyoptError as e:
        raise PolyoptError(f"polyopt.grad derived a gradient of '{name}' that polyopt's front "
                           f"end rejects (a bug in polyopt.grad):\n{e}\n--- derived ---\n{text}"
                           ) from None



