"""Random-restart local search (RR-LS): an honest reference heuristic.

Repeats: draw a random feasible plan the way the memetic algorithm initialises
its population (paper 5.2: Q uniform in 1..min(N, L), Q - 1 distinct cut points,
Q distinct GPUs in random order; infeasible draws are rejected), then descend
over five neighbourhoods until a local optimum, then restart. Each descent step
prices the whole neighbourhood as one (K, L) chromosome batch through
:class:`~geoplan.cost.batch.BatchEvaluator`, on the instance's objective.

Neighbourhoods of a plan with stages (g_q, n_q):

* ``shift``: move one layer across one stage boundary (either direction);
* ``swap``: exchange the positions of two stages (GPU and layer count together);
* ``replace``: give one stage's layers to a GPU the plan does not use;
* ``drop``: remove one stage, its layers going to the left or the right neighbour;
* ``add``: split one stage (>= 2 layers) in halves, an unused GPU taking the first
  or the last half.

Parameters (:class:`RRLSParams`, ``--param KEY=VALUE``): ``max_restarts`` (descents
in all, warm starts included; default None = until the time limit), ``improvement`` (``"best"``,
default, or ``"first"``: the first improving move in a seeded random order),
``stall_restarts`` (stop after this many descents in a row without a new best;
default None), ``start_tries`` (random draws allowed per start, default 4096). If
no random draw is feasible before any plan is known, the Metis-default plan is
used once as the start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from geoplan.cost.baseline import metis_default_plan
from geoplan.cost.batch import BatchEvaluator
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, TraceRow

__all__ = ["MOVES", "SPEC", "RRLSParams", "neighbourhood", "random_chromosomes", "solve"]

MOVES = ("shift", "swap", "replace", "drop", "add")
_START_BATCH = 64


@dataclass(frozen=True)
class RRLSParams(SolverParams):
    """RR-LS settings (``--param KEY=VALUE``); they check themselves when built."""

    LABEL: ClassVar[str] = "random-restart"

    max_restarts: int | None = param(
        None, "descents in all, warm starts included (none: until the time limit)", at_least=1)
    improvement: Literal["best", "first"] = param(
        "best", "take the best improving move, or the first in a seeded random order")
    stall_restarts: int | None = param(
        None, "stop after this many descents in a row without a new best (none: never)",
        at_least=1)
    start_tries: int = param(4096, "random draws allowed per start", at_least=1)

    @classmethod
    def from_mapping(cls, params: Mapping[str, Any]) -> RRLSParams:
        """The parameters from ``--param`` strings or values (:func:`parse_params`)."""
        return cls.parse(params)


def _stages(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(GPUs, counts, start offsets) of a contiguous chromosome."""
    change = np.flatnonzero(np.diff(x)) + 1
    starts = np.concatenate(([0], change))
    counts = np.diff(np.concatenate((starts, [len(x)])))
    return x[starts], counts, starts


def random_chromosomes(
    rng: np.random.Generator, n_gpus: int, layers: int, count: int
) -> np.ndarray:
    """``count`` random plans as chromosomes, sampled like the MA's initial population."""
    q_max = min(n_gpus, layers)
    X = np.empty((count, layers), dtype=np.int64)
    for k in range(count):
        q = int(rng.integers(1, q_max + 1))
        cuts = np.sort(rng.choice(np.arange(1, layers), size=q - 1, replace=False))
        sizes = np.diff(np.concatenate(([0], cuts, [layers])))
        gpus = rng.choice(n_gpus, size=q, replace=False)
        X[k] = np.repeat(gpus, sizes)
    return X


def neighbourhood(x: np.ndarray, n_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """All neighbours of chromosome ``x`` as a (K, L) array and their move kinds (K,).

    Kinds index :data:`MOVES`. Every row is a contiguous plan with distinct GPUs
    and at most min(N, L) stages; links and memory are left to the evaluator.
    """
    layers = len(x)
    g, n, s = _stages(x)
    q = len(g)
    unused = np.setdiff1d(np.arange(n_gpus), g)
    rows: list[np.ndarray] = []
    kinds: list[int] = []

    def emit(kind: int, row: np.ndarray) -> None:
        rows.append(row)
        kinds.append(kind)

    for b in range(q - 1):  # shift across boundary b | b+1
        cut = s[b + 1]
        if n[b] > 1:
            y = x.copy()
            y[cut - 1] = g[b + 1]
            emit(0, y)
        if n[b + 1] > 1:
            y = x.copy()
            y[cut] = g[b]
            emit(0, y)
    for i in range(q):  # swap stages i < j: rebuild the span from i to j
        for j in range(i + 1, q):
            order = list(range(i, j + 1))
            order[0], order[-1] = j, i
            y = x.copy()
            y[s[i] : s[j] + n[j]] = np.repeat(g[order], n[order])
            emit(1, y)
    for i in range(q):  # replace stage i's GPU
        for u in unused:
            y = x.copy()
            y[s[i] : s[i] + n[i]] = u
            emit(2, y)
    for i in range(q):  # drop stage i into a neighbour
        for nb in (i - 1, i + 1):
            if 0 <= nb < q:
                y = x.copy()
                y[s[i] : s[i] + n[i]] = g[nb]
                emit(3, y)
    if q < min(n_gpus, layers):  # add a stage by halving stage i
        for i in range(q):
            if n[i] < 2:
                continue
            half = int(n[i]) // 2
            for u in unused:
                y = x.copy()
                y[s[i] : s[i] + half] = u
                emit(4, y)
                y = x.copy()
                y[s[i] + n[i] - half : s[i] + n[i]] = u
                emit(4, y)
    if not rows:
        return np.empty((0, layers), dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.stack(rows), np.asarray(kinds, dtype=np.int64)


class _Search:
    """State of one RR-LS run: evaluator, rng, global best, trace and counters."""

    def __init__(self, instance: Instance, options: SolveOptions, params: RRLSParams) -> None:
        self.instance = instance
        self.options = options
        self.params = params
        self.rng = np.random.default_rng(options.seed)
        self.ev = BatchEvaluator(instance)
        self.best_x: np.ndarray | None = None
        self.best_f = float("inf")
        self.trace: list[TraceRow] = []
        self.moves = dict.fromkeys(MOVES, 0)
        self.steps = 0
        self.timed_out = False

    def out_of_time(self) -> bool:
        if self.options.remaining() <= 0:
            self.timed_out = True
        return self.timed_out

    def offer(self, x: np.ndarray, f: float) -> bool:
        """Record ``x`` if it beats the global best; True if it did."""
        if not f < self.best_f:
            return False
        self.best_x, self.best_f = x.copy(), f
        seconds = self.options.elapsed()
        self.trace.append(TraceRow(seconds, f, None))
        self.options.callbacks.on_improvement(seconds, f, None)
        return True

    def random_start(self) -> tuple[np.ndarray, float] | None:
        """The first feasible random draw, or None after ``start_tries`` draws."""
        inst = self.instance
        drawn = 0
        while drawn < self.params.start_tries and not self.out_of_time():
            k = min(_START_BATCH, self.params.start_tries - drawn)
            X = random_chromosomes(self.rng, inst.n, inst.layers, k)
            drawn += k
            res = self.ev.evaluate(X)
            ok = np.flatnonzero(np.isfinite(res.objective))
            if ok.size:
                return X[ok[0]], float(res.objective[ok[0]])
        return None

    def descend(self, x: np.ndarray, f: float) -> tuple[np.ndarray, float]:
        """Improve ``x`` until no neighbour is strictly better (or time runs out)."""
        self.offer(x, f)
        while not self.out_of_time():
            X, kinds = neighbourhood(x, self.instance.n)
            if X.shape[0] == 0:
                break
            obj = self.ev.evaluate(X).objective
            # Strict improvement with a relative margin, so float ties cannot cycle.
            better = obj < f - 1e-12 * abs(f)
            if not better.any():
                break
            if self.params.improvement == "best":
                k = int(np.argmin(obj))
            else:
                cand = np.flatnonzero(better)
                k = int(cand[self.rng.permutation(cand.size)[0]])
            x, f = X[k].copy(), float(obj[k])
            self.steps += 1
            self.moves[MOVES[int(kinds[k])]] += 1
            self.offer(x, f)
        return x, f


def _warm_chromosomes(instance: Instance, plans: tuple[Plan, ...],
                      ev: BatchEvaluator) -> list[tuple[np.ndarray, float]]:
    """The warm-start plans that are feasible at the instance's micro-batch size."""
    out = []
    u = instance.training.micro_batch_size
    for plan in plans:
        if plan.micro_batch_size not in (None, u):
            continue  # RR-LS keeps the instance's micro-batch size fixed
        try:
            x = plan.to_chromosome(instance)
        except InputError:
            continue
        if len(x) != instance.layers or any(n < 1 for n in plan.layer_counts):
            continue
        f = float(ev.evaluate(x).objective[0])
        if np.isfinite(f):
            out.append((x, f))
    return out


def _default_start(instance: Instance, ev: BatchEvaluator) -> tuple[np.ndarray, float] | None:
    plan = metis_default_plan(instance)
    if plan is None:
        return None
    x = plan.to_chromosome(instance)
    f = float(ev.evaluate(x).objective[0])
    return (x, f) if np.isfinite(f) else None


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``random-restart``; see the module docstring."""
    params = RRLSParams.parse(options.params)
    search = _Search(instance, options, params)
    warm = _warm_chromosomes(instance, options.warm_start, search.ev)
    restarts = failed = stall = 0
    used_default = False
    while not search.out_of_time():
        if params.max_restarts is not None and restarts >= params.max_restarts:
            break
        if params.stall_restarts is not None and stall >= params.stall_restarts:
            break
        restarts += 1
        start = warm[restarts - 1] if restarts <= len(warm) else search.random_start()
        if start is None and search.timed_out:
            restarts -= 1  # the budget ran out while drawing: not a failed start
            break
        if start is None and search.best_x is None and not used_default:
            # Sparse networks can defeat random draws; the Metis-default plan is a
            # deterministic feasible start where one exists.
            used_default = True
            start = _default_start(instance, search.ev)
        if start is None:
            failed += 1
            stall += 1
            continue
        before = search.best_f
        _, f = search.descend(*start)
        stall = 0 if search.best_f < before else stall + 1
        options.callbacks.on_progress(
            {"restart": restarts, "local_optimum": f, "best": search.best_f}
        )

    info: dict[str, Any] = {
        "restarts": restarts,
        "failed_starts": failed,
        "descent_steps": search.steps,
        "accepted_moves": search.moves,
        "evaluations": search.ev.evaluations,
        "timed_out": search.timed_out,
    }
    if options.warm_start:
        info["warm_start_accepted"] = bool(warm)
        info["warm_starts_used"] = len(warm)
    if search.best_x is None:
        return Outcome(None, "no_solution", trace=search.trace, info=info,
                       message="no feasible random start found")
    plan = Plan.from_chromosome(instance, search.best_x)
    return Outcome(plan, "feasible", model_objective=search.best_f, trace=search.trace, info=info)


SPEC = SolverSpec("random-restart", solve, "heuristic",
                  "random-restart local search on the same evaluator", warm_start=True,
                  params=RRLSParams)
