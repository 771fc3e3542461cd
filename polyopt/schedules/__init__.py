"""The Schedule artifact and its checked verbs: a def's loop tree, the dependences it must
respect, and the transformations a person or a pipeline applies to it.

- ``schedule``: ``Schedule`` (the artifact, its verbs and their record) and program order;
- ``tree``, ``marks``, ``nest``: loop trees with named loops, the marks on a loop, nests;
- ``transform``, ``hyperplane``, ``canonical``, ``verb_args``: the verbs' tree rewrites and
  argument checks; ``from_isl``: a schedule written in isl's notation;
- ``legality``, ``tagcheck``, ``sequential``: what a schedule must respect;
- ``contraction``, ``storage``: locals kept in a slice of a loop, or modulo a distance;
- ``limits``: bounds on generated code and on the compiler's work; ``memo``: an identity memo.
"""

from __future__ import annotations

from polyopt.schedules.legality import carried, check_legal
from polyopt.schedules.schedule import VERBS, Schedule, Step, program_order

__all__ = ["VERBS", "Schedule", "Step", "carried", "check_legal", "program_order"]
