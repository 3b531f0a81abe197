"""Split and share: the best layers, sample shares and recompute for a fixed group order.

The stages are fixed: stage q has a TP degree t_q and d_q replicas, each a TP group
of t_q GPUs in ring order (:class:`StageGroups`); so are u and the ZeRO stage. The
unknowns are the layer counts n_q (>= 1, sum L), the integer shares s_{q,r} (>= 1,
sum u in each stage) and rho_q in the instance's ``recompute_choices``.

Why the problem separates (hybrid-model.md): with the groups fixed, the objective
``a T + b E`` is ``A T + B_M sum_q n_q e_q`` with A = a + b sum P^idle / 1000 and
B_M = b M / 1000 (E's idle part is T times a constant), and

* tau_q = n_q g_q(s_q, rho_q) + k_q(s_{q-1}, s_q, s_{q+1}): the compute and TP terms
  of the kernel are linear in n (g is the per-layer max over replicas of c + p), and
  the boundary sends k depend on the shares of the two stages they join only;
* A_q(n_q) depends on n_q alone and does not decrease with it;
* the memory of a GPU is affine in n_q for fixed (s_q, rho_q): a cap m_q(s_q, rho_q).

Exact method. T = sum tau + (M - 1) max tau + max A. For caps Z on every tau_q and W
on every A_q, ``D(Z, W)`` = min sum_q [A tau_q + B_M n_q e_q] under those caps and
memory is a DP over stages with state (layers used, s_{q-1}, s_q): a transition picks
(n_q, rho_q, s_{q+1}), where tau_q is known; the best n_q for every state comes from a
sliding-window minimum (a monotone queue), so one DP costs O(Q L R S^3) for S share
vectors per stage (S = C(u-1, d-1)). Every plan feasible under (Z, W) costs at most
D(Z, W) + A (M - 1) Z + A W, and the optimum x* is feasible under its own
(Z*, W*) = (max tau*, max A*), where that bound is its objective; so it suffices to
visit caps from the candidate sets (every value n g_q + k_q of a stage, share triple,
rho and n; every A_q(n)) that can still hold a better plan. Both caps are lowered by
jumps: with h(W) = min over plans with every A_q <= W of (sum part + A (M - 1) max tau),
a plan whose max A is at least that of h(W)'s minimiser x* is no better than x*, so
the next W is the largest candidate below max A(x*); inside, a plan whose max tau is
at least that of D(Z, W)'s plan has no smaller sum part, so the next Z is the largest
candidate below that plan's max tau. h grows as W falls: the sweep stops once
h(W) + A min W reaches the incumbent, the inner one once D(Z, W) + A (M - 1) min Z
reaches h(W). The DP evaluates tau with the same floating-point expression as the
candidates, so the cap tests are exact; the returned plan is priced by the shared
kernel (:class:`geoplan.cost.hybrid_evaluate.HybridEvaluator`). Held to brute force
(every split, share vector and recompute) in tests/heuristics/test_hybrid_split.py.

Fast method (``exact=False``, a heuristic): the same exact sweep, but a stage with more
than :data:`FAST_ALL` share vectors starts from a few: for each recompute choice the
vector minimising its per-layer compute + TP time max_r (c_r + p_r) (a unit-by-unit
greedy fill, optimal for that min-max since each replica's time grows with its
share), the near-equal vector and the memory-proportional one. Then coordinate
descent: one such stage at a time (if it has at most :data:`FAST_STAGE` vectors) takes
all of its vectors while the others keep their current one, the sweep is rerun, and
rounds repeat while one improves. Exact for each stage's shares given the others'
and for the layers and recompute given all shares; not exact overall. Measured
against the exact method in docs/hybrid-heuristics.md.

Per-stage terms come from :mod:`geoplan.cost.hybrid_kernel` (replica_compute_ms,
replica_tp_ms, stage_boundary_ms, grad_sync_ms, replica_bytes); nothing is restated.
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from geoplan.cost import hybrid_kernel as hk
from geoplan.cost.hybrid_evaluate import HybridEvaluator
from geoplan.cost.kernel import FEASIBLE
from geoplan.model.hybrid import RECOMPUTE, HybridPlan, HybridStage, Replica
from geoplan.model.instance import Instance

__all__ = ["SplitOutcome", "StageGroups", "compositions", "evaluator_of", "solve_split",
           "split_and_share"]

_INF = np.inf
#: The fast method keeps every share vector of a stage that has at most this many.
FAST_ALL = 8
#: ... and lets one stage at a time take all of its vectors when it has at most this many.
FAST_STAGE = 64


@dataclass(frozen=True)
class StageGroups:
    """One stage's groups: its TP degree and its replicas (GPU indices in ring order)."""

    tp: int
    replicas: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class SplitOutcome:
    """The best plan for the fixed groups, its kernel price and the work done."""

    plan: HybridPlan
    objective: float
    t_iter_ms: float
    e_iter_j: float
    dps: int  # DP runs (cap pairs tried, bisection included)


_EVALUATORS: weakref.WeakKeyDictionary[Instance, HybridEvaluator] = weakref.WeakKeyDictionary()


def evaluator_of(instance: Instance) -> HybridEvaluator:
    """One :class:`HybridEvaluator` per instance (normalisers resolved once)."""
    ev = _EVALUATORS.get(instance)
    if ev is None:
        ev = _EVALUATORS[instance] = HybridEvaluator(instance)
    return ev


def compositions(u: int, d: int) -> list[tuple[int, ...]]:
    """Every vector of d integers >= 1 summing to u (lexicographic)."""
    if d < 1 or d > u:
        return []
    return [tuple(b - a for a, b in zip((0, *cut), (*cut, u), strict=True))
            for cut in itertools.combinations(range(1, u), d - 1)]


# --------------------------------------------------------------------------- DP kernels


@njit(cache=True)
def _stage_k(q, q_count, jp, j, jn, fwd, bwd, o):  # pragma: no cover - compiled
    """k_q = o + tau^bwd_q + tau^fwd_q (this summation order everywhere)."""
    k = o
    if q > 0:
        k += bwd[q - 1, jp, j]
    if q < q_count - 1:
        k += fwd[q, j, jn]
    return k


@njit(cache=True)
def _z_candidates(q_count, n_layers, ns, g, mc, fwd, bwd, o):  # pragma: no cover
    """Every finite n g_q + k_q a stage can have (unsorted, with repeats)."""
    top = n_layers - q_count + 1
    count = 0
    for q in range(q_count):
        njp = ns[q - 1] if q > 0 else 1
        njn = ns[q + 1] if q < q_count - 1 else 1
        for j in range(ns[q]):
            for r in range(g.shape[2]):
                count += njp * njn * min(mc[q, j, r], top)
    out = np.empty(count)
    m = 0
    for q in range(q_count):
        njp = ns[q - 1] if q > 0 else 1
        njn = ns[q + 1] if q < q_count - 1 else 1
        for jp in range(njp):
            for j in range(ns[q]):
                for jn in range(njn):
                    k = _stage_k(q, q_count, jp, j, jn, fwd, bwd, o)
                    for r in range(g.shape[2]):
                        gg = g[q, j, r]
                        for n in range(1, min(mc[q, j, r], top) + 1):
                            v = n * gg + k
                            if np.isfinite(v):
                                out[m] = v
                                m += 1
    return out[:m]


@njit(cache=True)
def _dp(q_count, n_layers, ns, g, w, mc, fwd, bwd, hi_a, z_cap, o, coef_a,
        val, ch_n, ch_r, ch_j, dq):  # pragma: no cover - compiled
    """D(Z, W): min sum_q [n_q w_q + A k_q] with every tau_q <= z_cap, n_q <= hi_a[q]
    (the W cap) and memory; fills the choice tables; returns (value, stage-0 share).

    For fixed (s_{q-1}, s_q, s_{q+1}, rho) the best n for each ``ell`` (layers used
    before stage q) is a minimum of m w + val[q+1, m] over a window of m = ell + n
    that slides with ``ell``: a monotone queue (``dq``) gives all of them in O(L).
    """
    n_rec = g.shape[2]
    capped = np.isfinite(z_cap)
    for q in range(q_count - 1, -1, -1):
        njp = ns[q - 1] if q > 0 else 1
        njn = ns[q + 1] if q < q_count - 1 else 1
        rest = q_count - 1 - q
        last = q == q_count - 1
        end = n_layers - rest  # the layers stages 0..q may use at most
        for jp in range(njp):
            for j in range(ns[q]):
                for ell in range(q, end):
                    val[q, ell, jp, j] = _INF
                    ch_n[q, ell, jp, j] = -1
                for jn in range(njn):
                    k = _stage_k(q, q_count, jp, j, jn, fwd, bwd, o)
                    if not np.isfinite(k):
                        continue
                    for r in range(n_rec):
                        cap = min(mc[q, j, r], hi_a[q], end - q)
                        gg = g[q, j, r]
                        if cap < 1 or not np.isfinite(gg):
                            continue
                        if capped:
                            x = (z_cap - k) / gg if gg > 0 else cap
                            nz = cap if x >= cap else (int(x) if x > 0 else 0)
                            while nz < cap and (nz + 1) * gg + k <= z_cap:
                                nz += 1
                            while nz >= 1 and nz * gg + k > z_cap:
                                nz -= 1
                            cap = nz
                            if cap < 1:
                                continue
                        ww = w[q, j, r]
                        fixed = coef_a * k
                        if last:
                            for ell in range(max(q, end - cap), end):
                                n = end - ell
                                v = n * ww + fixed
                                if v < val[q, ell, jp, j]:
                                    val[q, ell, jp, j] = v
                                    ch_n[q, ell, jp, j] = n
                                    ch_r[q, ell, jp, j] = r
                                    ch_j[q, ell, jp, j] = jn
                            continue
                        head = 0
                        tail = 0
                        nxt = q + 1  # next m to enter the window
                        for ell in range(q, end):
                            hi = min(ell + cap, end)
                            while nxt <= hi:
                                u_m = nxt * ww + val[q + 1, nxt, j, jn]
                                while tail > head and (
                                        dq[tail - 1] * ww + val[q + 1, dq[tail - 1], j, jn]
                                        >= u_m):
                                    tail -= 1
                                dq[tail] = nxt
                                tail += 1
                                nxt += 1
                            while tail > head and dq[head] < ell + 1:
                                head += 1
                            if tail == head:
                                continue
                            m = dq[head]
                            n = m - ell
                            v = n * ww + fixed + val[q + 1, m, j, jn]
                            if v < val[q, ell, jp, j]:
                                val[q, ell, jp, j] = v
                                ch_n[q, ell, jp, j] = n
                                ch_r[q, ell, jp, j] = r
                                ch_j[q, ell, jp, j] = jn
    best = _INF
    j0 = -1
    for j in range(ns[0]):
        if val[0, 0, 0, j] < best:
            best = val[0, 0, 0, j]
            j0 = j
    return best, j0


# --------------------------------------------------------------------------- preparation


@dataclass
class _Terms:
    """The per-stage terms of one (groups, u, zero) problem, padded to S share vectors."""

    shares: list[list[tuple[int, ...]]]
    ns: np.ndarray  # (Q,)
    g: np.ndarray  # (Q, S, R) per-layer tau^comp, ms
    w: np.ndarray  # (Q, S, R) per-layer objective: A g + B_M e
    mc: np.ndarray  # (Q, S, R) most layers memory allows (0: none, or rho not offered)
    fwd: np.ndarray  # (max(Q-1,1), S, S) tau^fwd_q
    bwd: np.ndarray  # (max(Q-1,1), S, S) tau^bwd_{q+1}
    sync: np.ndarray  # (Q, L+1) A_q(n)
    coef_a: float
    micro_batches: int


def _stage_arrays(st: StageGroups) -> tuple[np.ndarray, np.ndarray]:
    gpus = np.array([x for r in st.replicas for x in r], dtype=np.int64)
    g0 = np.arange(0, len(gpus) + 1, st.tp, dtype=np.int64)
    return gpus, g0


def _per_layer(ev: HybridEvaluator, st: StageGroups, shares: tuple[int, ...], rec: int
               ) -> tuple[float, float]:
    """(max_r (c_r + p_r), sum_r dyn_r c_r) for one layer, by the kernel's functions."""
    c = ev.coefficients
    gpus, g0 = _stage_arrays(st)
    f = hk.compute_factor(rec, c.gamma)
    worst = dyn = 0.0
    for r, s in enumerate(shares):
        members = list(st.replicas[r])
        cm = hk.replica_compute_ms(1, st.tp, s, f, float(c.tflops[members].min()), c.flop_ls)
        tp = hk.replica_tp_ms(gpus, int(g0[r]), st.tp, 1, s, rec, c.act_bytes, c.lat_ms,
                              c.bw_gbps)
        worst = max(worst, cm + tp)
        dyn += float(c.dyn_w[members].sum()) * cm
    return worst, dyn


def _memory_cap(ev: HybridEvaluator, st: StageGroups, shares: tuple[int, ...], rec: int,
                zero: int, q_count: int, last: bool, n_layers: int, d: int | None = None) -> int:
    """The most layers (<= L) every GPU of the stage can hold; 0 if not one. ``d``: the
    stage's replica count when ``st`` lists only some of its replicas."""
    c = ev.coefficients
    d = len(st.replicas) if d is None else d
    best = n_layers
    for r, s in enumerate(shares):
        limit = float(c.mem_cap[list(st.replicas[r])].min())

        def mem(n: int, s: int = s) -> float:
            return float(hk.replica_bytes(n, st.tp, d, zero, rec, s, q_count, last, c.w_bytes,
                                          c.lm_bytes, c.alpha, c.act_bytes, c.logit_bytes))

        m0, slope = mem(0), mem(1) - mem(0)
        n = n_layers if slope <= 0 else int(max(0.0, min(n_layers, (limit - m0) / slope)))
        while n < best and mem(n + 1) <= limit:  # repair the division with the exact test
            n += 1
        while n > 0 and mem(n) > limit:
            n -= 1
        best = min(best, n)
    return best


def _greedy_shares(ev: HybridEvaluator, st: StageGroups, u: int, rec: int) -> tuple[int, ...]:
    """Unit-by-unit fill minimising max_r (c_r + p_r) per layer (ties: lowest r)."""
    d = len(st.replicas)
    s = [1] * d

    def time_of(r: int, k: int) -> float:
        one = StageGroups(st.tp, (st.replicas[r],))
        return _per_layer(ev, one, (k,), rec)[0]

    cur = [time_of(r, 1) for r in range(d)]
    for _ in range(u - d):
        nxt = [time_of(r, s[r] + 1) for r in range(d)]
        r = min(range(d), key=lambda r: (nxt[r], r))
        s[r] += 1
        cur[r] = nxt[r]
    return tuple(s)


def _near_equal(u: int, d: int) -> tuple[int, ...]:
    return tuple(u // d + (1 if r < u % d else 0) for r in range(d))


def _memory_shares(ev: HybridEvaluator, st: StageGroups, u: int) -> tuple[int, ...]:
    """Shares in proportion to each replica's smallest memory (>= 1, largest remainder)."""
    cap = np.array([float(ev.coefficients.mem_cap[list(r)].min()) for r in st.replicas])
    d = len(cap)
    share = cap / cap.sum() * (u - d)
    n = np.floor(share).astype(np.int64)
    order = np.lexsort((np.arange(d), -(share - n)))
    n[order[:u - d - int(n.sum())]] += 1
    return tuple(int(x) + 1 for x in n)


def _check(instance: Instance, stages: Sequence[StageGroups], u: int, zero: int) -> None:
    t = instance.training
    if not stages:
        raise ValueError("no stages")
    if u < 1 or t.batch_size % u:
        raise ValueError(f"micro-batch size {u} does not divide the batch {t.batch_size}")
    if zero not in (0, 1, 2):
        raise ValueError(f"zero must be 0, 1 or 2, not {zero}")
    seen: set[int] = set()
    site = evaluator_of(instance).coefficients.site
    for q, st in enumerate(stages):
        if st.tp < 1 or st.tp & (st.tp - 1) or st.tp > t.max_tp:
            raise ValueError(f"stage {q}: tp {st.tp} is not a power of two <= {t.max_tp}")
        if not st.replicas:
            raise ValueError(f"stage {q}: no replicas")
        for r in st.replicas:
            if len(r) != st.tp:
                raise ValueError(f"stage {q}: a replica of {len(r)} GPUs with tp {st.tp}")
            if len({int(site[x]) for x in r}) > 1:
                raise ValueError(f"stage {q}: a TP group spans sites")
            if seen & set(r) or len(set(r)) != len(r):
                raise ValueError(f"stage {q}: a GPU appears twice")
            seen |= set(r)


def _candidate_shares(ev: HybridEvaluator, stages: Sequence[StageGroups], u: int,
                      exact: bool) -> list[list[tuple[int, ...]]] | None:
    """The share vectors each stage may take (module docstring); None if some d > u."""
    choices = ev.instance.training.recompute_choices or RECOMPUTE
    shares: list[list[tuple[int, ...]]] = []
    for st in stages:
        d = len(st.replicas)
        if d > u:
            return None
        if exact or math.comb(u - 1, d - 1) <= FAST_ALL:
            shares.append(compositions(u, d))
        else:
            cand = [_greedy_shares(ev, st, u, r) for r, name in enumerate(RECOMPUTE)
                    if name in choices]
            cand += [_near_equal(u, d), _memory_shares(ev, st, u)]
            shares.append(sorted(set(cand)))
    return shares


def _prepare(instance: Instance, stages: Sequence[StageGroups], u: int, zero: int,
             shares: list[list[tuple[int, ...]]]) -> _Terms:
    ev = evaluator_of(instance)
    c = ev.coefficients
    tr = ev.instance.training
    q_count, n_layers = len(stages), c.n_layers
    choices = tr.recompute_choices or RECOMPUTE
    offered = [r in choices for r in RECOMPUTE]
    n_rec = len(RECOMPUTE)
    s_max = max(len(v) for v in shares)
    wt = ev.weights
    idle = float(sum(c.idle_w[x] for st in stages for r in st.replicas for x in r))
    micro_batches = c.batch // u
    coef_a = wt.a + wt.b * idle / 1e3
    coef_e = wt.b * micro_batches / 1e3
    g = np.full((q_count, s_max, n_rec), _INF)
    w = np.full((q_count, s_max, n_rec), _INF)
    mc = np.zeros((q_count, s_max, n_rec), dtype=np.int64)
    for q, st in enumerate(stages):
        last = q == q_count - 1
        for j, s in enumerate(shares[q]):
            for r in range(n_rec):
                if not offered[r]:
                    continue
                g[q, j, r], dyn = _per_layer(ev, st, s, r)
                w[q, j, r] = coef_a * g[q, j, r] + coef_e * dyn
                mc[q, j, r] = _memory_cap(ev, st, s, r, zero, q_count, last, n_layers)
    nb = max(q_count - 1, 1)
    fwd = np.zeros((nb, s_max, s_max))
    bwd = np.zeros((nb, s_max, s_max))
    for q in range(q_count - 1):
        pair = (stages[q], stages[q + 1])
        gpus = np.concatenate([_stage_arrays(p)[0] for p in pair])
        d0, d1 = len(pair[0].replicas), len(pair[1].replicas)
        rep0 = np.array([0, d0, d0 + d1], dtype=np.int64)
        g0 = np.concatenate([np.arange(0, len(gpus), pair[0].tp)[:d0],
                             d0 * pair[0].tp + np.arange(0, d1 * pair[1].tp + 1, pair[1].tp)])
        g0 = g0.astype(np.int64)
        for j, sa in enumerate(shares[q]):
            for jn, sb in enumerate(shares[q + 1]):
                smp = np.array(sa + sb, dtype=np.int64)
                fwd[q, j, jn], bwd[q, j, jn] = hk.stage_boundary_ms(
                    0, rep0, smp, g0, gpus, c.act_bytes, c.lat_ms, c.bw_gbps)
    sync = np.zeros((q_count, n_layers + 1))
    for q, st in enumerate(stages):
        gpus, g0 = _stage_arrays(st)
        d = len(st.replicas)
        for n in range(n_layers + 1):
            sync[q, n] = hk.grad_sync_ms(n, st.tp, 0, d, q == q_count - 1, g0, gpus,
                                         c.w_bytes, c.lm_bytes, c.lat_ms, c.bw_gbps)
    return _Terms(shares, np.array([len(v) for v in shares], dtype=np.int64), g, w, mc, fwd,
                  bwd, sync, coef_a, micro_batches)


# --------------------------------------------------------------------------- the sweep


def _sweep(ev: HybridEvaluator, terms: _Terms, q_count: int
           ) -> tuple[float, tuple[list[int], list[int], list[int]] | None, int]:
    """The exact cap sweep over ``terms``: (objective, (n, rho, share index) per stage,
    DP runs); (inf, None, runs) when nothing fits."""
    n_layers = ev.coefficients.n_layers
    ns, g, w, mc, fwd, bwd = terms.ns, terms.g, terms.w, terms.mc, terms.fwd, terms.bwd
    o = float(ev.coefficients.overhead_ms)
    a = terms.coef_a
    slope_z = a * (terms.micro_batches - 1)
    s_max = g.shape[1]
    shape = (q_count + 1, n_layers + 1, s_max, s_max)
    val = np.full(shape, _INF)
    ch_n = np.full(shape, -1, dtype=np.int64)
    ch_r = np.full(shape, -1, dtype=np.int64)
    ch_j = np.full(shape, -1, dtype=np.int64)
    top = n_layers - q_count + 1
    usable = terms.sync[:, 1:top + 1]
    runs = 0

    def hi_of(w_cap: float) -> np.ndarray:
        # sync[q] does not decrease in n: the count of n in 1..top with A_q(n) <= W.
        return np.array([int(np.searchsorted(terms.sync[q, 1:top + 1], w_cap, side="right"))
                         for q in range(q_count)], dtype=np.int64)

    dq = np.empty(n_layers + 2, dtype=np.int64)

    def run(z_cap: float, hi: np.ndarray) -> tuple[float, int]:
        nonlocal runs
        runs += 1
        v, j0 = _dp(q_count, n_layers, ns, g, w, mc, fwd, bwd, hi, z_cap, o, a, val, ch_n,
                    ch_r, ch_j, dq)
        return float(v), int(j0)

    def walk(j0: int) -> tuple[tuple[list[int], list[int], list[int]], float, float, float]:
        """Follow the choices: ((n, rho, share index) per stage, sum part, max tau, max A)."""
        ell, jp, j = 0, 0, j0
        n_, r_, j_ = [], [], []
        for q in range(q_count):
            n, r, jn = (int(x[q, ell, jp, j]) for x in (ch_n, ch_r, ch_j))
            n_.append(n)
            r_.append(r)
            j_.append(j)
            ell, jp, j = ell + n, j, jn
        ks = [_stage_k(q, q_count, j_[q - 1] if q else 0, j_[q],
                       j_[q + 1] if q < q_count - 1 else 0, fwd, bwd, o)
              for q in range(q_count)]
        taus = [n_[q] * g[q, j_[q], r_[q]] + ks[q] for q in range(q_count)]
        lin = sum(n_[q] * w[q, j_[q], r_[q]] + a * ks[q] for q in range(q_count))
        sync = max(terms.sync[q, n_[q]] for q in range(q_count))
        return (n_, r_, j_), float(lin), float(max(taus)), float(sync)

    # Candidate caps: every value a tau_q / an A_q can take (module docstring).
    w_cands = np.unique(usable[np.isfinite(usable)]) if a > 0 else np.array([_INF])
    if slope_z > 0:
        z_cands = np.unique(_z_candidates(q_count, n_layers, ns, g, mc, fwd, bwd, o))
    else:
        z_cands = np.array([_INF])
    if len(z_cands) == 0 or len(w_cands) == 0:
        return _INF, None, runs
    z_low = slope_z * z_cands[0] if math.isfinite(z_cands[0]) else 0.0
    w_low = a * w_cands[0] if math.isfinite(w_cands[0]) else 0.0
    best = _INF
    best_sol: tuple[list[int], list[int], list[int]] | None = None
    hi = np.full(q_count, top, dtype=np.int64)
    # Outer sweep over W, inner over Z, both descending by jumps: h(W) = min over plans
    # with every A_q <= W of (sum part + A (M - 1) max tau). A plan y with
    # max A(y) >= max A(x*) (x* the minimiser of h(W)) is no better than x*, so the next
    # W is the largest candidate below max A(x*); likewise inside, a plan whose max tau is
    # at least that of the DP's plan x at cap Z has a sum part >= x's, so the next Z is
    # the largest candidate below max tau(x). h only grows as W falls, so the sweep
    # stops once h(W) + A min W cannot beat the incumbent; the inner stops once
    # D(Z, W) + A (M - 1) min Z cannot beat h(W).
    while True:
        h = _INF
        h_w = _INF
        z_cap = _INF
        while True:
            v, j0 = run(z_cap, hi)
            if not math.isfinite(v):
                break
            sol, lin, zx, wx = walk(j0)
            val_h = lin + slope_z * zx
            if val_h < h:
                h, h_w = val_h, wx
            if val_h + a * wx < best:
                best, best_sol = val_h + a * wx, sol
            i = int(np.searchsorted(z_cands, zx, side="left")) - 1
            if slope_z <= 0 or i < 0 or v + z_low >= h:
                break
            z_cap = float(z_cands[i])
        if not math.isfinite(h) or a <= 0 or h + w_low >= best:
            break
        i = int(np.searchsorted(w_cands, h_w, side="left")) - 1
        if i < 0:
            break
        hi = hi_of(float(w_cands[i]))
        if (hi < 1).any():
            break  # a smaller W leaves that stage no layer count either
    return best, best_sol, runs


def solve_split(instance: Instance, stages: Sequence[StageGroups], u: int, zero: int, *,
                exact: bool = True) -> SplitOutcome | None:
    """The best (layers, shares, recompute) for the fixed groups (module docstring);
    None when no choice fits memory (or a link is missing). Structural errors (tp not a
    power of two, a replica of the wrong size, a TP group across sites, a GPU twice,
    u not dividing the batch) raise ValueError."""
    _check(instance, stages, u, zero)
    q_count = len(stages)
    ev = evaluator_of(instance)
    if q_count > ev.coefficients.n_layers:
        return None
    shares = _candidate_shares(ev, stages, u, exact)
    if shares is None:
        return None
    best, sol, runs = _sweep(ev, _prepare(instance, stages, u, zero, shares), q_count)
    if not exact and sol is not None:
        # Coordinate descent: one stage at a time takes every share vector (when it has
        # at most FAST_STAGE), the others keep theirs; repeat while a round improves.
        current = [shares[q][j] for q, j in enumerate(sol[2])]
        wide = [q for q, st in enumerate(stages)
                if FAST_ALL < math.comb(u - 1, len(st.replicas) - 1) <= FAST_STAGE]
        improved = True
        while improved:
            improved = False
            for q in wide:
                trial = [[v] for v in current]
                trial[q] = compositions(u, len(stages[q].replicas))
                got, got_sol, k = _sweep(ev, _prepare(instance, stages, u, zero, trial),
                                         q_count)
                runs += k
                if got_sol is not None and got < best * (1 - 1e-12):
                    best, sol, shares = got, got_sol, trial
                    current = [shares[p][j] for p, j in enumerate(sol[2])]
                    improved = True
    if sol is None:
        return None
    n_, r_, j_ = sol
    ids = ev.instance.gpu_ids
    plan = HybridPlan(
        tuple(HybridStage(n_[q], st.tp,
                          tuple(Replica(tuple(ids[x] for x in rep), shares[q][j_[q]][k])
                                for k, rep in enumerate(st.replicas)),
                          RECOMPUTE[r_[q]])
              for q, st in enumerate(stages)),
        u, zero)
    status, t_iter, e_iter, obj = ev.price(plan)
    if status != FEASIBLE:
        return None
    return SplitOutcome(plan, obj, t_iter, e_iter, runs)


def split_and_share(instance: Instance, stages: Sequence[StageGroups], u: int, zero: int, *,
                    exact: bool = True) -> HybridPlan | None:
    """The plan of :func:`solve_split` (None when no split fits memory)."""
    got = solve_split(instance, stages, u, zero, exact=exact)
    return None if got is None else got.plan
