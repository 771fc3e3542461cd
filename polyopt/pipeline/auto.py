"""Automatic scheduling with isl's scheduler (``ScheduleConstraints.compute_schedule``).

isl's scheduler runs under a budget of operations (``operations_budget``, from
``limits.Caps.scheduler_work``) and with its schedule's coefficients bounded
(``Caps.scheduler_max_coefficient``: the budget does not count its integer programs' pivots).
When it runs out:

- a def of one statement (with its ``op=!`` fill, if any) gets one loop nest over its
  iterators in order, the fill inside its output's loops (``single_nest``): what isl's
  scheduler gives such a nest up to the order of its loops. It is not built in place of
  isl's schedule: isl drops loops of one iteration and orders the others by its own
  objective (``w, f, h`` for a 1x1 convolution), and the pipeline's code follows that;
- any other def gets program order with a ``PolyoptWarning`` (the CPU pipeline still
  fuses its nests where that is legal).

Reductions over many small extents no longer need the fallback: their chains are built
uncoalesced (``poly/deps.py``), and 8 reduction indices schedule in 80k operations.

The budget does not stop everything: isl counts no operations in the pivots of its integer
programs (``isl_tab_basic_set_non_trivial_lexmin``), holds the GIL there, and no scheduler
option bounds them (2-D recurrences reading planes t-1 and t-3 ran for hours with the
coefficients bounded by 1..8, the constant terms by 4..32, or the other options that keep
isl's schedules). So every def with a dependence is scheduled in a forked child
(``_in_child``: about 10 ms a call, more in a process with a large heap) under a wall-clock
limit derived from the budget (``limit_seconds``); past it, or at Ctrl-C, the child is
killed. A def without dependences has no such integer program and stays in-process.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import select
import signal
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import islpy as isl

from polyopt.errors import IllegalScheduleError, PolyoptWarning
from polyopt.poly.deps import Deps
from polyopt.poly.model import PolyProgram, PolyStmt
from polyopt.schedules.canonical import unshift
from polyopt.schedules.legality import check_legal
from polyopt.schedules.limits import CAPS, Caps
from polyopt.schedules.schedule import Schedule, program_order
from polyopt.schedules.tree import Leaf, Loop, Node, from_isl, name_loops, nest_of, sequence

FUSION = ("min", "smart", "max")

# The wall-clock limit's rate: isl's scheduler did 0.6-2M operations a second on chains of
# 160 and 320 statements (limits.Caps.scheduler_work), 50k at 2000; a fifth of the middle.
OPERATIONS_PER_SECOND = 200_000
MIN_SECONDS = 5.0
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class _OutOfBudget(Exception):
    """isl's scheduler gave up (str: why, for the warning)."""


def operations_budget(n_stmts: int, caps: Caps | None = None) -> int:
    """isl's operations for scheduling ``n_stmts`` statements (``Caps.scheduler_work``)."""
    caps = caps or CAPS
    return min(caps.max_scheduler_operations, caps.scheduler_work // max(n_stmts, 1))


def compute_schedule(pp: PolyProgram, deps: Deps, *, fusion: str = "smart") -> Schedule:
    """isl's schedule for ``pp``: validity = every dependence, proximity = flow and output.

    ``fusion="min"`` serializes strongly connected components (no fusion across them);
    ``"smart"`` and ``"max"`` let isl fuse wherever its proximity objective gains.
    """
    if not pp.stmts:
        return program_order(pp, deps)
    ctx = pp.context.get_ctx()
    budget = operations_budget(len(pp.stmts))
    apart = isolated(deps)  # outside the budget, which counts the scheduler alone
    try:
        with _isl_options(ctx, fusion, budget):
            if apart:
                tree = _in_child(lambda: _isl_tree(pp, deps), ctx, limit_seconds(budget))
            else:
                tree = _isl_tree(pp, deps)
    except _OutOfBudget as e:
        direct = single_nest(pp, deps)
        if direct is not None:  # one statement: the nest isl gives it, up to loop order
            return replace(direct, fusion=fusion)
        warnings.warn(f"isl's scheduler {e} on def '{pp.program.name}' ({len(pp.stmts)} "
                      f"statements): its base schedule is program order (one nest per "
                      f"statement, which the CPU pipeline fuses where legal)", PolyoptWarning,
                      stacklevel=2)
        out = replace(program_order(pp, deps), fusion=fusion)
        check_legal(out.map, deps)  # legal by construction (the dependences follow it)
        return out
    if tree is None:
        # isl gives up on some all-to-one reductions at small fixed sizes ("unable to carry
        # dependences"); program order is always legal there.
        return program_order(pp, deps)
    order = tuple(s.name for s in pp.stmts)
    root = name_loops(from_isl(tree), order)
    out = Schedule(root, pp, deps, "isl", fusion)
    plain = unshift(root, pp.domain, order)
    if plain is not root:
        candidate = Schedule(plain, pp, deps, "isl", fusion)
        try:
            check_legal(candidate.map, deps)
            out = candidate
        except IllegalScheduleError:
            pass
    return out


@contextmanager
def _isl_options(ctx: isl.Context, fusion: str, budget: int) -> Iterator[None]:
    """The scheduler's fusion option and operation budget (isl counts from 0), restored
    after: later isl calls keep whatever budget they had."""
    serialize, most = ctx.get_schedule_serialize_sccs(), ctx.get_max_operations()
    coefficient = ctx.get_schedule_max_coefficient()
    ctx.set_schedule_serialize_sccs(1 if fusion == "min" else 0)
    ctx.set_schedule_max_coefficient(CAPS.scheduler_max_coefficient)
    ctx.reset_operations()
    ctx.set_max_operations(budget)
    try:
        yield
    finally:
        ctx.set_max_operations(most)
        ctx.reset_operations()
        ctx.set_schedule_max_coefficient(coefficient)
        ctx.set_schedule_serialize_sccs(serialize)


def _isl_tree(pp: PolyProgram, deps: Deps) -> isl.Schedule | None:
    tree = _isl_schedule(pp, deps, coincidence=True)
    if tree is None:  # isl can fail to carry some dependences with coincidence asked
        tree = _isl_schedule(pp, deps, coincidence=False)
    return tree


def isolated(deps: Deps) -> bool:
    """Is a def with dependences ``deps`` scheduled in a child process? Every def with a
    dependence, where the system can fork: the integer programs that isl counts no
    operations in are Farkas' lemma's on dependences, so without one there are none."""
    return hasattr(os, "fork") and not deps.all.is_empty()


def limit_seconds(budget: int) -> float:
    """The wall-clock limit of a scheduler run in a child, from its operation budget."""
    return max(MIN_SECONDS, budget / OPERATIONS_PER_SECOND)


def _in_child(work: Callable[[], isl.Schedule | None], ctx: isl.Context,
              seconds: float) -> isl.Schedule | None:
    """``work()`` run in a forked child that sends back isl's text of its schedule; the
    child is killed past ``seconds`` (``_OutOfBudget``) or when the wait is interrupted
    (Ctrl-C: ``KeyboardInterrupt`` within the wait's 0.1 s)."""
    read, write = os.pipe()
    # SIGINT waits until the fork is done: arriving in the at-fork handlers (logging's), its
    # KeyboardInterrupt was swallowed ("Exception ignored") and the wait ran to its limit.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with warnings.catch_warnings():  # Python 3.12 warns of a fork with threads: the
            warnings.simplefilter("ignore", DeprecationWarning)  # child only runs isl, exits
            pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    if pid == 0:
        os.close(read)
        _child(work, write, mask)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.close(write)
    try:
        data = _read_until(read, time.monotonic() + seconds)
    finally:
        os.close(read)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _EXITING.add(pid)
        _reap()
    if data is None:
        raise _OutOfBudget(f"did not finish within {seconds:.0f} s (its integer programs "
                           f"count no operations)")
    kind, text = data[:1], data[1:].decode()
    if kind == b"S":
        return isl.Schedule.read_from_str(ctx, text)
    if kind == b"B":
        raise _OutOfBudget(text)
    if kind == b"N":
        return None
    if kind == b"E":
        return work()  # the child raised: here the same failure raises
    # killed without an answer (a signal, memory): never rerun here, where nothing ends it
    raise _OutOfBudget("ended without an answer (its process was killed)")


# Children killed or done whose exit has not been collected: unmapping a copy of a large
# heap takes the kernel milliseconds that no compile needs to wait for.
_EXITING: set[int] = set()


def _reap() -> None:
    """Collect the children in ``_EXITING`` that have exited (never blocks)."""
    for pid in list(_EXITING):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # collected elsewhere (a SIGCHLD handler)
            done = pid
        if done:
            _EXITING.discard(pid)


def _child(work: Callable[[], isl.Schedule | None], fd: int, mask: set[int]) -> None:
    """The child's whole life: run ``work``, write the answer to ``fd``, exit."""
    out = b"E"
    gc.disable()  # a collection would walk (and so copy) every page of the parent's heap
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it at once
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _die_with_parent()
        tree = work()
        out = b"N" if tree is None else b"S" + tree.to_str().encode()
    except _OutOfBudget as e:
        out = b"B" + str(e).encode()
    finally:  # anything else sends "E" (the parent reruns the work to raise it)
        with contextlib.suppress(OSError):
            view = memoryview(out)
            while view:
                view = view[os.write(fd, view):]
            os.close(fd)  # the answer is whole now, not after the exit unmaps the heap
        os._exit(0)


def _die_with_parent() -> None:
    """Have the kernel kill this child when its parent dies (Linux's ``PR_SET_PDEATHSIG``):
    a parent killed outright (SIGKILL, a test's timeout) must not leave isl running."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before the request took
        os._exit(1)


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything written to ``fd`` until its end, or None past ``deadline``."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], min(left, 0.1))
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _isl_schedule(pp: PolyProgram, deps: Deps, *, coincidence: bool) -> isl.Schedule | None:
    try:  # the budget counts the constraints' setup too
        sc = isl.ScheduleConstraints.on_domain(pp.domain).set_context(pp.context)
        sc = sc.set_validity(deps.all).set_proximity(deps.flow.union(deps.output))
        if coincidence:
            sc = sc.set_coincidence(deps.all)
        return sc.compute_schedule()
    except isl.Error as e:
        if "maximal number of operations exceeded" in str(e):
            budget = pp.context.get_ctx().get_max_operations()
            raise _OutOfBudget(f"ran out of its budget ({budget} operations)") from e
        return None


def single_nest(pp: PolyProgram, deps: Deps) -> Schedule | None:
    """The schedule of a def that is one statement, alone or after its ``op=!`` fill: its
    iterators in order, the fill inside the loops over the output's indices, ahead of the
    reduction loops. None for other defs (or if that order were illegal)."""
    stmts = pp.stmts
    params = pp.program.params
    root: Node | None = None
    if len(stmts) == 1:
        root = nest_of(stmts[0], params, set())
    elif (len(stmts) == 2 and stmts[0].kind == "init" and stmts[1].kind == "update"
          and stmts[0].stmt is stmts[1].stmt):
        root = _fill_then_update(stmts[0], stmts[1], params)
    if root is None:
        return None
    out = Schedule(root, pp, deps, "isl")
    try:
        check_legal(out.map, deps)
    except IllegalScheduleError:
        return None
    return out


def _fill_then_update(init: PolyStmt, update: PolyStmt, params: str) -> Node | None:
    """``for lhs...: init; for reductions...: update``."""
    lhs, its = _iterators(init), _iterators(update)
    if its[:len(lhs)] != lhs:
        return None
    node: Node = Leaf((update.name,))
    for it in reversed(its[len(lhs):]):
        node = Loop("", _expr(params, {update.name: its}, it), node)
    node = sequence((Leaf((init.name,)), node))
    for it in reversed(lhs):
        node = Loop("", _expr(params, {init.name: lhs, update.name: its}, it), node)
    return name_loops(node, (init.name, update.name))


def _iterators(s: PolyStmt) -> list[str]:
    space = s.domain.get_space()
    return [str(space.get_dim_name(isl.dim_type.set, d))
            for d in range(space.dim(isl.dim_type.set))]


def _expr(params: str, stmts: dict[str, list[str]], it: str) -> isl.UnionPwAff:
    pieces = "; ".join(f"{name}[{', '.join(its)}] -> [({it})]" for name, its in stmts.items())
    return isl.UnionPwAff(f"{params} -> {{ {pieces} }}")

