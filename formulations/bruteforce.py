"""Brute force: every plan of the space, priced by the shared batch evaluator.

For each stage count Q, every ordered choice of Q distinct GPUs (permutation)
is paired with every composition of the L layers into Q positive parts; the
pairs are priced in blocks by :meth:`geoplan.cost.batch.BatchEvaluator.evaluate_stages`.
Two prunings drop only plans that are certainly infeasible: GPU orders with a
missing link between consecutive GPUs, and (GPU order, composition) pairs
where some stage exceeds its GPU's memory cap for that Q (the caps come from
:meth:`~geoplan.cost.coefficients.Coefficients.layer_caps`, consistent with the one
memory test). The plan space has f(N, L) plans (:func:`geoplan.model.space.plan_space_size`);
above ``params["max_space"]`` (default 5e7) the solver refuses with
:class:`~geoplan.errors.SolverError`.

Deliberately independent of :mod:`geoplan.cost.split`, so that the two exact
solvers check each other.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations, permutations
from math import comb
from typing import Any, ClassVar

import numpy as np

from geoplan.cost.batch import BatchEvaluator
from geoplan.errors import SolverError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.space import plan_space_size
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, TraceRow

__all__ = ["DEFAULT_MAX_SPACE", "SPEC", "BruteforceParams", "compositions", "solve"]

DEFAULT_MAX_SPACE = 5e7
_BLOCK = 1 << 20  # (GPU order, composition) pairs tested per block


def compositions(layers: int, parts: int, max_rows: int = 1 << 20) -> Iterator[np.ndarray]:
    """Every composition of ``layers`` into ``parts`` positive parts, in lexicographic order.

    Yields (rows, parts) int64 blocks of at most about ``max_rows`` rows (split
    on the leading parts when the whole set would be larger).
    """
    if parts < 1 or parts > layers:
        return
    if parts == 1:
        yield np.array([[layers]], dtype=np.int64)
        return
    if comb(layers - 1, parts - 1) <= max_rows:
        cuts = np.array(list(combinations(range(1, layers), parts - 1)), dtype=np.int64)
        edges = np.hstack(
            [np.zeros((len(cuts), 1), np.int64), cuts, np.full((len(cuts), 1), layers)]
        )
        yield np.diff(edges, axis=1)
        return
    for first in range(1, layers - parts + 2):
        for block in compositions(layers - first, parts - 1, max_rows):
            yield np.hstack([np.full((len(block), 1), first, np.int64), block])


@dataclass(frozen=True)
class BruteforceParams(SolverParams):
    """Parameters of ``bruteforce`` (``--param KEY=VALUE``)."""

    LABEL: ClassVar[str] = "bruteforce"

    max_space: float = param(DEFAULT_MAX_SPACE, "refuse plan spaces f(N, L) larger than this",
                             at_least=1.0)


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Enumerate and price every plan; ``params["max_space"]`` caps f(N, L)."""
    t0 = options.start
    N, L = instance.n, instance.layers
    size = plan_space_size(N, L)
    cap = BruteforceParams.parse(options.params).max_space
    if size > cap:
        raise SolverError(
            f"bruteforce refuses: the plan space has f(N={N}, L={L}) = {size:,} plans, above "
            f"max_space = {cap:,.0f}; use --solver bnb, or raise the cap with "
            f"--param max_space=..."
        )
    be = BatchEvaluator(instance)
    c = be.coefficients
    finite = np.isfinite(c.comm_ms)
    both = finite & finite.T
    cb = options.callbacks
    trace: list[TraceRow] = []
    best = np.inf
    best_plan: tuple[np.ndarray, np.ndarray] | None = None
    priced = 0
    timed_out = False
    last_progress = time.perf_counter()

    def now() -> float:
        return time.perf_counter() - t0

    for q in range(1, min(N, L) + 1):
        mid = np.minimum(c.layer_caps(q, last=False), L)
        last = np.minimum(c.layer_caps(q, last=True), L)
        perms = np.array(list(permutations(range(N), q)), dtype=np.int64).reshape(-1, q)
        if q > 1:
            ok = both[perms[:, :-1], perms[:, 1:]].all(axis=1)
            perms = perms[ok]
        caps = mid[perms]
        caps[:, -1] = last[perms[:, -1]]
        keep = (caps >= 1).all(axis=1)
        perms, caps = perms[keep], caps[keep]
        if len(perms) == 0:
            continue
        part_max = caps.max(axis=0)
        for comps in compositions(L, q):
            comps = comps[(comps <= part_max).all(axis=1)]
            if len(comps) == 0:
                continue
            step = max(1, _BLOCK // len(comps))
            for s in range(0, len(perms), step):
                if time.perf_counter() >= options.deadline:
                    timed_out = True
                    break
                pc = caps[s : s + step]
                pi, ci = np.nonzero((comps[None, :, :] <= pc[:, None, :]).all(axis=2))
                if len(pi) == 0:
                    continue
                G = perms[s : s + step][pi]
                C = comps[ci]
                res = be.evaluate_stages(G, C, np.full(len(pi), q, np.int64))
                priced += len(pi)
                k = int(np.argmin(res.objective))
                if res.objective[k] < best:
                    best = float(res.objective[k])
                    best_plan = (G[k].copy(), C[k].copy())
                    trace.append(TraceRow(now(), best, None))
                    cb.on_improvement(now(), best, None)
                if time.perf_counter() - last_progress >= 0.5:
                    last_progress = time.perf_counter()
                    cb.on_progress({"nodes": priced, "incumbent": best, "bound": None,
                                    "stages": q})
            if timed_out:
                break
        if timed_out:
            break

    info: dict[str, Any] = {"space_size": size, "priced": priced, "completed": not timed_out}
    if best_plan is None:
        if timed_out:
            return Outcome(None, "no_solution", trace=trace, info=info,
                           message=f"time limit reached after pricing {priced:,} plans "
                           "without a feasible one")
        return Outcome(
            None, "infeasible", trace=trace, info=info,
            message=f"no feasible plan among the f(N={N}, L={L}) = {size:,} plans: every GPU "
            "order lacks a link between consecutive stages or exceeds some GPU's memory",
        )
    plan = Plan.from_indices(instance, best_plan[0], best_plan[1])
    if timed_out:
        return Outcome(plan, "feasible", model_objective=best, trace=trace, info=info,
                       message=f"time limit reached after pricing {priced:,} of {size:,} plans")
    trace.append(TraceRow(now(), best, best))
    cb.on_improvement(now(), best, best)
    return Outcome(plan, "optimal", lower_bound=best, model_objective=best, trace=trace,
                   info=info)


SPEC = SolverSpec("bruteforce", solve, "exact", "enumerates the whole plan space (memory-pruned)",
                  params=BruteforceParams)
