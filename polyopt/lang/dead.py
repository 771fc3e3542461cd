"""Dead-statement elimination: statements whose results no output depends on.

A local that no statement leading to an output reads (directly or through other locals)
is dropped with every statement writing it, with a warning naming them.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

from polyopt import ir
from polyopt.errors import PolyoptWarning, format_at
from polyopt.lang.lexer import caller_level


def drop_dead(program: ir.Program) -> ir.Program:
    """``program`` without the statements (and locals) that no output depends on."""
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
