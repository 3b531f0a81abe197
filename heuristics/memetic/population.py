"""Initial population (paper 5.2): random stage counts, split points and GPU orders.

Each individual draws Q uniformly from 1..min(L, N), Q-1 distinct split points
between layers, and Q distinct GPUs in random order, one per stage. Plans the
shared evaluator finds infeasible (memory, a missing link) are rejected and
resampled, within a bounded number of samples; duplicates are skipped so the
population is as diverse as the plan space allows. Warm-start plans go in first,
then the seeds (the site-order plans, see docs/memetic.md), then random draws.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from geoplan.cost.batch import FEASIBLE, INVALID, MEMORY, NO_LINK, BatchEvaluator

__all__ = ["InitialPopulation", "initial_population", "sample_chromosomes"]


def sample_chromosomes(
    rng: np.random.Generator, k: int, n_gpus: int, layers: int
) -> np.ndarray:
    """``k`` random chromosomes, contiguous and distinct by construction, shape (k, L)."""
    qmax = min(layers, n_gpus)
    q = rng.integers(1, qmax + 1, size=k)
    keys = rng.random((k, layers - 1))
    # The Q-1 smallest keys of a row mark its split points: compare with the
    # (Q-1)-th smallest, padded with -inf so that Q = 1 marks none.
    srt = np.concatenate([np.full((k, 1), -np.inf), np.sort(keys, axis=1)], axis=1)
    split = keys <= srt[np.arange(k), q - 1][:, None]
    stage = np.zeros((k, layers), dtype=np.int64)
    np.cumsum(split, axis=1, out=stage[:, 1:])
    order = np.argsort(rng.random((k, n_gpus)), axis=1)  # a random GPU order per row
    return np.take_along_axis(order, stage, axis=1).astype(np.int64)


@dataclass
class InitialPopulation:
    """The sampled population (sorted best first) and how it was obtained."""

    X: np.ndarray
    objective: np.ndarray
    samples: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    warm_offered: int = 0
    warm_accepted: int = 0
    seeds_offered: int = 0
    seeds_accepted: int = 0
    exhausted: bool = False
    saturated: bool = False
    timed_out: bool = False

    @property
    def size(self) -> int:
        return int(self.X.shape[0])

    def failure_message(self) -> str:
        """Why no individual could be found (for a ``no_solution`` outcome)."""
        why = ", ".join(f"{k} {v}" for k, v in self.rejected.items() if v) or "none rejected"
        stop = "time limit reached" if self.timed_out else "sample budget exhausted"
        return (
            f"memetic: no feasible plan among {self.samples} sampled chromosomes "
            f"({stop}; rejected: {why}); the instance admits almost no feasible plan; "
            "try an exact solver (bnb, milp) or give a feasible warm start"
        )


_REASONS = {INVALID: "invalid", NO_LINK: "missing link", MEMORY: "memory"}


def initial_population(
    rng: np.random.Generator,
    evaluator: BatchEvaluator,
    size: int,
    max_samples: int,
    warm: np.ndarray | None = None,
    deadline: float | None = None,
    patience: int | None = None,
    stopped: Callable[[], bool] | None = None,
    seeds: np.ndarray | None = None,
) -> InitialPopulation:
    """Up to ``size`` distinct feasible individuals, warm starts first, then ``seeds``.

    Stops early when ``max_samples`` random chromosomes have been drawn, when
    ``deadline`` (a ``perf_counter`` value) passes, or when the last
    ``patience`` (default ``10 * size``) feasible draws were all duplicates (a
    plan space smaller than the population); the result may then be smaller
    than ``size`` (empty when nothing feasible was found).
    """
    patience = 10 * size if patience is None else patience
    inst = evaluator.instance
    L, n = inst.layers, inst.n
    rows: list[np.ndarray] = []
    objs: list[float] = []
    seen: set[bytes] = set()
    out = InitialPopulation(np.empty((0, L), np.int64), np.empty(0))
    out.rejected = {v: 0 for v in _REASONS.values()}
    stale = 0  # consecutive feasible draws that were all duplicates

    def take(X: np.ndarray, obj: np.ndarray, status: np.ndarray) -> int:
        counts = np.bincount(status.astype(np.int64), minlength=4)
        for code, name in _REASONS.items():
            out.rejected[name] += int(counts[code])
        nonlocal stale
        ok = np.flatnonzero(status == FEASIBLE)
        if ok.size == 0:
            return 0
        # Distinct rows of the batch in order of first appearance (vectorised,
        # since a tiny plan space yields mostly duplicates).
        _, first = np.unique(X[ok], axis=0, return_index=True)
        uniq = ok[np.sort(first)]
        out.duplicates += int(ok.size - uniq.size)
        added, last = 0, -1
        for r in uniq:
            if len(rows) >= size:
                break
            key = X[r].tobytes()
            if key in seen:
                out.duplicates += 1
                continue
            seen.add(key)
            rows.append(X[r])
            objs.append(float(obj[r]))
            added, last = added + 1, r
        stale = int(np.count_nonzero(ok > last)) if added else stale + ok.size
        return added

    if warm is not None and len(warm):
        W = np.ascontiguousarray(warm, dtype=np.int64)
        res = evaluator.evaluate(W)
        out.warm_offered = W.shape[0]
        out.warm_accepted = take(W, res.objective, res.status)
        stale = 0
    if seeds is not None and len(seeds):
        S = np.ascontiguousarray(seeds, dtype=np.int64)
        res = evaluator.evaluate(S)
        out.seeds_offered = S.shape[0]
        out.seeds_accepted = take(S, res.objective, res.status)
        stale = 0

    while len(rows) < size:
        if out.samples >= max_samples:
            out.exhausted = True
            break
        if (deadline is not None and time.perf_counter() >= deadline) or (
                stopped is not None and stopped()):  # an interrupt: as a time-out
            out.timed_out = True
            break
        if stale >= patience:
            out.saturated = True
            break
        need = size - len(rows)
        # Larger batches when feasibility is rare: fewer round trips, same stream.
        batch = int(min(max(4 * need, 256), 65536, max_samples - out.samples))
        X = sample_chromosomes(rng, batch, n, L)
        res = evaluator.evaluate(X)
        out.samples += batch
        take(X, res.objective, res.status)

    if rows:
        X = np.stack(rows)
        obj = np.asarray(objs)
        order = np.argsort(obj, kind="stable")
        out.X, out.objective = X[order], obj[order]
    return out
