"""Dead-statement elimination: statements whose results no output depends on.

A local that no statement leading to an output reads (directly or through other locals)
is dropped with every statement writing it, with a warning naming them. Then, instance by
instance (``flow``'s exact dataflow), a write that no read gets and that no output keeps
(a local's element nobody reads; an element overwritten before any read, ``B(i) = A(i) + 0``
then ``B(i) = A(i) + 1``) is dead: a statement all of whose writes are dead is dropped, one
whose live writes form one simple set (a piece) keeps only those. A dropped statement is
warned about; a cut one is not (see ``_warn``).
"""

from __future__ import annotations

import warnings
from collections.abc import Collection
from dataclasses import replace

import islpy as isl

from polyopt import ir
from polyopt.errors import PolyoptWarning, format_at
from polyopt.lang.flow import Flow, dataflow
from polyopt.lang.lexer import caller_level


def drop_dead(program: ir.Program) -> ir.Program:
    """``program`` without the statements (and locals) that no output depends on, and
    without the writes no read gets (see the module's doc)."""
    return drop_overwritten(_drop_unread_locals(program))


def _drop_unread_locals(program: ir.Program) -> ir.Program:
    live = {t.name for t in program.outputs}
    for s in reversed(program.stmts):  # a writer of a live tensor makes its reads live
        if s.tensor in live:
            live |= {e.tensor for e in s.rhs.walk() if isinstance(e, ir.Read)}
    dead = [s for s in program.stmts if s.tensor not in live]
    if not dead:
        return program
    names = ", ".join(s.name for s in dead)
    tensors = ", ".join(sorted({s.tensor for s in dead}))
    warnings.warn(format_at(f"def '{program.name}': local(s) {tensors} feed no output; "
                            f"statement(s) {names} are dropped", program.source,
                            dead[0].pos), PolyoptWarning, stacklevel=caller_level())
    return replace(program, stmts=tuple(s for s in program.stmts if s.tensor in live),
                   locals=tuple(t for t in program.locals if t.name in live))


def drop_overwritten(program: ir.Program) -> ir.Program:
    """``program`` without the dead writes of the statements that may have some: with
    value semantics those writing locals (an element is written once, so only an unread
    one is dead), else those writing a tensor that another statement writes too."""
    locals_ = {t.name for t in program.locals}
    count: dict[str, int] = {}
    for s in program.stmts:
        count[s.tensor] = count.get(s.tensor, 0) + 1
    names = [s.name for s in program.stmts
             if (s.tensor in locals_ if program.value_semantics else count[s.tensor] > 1)]
    return drop_unread(program, names, warn=True)


def drop_unread(program: ir.Program, names: Collection[str], *, warn: bool = False,
                pieces: bool = True) -> ir.Program:
    """``program`` with the dead writes of the statements ``names`` (``=`` only, without a
    fill) removed: the whole statement, or (``pieces``) all but its live piece; ``warn``:
    say so."""
    cands = [s for s in program.stmts if s.name in names and s.op == "=" and not s.init]
    flow = dataflow(program) if cands else None
    if flow is None:
        return program
    lives: dict[str, isl.UnionSet | None] = {}
    changed: dict[str, ir.Stmt | None] = {}
    for s in cands:
        if s.tensor not in lives:
            lives[s.tensor] = live_writes(flow, s.tensor)
        live, dom = lives[s.tensor], flow.domains[s.name]
        kept = dom if live is None else dom.intersect(live.extract_set(dom.get_space()))
        if not dom.params().intersect(_sizes_positive(program)).is_subset(
                dom.subtract(kept).params()):
            continue  # dead at some sizes only (adi's constants when N < 3): keep all
        if kept.is_empty():
            changed[s.name] = None
        elif pieces and kept.coalesce().n_basic_set() == 1:
            changed[s.name] = replace(s, domain=_domain_text(kept.coalesce()))
    if not changed:
        return program
    if warn:
        _warn(program, changed)
    stmts = tuple(changed.get(s.name, s) for s in program.stmts)
    kept_stmts = tuple(s for s in stmts if s is not None)
    used = {s.tensor for s in kept_stmts} | {e.tensor for s in kept_stmts
                                              for e in s.rhs.walk() if isinstance(e, ir.Read)}
    return replace(program, stmts=kept_stmts,
                   locals=tuple(t for t in program.locals if t.name in used))


def live_writes(flow: Flow, tensor: str) -> isl.UnionSet | None:
    """The instances writing ``tensor`` whose value some read gets or an output keeps;
    None when all may be (a read of it is not affine; an output with value semantics)."""
    program = flow.program
    reads = [a.relation for a in flow.reads if a.read.tensor == tensor]
    if any(r is None for r in reads):
        return None
    sinks = [r for r in reads if r is not None]
    sinks += [flow.writes[s.name] for s in program.stmts if s.tensor == tensor and s.op != "="]
    after = None
    if tensor in {t.name for t in program.outputs}:
        if program.value_semantics:
            return None
        end, after = _final_read(program, tensor, len(program.stmts))
        sinks.append(end)
    return flow.source(sinks, tensor, after).range()


def _final_read(program: ir.Program, tensor: str, pos: int) -> tuple[isl.Map, isl.UnionMap]:
    """What the caller reads of output ``tensor`` (every element, after every statement),
    and when: ``pos``, after the statements."""
    t = program.tensors[tensor]
    dims = [f"d{k}" for k in range(t.rank)]
    box = " and ".join(f"0 <= {d} < {e}" for d, e in zip(dims, t.shape, strict=True))
    name, its = f"_end_{tensor}", ", ".join(dims)
    read = isl.Map(f"{program.params} -> {{ {name}[{its}] -> {tensor}[{its}]"
                   f"{' : ' + box if box else ''} }}")
    depth = max((len(s.iters) for s in program.stmts), default=0)
    time = isl.Map(f"{program.params} -> {{ {name}[{its}] -> [{pos}, 0{', 0' * depth}] }}")
    return read, isl.UnionMap.from_map(time.intersect_domain(read.domain()))


def _sizes_positive(program: ir.Program) -> isl.Set:
    cons = " and ".join(f"{n} >= 1" for n in program.sizes) or "0 = 0"
    return isl.Set(f"{program.params} -> {{ : {cons} }}")


def _domain_text(dom: isl.Set) -> str:
    text = str(dom)
    return text if text.startswith("[") else f"[] -> {text}"


def _warn(program: ir.Program, changed: dict[str, ir.Stmt | None]) -> None:
    """Say which statements are dropped whole. Cutting one down to its live piece goes
    without a word: a default overwritten in part (syrk's ``Co = C``, then its lower
    triangle ``Co = beta * C``) is how such defs are written."""
    dropped = [n for n, s in changed.items() if s is None]
    if not dropped:
        return
    first = next(s for s in program.stmts if s.name in changed and changed[s.name] is None)
    warnings.warn(format_at(f"def '{program.name}': statement(s) {', '.join(dropped)} write "
                            f"only values that no read gets (overwritten before any read, or "
                            f"never read), and are dropped", program.source, first.pos),
                  PolyoptWarning, stacklevel=caller_level())
