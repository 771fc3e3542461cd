"""Benchmark records (one per layer and system) and the per-model totals built from them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from polyopt.bench.layers import Layer

__all__ = ["FIELDS", "SYSTEMS", "Record", "Settings", "Total", "add_speedups", "totals"]

TOLERANCE = 1e-4  # relative L2 error against the float64 reference that still matches
SYSTEMS = {"c": ("polyopt", "numpy", "torch", "tvm"), "cuda": ("polyopt", "torch")}


@dataclass
class Record:
    """One system on one layer. ``status`` is ok, skipped or failed (``reason`` says why)."""

    model: str
    layer: int
    name: str
    kind: str  # regular, pointwise, depthwise (or grouped)
    count: int  # occurrences of the layer in the model
    shape: str
    batch: int
    gflop: float  # 2 x multiply-adds, in GFLOP
    system: str
    variant: str = ""
    status: str = "ok"
    reason: str = ""
    matched: bool | None = None  # relative L2 error <= TOLERANCE
    rel_error: float | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    gflops: float | None = None  # GFLOP/s at the median
    speedup: float | None = None  # baseline median / this median; > 1 is faster
    setup_s: float | None = None  # build or compile, up to the first (checked) result

    @classmethod
    def start(cls, model: str, layer: Layer, batch: int, system: str) -> Record:
        return cls(model, layer.number, layer.name, layer.kind, layer.count, layer.shape,
                   batch, 2.0 * layer.macs(batch) / 1e9, system)

    @property
    def usable(self) -> bool:
        """Timed and correct: only such records enter speed-ups and totals."""
        return self.status == "ok" and bool(self.matched) and self.median_ms is not None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


FIELDS = tuple(f.name for f in fields(Record))


@dataclass
class Total:
    """One system over the layers run, each weighted by its count in the model."""

    system: str
    layers: int  # layers with a usable time
    weighted_ms: float | None  # sum of count x median over those layers
    common_layers: int  # layers where both this system and the baseline are usable
    speedup: float | None  # baseline's weighted ms / this system's, over the common layers

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def add_speedups(records: Sequence[Record], baseline: str) -> None:
    """Fill ``speedup`` in place: the baseline's median on that layer over this one's."""
    base = {r.layer: r.median_ms for r in records if r.system == baseline and r.usable}
    for r in records:
        ref = base.get(r.layer)
        r.speedup = ref / r.median_ms if r.usable and ref and r.median_ms else None


def totals(records: Sequence[Record], baseline: str, systems: Sequence[str]) -> list[Total]:
    """Count-weighted totals per system; the speed-up only over layers both ran correctly."""
    base = {r.layer: r for r in records if r.system == baseline and r.usable}
    out = []
    for system in systems:
        mine = [r for r in records if r.system == system and r.usable]
        weighted = sum(r.count * (r.median_ms or 0.0) for r in mine) if mine else None
        common = [r for r in mine if r.layer in base]
        ours = sum(r.count * (r.median_ms or 0.0) for r in common)
        theirs = sum(r.count * (base[r.layer].median_ms or 0.0) for r in common)
        speedup = theirs / ours if common and ours > 0 else None
        out.append(Total(system, len(mine), weighted, len(common), speedup))
    return out


@dataclass(frozen=True)
class Settings:
    """The validated options of one run."""

    model: str
    layers: tuple[Layer, ...]
    batch: int
    target: str
    repeat: int
    baseline: str
    tvm_trials: int
    out: Path
    threads: int
    settle: float
    scale: int
    seed: int
    command: str
    tuned: bool = False  # polyopt uses the tuning database's best schedules
    usable_cpus: int | None = None  # the caller's CPUs before anything ran
    baseline_note: str = ""  # why speed-ups are not relative to the --baseline asked for
    rounds: int = 1  # interleaved rounds of ``repeat`` calls per system and layer

    @property
    def systems(self) -> tuple[str, ...]:
        return SYSTEMS[self.target]
