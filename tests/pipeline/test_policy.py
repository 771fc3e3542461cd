"""The pipelines' policies: the decision functions that read them (``_register_shape``,
``_fewer_rows``, ``plan_blocking``) on shapes other than ResNet-50's, every field
documented, and the tuner's space and features reading the values the pipelines use."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import types

import pytest

from polyopt import ir, lang
from polyopt.costmodel.gpu_machine import DEFAULT_GPU, GpuModel
from polyopt.costmodel.machine import Machine, gemm_blocking
from polyopt.pipeline import gpu_policy as gpol
from polyopt.pipeline import policy as pol
from polyopt.pipeline.blocked import plan_blocking
from polyopt.pipeline.gpu import GpuMapping
from polyopt.pipeline.gpu_policy import GpuPolicy, gpu_policy
from polyopt.pipeline.policy import cpu_policy
from polyopt.pipeline.register_tile import (
    _fewer_rows,
    _register_shape,
    row_block,
)
from polyopt.poly import model_of
from polyopt.poly.model import PolyStmt
from polyopt.schedules.limits import Caps
from polyopt.schedules.nest import UNKNOWN_TRIP
from polyopt.tuning.features import Footprints
from polyopt.tuning.space import CPU_SPACE, space_for

AVX512 = Machine(vector_bytes=64, vector_registers=32, cores=4, l1d_bytes=48 << 10,
                 l2_bytes=2 << 20, l3_bytes=32 << 20)
AVX2 = Machine(vector_bytes=32, vector_registers=16, cores=8, l1d_bytes=32 << 10,
               l2_bytes=256 << 10, l3_bytes=8 << 20)
NEON = Machine(vector_bytes=16, vector_registers=32, cores=4, l1d_bytes=64 << 10,
               l2_bytes=1 << 20, l3_bytes=0)

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
MM64 = "def mm(double(M,K) A, double(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }"
CONV = ("def conv(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {\n"
        "  O(n,f,h,w) +=! I(n,r_c,h + r_kh,w + r_kw) * Wt(f,r_c,r_kh,r_kw)\n}")
CONV64 = CONV.replace("float(", "double(")


# ---------------------------------------------------------------- every field says why

def _documented(cls: type) -> set[str]:
    """Fields of dataclass ``cls`` followed by a string literal (an attribute docstring)."""
    body = ast.parse(inspect.getsource(cls)).body[0]
    assert isinstance(body, ast.ClassDef)
    out = set()
    for stmt, nxt in zip(body.body, body.body[1:], strict=False):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            out.add(stmt.target.id)
    return out


@pytest.mark.parametrize("cls", [pol.CpuPolicy, gpol.GpuPolicy, GpuModel, Caps])
def test_every_policy_field_has_a_docstring(cls: type) -> None:
    fields = {f.name for f in dataclasses.fields(cls)}
    assert fields - _documented(cls) == set()


def test_policies_are_frozen_and_cached_per_model() -> None:
    policy = cpu_policy(AVX2)
    assert policy is cpu_policy(AVX2) and policy.machine is AVX2
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.wide_rows = 1  # type: ignore[misc]
    assert gpu_policy() is gpol.GPU_POLICY and gpol.GPU_POLICY.model is DEFAULT_GPU
    assert DEFAULT_GPU.registers_per_full_block == 64  # 65536 / 1024


def test_the_rows_the_model_prices() -> None:
    """Fewer rows than the registers hold, for the cost model to weigh: divisors of the
    rows down to half, where the tile leaves a partial one, and the most rows that let a
    filter tap unroll into the step (64 updates at most)."""
    assert _fewer_rows(14, 70, [], 2) == []  # 14 divides 70: nothing to gain
    assert _fewer_rows(14, 90, [], 2) == [10, 9]  # 13, 12, 11 do not divide 90
    assert _fewer_rows(14, 97, [], 2) == []  # a prime
    assert _fewer_rows(14, UNKNOWN_TRIP, [], 2) == []  # a size: tiles fit any
    assert _fewer_rows(28, 112, [3], 1) == [21, 16, 14]  # 21 x 3 taps unroll
    assert _fewer_rows(28, 56, [3, 3], 1) == [21, 14]


# ---------------------------------------------------------------- _register_shape

@pytest.mark.parametrize(("machine", "cols", "shape"), [
    (AVX512, 100, (32, 14)),  # 100 = 3 x 32 + 4 = 6 x 16 + 4: the model's tile
    (AVX512, 40, (32, 14)),  # 32 + 8 or 2 x 16 + 8: a tie keeps the wider
    (AVX512, 24, (16, 28)),  # one vector: as many rows as the registers hold, capped
    (AVX512, 48, (16, 28)),  # 3 x 16 leaves no partial tile, 32 + 16 does
    (AVX512, 8, (0, 14)),  # narrower than a vector: no register tile (the caller refuses)
    (AVX512, UNKNOWN_TRIP, (32, 14)),  # a size: the model's tile
    (AVX2, 24, (8, 14)),  # 3 x 8 rather than 16 + 8; 16 registers - 2 = 14 rows
    (AVX2, 36, (16, 6)),  # 2 x 16 + 4 and 4 x 8 + 4 tie: the model's 6x16
    (NEON, 14, (12, 9)),  # the model's 9 x 12: 12 + 2 ties 3 x 4 + 2, the wider wins
    (NEON, 10, (8, 14)),  # 12 is too wide; 8 + 2 ties 2 x 4 + 2: two vectors, (32-1-2)//2
    (NEON, 20, (4, 28)),  # 5 x 4: one vector, 30 rows capped at 28
])
def test_register_shape(machine: Machine, cols: int, shape: tuple[int, int]) -> None:
    policy = cpu_policy(machine)
    assert _register_shape(policy.blocking(4), policy, cols) == shape


def test_register_shape_rows_follow_the_registers_and_the_cap() -> None:
    policy = cpu_policy(AVX512)
    b = policy.blocking(4)
    capped = dataclasses.replace(policy, max_rows=10)
    assert _register_shape(b, capped, 24) == (16, 10)
    assert _register_shape(b, capped, 100) == (32, 14)  # the model's tile is not capped
    assert policy.register_rows(1) == 28 and policy.register_rows(3) == 9  # (32-1-3)//3


# ---------------------------------------------------------------- plan_blocking

def _contraction(source: str, sizes: dict[str, int]) -> tuple[ir.Program, PolyStmt]:
    program = lang.build_program(lang.define(source), sizes=sizes)
    return program, next(s for s in model_of(program).stmts if s.kind == "update")


def _conv(w: int, k: int = 3, f: int = 48, source: str = CONV) -> dict[str, int]:
    return {"N": 1, "C": 8, "H": 12, "W": w + k - 1, "F": f, "KH": k, "KW": k}


@pytest.mark.parametrize(("machine", "source", "sizes", "plan"), [
    (AVX512, CONV, _conv(30, f=64), ("O", 1, 32)),  # taps over wide rows: two vectors
    (AVX512, CONV, _conv(30, f=48), ("O", 1, 16)),  # 48 channels: no two-vector block
    (AVX512, CONV, _conv(20, f=64), ("O", 1, 16)),  # rows under 28: one vector
    (AVX512, CONV, _conv(30, k=1, f=64), ("O", 1, 16)),  # no taps: one vector
    (AVX512, CONV, _conv(64, f=64), None),  # 4 whole vectors per row: the natural layout
    (AVX512, CONV, _conv(48, f=64), ("O", 1, 32)),  # 3 vectors are too few
    (AVX2, CONV, _conv(30, f=48), ("O", 1, 16)),  # 8 lanes: two vectors of 8 divide 48
    (AVX2, CONV, _conv(40, f=48), None),  # 5 whole vectors of 8
    (AVX512, CONV64, _conv(30, f=24), ("O", 1, 8)),  # float64: 8 lanes; 16 does not divide
    (AVX512, MM, {"M": 30, "N": 30, "K": 30}, None),  # rank 2: never blocked
])
def test_plan_blocking(machine: Machine, source: str, sizes: dict[str, int],
                       plan: tuple[str, int, int] | None) -> None:
    program, s = _contraction(source, sizes)
    assert plan_blocking(program, s, cpu_policy(machine)) == plan


def test_plan_blocking_follows_the_policy_and_the_knob() -> None:
    program, s = _contraction(CONV, _conv(20, f=64))
    policy = cpu_policy(AVX512)
    assert plan_blocking(program, s, policy, 8) == ("O", 1, 8)
    wider = dataclasses.replace(policy, wide_rows=20)
    assert plan_blocking(program, s, wider) == ("O", 1, 32)
    four = dataclasses.replace(wider, wide_block_vectors=4)
    assert plan_blocking(program, s, four) == ("O", 1, 64)
    program, s = _contraction(CONV, _conv(64, f=64))
    strict = dataclasses.replace(policy, natural_vectors=5)
    assert plan_blocking(program, s, strict) == ("O", 1, 32)
    program, s = _contraction(CONV, _conv(30, k=5, f=64))
    short = dataclasses.replace(policy, small_reduction=4)  # 5x5 taps are no longer taps
    assert plan_blocking(program, s, short) == ("O", 1, 16)


# ---------------------------------------------------------------- the tuner reads them

@pytest.mark.parametrize("machine", [AVX512, AVX2, NEON])
@pytest.mark.parametrize(("source", "elem"), [(MM, 4), (MM64, 8)])
def test_features_take_the_models_blocking(machine: Machine, source: str, elem: int) -> None:
    fp = Footprints(source, None, {"M": 90, "N": 70, "K": 50}, machine)
    b = gemm_blocking(machine, elem)
    assert (fp.blocking, fp.elem) == (b, elem)
    assert fp.of({}) == fp.features(b.mr, b.nr, b.kc, 0, False, 0)
    assert fp.of({}) != Footprints(source, None, {"M": 90, "N": 70, "K": 50},
                                   _other(machine)).of({})


@pytest.mark.parametrize("machine", [AVX512, AVX2], ids=["avx512", "avx2"])
def test_features_see_the_models_row_blocks(machine: Machine) -> None:
    """The default configuration's panel is the L2 block of rows the pipeline cuts (the
    ``mc`` knob left to the model), not the whole row operand."""
    sizes = {"M": 1 << 13, "N": 1 << 11, "K": 1 << 10}
    fp, b = Footprints(MM, None, sizes, machine), gemm_blocking(machine, 4)
    mc = row_block(fp.policy, None, (b.mr, b.nr, b.lanes), (sizes["M"], sizes["N"], b.kc), 4,
                   -(-sizes["N"] // b.nr))
    assert mc is not None and mc < sizes["M"]
    assert fp.of({}) == fp.features(b.mr, b.nr, b.kc, 0, False, mc) \
        == fp.of({"mc": mc}) != fp.of({"mc": 0})


def _other(machine: Machine) -> Machine:
    return AVX2 if machine is not AVX2 else AVX512


def test_features_take_the_pipelines_channel_block() -> None:
    sizes = _conv(30, f=64)
    fp = Footprints(CONV, None, sizes, AVX512)
    b = fp.blocking
    assert fp.of({}) == fp.features(b.mr, b.nr, b.kc, 32) != fp.features(b.mr, b.nr, b.kc, 16)
    assert fp.of({"block": 0}) == fp.features(b.mr, b.nr, b.kc, 0)


@pytest.mark.parametrize("machine", [AVX512, AVX2, NEON])
def test_space_candidates_are_in_the_contractions_lanes(machine: Machine) -> None:
    for source, elem in ((MM, 4), (MM64, 8)):
        lanes = cpu_policy(machine).lanes(elem)
        knobs = dict(space_for(source, None, {"M": 90, "N": 70, "K": 50}, machine=machine).knobs)
        assert knobs["nr"] == (None, lanes, 2 * lanes, 3 * lanes, 4 * lanes)
        assert knobs["mr"] == (None, *CPU_SPACE.mr) and "block" not in knobs
    conv = dict(space_for(CONV, None, _conv(30, f=64), machine=machine).knobs)
    lanes = cpu_policy(machine).lanes(4)
    assert conv["block"] == (None, 0, 2 * lanes, 4 * lanes) and "mc" not in conv


def test_cuda_features_take_the_mappings_tile_and_the_gpu_model() -> None:
    sizes = {"M": 300, "N": 200, "K": 50}
    fp = Footprints(MM, None, sizes)
    assert GpuMapping().tile_for(300, 200) == (128, 128, 8, 8, 8)
    threads, smem, regs, blocks, _ = fp.of({"gpu_block": None})
    assert threads == 8 / 10 and smem == (128 + 128) * 8 * 4 / (48 << 10) and regs == 1.0
    assert blocks == 0.0  # 3 x 2 blocks, under 132 multiprocessors
    small = GpuModel("a small GPU", shared_bytes_per_block=16 << 10, multiprocessors=3,
                     registers_per_multiprocessor=32 << 10)
    _, smem, regs, blocks, _ = Footprints(MM, None, sizes, gpu=small).of({"gpu_block": None})
    assert smem == (128 + 128) * 8 * 4 / (16 << 10) and regs == 2.0 and blocks == 1.0
    assert Footprints(MM64, None, sizes).of({"gpu_tile": (64, 64, 8)})[1] == \
        (64 + 64) * 8 * 8 / (48 << 10)  # float64 tiles take twice the shared memory
    assert gpu_policy(small).tile_for(300, 200) == GpuPolicy(small).tile_for(300, 200)


def test_device_model_reads_the_device_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    from polyopt.runtime import cuda

    values = {"MAX_SHARED_MEMORY_PER_BLOCK": 49152, "MULTIPROCESSOR_COUNT": 108,
              "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536, "MAX_THREADS_PER_BLOCK": 1024}

    class Device:
        def __init__(self, index: int) -> None:
            assert index == 0

        def name(self) -> str:
            return "NVIDIA A100"

        def get_attribute(self, attr: str) -> int:
            return values[attr]

    driver = types.ModuleType("pycuda.driver")
    driver.init = lambda: None  # type: ignore[attr-defined]
    driver.Device = Device  # type: ignore[attr-defined]
    driver.device_attribute = types.SimpleNamespace(**{k: k for k in values})  # type: ignore
    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    cuda.device_model.cache_clear()
    try:
        model = cuda.device_model()
    finally:
        cuda.device_model.cache_clear()
    assert model == GpuModel("NVIDIA A100", 49152, 108, 255, 65536, 1024)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)  # no PyCUDA: the default
    assert cuda.device_model() is None
    cuda.device_model.cache_clear()
