"""Parent selection (tournament) and survivor replacement (steady-state, elitist).

Fitness is the negative objective (paper 5.2), so "fittest" means smallest
objective everywhere here. The population is kept sorted best first.
"""

from __future__ import annotations

import numpy as np

__all__ = ["replace_worst", "tournament"]


def tournament(
    rng: np.random.Generator, objective: np.ndarray, n: int, k: int
) -> np.ndarray:
    """Indices of ``n`` tournament winners; each tournament draws ``k`` entrants.

    Entrants are drawn with replacement (independent tournaments, one array
    draw); ties go to the entrant drawn first.
    """
    size = objective.shape[0]
    entrants = rng.integers(0, size, size=(n, k))
    best = np.argmin(objective[entrants], axis=1)
    return entrants[np.arange(n), best]


def replace_worst(
    X: np.ndarray,
    objective: np.ndarray,
    children: np.ndarray,
    child_objective: np.ndarray,
    elite: int,
    capacity: int | None = None,
    unconditional: bool = True,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Steady-state elitist replacement; returns the new population and how many entered.

    The ``elite`` best incumbents always survive; up to ``P - elite`` of the
    worst incumbents are replaced by offspring, the best offspring taking the
    place of the worst incumbent, the second best of the second worst, and so
    on. ``unconditional`` (the paper's reading, generational): every offspring
    that fits replaces its incumbent. Otherwise only while the offspring is
    strictly better, which equals keeping the best ``P - elite`` of non-elite
    incumbents and offspring together.

    A population below ``capacity`` (an initialisation that found too few
    feasible plans) first takes the best offspring into its empty places.
    Offspring must already be distinct, feasible and new. The population stays
    sorted best first (stable on ties).
    """
    if children.shape[0] == 0:
        return X, objective, 0
    c_order = np.argsort(child_objective, kind="stable")
    free = 0 if capacity is None else max(0, capacity - X.shape[0])
    if free:
        grow = c_order[:free]
        X = np.concatenate([X, children[grow]])
        objective = np.concatenate([objective, child_objective[grow]])
        c_order = c_order[free:]
    P = X.shape[0]
    e = min(elite, P)
    c_order = c_order[: P - e]
    c_obj = child_objective[c_order]
    worst = np.arange(P - 1, e - 1, -1)[: c_obj.shape[0]]  # worst first, elites excluded
    # Ascending offspring against descending incumbents: the improving pairs are a prefix.
    better = int(np.count_nonzero(c_obj < objective[worst]))
    n_in = c_obj.shape[0] if unconditional else better
    if n_in == 0 and not free:
        return X, objective, 0
    X = X.copy()
    objective = objective.copy()
    X[worst[:n_in]] = children[c_order[:n_in]]
    objective[worst[:n_in]] = c_obj[:n_in]
    order = np.argsort(objective, kind="stable")
    return X[order], objective[order], n_in + min(free, children.shape[0])
