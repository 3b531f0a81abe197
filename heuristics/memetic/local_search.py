"""Capacity-rebalancing local search (paper 5.5, Alg. 4; Fig. 6).

One step ranks the stages by load, takes the worst stage that can give a
layer (``n_q >= 2``) and the least-loaded other stage with memory headroom,
and, if the latter is strictly lighter, moves

    Δ = min(floor((t_w - t_b) / (c_w + c_b)), n_w - 1, headroom_b)

layers (``c`` = per-layer compute ms) from worst to best: the largest
transfer that leaves the old bottleneck no lighter than the receiver. Steps
repeat until nothing changes. GPUs, their order and Q stay fixed, so memory
stays feasible (the receiver's headroom comes from
:meth:`Coefficients.layer_caps`) and the bottleneck load never grows.

The load is the paper's compute load ``n_q / F~`` (as ``n_q * comp_ms``;
``ls_load="compute"``) or, by default, that plus the stage's fixed link
times ``comm_ms`` to its neighbours (``"tau"``): stage order and GPUs do not
change, so these are constants of the step, and the ranking then exposes the
true pipeline bottleneck. Only per-stage terms are read; the rebalanced plan
is priced by the shared evaluator and kept only if no worse than the
original (docs/memetic.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geoplan.cost.batch import BatchEvaluator
from geoplan.cost.coefficients import Coefficients
from heuristics.memetic.encoding import StageForm, from_stages, to_stages

__all__ = ["CapacityTable", "local_search", "rebalance"]

# Relative slack on the transfer bound, so that a bound that is an exact
# integer in real arithmetic is not lost to rounding.
_EPS = 1e-9


@dataclass(frozen=True)
class CapacityTable:
    """Per-layer compute times, layer caps per stage count, optional link times.

    ``mid[Q, i]`` / ``last[Q, i]``: largest layer count GPU i can hold as an
    inner / the last stage of a Q-stage pipeline (clipped to [0, L]).
    ``comm_ms`` (None: compute load only) adds each stage's link times.
    """

    comp_ms: np.ndarray
    mid: np.ndarray
    last: np.ndarray
    comm_ms: np.ndarray | None = None

    @classmethod
    def build(cls, c: Coefficients, layers: int, links: bool = True) -> CapacityTable:
        qmax = min(c.n, layers)
        mid = np.zeros((qmax + 1, c.n), np.int64)
        last = np.zeros((qmax + 1, c.n), np.int64)
        for q in range(1, qmax + 1):
            mid[q] = np.clip(c.layer_caps(q, last=False), 0, layers)
            last[q] = np.clip(c.layer_caps(q, last=True), 0, layers)
        return cls(np.asarray(c.comp_ms, dtype=float), mid, last,
                   np.asarray(c.comm_ms, dtype=float) if links else None)

    def caps(self, S: StageForm) -> np.ndarray:
        """(K, Qmax) layer caps of each stage of ``S`` (0 on padding)."""
        cols = np.arange(S.gpus.shape[1])[None, :]
        q = S.q[:, None]
        cap = np.where(cols == q - 1, self.last[q, S.gpus], self.mid[q, S.gpus])
        return np.where(cols < q, cap, 0)


def rebalance(
    S: StageForm, table: CapacityTable, max_steps: int | None = None
) -> tuple[StageForm, np.ndarray]:
    """Apply the rebalancing step to every row until none changes.

    Returns the new stage form and the number of steps each row took.
    ``max_steps`` only guards against a bug: a step replaces the worst load
    by two smaller ones and leaves the others, so the loads sorted in
    descending order fall lexicographically and the loop ends on its own.
    """
    T = S.copy()
    K, qm = T.gpus.shape
    valid = np.arange(qm)[None, :] < T.q[:, None]
    per = np.where(valid, table.comp_ms[T.gpus], 0.0)  # per-layer ms of each stage
    cap = table.caps(T)
    off = np.zeros(T.gpus.shape)  # fixed per-stage link time (0 for compute-only loads)
    if table.comm_ms is not None:
        g = T.gpus
        nxt = np.where(np.arange(qm - 1)[None, :] < T.q[:, None] - 1,
                       table.comm_ms[g[:, :-1], g[:, 1:]], 0.0)
        prv = np.where(np.arange(1, qm)[None, :] < T.q[:, None],
                       table.comm_ms[g[:, 1:], g[:, :-1]], 0.0)
        off[:, :-1] += nxt
        off[:, 1:] += prv
    steps = np.zeros(K, np.int64)
    live = np.flatnonzero(T.q >= 2)
    limit = max_steps if max_steps is not None else int(T.counts.sum(axis=1).max(initial=0)) * qm
    for _ in range(limit):
        if live.size == 0:
            break
        n = T.counts[live]
        c = per[live]
        v = valid[live]
        load = n * c + off[live]
        rows = np.arange(live.size)
        w = np.argmax(np.where(v & (n >= 2), load, -np.inf), axis=1)
        room = v & (n < cap[live])
        room[rows, w] = False
        b = np.argmin(np.where(room, load, np.inf), axis=1)
        tw, tb = load[rows, w], load[rows, b]
        cw, cb = c[rows, w], c[rows, b]
        ok = room[rows, b] & (n[rows, w] >= 2) & (tb < tw)
        with np.errstate(invalid="ignore"):
            bound = np.floor((tw - tb) / (cw + cb) * (1 + _EPS) + _EPS)
        bound = np.where(ok, bound, 0).astype(np.int64)
        delta = np.minimum.reduce([bound, n[rows, w] - 1, cap[live][rows, b] - n[rows, b]])
        move = delta >= 1
        if not move.any():
            break
        r = live[move]
        T.counts[r, w[move]] -= delta[move]
        T.counts[r, b[move]] += delta[move]
        steps[r] += 1
        live = r
    return T, steps


def local_search(
    X: np.ndarray,
    objective: np.ndarray,
    evaluator: BatchEvaluator,
    table: CapacityTable,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rebalance every row; keep a result only if the evaluator finds it no worse.

    Returns ``(X', objective', improved)``; ``improved`` marks rows whose
    objective went down.
    """
    S = to_stages(X)
    T, steps = rebalance(S, table)
    Y = X.copy()
    obj = objective.copy()
    improved = np.zeros(X.shape[0], dtype=bool)
    moved = np.flatnonzero(steps > 0)
    if moved.size:
        cand = from_stages(T, X.shape[1])[moved]
        new = evaluator.evaluate(cand).objective
        keep = new <= objective[moved]
        Y[moved[keep]] = cand[keep]
        obj[moved[keep]] = new[keep]
        improved[moved[keep & (new < objective[moved])]] = True
    return Y, obj, improved
