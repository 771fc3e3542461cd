"""A contraction's pointwise epilogue is written into the contraction's tensor."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch", reason="the torch backend needs PyTorch")
nn = torch.nn
compiler = pytest.importorskip("polyopt.torch.compiler")
epilogue = pytest.importorskip("polyopt.torch.epilogue")
Statement = pytest.importorskip("polyopt.torch.aten").Statement


def source_of(model: object, *inputs: object) -> str:
    record = compiler.Record()
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=compiler.make_backend(record, choose=False))(*inputs)
    (part,) = record.plans[0].partitions
    return part.source


def test_conv_bias_relu_is_one_tensor_written_three_times() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()
    text = source_of(model, torch.randn(1, 3, 6, 6))
    targets = re.findall(r"^\s+(\w+)\(i0", text, re.M)
    assert len(targets) == 3 and len(set(targets)) == 1
    assert f"-> ({targets[0]})" in text and "local" not in text


class _Block(nn.Module):
    """A linear on a (batch, tokens, features) input, as a transformer's feed-forward has:
    its product is two-dimensional and the GELU and residual add see it viewed in 3-D."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.gelu(self.up(x))


def test_a_linear_on_a_3d_input_keeps_its_epilogue_in_the_product() -> None:
    """The GELU and the add run in the product's own 2-D tensor: no 3-D copy for them, and
    the def returns the product's tensor (torch views it back to 3-D)."""
    model, x = _Block().eval(), torch.randn(1, 5, 8)
    text = source_of(model, x)
    targets = re.findall(r"^\s+(\w+)\(i0", text, re.M)
    assert len(set(targets)) == 1 and len(targets) == 4, text
    assert "local" not in text
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend=compiler.make_backend())(x)
        torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)


def test_a_linear_on_a_batch_of_sequences_keeps_its_epilogue_in_the_product() -> None:
    """At batch 3 the product's rows are split into (batch, tokens) by the view back to
    3-D: its bias and GELU still run on the 2-D product, and torch views the result."""
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU()).eval()
    x = torch.randn(3, 5, 8)
    text = source_of(model, x)
    targets = re.findall(r"^\s+(\w+)\(i0", text, re.M)
    assert len(set(targets)) == 1 and len(targets) == 3, text
    assert "local" not in text and "out_" not in text, text
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend=compiler.make_backend())(x)
        torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)


def statement(target: str, rhs: str, op: str = "=", shape: tuple[int, ...] = (4,)) -> Statement:
    reads = frozenset(re.findall(r"\b(\w+)\(", rhs))
    return Statement(target, f"{target}(i0) {op} {rhs} where i0 in 0:4", reads, op, shape)


def test_a_result_read_twice_or_returned_keeps_its_tensor() -> None:
    mm = statement("mm_1", "A(i0, k0) * B(k0)", "+=!")
    twice = [mm, statement("pw_2", "max(mm_1(i0), 0.0)"), statement("pw_3", "mm_1(i0) * 2.0")]
    assert epilogue.fold_epilogues(twice, {"A", "B"}, {"pw_2", "pw_3"}) == (twice, {})
    chain = [mm, statement("pw_2", "max(mm_1(i0), 0.0)")]
    assert epilogue.fold_epilogues(chain, {"A", "B"}, {"mm_1", "pw_2"}) == (chain, {})
    shifted = [mm, statement("pw_2", "mm_1(3 - i0)")]
    assert epilogue.fold_epilogues(shifted, {"A", "B"}, {"pw_2"}) == (shifted, {})
    folded, renames = epilogue.fold_epilogues(chain, {"A", "B"}, {"pw_2"})
    assert renames == {"pw_2": "mm_1"}
    assert folded[1].text == "mm_1(i0) = max(mm_1(i0), 0.0) where i0 in 0:4"
