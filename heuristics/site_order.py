"""Site-order plans: which sites a pipeline uses, in which order, with how many GPUs each.

Geo-distributed optima tend to be made of whole *site blocks*: the GPUs of a
site form consecutive stages (one cheap intra-site link each) and the pipeline
crosses each inter-site link once. This module builds such plans directly:

1. **Sites.** GPUs are grouped by their ``site`` label (GPUs without one form
   one group of their own, so an instance without sites is one site). With more
   than ``max_sites`` groups, only the ``max_sites`` with the most effective
   compute (sum of 1 / per-layer time) are used, and the result says so.
2. **Order (Held-Karp).** For every subset of sites the cheapest order is found
   by an exact Held-Karp dynamic programme over (subset, last site), where going
   from site a to site b costs the link pair the cost model prices between a's
   exit GPU and b's entry GPU: ``comm[x, y] + comm[y, x]`` (activations
   forward, gradients back). The DP is exact for that cost, which is the part
   of the objective the order changes: with the GPUs of each block fixed, the
   order only changes the sum of the stage link times (weighted by A of
   :mod:`geoplan.cost.split`, the same for every order) and how those links
   limit the bottleneck stage. Both directions of the best path are kept,
   because the pipeline's two ends are not symmetric (the first and last sites
   put their fastest GPU at a pipeline end, see 3).
   Boundary GPU of a site in the DP: its slowest GPU (the one the block layout
   puts at an inter-site boundary when the whole site is used). In the
   generators' networks every GPU pair of two sites shares one link, so this is
   exact there; otherwise it is the DP's estimate, and every plan is priced on
   its real GPUs anyway.
3. **Block layout** (GPUs of a site, fastest = smallest per-layer compute
   time first, then more effective memory, then index). A stage's layer capacity
   under a bottleneck cap Z is (Z - k) / c, so the capacity lost to the link time
   k is k / c: larger link times belong on slower GPUs. Hence the one link of
   a pipeline end goes to the fastest GPU of the end site, and an inter-site link
   (the dearest) to the slowest GPU in use of the site:

   * only site: ``g1, g3, g4, ..., gk, g2`` (the two fastest at the two ends),
   * first site: ``g1, g2, ..., gk`` (start fastest, slowest next to the next site),
   * last site: ``gk, ..., g2, g1``,
   * middle site: ``gk, g1, g2, ..., g(k-1)`` (the two slowest face the other sites).

   A site using k of its GPUs uses its k fastest.
4. **Wrapped orders.** In metro-like networks the two pipeline ends often sit
   in the same site (both want its fastest GPUs, and the extra inter-site
   crossing is cheap). Every ordered subset of two or more sites is also tried
   with its first (or last) site split in two blocks, one at each end: the
   site's GPUs alternate between the two blocks by speed (1st, 3rd, ... to the
   start; 2nd, 4th, ... to the end), each block using its k fastest.
5. **GPUs per site and layers.** Each ordered subset is split exactly
   (:class:`geoplan.cost.split.Splitter`, the optimal contiguous split of a fixed
   GPU order) for a few starting allocations (the t fastest GPUs of the subset,
   at least one per site, for t = m, 2m, 4m, ... and the maximum); the most
   promising subsets then descend on the per-site counts (moves +-s for s = 8,
   4, 2, 1, best improvement, every candidate split exactly).
6. **Polish.** The best few plans descend on their GPU sequence
   (:func:`polish_sequence`: move one GPU elsewhere, swap two, replace one by an
   unused GPU, insert an unused GPU anywhere, drop one; the unused candidates
   are the ``unused_per_site`` fastest unused GPUs of every site), each
   neighbour split exactly, best improvement until none improves. Blocks stop
   being blocks here: the polished plan may visit a site more than once.

Every returned plan is priced by the shared :class:`~geoplan.cost.evaluate.Evaluator`.
At N = 256 (8 sites of 32, L = 96) one call takes well under a second (see
docs/memetic.md for the measured times).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from geoplan.cost.evaluate import Evaluator
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.split import Splitter
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

__all__ = [
    "SiteOrderPlan",
    "SiteOrderResult",
    "block_layout",
    "held_karp",
    "polish_sequence",
    "sequence_neighbours",
    "site_groups",
    "site_order_plans",
]

_STEPS = (8, 4, 2, 1)


@dataclass(frozen=True)
class SiteOrderPlan:
    """One site-block plan, priced by the shared evaluator."""

    plan: Plan
    objective: float
    t_iter_ms: float
    e_iter_j: float
    sites: tuple[str | None, ...]  # site labels in pipeline order
    gpus_per_site: tuple[int, ...]  # GPUs used of each, same order


@dataclass
class SiteOrderResult:
    """The plans found (best first) and what it took."""

    plans: list[SiteOrderPlan] = field(default_factory=list)
    sites: tuple[str | None, ...] = ()  # the site groups considered
    dropped_sites: tuple[str | None, ...] = ()  # groups left out (more than max_sites)
    subsets: int = 0  # ordered subsets split at their starting allocations
    refined: int = 0  # of them, descended on the per-site counts
    splits: int = 0  # exact splits computed
    seconds: float = 0.0

    @property
    def best(self) -> SiteOrderPlan | None:
        return self.plans[0] if self.plans else None


# --------------------------------------------------------------------------- building blocks


def site_groups(instance: Instance, comp_ms: np.ndarray, mem_cap: np.ndarray
                ) -> tuple[list[str | None], list[list[int]]]:
    """Site labels (first-appearance order) and their GPU indices, fastest first.

    Fastest: smallest per-layer compute time, then more effective memory, then index.
    """
    labels: list[str | None] = []
    members: dict[str | None, list[int]] = {}
    for i, g in enumerate(instance.gpus):
        if g.site not in members:
            labels.append(g.site)
            members[g.site] = []
        members[g.site].append(i)
    groups = [sorted(members[s], key=lambda i: (comp_ms[i], -mem_cap[i], i)) for s in labels]
    return labels, groups


def block_layout(fastest_first: Sequence[int], k: int, position: str) -> list[int]:
    """The k fastest GPUs of a site laid out for its ``position`` in the pipeline.

    ``position``: ``only``, ``first``, ``middle`` or ``last`` (module docstring, 3).
    """
    g = list(fastest_first[:k])
    if k <= 1:
        return g
    if position == "only":
        return [g[0], *g[2:], g[1]]
    if position == "first":
        return g
    if position == "last":
        return g[::-1]
    if position == "middle":
        return [g[-1], *g[:-1]]
    raise ValueError(f"unknown position {position!r}")


def held_karp(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cheapest Hamiltonian paths over every subset of ``m`` sites (exact DP).

    ``cost[a, b]``: the cost of going from site a to site b (inf: impossible).
    Returns ``dp`` of shape (2^m, m), the cheapest path visiting exactly the
    sites of the mask and ending at b (start free; inf where b is not in the
    mask or no path exists), and ``parent`` (the previous site, -1 at a start).
    O(2^m m^2) time, vectorised over the previous site.
    """
    m = cost.shape[0]
    full = 1 << m
    dp = np.full((full, m), math.inf)
    parent = np.full((full, m), -1, dtype=np.int64)
    for b in range(m):
        dp[1 << b, b] = 0.0
    for mask in range(1, full):
        if mask & (mask - 1) == 0:
            continue  # one site: a start
        for b in range(m):
            bit = 1 << b
            if not mask & bit:
                continue
            prev = mask ^ bit
            cand = dp[prev] + cost[:, b]
            a = int(np.argmin(cand))
            if cand[a] < math.inf:
                dp[mask, b] = cand[a]
                parent[mask, b] = a
    return dp, parent


def _path(parent: np.ndarray, mask: int, end: int) -> list[int]:
    """The path of :func:`held_karp` for ``mask`` ending at ``end`` (start first)."""
    out = [end]
    while True:
        a = int(parent[mask, out[-1]])
        if a < 0:
            break
        mask ^= 1 << out[-1]
        out.append(a)
    return out[::-1]


def sequence_neighbours(seq: list[int], unused: Sequence[int], qmax: int) -> list[list[int]]:
    """Every sequence one move from ``seq``: move, swap, replace, insert, drop."""
    q = len(seq)
    out: list[list[int]] = []
    for i in range(q):
        rest = seq[:i] + seq[i + 1:]
        out += [[*rest[:j], seq[i], *rest[j:]] for j in range(q) if j != i]
        out += [[*seq[:i], u, *seq[i + 1:]] for u in unused]
        if q > 1:
            out.append(rest)
        for j in range(i + 1, q):
            t = list(seq)
            t[i], t[j] = t[j], t[i]
            out.append(t)
    if q < qmax:
        out += [[*seq[:j], u, *seq[j:]] for u in unused for j in range(q + 1)]
    return out


def polish_sequence(
    splitter: Splitter,
    seq: Sequence[int],
    unused: Sequence[int] | None = None,
    *,
    groups: Sequence[Sequence[int]] | None = None,
    unused_per_site: int = 2,
    max_rounds: int | None = None,
    deadline: float | None = None,
) -> tuple[list[int], float, int]:
    """Best-improvement descent on a GPU sequence, every neighbour split exactly.

    Moves: one GPU to another position, two GPUs swapped, one replaced by an
    unused GPU, an unused GPU inserted anywhere, one dropped. Unused
    candidates: ``unused`` if given, else the ``unused_per_site`` fastest GPUs
    of each of ``groups`` (fastest first) not in the sequence, else every
    unused GPU. Returns (sequence, objective, splits computed); the objective
    is inf if no split of ``seq`` is feasible and no neighbour is either.
    """
    n, qmax = splitter.n, splitter.qmax
    cur = list(seq)
    first = splitter.split(cur)
    value = math.inf if first is None else first.objective
    splits, rounds = 1, 0
    while max_rounds is None or rounds < max_rounds:
        if deadline is not None and time.perf_counter() >= deadline:
            break
        rounds += 1
        used = set(cur)
        if unused is not None:
            cand = [u for u in unused if u not in used]
        elif groups is not None:
            cand = [u for g in groups for u in [v for v in g if v not in used][:unused_per_site]]
        else:
            cand = [u for u in range(n) if u not in used]
        nb = [t for t in sequence_neighbours(cur, cand, qmax) if t]
        if not nb:
            break
        obj = _split_all(splitter, nb)
        splits += len(nb)
        r = int(np.argmin(obj))
        # Relative margin: rounding-level "improvements" would cycle.
        if not obj[r] < value - 1e-12 * abs(value):
            break
        cur, value = nb[r], float(obj[r])
    return cur, value, splits


def _split_all(splitter: Splitter, seqs: Sequence[Sequence[int]]) -> np.ndarray:
    """Objective of the exact split of each GPU sequence (uneven lengths padded), one batch."""
    width = max(len(t) for t in seqs)
    G = np.zeros((len(seqs), width), dtype=np.int64)
    Q = np.empty(len(seqs), dtype=np.int64)
    for r, t in enumerate(seqs):
        G[r, :len(t)] = t
        Q[r] = len(t)
    obj, _ = splitter.split_arrays(G, Q)
    return obj


# --------------------------------------------------------------------------- search


class _Search:
    """Exact splits of site-block sequences, batched, with a cache per (order, counts)."""

    def __init__(self, splitter: Splitter, groups: list[list[int]], qmax: int) -> None:
        self.sp = splitter
        self.groups = groups
        self.qmax = qmax
        self.splits = 0
        self.cache: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}

    def sequence(self, order: Sequence[int], k: Sequence[int]) -> list[int]:
        m = len(order)
        seq: list[int] = []
        for pos, (s, ks) in enumerate(zip(order, k, strict=True)):
            where = ("only" if m == 1 else "first" if pos == 0
                     else "last" if pos == m - 1 else "middle")
            seq += block_layout(self.groups[s], ks, where)
        return seq

    def price(self, items: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> list[float]:
        """Objective of the optimal split of each (order, counts); inf if infeasible."""
        todo = [it for it in dict.fromkeys(items) if it not in self.cache]
        if todo:
            seqs = [self.sequence(o, k) for o, k in todo]
            obj = _split_all(self.sp, seqs)
            self.splits += len(seqs)
            for it, v in zip(todo, obj.tolist(), strict=True):
                self.cache[it] = v
        return [self.cache[it] for it in items]

    def starts(self, order: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Starting allocations: the t fastest GPUs of the subset, at least one per site."""
        m = len(order)
        sizes = [len(self.groups[s]) for s in order]
        top = min(sum(sizes), self.qmax)
        # Every GPU beyond each site's fastest, by speed (stable across sites).
        extra = sorted(((float(self.sp.comp[self.groups[s][j]]), p, j)
                        for p, s in enumerate(order) for j in range(1, sizes[p])))
        targets = sorted({t for t in (m * 2 ** e for e in range(20)) if t < top} | {top})
        out = []
        for t in targets:
            if t < m:
                continue
            k = [1] * m
            for _, p, _j in extra[: t - m]:
                k[p] += 1
            out.append(tuple(k))
        return out

    def descend(self, order: tuple[int, ...], k: tuple[int, ...], value: float
                ) -> tuple[tuple[int, ...], float]:
        """Best-improvement descent on the per-site counts, steps 8, 4, 2, 1."""
        sizes = [len(self.groups[s]) for s in order]
        for step in _STEPS:
            while True:
                moves = []
                for p in range(len(order)):
                    for d in (-step, step):
                        kk = list(k)
                        kk[p] += d
                        if 1 <= kk[p] <= sizes[p] and sum(kk) <= self.qmax:
                            moves.append((order, tuple(kk)))
                if not moves:
                    break
                vals = self.price(moves)
                r = int(np.argmin(vals))
                if not vals[r] < value:
                    break
                k, value = moves[r][1], vals[r]
        return k, value


def site_order_plans(
    instance: Instance,
    *,
    max_sites: int = 12,
    refine: int = 6,
    limit: int = 8,
    polish: int = 4,
    unused_per_site: int = 2,
    wrap: bool = True,
    splitter: Splitter | None = None,
    deadline: float | None = None,
) -> SiteOrderResult:
    """Site-block plans of ``instance``, best first (at most ``limit``).

    ``refine``: how many of the best ordered subsets descend on their per-site
    counts, in addition to the best subset of every size (number of sites).
    ``polish``: how many of the best refined plans then descend on their GPU
    sequence (:func:`polish_sequence`, ``unused_per_site`` candidates per
    site); ``wrap``: also try the wrapped orders (module docstring, 4).
    Returned: the best plan of each refined subset and the polished plans, one
    per distinct plan. Deterministic (no random numbers) unless ``deadline`` (a
    ``perf_counter`` value) passes: then the refinements and polishes not yet begun are
    skipped (every subset's start allocations are priced first, in one batch). Why: at
    metro N=64 L=96 the whole search takes 0.27 s, and the memetic algorithm given
    0.05 s ran for that long.
    """
    def late() -> bool:
        return deadline is not None and time.perf_counter() >= deadline

    t0 = time.perf_counter()
    instance = resolve_normalisers(instance)
    sp = splitter or Splitter(instance)
    comp = sp.comp
    labels, groups = site_groups(instance, comp, sp.mem_cap)
    res = SiteOrderResult()
    if len(labels) > max_sites:
        power = [float(np.sum(1.0 / comp[g])) for g in groups]
        keep = sorted(sorted(range(len(labels)), key=lambda s: -power[s])[:max_sites])
        res.dropped_sites = tuple(labels[s] for s in range(len(labels)) if s not in keep)
        labels = [labels[s] for s in keep]
        groups = [groups[s] for s in keep]
    res.sites = tuple(labels)
    m = len(labels)
    qmax = min(instance.n, instance.layers)
    # Groups m + 2s and m + 2s + 1: the two halves of site s in a wrapped order.
    halves: list[list[int]] = []
    for g in groups:
        halves += [g[0::2], g[1::2]]
    search = _Search(sp, groups + halves, qmax)

    def label(block: int) -> str | None:
        return labels[block] if block < m else labels[(block - m) // 2]

    # Held-Karp on the boundary GPUs (each site's slowest).
    link = [g[-1] for g in groups]
    cost = np.full((m, m), math.inf)
    for a in range(m):
        for b in range(m):
            if a != b:
                cost[a, b] = sp.comm[link[a], link[b]] + sp.comm[link[b], link[a]]
    dp, parent = held_karp(cost)

    # Every subset: its cheapest path, both directions, at the starting allocations.
    cands: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for mask in range(1, 1 << m):
        row = dp[mask]
        end = int(np.argmin(row))
        if not row[end] < math.inf:
            continue  # no path joins these sites
        path = tuple(_path(parent, mask, end))
        orders = [path, path[::-1]]
        if wrap and len(path) >= 2:
            for p in (path, path[::-1]):
                for s, rest in ((p[0], p[1:]), (p[-1], p[:-1])):
                    if len(groups[s]) >= 2:
                        orders.append((m + 2 * s, *rest, m + 2 * s + 1))
        for order in dict.fromkeys(orders):
            for k in search.starts(order):
                cands.append((order, k))
    vals = search.price(cands)
    best_start: dict[tuple[int, ...], tuple[float, tuple[int, ...]]] = {}
    for (order, k), v in zip(cands, vals, strict=True):
        if v < best_start.get(order, (math.inf, ()))[0]:
            best_start[order] = (v, k)
    res.subsets = len({o for o, _ in cands})

    # Refine: the best few ordered subsets and the best of every size.
    ranked = sorted(best_start, key=lambda o: best_start[o][0])
    chosen = list(ranked[:refine])
    by_size: dict[int, tuple[int, ...]] = {}
    for o in ranked:
        by_size.setdefault(len(o), o)
    chosen += [o for o in by_size.values() if o not in chosen]
    res.refined = len(chosen)
    found: list[tuple[float, tuple[int, ...], tuple[int, ...]]] = []
    for order in chosen:
        v, k = best_start[order]
        if not late():
            k, v = search.descend(order, k, v)
        found.append((v, order, k))
    found.sort()

    # Sequences to return: the refined ones, and the polished best few.
    seqs: list[tuple[float, list[int], tuple[str | None, ...], tuple[int, ...]]] = []
    for v, order, k in found:
        if v < math.inf:
            seqs.append((v, search.sequence(order, k), tuple(label(b) for b in order), k))
    extra_splits = 0
    site_of = {g: labels[s] for s, grp in enumerate(groups) for g in grp}
    for v, seq, _, _ in list(seqs[:polish]):
        if late():
            break
        pseq, pv, used = polish_sequence(sp, seq, groups=groups,
                                         unused_per_site=unused_per_site, deadline=deadline)
        extra_splits += used
        if pv < v:
            runs = tuple(site_of[gpu] for i, gpu in enumerate(pseq)
                         if i == 0 or site_of[gpu] != site_of[pseq[i - 1]])
            counts: list[int] = []
            for i, gpu in enumerate(pseq):
                if i and site_of[gpu] == site_of[pseq[i - 1]]:
                    counts[-1] += 1
                else:
                    counts.append(1)
            seqs.append((pv, pseq, runs, tuple(counts)))
    seqs.sort(key=lambda t: t[0])

    ev = Evaluator(instance)
    seen: set[Plan] = set()
    for _, seq, sites, k in seqs:
        if len(res.plans) >= limit:
            break
        split = sp.split(seq)
        if split is None:  # pragma: no cover - the batch said it was feasible
            continue
        plan = split.to_plan(instance)
        if plan in seen:
            continue
        seen.add(plan)
        e = ev.evaluate(plan)
        res.plans.append(SiteOrderPlan(plan, e.objective, e.t_iter_ms, e.e_iter_j, sites, k))
    res.plans.sort(key=lambda p: p.objective)
    res.splits = search.splits + extra_splits
    res.seconds = time.perf_counter() - t0
    return res
