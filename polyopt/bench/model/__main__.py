"""``python3 -m polyopt.bench.model``: the suite run on its own (``polyopt bench model``)."""

from __future__ import annotations

import sys

from polyopt.bench.model import main

sys.exit(main())
