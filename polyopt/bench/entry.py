"""A suite run as a module of its own (``python3 -m polyopt.bench.<suite>``): the same
options and errors as ``polyopt bench <suite>``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from polyopt.errors import PolyoptError


def suite_main(command: str, doc: str | None, add_arguments: Callable[[Any], None],
               run: Callable[..., int], argv: Sequence[str] | None = None,
               pass_argv: bool = False) -> int:
    """Parse ``argv`` (default: the process's) for ``polyopt bench <command>`` and ``run`` it;
    a PolyoptError is a message and status 2. ``pass_argv``: ``run`` also takes the words
    (``--update`` records the command that made a table)."""
    parser = argparse.ArgumentParser(prog=f"polyopt bench {command}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser.parse_args(words)
        return run(args, words) if pass_argv else run(args)
    except PolyoptError as e:
        print(f"polyopt bench {command}: error: {e}", file=sys.stderr)
        return 2
