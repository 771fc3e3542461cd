"""The convolution layers of ResNet-50 and MobileNetV2, as the DL-compiler survey lists them.

The tables are copied from the survey authors' per-layer scripts (torchvision ``resnet50``,
MXNet Gluon ``mobilenetv2_1.0``; batch 1, 224x224, NCHW): one row per distinct layer, with
how often it occurs in the network. Layer numbers are the survey's, so ``--layers 1,3,7``
means the same layers there and here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from polyopt.errors import OptionError

__all__ = ["MODELS", "Layer", "parse_numbers", "scaled", "select"]


@dataclass(frozen=True)
class Layer:
    """One distinct convolution: square input and kernel, symmetric zero padding."""

    number: int  # the survey's row number, from 1
    name: str  # the layer where it first occurs
    cin: int
    cout: int
    hw: int  # input height = width
    k: int  # kernel height = width
    stride: int
    pad: int
    groups: int
    count: int  # how often the model runs this shape

    @property
    def kind(self) -> str:
        if self.groups > 1 and self.groups == self.cin == self.cout:
            return "depthwise"
        if self.groups > 1:
            return "grouped"
        return "pointwise" if self.k == 1 else "regular"

    @property
    def hw_out(self) -> int:
        return (self.hw + 2 * self.pad - self.k) // self.stride + 1

    def macs(self, batch: int) -> int:
        """Multiply-adds of one run; a FLOP count is twice this."""
        per_output = (self.cin // self.groups) * self.k * self.k
        return batch * self.cout * self.hw_out**2 * per_output

    def input_shape(self, batch: int) -> tuple[int, int, int, int]:
        return (batch, self.cin, self.hw, self.hw)

    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.cout, self.cin // self.groups, self.k, self.k)

    def output_shape(self, batch: int) -> tuple[int, int, int, int]:
        return (batch, self.cout, self.hw_out, self.hw_out)

    @property
    def shape(self) -> str:
        """e.g. ``64x56x56 -> 64x56x56 k3 s1 p1`` (``dw`` marks a depthwise layer)."""
        out = f"{self.cout}x{self.hw_out}x{self.hw_out}"
        extra = " dw" if self.kind == "depthwise" else (
            f" g{self.groups}" if self.groups > 1 else "")
        return (f"{self.cin}x{self.hw}x{self.hw} -> {out} k{self.k} s{self.stride} "
                f"p{self.pad}{extra}")


def _table(rows: list[tuple[str, int, int, int, int, int, int, int, int]]) -> tuple[Layer, ...]:
    return tuple(Layer(i + 1, *row) for i, row in enumerate(rows))


# name, Cin, Cout, H=W in, k, stride, pad, groups, count (../shared/reference/benchmarks.md 1a)
RESNET50 = _table([
    ("conv1", 3, 64, 224, 7, 2, 3, 1, 1),
    ("layer1.0.conv1", 64, 64, 56, 1, 1, 0, 1, 1),
    ("layer1.0.conv2", 64, 64, 56, 3, 1, 1, 1, 3),
    ("layer1.0.conv3", 64, 256, 56, 1, 1, 0, 1, 4),
    ("layer1.1.conv1", 256, 64, 56, 1, 1, 0, 1, 2),
    ("layer2.0.conv1", 256, 128, 56, 1, 1, 0, 1, 1),
    ("layer2.0.conv2", 128, 128, 56, 3, 2, 1, 1, 1),
    ("layer2.0.conv3", 128, 512, 28, 1, 1, 0, 1, 4),
    ("layer2.0.downsample", 256, 512, 56, 1, 2, 0, 1, 1),
    ("layer2.1.conv1", 512, 128, 28, 1, 1, 0, 1, 3),
    ("layer2.1.conv2", 128, 128, 28, 3, 1, 1, 1, 3),
    ("layer3.0.conv1", 512, 256, 28, 1, 1, 0, 1, 1),
    ("layer3.0.conv2", 256, 256, 28, 3, 2, 1, 1, 1),
    ("layer3.0.conv3", 256, 1024, 14, 1, 1, 0, 1, 6),
    ("layer3.0.downsample", 512, 1024, 28, 1, 2, 0, 1, 1),
    ("layer3.1.conv1", 1024, 256, 14, 1, 1, 0, 1, 5),
    ("layer3.1.conv2", 256, 256, 14, 3, 1, 1, 1, 5),
    ("layer4.0.conv1", 1024, 512, 14, 1, 1, 0, 1, 1),
    ("layer4.0.conv2", 512, 512, 14, 3, 2, 1, 1, 1),
    ("layer4.0.conv3", 512, 2048, 7, 1, 1, 0, 1, 3),
    ("layer4.0.downsample", 1024, 2048, 14, 1, 2, 0, 1, 1),
    ("layer4.1.conv1", 2048, 512, 7, 1, 1, 0, 1, 2),
    ("layer4.1.conv2", 512, 512, 7, 3, 1, 1, 1, 2),
])

# Gluon mobilenetv2_1.0 (../shared/reference/benchmarks.md 1b); depthwise rows have groups = C.
MOBILENETV2 = _table([
    ("conv0", 3, 32, 224, 3, 2, 1, 1, 1),
    ("b0_expand", 32, 32, 112, 1, 1, 0, 1, 1),
    ("b0_dwise", 32, 32, 112, 3, 1, 1, 32, 1),
    ("b0_linear", 32, 16, 112, 1, 1, 0, 1, 1),
    ("b1_expand", 16, 96, 112, 1, 1, 0, 1, 1),
    ("b1_dwise", 96, 96, 112, 3, 2, 1, 96, 1),
    ("b1_linear", 96, 24, 56, 1, 1, 0, 1, 1),
    ("b2_expand", 24, 144, 56, 1, 1, 0, 1, 2),
    ("b2_dwise", 144, 144, 56, 3, 1, 1, 144, 1),
    ("b2_linear", 144, 24, 56, 1, 1, 0, 1, 1),
    ("b3_dwise", 144, 144, 56, 3, 2, 1, 144, 1),
    ("b3_linear", 144, 32, 28, 1, 1, 0, 1, 1),
    ("b4_expand", 32, 192, 28, 1, 1, 0, 1, 3),
    ("b4_dwise", 192, 192, 28, 3, 1, 1, 192, 2),
    ("b4_linear", 192, 32, 28, 1, 1, 0, 1, 2),
    ("b6_dwise", 192, 192, 28, 3, 2, 1, 192, 1),
    ("b6_linear", 192, 64, 14, 1, 1, 0, 1, 1),
    ("b7_expand", 64, 384, 14, 1, 1, 0, 1, 4),
    ("b7_dwise", 384, 384, 14, 3, 1, 1, 384, 4),
    ("b7_linear", 384, 64, 14, 1, 1, 0, 1, 3),
    ("b10_linear", 384, 96, 14, 1, 1, 0, 1, 1),
    ("b11_expand", 96, 576, 14, 1, 1, 0, 1, 3),
    ("b11_dwise", 576, 576, 14, 3, 1, 1, 576, 2),
    ("b11_linear", 576, 96, 14, 1, 1, 0, 1, 2),
    ("b13_dwise", 576, 576, 14, 3, 2, 1, 576, 1),
    ("b13_linear", 576, 160, 7, 1, 1, 0, 1, 1),
    ("b14_expand", 160, 960, 7, 1, 1, 0, 1, 3),
    ("b14_dwise", 960, 960, 7, 3, 1, 1, 960, 3),
    ("b14_linear", 960, 160, 7, 1, 1, 0, 1, 2),
    ("b16_linear", 960, 320, 7, 1, 1, 0, 1, 1),
    ("conv1", 320, 1280, 7, 1, 1, 0, 1, 1),
    ("conv2", 1280, 1000, 1, 1, 1, 0, 1, 1),  # the classifier, a 1x1 conv after the pool
])

MODELS: dict[str, tuple[Layer, ...]] = {"resnet50": RESNET50, "mobilenetv2": MOBILENETV2}


def parse_numbers(text: str) -> list[int]:
    """``"1,3,7"`` or ``"1-5,9"`` -> layer numbers, in the order given, without repeats."""
    out: list[int] = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        lo, dash, hi = item.partition("-")
        try:
            span = range(int(lo), int(hi) + 1) if dash else range(int(item), int(item) + 1)
        except ValueError:
            raise OptionError(f"--layers item {item!r} is not a number or a range A-B") from None
        if not span:
            raise OptionError(f"--layers range {item!r} is empty")
        out += [n for n in span if n not in out]
    return out


def select(model: str, numbers: str | None = None) -> list[Layer]:
    """The layers of ``model`` (all, or those numbered in ``numbers``)."""
    table = MODELS.get(model)
    if table is None:
        raise OptionError(f"unknown model {model!r}; valid models: {', '.join(MODELS)}")
    if not numbers:
        return list(table)
    wanted = parse_numbers(numbers)
    bad = [n for n in wanted if not 1 <= n <= len(table)]
    if bad:
        raise OptionError(f"{model} has no layer {', '.join(map(str, bad))}; its layers are "
                          f"numbered 1-{len(table)}")
    if not wanted:
        raise OptionError("--layers names no layer")
    return [table[n - 1] for n in wanted]


def scaled(layer: Layer, scale: int) -> Layer:
    """``layer`` with channels and spatial size divided by ``scale`` (a test-only shrink).

    Kernel, stride, padding and count stay; a depthwise layer stays depthwise; the input
    stays at least as large as the kernel.
    """
    if scale == 1:
        return layer
    cin, cout = max(1, layer.cin // scale), max(1, layer.cout // scale)
    if layer.kind == "depthwise":
        cout = groups = cin
    else:
        groups = math.gcd(layer.groups, cin, cout)
    hw = max(layer.hw // scale, layer.k - 2 * layer.pad, 1)
    return replace(layer, cin=cin, cout=cout, hw=hw, groups=groups)
