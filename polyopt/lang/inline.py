"""Pointwise locals inlined into their one reader.

A local written by one plain statement (``T(i,j) = f(...)``, no reduction, no fill) and read
once in the whole def, by a statement that reads each of its elements once (its indices are
the reader's iterators, each once), is computed where it is read: the read becomes ``f``
with the writer's iterators renamed to the read's indices, and the local and its statement
are gone. Each element is computed once, as before; it no longer goes through memory.

A chain of pointwise operators lowered one statement each (the torch backend's GELU
backward: eleven ATen operators, ten locals of 256 x 1024) otherwise keeps every link a
whole tensor wherever the nest is tiled (a transposed output fused into it), since a tiled
loop indexes no dimension by its value and the locals cannot be contracted: 0.54 ms for the
partition against torch's 0.42, its operators one by one.

Exact: the reader's reads must all fall where the writer wrote (isl checks the read's range
against the writer's domain), the writer comes first, the value keeps its type (the writer's
expression has the local's dtype), and nothing the writer reads changes before the reader
runs (the language's rule: no statement reads a tensor a later statement writes). Defs with
value semantics (recurrences) are left as written, as is a local read through padding.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import islpy as isl

from polyopt import ir
from polyopt.lang.affine import context

MAX_NODES = 64
"""The most expression nodes an inlined value may bring into its reader. A bound on the
size of one statement's expression (the printed C, the compiler's registers for one
vectorized body), not a tuned threshold: a chain longer than this keeps a local where it
is cut, and the scheduler's array contraction shrinks it where the nest allows."""


def inline_locals(program: ir.Program) -> ir.Program:
    """``program`` with its pointwise, once-read locals computed in their reader (see the
    module's doc)."""
    if program.value_semantics or not program.locals:
        return program
    candidates = _candidates(program)
    if not candidates:
        return program
    values: dict[str, ir.Stmt] = {}  # inlined local -> its writer, its own reads inlined
    stmts: list[ir.Stmt] = []
    for s in program.stmts:  # a writer comes before its reader, which then reads its value
        if any(isinstance(e, ir.Read) and e.tensor in values for e in s.rhs.walk()):
            s = replace(s, rhs=ir.rewrite(s.rhs, lambda e: _substituted(e, values)))
        if s.tensor in candidates and ir.node_count(s.rhs) <= MAX_NODES:
            values[s.tensor] = s
        else:
            stmts.append(s)
    if not values:
        return program
    return replace(program, locals=tuple(t for t in program.locals if t.name not in values),
                   stmts=tuple(stmts))


def _candidates(program: ir.Program) -> set[str]:
    """The locals that may be inlined: one plain writer before one reading statement, read
    once, each element once, where the writer wrote."""
    writers = Counter(s.tensor for s in program.stmts)
    reads: dict[str, list[tuple[int, ir.Read]]] = {}
    for k, s in enumerate(program.stmts):
        for e in s.rhs.walk():
            if isinstance(e, ir.Read) and e.tensor in program.tensors:
                reads.setdefault(e.tensor, []).append((k, e))
    out, ctx = set(), context(program.sizes)
    for k, s in enumerate(program.stmts):
        t = program.tensors[s.tensor]
        got = reads.get(s.tensor, [])
        if (t.role != "local" or writers[s.tensor] != 1 or s.op != "=" or s.init
                or s.iters != s.lhs or s.rhs.dtype != t.dtype or len(got) != 1):
            continue
        at, read = got[0]
        if at > k and _reads_each_once(program.stmts[at], read) \
                and _covered(program, ctx, s, program.stmts[at], read):
            out.add(s.tensor)
    return out


def _reads_each_once(reader: ir.Stmt, read: ir.Read) -> bool:
    """Are ``read``'s indices the reader's iterators, each once, unpadded?"""
    names = [ix.name for ix in read.indices if isinstance(ix, ir.Var) and ix.kind == "index"]
    return (read.pad is None and len(names) == len(read.indices)
            and sorted(names) == sorted(reader.iters))


def _covered(program: ir.Program, ctx: isl.Set, writer: ir.Stmt, reader: ir.Stmt,
             read: ir.Read) -> bool:
    """Does every element ``read`` reads lie in ``writer``'s domain (``ctx``: the sizes'
    context)?"""
    try:
        at = ", ".join(str(ix) for ix in read.indices)
        access = isl.Map(f"{program.params} -> {{ {reader.name}[{', '.join(reader.iters)}] -> "
                         f"{writer.name}[{at}] }}")
        seen = access.intersect_domain(isl.Set(reader.domain)).range()
        return bool(seen.intersect_params(ctx).is_subset(isl.Set(writer.domain)))
    except isl.Error:  # not modelled: leave the local in memory
        return False


def _substituted(e: ir.Expr, values: dict[str, ir.Stmt]) -> ir.Expr:
    """``e``, or the value of the inlined local it reads, at its indices."""
    if not isinstance(e, ir.Read) or e.tensor not in values:
        return e
    writer = values[e.tensor]
    return ir.substitute_indices(writer.rhs, dict(zip(writer.lhs, e.indices, strict=True)))

