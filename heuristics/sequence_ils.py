"""Iterated local search over GPU sequences, every candidate split exactly.

A plan is a GPU sequence plus a layer split; :class:`~geoplan.cost.split.Splitter`
gives the optimal split of a sequence, so the search only has to move GPUs.
One iteration perturbs the current sequence with a *kick*, descends from it
with :func:`~heuristics.site_order.polish_sequence` (best improvement over
move, swap, replace, insert and drop, each neighbour split exactly) and
decides whether to continue from the result. Kicks, one drawn per iteration:

* **site insert** (``P_INSERT``): 1..k unused GPUs of one randomly drawn site,
  its fastest or a random choice of them, inserted as one run next to a GPU
  of that site already in use (anywhere if none is). Optima on metro-like
  networks often use a few more GPUs of a site than a descent reaches, and
  every single insertion on the way may be worse;
* **segment move** (``P_SEGMENT``): a run of consecutive stages, possibly
  reversed, moved elsewhere: reorders whole site blocks, which no move of
  one GPU does without passing through worse plans;
* otherwise **one or two random single moves** of the polish neighbourhood
  (any unused GPU may be inserted or swapped in).

Acceptance: a better result always; one no more than ``ACCEPT_WORSE``
(relative) worse with probability one half, so the search can drift along
plateaus; after ``RESET_AFTER`` iterations without a new best it returns to
the best. The memetic algorithm runs this between its runs from its best plan
(docs/memetic.md, "Sequence search between runs"); it is deterministic given
the generator and the iteration count.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from geoplan.cost.split import Splitter
from heuristics.site_order import polish_sequence, sequence_neighbours

__all__ = ["IlsResult", "iterated_polish", "kick"]

P_INSERT = 0.2
P_SEGMENT = 0.3
ACCEPT_WORSE = 0.003
RESET_AFTER = 50
#: unused GPUs per site the polish may insert or swap in (the kicks may use any)
POLISH_UNUSED = 2


@dataclass
class IlsResult:
    """Best sequence found, its objective, and what the search did."""

    sequence: list[int]
    objective: float
    iterations: int = 0
    improvements: int = 0
    splits: int = 0


def kick(rng: np.random.Generator, seq: Sequence[int], groups: Sequence[Sequence[int]],
         qmax: int) -> list[int]:
    """One random perturbation of ``seq`` (module docstring); may return ``seq`` unchanged."""
    t = list(seq)
    r = rng.random()
    if r < P_INSERT:
        s = int(rng.integers(len(groups)))
        used = set(t)
        free = [u for u in groups[s] if u not in used]
        room = qmax - len(t)
        if not free or room < 1:
            return t
        k = int(rng.integers(1, min(len(free), room) + 1))
        add = free[:k] if rng.random() < 0.5 else [free[i] for i in rng.permutation(len(free))[:k]]
        member = set(groups[s])
        anchors = [p for p, u in enumerate(t) if u in member]
        at = (anchors[int(rng.integers(len(anchors)))] + int(rng.integers(2)) if anchors
              else int(rng.integers(len(t) + 1)))
        return t[:at] + add + t[at:]
    if r < P_INSERT + P_SEGMENT and len(t) >= 3:
        i = int(rng.integers(len(t)))
        length = int(rng.integers(1, max(2, len(t) // 2) + 1))
        seg, rest = t[i:i + length], t[:i] + t[i + length:]
        if rng.random() < 0.5:
            seg = seg[::-1]
        j = int(rng.integers(len(rest) + 1))
        return rest[:j] + seg + rest[j:]
    n = sum(len(g) for g in groups)
    for _ in range(int(rng.integers(1, 3))):
        used = set(t)
        nb = [x for x in sequence_neighbours(t, [u for u in range(n) if u not in used], qmax)
              if x]
        if not nb:
            break
        t = nb[int(rng.integers(len(nb)))]
    return t


def iterated_polish(
    splitter: Splitter,
    start: Sequence[int],
    groups: Sequence[Sequence[int]],
    rng: np.random.Generator,
    iterations: int,
    *,
    deadline: float | None = None,
    stopped: Callable[[], bool] | None = None,
    on_improvement: Callable[[list[int], float], None] | None = None,
    on_iteration: Callable[[int, float], None] | None = None,
    patience: int | None = None,
) -> IlsResult:
    """Iterated local search from ``start`` for ``iterations`` kicks (module docstring).

    ``groups``: the GPU indices of each site, fastest first
    (:func:`heuristics.site_order.site_groups`). Stops early when ``deadline``
    (a ``perf_counter`` value) passes or ``stopped()`` is true; that is the
    only non-deterministic part. ``on_improvement(sequence, objective)`` is
    called on every new best, ``on_iteration(kicks so far, best objective)`` after
    every kick (progress display). ``patience``: also stop after that many kicks in a
    row without a new best.
    """
    qmax = splitter.qmax
    cur, val, splits = polish_sequence(splitter, start, groups=groups,
                                       unused_per_site=POLISH_UNUSED, deadline=deadline)
    out = IlsResult(list(cur), val, splits=splits)
    if on_improvement is not None and val < math.inf:
        on_improvement(list(cur), val)
    stale = since_best = 0
    for _ in range(iterations):
        if patience is not None and since_best >= patience:
            break
        if (deadline is not None and time.perf_counter() >= deadline) or (
                stopped is not None and stopped()):
            break
        out.iterations += 1
        t = kick(rng, cur, groups, qmax)
        t, v, used = polish_sequence(splitter, t, groups=groups,
                                     unused_per_site=POLISH_UNUSED, deadline=deadline)
        out.splits += used
        if v < val - 1e-12 * abs(val) or (v <= val * (1 + ACCEPT_WORSE) and rng.random() < 0.5):
            cur, val = t, v
        if val < out.objective - 1e-12 * abs(out.objective):
            out.sequence, out.objective = list(cur), val
            out.improvements += 1
            stale = since_best = 0
            if on_improvement is not None:
                on_improvement(list(cur), val)
        else:
            stale += 1
            since_best += 1
            if stale >= RESET_AFTER:
                cur, val, stale = list(out.sequence), out.objective, 0
        if on_iteration is not None:
            on_iteration(out.iterations, out.objective)
    return out
