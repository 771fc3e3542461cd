"""Benchmarks of polyopt against other systems, shipped so the installed CLI has them.

``polyopt bench conv`` (``conv.py``) times the convolution layers of ResNet-50 or
MobileNetV2 (``layers.py``) on polyopt, numpy, torch and TVM (``peers.py``,
``tvm_conv.py``) and writes a table, CSV, JSON and a plot (``report.py``). Importing this
package imports neither torch nor TVM.
"""

from __future__ import annotations
