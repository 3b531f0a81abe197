"""One dominance rule for interchangeable and dominated GPUs (used by MILP, CP-SAT and B&B).

Notation of cost-model.md: c_i the per-layer time of GPU i, d_ij the link time
i -> j (inf: no link), cap_i(Q, role) the most layers GPU i holds as a middle or
the last stage of a Q-stage pipeline, P^idle_i its idle power and
e_i = (P^act_i - P^idle_i) c_i its active energy per layer and micro-batch.

**Dominance.** GPU i *dominates* j (written i >= j) when

(a) c_i <= c_j;
(b) cap_i(Q, role) >= min(cap_j(Q, role), L - Q + 1) for every Q = 1..min(N, L)
    and both roles (a stage of a Q-stage plan never holds more than L - Q + 1
    layers; both sides are clipped so);
(c) d_ik <= d_jk and d_ki <= d_kj for every third GPU k (not i, not j), with
    inf <= inf (a missing link of i only where j lacks it too);
(d) only if energy is in the objective (its weight b > 0): P^idle_i <= P^idle_j
    and e_i <= e_j.

**Identical.** i and j are *identical* when i >= j, j >= i and d_ij = d_ji.

**Ranking.** A strict total order breaks ties: the key (c, [P^idle, e if
energy], -sum of the clipped caps, the number of missing links to and from the
others, the sum of the finite ones (sorted, so equal multisets give equal
sums), index). Every term is monotone under (a)-(d) (the pair's own links
d_ij, d_ji enter both link sums alike), so i >= j implies key(i) <= key(j)
up to the index; identical GPUs tie on every term and are ordered by index.

The rule is the set D of pairs (i, j) with i >= j and rank(i) < rank(j), and
its subset I of identical pairs. The constraints it justifies:

* "use i before j": y_j <= y_i (j used implies i used) for (i, j) in D;
* "n_i >= n_j" for (i, j) in I (MILP, CP-SAT);
* B&B: classes of pairwise identical GPUs, branched on in index order only
  (each class's used members are its lowest-index ones, in pipeline order).

**Why they keep an optimal plan** (proof sketch). Two moves never make a plan
worse:

R. j used, i unused, (i, j) in D: put i in j's place with j's layer count.
   Stage time of that position: n c_i <= n c_j and its links go to third GPUs
   (i was unused), no slower by (c); its neighbours' links to i are no slower
   by (c); every other stage is unchanged; the overhead o is the same on every
   stage. So every tau is no larger, hence sum tau, max tau and (M >= 1) T_iter
   are no larger. Memory: n <= cap_j(Q, role) and n <= L - Q + 1, so by (b)
   n <= cap_i(Q, role). Links used exist by (c). Energy: T is no larger, the
   idle sum no larger by (d), the active energy n e_i <= n e_j by (d); all
   powers are >= 0, so E_iter and every objective a T + b E (a, b >= 0) are no
   larger. Without energy (b = 0) (d) is not needed.
S. i, j identical, both used: exchange their positions (each keeps its
   position's layer count). Compute, caps and powers are equal; links to third
   GPUs are equal; if i and j are adjacent the pair's link becomes d_ji in
   place of d_ij and vice versa, equal. Every stage keeps its time: the plan
   keeps its price.

Start from an optimal plan and apply R while some pair of D violates
y_j <= y_i, and S while an identical pair has n_i < n_j (or, for B&B, while a
class member appears after a higher-index one or is unused while a
higher-index one is used -- the latter is R, since I is part of D). R strictly
lowers the sum of the ranks of the used GPUs and S leaves the used set alone
while raising the layer counts, listed in rank order, lexicographically (or
sorting the class members in pipeline order), so the moves end; every move
keeps the plan optimal, and at the end no constraint is violated. So the
constrained problem keeps an optimal plan. The orientation by the total order
is what makes the moves end: without it (i, j) and (j, i) could both be in D
for mutually dominating GPUs and the constraints would force y_i = y_j.

Exactness of the comparisons: all tests are on the coefficients the solver
optimises. CP-SAT rounds c, d and the weights to integers with one scale per
kind; rounding is monotone, so (a)-(d) on floats imply them on the integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from geoplan.cost.coefficients import Coefficients

__all__ = ["Dominance", "dominance", "dominance_of"]


@dataclass(frozen=True)
class Dominance:
    """The rule applied to one instance (see the module docstring).

    ``pairs``: (i, j) in D, i ranked before j (y_j <= y_i), listed in index
    order; ``identical``: the pairs of D that are identical (n_i >= n_j);
    ``rank[i]``: position of GPU i in the total order.
    """

    n: int
    pairs: tuple[tuple[int, int], ...]
    identical: tuple[tuple[int, int], ...]
    rank: np.ndarray

    def matrix(self) -> np.ndarray:
        """``succ[i, j]`` = (i, j) in D (a strict partial order contained in the ranking)."""
        succ = np.zeros((self.n, self.n), dtype=np.bool_)
        for i, j in self.pairs:
            succ[i, j] = True
        return succ

    def classes(self) -> np.ndarray:
        """Class id per GPU: greedy cliques of pairwise identical GPUs, in index order.

        Identity is not transitive (i ~ j and j ~ k need not give d_ik = d_ki),
        so a GPU joins the first class all of whose members it is identical to.
        """
        ident = {(min(p), max(p)) for p in self.identical}
        cls = np.full(self.n, -1, dtype=np.int64)
        members: list[list[int]] = []
        for i in range(self.n):
            for c, mem in enumerate(members):
                if all((min(i, j), max(i, j)) in ident for j in mem):
                    cls[i] = c
                    mem.append(i)
                    break
            else:
                cls[i] = len(members)
                members.append([i])
        return cls

    def violated(self, gpus: Sequence[int], counts: Sequence[int]) -> bool:
        """Whether the stage list breaks a constraint of the rule (y_j <= y_i, n_i >= n_j)."""
        used = dict(zip((int(g) for g in gpus), counts, strict=True))
        if any(j in used and i not in used for i, j in self.pairs):
            return True
        return any(used.get(i, 0) < used.get(j, 0) for i, j in self.identical)

    def canonical(
        self, gpus: Sequence[int], counts: Sequence[int]
    ) -> tuple[list[int], list[int]]:
        """An equally good or better stage list that satisfies the rule (moves R and S).

        Terminates: R lowers the rank sum of the used GPUs, S keeps the used set
        and raises the counts in rank order lexicographically.
        """
        g = [int(x) for x in gpus]
        n = [int(x) for x in counts]
        changed = True
        while changed:
            changed = False
            for i, j in self.pairs:
                if j in g and i not in g:
                    g[g.index(j)] = i
                    changed = True
            for i, j in self.identical:
                if i in g and j in g:
                    pi, pj = g.index(i), g.index(j)
                    if n[pi] < n[pj]:
                        g[pi], g[pj] = j, i
                        changed = True
        return g, n


def _clipped_caps(caps: np.ndarray, layers: int) -> np.ndarray:
    """Rows (Q, role) of layer caps, clipped to L - Q + 1 (rows in Q order: mid then last)."""
    caps = np.asarray(caps, dtype=np.int64)
    k = caps.shape[0] // 2
    q = np.concatenate([np.arange(1, k + 1), np.arange(1, k + 1)])
    return np.minimum(caps, (layers - q + 1)[:, None])


def dominance(
    comp: np.ndarray,
    comm: np.ndarray,
    caps: np.ndarray,
    idle_w: np.ndarray,
    e_layer: np.ndarray,
    energy: bool,
    layers: int,
    gpus: Sequence[int] | None = None,
) -> Dominance:
    """The rule for arrays: ``caps`` has rows cap(Q, mid) for Q = 1..K then cap(Q, last).

    ``gpus``: restrict the pairs to these GPUs (a model that holds only them);
    condition (c) still ranges over every other GPU.
    """
    comp = np.asarray(comp, dtype=float)
    comm = np.asarray(comm, dtype=float)
    idle = np.asarray(idle_w, dtype=float)
    el = np.asarray(e_layer, dtype=float)
    n = comp.shape[0]
    cap = _clipped_caps(caps, layers)
    off = ~np.eye(n, dtype=bool)

    def key(i: int) -> tuple:
        row = np.concatenate([comm[i, off[i]], comm[off[:, i], i]])
        finite = np.sort(row[np.isfinite(row)])
        head: tuple = (comp[i],)
        if energy:
            head += (idle[i], el[i])
        return (*head, -int(cap[:, i].sum()), int((~np.isfinite(row)).sum()),
                float(finite.sum()), i)

    order = sorted(range(n), key=key)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    allowed = set(range(n)) if gpus is None else {int(g) for g in gpus}

    def dominates(i: int, j: int) -> bool:
        if comp[i] > comp[j] or np.any(cap[:, i] < cap[:, j]):
            return False
        if energy and (idle[i] > idle[j] or el[i] > el[j]):
            return False
        others = off[i] & off[j]
        return bool(np.all(comm[i, others] <= comm[j, others])
                    and np.all(comm[others, i] <= comm[others, j]))

    pairs: list[tuple[int, int]] = []
    ident: list[tuple[int, int]] = []
    # Pairs in index order (i, then j): the order the models' constraints are added in.
    for i in range(n):
        if i not in allowed:
            continue
        for j in range(n):
            if j == i or j not in allowed or rank[i] >= rank[j] or not dominates(i, j):
                continue
            pairs.append((i, j))
            if comm[i, j] == comm[j, i] and dominates(j, i):
                ident.append((i, j))
    return Dominance(n, tuple(pairs), tuple(ident), rank)


def dominance_of(
    c: Coefficients, layers: int, energy: bool, gpus: Sequence[int] | None = None
) -> Dominance:
    """The rule for an instance's coefficients (float ms), every Q = 1..min(N, L)."""
    from geoplan.cost.bounds import layer_cap_table

    q_max = min(c.n, layers)
    mid, last = layer_cap_table(c, layers, q_max)
    caps = np.vstack([mid[1:], last[1:]])
    e_layer = np.asarray(c.dyn_w, dtype=float) * np.asarray(c.comp_ms, dtype=float)
    return dominance(c.comp_ms, c.comm_ms, caps, c.idle_w, e_layer, energy, layers, gpus)
