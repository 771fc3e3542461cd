"""The measured choice between a partition's kernel and torch's own operators."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the torch backend needs PyTorch")
nn, F = torch.nn, torch.nn.functional
compiler = pytest.importorskip("polyopt.torch.compiler")
choice = pytest.importorskip("polyopt.torch.choice")
partition = pytest.importorskip("polyopt.torch.partition")
make_fx = pytest.importorskip("torch.fx.experimental.proxy_tensor").make_fx


def rel(a: Any, b: Any) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


def model() -> Any:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 8), nn.GELU(), nn.Linear(8, 4), nn.ReLU()).eval()


@pytest.fixture
def verdicts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Any]:
    """Measurements replaced by verdicts set here, each one counted: torch 1 ms against
    polyopt's 2 on a matrix product (on everything once ``everything`` is appended), else
    3 ms (on everything once ``polyopt_wins`` is); a cache of their own."""
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path))
    calls: list[Any] = []

    def fake(ours: Any, theirs: Any, args: Any) -> Any:
        calls.append(theirs)
        product = any(n.target in choice.MEASURED for n in theirs.graph.nodes)
        wins = (product or "everything" in calls) and "polyopt_wins" not in calls
        return choice.Verdict(polyopt_ms=2.0, torch_ms=1.0 if wins else 3.0)
    monkeypatch.setattr(choice, "measure", fake)
    return calls


def compiled(net: Any, x: Any) -> tuple[Any, Any]:
    record = compiler.Record()
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(net, backend=compiler.make_backend(record))(x)
    return got, record


def test_torch_subgraph_computes_what_the_partition_computes() -> None:
    """``subgraph`` is torch's run of exactly the partition: the same outputs, on the
    random inputs ``example`` makes."""
    def fn(x: Any, w1: Any, b1: Any, w2: Any) -> Any:
        return torch.relu(F.linear(F.gelu(F.linear(x, w1, b1)), w2)) * 2

    args = (torch.randn(5, 12), torch.randn(8, 12), torch.randn(8), torch.randn(4, 8))
    gm = make_fx(fn, tracing_mode="fake")(*args)
    cut = partition.plan(gm)
    assert len(cut.partitions) == 2
    for part in cut.partitions:
        call = compiler.PartitionCall(part, compiler.compile_partition(part, None))
        inputs = choice.example(gm, part)
        ours, theirs = call(*inputs), choice.subgraph(gm, part)(*inputs)
        for a, b in zip(ours, theirs, strict=True):
            assert rel(a, b) < 1e-5
    timed = choice.measure(call, choice.subgraph(gm, part), inputs)
    assert timed.polyopt_ms > 0 and timed.torch_ms > 0


def test_a_matrix_product_torch_runs_faster_stays_in_torch(verdicts: list[Any]) -> None:
    """The matrix product goes back to torch, with the measurement as its reason, and the
    operators after it become partitions of their own, measured in turn."""
    net, x = model(), torch.randn(6, 12)
    got, record = compiled(net, x)
    assert rel(got, net(x)) < 1e-5
    (cut,) = record.plans
    assert [f.target for f in cut.fallbacks] == ["aten.addmm.default"] * 2
    assert all("torch runs part0_" in f.reason and "torch 1.000 ms" in f.reason
               for f in cut.fallbacks)
    assert [len(p.nodes) for p in cut.partitions] == [1, 1]  # gelu, relu
    assert len(verdicts) == 4 and len(record.left) == 2
    assert {str(v) for v in record.verdicts.values()} == {
        "measured: polyopt 2.000 ms, torch 3.000 ms"}


def test_a_partition_torch_runs_faster_without_a_contraction_goes_back_whole(
        verdicts: list[Any]) -> None:
    verdicts.append("everything")
    net, x = model(), torch.randn(6, 12)
    got, record = compiled(net, x)
    assert rel(got, net(x)) < 1e-5
    (cut,) = record.plans
    assert not cut.partitions
    assert {f.target for f in cut.fallbacks} == {"aten.addmm.default", "partition"}


def test_where_polyopt_is_faster_nothing_moves(verdicts: list[Any]) -> None:
    verdicts.append("polyopt_wins")
    net, x = model(), torch.randn(6, 12)
    got, record = compiled(net, x)
    assert rel(got, net(x)) < 1e-5
    (cut,) = record.plans
    assert not cut.fallbacks and len(cut.partitions) == 2
    assert {str(v) for v in record.verdicts.values()} == {
        "measured: polyopt 2.000 ms, torch 3.000 ms"}


def test_convolutions_are_not_measured(verdicts: list[Any]) -> None:
    """A convolution's partition stays in polyopt unmeasured (``choice.MEASURED``)."""
    torch.manual_seed(2)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    x = torch.randn(1, 3, 8, 8)
    got, record = compiled(net, x)
    assert rel(got, net(x)) < 1e-5
    assert not verdicts
    assert not record.plans[0].fallbacks and len(record.plans[0].partitions) == 1


def test_verdicts_are_measured_once_per_source_and_then_read_from_disk(
        verdicts: list[Any]) -> None:
    """Twin blocks share one measurement; a second compile measures nothing."""
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh()).eval()
    x = torch.randn(3, 8)
    compiled(net, x)
    assert len(verdicts) == 2  # the twin matrix products once, then their epilogue once
    got, record = compiled(net, x)
    assert len(verdicts) == 2 and rel(got, net(x)) < 1e-5
    assert len(record.plans[0].fallbacks) == 2


def test_explain_gives_the_measured_times(verdicts: list[Any]) -> None:
    net, x = model(), torch.randn(6, 12)
    with torch.no_grad():
        text = compiler.explain(net, x)
    assert "torch: addmm (aten.addmm.default): torch runs part0_0 faster" in text
    assert "== 2 partitions torch ran faster, as measured" in text
    assert text.count("-- measured: polyopt 2.000 ms, torch 1.000 ms") == 2
