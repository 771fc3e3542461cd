"""polyopt.torch: TC definitions as PyTorch custom operators, against torch's own operators.

Forward results, zero-copy buffers, fake-tensor shapes, torch.compile(fullgraph=True),
16-bit floats, bad inputs, einsum on tensors, and gradients (the gradcheck suite runs once
polyopt.grad exists; one test wires a hand-written gradient in its place now).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import polyopt
from polyopt.errors import InputTypeError, OptionError, PolyoptError, ShapeError

torch = pytest.importorskip("torch", reason="polyopt.torch needs PyTorch (pip install "
                                            "polyopt[torch])")
F = pytest.importorskip("torch.nn.functional")
pt = pytest.importorskip("polyopt.torch")

pytestmark = pytest.mark.cc

kernels = polyopt.kernels
ROOT = Path(__file__).resolve().parents[2]


def randn(*shape: int, seed: int = 0, dtype: Any = None, grad: bool = False) -> Any:
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=dtype or torch.float32)
    return t.requires_grad_(grad)


def close(got: Any, want: Any, reduction: int, scale: float = 1.0) -> None:
    """Agreement within the rounding of a length-``reduction`` sum in ``got``'s dtype."""
    assert got.shape == want.shape and got.dtype == want.dtype
    eps = torch.finfo(got.dtype).eps
    tol = 4 * eps * (reduction + 1) * scale
    torch.testing.assert_close(got.double(), want.double(), rtol=tol, atol=tol)


def double(source: str) -> str:
    """A bundled float32 def in float64 (gradcheck's precision)."""
    return re.sub(r"\bfloat\b", "double", source)


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    yield
    torch._dynamo.reset()


# -- packaging -------------------------------------------------------------------------------
def test_import_polyopt_does_not_import_torch() -> None:
    code = "import sys, polyopt; assert 'torch' not in sys.modules, 'torch was imported'"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def test_setup_cfg_has_torch_extra() -> None:
    text = (ROOT / "setup.cfg").read_text()
    assert re.search(r"^torch =\n\s+torch>=", text, re.MULTILINE)


# -- forward ---------------------------------------------------------------------------------
def test_matmul_and_its_transposes_match_torch() -> None:
    a, b = randn(5, 7, seed=1), randn(7, 3, seed=2)
    close(pt.op(kernels.get("matmul"))(a, b), a @ b, 7)
    close(pt.op(kernels.get("matmul_nt"))(a, b.T.contiguous()), a @ b, 7)
    close(pt.op(kernels.get("matmul_tn"))(a.T.contiguous(), b), a @ b, 7)


def test_conv2d_with_stride_padding_dilation_and_groups_matches_torch() -> None:
    x, w = randn(2, 4, 9, 8, seed=3), randn(6, 2, 3, 3, seed=4)
    conv = pt.op(kernels.get("conv2d", stride=2, padding=1, dilation=2, groups=2,
                             in_channels=4, out_channels=6))
    close(conv(x, w), F.conv2d(x, w, stride=2, padding=1, dilation=2, groups=2), 18, 4)


def test_softmax_layernorm_and_pooling_match_torch() -> None:
    x = randn(3, 10, seed=5)
    close(pt.op(kernels.get("softmax"))(x), torch.softmax(x, 1), 10)
    g, b = randn(10, seed=6), randn(10, seed=7)
    close(pt.op(kernels.get("layernorm"))(x, g, b), F.layer_norm(x, (10,), g, b, 1e-5), 10, 8)
    img = randn(1, 2, 6, 6, seed=8)
    close(pt.op(kernels.get("maxpool2d"))(img), F.max_pool2d(img, 2), 1)


def test_sizes_are_bound_per_call() -> None:
    mm = pt.op(kernels.get("matmul"))
    for m, k, n in [(2, 3, 4), (6, 1, 5), (2, 3, 4)]:
        a, b = randn(m, k, seed=m), randn(k, n, seed=n)
        close(mm(a, b), a @ b, k)
    assert pt.op(kernels.get("matmul")) is mm  # one operator per definition and options


def test_several_outputs_and_python_scalars() -> None:
    a, r, p = randn(4, 3, seed=1), randn(4, seed=2), randn(3, seed=3)
    s, q = pt.op(kernels.get("polybench_bicg"))(a, r, p)
    close(s, r @ a, 4)
    close(q, a @ p, 3)
    c = randn(4, 4, seed=4)
    gemm = pt.op(kernels.get("polybench_gemm"))
    close(gemm(1.5, 0.5, a, a.T.contiguous(), c), 1.5 * a @ a.T + 0.5 * c, 3, 2)


def test_non_contiguous_inputs_are_made_contiguous() -> None:
    a, b = randn(7, 5, seed=1).T, randn(3, 7, seed=2)[:, ::1].T  # a strided view, a transpose
    assert not a.is_contiguous()
    close(pt.op(kernels.get("matmul"))(a, b), a @ b, 7)


def test_eager_calls_skip_the_dispatcher_with_the_same_result(monkeypatch: Any) -> None:
    """Plain CPU tensors needing no gradient go straight to the implementation; anything
    else (a gradient, a mode, tracing) goes through the registered operator."""
    mm = pt.op(kernels.get("matmul"))
    a, b = randn(4, 3), randn(3, 2)
    want = mm.custom_op(a, b)
    dispatched: list[int] = []
    monkeypatch.setattr(mm, "custom_op", lambda *args: dispatched.append(1) or want)
    torch.testing.assert_close(mm(a, b), want, rtol=0, atol=0)
    assert not dispatched
    mm(a.requires_grad_(), b)
    assert dispatched


def test_requires_grad_inputs_run_forward() -> None:
    a, b = randn(3, 4, grad=True), randn(4, 2)
    c = pt.op(kernels.get("matmul"))(a, b)
    assert c.requires_grad and c.grad_fn is not None
    close(c.detach(), (a @ b).detach(), 4)


# -- zero copy -------------------------------------------------------------------------------
def test_inputs_and_outputs_share_memory_with_the_kernel(monkeypatch: Any) -> None:
    """The kernel reads the tensors' own memory and the outputs are its buffers."""
    seen: list[tuple[list[int], list[int]]] = []
    call = polyopt.Kernel.__call__

    def spy(self: Any, *inputs: Any, **kw: Any) -> Any:
        out = call(self, *inputs, **kw)
        outs = out if isinstance(out, tuple) else (out,)
        seen.append(([x.ctypes.data for x in inputs], [o.ctypes.data for o in outs]))
        return out

    monkeypatch.setattr(polyopt.Kernel, "__call__", spy)
    for dtype in ("float32", "bfloat16"):
        mm = pt.op(kernels.get("matmul").replace("float", dtype))
        a, b = randn(4, 3, dtype=getattr(torch, dtype)), randn(3, 2, dtype=getattr(torch, dtype))
        c = mm(a, b)
        ins, outs = seen[-1]
        assert ins == [a.data_ptr(), b.data_ptr()]
        assert outs == [c.data_ptr()]


# -- fake tensors and torch.compile ----------------------------------------------------------
def test_fake_shapes_come_from_range_inference_without_running(monkeypatch: Any) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    def refuse(*args: Any, **kw: Any) -> Any:
        raise AssertionError("a kernel was compiled or run on fake tensors")

    conv = pt.op(kernels.get("conv2d", stride=2, padding=1, dilation=2))
    pool = pt.op(kernels.get("avgpool2d", kernel_size=3, stride=2, padding=1))
    bicg = pt.op(kernels.get("polybench_bicg"))
    monkeypatch.setattr(polyopt.Kernel, "__call__", refuse)
    monkeypatch.setattr(polyopt.Kernel, "lowered", refuse)
    with FakeTensorMode():
        x, w = torch.empty(2, 3, 17, 12), torch.empty(5, 3, 3, 3)
        assert conv(x, w).shape == F.conv2d(x, w, stride=2, padding=1, dilation=2).shape
        assert pool(x).shape == F.avg_pool2d(x, 3, 2, 1).shape == (2, 3, 9, 6)
        s, q = bicg(torch.empty(6, 4), torch.empty(6), torch.empty(4))
        assert (s.shape, q.shape, s.dtype) == ((4,), (6,), torch.float32)
        with pytest.raises(ShapeError, match="size K is 5 from A dim 1 but 4 from B dim 0"):
            pt.op(kernels.get("matmul"))(torch.empty(3, 5), torch.empty(4, 2))


def test_opcheck_schema_fake_and_autograd_registration() -> None:
    mm = pt.op(kernels.get("matmul"))
    result = torch.library.opcheck(mm.custom_op, (randn(4, 5), randn(5, 3)))
    assert set(result.values()) == {"SUCCESS"}


def test_runs_under_torch_compile_fullgraph() -> None:
    mm = pt.op(kernels.get("matmul"))
    bicg = pt.op(kernels.get("polybench_bicg"))

    def f(a: Any, b: Any, r: Any) -> Any:
        s, q = bicg(a, r, mm(b, b.T)[:, 0].contiguous())
        return torch.relu(mm(a, b)) + s.sum() + q.sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    for m, k in [(4, 3), (5, 2)]:  # a second shape: traced again, compiled for its sizes
        a, b, r = randn(m, k, seed=m), randn(k, 6, seed=k), randn(m, seed=9)
        close(compiled(a, b, r), f(a, b, r), m * k, 8)


def test_runs_under_torch_compile_with_inductor() -> None:
    mm = pt.op(kernels.get("matmul"))
    compiled = torch.compile(lambda a, b: torch.tanh(mm(a, b)) * 2, fullgraph=True)
    a, b = randn(4, 5), randn(5, 3)
    close(compiled(a, b), torch.tanh(a @ b) * 2, 5, 4)


def test_dynamic_shapes_trace_once() -> None:
    """Symbolic sizes: the output extents are affine in them (floor divisions included), so
    one graph serves every shape; polyopt still compiles a kernel per shape at run time."""
    from torch._dynamo.testing import CompileCounterWithBackend

    conv = pt.op(kernels.get("conv2d", stride=2, padding=1, dilation=2))
    pool = pt.op(kernels.get("avgpool2d", kernel_size=3, stride=2, padding=1))
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda x, w: pool(conv(x, w)) + 1, fullgraph=True,
                             backend=counter, dynamic=True)
    for n, h, w in [(3, 9, 8), (6, 12, 7)]:  # no two sizes alike (torch would tie them)
        x, wt = randn(n, 4, h, w, seed=h), randn(5, 4, 2, 2, seed=w)
        want = F.avg_pool2d(F.conv2d(x, wt, stride=2, padding=1, dilation=2), 3, 2, 1) + 1
        close(compiled(x, wt), want, 16, 4)
    assert counter.frame_count == 1


def test_dynamic_shapes_specialize_where_sizes_must_be_known() -> None:
    """x(S*i) is affine only once S is known: each shape is traced on its own."""
    sub = pt.op("def sub(float(N) x, float(S) s) -> (y) { y(i) = x(S*i) }")
    compiled = torch.compile(lambda x, s: sub(x, s) * 2, fullgraph=True, backend="aot_eager",
                             dynamic=True)
    for n, step in [(10, 3), (13, 4)]:
        x = torch.arange(float(n))
        close(compiled(x, torch.zeros(step)), 2 * x[::step], 1)


# -- dtypes ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_floats_accumulate_in_float32(dtype: str) -> None:
    """4096 ones sum to 4096 exactly: a float16 sum would stall at 2048, bfloat16 at 256."""
    total = pt.op(f"def total({dtype}(N) x) -> (s) {{ s +=! x(r_n) }}")
    t = getattr(torch, dtype)
    got = total(torch.ones(4096, dtype=t))
    assert got.dtype == t and float(got) == 4096.0
    mm = pt.op(kernels.get("matmul").replace("float", dtype))
    a, b = randn(6, 40, dtype=t), randn(40, 5, dtype=t)
    want = (a.float() @ b.float()).to(t)  # accumulated in float32, rounded once
    close(mm(a, b), want, 1, 2)


def test_dtype_rank_and_extent_mismatches_raise_shape_errors() -> None:
    mm = pt.op(kernels.get("matmul"))
    with pytest.raises(ShapeError, match=r"input A must have dtype torch.float32, got "
                                         r"torch.float64"):
        mm(randn(2, 3, dtype=torch.float64), randn(3, 2))
    with pytest.raises(ShapeError, match="input B must have rank 2"):
        mm(randn(2, 3), randn(3))
    with pytest.raises(ShapeError, match="size K is 3 from A dim 1 but 4 from B dim 0"):
        mm(randn(2, 3), randn(4, 2))
    with pytest.raises(ShapeError, match=r"takes 2 input\(s\) \(A, B\), got 1"):
        mm(randn(2, 3))
    dw = pt.op(kernels.get("depthwise_conv2d"))
    with pytest.raises(ShapeError, match="input Wt dim 1 must have extent 1, got 2"):
        dw(randn(1, 2, 5, 5), randn(2, 2, 3, 3))


def test_bad_arguments_raise_polyopt_errors() -> None:
    mm = pt.op(kernels.get("matmul"))
    with pytest.raises(InputTypeError, match=r"input A must be a torch\.Tensor, not numpy"):
        mm(np.ones((2, 3), np.float32), randn(3, 2))
    with pytest.raises(OptionError, match="source must be a string"):
        pt.op(b"def f() {}")
    with pytest.raises(PolyoptError, match="no def named 'nope'"):
        pt.op(kernels.get("matmul"), "nope")
    with pytest.raises(OptionError, match=r"unknown option|target"):
        pt.op(kernels.get("matmul"), target="tpu")


# -- einsum ----------------------------------------------------------------------------------
def test_einsum_on_tensors_returns_tensors() -> None:
    a, b = randn(3, 4, seed=1), randn(4, 5, seed=2)
    got = polyopt.einsum("ij,jk->ik", a, b)
    assert isinstance(got, torch.Tensor)
    close(got, a @ b, 4)
    close(pt.einsum("bij,bjk->bik", a[None], b[None]), (a @ b)[None], 4)
    h = randn(3, 4, dtype=torch.bfloat16)
    close(pt.einsum("ij->", h), h.float().sum().to(torch.bfloat16), 1, 2)
    with pytest.raises(OptionError, match="does not take out"):
        polyopt.einsum("ij->ji", a, out=torch.empty(4, 3))


def test_einsum_of_a_conjugate_view_is_the_conjugates_product() -> None:
    """Issue 40: x.conj() (a lazily conjugated view) raised torch's RuntimeError from
    .numpy(); its product is now the conjugate's, eager and through the operator."""
    x = randn(3, 4, seed=1, dtype=torch.complex64)
    y = randn(4, 5, seed=2, dtype=torch.complex64)
    want = x.conj().resolve_conj() @ y
    for got in (polyopt.einsum("ij,jk->ik", x.conj(), y), pt.einsum("ij,jk->ik", x.conj(), y),
                pt.einsum("ij,jk->ik", x.conj().requires_grad_(), y)):
        torch.testing.assert_close(got.detach(), want, rtol=1e-5, atol=1e-5)
    real = randn(3, 4, seed=3)
    close(pt.einsum("ij,jk->ik", real.conj(), randn(4, 5, seed=4)), real @ randn(4, 5, seed=4), 4)


@pytest.mark.parametrize("make", [lambda t: t.to_sparse(), lambda t: t.to_sparse_csr()],
                         ids=["coo", "csr"])
def test_sparse_tensors_are_refused_with_what_to_pass(make: Any) -> None:
    """Issue 40: a sparse tensor raised torch's RuntimeError (unsupported memory format)."""
    mm = pt.op(kernels.get("matmul"))
    a = make(randn(2, 3))
    with pytest.raises(InputTypeError, match=r"input A is a sparse tensor \(layout "
                                             r"torch\.sparse_.*pass it as \.to_dense\(\)"):
        mm(a, randn(3, 2))
    with pytest.raises(InputTypeError, match=r"einsum: operand 0 is a sparse tensor"):
        polyopt.einsum("ij,jk->ik", a, randn(3, 2))
    with pytest.raises(InputTypeError, match=r"operand 1 is a sparse tensor"):
        pt.einsum("ij,jk->ik", randn(2, 3), make(randn(3, 2)).requires_grad_(False))


def test_einsum_runs_under_torch_compile() -> None:
    a, b = randn(3, 4, seed=1), randn(5, 4, seed=2)
    for einsum in (pt.einsum, polyopt.einsum):
        compiled = torch.compile(lambda x, y, f=einsum: f("ij,kj->ik", x, y) - 1,
                                 fullgraph=True, backend="aot_eager")
        close(compiled(a, b), a @ b.T - 1, 4, 2)


# -- gradients -------------------------------------------------------------------------------
_MATMUL64 = "def matmul(double(M,K) A, double(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"


def _spy_grad(calls: list[Any]) -> Any:
    real = pt.ops.autodiff.grad

    def grad(source: str, name: str | None = None, wrt: Any = None) -> str:
        calls.append((name, wrt))
        return real(source, name, wrt)
    return grad


def test_autograd_derives_one_gradient_per_input_that_needs_one(monkeypatch: Any) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(pt.ops, "autodiff", SimpleNamespace(grad=_spy_grad(calls)))
    mm = pt.op(_MATMUL64, options={"knobs": {"mr": 4}})  # an op of its own: nothing cached
    a, b = randn(4, 3, dtype=torch.float64, grad=True), randn(3, 5, dtype=torch.float64,
                                                             seed=1, grad=True)
    assert torch.autograd.gradcheck(mm, (a, b))
    assert calls[0] == ("matmul", None)  # op creation checks that it can be differentiated
    assert sorted(calls[1:]) == [("matmul", ["A"]), ("matmul", ["B"])]
    b2 = b.detach()  # only A needs a gradient: only d_A is computed (derived already)
    a.grad = None
    mm(a, b2).sum().backward()
    assert len(calls) == 3 and b2.grad is None and a.grad is not None
    compiled = torch.compile(lambda x, y: (mm(x, y) ** 2).sum(), fullgraph=True,
                             backend="aot_eager")
    a.grad = b.grad = None
    compiled(a, b).backward()
    want_a, want_b = torch.autograd.grad(((a @ b) ** 2).sum(), (a, b))
    close(a.grad, want_a, 3 * 5, 8)
    close(b.grad, want_b, 3 * 4, 8)


_GELU = """def gelu(double(M,N) X) -> (Y) {
    Y(m,n) = 0.5 * X(m,n) * (1 + tanh(0.7978845608028654 * (X(m,n) + 0.044715 * X(m,n)
             * X(m,n) * X(m,n))))
}"""
_MLP = """def mlp(double(B,I) X, double(I,H) W1, double(H,O) W2) -> (Y) local (Hd) {
    Hd(b,h) +=! X(b,r_i) * W1(r_i,h)
    Y(b,o)  +=! fmax(Hd(b,r_h), 0) * W2(r_h,o)
}"""
# (source, def name, input shapes): small, so that each case compiles two kernels quickly.
GRADCHECK = [
    (kernels.get("matmul"), "matmul", [(3, 4), (4, 2)]),
    (kernels.get("matmul_nt"), "matmul_nt", [(3, 4), (2, 4)]),
    (kernels.get("matmul_tn"), "matmul_tn", [(4, 3), (4, 2)]),
    (kernels.get("batch_matmul"), "batch_matmul", [(2, 3, 4), (2, 4, 2)]),
    (kernels.get("matvec"), "matvec", [(3, 4), (4,)]),
    (kernels.get("conv2d", stride=2), "conv2d", [(1, 2, 5, 5), (2, 2, 3, 3)]),
    (kernels.get("conv2d", padding=1), "conv2d", [(1, 2, 4, 4), (2, 2, 3, 3)]),
    (kernels.get("conv2d", dilation=2), "conv2d", [(1, 1, 6, 6), (2, 1, 2, 2)]),
    (kernels.get("conv2d", groups=2, in_channels=4, out_channels=2, stride=2, padding=1),
     "conv2d", [(1, 4, 5, 5), (2, 2, 3, 3)]),
    (kernels.get("depthwise_conv2d", padding=1), "depthwise_conv2d",
     [(1, 3, 4, 4), (3, 1, 3, 3)]),
    (kernels.get("maxpool2d"), "maxpool2d", [(1, 2, 4, 4)]),
    (kernels.get("avgpool2d", kernel_size=3, stride=2, padding=1), "avgpool2d",
     [(1, 2, 5, 5)]),
    (kernels.get("softmax"), "softmax", [(3, 5)]),
    (kernels.get("layernorm"), "layernorm", [(3, 5), (5,), (5,)]),
    (_GELU, "gelu", [(3, 4)]),
    (kernels.get("bias_add"), "bias_add", [(3, 4), (4,)]),
    (kernels.get("relu"), "relu", [(3, 4)]),
    (kernels.get("matmul_bias_relu"), "matmul_bias_relu", [(3, 4), (4, 2), (2,)]),
    (kernels.get("conv2d_bias_relu", padding=1), "conv2d_bias_relu",
     [(1, 2, 4, 4), (2, 2, 3, 3), (2,)]),
    (_MLP, "mlp", [(2, 3), (3, 4), (4, 2)]),
]


@pytest.mark.parametrize("source, name, shapes", GRADCHECK,
                         ids=[f"{n}-{k}" for k, (_, n, _s) in enumerate(GRADCHECK)])
def test_gradcheck(source: str, name: str, shapes: list[tuple[int, ...]]) -> None:
    # Program order: gradcheck tests the derivation and its wiring, and the automatic
    # pipeline's lowering of the convolutions' gradients would take most of a minute.
    f = pt.op(double(source), name, schedule="program-order")
    # Away from zero: relu's and max's kinks, where finite differences disagree.
    inputs = [(randn(*s, seed=k, dtype=torch.float64) + 0.1).requires_grad_()
              for k, s in enumerate(shapes)]
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-5, fast_mode=True)


def test_gradient_under_torch_compile() -> None:
    mm = pt.op(double(kernels.get("matmul")))
    a, b = randn(3, 4, dtype=torch.float64, grad=True), randn(4, 2, dtype=torch.float64,
                                                             grad=True)
    compiled = torch.compile(lambda x, y: torch.sin(mm(x, y)).sum(), fullgraph=True,
                             backend="aot_eager")
    compiled(a, b).backward()
    want = torch.autograd.grad(torch.sin(a @ b).sum(), (a, b))
    close(a.grad, want[0], 4 * 2, 4)
    close(b.grad, want[1], 4 * 3, 4)


def test_opcheck_with_gradients() -> None:
    """opcheck's AOT test traces and runs the backward at dynamic shapes."""
    conv = pt.op(double(kernels.get("conv2d", stride=2, padding=1)))
    x, w = randn(2, 3, 7, 6, dtype=torch.float64, grad=True), randn(4, 3, 3, 3, seed=1,
                                                                     dtype=torch.float64,
                                                                     grad=True)
    result = torch.library.opcheck(conv.custom_op, (x, w))
    assert set(result.values()) == {"SUCCESS"}


def test_gradients_of_several_outputs_and_of_an_unused_one() -> None:
    bicg = pt.op(double(kernels.get("polybench_bicg")))
    a, r, p = (randn(*s, seed=k, dtype=torch.float64, grad=True)
               for k, s in enumerate([(4, 3), (4,), (3,)]))
    assert torch.autograd.gradcheck(bicg, (a, r, p), fast_mode=True)
    s, _ = bicg(a, r, p)  # q unused: its gradient comes as zeros (or None)
    s.square().sum().backward()
    want = torch.autograd.grad((r @ a).square().sum(), (a, r))
    close(a.grad, want[0], 4, 4)
    close(r.grad, want[1], 3, 4)
    assert p.grad is None or not p.grad.any()


def test_a_definition_without_gradient_is_refused_at_creation_unless_forward_only() -> None:
    source = "def gather(float(N) x, int64(M) idx) -> (y) { y(i) = x(idx(i)) }"
    with pytest.raises(polyopt.NotDifferentiableError, match="differentiable=False"):
        pt.op(source)
    gather = pt.op(source, differentiable=False)
    x, idx = randn(5, grad=True), torch.tensor([4, 0, 2])
    y = gather(x, idx)
    close(y.detach(), x.detach()[idx], 1)
    with pytest.raises(PolyoptError, match="differentiable=False"):
        y.sum().backward()


@pytest.mark.gpu
def test_cuda_tensors_run_in_place() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA build of PyTorch and a GPU")
    mm = pt.op(kernels.get("matmul"), target="cuda")
    a, b = randn(64, 32).cuda(), randn(32, 16).cuda()
    c = mm(a, b)
    assert c.device == a.device
    close(c, a @ b, 32)
    compiled = torch.compile(lambda x, y: mm(x, y) * 2, fullgraph=True, backend="aot_eager")
    close(compiled(a, b), 2 * (a @ b), 32, 2)
    with pytest.raises(InputTypeError, match="need target='cuda'"):
        pt.op(kernels.get("matmul"))(a, b)
