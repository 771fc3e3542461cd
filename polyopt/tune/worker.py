"""``python -m polyopt.tune.worker JOB RESULT``: measure one pickled ``Job``, pickle its
``Result``; ``python -m polyopt.tune.worker --build JOB``: only compile it (the tuner's worker
processes; see ``polyopt.tune.measure``)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from polyopt.tune.measure import build, run


def main(argv: list[str]) -> int:
    if argv[0] == "--build":
        build(pickle.loads(Path(argv[1]).read_bytes()))
        return 0
    job = pickle.loads(Path(argv[0]).read_bytes())
    result = run(job)
    tmp = Path(argv[1] + ".tmp")
    tmp.write_bytes(pickle.dumps(result))
    tmp.replace(argv[1])  # the parent sees a whole result or none
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
