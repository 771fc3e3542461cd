"""Text-level tests of polyopt.kernels: names(), path(), get() and the .tc files themselves.

These need neither the compiler nor a C compiler.
"""

from __future__ import annotations

import re

import pytest

from polyopt import OptionError
from polyopt import kernels as K

REQUIRED = {
    "matmul", "matmul_nt", "matmul_tn", "batch_matmul", "matvec",
    "conv2d", "conv2d_bias_relu", "depthwise_conv2d", "maxpool2d", "avgpool2d",
    "bias_add", "relu", "matmul_bias_relu", "softmax", "layernorm",
    "polybench_2mm", "polybench_3mm", "polybench_atax", "polybench_bicg", "polybench_mvt",
    "polybench_gemver", "polybench_doitgen", "polybench_syrk",
}
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def header(src: str, name: str) -> dict[str, int]:
    m = re.search(rf"def\s+{name}\s*<([^>]*)>", src)
    assert m, src
    return {k.strip(): int(v) for k, v in (item.split("=") for item in m.group(1).split(","))}


def test_names_sorted_unique_and_complete() -> None:
    ns = K.names()
    assert ns == sorted(set(ns))
    assert set(ns) >= REQUIRED, sorted(REQUIRED - set(ns))
    assert all(IDENT.match(n) for n in ns)


def test_each_def_is_single_and_commented() -> None:
    for name in K.names():
        src = K.get(name)
        if 0 not in K.params(name).values():
            assert src == K.source(name)
        defs = re.findall(r"^\s*def\s+(\w+)", src, re.MULTILINE)
        assert defs == [name], (name, defs)
        first = src.lstrip().splitlines()[0]
        assert first.startswith("#"), f"{name}: no numpy-equivalent comment above the def"
        assert src.count("{") == src.count("}") == 1, name


def test_files_are_families_and_path() -> None:
    fams = K.families()
    assert {"matmul", "conv", "pool", "norm", "epilogue", "polybench"} <= set(fams)
    for name in K.names():
        p = K.path(name)
        assert p.name.endswith(".tc")
        assert re.search(rf"^\s*def\s+{name}\b", p.read_text(encoding="utf-8"), re.MULTILINE)
    assert K.path("conv").name == "conv.tc"


def test_get_friendly_params() -> None:
    src = K.get("conv2d", stride=2, padding=1, dilation=2, groups=1)
    assert header(src, "conv2d") == {"SH": 2, "SW": 2, "PH": 1, "PW": 1, "DH": 2, "DW": 2}
    src = K.get("conv2d", stride=(2, 1), padding=(0, 3))
    assert header(src, "conv2d") == {"SH": 2, "SW": 1, "PW": 3, "DH": 1, "DW": 1}
    src = K.get("conv2d", SH=3)
    assert header(src, "conv2d")["SH"] == 3


def test_get_inlines_zero_padding() -> None:
    """<...> parameters must be positive: a zero padding becomes the literal 0."""
    assert K.params("conv2d")["PH"] == 0
    src = K.get("conv2d")
    assert header(src, "conv2d") == {"SH": 1, "SW": 1, "DH": 1, "DW": 1}
    body = src[src.index("def "):]
    assert not re.search(r"\bP[HW]\b", body)
    assert "pad I(0, 0, 0, 0)" in body
    # Comments keep their names.
    assert K.get("maxpool2d").count("PH") == K.source("maxpool2d")[
        :K.source("maxpool2d").index("def ")].count("PH")
    for name in K.names():
        assert 0 not in header_or_empty(K.get(name), name).values(), name


def header_or_empty(src: str, name: str) -> dict[str, int]:
    return header(src, name) if re.search(rf"def\s+{name}\s*<", src) else {}


def test_get_pool_kernel_size_sets_stride() -> None:
    h = header(K.get("maxpool2d", kernel_size=3), "maxpool2d")
    assert (h["KH"], h["KW"], h["SH"], h["SW"]) == (3, 3, 3, 3)
    h = header(K.get("avgpool2d", kernel_size=3, stride=1, padding=1), "avgpool2d")
    assert (h["KH"], h["SH"], h["PH"]) == (3, 1, 1)


def test_get_grouped_conv() -> None:
    src = K.get("conv2d", groups=2, in_channels=4, out_channels=6, stride=2)
    assert re.findall(r"^\s*def\s+(\w+)", src, re.MULTILINE) == ["conv2d"]
    h = header(src, "conv2d")
    assert (h["FG"], h["CG"], h["SH"]) == (3, 2, 2)
    assert "(f / FG) * CG" in src
    with pytest.raises(OptionError, match="in_channels"):
        K.get("conv2d", groups=2)
    with pytest.raises(OptionError, match="divisible"):
        K.get("conv2d", groups=2, in_channels=3, out_channels=4)
    with pytest.raises(OptionError):
        K.get("depthwise_conv2d", groups=2)


def test_get_errors() -> None:
    with pytest.raises(OptionError, match="conv2d"):
        K.get("conv2", stride=1)
    with pytest.raises(OptionError, match="matmul"):
        K.get("matmull")
    with pytest.raises(OptionError, match="stride") as e:
        K.get("conv2d", strid=2)
    assert "padding" in str(e.value) and "SH" in str(e.value)
    with pytest.raises(OptionError):
        K.get("matmul", stride=2)
    with pytest.raises(OptionError):
        K.get("conv2d", stride=0)
    with pytest.raises(OptionError):
        K.get("conv2d", padding=-1)
    with pytest.raises(OptionError):
        K.get("conv2d", stride=(1, 2, 3))
    with pytest.raises(OptionError):
        K.get("conv2d", stride=2, SH=3)
    with pytest.raises(OptionError):
        K.path("nope")
