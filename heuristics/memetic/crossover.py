"""Stage-boundary-aware best-cut crossover (paper 5.3, Alg. 2).

For parents ``p1``, ``p2`` the candidate cuts are the union of both parents'
stage boundaries (all ``L-1`` cuts with probability ``p_fall``). Each cut
``b`` gives two children, ``p1[:b] + p2[b:]`` and ``p2[:b] + p1[b:]``; in each
direction the fittest child over all cuts is kept.

Children that break contiguity or distinctness (a GPU in both the prefix and
the suffix), or that are infeasible, are *rejected*: the batch evaluator prices
them at infinity, so a best cut is always a feasible child when one exists,
and a direction whose every cut is bad yields no child. See docs/memetic.md.

All candidate children of a generation are priced in one evaluator call.
"""

from __future__ import annotations

import numpy as np

from geoplan.cost.batch import BatchEvaluator
from heuristics.memetic.encoding import boundary_mask

__all__ = ["best_cut_crossover", "candidate_cuts", "crossover_pair"]


def candidate_cuts(p1: np.ndarray, p2: np.ndarray, full: bool = False) -> np.ndarray:
    """Sorted cut positions ``b`` in 1..L-1: B1 ∪ B2, or every cut when ``full``."""
    L = p1.shape[0]
    if full:
        return np.arange(1, L)
    union = (p1[1:] != p1[:-1]) | (p2[1:] != p2[:-1])
    return np.flatnonzero(union) + 1


def best_cut_crossover(
    X: np.ndarray,
    pairs: np.ndarray,
    full: np.ndarray,
    evaluator: BatchEvaluator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best-cut children of parent pairs.

    ``pairs`` is (n, 2) row indices into ``X``; ``full[i]`` asks pair i to try
    every cut. Returns ``(children, objective, pair)``: two rows per pair
    (direction p1|p2, then p2|p1) that has a candidate cut, their objectives
    (inf when no cut of that direction gave a feasible child) and the pair index
    of each child.
    """
    n, L = pairs.shape[0], X.shape[1]
    A = X[pairs[:, 0]]
    B = X[pairs[:, 1]]
    bm = boundary_mask(X)
    union = bm[pairs[:, 0]] | bm[pairs[:, 1]] | full[:, None]
    pair_of, col = np.nonzero(union)  # row-major: grouped by pair, cuts ascending
    if pair_of.size == 0:
        return np.empty((0, L), np.int64), np.empty(0), np.empty(0, np.int64)
    prefix = np.arange(L)[None, :] < (col + 1)[:, None]
    c1 = np.where(prefix, A[pair_of], B[pair_of])
    c2 = np.where(prefix, B[pair_of], A[pair_of])
    cand = np.concatenate([c1, c2])
    obj = evaluator.evaluate(cand).objective
    # Groups (direction, pair): pick the first minimum of each.
    group = np.concatenate([pair_of, pair_of + n])
    order = np.lexsort((obj, group))
    g_sorted = group[order]
    first = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    best = order[first]
    return cand[best], obj[best], group[best] % n


def crossover_pair(
    p1: np.ndarray, p2: np.ndarray, evaluator: BatchEvaluator, full: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The two best-cut children of one pair (rows may be absent when no cut exists)."""
    X = np.stack([np.asarray(p1, np.int64), np.asarray(p2, np.int64)])
    children, obj, _ = best_cut_crossover(X, np.array([[0, 1]]), np.array([full]), evaluator)
    return children, obj
