"""``torch.compile(model, backend="polyopt")`` on whole models, against eager."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import polyopt
from polyopt import driver
from polyopt.runtime import cpu

torch = pytest.importorskip("torch", reason="the torch backend needs PyTorch")
nn = torch.nn
compiler = pytest.importorskip("polyopt.torch.compiler")
partition = pytest.importorskip("polyopt.torch.partition")


def rel(a: Any, b: Any) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


def compiled(model: Any, *inputs: Any, limit: int | None = compiler.MAX_CONTRACTIONS
             ) -> tuple[Any, compiler.Record]:
    record = compiler.Record()
    torch._dynamo.reset()
    backend = compiler.make_backend(record, max_contractions=limit, choose=False)
    return torch.compile(model, backend=backend)(*inputs), record


def test_backend_by_name_through_the_entry_point() -> None:
    assert "polyopt" in torch._dynamo.list_backends()
    model = nn.Sequential(nn.Linear(6, 5), nn.GELU(), nn.Linear(5, 3)).eval()
    x = torch.randn(4, 6)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="polyopt")(x)
        assert rel(got, model(x)) < 1e-5


@pytest.mark.parametrize("limit", [compiler.MAX_CONTRACTIONS, None])
def test_transformer_encoder_layer_runs_in_partitions(limit: int | None) -> None:
    """The inference fast path (one fused ATen op) is decomposed; with no limit the whole
    layer, attention included, is one def, else one def per contraction (six)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        got, record = compiled(layer, x, limit=limit)
        assert rel(got, layer(x)) < 1e-5
    assert [len(p.partitions) for p in record.plans] == [1 if limit is None else 6]
    assert not record.plans[0].fallbacks


def test_conv_block_with_batch_norm_and_residual() -> None:
    torch.manual_seed(1)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
            self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
            self.pool = nn.MaxPool2d(3, 2, 1)

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.b1(self.c1(x)))
            return self.pool(torch.relu(self.b2(self.c2(y)) + x))

    block = Block().eval()
    for bn in (block.b1, block.b2):
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 8, 9, 9)
    with torch.no_grad():
        got, record = compiled(block, x)
        assert rel(got, block(x)) < 1e-5
    assert not record.plans[0].fallbacks


def test_inference_folds_batch_norm_into_the_convolution() -> None:
    """Under no_grad the weights are constants: each conv + batch norm is one convolution
    with folded weights (no statement reads the statistics); with gradients, nothing folds."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                          nn.Conv2d(6, 4, 1, bias=False), nn.BatchNorm2d(4)).eval()
    for bn in (model[1], model[4]):
        bn.running_mean.normal_(0, 0.3)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.normal_()
        bn.bias.data.normal_()
    x = torch.randn(2, 3, 7, 7)
    with torch.no_grad():
        got, record = compiled(model, x)
        assert rel(got, model(x)) < 1e-5
    sources = [p.source for p in record.plans[0].partitions]
    assert len(sources) == 2 and not any("rsqrt" in s for s in sources)
    assert all(any("_polyopt_frozen_w" in i for i in p.inputs)
               for p in record.plans[0].partitions)
    got, record = compiled(model, x)  # gradients enabled: a forward and a backward graph
    assert rel(got, model(x)) < 1e-5
    assert any("rsqrt" in p.source for p in record.plans[0].partitions)


def test_training_step_matches_eager_gradients() -> None:
    """The backward graph goes through the same lowering."""
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    twin = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    twin.load_state_dict(model.state_dict())
    x, target = torch.randn(5, 6), torch.randn(5, 3)
    out, record = compiled(lambda a, t: ((model(a) - t) ** 2).mean(), x, target)
    out.backward()
    ((twin(x) - target) ** 2).mean().backward()
    assert len(record.plans) == 2  # forward and backward
    assert all(p.partitions for p in record.plans)
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        assert rel(p.grad, q.grad) < 1e-5


def test_unsupported_op_stays_in_torch_and_explain_says_why() -> None:
    def fn(x: Any) -> Any:
        return torch.cumsum(torch.relu(x) * 2, 0) + 1

    x = torch.randn(6, 4)
    with torch.no_grad():
        got, record = compiled(fn, x)
        assert rel(got, fn(x)) < 1e-6
        text = compiler.explain(fn, x, choose=False)
    assert [f.target for f in record.plans[0].fallbacks] == ["aten.cumsum.default"]
    assert "torch: cumsum (aten.cumsum.default): no lowering for aten.cumsum.default" in text
    assert "partition part0_0: 2 ops" in text and "def partition(" in text
    assert "-- schedule" in text


def test_dynamic_shapes_compile_once_per_shape() -> None:
    """With ``dynamic=True`` the graph has symbolic sizes: it is traced again and compiled at
    each new shape (every op lowered there), and a shape seen before reuses its kernels."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 3)).eval()
    record = compiler.Record()
    torch._dynamo.reset()
    fast = torch.compile(model, backend=compiler.make_backend(record, choose=False),
                         dynamic=True)
    with torch.no_grad():
        for n in (3, 5, 3):
            x = torch.randn(n, 8)
            assert rel(fast(x), model(x)) < 1e-5
    assert [len(p.partitions) for p in record.plans] == [2, 2]
    assert not any(p.fallbacks for p in record.plans)


def test_views_of_weights_are_read_in_place_not_copied() -> None:
    """A linear layer's transposed weight is a view each partition reads through: no
    partition outputs it, and explain gives each partition's roofline bound."""
    model = nn.Sequential(nn.Linear(12, 8), nn.GELU(), nn.Linear(8, 4)).eval()
    x = torch.randn(5, 12)
    with torch.no_grad():
        got, record = compiled(model, x)
        assert rel(got, model(x)) < 1e-5
        text = compiler.explain(model, x, choose=False)
    assert [len(p.outputs) for p in record.plans[0].partitions] == [1, 1]
    assert text.count("-- predicted: ") == 2 and "roofline at" in text


def test_a_partition_that_fails_to_compile_runs_in_torch_with_a_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """polyopt's own failure (here a compile error) costs speed, never the model."""
    def broken(part: Any, options: Any) -> Any:
        raise polyopt.CompileError("cc: error: something broke", log="x.c:1: error: bad\n",
                                   source_path=None)
    monkeypatch.setattr(compiler, "compile_partition", broken)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU()).eval()
    x = torch.randn(3, 6)
    with torch.no_grad(), pytest.warns(polyopt.PolyoptWarning, match="x.c:1: error: bad"):
        got, record = compiled(model, x)
        assert rel(got, model(x)) < 1e-6
    assert not record.plans[0].partitions
    assert {f.target for f in record.plans[0].fallbacks} == {"partition"}


def test_repeated_blocks_share_one_kernel() -> None:
    """Identical blocks (same ops, same shapes, other weights) lower to one source."""
    torch.manual_seed(5)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(3)]).eval()
    x = torch.randn(2, 8)
    with torch.no_grad():
        got, record = compiled(model, x)
        assert rel(got, model(x)) < 1e-5
    parts = record.plans[0].partitions
    assert len(parts) == 3 and len({p.source for p in parts}) == 1
    assert len({id(k) for k in record.kernels.values()}) == 1


def test_two_values_of_one_tensor_are_one_output_that_torch_views() -> None:
    """A layer norm's result read both as it is and merged (BERT's residual and next linear
    layer): the def computes it once, with no copy (whose 3-d index map cost isl's scheduler
    its 20 s limit in BERT at batch 8), and torch views it."""
    norm = nn.LayerNorm(8)
    x = torch.randn(2, 3, 8)

    def f(a: Any) -> Any:
        y = norm(a * 2.0)
        return y, y.reshape(6, 8)
    with torch.no_grad():
        (got, merged), record = compiled(f, x)
        want = f(x)
    assert rel(got, want[0]) < 1e-6 and rel(merged, want[1]) < 1e-6
    assert merged.shape == (6, 8)
    [part] = record.plans[0].partitions
    assert part.picks == (0, 0) and part.source.count("-> (ln_") == 1
    assert "out_" not in part.source  # no copy


def test_inference_packs_each_layers_weights_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Frozen weights are constants of their kernels: a kernel shared by twin layers keeps
    each layer's packed weights, made at the first call, never again."""
    torch.manual_seed(6)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(70, 70), nn.ReLU())
                            for _ in range(3)]).eval()
    x = torch.randn(24, 70)  # sizes whose schedule packs the weight
    runs: list[bool] = []
    real = cpu.CpuKernel.run

    def spy(self: Any, *args: Any, once: bool = False, **kwargs: Any) -> Any:
        runs.append(once)
        return real(self, *args, once=once, **kwargs)
    monkeypatch.setattr(cpu.CpuKernel, "run", spy)
    record = compiler.Record()
    torch._dynamo.reset()
    fn = torch.compile(model, backend=compiler.make_backend(record, choose=False))
    with torch.no_grad():
        for _ in range(3):
            assert rel(fn(x), model(x)) < 1e-5
    [kernel] = {id(k): k for k in record.kernels.values()}.values()
    assert kernel.lowered().source.held  # the weight's packed copy
    assert runs.count(True) == 3  # one per layer, at the first call
    with torch.no_grad():
        assert "-- packed once (constants): in" in compiler.explain(model, x, choose=False)


def test_training_graphs_have_no_constants() -> None:
    model = nn.Sequential(nn.Linear(70, 70), nn.ReLU())
    x = torch.randn(24, 70)  # sizes whose schedule packs the weight, were it constant
    out, record = compiled(lambda a: model(a).sum(), x)
    out.backward()
    assert record.kernels
    assert not any(k.lowered().source.held for k in record.kernels.values())


def test_encoder_layer_training_step_matches_eager_gradients() -> None:
    """Attention, layer norms and dropout-free feed-forward, forward and backward."""
    torch.manual_seed(7)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    twin = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    twin.load_state_dict(layer.state_dict())
    x, target = torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    out, record = compiled(lambda a, t: (layer(a) - t).square().mean(), x, target)
    out.backward()
    (twin(x) - target).square().mean().backward()
    assert len(record.plans) == 2 and all(p.partitions for p in record.plans)
    # one vector: some of these gradients are ~1e-8 (the key bias's, softmax's invariance),
    # where a relative error per tensor measures only rounding
    got = torch.cat([p.grad.flatten() for p in layer.parameters()])
    want = torch.cat([q.grad.flatten() for q in twin.parameters()])
    assert rel(got, want) < 1e-5
    # core ATen's decomposition of the attention kernel got the input projection's wrong
    assert rel(layer.self_attn.in_proj_weight.grad, twin.self_attn.in_proj_weight.grad) < 1e-5
    # every input a partition declares is read: a view lowered for a node whose result
    # died was an input all the same (torch computed it, the call converted it)
    for part in (p for plan in record.plans for p in plan.partitions):
        body = part.source.partition("{")[2]
        for k in range(len(part.inputs)):
            assert f"{partition.input_name(k)}(" in body, (part.name, k, part.source)


def lowered_ahead(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, rhs: str) -> list[str]:
    """Two partition sources (``o(i,j) = rhs``, at 4x3 and 4x5) lowered ahead into a disk
    cache of their own, as on two cores."""
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiler.host, "usable_cores", lambda: 2)
    sources = [f"def partition(float(4,{n}) in0) -> (o) {{ o(i,j) = {rhs} }}" for n in (3, 5)]
    compiler.lower_ahead([(source, None) for source in sources])
    return sources


def test_partitions_are_lowered_ahead_in_worker_processes(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``lower_ahead`` lowers in worker processes into the disk cache: the compiles that
    follow here load what they lowered and lower nothing."""
    sources = lowered_ahead(tmp_path, monkeypatch, "in0(i,j) * 2.0")
    lowered: list[int] = []
    real = driver.lower_program
    monkeypatch.setattr(driver, "lower_program",
                        lambda *a, **k: lowered.append(1) or real(*a, **k))
    for n, source in zip((3, 5), sources, strict=True):
        got = compiler.compile_partition_source(source, None)(np.ones((4, n), np.float32))
        np.testing.assert_array_equal(got, np.full((4, n), 2.0, np.float32))
    assert not lowered


def test_a_warm_start_forks_no_workers(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an earlier process lowered (its hint recorded) is not lowered ahead again: a
    warm start forks no worker only to load records."""
    sources = lowered_ahead(tmp_path, monkeypatch, "in0(i,j) + 1.0")
    for source in sources:
        compiler.compile_partition_source(source, None)
    forked: list[int] = []
    monkeypatch.setattr(compiler, "ProcessPoolExecutor",
                        lambda *a, **k: forked.append(1) or pytest.fail("forked"))
    compiler.lower_ahead([(source, None) for source in sources])
    assert not forked


def test_the_toolchain_is_warmed_while_the_graph_is_traced(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``make_backend`` starts a thread that builds a tiny kernel (the C compiler's self-test
    and the trampoline come with a first build); a compile waits for it before building."""
    monkeypatch.setenv("POLYOPT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiler, "_toolchain", [])
    built: list[str] = []
    real = compiler._build_tiny
    monkeypatch.setattr(compiler, "_build_tiny", lambda: built.append("tiny") or real())
    compiler.make_backend()
    compiler.make_backend()  # once per process
    assert len(compiler._toolchain) == 1
    compiler.toolchain_ready()
    assert built == ["tiny"] and not compiler._toolchain[0].is_alive()
    monkeypatch.setenv("POLYOPT_NO_CACHE", "1")
    monkeypatch.setattr(compiler, "_toolchain", [])
    compiler.make_backend()  # nothing to keep for later builds: no thread
    assert not compiler._toolchain
