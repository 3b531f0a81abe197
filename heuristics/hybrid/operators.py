"""Operators of the hybrid memetic algorithm (docs/hybrid-memetic.md): constructors,
mutations, the best-cut crossover with repair, and the local search.

Every operator maps genomes to structurally valid genomes
(:func:`heuristics.hybrid.encoding.structure_errors` is empty) or returns None
when it cannot act; memory and links are left to the price (an infeasible
mutant reverts, an infeasible child is rejected). Randomness comes only from
the Generator passed in; the crossover's repair and the local search are
deterministic. New TP groups and replicas grow inside a node: a group is a
lead plus its nearest free GPUs of the same site by bandwidth
(:attr:`HybridSpace.near`), and new replicas of a stage start next to the
stage's lead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from numba import njit

from geoplan.cost.kernel import FEASIBLE
from heuristics.hybrid.encoding import Genome, Group, HybridSpace, kernel_price, pack

__all__ = [
    "MUTATIONS",
    "crossover_children",
    "crossover_cuts",
    "even_shares",
    "expansions",
    "local_search",
    "mutate",
    "random_genome",
    "regroupings",
    "rescale_shares",
    "speed_shares",
]

Mutation = Callable[[np.random.Generator, HybridSpace, Genome], Genome | None]


# --------------------------------------------------------------------------- shares


def even_shares(u: int, d: int) -> tuple[int, ...]:
    """u samples over d replicas as evenly as possible, the extra ones first."""
    return tuple(u // d + (1 if i < u % d else 0) for i in range(d))


def _proportional(weights: Sequence[float], u: int) -> tuple[int, ...]:
    """Integer shares >= 1 summing to u, proportional to ``weights`` (largest remainder;
    ties to the first). Plain Python: the lists are a few replicas long."""
    d = len(weights)
    if d > u:
        raise ValueError("more replicas than samples")
    w = [x if x > 0 else 0.0 for x in weights]
    total = sum(w)
    if total <= 0:
        return even_shares(u, d)
    extra = u - d  # every replica gets 1, the rest in proportion
    raw = [x / total * extra for x in w]
    base = [math.floor(x) for x in raw]
    rem = extra - sum(base)
    order = sorted(range(d), key=lambda i: -(raw[i] - base[i]))
    for i in order[:rem]:
        base[i] += 1
    return tuple(b + 1 for b in base)


def rescale_shares(shares: Sequence[int], u: int) -> tuple[int, ...]:
    """``shares`` rescaled to sum to u in the same proportions (len(shares) <= u)."""
    if sum(shares) == u and min(shares) >= 1:
        return tuple(shares)
    return _proportional([float(s) for s in shares], u)


def speed_shares(space: HybridSpace, replicas: Sequence[tuple[int, ...]], u: int
                 ) -> tuple[int, ...]:
    """Shares proportional to each replica's slowest GPU (what bounds its compute)."""
    return _proportional([float(min(space.tflops[list(r)])) for r in replicas], u)


# --------------------------------------------------------------------------- GPU groups


def _free(space: HybridSpace, g: Genome) -> set[int]:
    return set(range(space.n)) - set(g.gpus)


def _grow(space: HybridSpace, lead: int, t: int, free: set[int]) -> tuple[int, ...] | None:
    """``lead`` and its t - 1 nearest free GPUs of its site (None if the site lacks them)."""
    out = [lead]
    for h in space.near[lead]:
        if len(out) == t:
            break
        if h in free:
            out.append(h)
    return tuple(out) if len(out) == t else None


def _new_group(rng: np.random.Generator, space: HybridSpace, t: int, free: set[int],
               near: int | None) -> tuple[int, ...] | None:
    """A new TP group of t free GPUs: next to GPU ``near`` with probability 1/2 (the
    nearest free GPU of its site leads), else led by a random free GPU whose site has t
    free GPUs."""
    if near is not None and rng.random() < 0.5:
        for h in space.near[near]:
            if h in free:
                grp = _grow(space, h, t, free)
                if grp is not None:
                    return grp
                break
    leads = sorted(h for h in free
                   if sum(1 for x in space.site_gpus[int(space.site[h])] if x in free) >= t)
    if not leads:
        return None
    lead = leads[int(rng.integers(len(leads)))]
    return _grow(space, lead, t, free)


def _stage(layers: int, tp: int, rec: int, replicas: Sequence[tuple[int, ...]],
           shares: Sequence[int]) -> Group:
    return Group(layers, tp, rec, tuple(replicas), tuple(shares))


def _with_stage(g: Genome, q: int, s: Group) -> Genome:
    return replace(g, stages=(*g.stages[:q], s, *g.stages[q + 1:]))


def _with_u(space: HybridSpace, g: Genome, u: int) -> Genome:
    """``g`` with micro-batch size u: stages with more than u replicas keep their first u,
    shares rescaled."""
    stages = []
    for s in g.stages:
        reps = s.replicas[:u]
        stages.append(_stage(s.layers, s.tp, s.rec, reps, rescale_shares(s.shares[:u], u)))
    return Genome(tuple(stages), u, g.z)


# --------------------------------------------------------------------------- constructors


def _split_layers(L: int, q: int) -> list[int]:
    return [L // q + (1 if i < L % q else 0) for i in range(q)]


def random_genome(rng: np.random.Generator, space: HybridSpace, uniform: bool | None = None
                  ) -> Genome | None:
    """A random genome built node-packed: stage after stage, each replica a TP group grown
    around the free GPU nearest the previous group (a random GPU to begin with).

    ``uniform`` (default: a coin): every stage has the same tp and replica count (the
    Megatron-like grid shape), else each stage draws its own. Layers are split evenly,
    shares in proportion to the replicas' speed; u, z and recompute drawn from the
    choices (u large enough for the replicas)."""
    if uniform is None:
        uniform = bool(rng.random() < 0.5)
    tps = space.tp_choices
    u_max = max(space.u_choices)
    t = int(tps[int(rng.integers(len(tps)))])
    d = int(rng.integers(1, u_max + 1))
    d = min(d, max(1, space.n // t))
    q_max = max(1, min(space.L, space.n // (t * d)))
    q = int(rng.integers(1, q_max + 1))
    free = set(range(space.n))
    # The first group starts at a random GPU, half the time drawn by speed squared (fast
    # GPUs are where good plans start; the uniform half keeps slow pools reachable).
    w = space.tflops ** 2
    prev = int(rng.choice(space.n, p=w / w.sum())) if rng.random() < 0.5 else \
        int(rng.integers(space.n))
    free_first = True
    shapes = []
    for _ in range(q):
        if uniform:
            shapes.append((t, d))
        else:
            tq = int(tps[int(rng.integers(len(tps)))])
            shapes.append((tq, int(rng.integers(1, u_max + 1))))
    need = max(dq for _, dq in shapes)
    ok_u = [x for x in space.u_choices if x >= need]
    u = ok_u[int(rng.integers(len(ok_u)))] if ok_u else u_max
    z = space.z_choices[int(rng.integers(len(space.z_choices)))]
    recs = space.rec_choices
    stages = []
    for n_layers, (tq, dq) in zip(_split_layers(space.L, q), shapes, strict=True):
        reps: list[tuple[int, ...]] = []
        for _ in range(min(dq, u)):
            if free_first:
                grp = _grow(space, prev, tq, free) if prev in free else None
                free_first = False
                if grp is None:
                    grp = _new_group(rng, space, tq, free, prev)
            else:
                grp = _new_group(rng, space, tq, free, prev)
            if grp is None:
                break
            reps.append(grp)
            free -= set(grp)
            prev = grp[0]
        if not reps:
            return None
        rec = recs[int(rng.integers(len(recs)))] if rng.random() < 0.3 else recs[0]
        stages.append(_stage(n_layers, tq, rec, reps, speed_shares(space, reps, u)))
    return Genome(tuple(stages), u, z)


def expansions(space: HybridSpace, g: Genome) -> list[Genome]:
    """Deterministic hybrid variants of ``g`` (the pipeline seed): every stage's replicas
    grown to tp 2t, 4t, ... by their nearest free GPUs; every stage given d replicas
    (d = 2, 3, ..., the smallest u choice >= d); and every u and z choice."""
    out: list[Genome] = []
    for t in space.tp_choices:
        free = _free(space, g)
        stages = []
        for s in g.stages:
            if t <= s.tp:
                break
            reps = []
            for r in s.replicas:
                grp = _grow(space, r[0], t, free | set(r))
                if grp is None:
                    break
                free -= set(grp)
                reps.append(grp)
            if len(reps) < len(s.replicas):
                break
            stages.append(_stage(s.layers, t, s.rec, reps, s.shares))
        if len(stages) == g.q:
            out.append(Genome(tuple(stages), g.u, g.z))
    for d in range(2, max(space.u_choices) + 1):
        us = [x for x in space.u_choices if x >= d]
        if not us:
            break
        base = _with_u(space, g, us[0])
        free = _free(space, base)
        stages = []
        for s in base.stages:
            reps = list(s.replicas)
            while len(reps) < d:
                lead = next((h for h in space.near[reps[-1][0]] if h in free), None)
                grp = None if lead is None else _grow(space, lead, s.tp, free)
                if grp is None:
                    break
                free -= set(grp)
                reps.append(grp)
            stages.append(_stage(s.layers, s.tp, s.rec, reps, speed_shares(space, reps,
                                                                            base.u)))
        out.append(Genome(tuple(stages), base.u, base.z))
    for u in space.u_choices:
        if u != g.u:
            out.append(_with_u(space, g, u))
    for z in space.z_choices:
        if z != g.z:
            out.append(replace(g, z=z))
    return out


def _groups_from(space: HybridSpace, order: Sequence[int], t: int) -> list[tuple[int, ...]]:
    """TP groups of t GPUs cut from ``order``: each next unused GPU leads, with its nearest
    unused same-site GPUs of ``order`` (a lead without enough of them is skipped)."""
    pool = set(order)
    out = []
    for lead in order:
        if lead not in pool:
            continue
        grp = _grow(space, lead, t, pool)
        if grp is None:
            pool.discard(lead)
            continue
        out.append(grp)
        pool -= set(grp)
    return out


def _gpu_sets(space: HybridSpace, g: Genome) -> list[list[int]]:
    """The GPUs of ``g`` in pipeline order, and that list grown to twice its size by the
    free GPUs nearest to its members (whole nodes first, since near lists are by bandwidth)."""
    base = list(g.gpus)
    grown = list(base)
    free = _free(space, g)
    for x in base:
        for h in space.near[x]:
            if len(grown) >= 2 * len(base):
                break
            if h in free:
                grown.append(h)
                free.discard(h)
    out = [base]
    if len(grown) > len(base):
        # Keep node mates together: order the grown set by first appearance of each lead's
        # neighbourhood (a member, then its added mates).
        ordered: list[int] = []
        for x in base:
            if x not in ordered:
                ordered.append(x)
            ordered += [h for h in space.near[x] if h in grown and h not in ordered
                        and h not in base][:1]
        ordered += [h for h in grown if h not in ordered]
        out.append(ordered)
    return out


def regroupings(space: HybridSpace, g: Genome) -> list[Genome]:
    """Grid-shaped genomes on the GPUs of ``g`` (and on that set grown by nearby free
    GPUs): for every tp t and replica count d, TP groups cut from the set in order and
    stages of d consecutive groups, as many stages as the groups allow (at most L);
    layers even, shares by speed, u the smallest choice >= d, g's z, no recompute."""
    out: list[Genome] = []
    seen: set[Genome] = set()
    for order in _gpu_sets(space, g):
        for t in space.tp_choices:
            groups = _groups_from(space, order, t)
            for d in range(1, max(space.u_choices) + 1):
                us = [x for x in space.u_choices if x >= d]
                q = min(len(groups) // d, space.L)
                if not us or q < 1:
                    continue
                u = us[0]
                stages = []
                for k, n in enumerate(_split_layers(space.L, q)):
                    reps = groups[k * d:(k + 1) * d]
                    stages.append(_stage(n, t, space.rec_choices[0], reps,
                                         speed_shares(space, reps, u)))
                h = Genome(tuple(stages), u, g.z)
                if h not in seen:
                    seen.add(h)
                    out.append(h)
    return out


# --------------------------------------------------------------------------- mutations


def boundary_shift(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """GeoTrain's boundary shift, both ways: one layer crosses a random stage boundary; a
    one-layer donor disappears (its GPUs become free)."""
    if g.q < 2:
        return None
    b = int(rng.integers(g.q - 1))
    give, take = (b, b + 1) if rng.random() < 0.5 else (b + 1, b)
    st = list(g.stages)
    st[take] = replace(st[take], layers=st[take].layers + 1)
    if st[give].layers == 1:
        del st[give]
    else:
        st[give] = replace(st[give], layers=st[give].layers - 1)
    return replace(g, stages=tuple(st))


def stage_swap(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """GeoTrain's stage swap: two stages exchange positions, each keeping its layers and
    GPU groups."""
    if g.q < 2:
        return None
    a, b = (int(x) for x in rng.choice(g.q, size=2, replace=False))
    st = list(g.stages)
    st[a], st[b] = st[b], st[a]
    return replace(g, stages=tuple(st))


def _positions(g: Genome) -> list[tuple[int, int, int]]:
    return [(q, r, j) for q, s in enumerate(g.stages) for r, rep in enumerate(s.replicas)
            for j in range(len(rep))]


def _set_gpu(g: Genome, q: int, r: int, j: int, gpu: int) -> Genome:
    s = g.stages[q]
    rep = (*s.replicas[r][:j], gpu, *s.replicas[r][j + 1:])
    return _with_stage(g, q, replace(s, replicas=(*s.replicas[:r], rep, *s.replicas[r + 1:])))


def reassign_gpu(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """A GPU of the plan is replaced by a free one (GeoTrain's reassignment); inside a TP
    group the new GPU is of the group's site."""
    pos = _positions(g)
    q, r, j = pos[int(rng.integers(len(pos)))]
    free = _free(space, g)
    rep = g.stages[q].replicas[r]
    if len(rep) > 1:
        free = {h for h in free if space.site[h] == space.site[rep[0]]}
    if not free:
        return None
    cand = sorted(free)
    return _set_gpu(g, q, r, j, cand[int(rng.integers(len(cand)))])


def exchange_gpus(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """Two GPUs of the plan exchange places (between replicas or stages, or inside a TP
    ring, which changes its order and lead); site constraints are kept."""
    pos = _positions(g)
    if len(pos) < 2:
        return None
    for _ in range(4):
        a, b = (int(x) for x in rng.choice(len(pos), size=2, replace=False))
        (qa, ra, ja), (qb, rb, jb) = pos[a], pos[b]
        x = g.stages[qa].replicas[ra][ja]
        y = g.stages[qb].replicas[rb][jb]
        same = (qa, ra) == (qb, rb)
        if not same and space.site[x] != space.site[y] and (
                g.stages[qa].tp > 1 or g.stages[qb].tp > 1):
            continue
        return _set_gpu(_set_gpu(g, qa, ra, ja, y), qb, rb, jb, x)
    return None


def relocate_replica(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """A whole TP group moves to free GPUs (possibly of another site)."""
    q = int(rng.integers(g.q))
    s = g.stages[q]
    r = int(rng.integers(len(s.replicas)))
    free = _free(space, g)
    grp = _new_group(rng, space, s.tp, free, s.replicas[r][0])
    if grp is None:
        return None
    reps = (*s.replicas[:r], grp, *s.replicas[r + 1:])
    return _with_stage(g, q, replace(s, replicas=reps))


def change_tp(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """tp of one stage doubles or halves. Doubling merges pairs of same-site replicas
    (d halves) or grows every replica by its nearest free GPUs; halving splits every
    TP group into two replicas (d doubles, if u allows) or keeps the first half of each
    group (the rest become free)."""
    q = int(rng.integers(g.q))
    s = g.stages[q]
    free = _free(space, g)
    options: list[Group] = []
    up = 2 * s.tp
    if up in space.tp_choices:
        d = len(s.replicas)
        if d >= 2 and d % 2 == 0:
            order = sorted(range(d), key=lambda r: (int(space.site[s.replicas[r][0]]), r))
            pairs = [(order[i], order[i + 1]) for i in range(0, d, 2)]
            if all(space.site[s.replicas[a][0]] == space.site[s.replicas[b][0]]
                   for a, b in pairs):
                reps = [s.replicas[a] + s.replicas[b] for a, b in pairs]
                shares = [s.shares[a] + s.shares[b] for a, b in pairs]
                options.append(_stage(s.layers, up, s.rec, reps, shares))
        grown = []
        pool = set(free)
        for rep in s.replicas:
            grp = _grow(space, rep[0], up, pool | set(rep))
            if grp is None or any(x not in pool and x not in rep for x in grp):
                break
            pool -= set(grp)
            grown.append(grp)
        if len(grown) == len(s.replicas):
            options.append(_stage(s.layers, up, s.rec, grown, s.shares))
    if s.tp >= 2:
        h = s.tp // 2
        d = len(s.replicas)
        if 2 * d <= g.u:
            reps = [part for rep in s.replicas for part in (rep[:h], rep[h:])]
            shares = [x for k in s.shares for x in (k - k // 2, k // 2)]
            if min(shares) < 1:
                shares = list(speed_shares(space, reps, g.u))
            options.append(_stage(s.layers, h, s.rec, reps, shares))
        options.append(_stage(s.layers, h, s.rec, [rep[:h] for rep in s.replicas], s.shares))
    if not options:
        return None
    return _with_stage(g, q, options[int(rng.integers(len(options)))])


def add_replica(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """One stage gets one more replica (DP), a TP group next to the stage's lead; u grows
    to the smallest choice that allows it if needed; shares follow replica speed."""
    q = int(rng.integers(g.q))
    s = g.stages[q]
    d = len(s.replicas) + 1
    if d > g.u:
        us = [x for x in space.u_choices if x >= d]
        if not us:
            return None
        g = _with_u(space, g, us[0])
        s = g.stages[q]
    grp = _new_group(rng, space, s.tp, _free(space, g), s.replicas[-1][0])
    if grp is None:
        return None
    reps = (*s.replicas, grp)
    return _with_stage(g, q, replace(s, replicas=reps, shares=speed_shares(space, reps, g.u)))


def remove_replica(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """A random replica of a stage with several leaves (its GPUs become free)."""
    multi = [q for q, s in enumerate(g.stages) if len(s.replicas) > 1]
    if not multi:
        return None
    q = multi[int(rng.integers(len(multi)))]
    s = g.stages[q]
    r = int(rng.integers(len(s.replicas)))
    reps = s.replicas[:r] + s.replicas[r + 1:]
    shares = rescale_shares(s.shares[:r] + s.shares[r + 1:], g.u)
    return _with_stage(g, q, replace(s, replicas=reps, shares=shares))


def rebalance_shares(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """A stage's shares follow its replicas' speed, or one sample moves between two of its
    replicas."""
    multi = [q for q, s in enumerate(g.stages) if len(s.replicas) > 1]
    if not multi:
        return None
    q = multi[int(rng.integers(len(multi)))]
    s = g.stages[q]
    if rng.random() < 0.5:
        shares = speed_shares(space, s.replicas, g.u)
    else:
        a, b = (int(x) for x in rng.choice(len(s.replicas), size=2, replace=False))
        if s.shares[a] < 2:
            a, b = b, a
        if s.shares[a] < 2:
            return None
        lst = list(s.shares)
        lst[a] -= 1
        lst[b] += 1
        shares = tuple(lst)
    return _with_stage(g, q, replace(s, shares=shares))


def toggle_recompute(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """One stage switches recomputation (when the instance allows both)."""
    if len(space.rec_choices) < 2:
        return None
    q = int(rng.integers(g.q))
    s = g.stages[q]
    other = [c for c in space.rec_choices if c != s.rec]
    return _with_stage(g, q, replace(s, rec=other[int(rng.integers(len(other)))]))


def change_u(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """Another micro-batch size from the choices (stages keep at most u replicas)."""
    other = [u for u in space.u_choices if u != g.u]
    if not other:
        return None
    return _with_u(space, g, other[int(rng.integers(len(other)))])


def change_z(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """Another ZeRO stage from the choices."""
    other = [z for z in space.z_choices if z != g.z]
    if not other:
        return None
    return replace(g, z=other[int(rng.integers(len(other)))])


def split_stage(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """A stage of >= 2 layers becomes two consecutive stages: its replicas are divided
    between them, or its TP groups halved, or the second gets a new group of free GPUs."""
    cand = [q for q, s in enumerate(g.stages) if s.layers >= 2]
    if not cand:
        return None
    q = cand[int(rng.integers(len(cand)))]
    s = g.stages[q]
    c = int(rng.integers(1, s.layers))
    d = len(s.replicas)
    if d >= 2:
        k = d // 2
        a = _stage(c, s.tp, s.rec, s.replicas[:k], rescale_shares(s.shares[:k], g.u))
        b = _stage(s.layers - c, s.tp, s.rec, s.replicas[k:], rescale_shares(s.shares[k:], g.u))
    elif s.tp >= 2 and rng.random() < 0.5:
        h = s.tp // 2
        a = _stage(c, h, s.rec, [s.replicas[0][:h]], s.shares)
        b = _stage(s.layers - c, h, s.rec, [s.replicas[0][h:]], s.shares)
    else:
        grp = _new_group(rng, space, s.tp, _free(space, g), s.replicas[0][0])
        if grp is None:
            return None
        a = replace(s, layers=c)
        b = _stage(s.layers - c, s.tp, s.rec, [grp], s.shares)
    return replace(g, stages=(*g.stages[:q], a, b, *g.stages[q + 1:]))


def merge_stages(rng: np.random.Generator, space: HybridSpace, g: Genome) -> Genome | None:
    """Two adjacent stages become one: with the GPU groups of either (the other's become
    free), or, for equal tp, with the replicas of both (DP; u grows to the smallest
    choice that allows it), or, for equal tp and replica count with each replica pair on
    one site, with their TP groups joined (tp doubles)."""
    if g.q < 2:
        return None
    q = int(rng.integers(g.q - 1))
    a, b = g.stages[q], g.stages[q + 1]
    n = a.layers + b.layers
    options: list[tuple[Group, int]] = [(replace(a, layers=n), g.u), (replace(b, layers=n), g.u)]
    if a.tp == b.tp:
        d = len(a.replicas) + len(b.replicas)
        us = [x for x in space.u_choices if x >= d]
        if us:
            u = g.u if g.u >= d else us[0]
            reps = a.replicas + b.replicas
            options.append((_stage(n, a.tp, a.rec, reps, speed_shares(space, reps, u)), u))
        if (len(a.replicas) == len(b.replicas) and 2 * a.tp in space.tp_choices
                and all(space.site[x[0]] == space.site[y[0]]
                        for x, y in zip(a.replicas, b.replicas, strict=True))):
            reps = tuple(x + y for x, y in zip(a.replicas, b.replicas, strict=True))
            options.append((_stage(n, 2 * a.tp, a.rec, reps, a.shares), g.u))
    merged, u = options[int(rng.integers(len(options)))]
    out = g if u == g.u else _with_u(space, g, u)
    return replace(out, stages=(*out.stages[:q], merged, *out.stages[q + 2:]))


#: The mutation operators, drawn uniformly (one that cannot act is redrawn, see mutate).
MUTATIONS: tuple[Mutation, ...] = (
    boundary_shift, stage_swap, reassign_gpu, exchange_gpus, relocate_replica, change_tp,
    add_replica, remove_replica, rebalance_shares, toggle_recompute, change_u, change_z,
    split_stage, merge_stages,
)


def mutate(rng: np.random.Generator, space: HybridSpace, g: Genome, tries: int = 4
           ) -> Genome | None:
    """One operator drawn uniformly; one that cannot act (or changes nothing) is redrawn,
    up to ``tries`` draws."""
    for _ in range(tries):
        op = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
        out = op(rng, space, g)
        if out is not None and out != g:
            return out
    return None


# --------------------------------------------------------------------------- crossover


def _cut(g: Genome, at: int, prefix: bool) -> list[Group]:
    """The stages of g covering layers [0, at) (prefix) or [at, L), the cut stage truncated."""
    out = []
    lo = 0
    for s in g.stages:
        hi = lo + s.layers
        a, b = (lo, min(hi, at)) if prefix else (max(lo, at), hi)
        if b > a:
            out.append(s if b - a == s.layers else
                       Group(b - a, s.tp, s.rec, s.replicas, s.shares))
        lo = hi
    return out


def _repair(space: HybridSpace, head: list[Group], tail: list[Group], u: int
            ) -> list[Group] | None:
    """``tail`` made to fit after ``head``: shares rescaled to u (at most u replicas); a GPU
    already used is replaced by its nearest free GPU of the same site (any free GPU, lowest
    index, for a one-GPU group), a group that cannot be mended is dropped when its stage
    has others; None when a stage loses every group. Deterministic."""
    used = {x for s in head for x in s.gpus}
    tail_gpus = [x for s in tail for x in s.gpus]
    if (used.isdisjoint(tail_gpus) and len(set(tail_gpus)) == len(tail_gpus)
            and all(len(s.shares) <= u and sum(s.shares) == u for s in tail)):
        return tail  # nothing to mend (the common case of a cut between unrelated plans)
    out = []
    for s in tail:
        reps = []
        kept = []
        for rep, share in zip(s.replicas[:u], s.shares, strict=False):
            new = []
            for x in rep:
                if x not in used and x not in new:
                    new.append(x)
                    continue
                y = next((h for h in space.near[x] if h not in used and h not in new
                          and h not in rep), None)
                if y is None and s.tp == 1:
                    y = next((h for h in range(space.n) if h not in used), None)
                if y is None:
                    break
                new.append(y)
            if len(new) == s.tp:
                reps.append(tuple(new))
                kept.append(share)
                used.update(new)
        if not reps:
            return None
        out.append(_stage(s.layers, s.tp, s.rec, reps, rescale_shares(kept, u)))
    return out


def _bounds(g: Genome) -> set[int]:
    out = set()
    k = 0
    for s in g.stages[:-1]:
        k += s.layers
        out.add(k)
    return out


def crossover_cuts(rng: np.random.Generator, space: HybridSpace, p1: Genome, p2: Genome,
                   all_cuts: bool, max_cuts: int) -> list[int]:
    """The candidate cuts of a pair: the union of both parents' stage boundaries (every
    cut 1..L-1 when ``all_cuts``), at most ``max_cuts`` of them drawn uniformly (in
    ascending order)."""
    cuts = sorted(set(range(1, space.L)) if all_cuts else _bounds(p1) | _bounds(p2))
    if not cuts:
        cuts = list(range(1, space.L))  # two one-stage parents: cut anywhere
    if len(cuts) > max_cuts:
        pick = rng.choice(len(cuts), size=max_cuts, replace=False)
        cuts = [cuts[i] for i in sorted(pick.tolist())]
    return cuts


def crossover_children(space: HybridSpace, p1: Genome, p2: Genome, cuts: Sequence[int]
                       ) -> list[Genome]:
    """The children ``p1[:c] + p2[c:]`` for the layer indices c in ``cuts``, repaired by
    :func:`_repair`; u and z are the prefix parent's. The caller prices them all and keeps
    the best (GeoTrain's best cut, section 5.3)."""
    out = []
    for c in cuts:
        head = _cut(p1, c, True)
        tail = _repair(space, head, _cut(p2, c, False), p1.u)
        if tail is not None:
            out.append(Genome(tuple(head + tail), p1.u, p1.z))
    return out


# --------------------------------------------------------------------------- local search


@njit(cache=True)
def _descend(q, layers, tp, rec, rep0, samples, g0, gpus, u, z, rec_alt, zs, max_steps,
             tflops, lat_ms, bw_gbps, site, idle_w, dyn_w, mem_cap,
             n_layers, batch, max_tp, flop_ls, gamma, act_bytes, w_bytes, lm_bytes,
             alpha, logit_bytes, overhead_ms, mode, lam, t_ref_ms, e_ref_j):
    """Best-improvement descent over layer moves (2^k layers across a boundary, either way),
    one-sample share moves inside a stage, recompute toggles (``rec_alt``) and ZeRO choices
    ``zs``, each neighbour priced by the shared kernel. Edits the arrays in place; returns
    (objective, z, steps)."""

    def value(zz):
        st, _, _, o = kernel_price(
            q, layers, tp, rec, rep0, samples, g0, gpus, u, zz,
            tflops, lat_ms, bw_gbps, site, idle_w, dyn_w, mem_cap,
            n_layers, batch, max_tp, flop_ls, gamma, act_bytes, w_bytes, lm_bytes,
            alpha, logit_bytes, overhead_ms, mode, lam, t_ref_ms, e_ref_j)
        return o if st == FEASIBLE else np.inf

    cur = value(z)
    steps = 0
    while steps < max_steps:
        best = cur
        kind = -1
        ma = 0
        mb = 0
        mk = 0
        for b in range(q - 1):
            for way in range(2):
                a = b if way == 0 else b + 1
                c = b + 1 if way == 0 else b
                k = 1
                while k < layers[a]:
                    layers[a] -= k
                    layers[c] += k
                    v = value(z)
                    layers[a] += k
                    layers[c] -= k
                    if v < best:
                        best, kind, ma, mb, mk = v, 0, a, c, k
                    k *= 2
        for s in range(q):
            for ra in range(rep0[s], rep0[s + 1]):
                if samples[ra] < 2:
                    continue
                for rb in range(rep0[s], rep0[s + 1]):
                    if rb == ra:
                        continue
                    samples[ra] -= 1
                    samples[rb] += 1
                    v = value(z)
                    samples[ra] += 1
                    samples[rb] -= 1
                    if v < best:
                        best, kind, ma, mb, mk = v, 1, ra, rb, 1
        if rec_alt:
            for s in range(q):
                old = rec[s]
                rec[s] = 1 - old
                v = value(z)
                rec[s] = old
                if v < best:
                    best, kind, ma, mb, mk = v, 2, s, 0, 0
        for zz in zs:
            if zz != z:
                v = value(zz)
                if v < best:
                    best, kind, ma, mb, mk = v, 3, zz, 0, 0
        if kind < 0:
            break
        if kind == 0:
            layers[ma] -= mk
            layers[mb] += mk
        elif kind == 1:
            samples[ma] -= 1
            samples[mb] += 1
        elif kind == 2:
            rec[ma] = 1 - rec[ma]
        else:
            z = ma
        cur = best
        steps += 1
    return cur, z, steps


def local_search(space: HybridSpace, g: Genome, max_steps: int = 64) -> tuple[Genome, float]:
    """The descent of :func:`_descend` from ``g``: layers, shares, recompute and ZeRO for
    the current GPU groups (GPUs, tp, replica counts and u never change). Returns the
    improved genome and its objective (inf if g is infeasible: no feasible neighbour is
    known then, g comes back unchanged)."""
    p = pack([g])
    q, layers, tp, rec, rep0, samples, g0, gpus, u, z = p.plan(0)
    layers, rec, samples = layers.copy(), rec.copy(), samples.copy()
    rec_alt = len(space.rec_choices) > 1
    zs = np.array(space.z_choices, dtype=np.int64)
    with np.errstate(all="ignore"):
        obj, z2, steps = _descend(q, layers, tp, rec, rep0, samples, g0, gpus, u, z, rec_alt,
                                  zs, max_steps, *space.kernel_args, *space.weight_args)
    if steps == 0:
        return g, float(obj)
    stages = []
    r = 0
    for k, s in enumerate(g.stages):
        d = len(s.replicas)
        stages.append(replace(s, layers=int(layers[k]), rec=int(rec[k]),
                              shares=tuple(int(x) for x in samples[r:r + d])))
        r += d
    return Genome(tuple(stages), g.u, int(z2)), float(obj)
