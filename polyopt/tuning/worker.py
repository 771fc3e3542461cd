"""``python -m polyopt.tuning.worker JOB RESULT``: compile one pickled ``Job`` (or the jobs of a
``Confirm``), say "built" on stdout, wait for a line on stdin, then check and time it and
pickle its ``Result`` (a list of them) to RESULT (the tuner's worker processes; see
``polyopt.tuning.measure``)."""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

from polyopt.tuning.measure import Confirm, confirm, run


def main(argv: list[str]) -> int:
    # The protocol owns stdout: whatever else writes there (a C library) goes to stderr.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def ready() -> None:
        protocol.write("built\n")
        protocol.flush()
        sys.stdin.readline()

    task = pickle.loads(Path(argv[0]).read_bytes())
    result = confirm(task, ready) if isinstance(task, Confirm) else run(task, ready)
    tmp = Path(argv[1] + ".tmp")
    tmp.write_bytes(pickle.dumps(result))
    tmp.replace(argv[1])  # the parent sees a whole result or none
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
