"""The whole models ``polyopt bench model`` compiles: ResNet-50, MobileNetV2 and a BERT-base
encoder, in plain torch with seeded random weights (no downloads), in eval mode.

ResNet-50 and MobileNetV2 follow torchvision's architectures (and are torchvision's own when
it is installed and the scale is full); the BERT-base encoder is 12 layers of
``nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True, activation="gelu")`` on
(batch, 128, 768) floats, without embeddings. ``tiny=True`` shrinks each (fewer blocks and
channels, small inputs) for tests. Batch norms get random running statistics (mean ~ N(0,
0.1), variance ~ U(0.5, 2)) so that folding them is checked, not multiplied by one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["NETWORKS", "Network", "bert_encoder", "build", "mobilenet_v2", "resnet50"]


@dataclass(frozen=True)
class Network:
    """A model ready to run and the shape of one input at batch 1."""

    name: str
    module: nn.Module
    input_shape: tuple[int, ...]  # the batch dimension first, as 1
    source: str  # "torchvision" or "polyopt.bench.model.networks"

    def example(self, batch: int, seed: int = 0) -> torch.Tensor:
        """A seeded random input at ``batch``."""
        gen = torch.Generator().manual_seed(seed)
        return torch.randn((batch, *self.input_shape[1:]), generator=gen)


# ------------------------------------------------------------------ ResNet-50
class Bottleneck(nn.Module):
    """torchvision's Bottleneck: 1x1, 3x3 (strided), 1x1 to 4x the width, plus the shortcut."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


class ResNet(nn.Module):
    """torchvision's ResNet with Bottleneck blocks: stem, four stages, pool, classifier."""

    def __init__(self, blocks: tuple[int, ...], width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        stages, inplanes = [], width
        for i, count in enumerate(blocks):
            planes = width * 2 ** i
            for k in range(count):
                stages.append(Bottleneck(inplanes, planes, 2 if i > 0 and k == 0 else 1))
                inplanes = planes * Bottleneck.expansion
        self.layers = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(self.layers(self.stem(x)))
        return self.fc(torch.flatten(y, 1))


def resnet50(tiny: bool = False) -> nn.Module:
    """ResNet-50 ([3, 4, 6, 3] bottlenecks, 1000 classes); tiny: one block a stage, width 8."""
    return ResNet((1, 1, 1, 1), 8, 10) if tiny else ResNet((3, 4, 6, 3))


# ------------------------------------------------------------------ MobileNetV2
def _divisible(value: float, divisor: int = 8) -> int:
    """torchvision's _make_divisible: round to a multiple of 8, never 10% below ``value``."""
    out = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * value else out


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
             relu6: bool = True) -> list[nn.Module]:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2,
                                         groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return [*layers, nn.ReLU6(inplace=True)] if relu6 else layers


class InvertedResidual(nn.Module):
    """Expand (1x1), depthwise 3x3, project (1x1, linear); a shortcut when shapes agree."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = _conv_bn(cin, hidden, 1) if expand != 1 else []
        layers += _conv_bn(hidden, hidden, 3, stride, groups=hidden)
        layers += _conv_bn(hidden, cout, 1, relu6=False)
        self.conv = nn.Sequential(*layers)
        self.shortcut = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.shortcut else self.conv(x)


# (expansion, channels, blocks, first stride): torchvision's table for width 1.0
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))
MOBILENET_TINY = ((1, 8, 1, 1), (6, 16, 1, 2), (6, 24, 1, 2))


class MobileNetV2(nn.Module):
    def __init__(self, settings: tuple[tuple[int, int, int, int], ...], first: int = 32,
                 last: int = 1280, classes: int = 1000) -> None:
        super().__init__()
        layers = _conv_bn(3, first, 3, 2)
        cin = first
        for expand, channels, count, stride in settings:
            cout = _divisible(channels)
            for k in range(count):
                layers.append(InvertedResidual(cin, cout, stride if k == 0 else 1, expand))
                cin = cout
        layers += _conv_bn(cin, last, 1)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(y, 1))


def mobilenet_v2(tiny: bool = False) -> nn.Module:
    """MobileNetV2 at width 1.0 with ReLU6; tiny: three one-block stages, 64 features."""
    return MobileNetV2(MOBILENET_TINY, 8, 64, 10) if tiny else MobileNetV2(MOBILENET_V2)


# ------------------------------------------------------------------ BERT-base encoder
def bert_encoder(tiny: bool = False) -> nn.Module:
    """12 layers of TransformerEncoderLayer(768, 12, 3072, GELU); tiny: 2 of (32, 2, 64)."""
    width, heads, hidden, count = (32, 2, 64, 2) if tiny else (768, 12, 3072, 12)
    layer = nn.TransformerEncoderLayer(width, heads, hidden, dropout=0.1, activation="gelu",
                                       batch_first=True)
    return nn.TransformerEncoder(layer, count, enable_nested_tensor=False)


# ------------------------------------------------------------------ building
def _torchvision(name: str) -> Callable[[], nn.Module] | None:
    """torchvision's constructor of ``name`` (random weights), or None when not installed."""
    try:
        models = importlib.import_module("torchvision.models")
    except ImportError:
        return None
    return {"resnet50": lambda: models.resnet50(weights=None),
            "mobilenetv2": lambda: models.mobilenet_v2(weights=None)}.get(name)


# name -> (own constructor, input shape at batch 1 full, tiny)
NETWORKS: dict[str, tuple[Callable[[bool], nn.Module], tuple[int, ...], tuple[int, ...]]] = {
    "resnet50": (resnet50, (1, 3, 224, 224), (1, 3, 32, 32)),
    "mobilenetv2": (mobilenet_v2, (1, 3, 224, 224), (1, 3, 32, 32)),
    "bert": (bert_encoder, (1, 128, 768), (1, 16, 32)),
}


def randomize_batch_norms(module: nn.Module, gen: torch.Generator) -> None:
    """Running mean ~ N(0, 0.1) and variance ~ U(0.5, 2), and affine weights near 1 and 0:
    folding a batch norm that is not the identity is what the error check must see."""
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            assert m.running_mean is not None and m.running_var is not None
            m.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
            m.running_var.copy_(0.5 + 1.5 * torch.rand(n, generator=gen))
            m.weight.data.copy_(1 + 0.1 * torch.randn(n, generator=gen))
            m.bias.data.copy_(0.1 * torch.randn(n, generator=gen))


def build(name: str, tiny: bool = False, seed: int = 0) -> Network:
    """Model ``name`` (a key of NETWORKS) with seeded random weights, in eval mode."""
    if name not in NETWORKS:
        raise KeyError(f"unknown model {name!r}; choose from {', '.join(NETWORKS)}")
    own, shape, tiny_shape = NETWORKS[name]
    torch.manual_seed(seed)  # the layers' own initializers draw from the global generator
    vision = None if tiny else _torchvision(name)
    module = vision() if vision is not None else own(tiny)
    randomize_batch_norms(module, torch.Generator().manual_seed(seed + 1))
    source = "torchvision" if vision is not None else "polyopt.bench.model.networks"
    return Network(name, module.eval(), tiny_shape if tiny else shape, source)
