"""The TC language front end: source text to a checked, range-inferred ``ir.Program``.

- ``build_program(source, name=None, sizes=None)``: parse ``source``, pick the def ``name``
  (optional when there is only one), bind ``sizes`` (size names and ``<...>`` parameters,
  substituted as constants), check it and infer its ranges.
- ``def_names(source)``: the def names, in order.

Stages: ``lexer`` -> ``parser`` (``syntax`` trees) -> ``sema`` (names, types, statement
rules; with ``resolve`` and ``stmts``) -> ``infer`` (range inference over ``affine``
expressions) -> ``build`` (domains, shapes, the Program).
"""

from __future__ import annotations

from polyopt.lang.build import build_program, def_names

__all__ = ["build_program", "def_names"]
