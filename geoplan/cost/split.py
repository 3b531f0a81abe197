"""Exact optimal contiguous split for a fixed GPU sequence, and prefix lower bounds.

With the stage order ``g_1..g_Q`` fixed, every communication term is a constant
``k_q`` (forward plus backward link time) and ``tau_q = n_q c_q + k_q`` with
``c_q = comp_ms[g_q]``. Writing the objective as ``a T_iter + b E_iter``
(``a, b`` from lambda and the normalisers, see :class:`ObjectiveWeights`)::

    objective = sum_q w_q n_q + A K + W max_q tau_q
    A = a + b * sum_q idle_q / 1000,   w_q = (A + b M dyn_q / 1000) c_q,
    W = A (M - 1),                     K = sum_q k_q

which is linear in ``n`` plus a non-negative multiple of the bottleneck. For a
cap ``Z`` on the bottleneck the best ``n`` under ``n_q c_q + k_q <= Z`` and the
memory caps is a greedy fill by ``w_q``; the optimal plan's bottleneck is one
of the values ``n c_q + k_q``, so sweeping ``Z`` over them (ascending, stopping
once ``W Z`` plus the unconstrained linear optimum cannot win) is exact.

The same sweep, run on a relaxation, gives a valid lower bound over every plan
whose sequence starts with a given prefix (:meth:`Splitter.prefix_bound`).

Public API:

* :func:`optimal_split` -- one call, one sequence.
* :class:`Splitter` -- precomputed arrays for many calls on one instance
  (:meth:`~Splitter.split`, :meth:`~Splitter.split_arrays` for batches,
  :meth:`~Splitter.price`, :meth:`~Splitter.prefix_bound`).
* :class:`SplitResult`, :class:`ObjectiveWeights`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from geoplan.cost.coefficients import Coefficients
from geoplan.cost.kernel import price_stages_compiled
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.instance import Instance

if TYPE_CHECKING:
    from geoplan.model.plan import Plan

__all__ = ["ObjectiveWeights", "SplitResult", "Splitter", "optimal_split"]  # weights re-exported

_INF = np.inf


@dataclass(frozen=True)
class SplitResult:
    """The optimal split of one GPU sequence: objective (evaluator units), T, E, counts."""

    gpus: tuple[int, ...]
    counts: tuple[int, ...]
    objective: float
    t_iter_ms: float
    e_iter_j: float

    def to_plan(self, instance: Instance, micro_batch_size: int | None = None) -> Plan:
        from geoplan.model.plan import Plan

        return Plan.from_indices(instance, self.gpus, self.counts, micro_batch_size)


# --------------------------------------------------------------------------- kernels


@njit(cache=True, inline="always")
def _cap_at(c, k, lo, hmax, z):  # pragma: no cover - compiled
    """Largest n in [0, hmax] with n == 0 or n c + k <= z (n >= lo guaranteed by caller)."""
    if hmax <= 0 or c + k > z:
        return 0
    n = int((z - k) / c)
    if n > hmax:
        n = hmax
    if n < 1:
        n = 1
    # Repair the division with the exact test used everywhere else.
    while n < hmax and (n + 1) * c + k <= z:
        n += 1
    while n > 1 and n * c + k > z:
        n -= 1
    return n


@njit(cache=True, inline="always")
def _resort(cost, order, m):  # pragma: no cover - compiled
    """Insertion sort of ``order[:m]`` by ``cost`` (stable; nearly sorted input is cheap)."""
    for i in range(1, m):
        t = order[i]
        j = i - 1
        while j >= 0 and cost[order[j]] > cost[t]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = t


@njit(cache=True)
def _sweep(fs, js, m, L, W, want):  # pragma: no cover - compiled
    """min over caps Z of [min_n sum_i (w_i n_i + (fx_i + fz_i Z) [n_i > 0])] + W Z.

    Item ``i < m`` has per-layer time ``c``, fixed time ``k`` (in the cap only
    when ``n > 0``), per-layer cost ``w``, fixed charge ``fx + fz Z`` (paid when
    ``n > 0``), lower bound ``lo`` (0 or 1) and cap ``hi``; feasible means
    ``n_i c_i + k_i <= Z`` for used items and ``sum n = L``, except that one
    item may use the smaller fixed time ``kl`` instead (the last stage of a
    pipeline has no forward link). Packed as rows of ``fs`` (c, k, w, fx,
    scratch, kl, fz) and ``js`` (lo, hi, ub, order, counts, scratch).

    With ``kl == k`` and no fixed charges the inner problem is a greedy fill
    by ``w`` and the result is exact (``want``: the counts at the best cap go
    to ``js[4]``). Otherwise it is relaxed into a lower bound: a fixed charge
    is spread over the most layers its item could take (``fx n / ub <= fx``),
    and the one exception becomes a pool of extra slots, as many as the
    largest gain of any item, at the cheapest price of any gaining item.
    """
    c = fs[0]
    k = fs[1]
    w = fs[2]
    fx = fs[3]
    cost = fs[4]
    kl = fs[5]
    fz = fs[6]
    lo = js[0]
    hi = js[1]
    ub = js[2]
    order = js[3]
    counts = js[4]
    ubl = js[5]
    need = 0
    total = 0
    z = 0.0
    base = 0.0
    amort = False
    for i in range(m):
        h = hi[i] if hi[i] > 0 else 0
        if h < lo[i]:
            return _INF
        if lo[i] == 1:
            need += 1
            base += w[i] + fx[i]
            W += fz[i]  # a certain stage pays its Z-proportional charge in full
            v = c[i] + kl[i]
            if v > z:
                z = v
        elif fx[i] > 0.0 or fz[i] > 0.0:
            amort = True
        total += h
    if need > L or total < L or not z < _INF:
        return _INF
    rest = L - need
    # Floor over all caps from here on: every item at its memory cap, the
    # Z-proportional charges at the smallest cap.
    for i in range(m):
        h = hi[i] if hi[i] > 0 else 0
        cost[i] = w[i] + ((fx[i] + fz[i] * z) / h if lo[i] == 0 and h > 0 else 0.0)
        order[i] = i
    _resort(cost, order, m)
    f_inf = base
    r = rest
    for t in range(m):
        if r <= 0:
            break
        i = order[t]
        h = hi[i] if hi[i] > 0 else 0
        take = h - lo[i]
        if take > r:
            take = r
        if take > 0:
            f_inf += take * cost[i]
            r -= take
    s = 0
    for i in range(m):
        h = hi[i] if hi[i] > 0 else 0
        u = _cap_at(c[i], k[i], lo[i], h, z)
        ub[i] = u if u > lo[i] else lo[i]
        u = _cap_at(c[i], kl[i], lo[i], h, z)
        ubl[i] = u if u > ub[i] else ub[i]
        s += ub[i]
    best = _INF
    while True:
        if amort:
            # Spread each optional fixed charge over the most layers its item can take.
            for i in range(m):
                if lo[i] == 0 and ubl[i] > 0:
                    cost[i] = w[i] + (fx[i] + fz[i] * z) / ubl[i]
            _resort(cost, order, m)
        # The exception's pool: the largest gain of one item, at the cheapest gaining price.
        pool = 0
        pc = _INF
        for i in range(m):
            d = ubl[i] - ub[i]
            if d > 0:
                if d > pool:
                    pool = d
                if cost[i] < pc:
                    pc = cost[i]
        if s + pool >= L:
            f = base
            r = rest
            for t in range(m):
                if r <= 0:
                    break
                i = order[t]
                if pool > 0 and pc <= cost[i]:
                    take = pool if pool < r else r
                    f += take * pc
                    r -= take
                    pool = 0
                    if r <= 0:
                        break
                take = ub[i] - lo[i]
                if take > r:
                    take = r
                if take > 0:
                    f += take * cost[i]
                    r -= take
            if r > 0:
                f += r * pc
            val = f + W * z
            if val < best:
                best = val
                if want:
                    r = rest
                    for i in range(m):
                        counts[i] = lo[i]
                    for t in range(m):
                        i = order[t]
                        take = ub[i] - lo[i]
                        if take > r:
                            take = r
                        if take > 0:
                            counts[i] += take
                            r -= take
            if f <= f_inf:
                break  # larger caps cannot lower the linear part any further
        # Next cap value: the smallest time at which some item gains a layer.
        zn = _INF
        for i in range(m):
            h = hi[i] if hi[i] > 0 else 0
            if ub[i] < h:
                v = (ub[i] + 1) * c[i] + k[i]
                if v < zn:
                    zn = v
            if ubl[i] < h:
                v = (ubl[i] + 1) * c[i] + kl[i]
                if v < zn:
                    zn = v
        if not zn < _INF:
            break
        if best < _INF and W * zn + f_inf >= best:
            break
        z = zn
        for i in range(m):
            h = hi[i] if hi[i] > 0 else 0
            while ub[i] < h and (ub[i] + 1) * c[i] + k[i] <= z:
                ub[i] += 1
                s += 1
            if ubl[i] < ub[i]:
                ubl[i] = ub[i]
            while ubl[i] < h and (ubl[i] + 1) * c[i] + kl[i] <= z:
                ubl[i] += 1
    return best


@njit(cache=True)
def split_sequence(seq, q, L, comp, comm, overhead, idle_w, active_w, capmid, caplast, mb, a, b,
           fs, js):  # pragma: no cover - compiled
    """Optimal counts for the sequence ``seq[:q]`` into ``js[4]``; returns the sweep value.

    Linearises :func:`geoplan.cost.kernel.price_stages` for a fixed order: the
    sends and the stage overhead are the constant ``k_q`` of each stage, and
    ``a T + b E`` (kernel ``iteration_time``, ``iteration_energy``, weights
    ``a, b``) becomes the per-layer weights and bottleneck weight of the module
    docstring.
    """
    if q > L:
        return _INF
    idle = 0.0
    for s in range(q):
        idle += idle_w[seq[s]]
    big_a = a + b * idle / 1e3
    big_b = b * mb / 1e3
    kk = 0.0
    for s in range(q):
        g = seq[s]
        kq = 0.0
        if s + 1 < q:
            kq += comm[g, seq[s + 1]]
        if s > 0:
            kq += comm[g, seq[s - 1]]
        if not kq < _INF:
            return _INF
        kq += overhead
        kk += kq
        fs[0, s] = comp[g]
        fs[1, s] = kq
        fs[2, s] = (big_a + big_b * (active_w[g] - idle_w[g])) * comp[g]
        fs[3, s] = 0.0
        fs[5, s] = kq
        fs[6, s] = 0.0
        js[0, s] = 1
        h = caplast[q, g] if s == q - 1 else capmid[q, g]
        js[1, s] = h if h < L else L
    val = _sweep(fs, js, q, L, big_a * (mb - 1), True)
    return val + big_a * kk


@njit(cache=True, nogil=True)
def _split_rows(G, Q, out, C, L, comp, comm, overhead, idle_w, active_w, dyn_w, capmid, caplast,
                mem_w, mem_a, mem_last, mem_cap, mb, a, b, mode, lam, t_ref, e_ref, fs,
                js):  # pragma: no cover - compiled
    """Optimal split of each row ``G[p, :Q[p]]``: counts into ``C``, (objective, T, E) into ``out``.

    Rows that are infeasible get an infinite objective and zero counts.
    """
    for p in range(G.shape[0]):
        q = Q[p]
        seq = G[p]
        for s in range(C.shape[1]):
            C[p, s] = 0
        val = split_sequence(seq, q, L, comp, comm, overhead, idle_w, active_w, capmid, caplast,
                             mb, a, b, fs, js)
        if not val < _INF:
            out[0, p] = _INF
            out[1, p] = _INF
            out[2, p] = _INF
            continue
        for s in range(q):
            C[p, s] = js[4, s]
        _, t, e, obj = price_stages_compiled(seq, C[p], q, comp, comm, overhead, idle_w, dyn_w,
                                             mem_w, mem_a, mem_last, mem_cap, mb, mode, lam, t_ref,
                                             e_ref)
        out[0, p] = obj
        out[1, p] = t
        out[2, p] = e


@njit(cache=True)
def link_floors(used, extra, comm, lf):  # pragma: no cover - compiled
    """Link floors of every unused GPU j whose pipeline neighbours lie in S.

    S is the unused GPUs plus ``extra`` (the last prefix GPU; -1 for none).
    Into ``lf[:, j]``: the cheapest outgoing link to S, the sum of the two
    cheapest, and the cheapest link pair (both directions) with S; inf where
    j has no neighbour in S linked both ways.
    """
    n = comm.shape[0]
    for j in range(n):
        m1 = _INF
        m2 = _INF
        ep = _INF
        if not used[j]:
            for i in range(n):
                if i == j or (used[i] and i != extra):
                    continue
                out = comm[j, i]
                back = comm[i, j]
                if not (out < _INF and back < _INF):
                    continue
                if out + back < ep:
                    ep = out + back
                if out < m1:
                    m2 = m1
                    m1 = out
                elif out < m2:
                    m2 = out
        lf[0, j] = m1
        lf[1, j] = m1 + m2
        lf[2, j] = ep


@njit(cache=True)
def prefix_bound(seq, p, used, forced, extend, lf, qmax, L, comp, comm, overhead, idle_w,
                  active_w, capmid, mb, a, b, fs, js):  # pragma: no cover - compiled
    """Lower bound over plans whose sequence starts with ``seq[:p]``.

    ``used[i]`` marks the prefix GPUs; ``forced[i]`` unused GPUs every completion
    must contain; ``extend`` restricts to completions with more than ``p``
    stages. ``lf``: the link floors of :func:`link_floors` for S = the unused
    GPUs plus the last prefix GPU (any superset of S gives a weaker, still
    valid bound). Relaxation (see docs/exact-enumeration.md): the prefix is priced
    exactly, its last stage without a forward link unless extensions are
    forced. Each unused GPU ``j`` becomes an optional, unordered stage; its
    neighbours can only be unused GPUs or the last prefix GPU (set S), so its
    time is at least ``n c_j`` plus its two cheapest links into S (backward
    and forward; one stage, the last, may count one link only), the link pair
    with its predecessor costs at least its cheapest pair into S (a fixed
    charge), and its idle power is charged over tau_j + (M - 1) Z, a lower bound
    of T under the bottleneck cap Z.
    The idle power of the prefix multiplies the whole T; memory caps are
    taken at the smallest possible stage count. The stage overhead ``o`` is a
    fixed time of every stage, prefix or appended, like a link.
    """
    n = comp.shape[0]
    n_forced = 0
    for i in range(n):
        if forced[i]:
            n_forced += 1
    if extend and n_forced == 0:
        n_forced = 1
    q_lo = p + n_forced
    if q_lo > qmax:
        return _INF
    idle = 0.0
    for s in range(p):
        idle += idle_w[seq[s]]
    big_a = a + b * idle / 1e3
    big_b = b * mb / 1e3
    last = seq[p - 1]
    epair = lf[2]
    # Appended stages first (from position p), prefix stages after.
    m = p
    if p < qmax:
        q_app = q_lo if q_lo > p else p + 1
        for j in range(n):
            if used[j]:
                continue
            if not epair[j] < _INF:
                if forced[j]:
                    return _INF  # a GPU every completion needs cannot join any pipeline
                continue
            m1 = lf[0, j]
            fs[0, m] = comp[j]
            fs[1, m] = lf[1, j] + overhead
            fs[5, m] = m1 + overhead
            # Idle energy of j: T >= sum tau + (M - 1) max tau >= tau_j + (M - 1) Z.
            fs[2, m] = (big_a + big_b * (active_w[j] - idle_w[j]) + b * idle_w[j] / 1e3) * comp[j]
            fs[3, m] = (big_a * (epair[j] + overhead)
                        + b * idle_w[j] * (m1 + overhead) / 1e3)
            fs[6, m] = b * idle_w[j] * (mb - 1) / 1e3
            js[0, m] = 1 if forced[j] else 0
            h = capmid[q_app, j]
            js[1, m] = h if h < L else L
            m += 1
    elif n_forced > 0:
        return _INF
    kk = 0.0
    fwd_lb = 0.0
    if q_lo > p:
        # Some GPU follows the last prefix GPU: its forward link, and the pair
        # beyond the fixed charge the follower already pays.
        fwd_lb = _INF
        extra = _INF
        for j in range(n):
            if not used[j] and epair[j] < _INF:
                f = comm[last, j]
                bk = comm[j, last]
                if f < _INF and bk < _INF:
                    if f < fwd_lb:
                        fwd_lb = f
                    if f + bk - epair[j] < extra:
                        extra = f + bk - epair[j]
        if not fwd_lb < _INF:
            return _INF
        if extra > 0.0:
            kk += extra
    for s in range(p):
        g = seq[s]
        kq = 0.0
        if s + 1 < p:
            kq += comm[g, seq[s + 1]]
        if s > 0:
            kq += comm[g, seq[s - 1]]
        kq += overhead
        kk += kq
        if s == p - 1:
            kq += fwd_lb
        fs[0, s] = comp[g]
        fs[1, s] = kq
        fs[2, s] = (big_a + big_b * (active_w[g] - idle_w[g])) * comp[g]
        fs[3, s] = 0.0
        fs[5, s] = kq
        fs[6, s] = 0.0
        js[0, s] = 1
        h = capmid[q_lo, g]
        js[1, s] = h if h < L else L
    val = _sweep(fs, js, m, L, big_a * (mb - 1), False)
    return val + big_a * kk


# --------------------------------------------------------------------------- Python API


class Splitter:
    """Optimal splits, prices and prefix bounds for one instance (arrays built once).

    ``source`` is an :class:`Instance` (weights, layers and coefficients taken
    from it) or a :class:`Coefficients` with ``layers`` and ``weights`` given.
    Not thread-safe (shared scratch arrays).
    """

    def __init__(
        self,
        source: Instance | Coefficients,
        *,
        layers: int | None = None,
        weights: ObjectiveWeights | None = None,
        micro_batch_size: int | None = None,
    ) -> None:
        if isinstance(source, Instance):
            c = source.coefficients(micro_batch_size)
            layers = source.layers if layers is None else layers
            weights = ObjectiveWeights.from_instance(source) if weights is None else weights
        else:
            c = source
            if layers is None or weights is None:
                raise ValueError("a Coefficients source needs layers= and weights=")
        self.coefficients = c
        self.layers = int(layers)
        self.weights = weights
        n = c.n
        self.n = n
        self.qmax = min(n, self.layers)
        L = self.layers
        self.comp = np.ascontiguousarray(c.comp_ms, dtype=np.float64)
        self.comm = np.ascontiguousarray(c.comm_ms, dtype=np.float64)
        self.idle_w = np.ascontiguousarray(c.idle_w, dtype=np.float64)
        self.active_w = np.ascontiguousarray(c.active_w, dtype=np.float64)
        self.dyn_w = np.ascontiguousarray(c.dyn_w, dtype=np.float64)
        self.overhead = float(c.overhead_ms)
        self.mem_cap = np.ascontiguousarray(c.mem_cap, dtype=np.float64)
        # Caps per stage count, from the one memory test (row 0 unused).
        self.capmid = np.zeros((self.qmax + 2, n), dtype=np.int64)
        self.caplast = np.zeros((self.qmax + 2, n), dtype=np.int64)
        for q in range(1, self.qmax + 2):
            self.capmid[q] = np.minimum(c.layer_caps(q, last=False), L)
            self.caplast[q] = np.minimum(c.layer_caps(q, last=True), L)
        self.mb = float(c.micro_batches)
        self._seq = np.zeros(n + 1, dtype=np.int64)
        self._used = np.zeros(n, dtype=np.bool_)
        self._forced = np.zeros(n, dtype=np.bool_)
        self._fs, self._js = self.scratch()
        self._lf = np.zeros((3, n))
        # One-row buffers: :meth:`split` is called in tight loops by other solvers.
        self._one_g = self._seq[None, :]
        self._one_q = np.zeros(1, dtype=np.int64)
        self._one_out = np.zeros((3, 1))
        self._one_c = np.zeros((1, n + 1), dtype=np.int64)

    def scratch(self) -> tuple[np.ndarray, np.ndarray]:
        """Fresh scratch arrays for the compiled kernels (float rows, int rows)."""
        return np.zeros((7, self.n + 1)), np.zeros((6, self.n + 1), dtype=np.int64)

    @property
    def c_mem_last(self) -> float:
        """Extra bytes of the last stage (LM head and logits)."""
        return float(self.coefficients.mem_last)

    def _load(self, gpus: Sequence[int]) -> int:
        q = len(gpus)
        if q < 1 or q > self.n:
            raise ValueError(f"expected 1..{self.n} GPUs, got {q}")
        if len(set(gpus)) != q:
            raise ValueError(f"GPUs must be distinct, got {list(gpus)}")
        if min(gpus) < 0 or max(gpus) >= self.n:
            raise ValueError(f"GPU indices must lie in 0..{self.n - 1}, got {list(gpus)}")
        self._seq[:q] = gpus
        return q

    def _kernel_args(self) -> tuple:
        w = self.weights
        c = self.coefficients
        return (self.layers, self.comp, self.comm, self.overhead, self.idle_w, self.active_w,
                self.dyn_w, self.capmid, self.caplast, float(c.mem_w), float(c.mem_a),
                self.c_mem_last, self.mem_cap, self.mb, w.a, w.b, w.mode, w.lam, w.t_ref,
                w.e_ref, self._fs, self._js)

    # ------------------------------------------------------------------ public
    def price(self, gpus: Sequence[int], counts: Sequence[int]) -> tuple[float, float, float]:
        """(objective, T_iter ms, E_iter J) of a stage list; objective inf if infeasible."""
        q = self._load(gpus)
        if len(counts) != q or sum(counts) != self.layers:
            return _INF, _INF, _INF
        cnt = np.asarray(counts, dtype=np.int64)
        w = self.weights
        c = self.coefficients
        _, t, e, obj = price_stages_compiled(self._seq, cnt, q, self.comp, self.comm,
                                             self.overhead, self.idle_w, self.dyn_w,
                                             float(c.mem_w), float(c.mem_a), self.c_mem_last,
                                             self.mem_cap, self.mb, w.mode, w.lam, w.t_ref,
                                             w.e_ref)
        return float(obj), float(t), float(e)

    def split(self, gpus: Sequence[int]) -> SplitResult | None:
        """The optimal contiguous split of ``gpus`` (in this order), or None if infeasible.

        Infeasible: a missing link between consecutive GPUs, more GPUs than
        layers, or memory caps that cannot hold the layers.
        """
        q = self._load(gpus)
        self._one_q[0] = q
        _split_rows(self._one_g, self._one_q, self._one_out, self._one_c, *self._kernel_args())
        obj, t, e = self._one_out[:, 0]
        if not obj < _INF:
            return None
        return SplitResult(tuple(int(g) for g in gpus), tuple(self._one_c[0, :q].tolist()),
                           float(obj), float(t), float(e))

    def split_arrays(self, gpus: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Optimal splits of many sequences at once, in one compiled call.

        ``gpus``: (P, Qmax) int GPU indices, row p using its first ``q[p]``
        entries (distinct, in range: not checked). Returns (objective (P,), inf
        where infeasible; counts (P, Qmax), zero beyond ``q[p]``).
        """
        G = np.ascontiguousarray(gpus, dtype=np.int64)
        Q = np.ascontiguousarray(q, dtype=np.int64)
        if G.ndim != 2 or Q.shape != (G.shape[0],) or (Q.size and (Q.min() < 1
                                                                   or Q.max() > G.shape[1])):
            raise ValueError("expected gpus of shape (P, Qmax) and 1 <= q <= Qmax per row")
        out = np.empty((3, G.shape[0]))
        C = np.zeros(G.shape, dtype=np.int64)
        _split_rows(G, Q, out, C, *self._kernel_args())
        return out[0], C

    def prefix_bound(
        self,
        prefix: Sequence[int],
        *,
        extensions_only: bool = False,
        forced: Sequence[int] = (),
    ) -> float:
        """A valid lower bound on the objective of every plan whose sequence starts with ``prefix``.

        ``extensions_only``: only plans with more stages than the prefix (the
        prefix itself excluded). ``forced``: GPUs outside the prefix that every
        plan considered must use. inf when no such plan can be feasible.
        """
        p = self._load(prefix)
        self._used[:] = False
        self._used[list(prefix)] = True
        self._forced[:] = False
        for g in forced:
            if self._used[g]:
                raise ValueError(f"forced GPU {g} is already in the prefix")
            self._forced[g] = True
        w = self.weights
        link_floors(self._used, int(prefix[-1]), self.comm, self._lf)
        val = prefix_bound(self._seq, p, self._used, self._forced, extensions_only, self._lf,
                           self.qmax, self.layers, self.comp, self.comm, self.overhead,
                           self.idle_w, self.active_w, self.capmid, self.mb, w.a, w.b, self._fs,
                           self._js)
        return float(val)


def optimal_split(
    source: Instance | Coefficients,
    gpus: Sequence[int],
    *,
    layers: int | None = None,
    weights: ObjectiveWeights | None = None,
    micro_batch_size: int | None = None,
) -> SplitResult | None:
    """The exact optimal contiguous split of the fixed GPU sequence ``gpus`` (indices).

    ``source``: an :class:`Instance` (lambda and normalisers from its objective)
    or a :class:`Coefficients` plus ``layers`` and ``weights``. Returns None if
    no split is feasible. For many calls on one instance build a
    :class:`Splitter` once instead.
    """
    return Splitter(
        source, layers=layers, weights=weights, micro_batch_size=micro_batch_size
    ).split(gpus)
