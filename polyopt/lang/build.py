"""Assembles the checked, range-inferred ``ir.Program`` of one def."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import islpy as isl

from polyopt import ir
from polyopt.errors import LanguageError, PolyoptError, ShapeError, UnknownDefError
from polyopt.lang import syntax as S
from polyopt.lang.affine import Lin, always_equal, context, params_text
from polyopt.lang.copyflow import see_through_copies
from polyopt.lang.cse import eliminate_common
from polyopt.lang.dead import drop_dead
from polyopt.lang.infer import Interval, constraints, infer
from polyopt.lang.inline import inline_locals
from polyopt.lang.parser import parse, stack_room
from polyopt.lang.piecewise import split_pieces
from polyopt.lang.recurrence import check_single_assignment, sizes_at
from polyopt.lang.sema import CheckedDef, CheckedStmt, check_def
from polyopt.lang.widen import widen_reductions


@dataclass(frozen=True, eq=False)
class Definition:
    """One def of a source, parsed once: what compile, schedule, tune, einsum and the CLI
    hand down to every stage instead of the text (which each stage used to parse again)."""

    source: str
    syntax: S.Def

    @property
    def name(self) -> str:
        return self.syntax.name

    @property
    def params(self) -> frozenset[str]:
        """The ``<...>`` parameters (strides, padding): they select the operator."""
        return frozenset(p.name for p in self.syntax.params)


def define(source: str | Definition, name: str | None = None) -> Definition:
    """Parse ``source`` and pick its def ``name`` (optional when it holds only one); a
    Definition is returned as it is."""
    if isinstance(source, Definition):
        return source
    with _guard(source):
        return Definition(source, _pick(_defs(source), name, source))


def build_program(source: str | Definition, name: str | None = None,
                  sizes: Mapping[str, int] | None = None) -> ir.Program:
    """Check and range-infer the def ``name`` of ``source`` at ``sizes`` (see the package
    doc); a Definition is not parsed again."""
    definition = define(source, name)
    key = tuple(sorted((sizes or {}).items()))
    try:
        hash(key)
    except TypeError:  # a value check_def refuses: let it say why
        return _build.__wrapped__(definition, key)
    return _build(definition, key)


# Per Definition (by identity) and sizes: compile, its tuning key (twice) and the tuned
# schedule's replay build the same program, which took 1 s each for 2000 statements.
# Programs are immutable; errors are raised again, as they are not kept.
@lru_cache(maxsize=32)
def _build(definition: Definition, sizes: tuple[tuple[str, int], ...]) -> ir.Program:
    with _guard(definition.source):
        checked = check_def(definition.syntax, definition.source, dict(sizes) or None)
        program = split_pieces(_assemble(checked))
        check_single_assignment(program)
        program = eliminate_common(inline_locals(drop_dead(see_through_copies(program))))
        return widen_reductions(program)


def def_names(source: str) -> list[str]:
    """The names of the defs in ``source``, in order."""
    with _guard(source):
        return [d.name for d in _defs(source)]


@contextmanager
def _guard(source: str) -> Iterator[None]:
    """Raise only PolyoptErrors (and warnings turned into errors) out of the front end."""
    try:
        with stack_room():
            yield
    except (PolyoptError, Warning):
        raise
    except isl.Error as e:
        raise LanguageError(f"isl rejected a set built from this def: {e}", source,
                            None) from None
    except Exception as e:
        raise LanguageError(f"internal error in the language front end: "
                            f"{type(e).__name__}: {e}", source, None) from e


def _defs(source: str) -> tuple[S.Def, ...]:
    if not isinstance(source, str):
        raise LanguageError(f"source must be a str, not {type(source).__name__}")
    defs = parse(source).defs
    seen: set[str] = set()
    for d in defs:
        if d.name in seen:
            raise LanguageError(f"duplicate def name '{d.name}'", source, d.pos)
        seen.add(d.name)
    return defs


def _pick(defs: tuple[S.Def, ...], name: str | None, source: str) -> S.Def:
    names = [d.name for d in defs]
    if name is None:
        if len(defs) == 1:
            return defs[0]
        raise UnknownDefError(f"the source holds several defs ({', '.join(names)}); pass "
                              "name= to pick one")
    for d in defs:
        if d.name == name:
            return d
    raise UnknownDefError(f"no def named {name!r}; the source defines: {', '.join(names)}")


# ---------------------------------------------------------------- assembly

class _Builder:
    def __init__(self, cd: CheckedDef) -> None:
        self.cd = cd
        self.sizes = cd.sizes
        self.shapes: dict[str, tuple[Lin, ...]] = {}
        for n in cd.inputs:
            dims = cd.scope.tensors[n].dims
            assert dims is not None
            self.shapes[n] = dims
        if cd.recurrent:  # value semantics: tensors written piecewise, maybe read first
            for n in (*cd.outputs, *cd.locals):
                dims = cd.scope.tensors[n].dims
                if dims is not None:
                    self.shapes[n] = dims

    def error(self, message: str, pos: S.Pos | None) -> LanguageError:
        return LanguageError(message, self.cd.source, pos)

    def dim_bounds(self, cs: CheckedStmt, tensor: str, dim: int) -> Interval:
        ext = self.shapes[tensor][dim]
        pad = cs.pads.get(tensor, self.cd.scope.tensors[tensor].pad)
        lo, hi = Lin.num(0), ext - 1
        if pad is not None:
            lo, hi = lo - pad.widths[dim][0], hi + pad.widths[dim][1]
        return lo, hi

    def stmt(self, cs: CheckedStmt) -> ir.Stmt:
        cons = constraints(cs, lambda t, d: self.dim_bounds(cs, t, d))
        known = (*self.cd.scope.tensors, *self.cd.scope.sizes)
        ranges = infer(cs, cons, self.cd.source, known)
        domain = self.domain(cs, ranges)
        if cs.tensor not in self.shapes:
            self.shapes[cs.tensor] = self.shape(cs, ranges)
        else:
            self.check_fits(cs, domain)
        return ir.Stmt(cs.name, cs.tensor, cs.lhs, cs.iters, cs.op, cs.init, cs.rhs, domain,
                       pos=cs.pos)

    def domain(self, cs: CheckedStmt, ranges: dict[str, Interval]) -> str:
        cons = []
        for v in cs.iters:
            if v in cs.ranges:
                lo, hi, _ = cs.ranges[v]
                cons.append(f"{lo} <= {v} < {hi}")
            else:
                lo, hi = ranges[v]
                cons.append(f"{lo} <= {v} <= {hi}")
        body = f"{cs.name}[{', '.join(cs.iters)}]" + (f" : {' and '.join(cons)}" if cons else "")
        text = f"{params_text(self.sizes)} -> {{ {body} }}"
        try:
            isl.Set(text)
        except isl.Error as e:
            raise self.error(f"isl rejected the domain {text!r} of {cs.name} ({e}); is an "
                             "index or size named like an isl keyword?", cs.pos) from None
        return text

    def shape(self, cs: CheckedStmt, ranges: dict[str, Interval]) -> tuple[Lin, ...]:
        t = self.cd.scope.tensors[cs.tensor]
        out = []
        for k, v in enumerate(cs.lhs):
            lo, hi = ranges[v]
            if not always_equal(lo, Lin.num(0), self.sizes):
                raise self.error(f"index '{v}' of '{t.name}' starts at {lo}, not 0, in "
                                 f"{cs.name} (the statement that fixes the shape); shift the "
                                 f"index or add 'where {v} in 0:...'", cs.var_pos[v])
            ext = hi + 1
            if ext.is_const and ext.const < 0:
                raise ShapeError(f"{t.role} '{t.name}' dim {k} (index '{v}') has negative "
                                 f"extent {ext.const}{self.bound_note()}")
            if t.dims is not None and not always_equal(t.dims[k], ext, self.sizes):
                raise self.error(f"{t.role} '{t.name}' is declared with dim {k} = {t.dims[k]} "
                                 f"but {cs.name} gives it extent {ext}", t.pos)
            out.append(ext)
        return tuple(out)

    def bound_note(self) -> str:
        if not self.cd.bound:
            return ""
        return " with " + ", ".join(f"{n}={v}" for n, v in self.cd.bound)

    def check_fits(self, cs: CheckedStmt, domain: str) -> None:
        shape = self.shapes[cs.tensor]
        if not shape:
            return
        cons = " and ".join(f"0 <= {v} <= {e} - 1" for v, e in zip(cs.lhs, shape, strict=True))
        box = isl.Set(f"{params_text(self.sizes)} -> {{ {cs.name}[{', '.join(cs.iters)}] : "
                      f"{cons} }}")
        dom = isl.Set(domain).intersect_params(context(self.sizes))
        if not dom.is_subset(box):
            ext = ", ".join(map(str, shape))
            sizes = sizes_at(dom.subtract(box).sample_point())
            declared = self.cd.recurrent and self.cd.scope.tensors[cs.tensor].dims is not None
            fixed = ("its declaration fixed" if declared else "the first statement writing "
                     "it fixed (declare its type and shape to write it piecewise)")
            at = f" (at {sizes}; compile with sizes= at which it fits)" if sizes else ""
            raise self.error(f"{cs.name} writes '{cs.tensor}' outside its shape ({ext}), "
                             f"which {fixed}{at}", cs.pos)

    def tensor(self, name: str) -> ir.Tensor:
        t = self.cd.scope.tensors[name]
        assert t.dtype is not None
        shape = tuple(str(e) for e in self.shapes[name])
        for e in shape:
            isl.PwAff(f"{params_text(self.sizes)} -> {{ [({e})] }}")
        return ir.Tensor(name, t.dtype, shape, t.role, pos=t.pos)


def _assemble(cd: CheckedDef) -> ir.Program:
    b = _Builder(cd)
    stmts = tuple(b.stmt(cs) for cs in cd.stmts)
    return ir.Program(
        name=cd.name, sizes=cd.sizes, bound=cd.bound,
        inputs=tuple(b.tensor(n) for n in cd.inputs),
        outputs=tuple(b.tensor(n) for n in cd.outputs),
        locals=tuple(b.tensor(n) for n in cd.locals),
        stmts=stmts, recurrent=cd.recurrent, source=cd.source)
