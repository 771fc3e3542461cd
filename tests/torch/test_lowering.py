"""Each ATen operator the backend lowers, against eager torch, at seeded random shapes.

Every case compiles a small function with ``torch.compile(backend=polyopt)`` under
``no_grad``, checks that the operator under test ran inside a partition (no fallback), and
compares with eager: relative L2 error within float32's reach for the reduction's length
(16-bit types: their own epsilon).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the torch backend needs PyTorch")
F = torch.nn.functional
compiler = pytest.importorskip("polyopt.torch.compiler")
partition = pytest.importorskip("polyopt.torch.partition")
graph = pytest.importorskip("polyopt.torch.graph")

EPS = {torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def run(fn: Callable[..., Any], *inputs: Any, dtype: Any = torch.float32, reduce: int = 1,
        allowed: tuple[str, ...] = ()) -> compiler.Record:
    """Compile ``fn``, compare with eager, and return what the backend did."""
    record = compiler.Record()
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(fn, backend=compiler.make_backend(record, choose=False))(*inputs)
        want = fn(*inputs)
    assert record.plans and any(p.partitions for p in record.plans), "nothing was lowered"
    falls = [f for p in record.plans for f in p.fallbacks
             if not any(a in f.target for a in allowed)]
    assert not falls, falls
    outs = got if isinstance(got, tuple) else (got,)
    refs = want if isinstance(want, tuple) else (want,)
    for g, w in zip(outs, refs, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        if not w.dtype.is_floating_point:
            assert torch.equal(g, w)
            continue
        tol = 8 * EPS[w.dtype] * math.sqrt(reduce) + 1e-7
        err = ((g.double() - w.double()).norm() / max(w.double().norm(), 1e-30)).item()
        assert err <= tol, (err, tol)
    return record


def shape(rng: random.Random, rank: int, lo: int = 1, hi: int = 9) -> tuple[int, ...]:
    return tuple(rng.randint(lo, hi) for _ in range(rank))


UNARY = [torch.relu, torch.exp, torch.tanh, torch.sigmoid, torch.neg, torch.abs,
         lambda x: torch.sqrt(x.abs() + 1), lambda x: torch.rsqrt(x.abs() + 1),
         lambda x: torch.log(x.abs() + 1), F.gelu, lambda x: F.gelu(x, approximate="tanh"),
         F.silu, F.relu6, lambda x: F.hardtanh(x, -0.5, 0.5), F.hardswish,
         lambda x: F.leaky_relu(x, 0.1), lambda x: x.clamp(-0.2, 0.3), torch.erf,
         lambda x: x.pow(2), lambda x: x.pow(3.0), lambda x: 1 / (x.abs() + 1)]


@pytest.mark.parametrize("k", range(len(UNARY)))
def test_unary(k: int) -> None:
    rng = random.Random(k)
    x = torch.randn(shape(rng, rng.randint(1, 4)))
    run(lambda t: UNARY[k](t) * 2.0, x)


BINARY = [torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum,
          lambda a, b: a - 2.5 * b, lambda a, b: torch.where(a > b, a, b * 3),
          lambda a, b: 1.5 - a + b]


@pytest.mark.parametrize("k", range(len(BINARY)))
def test_binary_broadcast(k: int) -> None:
    rng = random.Random(100 + k)
    s = shape(rng, 3)
    other = tuple(1 if rng.random() < 0.4 else n for n in s)[rng.randint(0, 2):]
    a, b = torch.randn(s), torch.randn(other).abs() + 0.5
    run(lambda x, y: BINARY[k](x, y) + 0.0, a, b)


@pytest.mark.parametrize("op", ["gt", "lt", "ge", "le", "eq", "ne"])
def test_comparisons(op: str) -> None:
    a, b = torch.randint(0, 3, (4, 5)).float(), torch.randint(0, 3, (5,)).float()
    run(lambda x, y: torch.where(getattr(torch, op)(x, y), x, y * 2), a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matmuls(dtype: Any) -> None:
    rng = random.Random(7)
    m, k, n, bsz = (rng.randint(3, 40) for _ in range(4))
    a, b, c = (torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype),
               torch.randn(n, dtype=dtype))
    run(lambda x, y, z: torch.relu(x @ y + z), a, b, c, dtype=dtype, reduce=k)
    lin = torch.nn.Linear(k, n).to(dtype)
    run(lambda x: lin(x), torch.randn(bsz, m, k, dtype=dtype), dtype=dtype, reduce=k)
    x3, y3 = torch.randn(bsz, m, k, dtype=dtype), torch.randn(bsz, k, n, dtype=dtype)
    run(torch.bmm, x3, y3, dtype=dtype, reduce=k)


@pytest.mark.parametrize("groups, stride, padding, dilation", [
    (1, 1, 1, 1), (1, 2, 0, 1), (2, 1, 2, 2), (6, 2, 1, 1), (3, 1, 0, 1)])
def test_conv2d(groups: int, stride: int, padding: int, dilation: int) -> None:
    rng = random.Random(groups * 31 + stride)
    conv = torch.nn.Conv2d(6, 3 * groups, 3, stride, padding, dilation, groups,
                           bias=rng.random() < 0.5)
    x = torch.randn(rng.randint(1, 2), 6, rng.randint(7, 12), rng.randint(7, 12))
    run(lambda t: conv(t), x, reduce=6 * 9 // groups)


def test_conv1d_and_batch_norm_eval() -> None:
    conv, bn = torch.nn.Conv1d(4, 5, 3, padding=1), torch.nn.BatchNorm1d(5).eval()
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2)
    run(lambda t: torch.relu(bn(conv(t))), torch.randn(2, 4, 11), reduce=12)


@pytest.mark.parametrize("dims, keepdim", [((1,), False), ((0, 2), True), ((-1,), True)])
def test_reductions(dims: tuple[int, ...], keepdim: bool) -> None:
    x = torch.randn(5, 6, 7)
    run(lambda t: t.sum(dims, keepdim=keepdim) + t.mean(dims, keepdim=keepdim)
        + t.amax(dims, keepdim=keepdim) - t.amin(dims, keepdim=keepdim), x, reduce=42)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(dim: int) -> None:
    x = torch.randn(4, 9, 5) * 3
    run(lambda t: torch.softmax(t, dim) + torch.log_softmax(t, dim), x, reduce=9)


def test_layer_norm() -> None:
    ln = torch.nn.LayerNorm((5, 7))
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    run(lambda t: ln(t), torch.randn(3, 5, 7) * 2 + 1, reduce=35)
    run(lambda t: F.layer_norm(t, (7,)), torch.randn(4, 7))


def test_pooling() -> None:
    x = torch.randn(2, 3, 13, 11)
    run(lambda t: F.max_pool2d(t, 3, 2, 1), x)
    run(lambda t: F.avg_pool2d(t, 2), x, reduce=4)
    run(lambda t: F.avg_pool2d(t, 3, 2, 1), x, reduce=9)
    run(lambda t: F.adaptive_avg_pool2d(t, 1).flatten(1), x, reduce=143)


def test_views_read_through() -> None:
    x = torch.randn(2, 3, 4, 5)
    run(lambda t: (t.permute(0, 2, 3, 1) * 2).reshape(2, 4, 5, 3, 1)[:, 1:3, ::2], x)
    run(lambda t: t.transpose(1, 3).unsqueeze(0).expand(3, 2, 5, 4, 3) + 1, x)
    run(lambda t: t.select(1, 2).squeeze() * t[:, -1], x)
    run(lambda t: (t * 2).view(6, 4, 5).view(6, 20).view(2, 3, 4, 5) + 1, x)


def test_permuted_inputs_are_declared_in_their_memory_order() -> None:
    """An input whose strides permute a dense layout (a transposed weight, a permuted
    activation) is declared as its memory lies and read through the permutation: no copy."""
    w = torch.randn(7, 5).t()  # 5 x 7 on strides (1, 5)
    record = run(lambda a, b: torch.relu(a @ b), torch.randn(4, 5), w, reduce=5)
    part = record.plans[0].partitions[0]
    assert (1, 0) in part.layouts and "float(7,5)" in part.source, part
    x = torch.randn(3, 4, 6).permute(2, 0, 1)  # 6 x 3 x 4 on strides (1, 24, 6)
    part = run(lambda t: t * 2 + 1, x).plans[0].partitions[0]
    assert part.layouts == ((1, 2, 0),) and "float(3,4,6)" in part.source, part


def test_a_partitions_output_is_read_row_major_by_the_next() -> None:
    """A transpose one partition computes is copied out row-major, so the partition after
    it (cut at its own product) declares it row-major: ATen's strides for that value (a
    transposed view) would have had the call permute it and copy it back (a training step's
    weight gradient, 65 us a call on the 512 x 64 operand)."""
    record = run(lambda a, b, c: torch.relu(a @ b).t() @ c, torch.randn(4, 5),
                 torch.randn(5, 6), torch.randn(4, 3), reduce=5)
    first, second = record.plans[0].partitions
    assert first.outputs[-1] in second.inputs, (first, second)
    assert not second.layouts, second


def test_a_transpose_of_a_transpose_is_the_tensor_itself() -> None:
    """An identity view (a gradient's weight transposed back) is no copy out of its own."""
    record = run(lambda a, b: torch.relu(a @ b).t().t(), torch.randn(4, 5), torch.randn(5, 6),
                 reduce=5)
    source = record.plans[0].partitions[0].source
    assert "out_" not in source, source


@pytest.mark.parametrize("shape, stride, order", [
    ((5, 7), (7, 1), None),  # row-major already
    ((5, 7), (1, 5), (1, 0)),
    ((6, 3, 4), (1, 24, 6), (1, 2, 0)),
    ((1, 5, 7), (99, 1, 5), (0, 2, 1)),  # a unit dim keeps its place, whatever its stride
    ((5, 7), (14, 2), None),  # a strided slice: not dense
    ((5, 7), (0, 1), None),  # expanded
    ((0, 7), (1, 0), None),  # empty
])
def test_dense_order(shape: tuple[int, ...], stride: tuple[int, ...],
                     order: tuple[int, ...] | None) -> None:
    assert partition.dense_order(shape, stride) == order
    if order is not None:
        base = torch.empty_strided(shape, stride)
        assert base.permute(order).is_contiguous()


def test_merging_reshapes_compute_unmerged() -> None:
    """A reshape that merges dims feeds pointwise ops and a matmul's rows, which compute on
    the unmerged shape; torch views the result (a linear layer on a 3-d input)."""
    lin = torch.nn.Linear(5, 7)
    run(lambda t: torch.relu(lin(t.reshape(6, 4, 5) * 2)).reshape(24, 7) + 1,
        torch.randn(2, 3, 4, 5), reduce=5)


def test_cat_and_embedding() -> None:
    a, b = torch.randn(3, 4), torch.randn(3, 2)
    run(lambda x, y: torch.cat([x * 2, y, x], 1), a, b)
    table, ids = torch.randn(10, 6), torch.tensor([[1, 9, 0], [3, 3, 2]])
    run(lambda t, i: F.embedding(i, t) * 2, table, ids)


def test_merging_reshape_stays_in_torch_with_its_reason() -> None:
    record = run(lambda t: (t * 2).reshape(6, 20)[:, 3:] + 1, torch.randn(2, 3, 4, 5),
                 allowed=("slice",))
    reasons = [f.reason for p in record.plans for f in p.fallbacks]
    assert any("merges dims" in r for r in reasons), reasons


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention(causal: bool) -> None:
    """Decomposed by core ATen into bmm, softmax and masks (-inf, logical ops, any, arange)."""
    q, k, v = (torch.randn(2, 3, 6, 4) for _ in range(3))
    run(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal), q, k, v,
        reduce=6)


def test_masked_fill_with_minus_infinity() -> None:
    mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
    run(lambda t: torch.softmax(t.masked_fill(mask, float("-inf")), -1), torch.randn(2, 5, 5),
        reduce=5)


def test_var_mean_and_adaptive_pooling_and_depthwise() -> None:
    run(lambda t: torch.var_mean(t, -1)[0] + torch.var(t, 0).sum(), torch.randn(4, 9), reduce=36)
    run(lambda t: F.adaptive_avg_pool2d(t, 7), torch.randn(1, 4, 14, 14), reduce=4)
    conv = torch.nn.Conv2d(8, 8, 3, 1, 1, groups=8).eval()
    run(lambda t: F.relu6(conv(t)), torch.randn(1, 8, 9, 9), reduce=9)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_normalizations_and_activations(dtype: Any) -> None:
    """Computed in float32 inside a statement, stored in the tensor's own type."""
    x = torch.randn(3, 16).to(dtype)
    run(lambda t: F.layer_norm(t, (16,)), x, dtype=dtype, reduce=16)
    run(lambda t: torch.softmax(t, -1), x, dtype=dtype, reduce=16)
    run(lambda t: F.gelu(t) * 2 + torch.sigmoid(t), x, dtype=dtype)


@pytest.mark.parametrize("base, shape, exprs, groups", [
    ((256, 512), (4, 64, 512), ("64*{0} + {1}", "{2}"), ((0, 1), (2,))),  # rows split
    ((4, 64), (4, 64, 1), ("{0}", "{1}"), ((0,), (1, 2))),  # a unit dim added
    ((1, 5, 8), (5, 8), ("0", "{0}", "{1}"), ((), (0,), (1,))),  # a unit dim dropped
    ((256, 512), (4, 64, 512), ("64*({0}) + ({1})", "{2}"), ((0, 1), (2,))),
    ((256, 512), (64, 4, 512), ("{0} + 64*{1}", "{2}"), None),  # split, then permuted
    ((5, 7), (7, 5), ("{1}", "{0}"), None),  # a transpose
    ((256, 384), (64, 4, 128), ("4*{0} + {1}", "(128*1 + {2})"), None),  # a slice
    ((256, 512), (4, 64, 512), ("64*{0} + {1} + {0}*{1}", "{2}"), None),  # not affine
])
def test_a_view_splits_its_base_when_it_is_its_memory_reshaped(
        base: tuple[int, ...], shape: tuple[int, ...], exprs: tuple[str, ...],
        groups: tuple[tuple[int, ...], ...] | None) -> None:
    view = graph.View(graph.Stored("t", base, "float"), shape, exprs)
    assert view.splitting() == groups
    if groups is not None:  # torch's own reshape of the base reads the same elements
        flat = torch.arange(math.prod(base)).reshape(base)
        for point in [(0,) * len(shape), tuple(n - 1 for n in shape)]:
            at = [graph._integer(e.format(*point)) for e in exprs]
            assert flat.reshape(shape)[point] == flat[tuple(at)]
