"""Per-layer convolution benchmark: a thin wrapper of ``polyopt bench conv`` (same options).

    python3 scripts/bench_conv.py --model resnet50 --layers 1,3,7 --repeat 10
"""

from __future__ import annotations

import sys

from polyopt.bench.conv import main

if __name__ == "__main__":
    sys.exit(main())
