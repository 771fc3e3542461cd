"""``python3 -m polyopt.bench.conv``: the suite run on its own (``polyopt bench conv``)."""

from __future__ import annotations

import sys

from polyopt.bench.conv import main

sys.exit(main())
