"""The ``portfolio`` solver: an exact model warm-started from the memetic
algorithm, all within one budget.

The memetic algorithm runs when the exact model asks for a warm start (once its own
start plans and bound have proven nothing; before it, for a model that does not
defer its warm start or when the portfolio is given plans). When the exact model ends
unproven before the budget does, the memetic algorithm runs again for what is left,
from the best plan. It returns the best plan, the exact model's proven bound and the
gap between them. Which exact
model runs is ``params["exact"]`` (default: :func:`default_exact`), and the memetic
share of the budget is ``params["ma_fraction"]`` (default 0.2). ``memetic.KEY=VALUE`` and
``exact.KEY=VALUE`` pass parameters to the two solvers (:class:`PortfolioParams`).

With two threads or more (``parallel``, by default when ``threads >= 2``) the two run
at once instead: the memetic algorithm in a second process for the whole budget
(:mod:`formulations.memetic_peer`, at a lower priority), the exact model here with all
the threads. When
the exact model asks for its warm start it gets the best plan the memetic run has
found by then, at no cost to its budget; the answer is the better of the two plans,
with the exact model's bound. A proof ends the memetic run at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from formulations import memetic_peer
from formulations.site_subsets import SiteSearchParams
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import Callbacks, DeferredStart, SolveOptions, finish, get_solver
from geoplan.solving.core import solve as run
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, SolveResult, Status, TraceRow

__all__ = ["SPEC", "PortfolioParams", "default_exact", "solve"]

EXACT = ("bnb", "milp", "cpsat", "bruteforce")
#: budget left after an unproven exact run below which no memetic run follows
LEFTOVER_S = 0.05
#: seconds a stopped parallel memetic run gets to send its result before it is ended
STOP_WAIT_S = 0.2


def default_exact(instance: Instance) -> str:
    """The exact model that proved fastest on instances of this size in bench runs.

    Branch-and-bound (exact splits per GPU sequence, symmetry reduction) wins on
    small pools; the MILP's LP bound scales better to large ones.
    """
    return "bnb" if instance.n <= 12 else "milp"


@dataclass(frozen=True)
class PortfolioParams(SolverParams):
    """Parameters of ``portfolio``; ``memetic.KEY`` and ``exact.KEY`` reach its two solvers."""

    LABEL: ClassVar[str] = "portfolio"

    exact: Literal["bnb", "milp", "cpsat", "bruteforce"] | None = param(
        None, "the exact model (none: bnb up to 12 GPUs, milp beyond)")
    ma_fraction: float = param(0.2, "share of the budget for the memetic algorithm",
                               above=0.0, below=1.0)
    memetic: Mapping[str, Any] = param(None, "a memetic parameter (see its list)",
                                       prefix="memetic.", decode=False)
    exact_params: Mapping[str, Any] = param(None, "a parameter of the exact model (see its "
                                            "list)", prefix="exact.", decode=False)
    parallel: bool | None = param(None, "run the memetic algorithm in a second process "
                                  "alongside the exact model (none: with 2 threads or more)")
    ma_thread: bool = param(False, "parallel: give the memetic process one of the threads "
                            "at full priority (the exact model gets the rest) instead of "
                            "running it niced next to all of them")


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """The exact model with the memetic algorithm as its warm start; best plan and bound.

    An exact model that defers its warm start (``defers_warm_start``: MILP, CP-SAT, B&B)
    runs the memetic algorithm only once its own start plans, bound and site branching
    have not proven optimality, so an instance it proves at once costs no memetic run
    (``info["memetic"]["ran"]`` false). Plans given to the portfolio go to the memetic
    run, which then runs first, as it does for an exact model that does not defer.
    """
    params = PortfolioParams.parse(options.params)
    exact = params.exact or default_exact(instance)
    fraction = params.ma_fraction
    exact_spec = get_solver(exact)
    exact_spec.load()  # fail early if the backend is missing
    # Both inner parameter sets are checked before either solver runs.
    ma_params, _ = get_solver("memetic").parse_params(params.memetic, where="params.memetic")
    ex_params, _ = exact_spec.parse_params(params.exact_params, where="params.exact")
    if isinstance(ex_params, SiteSearchParams) and \
            "memetic_after_share" not in (params.exact_params or {}):
        # The portfolio runs the memetic algorithm itself (its warm start, or its peer): the
        # exact model's own run after site branching would repeat it.
        ex_params = replace(ex_params, memetic_after_share=0.0)
    if options.warm_start or not exact_spec.defers_warm_start:
        return _memetic_first(instance, options, exact, fraction, ma_params, ex_params)
    parallel = options.threads >= 2 if params.parallel is None else params.parallel
    if parallel and memetic_peer.available():
        return _side_by_side(instance, options, exact, ma_params, ex_params, params.ma_thread)
    # The memetic parameters as given (checked above), not parsed: the core lays them over
    # the memetic algorithm's warm-start defaults (one run, the paper's stop), which a
    # parsed set would replace with its standalone defaults (restarts until its share of
    # the budget is spent, time the exact model then lacks). The sequence search stays on
    # (a plain warm start turns it off): it is what the memetic algorithm alone gains
    # most from in its first seconds, and the portfolio must not fall behind it.
    ex = run(instance, exact, seed=options.seed, time_limit=options.remaining() or 1e-3,
             threads=options.threads, gap=options.gap, warm_start="memetic",
             warm_start_fraction=fraction,
             warm_start_params={"ils": getattr(ma_params, "ils", 0), **dict(params.memetic or {})},
             params=ex_params, callbacks=options.callbacks)
    ws = ex.info.get("warm_start", {})
    info: dict[str, Any] = {
        "memetic": {"ran": bool(ws.get("ran")), "objective": ws.get("objective"),
                    "wall_s": ws.get("wall_s"), "started_s": ws.get("started_s"),
                    "params": ws.get("params", {})},
        "exact": _exact_info(exact, ex, ws.get("accepted")),
    }
    plan, trace = ex.plan, list(ex.trace)
    if ex.status == "feasible" and ex.plan is not None and options.remaining() >= LEFTOVER_S:
        # The exact model ended without a proof before the budget did (on large pools
        # at small budgets it may not even build its model): the rest goes to the
        # memetic algorithm, from the best plan, as it would run alone.
        offset = options.elapsed()
        ma = run(instance, "memetic", seed=options.seed, time_limit=options.remaining(),
                 threads=options.threads, warm_start=[ex.plan], params=ma_params,
                 callbacks=options.callbacks)
        info["memetic_after"] = {"objective": ma.objective, "wall_s": round(ma.wall_s, 6),
                                 "started_s": round(offset, 6)}
        if ma.plan is not None and ma.objective is not None and ex.objective is not None \
                and ma.objective < ex.objective:
            plan = ma.plan
            trace += [TraceRow(offset + r.seconds, r.incumbent, ex.lower_bound)
                      for r in ma.trace if r.incumbent is not None
                      and r.incumbent < ex.objective]
    return Outcome(plan, ex.status, lower_bound=ex.lower_bound, trace=trace,
                   info=info, message=ex.message)


def _side_by_side(instance: Instance, options: SolveOptions, exact: str,
                  ma_params: SolverParams, ex_params: SolverParams, ma_thread: bool
                  ) -> Outcome:
    """The memetic algorithm in a peer process and the exact model here, at once.

    The exact model gets every thread: the peer runs niced after its first seconds, on
    the cycles the exact model leaves idle (its start heuristics and root bound run on one
    thread, HiGHS's search mostly on one), so its bound is the one it reaches alone.
    With one of the threads given to the peer instead (``ma_thread``), its site branching
    ran on one worker, and its proofs came later than the MILP's alone
    (``bench/portfolio_threads.py``)."""
    peer = memetic_peer.MemeticPeer(instance, options.seed, max(options.remaining(), 1e-3),
                                    ma_params,
                                    nice_after=None if ma_thread else memetic_peer.NICE_AFTER_S)
    threads = max(1, options.threads - 1) if ma_thread else options.threads
    handed: dict[str, Any] = {}

    def from_peer(_share: float) -> SolveResult:
        """The deferred warm start: the peer's best plan so far (no waiting)."""
        got = peer.best()
        if got is None:
            handed["objective"] = None
            return finish(instance, "memetic", Outcome(None, "no_solution"), 0.0, options.seed)
        at, objective, plan = got
        handed.update(objective=objective, found_s=round(at - options.start, 6))
        return finish(instance, "memetic", Outcome(plan, "feasible",
                                                   trace=[TraceRow(0.0, objective, None)]),
                      0.0, options.seed)

    offset = options.elapsed()
    shown = _WithPeer(options.callbacks, peer, time.perf_counter())
    try:
        ex = run(instance, exact, seed=options.seed, time_limit=options.remaining() or 1e-3,
                 threads=threads, gap=options.gap,
                 warm_start=DeferredStart(from_peer, 0.0, source="memetic (parallel)"),
                 params=ex_params, callbacks=shown)
    except BaseException:
        peer.close()
        raise
    settled = options.stopped() or ex.status in ("optimal", "infeasible")
    if settled:
        # An interrupt, or nothing left to find: the memetic run is not waited for beyond
        # a moment (at N=512 one round of its sequence search takes seconds, and a proof's
        # time must not include it); what it sent so far is kept.
        peer.stop()
    ma = peer.result(timeout=STOP_WAIT_S if settled else None)
    last = peer.best()
    ws = ex.info.get("warm_start", {})
    info: dict[str, Any] = {
        "mode": "parallel",
        "memetic": {"ran": True,
                    "objective": ma.objective if ma is not None else None if last is None
                    else last[1],
                    "wall_s": round(ma.wall_s if ma is not None else
                                    time.perf_counter() - peer.started, 6),
                    "ended": "its result" if ma is not None else "stopped before its result",
                    "time_to_best_s": None if last is None else round(last[0] - options.start, 6),
                    "handed": handed or None, **({"error": peer.error} if peer.error else {})},
        "exact": {**_exact_info(exact, ex, ws.get("accepted")), "threads": threads},
    }
    # The peer's incumbents (perf_counter times) and the exact model's rows, one curve.
    events: list[tuple[float, float | None, float | None]] = [
        (r.seconds + offset, r.incumbent, r.bound) for r in ex.trace]
    ma_rows: list[tuple[float, float | None, float | None]] = [
        (at - options.start, objective, None) for at, objective in peer.sent]
    trace: list[TraceRow] = []
    inc, bound = math.inf, None
    for t, i, b in sorted(events + ma_rows, key=lambda e: e[0]):
        inc = min(inc, math.inf if i is None else i)
        bound = b if b is not None else bound
        trace.append(TraceRow(t, None if inc == math.inf else inc,
                              None if bound is None else min(bound, inc)))
    plans = [(r.objective, r.plan) for r in (ex, ma) if r is not None and r.plan is not None
             and r.objective is not None]
    if last is not None and (ma is None or ma.plan is None):
        plans.append((last[1], last[2]))  # the child failed after sending plans
    if not plans:
        none: Status = "infeasible" if ex.status == "infeasible" else "no_solution"
        return Outcome(None, none, lower_bound=ex.lower_bound, trace=trace, info=info,
                       message=ex.message)
    plan = min(plans, key=lambda p: p[0])[1]
    status: Status = "optimal" if ex.status == "optimal" else "feasible"
    return Outcome(plan, status, lower_bound=ex.lower_bound, trace=trace, info=info,
                   message=None if status == "optimal" else ex.message)


class _WithPeer(Callbacks):
    """The exact model's callbacks, with the peer's new best plans passed on whenever the
    exact model reports (this thread only: a display need not be thread-safe); the
    incumbents shown only go down (the best of the two so far)."""

    def __init__(self, inner: Callbacks, peer: memetic_peer.MemeticPeer, start: float
                 ) -> None:
        self.inner, self.peer, self.start = inner, peer, start
        self.seen, self.best = 0, math.inf

    def _poll(self) -> None:
        self.peer.best()  # reads what the peer has sent
        for at, objective in self.peer.sent[self.seen:]:
            if objective < self.best:
                self.best = objective
                self.inner.on_improvement(at - self.start, objective, None)
        self.seen = len(self.peer.sent)

    def on_start(self, solver: str, instance: Instance, options: SolveOptions) -> None:
        self.inner.on_start(solver, instance, options)

    def on_improvement(self, seconds: float, incumbent: float | None, bound: float | None
                       ) -> None:
        self._poll()
        if incumbent is not None:
            incumbent = self.best = min(incumbent, self.best)
        self.inner.on_improvement(seconds, incumbent, bound)

    def on_progress(self, info: Mapping[str, Any]) -> None:
        self._poll()
        self.inner.on_progress(info)

    def on_plan(self, seconds: float, plan: Plan, objective: float) -> None:
        self.inner.on_plan(seconds, plan, objective)

    def on_end(self, result: SolveResult) -> None:
        self._poll()
        self.inner.on_end(result)


def _exact_info(exact: str, ex: SolveResult, accepted: Any) -> dict[str, Any]:
    return {"solver": exact, "objective": ex.objective, "lower_bound": ex.lower_bound,
            "status": ex.status, "wall_s": round(ex.wall_s, 6), "warm_start_accepted": accepted}


def _memetic_first(instance: Instance, options: SolveOptions, exact: str, fraction: float,
                   ma_params: SolverParams, ex_params: SolverParams) -> Outcome:
    """Memetic for ``fraction`` of the budget (from the given plans), then the exact model."""
    ma = run(
        instance,
        "memetic",
        seed=options.seed,
        time_limit=max(options.time_limit * fraction, 1e-3),
        threads=options.threads,
        warm_start=list(options.warm_start) or None,
        params=ma_params,
        callbacks=options.callbacks,
    )
    ma_offset = options.elapsed()
    starts = [ma.plan] if ma.plan is not None else list(options.warm_start)
    ex = run(
        instance,
        exact,
        seed=options.seed,
        time_limit=max(options.remaining(), 1e-3),
        threads=options.threads,
        gap=options.gap,
        warm_start=starts or None,
        params=ex_params,
        callbacks=options.callbacks,
    )

    trace = [TraceRow(r.seconds, r.incumbent, None) for r in ma.trace]
    best_ma = ma.objective if ma.objective is not None else float("inf")
    for r in ex.trace:
        inc = r.incumbent if r.incumbent is not None else None
        inc = best_ma if inc is None else min(inc, best_ma)
        trace.append(TraceRow(ma_offset + r.seconds, None if inc == float("inf") else inc, r.bound))

    candidates = [res for res in (ma, ex) if res.plan is not None and res.objective is not None]
    info = {
        "memetic": {"ran": True, "objective": ma.objective, "wall_s": round(ma.wall_s, 6),
                    "status": ma.status},
        "exact": _exact_info(exact, ex, ex.info.get("warm_start", {}).get("accepted")),
    }
    if options.warm_start:
        info["warm_start_accepted"] = ma.info.get("warm_start", {}).get("accepted", False)
    if not candidates:
        none: Status = "infeasible" if ex.status == "infeasible" else "no_solution"
        return Outcome(None, none, trace=trace, info=info, message=ex.message or ma.message)
    best = min(candidates, key=lambda r: math.inf if r.objective is None else r.objective)
    status: Status = "optimal" if ex.status == "optimal" else "feasible"
    return Outcome(best.plan, status, lower_bound=ex.lower_bound, trace=trace, info=info)


SPEC = SolverSpec("portfolio", solve, "exact",
                  "the best exact model, warm-started from the memetic algorithm when it "
                  "needs a plan",
                  warm_start=True, params=PortfolioParams)
