"""An exact-on-nodes bound for the plans that stay on one site whose GPUs come in nodes.

Notation of :mod:`geoplan.cost.parametric`: ``T = S + (M - 1) Z``, ``E = T P / 1000 +
M D / 1000``, objective ``a T + b E``.

**Node prices.** The site's GPUs are parted into nodes (:func:`bounds.node_groups`). Each
node ``v`` gets the best of its GPUs' figures: per-layer time ``c_v``, memory caps, idle
power and active energy per layer (least; caps largest), the cheapest send to another GPU
of the node ``a_v`` and to a GPU of another node of the site ``r_v``, with ``a_v <= r_v``
(``a_v`` is taken as the least of the two). Priced so (a send by its sender's node and
whether it leaves the node), no stage of a plan costs more than it does, so a plan's
relaxed ``S``, bottleneck ``Z_r``, ``P`` and ``D`` are at most its own.

**One run per node.** A *run* is a maximal stretch of consecutive stages on one node.
Under node prices every plan on the site has a plan of no higher relaxed ``S`` and
``Z_r``, the same stages, GPUs and layers (so the same ``Q``, memory, ``P``, ``D``), in
which each node holds one run, or two: the first run of the plan and its last. Proof:
take a node with runs ``R1`` before ``R2`` and the plan ``A R1 B R2 C`` (``B`` not
empty). If ``C`` is not empty, move ``R2`` right after ``R1``: R1's send forward and
R2's send back become in-node (``a_v <= r_v``); R2's send forward still leaves its node
(to ``B``), ``B``'s last stage sends to ``C`` instead of ``R2`` (the same price, or
``a``), ``B``'s first and ``C``'s first stage still receive from another node (or, for
``C``, perhaps from its own). Every send's price stays or falls and no stage gains a
send. If ``C`` is empty and ``A`` is not, move ``R1`` right before ``R2`` (the mirror
image). Each move lowers the number of runs, so they end, with at most two runs on a
node, and two only for the runs that hold the first and the last stage.

So the plans map into *run configurations*: per node nothing, an S..X run (sends back
and forward leave the node), an F..X run (holding the first stage), an S..L run (the
last stage), both F..X and S..L, or an F..L run (the whole plan on the node); exactly one
F and one L in all. A run of ``k`` GPUs holding ``m`` layers costs ``m c_v + k o`` plus
its sends (``2 (k - 1) a_v`` inside, ``r_v`` per end that leaves the node); its GPUs are
interchangeable under node prices, so it exists iff ``k <= m <= `` the sum of its GPUs'
layer caps (per role: the stage time cap and the memory cap, the last stage's own).

**The DP.** Over nodes, with state (layers placed, stages placed, which of F and L are
placed): exact in the stage count (no multiplier), each transition a sliding-window
minimum over the layers (a run's cost is linear in ``m``). For a cap ``z`` on every
stage time it gives, per stage count, the least ``S`` (or any weighted sum of ``S``,
``P`` and ``D``) over the run configurations.

**Boxes.** As in :mod:`geoplan.cost.parametric`: ``Q in [qa, qb]`` by ``Z_r in [za, zb]``,
best-first, ``T >= S + (M - 1) za``; but ``Z_r`` takes only the values ``n c_v + o +``
(a role's sends), a finite set, so a box's ends snap to those values and a box of one
value with one memory-cap row is final: its bound is the relaxation's exact minimum
there (at ``b = 0``). With energy (``b > 0``) the McCormick product of
:mod:`geoplan.cost.parametric` joins ``X = S + (M - 1) za`` and ``P``.

Under uniform links (one link price inside each node, one between the nodes of the
site, as in the ``cloud`` generator) node prices are the plans' own prices and the
relaxed minimiser of a final box is a plan (:func:`run_plan`).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit

from geoplan.cost import bounds
from geoplan.cost.coefficients import Coefficients
from geoplan.cost.weights import ObjectiveWeights

__all__ = ["NodeRunResult", "NodeTables", "node_run_bound", "node_tables", "run_plan",
           "warm_up"]

_INF = math.inf
_CAP_TOL = 1e-12
# Run kinds (the roles of its end stages): both ends leave the node, F..X, S..L, F..L.
SX, FX, SL, FL = 0, 1, 2, 3
#: Sends of the end stages per run kind, as (in-node sends, sends leaving the node) of
#: (the run's first stage, its last stage) when it has two or more GPUs, and of its one
#: GPU otherwise; middles always make two in-node sends.
_ENDS = {SX: ((1, 1), (1, 1), (0, 2)), FX: ((1, 0), (1, 1), (0, 1)),
         SL: ((1, 1), (1, 0), (0, 1)), FL: ((1, 0), (1, 0), (0, 0))}


@dataclass(frozen=True)
class NodeTables:
    """A site's nodes under node prices (module docstring), for :func:`node_run_bound`."""

    members: tuple[np.ndarray, ...]  #: GPU indices per node (of the pool given)
    size: np.ndarray  #: GPUs per node
    comp: np.ndarray  #: per-layer time (ms)
    intra: np.ndarray  #: a_v: a send to another GPU of the node (ms)
    inter: np.ndarray  #: r_v: a send to a GPU of another node (ms; inf: no other node)
    idle: np.ndarray  #: idle power (W)
    dync: np.ndarray  #: active energy per layer: (active - idle) power times comp
    mid: np.ndarray  #: layer caps per stage count (rows) and node, a stage not last
    last: np.ndarray  #: and the last stage
    overhead: float
    z_values: np.ndarray  #: every relaxed stage time, sorted
    #: Every node's GPUs are alike under node prices (times, caps, powers and their own
    #: cheapest sends): the relaxation then loses nothing by pricing a node as one GPU.
    uniform: bool


def node_tables(c: Coefficients, layers: int, groups: np.ndarray) -> NodeTables:
    """The :class:`NodeTables` of a pool (one site) with node labels ``groups``."""
    L = int(layers)
    comm = np.asarray(c.comm_ms, np.float64)
    both = np.isfinite(comm) & np.isfinite(comm.T)
    np.fill_diagonal(both, False)
    g = np.asarray(groups, np.int64)
    labels = np.unique(g)
    members = tuple(np.nonzero(g == k)[0] for k in labels)
    q_max = min(c.n, L)
    mid_g, last_g = bounds.layer_cap_table(c, L, q_max)
    comp = np.asarray(c.comp_ms, np.float64)
    n_v = len(members)
    g_in, g_out = np.full(c.n, _INF), np.full(c.n, _INF)  # per GPU, as intra and inter
    for mem in members:
        inside = np.zeros(c.n, np.bool_)
        inside[mem] = True
        for x in mem:
            d_in = comm[x, both[x] & inside]
            d_out = comm[x, both[x] & ~inside]
            g_in[x] = float(d_in.min()) if d_in.size else _INF
            g_out[x] = float(d_out.min()) if d_out.size else _INF
    g_in = np.minimum(g_in, g_out)
    intra = np.array([g_in[m].min() for m in members])
    inter = np.array([g_out[m].min() for m in members])
    dyn_c = np.asarray(c.dyn_w) * comp
    idle = np.asarray(c.idle_w, np.float64)

    def alike(x: np.ndarray) -> bool:
        return all(bool(np.all(x[..., m] == x[..., m[:1]])) for m in members)

    uniform = (alike(comp) and alike(idle) and alike(dyn_c) and alike(mid_g)
               and alike(last_g) and all(
                   bool(np.all(g_in[m] == g_in[m[0]]) and np.all(g_out[m] == g_out[m[0]]))
                   for m in members))
    node_comp = np.array([comp[m].min() for m in members])
    n = np.arange(1, L + 1, dtype=np.float64)
    # Every relaxed stage time: n layers on a node with the sends of some role.
    z = np.unique(np.concatenate([
        n * node_comp[v] + s + float(c.overhead_ms) for v in range(n_v)
        for s in (0.0, intra[v], inter[v], 2 * intra[v], intra[v] + inter[v], 2 * inter[v])
        if math.isfinite(s)]))
    return NodeTables(
        members=members,
        size=np.array([m.size for m in members], np.int64),
        comp=node_comp,
        intra=intra,
        inter=inter,
        idle=np.array([idle[m].min() for m in members]),
        dync=np.array([dyn_c[m].min() for m in members]),
        mid=np.stack([mid_g[:, m].max(axis=1) for m in members], axis=1),
        last=np.stack([last_g[:, m].max(axis=1) for m in members], axis=1),
        overhead=float(c.overhead_ms),
        z_values=z,
        uniform=uniform,
    )


@njit(cache=True)
def _cap(mem, sends, c, o, z, L):  # pragma: no cover - compiled
    """Most layers a stage of per-layer time ``c`` with ``sends`` holds within ``z``."""
    room = z * (1.0 + _CAP_TOL) - sends - o
    if room < c:
        return 0
    cap = int(room // c) if c > 0 else L
    while cap > 1 and cap * c + sends + o > z * (1.0 + _CAP_TOL):
        cap -= 1
    return min(cap, mem, L)


@njit(cache=True)
def _run(kind, k, c, a, r, o, capmid, caplast, z, L, ends):  # pragma: no cover - compiled
    """(sends of a run of ``k`` GPUs, the most layers it holds; 0: none) for ``kind``."""
    if k == 1:
        ia, ir = ends[kind, 2, 0], ends[kind, 2, 1]
        s = ia * a + ir * r
        return s, _cap(caplast if kind >= 2 else capmid, s, c, o, z, L)
    fa, fr = ends[kind, 0, 0], ends[kind, 0, 1]
    la, lr = ends[kind, 1, 0], ends[kind, 1, 1]
    s_first, s_last = fa * a + fr * r, la * a + lr * r
    h_first = _cap(capmid, s_first, c, o, z, L)
    h_last = _cap(caplast if kind >= 2 else capmid, s_last, c, o, z, L)
    if h_first < 1 or h_last < 1:
        return 0.0, 0
    total = h_first + h_last
    if k > 2:
        h_mid = _cap(capmid, 2 * a, c, o, z, L)
        if h_mid < 1:
            return 0.0, 0
        total += (k - 2) * h_mid
    return s_first + s_last + 2 * a * (k - 2), min(total, L)


@njit(cache=True)
def _window(src, srcp, lo, hi_l, dst, dstp, k, hi, slope, const, addp, L,
            q_lim):  # pragma: no cover - compiled
    """dst[l + m, q + k] = min(.., src[l, q] + slope m + const) for m in [k, hi];
    ``lo``/``hi_l``: per column q the first and last finite row of ``src`` (-1: none).
    ``dstp`` follows ``dst``'s minimiser: ``srcp`` of the state it came from + ``addp``."""
    if hi < k:
        return
    buf_i = np.empty(L + 1, np.int64)
    buf_v = np.empty(L + 1)
    for q in range(0, q_lim - k + 1):
        first = lo[q]
        if first < 0:
            continue
        last = hi_l[q]
        # Sliding minimum of src[l, q] - slope l over l in [l' - hi, l' - k].
        head, tail = 0, 0
        nxt = first
        for lp in range(first + k, min(L, last + hi) + 1):
            top = min(lp - k, last)
            while nxt <= top:
                x = src[nxt, q]
                if x < np.inf:
                    val = x - slope * nxt
                    while tail > head and buf_v[tail - 1] >= val:
                        tail -= 1
                    buf_i[tail] = nxt
                    buf_v[tail] = val
                    tail += 1
                nxt += 1
            low = lp - hi
            while tail > head and buf_i[head] < low:
                head += 1
            if tail > head:
                cand = buf_v[head] + slope * lp + const
                if cand < dst[lp, q + k]:
                    dst[lp, q + k] = cand
                    dstp[lp, q + k] = srcp[buf_i[head], q] + addp


@njit(cache=True)
def _ranges(src, lo, hi_l):  # pragma: no cover - compiled
    """Per column of ``src`` its first and last finite row (-1 where none)."""
    n_l, n_q = src.shape
    for q in range(n_q):
        lo[q] = -1
        hi_l[q] = -1
        for row in range(n_l):
            if src[row, q] < np.inf:
                if lo[q] < 0:
                    lo[q] = row
                hi_l[q] = row


@njit(cache=True)
def _node_dp(L, q_max, size, comp, intra, inter, idle, dync, capmid, caplast, z, o,
             ws, wp, wd, ends, keep, q_lim):  # pragma: no cover - compiled
    """Per stage count, the least ``ws S + wp P + wd D`` over the run configurations
    (module docstring) with every relaxed stage time at most ``z``, and the idle power
    of a configuration that attains it. ``keep``: also return the state table after each
    node (for :func:`_traceback`). Stage counts above ``q_lim`` are not followed."""
    n_v = size.size
    V = np.full((4, L + 1, q_max + 1), np.inf)
    V[0, 0, 0] = 0.0
    VP = np.zeros((4, L + 1, q_max + 1))
    tmpp = np.zeros((L + 1, q_max + 1))
    bestp = np.zeros(q_max + 1)
    hist = np.full((n_v + 1 if keep else 1, 4, L + 1, q_max + 1), np.inf)
    if keep:
        hist[0] = V
    best = np.full(q_max + 1, np.inf)
    tmp = np.full((L + 1, q_max + 1), np.inf)
    lo = np.empty((4, q_max + 1), np.int64)
    hi_l = np.empty((4, q_max + 1), np.int64)
    tlo = np.empty(q_max + 1, np.int64)
    thi = np.empty(q_max + 1, np.int64)
    for v in range(n_v):
        c, a, r = comp[v], intra[v], inter[v]
        slope = ws * c + wd * dync[v]
        kmax = min(size[v], q_max)
        W = V.copy()
        WP = VP.copy()
        for f in range(4):
            _ranges(V[f], lo[f], hi_l[f])
        for k in range(1, kmax + 1):
            per = ws * o + wp * idle[v]
            # The whole plan on this node: an F..L run of all L layers.
            s, hi = _run(3, k, c, a, r, o, capmid[v], caplast[v], z, L, ends)
            if hi >= L >= k and k <= q_lim:
                val = slope * L + ws * s + per * k
                if val < best[k]:
                    best[k] = val
                    bestp[k] = k * idle[v]
            if not np.isfinite(r):
                continue
            for kind in range(3):
                s, hi = _run(kind, k, c, a, r, o, capmid[v], caplast[v], z, L, ends)
                if hi < k:
                    continue
                const = ws * s + per * k
                for f in range(4):
                    if kind == 1 and f & 1:
                        continue
                    if kind == 2 and f & 2:
                        continue
                    g = f | (1 if kind == 1 else 0) | (2 if kind == 2 else 0)
                    _window(V[f], VP[f], lo[f], hi_l[f], W[g], WP[g], k, hi, slope, const,
                            k * idle[v], L, q_lim)
        # F..X and S..L on this node (the plan's first and last runs), k1 + k2 GPUs.
        if np.isfinite(r):
            per = ws * o + wp * idle[v]
            for k1 in range(1, kmax):
                s1, hi1 = _run(1, k1, c, a, r, o, capmid[v], caplast[v], z, L, ends)
                if hi1 < k1:
                    continue
                tmp[:, :] = np.inf
                _window(V[0], VP[0], lo[0], hi_l[0], tmp, tmpp, k1, hi1, slope,
                        ws * s1 + per * k1, k1 * idle[v], L, q_lim)
                _ranges(tmp, tlo, thi)
                for k2 in range(1, kmax - k1 + 1):
                    s2, hi2 = _run(2, k2, c, a, r, o, capmid[v], caplast[v], z, L, ends)
                    if hi2 < k2:
                        continue
                    _window(tmp, tmpp, tlo, thi, W[3], WP[3], k2, hi2, slope,
                            ws * s2 + per * k2, k2 * idle[v], L, q_lim)
        V = W
        VP = WP
        if keep:
            hist[v + 1] = V
    for q in range(q_max + 1):
        if V[3, L, q] < best[q]:
            best[q] = V[3, L, q]
            bestp[q] = VP[3, L, q]
    return best, bestp, hist


def _ends_array() -> np.ndarray:
    out = np.zeros((4, 3, 2), np.int64)
    for kind, rows in _ENDS.items():
        for i, (ia, ir) in enumerate(rows):
            out[kind, i] = (ia, ir)
    return out


_ENDS_ARR = _ends_array()


@dataclass(frozen=True)
class NodeRunResult:
    """The outcome of :func:`node_run_bound`: a proven bound on the plans of one site."""

    value: float  #: every plan on the site has an objective >= value (inf: none)
    exhausted: bool  #: the least box is final (or every box reached the incumbent)
    boxes: int
    dp_calls: int
    seconds: float
    #: The relaxed minimiser of the least final box, per run: (node, kind, GPUs, layers),
    #: in plan order (None: no final box reached).
    runs: tuple[tuple[int, int, int, int], ...] | None = None
    z: float = _INF  #: the stage-time cap of ``runs``
    q: int = 0  #: the stage count of ``runs`` (its memory caps)


class _Search:
    """One site's DP calls (caps, weights) and the traceback of a minimiser."""

    def __init__(self, t: NodeTables, layers: int, weights: ObjectiveWeights,
                 micro_batches: float) -> None:
        self.t, self.L = t, int(layers)
        self.q_max = min(int(t.size.sum()), self.L)
        self.a, self.b = float(weights.a), float(weights.b)
        self.M = float(micro_batches)
        self.dp_calls = 0

    def dp(self, qa: int, qb: int, z: float, ws: float, wp: float, wd: float,
           keep: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per stage count up to ``qb``, the DP's least weighted cost (memory caps of
        ``qa`` stages) and the idle power of a minimiser, and with ``keep`` its tables
        for :meth:`_traceback`."""
        self.dp_calls += 1
        t = self.t
        return _node_dp(self.L, self.q_max, t.size, t.comp, t.intra, t.inter, t.idle,
                        t.dync, t.mid[qa], t.last[qa], float(z), t.overhead, ws, wp, wd,
                        _ENDS_ARR, keep, qb)

    def caps_differ(self, qa: int, qb: int) -> bool:
        t = self.t
        return bool(np.any(t.mid[qa] != t.mid[qb]) or np.any(t.last[qa] != t.last[qb]))

    def least_sum(self, qa: int, qb: int, zb: float
                  ) -> tuple[float, int, tuple[tuple[int, int, int, int], ...]]:
        """The least ``S`` of the configurations with Q in [qa, qb] and every relaxed
        stage time at most ``zb`` (under the memory caps of ``qa`` stages, the loosest),
        the stage count of one that attains it, and its runs."""
        s, _, hist = self.dp(qa, qb, zb, 1.0, 0.0, 0.0, keep=True)
        q = qa + int(np.argmin(s[qa:qb + 1]))
        if not math.isfinite(s[q]):
            return _INF, q, ()
        return float(s[q]), q, self._traceback(hist, q, zb, qa, 1.0, 0.0, 0.0, float(s[q]))

    def minimiser(self, qa: int, q: int, z: float, w: tuple[float, float, float]
                  ) -> tuple[tuple[int, int, int, int], ...]:
        """The runs of a configuration of ``q`` stages with least ``ws S + wp P + wd D``
        (``w``) under cap ``z`` (memory caps of ``qa`` stages); () if none."""
        v, _, hist = self.dp(qa, q, z, *w, keep=True)
        if not math.isfinite(v[q]):
            return ()
        return self._traceback(hist, q, z, qa, *w, float(v[q]))

    def relaxed_objective(self, runs: tuple[tuple[int, int, int, int], ...], q: int,
                          zv: np.ndarray, ib: int) -> float:
        """``a T + b E`` of the configuration ``runs`` (``q`` stages) under node prices,
        its layers spread to the least bottleneck (at most ``zv[ib]``)."""
        t = self.t
        z = float(zv[self.run_zmin(runs, q, zv, ib)])
        s_sum = p_sum = d_sum = 0.0
        for v, kind, k, m in runs:
            sends, _ = _run(kind, k, t.comp[v], t.intra[v], t.inter[v], t.overhead,
                            t.mid[q, v], t.last[q, v], z, self.L, _ENDS_ARR)
            s_sum += m * t.comp[v] + k * t.overhead + sends
            p_sum += k * t.idle[v]
            d_sum += m * t.dync[v]
        x = s_sum + (self.M - 1.0) * z
        return self.a * x + self.b * (x * p_sum + self.M * d_sum) / 1e3

    def fits(self, runs: tuple[tuple[int, int, int, int], ...], q: int, z: float) -> bool:
        """Whether every run of ``runs`` holds its layers under cap ``z`` with the memory
        caps of ``q`` stages."""
        t = self.t
        return all(_run(kind, k, t.comp[v], t.intra[v], t.inter[v], t.overhead, t.mid[q, v],
                        t.last[q, v], z, self.L, _ENDS_ARR)[1] >= m for v, kind, k, m in runs)

    def least_power(self, qa: int, qb: int, zb: float) -> float:
        """The least idle power of the configurations of :meth:`least_sum` (0 when the
        objective has no energy term: not needed)."""
        if self.b <= 0.0:
            return 0.0
        p, _, _ = self.dp(qa, qb, zb, 0.0, 1.0, 0.0)
        return bounds._below(float(np.min(p[qa:qb + 1])))

    def bound(self, qa: int, qb: int, za: float, zb: float, s_lo: float,
              p_lo: float) -> float:
        """A bound on the objective of the plans with Q in [qa, qb] and Z_r in [za, zb],
        whose ``S`` is at least ``s_lo`` and ``P`` at least ``p_lo`` (the least under
        ``zb``; :meth:`least_sum`, :meth:`least_power`)."""
        x_lo = bounds._below(bounds._below(s_lo) + (self.M - 1.0) * za)
        if self.b <= 0.0:
            return bounds._below(self.a * x_lo)
        ws = self.a + self.b * p_lo / 1e3
        wp = self.b * x_lo / 1e3
        wd = self.b * self.M / 1e3
        rest, _, _ = self.dp(qa, qb, zb, ws, wp, wd)
        r_lo = float(np.min(rest[qa:qb + 1]))
        return bounds._below(r_lo + ws * (self.M - 1.0) * za - self.b * x_lo * p_lo / 1e3)

    def run_zmin(self, runs: tuple[tuple[int, int, int, int], ...], qa: int,
                 zv: np.ndarray, ib: int) -> int:
        """The index in ``zv`` (at most ``ib``) of the least cap under which every run of
        ``runs`` holds its layers: the configuration's relaxed bottleneck."""
        t, L = self.t, self.L
        out = 0
        for v, kind, k, m in runs:
            lo, hi = out, ib
            while lo < hi:
                mid = (lo + hi) // 2
                _, cap = _run(kind, k, t.comp[v], t.intra[v], t.inter[v], t.overhead,
                              t.mid[qa, v], t.last[qa, v], float(zv[mid]), L, _ENDS_ARR)
                if cap >= m:
                    hi = mid
                else:
                    lo = mid + 1
            out = lo
        return out

    def _traceback(self, hist: np.ndarray, q: int, z: float, qa: int, ws: float, wp: float,
                   wd: float, target: float) -> tuple[tuple[int, int, int, int], ...]:
        t, L = self.t, self.L
        o = t.overhead
        tol = 1e-9 * max(1.0, abs(target))

        def run(v: int, kind: int, k: int) -> tuple[float, int, float, float]:
            s, hi = _run(kind, k, t.comp[v], t.intra[v], t.inter[v], o, t.mid[qa, v],
                         t.last[qa, v], z, L, _ENDS_ARR)
            slope = ws * t.comp[v] + wd * t.dync[v]
            return s, hi, slope, ws * s + (ws * o + wp * t.idle[v]) * k

        n_v = t.size.size
        if not hist[n_v, 3, L, q] <= target + tol:
            # The whole plan on one node.
            for v in range(n_v):
                if q <= t.size[v]:
                    _, hi, slope, const = run(v, FL, q)
                    if hi >= L and abs(slope * L + const - target) <= tol:
                        return ((v, FL, q, L),)
            return ()
        runs: list[tuple[int, int, int, int]] = []
        f, ll, qq, val = 3, L, q, float(hist[n_v, 3, L, q])
        for v in range(n_v - 1, -1, -1):
            prev = hist[v]
            if prev[f, ll, qq] <= val + tol:
                continue  # the node is unused
            found = False
            for kind in range(3):
                bit = 1 if kind == FX else 2 if kind == SL else 0
                if bit and not f & bit:
                    continue
                for k in range(1, min(int(t.size[v]), qq) + 1):
                    _, hi, slope, const = run(v, kind, k)
                    for m in range(k, min(hi, ll) + 1):
                        x = prev[f & ~bit, ll - m, qq - k]
                        if math.isfinite(x) and abs(x + slope * m + const - val) <= tol:
                            runs.append((v, kind, k, m))
                            f, ll, qq, val = f & ~bit, ll - m, qq - k, float(x)
                            found = True
                            break
                    if found:
                        break
                if found:
                    break
            if not found and f == 3:
                pair = self._both(prev, v, ll, qq, val, tol, run)
                if pair is not None:
                    runs += pair
                    (_, _, k1, m1), (_, _, k2, m2) = pair
                    f, ll, qq = 0, ll - m1 - m2, qq - k1 - k2
                    val = float(prev[0, ll, qq])
                    found = True
            if not found:
                return ()
        order = ([r for r in runs if r[1] == FX] + [r for r in runs if r[1] == SX]
                 + [r for r in runs if r[1] == SL])
        return tuple(order)

    def _both(self, prev: np.ndarray, v: int, ll: int, qq: int, val: float, tol: float,
              run: Callable[[int, int, int], tuple[float, int, float, float]]
              ) -> list[tuple[int, int, int, int]] | None:
        size = int(self.t.size[v])
        for k1 in range(1, size):
            _, hi1, slope, c1 = run(v, FX, k1)
            for k2 in range(1, size - k1 + 1):
                _, hi2, _, c2 = run(v, SL, k2)
                for m1 in range(k1, hi1 + 1):
                    for m2 in range(k2, hi2 + 1):
                        if m1 + m2 > ll or k1 + k2 > qq:
                            continue
                        x = prev[0, ll - m1 - m2, qq - k1 - k2]
                        if math.isfinite(x) and abs(
                                x + slope * (m1 + m2) + c1 + c2 - val) <= tol:
                            return [(v, FX, k1, m1), (v, SL, k2, m2)]
        return None


def run_plan(t: NodeTables, runs: tuple[tuple[int, int, int, int], ...], qa: int, z: float,
             layers: int) -> list[tuple[int, int]] | None:
    """The pipeline (GPU index, layers) of a relaxed minimiser's ``runs`` (F..X first,
    S..X runs, S..L last; a node's F..X and S..L runs on distinct GPUs), each run's
    layers spread within its stages' caps at ``z``; None if they do not fit."""
    used: dict[int, int] = {}
    out: list[tuple[int, int]] = []
    o = t.overhead
    for v, kind, k, m in runs:
        start = used.get(v, 0)
        gpus = t.members[v][start:start + k]
        if gpus.size < k:
            return None
        used[v] = start + k
        c, a, r = t.comp[v], t.intra[v], t.inter[v]
        last_cap = t.last[qa, v] if kind >= SL else t.mid[qa, v]
        if k == 1:
            caps = [m]
        else:
            (fa, fr), (la, lr), _ = _ENDS[kind]
            caps = [int(_cap(t.mid[qa, v], fa * a + fr * r, c, o, z, layers))]
            caps += [int(_cap(t.mid[qa, v], 2 * a, c, o, z, layers))] * (k - 2)
            caps += [int(_cap(last_cap, la * a + lr * r, c, o, z, layers))]
        n = [1] * k
        rest = m - k
        for i in range(k):
            add = min(rest, caps[i] - 1)
            n[i] += max(add, 0)
            rest -= max(add, 0)
        if rest > 0:
            return None
        out += [(int(g), int(x)) for g, x in zip(gpus.tolist(), n, strict=True)]
    return out


def node_run_bound(t: NodeTables, layers: int, micro_batches: float,
                   weights: ObjectiveWeights, *, incumbent: float | None = None,
                   deadline: float | None = None, max_boxes: int | None = None,
                   stop: Callable[[], bool] | None = None) -> NodeRunResult:
    """The box search of the module docstring on a pool of one site whose GPUs are
    parted into nodes (``t``, :func:`node_tables`): a proven bound on ``a T + b E`` of
    its plans.

    Boxes are peeled from the top of their bottleneck range: the least ``S`` under the
    box's cap ``zb`` is attained by a configuration whose own bottleneck ``z*`` may lie
    below ``zb``; every plan with ``Z_r`` in ``[z*, zb]`` then has ``S`` at least that
    least, so that part of the box is final (``T >= S + (M - 1) z*``), and the rest,
    below ``z*``, is a box of its own. One DP per step of the least ``S`` as a function
    of the cap.

    ``incumbent``: a known plan's objective (boxes at or above it are closed). Stops at
    ``deadline`` (``time.perf_counter()``), after ``max_boxes`` box evaluations, when
    ``stop()`` is true, or once the least open box is final. The value returned is
    always proven: the least open box (or the incumbent, if every box reached it)."""
    t0 = time.perf_counter()
    se = _Search(t, layers, weights, float(micro_batches))
    zv = t.z_values
    ub = _INF if incumbent is None else float(incumbent)
    z_hi = zv[-1] if zv.size else _INF
    if math.isfinite(ub):
        t_cap = bounds.t_iter_cap(ub, se.a, se.b, float(np.min(t.idle)),
                                  float(np.min(t.dync)), se.M, se.L)
        z_hi = min(z_hi, t_cap / se.M * (1 + 1e-9))
    top = int(np.searchsorted(zv, z_hi, side="right")) - 1
    if se.q_max < 1 or top < 0:
        return NodeRunResult(ub, True, 0, 0, time.perf_counter() - t0)
    if se.b > 0.0:
        return _energy_search(se, zv, top, ub, t0, deadline, max_boxes, stop)
    # Entries: (bound, tie, qa, qb, ia, ib, final, a final box's minimiser: its runs and
    # stage count).
    heap: list[tuple[float, int, int, int, int, int, bool,
                     tuple[tuple[int, int, int, int], ...], int]] = []
    counter = 0
    n_boxes = 0

    def push(v: float, qa: int, qb: int, ia: int, ib: int, final: bool = False,
             runs: tuple[tuple[int, int, int, int], ...] = (), q: int = 0) -> None:
        nonlocal counter
        if v < ub:
            counter += 1
            heapq.heappush(heap, (v, counter, qa, qb, ia, ib, final, runs, q))

    push(-_INF, 1, se.q_max, 0, top)
    exhausted = False
    found = None
    z_found, q_found = _INF, 0
    while heap:
        if (deadline is not None and time.perf_counter() >= deadline) or (
                max_boxes is not None and n_boxes >= max_boxes) or (stop is not None and stop()):
            break
        v, _, qa, qb, ia, ib, final, runs, q = heap[0]
        if final:
            exhausted = True
            found, z_found, q_found = runs, float(zv[ia]), q
            break
        heapq.heappop(heap)
        n_boxes += 1
        zb = float(zv[ib])
        s_lo, q, runs = se.least_sum(qa, qb, zb)
        if not math.isfinite(s_lo):
            continue  # no plan with a bottleneck this small
        p_lo = se.least_power(qa, qb, zb)
        if q > qa and not se.fits(runs, q, zb):
            # The minimiser breaks the memory caps of its own stage count (the DP used
            # those of qa, looser): part the stage counts there, each part with its caps.
            w = max(v, se.bound(qa, qb, float(zv[ia]), zb, s_lo, p_lo))
            push(w, qa, q - 1, ia, ib)
            push(w, q, qb, ia, ib)
            continue
        j = max(se.run_zmin(runs, q, zv, ib) if runs else ia, ia)
        push(max(v, se.bound(qa, qb, float(zv[j]), zb, s_lo, p_lo)), qa, qb, j, ib, True,
             runs, q)
        if j > ia:
            # The rest, below z*: halved, so that its upper half starts with a bound of
            # its own (peeling alone would walk down every step from the top).
            im = (ia + j - 1) // 2
            for lo, hi in ((ia, im), (im + 1, j - 1)) if im >= ia and j - 1 > ia else (
                    (ia, j - 1),):
                push(max(v, se.bound(qa, qb, float(zv[lo]), zb, s_lo, p_lo)), qa, qb, lo, hi)
    if not heap:
        exhausted = True
    value = min(heap[0][0], ub) if heap else ub
    return NodeRunResult(float(value), exhausted, n_boxes, se.dp_calls,
                         time.perf_counter() - t0, found, z_found, q_found)


#: Idle-power ranges of the energy search narrower than this (W) are points: a
#: configuration's idle power is a sum of catalog powers, two distinct ones far apart.
_P_POINT = 1e-6
#: At most this many doublings and tangent intersections per idle-power multiplier search.
_NU_STEPS = 12
_NU_ITERS = 8


def _energy_search(se: _Search, zv: np.ndarray, top: int, ub: float, t0: float,
                   deadline: float | None, max_boxes: int | None,
                   stop: Callable[[], bool] | None) -> NodeRunResult:
    """:func:`node_run_bound` with energy in the objective (``b > 0``).

    In a box, ``X = S + (M - 1) Z >= X_lo = S_lo + (M - 1) za`` and ``P >= P_lo`` (the
    least ``S`` and ``P`` of its configurations), and McCormick gives ``a T + b E >= (a +
    beta P_lo) X + beta X_lo P + gamma D - beta X_lo P_lo`` (``beta = b / 1000``, ``gamma
    = b M / 1000``): one DP over the separable part, with ``X >= S + (M - 1) za``.

    The bottleneck range is peeled as at ``b = 0`` (by the plateaus of the least ``S``),
    which gives *pieces* whose ``X_lo`` is tight. A piece's McCormick minimiser ``w`` (a
    configuration) is priced exactly; where it reaches the piece's bound the piece is
    final. Otherwise the piece is split where ``w`` says the bound is loose: the stage
    counts (``w``'s own, below and above it: ``P_lo`` and ``S_lo`` are then those of
    fewer stage counts), then the bottleneck (below ``w``'s own and from it: ``za`` rises
    to it, and ``w`` leaves the lower part), then the idle power: a piece gets a range
    ``[p1, p2]`` (``P_lo`` at least ``p1``; the range held by a multiplier ``nu`` on
    ``P``, ``nu (P - p2) <= 0`` for ``nu > 0`` and ``nu (P - p1) <= 0`` below, searched by
    intersecting tangents: the minimiser's ``P`` is the slope), parted below ``w``'s
    power, at it and above it. On a point range the McCormick error ``beta (X - X_lo)(P -
    P_lo)`` is gone, so a piece of one stage count, its minimiser at its least bottleneck
    and one idle power is final (exact where the multiplier reaches a minimiser of that
    power)."""
    beta, gamma = se.b / 1e3, se.b * se.M / 1e3
    Runs = tuple[tuple[int, int, int, int], ...]
    # Entries: (bound, tie, qa, qb, ia, ib, p1, p2, piece, its minimiser's runs, stage
    # count, idle power and objective under node prices).
    heap: list[tuple[float, int, int, int, int, int, float, float, bool, Runs, int, float,
                     float]] = []
    counter = 0
    n_boxes = 0

    def mccormick(qa: int, qb: int, za: float, zb: float, s_lo: float, p_lo: float,
                  keep: bool, p1: float = 0.0, p2: float = _INF
                  ) -> tuple[float, Runs, int, float]:
        """(bound, minimiser runs (with ``keep``), its stage count and idle power)."""
        p1x = max(p1, p_lo)
        if p1x > p2:
            return _INF, (), qa, 0.0
        x_lo = bounds._below(bounds._below(s_lo) + (se.M - 1.0) * za)
        ws, wp = se.a + beta * p1x, beta * x_lo
        const = ws * (se.M - 1.0) * za - beta * x_lo * p1x

        def g(nu: float) -> tuple[float, float, int, float]:
            v, pw, _ = se.dp(qa, qb, zb, ws, wp + nu, gamma)
            q = qa + int(np.argmin(v[qa:qb + 1]))
            side = p2 if nu > 0 else p1
            return float(v[q]) - nu * side + const, float(pw[q]), q, nu

        best = g(0.0)
        if math.isfinite(best[0]) and not p1 <= best[1] <= p2 and (
                best[1] < p1 or math.isfinite(p2)):
            sign = 1.0 if best[1] > p2 else -1.0  # nu > 0 lowers P, nu < 0 raises it
            target = p2 if sign > 0 else p1
            near, far = (0.0, best[0], best[1] - target), None
            step = max(wp, 1e-12)
            for _ in range(_NU_STEPS):
                cand = g(sign * step)
                best = max(best, cand)
                if (cand[1] - target) * sign <= 0:
                    far = (cand[3], cand[0], cand[1] - target)
                    break
                near = (cand[3], cand[0], cand[1] - target)
                step *= 4.0
            for _ in range(_NU_ITERS if far is not None else 0):
                assert far is not None
                (mn, gn, sn), (mf, gf, sf) = near, far
                if sn == sf:
                    break
                x = min(max((gf - gn + sn * mn - sf * mf) / (sn - sf), min(mn, mf)),
                        max(mn, mf))
                top_v = gn + sn * (x - mn)
                cand = g(x)
                best = max(best, cand)
                if cand[1] == target or cand[0] >= top_v - 1e-12 * max(abs(top_v), 1.0):
                    break
                if (cand[1] - target) * sign > 0:
                    near = (x, cand[0], cand[1] - target)
                else:
                    far = (x, cand[0], cand[1] - target)
        value, pw_best, q, nu = best
        if not math.isfinite(value):
            return _INF, (), q, 0.0
        runs: Runs = ()
        if keep:
            v, _, hist = se.dp(qa, q, zb, ws, wp + nu, gamma, keep=True)
            runs = se._traceback(hist, q, zb, qa, ws, wp + nu, gamma, float(v[q]))
        return bounds._below(value), runs, q, pw_best

    def push(v: float, qa: int, qb: int, ia: int, ib: int, p1: float = 0.0,
             p2: float = _INF, piece: bool = False, runs: Runs = (), q: int = 0,
             pw: float = 0.0, f_w: float = _INF) -> None:
        nonlocal counter
        if v < ub:
            counter += 1
            heapq.heappush(heap, (v, counter, qa, qb, ia, ib, p1, p2, piece, runs, q, pw,
                                  f_w))

    def add_piece(parent: float, qa: int, qb: int, ia: int, ib: int, p1: float = 0.0,
                  p2: float = _INF, s_lo: float | None = None,
                  p_lo: float | None = None) -> None:
        nonlocal n_boxes
        n_boxes += 1
        zb = float(zv[ib])
        if s_lo is None:
            s, _, _ = se.dp(qa, qb, zb, 1.0, 0.0, 0.0)
            s_lo = float(np.min(s[qa:qb + 1]))
            if not math.isfinite(s_lo):
                return
        if p_lo is None:
            p_lo = se.least_power(qa, qb, zb)
        v, runs, q, pw = mccormick(qa, qb, float(zv[ia]), zb, s_lo, p_lo, True, p1, p2)
        v = max(v, parent)
        if v < ub:
            push(v, qa, qb, ia, ib, p1, p2, True, runs, q, pw,
                 se.relaxed_objective(runs, q, zv, ib) if runs else _INF)

    push(-_INF, 1, se.q_max, 0, top)
    exhausted = False
    found: Runs | None = None
    z_found, q_found = _INF, 0
    while heap:
        if (deadline is not None and time.perf_counter() >= deadline) or (
                max_boxes is not None and n_boxes >= max_boxes) or (stop is not None and stop()):
            break
        v, _, qa, qb, ia, ib, p1, p2, piece, runs, q, pw, f_w = heap[0]
        if piece and (not runs or f_w <= v * (1 + 1e-12)):
            exhausted = True  # the minimiser reaches the bound: nothing lower is left
            found, q_found = runs or None, q
            z_found = float(zv[se.run_zmin(runs, q, zv, ib)]) if runs else _INF
            break
        heapq.heappop(heap)
        if piece:
            if q > qa and not se.fits(runs, q, float(zv[ib])):
                add_piece(v, qa, q - 1, ia, ib, p1, p2)
                add_piece(v, q, qb, ia, ib, p1, p2)
                continue
            if qa < qb:
                for lo, hi in ((qa, q - 1), (q, q), (q + 1, qb)):
                    if lo <= hi:
                        add_piece(v, lo, hi, ia, ib, p1, p2)
                continue
            j = se.run_zmin(runs, q, zv, ib)
            if j > ia:
                add_piece(v, qa, qb, ia, j - 1, p1, p2)
                add_piece(v, qa, qb, j, ib, p1, p2)
                continue
            if p2 - p1 > 2 * _P_POINT:
                if p1 <= pw <= p2:
                    lo_p, hi_p = max(p1, pw - _P_POINT), min(p2, pw + _P_POINT)
                    parts = [(p1, lo_p), (lo_p, hi_p), (hi_p, p2)]
                else:  # the multiplier did not reach the range: halve it
                    pm = 0.5 * (p1 + p2) if math.isfinite(p2) else 2.0 * max(p1, pw, 1.0)
                    parts = [(p1, pm), (pm, p2)]
                for lo_q, hi_q in parts:
                    if hi_q > lo_q:
                        add_piece(v, qa, qb, ia, ib, lo_q, hi_q)
                continue
            # One stage count, the least bottleneck, one idle power: nothing left to
            # split; the multiplier did not reach a minimiser of that power.
            push(v, qa, qb, ia, ib, p1, p2, True, runs, q, pw, v)
            exhausted = True
            found, z_found, q_found = runs, float(zv[ia]), q
            break
        # An open box: peel the plateau of the least S at its top (as at b = 0).
        n_boxes += 1
        zb = float(zv[ib])
        s_lo, qs, runs_s = se.least_sum(qa, qb, zb)
        if not math.isfinite(s_lo):
            continue
        p_lo = se.least_power(qa, qb, zb)
        if qs > qa and not se.fits(runs_s, qs, zb):
            w_lo = mccormick(qa, qb, float(zv[ia]), zb, s_lo, p_lo, False)[0]
            push(max(v, w_lo), qa, qs - 1, ia, ib)
            push(max(v, w_lo), qs, qb, ia, ib)
            continue
        j = max(se.run_zmin(runs_s, qs, zv, ib) if runs_s else ia, ia)
        add_piece(v, qa, qb, j, ib, s_lo=s_lo, p_lo=p_lo)
        if j > ia:
            im = (ia + j - 1) // 2
            for lo, hi in ((ia, im), (im + 1, j - 1)) if im >= ia and j - 1 > ia else (
                    (ia, j - 1),):
                w_lo = mccormick(qa, qb, float(zv[lo]), zb, s_lo, p_lo, False)[0]
                push(max(v, w_lo), qa, qb, lo, hi)
    if not heap:
        exhausted = True
    value = min(heap[0][0], ub) if heap else ub
    return NodeRunResult(float(value), exhausted, n_boxes, se.dp_calls,
                         time.perf_counter() - t0, found, z_found, q_found)


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel of the search, with and without
    energy, on a tiny pool of two 2-GPU nodes: the solver warm-up's tiny instance has no
    nodes, and a cold compile inside a budget cut every region's search short (cloud
    N=512: 10-20 s of compiling on two busy cores)."""
    from geoplan.cost.evaluate import Evaluator
    from geoplan.model import generators
    from geoplan.model.instance import Instance

    for lam in (1.0, 0.5):
        inst = Evaluator(Instance.from_dict(generators.cloud(4, 4, 0, node_size=2, n_sites=1,
                                                             lam=lam))).instance
        c = inst.coefficients()
        groups = bounds.node_groups(np.asarray(c.comm_ms), bounds.clusters(inst))
        if groups is None:
            groups = np.repeat(np.arange(2), 2)
        tab = node_tables(c, inst.layers, groups)
        res = node_run_bound(tab, inst.layers, c.micro_batches,
                             ObjectiveWeights.from_instance(inst))
        if res.runs:
            run_plan(tab, res.runs, res.q, res.z, inst.layers)
