"""``python -m polyopt.tune.worker JOB RESULT``: compile one pickled ``Job``, say "built" on
stdout, wait for a line on stdin, then check and time it and pickle its ``Result`` to RESULT
(the tuner's worker processes; see ``polyopt.tune.measure``)."""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

from polyopt.tune.measure import run


def main(argv: list[str]) -> int:
    # The protocol owns stdout: whatever else writes there (a C library) goes to stderr.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def ready() -> None:
        protocol.write("built\n")
        protocol.flush()
        sys.stdin.readline()

    result = run(pickle.loads(Path(argv[0]).read_bytes()), ready)
    tmp = Path(argv[1] + ".tmp")
    tmp.write_bytes(pickle.dumps(result))
    tmp.replace(argv[1])  # the parent sees a whole result or none
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
