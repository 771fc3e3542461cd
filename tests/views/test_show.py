"""polyopt show: the schedule tree and dependence graph as text and DOT; the CLI commands."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

import polyopt
from polyopt import cli
from polyopt.views import show

MATMUL = polyopt.kernels.get("matmul")


def _schedule(k: int = 8) -> polyopt.Schedule:
    return polyopt.compile(MATMUL, "matmul", sizes=dict(M=8, N=8, K=k)).schedule


def test_dependences_carry_distance_vectors_over_shared_iterators() -> None:
    edges = {(e.kind, e.source, e.target): e for e in show.dep_edges(_schedule(k=6))}
    red = edges["reduction", "C_0", "C_0"]
    assert red.shared == ("m", "n", "r_k") and red.distance == ("0", "0", "1..5")
    assert red.label() == "reduction (m, n, r_k): (0, 0, 1..5)"
    assert edges["flow", "C_0_init", "C_0"].distance == ("0", "0")


def test_symbolic_distances_and_unshared_statements() -> None:
    src = "def f(float(N) X) -> (Y, Z) { Y(i) = 2.0 * X(i)\n Z(j) = Y(j) + 1.0 }"
    sched = polyopt.schedule(src, "f", auto=False)
    (e,) = [e for e in show.dep_edges(sched) if e.kind == "flow"]
    assert e.shared == () and "Y_0[i] -> Z_0[j = i]" in e.label()
    red = next(e for e in show.dep_edges(polyopt.schedule(MATMUL, "matmul", auto=False))
               if e.kind == "reduction")
    assert red.distance == ("0", "0", "1..*")


def test_tree_text_names_loops_marks_sequences_and_leaves() -> None:
    text = show.tree_text(_schedule())
    assert "\n  sequence\n" in text or text.startswith("sequence\n")
    assert "leaf: C_0_init" in text and "leaf: C_0" in text
    assert re.search(r"loop \w+ = .*\[.*vectorize.*\]", text)
    assert "reduction (m, n, r_k): (0, 0, 1..7)" in show.deps_text(_schedule())


def test_quote_escapes_what_a_user_can_write() -> None:
    assert show.quote('a"b\\c\nd\x07') == '"a\\"b\\\\c\\nd"'


def _well_formed(dot: str) -> None:
    """Balanced braces, quoted strings closed, every statement ended, every edge between
    declared nodes."""
    body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', dot)  # strings out of the way
    assert '"' not in body.replace('""', "")
    assert body.count("{") == body.count("}")
    declared = set(re.findall(r"^\s*(n\d+) \[", body, re.M))
    for a, b in re.findall(r"^\s*(n\d+) -> (n\d+)", body, re.M):
        assert a in declared and b in declared
    for line in body.splitlines()[1:-1]:
        assert line.rstrip().endswith(("{", "}", ";")), line


def test_dot_is_well_formed() -> None:
    src = 'def f(float(N) X) -> (Y) local (T) { T(i) = X(i) * 2.0\n Y(i) = T(i) * T(i) }'
    sched = polyopt.compile(src, "f", sizes={"N": 16}).schedule
    dot = show.to_dot(sched)
    _well_formed(dot)
    assert "cluster_tree" in dot and "cluster_deps" in dot and "flow" in dot
    _well_formed(show.to_dot(_schedule(), deps=False))
    # A relation label is cut short on the edge (the text form keeps all of it).
    assert show._short("x" * 1000).endswith("(truncated)")


@pytest.mark.skipif(show.dot_program() is None, reason="graphviz's `dot` is not on PATH")
def test_dot_renders_svg_and_png(tmp_path: pytest.TempPathFactory) -> None:
    svg = tmp_path / "s.svg"  # type: ignore[operator]
    show.render(show.to_dot(_schedule()), "svg", str(svg))
    assert "<svg" in svg.read_text()
    png = tmp_path / "s.png"  # type: ignore[operator]
    assert cli.main(["show", "matmul", "--sizes", "M=8,N=8,K=8", "--png", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    subprocess.run([str(show.dot_program()), "-V"], check=True, capture_output=True)


def test_cli_show_text_dot_and_missing_graphviz(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: pytest.TempPathFactory) -> None:
    assert cli.main(["show", "matmul", "--sizes", "M=8,N=8,K=8", "--tree"]) == 0
    out = capsys.readouterr().out
    assert "leaf: C_0" in out and "->" not in out
    assert cli.main(["show", "matmul", "--sizes", "M=8,N=8,K=8", "--deps", "--dot"]) == 0
    _well_formed(capsys.readouterr().out)
    monkeypatch.setattr(show, "dot_program", lambda: None)
    path = str(tmp_path / "x.svg")  # type: ignore[operator]
    assert cli.main(["show", "matmul", "--sizes", "M=8,N=8,K=8", "--svg", path]) == 0
    got = capsys.readouterr()
    assert "not on PATH" in got.err and "sequence" in got.out


def test_cli_stats_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["stats", "matmul", "--sizes", "M=8,N=4,K=2", "--bandwidth", "10", "--freq", "2"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "total flops: 128" in out and "arithmetic intensity" in out and "roofline" in out
    assert cli.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["flops"] == 128 and doc["dram_bytes"] == 4 * (16 + 8 + 32)


@pytest.mark.cc
def test_cli_stats_time_places_a_measured_point(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["stats", "matmul", "--sizes", "M=16,N=16,K=16", "--time", "--repeat",
                     "2", "--bandwidth", "10", "--freq", "2"]) == 0
    assert "measured:" in capsys.readouterr().out


def test_cli_stats_errors_name_the_problem(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["stats", "matmul", "--plot", "x.png"]) == 2
    assert "every size" in capsys.readouterr().err
