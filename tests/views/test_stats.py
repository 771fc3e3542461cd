"""Kernel.stats(): flops, compulsory traffic, footprints per loop, marked loops, roofline."""

from __future__ import annotations

import json
import sys

import pytest

import polyopt
from polyopt.costmodel.machine import Machine
from polyopt.costmodel.roofline import roofline
from polyopt.errors import OptionError
from polyopt.poly.count import count_at
from polyopt.views.stats import value_ops

MATMUL = polyopt.kernels.get("matmul")
CEILINGS = {"freq_ghz": 2.0, "bandwidth_gbs": 10.0}  # no measurement in tests


def _matmul(**sizes: int) -> polyopt.Kernel:
    return polyopt.compile(MATMUL, "matmul", sizes=sizes)


def test_matmul_counts_two_flops_per_instance_and_each_matrix_once() -> None:
    m, n, k = 13, 7, 5
    st = _matmul(M=m, N=n, K=k).stats(**CEILINGS)
    assert st.flops.value == 2 * m * n * k
    assert [(s.name, s.ops) for s in st.statements if s.flops.value] == [("C_0", 2)]
    assert st.dram_bytes.value == 4 * (m * k + k * n + m * n)
    by = {t.tensor: t for t in st.traffic}
    assert (by["A"].read.value, by["A"].written.value) == (m * k, 0)
    assert (by["C"].read.value, by["C"].written.value) == (0, m * n)  # +=! reads no memory
    assert st.intensity == pytest.approx(2 * m * n * k / (4 * (m * k + k * n + m * n)))


def test_parametric_matmul_is_a_quasi_polynomial() -> None:
    st = polyopt.compile(MATMUL, "matmul").stats()
    assert st.flops.value is None and "2 * M * K * N" in str(st.flops)
    for m, n, k in ((1, 1, 1), (3, 5, 7), (16, 2, 9)):
        sizes = {"M": m, "N": n, "K": k}
        assert count_at(st.flops, sizes) == 2 * m * n * k
        assert count_at(st.dram_bytes, sizes) == 4 * (m * k + k * n + m * n)
    assert st.roofline is None and st.intensity is None
    assert "quasi-polynomials" in str(st)


def test_strided_conv_reads_only_the_rows_it_uses() -> None:
    # Stride 3, a 2-tap window, no padding: rows 0,1,3,4,6,7 of 8 are read, 2 and 5 are not.
    n, c, h, w, f, kh, kw = 2, 3, 8, 8, 4, 2, 2
    src = polyopt.kernels.get("conv2d", stride=3)
    st = polyopt.compile(src, "conv2d", sizes=dict(N=n, C=c, H=h, W=w, F=f, KH=kh, KW=kw)
                         ).stats(**CEILINGS)
    oh = (h - kh) // 3 + 1
    used = len({3 * o + r for o in range(oh) for r in range(kh)})
    assert used == 6
    assert st.flops.value == 2 * n * f * oh * oh * c * kh * kw
    by = {t.tensor: t for t in st.traffic}
    assert by["I"].read.value == n * c * used * used
    assert st.dram_bytes.value == 4 * (n * c * used * used + f * c * kh * kw + n * f * oh * oh)


def test_padded_conv_counts_the_padding_as_no_traffic() -> None:
    n, c, h, f, k = 1, 2, 6, 3, 3
    src = polyopt.kernels.get("conv2d", stride=2, padding=1)
    st = polyopt.compile(src, "conv2d", sizes=dict(N=n, C=c, H=h, W=h, F=f, KH=k, KW=k)
                         ).stats(**CEILINGS)
    oh = (h + 2 - k) // 2 + 1
    assert st.flops.value == 2 * n * f * oh * oh * c * k * k  # padded taps are computed too
    assert {t.tensor: t.read.value for t in st.traffic}["I"] == n * c * h * h


def test_locals_are_not_dram_traffic() -> None:
    n, d = 6, 10
    src = polyopt.kernels.get("softmax")
    st = polyopt.compile(src, "softmax", sizes=dict(N=n, D=d)).stats(**CEILINGS)
    assert st.dram_bytes.value == 4 * 2 * n * d
    local = {t.tensor: t.bytes.value for t in st.traffic if t.role == "local"}
    assert local == {"mx": 4 * n, "E": 4 * n * d, "den": 4 * n}
    # max=! (1), exp(x - m) (2), +=! (1), / (1)
    assert [s.ops for s in st.statements] == [1, 2, 1, 1]
    assert st.flops.value == 5 * n * d


def test_an_output_updated_in_place_is_read_too() -> None:
    src = "def g(float(N) X) -> (S) { S(i) += X(i) }"  # += on the caller's buffer
    with pytest.warns(polyopt.PolyoptWarning, match="without initialization"):
        k = polyopt.compile(src, "g", sizes={"N": 6})
    by = {t.tensor: t for t in k.stats(**CEILINGS).traffic}
    assert (by["S"].read.value, by["S"].written.value) == (6, 6)
    fresh = polyopt.compile("def f(float(N) X) -> (S) { S(i) = X(i)\n S(i) += X(i) }", "f",
                            sizes={"N": 6}).stats(**CEILINGS)
    assert {t.tensor: t.read.value for t in fresh.traffic}["S"] == 0  # read after its write


def test_footprints_of_a_tiled_schedule_match_a_hand_count() -> None:
    m, n, k = 16, 12, 16
    base = polyopt.schedule(MATMUL, "matmul", auto=False, sizes=dict(M=m, N=n, K=k))
    tiled = base.tile(("m2", "n2", "k"), (8, 8, 4)).parallel("m2_o")
    st = polyopt.compile(MATMUL, "matmul", sizes=dict(M=m, N=n, K=k), schedule=tiled
                         ).stats(**CEILINGS)
    feet = {f.loop: {t: b.value for t, b in f.bytes} for f in st.footprints}
    assert feet["m2_o"] == {"A": 4 * 8 * k, "B": 4 * k * n, "C": 4 * 8 * n}
    assert feet["n2_o"] == {"A": 4 * 8 * k, "B": 4 * k * 8, "C": 4 * 8 * 8}
    assert feet["k_o"] == {"A": 4 * 8 * 4, "B": 4 * 4 * 8, "C": 4 * 8 * 8}
    assert feet["k_i"] == {"A": 4, "B": 4, "C": 4}
    assert feet["m"] == {"C": 4 * n}
    assert [f.depth for f in st.footprints if f.loop.startswith(("m2", "n2", "k"))] == \
        [1, 2, 3, 4, 5, 6]
    assert st.parallel == ("m2_o",) and st.vector == ()


def test_roofline_and_a_measured_point() -> None:
    st = _matmul(M=32, N=32, K=32).stats(seconds=1e-4, **CEILINGS)
    roof = st.roofline
    assert roof is not None
    assert roof.peak_gflops == pytest.approx(roof.lanes * 2 * roof.fma_units * 2.0 * roof.cores)
    assert st.attainable_gflops == pytest.approx(min(roof.peak_gflops, 10.0 * st.intensity))
    assert st.achieved_gflops == pytest.approx(2 * 32 ** 3 / 1e-4 / 1e9)
    assert st.fraction == pytest.approx(st.achieved_gflops / st.attainable_gflops)
    assert "of attainable" in str(st)
    doc = json.loads(json.dumps(st.as_dict()))
    assert doc["flops"] == 2 * 32 ** 3 and doc["roofline"]["bandwidth_gbs"] == 10.0
    assert doc["footprints"][0]["bytes"]


def test_bad_arguments_are_option_errors() -> None:
    k = _matmul(M=4, N=4, K=4)
    with pytest.raises(OptionError, match="seconds"):
        k.stats(seconds=-1.0)
    with pytest.raises(OptionError, match="bandwidth_gbs"):
        k.stats(bandwidth_gbs=0, freq_ghz=1.0)
    with pytest.raises(OptionError, match="freq_ghz"):
        roofline(Machine(32, 16), 4, freq_ghz="fast", bandwidth_gbs=1.0)  # type: ignore[arg-type]


def test_value_ops_skip_index_arithmetic() -> None:
    st = polyopt.compile("def f(float(N) X) -> (Y) { Y(i) = exp(X(i + 1)) * 2.0 - X(i) }",
                         "f", sizes={"N": 9}).stats(**CEILINGS)
    (s,) = st.statements
    assert s.ops == 3 and s.instances.value == 8 and st.flops.value == 24
    assert value_ops.__doc__


def test_roofline_plot(tmp_path: pytest.TempPathFactory) -> None:
    pytest.importorskip("matplotlib", reason="the roofline plot needs matplotlib")
    from polyopt.views.roofplot import plot_roofline
    st = _matmul(M=32, N=32, K=32).stats(seconds=1e-4, **CEILINGS)
    out = tmp_path / "roof.png"  # type: ignore[operator]
    plot_roofline(st, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "roof.svg"  # type: ignore[operator]
    plot_roofline(st, str(svg))
    assert "<svg" in svg.read_text()
    with pytest.raises(OptionError, match="must end in"):
        plot_roofline(st, str(tmp_path / "roof.txt"))  # type: ignore[operator]
    with pytest.raises(OptionError, match="every size"):
        plot_roofline(polyopt.compile(MATMUL, "matmul").stats(), str(out))


def test_roofline_plot_without_matplotlib_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from polyopt.errors import MissingToolError
    from polyopt.views.roofplot import plot_roofline
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails
    st = _matmul(M=8, N=8, K=8).stats(**CEILINGS)
    with pytest.raises(MissingToolError, match="matplotlib"):
        plot_roofline(st, "roof.png")
