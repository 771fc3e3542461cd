"""``python3 -m polyopt.bench.gpu``: the suite run on its own (``polyopt bench gpu``)."""

from __future__ import annotations

import sys

from polyopt.bench.gpu import main

sys.exit(main())
