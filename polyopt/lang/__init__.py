"""The TC language front end: source text to a checked, range-inferred ``ir.Program``.

- ``build_program(source, name=None, sizes=None)``: parse ``source``, pick the def ``name``
  (optional when there is only one), bind ``sizes`` (size names and ``<...>`` parameters,
  substituted as constants), check it and infer its ranges.
- ``define(source, name=None)``: parse once and pick a def: a ``Definition``, which
  ``build_program`` (and every later stage) takes in place of the text.
- ``def_names(source)``: the def names, in order.

Stages: ``lexer`` -> ``parser`` (``syntax`` trees) -> ``sema`` (names, types, statement
rules; with ``resolve`` and ``stmts``) -> ``infer`` (range inference over ``affine``
expressions) -> ``build`` (domains, shapes, the Program).
"""

from __future__ import annotations

from polyopt.lang.build import Definition, build_program, def_names, define

__all__ = ["Definition", "build_program", "def_names", "define"]
