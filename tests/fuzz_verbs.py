"""Random sequences of schedule verbs, and the differential check of one program x schedule
pair against the float64 interpreter (Csmith-style: every accepted verb must keep the
answer; a refused one is skipped).

``check_pair`` is what ``tests/schedules/test_fuzz_schedules.py`` and
``scripts/dev/fuzz_schedules.py`` run. Verb arguments are drawn from the schedule at hand (its
loops, their nesting, sibling nests, locals), so most verbs are well formed and what
decides is legality. An outcome is ``ok`` (compiled, ran, matched), ``refused`` (no verb
accepted: nothing new to compile), ``compile-refused`` (a ``PolyoptError`` other than
``CompileError`` while compiling or calling an accepted schedule), ``wrong`` (it ran and
differs from the reference), or ``crash`` (anything else: an exception that is not a
``PolyoptError``, C that the compiler rejects, an internal isl error).
"""

from __future__ import annotations

import inspect
import json
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fuzz_programs import FuzzProgram

import polyopt
from polyopt import lang, schedule_from_json
from polyopt.errors import CompileError, PolyoptError, ScheduleError
from polyopt.poly.merge import mergeable
from polyopt.runtime.interp import evaluate
from polyopt.schedules import Schedule
from polyopt.schedules.schedule import VERBS as VERB_NAMES
from polyopt.schedules.tree import Loop, Node, Sequence, loops, stmts_of, walk

# Statuses that a campaign counts; only the last two are bugs.
STATUSES = ("ok", "refused", "compile-refused", "wrong", "crash")
# The first polyopt.schedule argument, and its weight.
BASES: tuple[tuple[bool | str, float], ...] = ((False, 0.45), ("isl", 0.3), (True, 0.25))
SIZES = (1, 2, 3, 4, 5, 8)

Step = tuple[str, tuple[Any, ...], dict[str, Any]]


@dataclass
class Outcome:
    status: str
    family: str
    reproducer: str  # runnable Python: source, sizes, the schedule's verbs, the compile
    message: str = ""
    verbs_tried: int = 0
    verbs_refused: int = 0
    refusals: dict[str, int] = field(default_factory=dict)  # "verb: exception" -> count
    accepted: dict[str, int] = field(default_factory=dict)  # verb -> count


# -- drawing verbs from the schedule at hand -------------------------------------------

def _chain(lp: Loop) -> list[Loop]:
    """``lp`` and the loops perfectly nested below it."""
    out = [lp]
    while isinstance(out[-1].child, Loop):
        out.append(out[-1].child)
    return out


def _siblings(root: Node) -> list[list[Loop]]:
    return [[c for c in n.children if isinstance(c, Loop)] for n in walk(root)
            if isinstance(n, Sequence)]


def _tile(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    ch = _chain(rng.choice(lps))
    n = rng.randint(1, min(3, len(ch)))
    start = rng.randint(0, len(ch) - n)
    names = tuple(lp.name for lp in ch[start:start + n])
    if rng.random() < 0.2:  # two levels: each inner size divides its outer one
        inner = tuple(rng.choice((1, 2, 3)) for _ in names)
        outer = tuple(i * rng.choice((1, 2, 3)) for i in inner)
        return "tile", (names, outer, inner), {}
    sizes = rng.choice(SIZES) if rng.random() < 0.5 else tuple(rng.choice(SIZES) for _ in names)
    return "tile", (names, sizes), {}


def _reorder(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    chains = [c for c in (_chain(lp) for lp in lps) if len(c) > 1]
    if not chains:
        return None
    ch = rng.choice(chains)
    picked = rng.sample([lp.name for lp in ch], rng.randint(2, len(ch)))
    if rng.random() < 0.3:
        return "interchange", tuple(picked[:2]), {}
    return "reorder", tuple(picked), {}


def _skew(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    pairs = [(a, b) for a in lps for b in loops(a.child)]
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    return "skew", (a.name, b.name, rng.choice((1, 1, 2, -1))), {}


def _shift(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    lp = rng.choice(lps)
    own = stmts_of(lp)
    stmts = None if len(own) < 2 or rng.random() < 0.4 else tuple(
        rng.sample(own, rng.randint(1, len(own))))
    kw = {"stmts": stmts} if stmts else {}
    return "shift", (lp.name, rng.choice((-2, -1, 1, 2, 3))), kw


def _fuse(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    groups = [g for g in _siblings(s.root) if len(g) > 1]
    if not groups:
        return None
    g = rng.choice(groups)
    k = rng.randint(0, len(g) - 2)
    a, b = (g[k], g[k + 1]) if rng.random() < 0.8 else rng.sample(g, 2)
    return "fuse", (a.name, b.name), {}


def _distribute(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    def splits(lp: Loop) -> bool:
        bottom = _chain(lp)[-1].child
        return isinstance(bottom, Sequence) or len(stmts_of(bottom)) > 1
    good = [lp for lp in lps if splits(lp)]
    return "distribute", (rng.choice(good if good and rng.random() < 0.9 else lps).name,), {}


def _vectorize(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    inner = [lp for lp in lps if not loops(lp.child)]
    return "vectorize", (rng.choice(inner if rng.random() < 0.9 else lps).name,), {}


def _unroll(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    lp = rng.choice(lps).name
    return "unroll", (lp,) if rng.random() < 0.5 else (lp, rng.choice((2, 3, 4))), {}


def _pack(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    program = s.poly.program
    tensors = [t for t in (*program.inputs, *program.outputs) if t.shape]
    if s.steps and rng.random() < 0.8:  # outputs pack only first
        tensors = [t for t in tensors if t.role == "input"]
    if not tensors:
        return None
    t = rng.choice(tensors)
    rank = len(t.shape)
    return "pack", (t.name, rng.randrange(rank), rng.choice((2, 3, 4, 8)),
                    rng.randrange(rank)), {}


def _merge(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    """Two neighbouring dimensions of a tensor (refused unless every access walks them as
    one run, the sizes are known, and no other step came first)."""
    found = mergeable(s.poly.program)
    if found and rng.random() < 0.8:
        return "merge", rng.choice(found).args, {}
    tensors = [t for t in s.poly.program.tensors.values() if t.rank >= 2]
    if not tensors:
        return None
    t = rng.choice(tensors)
    return "merge", (t.name, rng.randrange(t.rank - 1)), {}


def _compute_at(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    if not isinstance(s.root, Sequence):
        return None
    tops = [c for c in s.root.children if isinstance(c, Loop)]
    pairs = [(a, b) for a in tops for t in tops if t is not a for b in loops(t)]
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    return "compute_at", (a.name, b.name), {}


def _contract(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
    names = [t.name for t in s.poly.program.locals]
    if not names:
        return None
    local = rng.choice(names)
    users = {st.name for st in s.poly.stmts if st.stmt.tensor == local or any(
        r.read.tensor == local for r in st.reads)}
    around = [lp for lp in lps if users <= set(stmts_of(lp))]  # loops holding every access
    return "contract", (local, rng.choice(around if around and rng.random() < 0.9
                                          else lps).name), {}


def _one_loop(verb: str, *extra: tuple[Any, ...]) -> Callable[..., Step | None]:
    def draw(s: Schedule, lps: list[Loop], rng: random.Random) -> Step | None:
        return verb, (rng.choice(lps).name, *(rng.choice(e) for e in extra)), {}
    return draw


DRAWERS: dict[str, tuple[float, Callable[..., Step | None]]] = {
    "tile": (3, _tile), "split": (2, _one_loop("split", (1, 2, 3, 4, 8))),
    "reorder": (2.5, _reorder), "skew": (1.5, _skew), "shift": (1.5, _shift),
    "reverse": (1, _one_loop("reverse")), "fuse": (1.5, _fuse),
    "distribute": (1.5, _distribute), "parallel": (2, _one_loop("parallel")),
    "vectorize": (2, _vectorize), "unroll": (1, _unroll),
    "unroll_and_jam": (1.5, _one_loop("unroll_and_jam", (2, 3, 4))),
    "separate": (0.5, _one_loop("separate")), "pack": (1, _pack), "merge": (1, _merge),
    "compute_at": (1.5, _compute_at), "contract": (3, _contract),  # only with locals
}


def draw_step(s: Schedule, rng: random.Random) -> Step | None:
    """A verb and arguments drawn from ``s``'s loops (None: nothing to draw here)."""
    lps = loops(s.root)
    if not lps:
        return None
    if not s.steps and rng.random() < 0.3:  # a merge comes first or not at all
        return _merge(s, lps, rng)
    names = sorted(DRAWERS)
    verb = rng.choices(names, [DRAWERS[n][0] for n in names])[0]
    return DRAWERS[verb][1](s, lps, rng)


# -- malformed arguments -----------------------------------------------------------------

# Values no verb argument takes, or takes only in range: each must be refused with a
# PolyoptError, called directly or replayed from JSON (all of them are JSON values).
HOSTILE: tuple[Any, ...] = (None, 1.5, -0.0, float("inf"), True, 10**30, -2**63, 2**64, 0, -1,
                            "", "nope", "1", [], ["m"], [["i", 2]], [None], {}, {"a": 1},
                            [1.5, 2], [[1, 0], [0, 1.5]])


def draw_malformed(s: Schedule, rng: random.Random) -> Step:
    """A verb with arguments drawn for ``s`` (or plain loop names), one or two of them
    replaced by a ``HOSTILE`` value, an extra one added, or an unknown keyword."""
    verb = rng.choice(VERB_NAMES)
    lps = loops(s.root)
    drawn = DRAWERS[verb][1](s, lps, rng) if verb in DRAWERS and lps else None
    params = [p for p in inspect.signature(getattr(Schedule, verb)).parameters.values()
              if p.name != "self"]
    if drawn is not None and drawn[0] == verb:
        args = list(drawn[1])
    else:
        names = [lp.name for lp in lps] or ["i"]
        args = [rng.choice(names) for p in params if p.default is p.empty
                and p.kind is p.POSITIONAL_OR_KEYWORD]
    kw: dict[str, Any] = {}
    for _ in range(rng.randint(1, 2)):
        value, k = rng.choice(HOSTILE), rng.randrange(len(args) + 2)
        if k < len(args):
            args[k] = value
        elif k == len(args):
            args.append(value)
        else:
            kw[rng.choice([p.name for p in params] + ["colour"])] = value
    return verb, tuple(args), kw


def check_malformed(s: Schedule, step: Step) -> str:
    """Empty when ``step`` is accepted or refused with a PolyoptError, both called on ``s``
    and replayed from JSON on its def's program order; else what it raised instead."""
    verb, args, kw = step
    program = s.poly.program
    text = json.dumps({"def": program.name, "base": "program-order",
                       "steps": [{"verb": verb, "args": list(args), "kwargs": kw}]})
    calls: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("called", lambda: getattr(s, verb)(*args, **kw)),
        ("from JSON", lambda: schedule_from_json(text, program.source, program.name,
                                                 sizes=dict(program.bound) or None)))
    for how, call in calls:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                call()
        except PolyoptError:
            continue
        except Exception as e:
            return f"{step_text(step)} {how}: {_brief(e)}"
    return ""


def step_text(step: Step) -> str:
    verb, args, kw = step
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kw.items()]
    return f"{verb}({', '.join(parts)})"


# -- one pair --------------------------------------------------------------------------

@dataclass
class _Pair:
    prog: FuzzProgram
    auto: bool | str
    fusion: str
    specialized: bool  # the schedule (and the compile) fix the sizes
    parametric: bool  # else a size-generic schedule is specialized at the call's sizes
    base_steps: int = 0  # steps the automatic pipeline recorded in the base

    def header(self) -> str:
        sizes = f", sizes={dict(self.prog.sizes)!r}" if self.specialized else ""
        return (f"import numpy as np, polyopt\nsource = '''{self.prog.source}'''\n"
                f"s = polyopt.schedule(source, {self.prog.name!r}, auto={self.auto!r}"
                f"{sizes}, options={{'fusion': {self.fusion!r}}})")

    def reproducer(self, s: Schedule | None, extra: str = "") -> str:
        lines = [self.header()]
        if s is not None:  # the verbs drawn after the base's own
            lines += [f"s = s.{st.python()}" for st in s.steps[self.base_steps:]]
        if extra:
            lines.append(extra)
        return "\n".join(lines)


def _run_text(pair: _Pair, inputs: list[np.ndarray]) -> str:
    """The compile, the call on the fuzzer's (small) inputs, and the comparison."""
    prog = pair.prog
    sizes = f", sizes={dict(prog.sizes)!r}" if pair.specialized else ""
    sizes += ", parametric=True" if pair.parametric else ""
    arrays = ",\n          ".join(f"np.array({x.tolist()!r}, np.{x.dtype})" for x in inputs)
    return "\n".join([
        f"kernel = polyopt.compile(source, {prog.name!r}, schedule=s{sizes})",
        f"inputs = [{arrays}]",
        "got = kernel(*inputs)",
        "from polyopt import lang; from polyopt.runtime.interp import evaluate",
        f"want = evaluate(lang.build_program(source, {prog.name!r}, "
        f"{dict(prog.sizes)!r}), inputs, {{}})"])


def reference(prog: FuzzProgram, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The float64 interpreter's outputs (integers stay integers)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = lang.build_program(prog.source, prog.name, dict(prog.sizes))
    return evaluate(program, inputs, {})


def check_pair(prog: FuzzProgram, inputs: list[np.ndarray], want: list[np.ndarray],
               rng: random.Random, max_steps: int = 5, malformed: float = 0.0) -> Outcome:
    """Draw a base schedule and up to ``max_steps`` verbs for ``prog`` (each malformed with
    probability ``malformed``); compile what was accepted and compare it with ``want``."""
    specialized = rng.random() < 0.5
    pair = _Pair(prog, rng.choices([b for b, _ in BASES], [w for _, w in BASES])[0],
                 rng.choice(("smart", "smart", "min", "max")), specialized,
                 not specialized and rng.random() < 0.3)
    out = Outcome("refused", prog.family, pair.reproducer(None))
    sizes = dict(prog.sizes) if pair.specialized else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = polyopt.schedule(prog.source, prog.name, auto=pair.auto, sizes=sizes,
                                 options={"fusion": pair.fusion})
        pair.base_steps = len(s.steps)
        s = _apply_steps(s, rng, rng.randint(1, max_steps), out, malformed)
        out.reproducer = pair.reproducer(s)
        if out.verbs_tried == out.verbs_refused:
            return out
        out.reproducer = pair.reproducer(s, _run_text(pair, inputs))
        if rng.random() < 0.15 and not _replays(s, prog, sizes):
            out.status, out.message = "crash", "schedule_from_json(s.as_json()) differs from s"
            return out
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = polyopt.compile(prog.source, prog.name, schedule=s, sizes=sizes,
                                  parametric=pair.parametric)(*inputs)
    except _VerbCrash as e:
        out.reproducer = pair.reproducer(e.schedule, f"s = s.{step_text(e.step)}")
        out.status, out.message = "crash", f"{step_text(e.step)}: {_brief(e.__cause__)}"
        return out
    except PolyoptError as e:
        internal = isinstance(e, CompileError) or type(e) is PolyoptError
        out.status, out.message = ("crash" if internal else "compile-refused"), _brief(e)
        return out
    except Exception as e:  # a bug whatever it is: record it with the pair that found it
        out.status, out.message = "crash", _brief(e)
        return out
    out.message = _compare(got if isinstance(got, tuple) else (got,), want, prog.exact)
    out.status = "wrong" if out.message else "ok"
    return out


def _replays(s: Schedule, prog: FuzzProgram, sizes: dict[str, int] | None) -> bool:
    """Schedules are data: the JSON of ``s`` replays to the same loop nest."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = schedule_from_json(s.as_json(), prog.source, prog.name, sizes=sizes)
    return str(again) == str(s) and again.steps == s.steps


def _apply_steps(s: Schedule, rng: random.Random, n: int, out: Outcome,
                 malformed: float = 0.0) -> Schedule:
    """Draw and apply ``n`` verbs, skipping the refused ones (counted in ``out``); with
    probability ``malformed`` a step has hostile arguments instead (``draw_malformed``):
    it must be refused with a PolyoptError, called and from JSON."""
    for _ in range(n):
        if malformed and rng.random() < malformed:
            bad = draw_malformed(s, rng)
            out.verbs_tried += 1
            out.verbs_refused += 1
            out.refusals["malformed"] = out.refusals.get("malformed", 0) + 1
            crash = check_malformed(s, bad)  # s goes on unchanged: nothing to compile
            if crash:
                raise _VerbCrash(s, bad) from RuntimeError(crash)
            continue
        step = draw_step(s, rng)
        if step is None:
            continue
        out.verbs_tried += 1
        verb, args, kw = step
        try:
            s = getattr(s, verb)(*args, **kw)
            out.accepted[verb] = out.accepted.get(verb, 0) + 1
        except ScheduleError as e:
            out.verbs_refused += 1
            kind = f"{verb}: {type(e).__name__}"
            out.refusals[kind] = out.refusals.get(kind, 0) + 1
        except Exception as e:
            raise _VerbCrash(s, step) from e
    return s


class _VerbCrash(Exception):
    """A verb raised something other than a ScheduleError."""

    def __init__(self, schedule: Schedule, step: Step) -> None:
        super().__init__(step_text(step))
        self.schedule, self.step = schedule, step


def _brief(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 1500 else text[:1500] + " ..."


def _compare(got: tuple[np.ndarray, ...], want: list[np.ndarray], exact: bool) -> str:
    """Empty when ``got`` matches ``want``; else what differs, and where."""
    if len(got) != len(want):
        return f"{len(got)} outputs, want {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape}, want {w.shape}"
        w64 = w.astype(np.float64)
        g64 = g.astype(np.float64)
        # a float64 reference beyond the output's range (a long product of float32s): the
        # output's own type holds only the infinity of its sign
        over = np.zeros(w64.shape, bool)
        if np.issubdtype(g.dtype, np.floating) and g.dtype != np.float64:
            with np.errstate(over="ignore"):
                over = np.isfinite(w64) & np.isinf(w64.astype(g.dtype))
            w64 = np.where(over, np.copysign(np.inf, w64), w64)
        scale = max(1.0, float(np.abs(np.where(over, 0.0, w64)).max(initial=0.0)))
        tol = 0.0 if exact else 1e-3 * scale + 1e-3 * np.abs(np.where(over, 0.0, w64))
        with np.errstate(invalid="ignore"):  # inf - inf where ``over``: not used
            bad = np.where(over, g64 != w64, ~(np.abs(g64 - w64) <= tol))  # NaN is wrong
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            return (f"output {k}: {int(bad.sum())} of {bad.size} elements differ; "
                    f"at {at}: got {g64[at]!r}, want {w64[at]!r}")
    return ""
