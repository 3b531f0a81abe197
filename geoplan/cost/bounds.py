"""Bounds on the bottleneck, on T_iter and on the objective, written once.

Every exact method prices plans with the same stage time (cost-model.md)::

    tau_q = n_q c_{g_q} + d(g_q -> g_{q+1}) [q < Q] + d(g_q -> g_{q-1}) [q > 1] + o

(``c`` the per-layer time, ``d`` a link time, ``o >= 0`` the stage overhead,
the same for every stage), ``T_iter = sum tau + (M - 1) max tau`` with
``M >= 1``, and ``E_iter = T sum idle / 1000 + M sum dyn_g c_g n_g / 1000``
with non-negative powers. The bounds below hold for every feasible plan of an
instance; each docstring says why. They are generic over the number type: the
MILP, the root bound of B&B and the tests call them with float milliseconds,
CP-SAT with its integer model units (integer-rounded ``c``, ``d`` and ``o``;
the bounds then hold for the integer model, which is what CP-SAT solves).

A lower bound is a promise: a value above the true optimum cuts off optimal
plans. Float results are therefore taken a relative ``FLOAT_MARGIN`` below
the computed value, which covers the rounding of the few additions involved
(the evaluator and the relaxation add the same terms in different orders).

Public API:

* :class:`Relaxation` -- the stage-role relaxation: per stage count Q a lower
  bound on max tau (:meth:`~Relaxation.tmax_bounds`, also per set of sites
  used) and on sum tau (:meth:`~Relaxation.sum_bounds`);
* :func:`t_iter_bounds` -- per Q lower bounds on T_iter from those two;
* :func:`capacity_bound` -- the simpler Q-free bottleneck bound (implied by
  the relaxation, kept as a floor so the strongest bound is never lost);
* :func:`arc_bottleneck` -- the bottleneck any plan using a given arc has;
* :func:`layers_within` -- the most layers a stage can hold under a cap on tau;
* :func:`objective_lower_bound` -- a lower bound on ``a T + b E`` over all plans;
* :func:`t_iter_cap` -- the T_iter every plan at least as good as a known
  objective stays below (objective >= an affine function of T);
* :func:`tmax_worst`, :func:`t_iter_worst` -- upper bounds over all plans.

``docs/architecture.md`` ("Bounds and dominance") lists where each is used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    from geoplan.cost.coefficients import Coefficients
    from geoplan.model.instance import Instance

__all__ = [
    "FLOAT_MARGIN",
    "Relaxation",
    "arc_bottleneck",
    "capacity_bound",
    "clusters",
    "layer_cap_table",
    "layers_within",
    "objective_lower_bound",
    "site_names",
    "t_iter_bounds",
    "t_iter_cap",
    "t_iter_worst",
    "tmax_worst",
]

#: Relative margin taken off every float lower bound (see the module docstring).
FLOAT_MARGIN = 1e-12
#: Relative width at which the float bisection of the bottleneck bound stops.
_FLOAT_BISECT_TOL = 1e-10

_NEG = -(2**62)


def _below(x: float) -> float:
    """A float lower bound made safe against the rounding of its own computation."""
    return x - FLOAT_MARGIN * abs(x)


# --------------------------------------------------------------------------- compiled kernels


@njit(cache=True)
def _room(t, cost, cc, cap, o):  # pragma: no cover - compiled
    """Most layers (<= cap) a stage can hold with tau = n cc + cost + o <= t.

    ``cost`` < 0 marks an impossible role (0 layers). Works on integers and
    floats alike: the division is repaired with the exact test ``n cc + fixed <= t``.
    """
    if cost < 0 or cap < 1:
        return 0
    fixed = cost + o
    if t < fixed + cc:
        return 0
    if cc <= 0:
        return cap
    n = int((t - fixed) // cc)
    if n > cap:
        n = cap
    if n < 1:
        n = 1
    while n > 1 and n * cc + fixed > t:
        n -= 1
    while n < cap and (n + 1) * cc + fixed <= t:
        n += 1
    return n


@njit(cache=True)
def _best_fill(t, q, cc, roles, caps, member, k_need, o, enough):  # pragma: no cover - compiled
    """Most layers Q stages can hold within bottleneck t (a knapsack over GPUs and roles).

    ``roles[i, r]`` is the least link time GPU i pays in role r (< 0: impossible):
    r = 0, 1, 2 a middle stage with 0, 1, 2 cross-cluster links, r = 3, 4 an end
    stage with 0, 1. A plan has exactly two end stages and at least ``k_need``
    cross-cluster link charges; only GPUs with ``member[i]`` take part; each
    GPU takes at most one role. Returns early, with a value >= ``enough``, once
    the fill reaches ``enough`` (more GPUs only add to it).
    """
    cross = (0, 1, 2, 0, 1)
    ends = (0, 0, 0, 1, 1)
    best = np.full((q + 1, k_need + 1, 3), _NEG, np.int64)
    best[0, 0, 0] = 0
    rooms = np.zeros(5, np.int64)
    seen = 0
    for i in range(cc.shape[0]):
        if not member[i]:
            continue
        any_room = False
        for r in range(5):
            rooms[r] = _room(t, roles[i, r], cc[i], caps[i], o)
            if rooms[r] >= 1:
                any_room = True
        if not any_room:
            continue
        seen += 1
        # 0/1 knapsack in place: rows in descending order read row c - 1 before
        # this GPU has touched it, so each GPU takes at most one role.
        for c in range(min(q, seen), 0, -1):
            for r in range(5):
                room = rooms[r]
                if room < 1:
                    continue
                for j in range(k_need + 1):
                    jj = min(j + cross[r], k_need)
                    for e in range(3 - ends[r]):
                        b = best[c - 1, j, e]
                        if b != _NEG and b + room > best[c, jj, e + ends[r]]:
                            best[c, jj, e + ends[r]] = b + room
        if best[q, k_need, 2] >= enough:
            return best[q, k_need, 2]
    return best[q, k_need, 2]


@njit(cache=True)
def _fits(t, q, L, cc, roles, cluster, n_clusters, caps, last1, member, k_need, single_ok,
          multi_ok, o):  # pragma: no cover - compiled
    """Can a Q-stage plan with bottleneck <= t hold L layers? (the relaxation of Relaxation)

    Only GPUs with ``member[i]`` take part; ``single_ok``: the plan may stay in
    one cluster; ``multi_ok``: it may visit several, with >= ``k_need`` charges.
    Monotone in t (every room is).
    """
    n = cc.shape[0]
    if q == 1:
        for i in range(n):  # noqa: SIM110 - a plain loop compiles in numba
            if member[i] and last1[i] >= L and cc[i] * L + o <= t:
                return True
        return False
    if single_ok:
        inner = roles.copy()
        inner[:, 1] = -1
        inner[:, 2] = -1
        inner[:, 4] = -1
        for c in range(n_clusters):
            if _best_fill(t, q, cc, inner, caps, member & (cluster == c), 0, o, L) >= L:
                return True
    return multi_ok and _best_fill(t, q, cc, roles, caps, member, k_need, o, L) >= L


@njit(cache=True)
def _tmax_bounds_int(L, ub, cc, roles, cluster, n_clusters, mid, last, member, k_need,
                     single_ok, multi_ok, start, o):  # pragma: no cover - compiled
    """Per Q, the smallest integer t >= start[q] passing :func:`_fits` (-1: even ub fails)."""
    q_max = mid.shape[0] - 1
    out = np.full(q_max + 1, -1, np.int64)
    for q in range(1, q_max + 1):
        if start[q] < 0:
            continue
        args = (L, cc, roles, cluster, n_clusters, mid[q], last[1], member, k_need[q],
                single_ok[q], multi_ok, o)
        if not _fits(ub, q, *args):
            continue
        lo, hi = start[q], ub
        while lo < hi:
            m = (lo + hi) // 2
            if _fits(m, q, *args):
                hi = m
            else:
                lo = m + 1
        out[q] = lo
    return out


@njit(cache=True)
def _tmax_bounds_float(L, ub, cc, roles, cluster, n_clusters, mid, last, member, k_need,
                       single_ok, multi_ok, start, o, tol):  # pragma: no cover - compiled
    """Per Q, a t below which :func:`_fits` fails (-1: even ub fails).

    Bisection keeps ``lo`` failing (or equal to ``start[q]``, a bound the caller
    vouches for) and ``hi`` passing; ``lo`` is returned.
    """
    q_max = mid.shape[0] - 1
    out = np.full(q_max + 1, -1.0)
    for q in range(1, q_max + 1):
        if start[q] < 0:
            continue
        args = (L, cc, roles, cluster, n_clusters, mid[q], last[1], member, k_need[q],
                single_ok[q], multi_ok, o)
        if not _fits(ub, q, *args):
            continue
        lo, hi = start[q], ub
        if _fits(lo, q, *args):
            out[q] = lo
            continue
        while hi - lo > tol * hi:
            m = 0.5 * (lo + hi)
            if m <= lo or m >= hi:
                break
            if _fits(m, q, *args):
                hi = m
            else:
                lo = m
        out[q] = lo
    return out


# --------------------------------------------------------------------------- the relaxation


def site_names(instance: Instance) -> list[str] | None:
    """The site of cluster label k of :func:`clusters` at position k (sites in order of
    first appearance); None when some GPU has no site (one cluster, no names)."""
    sites = [g.site for g in instance.gpus]
    if any(s is None for s in sites):
        return None
    return [str(s) for s in dict.fromkeys(sites)]


def clusters(instance: Instance) -> np.ndarray:
    """A partition of the GPUs for the crossing relaxation: the site labels, else one cluster.

    Any partition gives a valid bound; sites make it strong (links inside a site are fast).
    """
    names = site_names(instance)
    if names is None:
        return np.zeros(instance.n, np.int64)
    label = {s: k for k, s in enumerate(names)}
    return np.array([label[str(g.site)] for g in instance.gpus], np.int64)


#: GPUs of one site are one group (a node) when their link both ways is below this share
#: of the median of their links within the site.
NODE_LINK_SHARE = 0.5


def node_groups(comm: np.ndarray, cluster: np.ndarray) -> np.ndarray | None:
    """Per GPU the index (0, 1, ... within its site) of its group: the components of the
    GPU pairs of a site linked both ways in under :data:`NODE_LINK_SHARE` of either's
    median link within the site (the nodes of a cloud region, whose links inside are an
    order faster than those between them); a site where no pair stands out is one group.
    None when no site has two or more groups: no such structure to use. Any partition gives valid
    bounds; this one makes them strong."""
    comm = np.asarray(comm, np.float64)
    cl = np.asarray(cluster, np.int64)
    both = np.maximum(comm, comm.T)
    out = np.zeros(cl.size, np.int64)
    split = False
    for s in np.unique(cl):
        members = np.nonzero(cl == s)[0]
        if members.size < 2:
            continue
        d = both[np.ix_(members, members)].copy()
        np.fill_diagonal(d, np.inf)
        fin = np.where(np.isfinite(d), d, np.nan)
        med = np.nanmedian(fin, axis=1) if np.isfinite(fin).any() else np.full(members.size,
                                                                              np.nan)
        near = d < NODE_LINK_SHARE * np.minimum(med[:, None], med[None, :])
        # Components by label propagation (site sizes are small: at most a few hundred).
        label = np.arange(members.size)
        changed = True
        while changed:
            new = np.minimum(label, np.min(np.where(near, label[None, :], members.size),
                                           axis=1))
            changed = bool(np.any(new != label))
            label = new
        _, idx = np.unique(label, return_inverse=True)
        if np.bincount(idx).max() < 2:
            continue  # no pair stands out (one node, or a flat site): one group
        out[members] = idx
        split = split or idx.max() >= 1
    return out if split else None


def layer_cap_table(c: Coefficients, layers: int, q_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-Q layer caps, rows 0..q_max (row 0 = row 1), clipped to [0, layers]: (mid, last).

    ``mid[Q, i]`` / ``last[Q, i]``: the most layers GPU i holds as a non-last /
    the last stage of a Q-stage pipeline (:meth:`Coefficients.layer_caps`).
    """
    mid = np.zeros((q_max + 1, c.n), dtype=np.int64)
    last = np.zeros_like(mid)
    for q in range(1, q_max + 1):
        mid[q] = np.clip(c.layer_caps(q, last=False), 0, layers)
        last[q] = np.clip(c.layer_caps(q, last=True), 0, layers)
    mid[0], last[0] = mid[1], last[1]
    return mid, last


class Relaxation:
    """The stage-role relaxation of the bottleneck and of the stage-time sum.

    Built from per-layer times ``comp`` (integers or floats), the link times
    ``links[(i, j)]`` of the ordered pairs linked in *both* directions (only
    those can be consecutive stages), per-Q layer caps ``mid``/``last`` of
    :func:`layer_cap_table`, ``layers`` L, a partition ``cluster`` (see
    :func:`clusters`) and the stage overhead ``overhead`` (same units).
    Integer inputs give integer bounds valid for the integer model, float
    inputs float bounds (taken :data:`FLOAT_MARGIN` low).
    """

    def __init__(
        self,
        comp: Sequence[float] | np.ndarray,
        links: Mapping[tuple[int, int], float],
        mid: np.ndarray,
        last: np.ndarray,
        layers: int,
        cluster: np.ndarray,
        overhead: float = 0,
    ) -> None:
        comp_arr = np.asarray(comp)
        self.integer = bool(np.issubdtype(comp_arr.dtype, np.integer))
        dt = np.int64 if self.integer else np.float64
        nn = comp_arr.shape[0]
        self.L = int(layers)
        self.cc = np.ascontiguousarray(comp_arr, dt)
        self.overhead = int(overhead) if self.integer else float(overhead)
        self.mid = np.ascontiguousarray(mid, np.int64)
        self.last = np.ascontiguousarray(last, np.int64)
        self.cluster = np.ascontiguousarray(cluster, np.int64)
        self.n_clusters = int(self.cluster.max()) + 1 if nn else 1
        self.links = dict(links)
        out_links: dict[int, list[tuple[float, int]]] = {i: [] for i in range(nn)}
        for (i, j), d in self.links.items():
            out_links[i].append((d, j))

        def cheapest(i: int, inside: bool, k: int) -> float:
            ds = sorted(d for d, j in out_links[i]
                        if (self.cluster[j] == self.cluster[i]) == inside)
            return sum(ds[:k]) if len(ds) >= k else -1

        def plus(a: float, b: float) -> float:
            return -1 if a < 0 or b < 0 else a + b

        # Least link time per role: middle with 0/1/2 cross-cluster links, end with 0/1.
        self.roles = np.full((nn, 5), -1, dt)
        for i in range(nn):
            in1, in2 = cheapest(i, True, 1), cheapest(i, True, 2)
            x1, x2 = cheapest(i, False, 1), cheapest(i, False, 2)
            self.roles[i] = (in2, plus(in1, x1), x2, in1, x1)

    @classmethod
    def from_coefficients(
        cls, c: Coefficients, layers: int, cluster: np.ndarray, q_max: int | None = None
    ) -> Relaxation:
        """The float relaxation of an instance's coefficients (ms), overhead included."""
        q_max = min(c.n, layers) if q_max is None else q_max
        mid, last = layer_cap_table(c, layers, q_max)
        comm = np.asarray(c.comm_ms, dtype=float)
        both = np.isfinite(comm) & np.isfinite(comm.T)
        np.fill_diagonal(both, False)
        ii, jj = np.nonzero(both)
        links = {(int(i), int(j)): float(comm[i, j]) for i, j in zip(ii, jj, strict=True)}
        return cls(np.asarray(c.comp_ms, dtype=float), links, mid, last, layers, cluster,
                   float(c.overhead_ms))

    @property
    def q_max(self) -> int:
        return int(self.mid.shape[0] - 1)

    def tmax_bounds(
        self,
        ub: float,
        clusters: Sequence[int] | None = None,
        start: Mapping[int, float] | None = None,
    ) -> dict[int, float]:
        """Per stage count Q, a lower bound on max tau of every Q-stage plan with max tau <= ub.

        Only plans whose used clusters are exactly ``clusters`` count (None:
        any). Q missing from the result: no such plan exists. ``start[Q]``
        (when given, only those Q are tried) is a bound already known valid.

        Why it holds: take a Q-stage plan with bottleneck t. If Q = 1 its GPU
        holds all L layers as the last stage and t = L c + o. If Q >= 2 it has
        two end stages (one link each) and Q - 2 middle stages (two links each,
        to distinct GPUs); if it visits k >= 2 clusters it crosses between
        clusters at least k - 1 times, and each crossing charges a
        cross-cluster link to both of its stages (>= 2 (k - 1) charges; with
        ``clusters`` None, k is at least the fewest clusters that hold Q
        GPUs). Each stage's links cost at least the cheapest links of its role,
        so stage q holds n_q <= room(t) layers (tau_q <= t and the memory cap
        at Q), and the Q distinct GPUs in their roles hold sum n_q = L. So the
        knapsack "most layers Q GPUs in admissible roles hold within t" is
        >= L at the plan's t; it is monotone in t, hence the smallest t where
        it reaches L is <= the plan's bottleneck.
        """
        q_max = self.q_max
        qs = np.arange(q_max + 1)
        if clusters is None:
            member = np.ones(self.cc.shape[0], np.bool_)
            sizes = np.sort(np.bincount(self.cluster, minlength=self.n_clusters))[::-1]
            need = np.searchsorted(np.cumsum(sizes), qs) + 1  # clusters to hold Q GPUs
            k_need = np.maximum(2, 2 * (need - 1)).astype(np.int64)
            single_ok, multi_ok = need <= 1, True
        else:
            member = np.isin(self.cluster, list(clusters))
            k_need = np.full(q_max + 1, 2 * (len(clusters) - 1), np.int64)
            single_ok = np.full(q_max + 1, len(clusters) == 1)
            multi_ok = len(clusters) > 1
        args = (self.L, self.cc, self.roles, self.cluster, self.n_clusters, self.mid, self.last,
                member, k_need, single_ok, multi_ok)
        if self.integer:
            st = np.zeros(q_max + 1, np.int64)
            if start is not None:
                st[:] = -1
                for q, v in start.items():
                    st[q] = int(v)
            res = _tmax_bounds_int(self.L, int(ub), *args[1:], st, self.overhead)
            return {q: int(res[q]) for q in range(1, q_max + 1) if res[q] >= 0}
        st_f = np.zeros(q_max + 1)
        if start is not None:
            st_f[:] = -1.0
            for q, v in start.items():
                st_f[q] = max(float(v), 0.0)
        res_f = _tmax_bounds_float(self.L, float(ub), *args[1:], st_f, self.overhead,
                                   _FLOAT_BISECT_TOL)
        out: dict[int, float] = {}
        for q in range(1, q_max + 1):
            if res_f[q] >= 0:
                known = start is not None and float(res_f[q]) == st_f[q]
                out[q] = float(res_f[q]) if known else _below(float(res_f[q]))
        return out

    #: The name CP-SAT's model code and tests have used for :meth:`tmax_bounds`.
    bounds = tmax_bounds

    def sum_bounds(self, q_dom: Sequence[int]) -> dict[int, float]:
        """Per stage count Q in ``q_dom``, a lower bound on sum_q tau_q of every Q-stage plan.

        Why it holds: sum tau = sum n_q c_q + (link times) + Q o. Compute: the
        L layers sit on distinct GPUs within their memory caps at Q, so they
        cost at least the L cheapest layer slots (GPU i offering ``mid[Q, i]``
        slots at c_i each; the last-stage cap is smaller, so this relaxes it).
        Links: Q - 1 consecutive pairs, each charging d_ij + d_ji; Q GPUs span
        at least k clusters (the fewest, largest first, that hold Q GPUs), and
        a path over k clusters has k - 1 cross-cluster pairs.
        """
        pair = {(i, j): d + self.links[(j, i)] for (i, j), d in self.links.items()}
        p_min = min(pair.values(), default=0)
        p_x = min((v for (i, j), v in pair.items() if self.cluster[i] != self.cluster[j]),
                  default=p_min)
        sizes = np.sort(np.bincount(self.cluster, minlength=self.n_clusters))[::-1]
        order = np.argsort(self.cc, kind="stable")
        out: dict[int, float] = {}
        for q in q_dom:
            left, comp = self.L, 0
            for i in order:
                take = min(left, int(self.mid[q, i]))
                comp += take * self.cc[i]
                left -= take
            need = int(np.searchsorted(np.cumsum(sizes), q)) + 1
            val = comp + (need - 1) * max(p_x, p_min) + (q - need) * p_min + q * self.overhead
            out[q] = int(val) if self.integer else _below(float(val))
        return out


def t_iter_bounds(
    tlb: Mapping[int, float], slb: Mapping[int, float], micro_batches: float
) -> dict[int, float]:
    """Per Q, T_iter >= max(slb, tlb) + (M - 1) tlb.

    T = sum tau + (M - 1) max tau with M >= 1; sum tau >= slb(Q) and, being a
    sum of non-negative terms one of which is the maximum, sum tau >= max tau
    >= tlb(Q). Every term is monotone, so the bounds combine.
    """
    return {q: max(slb.get(q, tlb[q]), tlb[q]) + (micro_batches - 1) * tlb[q] for q in tlb}


# --------------------------------------------------------------------------- simple bounds


def layers_within(theta: float, fixed: float, comp: float, cap: int) -> int:
    """Most layers (<= cap) a stage with per-layer time ``comp`` holds when
    ``n comp + fixed <= theta`` (0 if none; ``fixed`` inf: none).

    The integer consequence of a bottleneck cap theta: every stage has
    tau = n c + (its links) + o <= theta, so with ``fixed`` a lower bound on
    its links plus o, n is at most this.
    """
    if not math.isfinite(fixed) or cap < 1 or theta < fixed + comp:
        return 0
    n = min(cap, max(1, math.floor((theta - fixed) / comp)))
    while n > 1 and n * comp + fixed > theta:
        n -= 1
    while n < cap and (n + 1) * comp + fixed <= theta:
        n += 1
    return int(n)


def capacity_bound(
    comp: np.ndarray, comm: np.ndarray, overhead: float, usable: Sequence[int],
    cap_any: np.ndarray, single_cap: np.ndarray, layers: int,
) -> float:
    """A lower bound on the bottleneck of every plan (ms); inf if no plan can hold the layers.

    Either one GPU holds all L layers (``single_cap[i] >= L``; bottleneck
    L c_i + o), or every stage sends at least one activation: with bottleneck
    theta, GPU i then holds at most floor((theta - o - min_j d_ij) / c_i)
    layers (and ``cap_any[i]``, its largest cap at any Q), the j ranging over
    GPUs linked with i both ways, and together they hold L. The smallest such
    theta (bisection on the monotone capacity) or the best single-GPU time,
    whichever is smaller. :meth:`Relaxation.tmax_bounds` implies it (its roles
    cost at least the cheapest link and it fills only Q of the GPUs); it is
    kept as a floor that costs nothing.
    """
    L = int(layers)
    both = np.isfinite(comm) & np.isfinite(comm.T)
    np.fill_diagonal(both, False)
    single = min((L * comp[i] + overhead for i in usable if single_cap[i] >= L),
                 default=math.inf)
    linked = [i for i in usable if both[i].any()]
    if not linked:
        return _below(float(single)) if math.isfinite(single) else math.inf
    cmin = {i: float(comm[i, both[i]].min()) + overhead for i in linked}

    def capacity(theta: float) -> int:
        return sum(layers_within(theta, cmin[i], float(comp[i]), int(cap_any[i]))
                   for i in linked)

    lo = 0.0
    hi = max(cmin[i] + comp[i] * L for i in linked)
    if capacity(hi) < L:
        return _below(float(single)) if math.isfinite(single) else math.inf
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if capacity(mid) >= L:
            hi = mid
        else:
            lo = mid
    # lo has too little capacity, so every multi-stage plan has bottleneck > lo.
    return _below(float(min(single, lo)))


def arc_bottleneck(comp: np.ndarray, comm: np.ndarray, overhead: float, i: int, j: int) -> float:
    """A lower bound on the bottleneck of every plan in which stage j directly follows i.

    Stage i holds at least one layer and sends d_ij forward; stage j holds at
    least one layer and sends d_ji back; both pay o.
    """
    return float(max(comp[i] + comm[i, j], comp[j] + comm[j, i]) + overhead)


def objective_lower_bound(
    c: Coefficients,
    layers: int,
    a: float,
    b: float,
    tlb: Mapping[int, float],
    slb: Mapping[int, float],
    mid: np.ndarray,
) -> float:
    """A lower bound on ``a T_iter + b E_iter`` (a, b >= 0) over every feasible plan.

    ``tlb``/``slb``: per-Q bounds of :class:`Relaxation` (float ms); Q missing
    from ``tlb`` has no plan. For a Q-stage plan, T >= t_Q of
    :func:`t_iter_bounds`; the Q distinct GPUs draw at least the Q smallest
    idle powers, so T sum idle >= t_Q (sum of the Q smallest); the L layers
    cost at least the L cheapest slots of active energy per layer
    (dyn_i c_i, at most ``mid[Q, i]`` on GPU i). The minimum over Q. Inf if
    no Q is possible.
    """
    M = float(c.micro_batches)
    t_q = t_iter_bounds(tlb, slb, M)
    idle = np.sort(np.asarray(c.idle_w, dtype=float))
    e_layer = np.asarray(c.dyn_w, dtype=float) * np.asarray(c.comp_ms, dtype=float)
    order = np.argsort(e_layer, kind="stable")
    best = math.inf
    for q, t in t_q.items():
        val = a * t
        if b > 0:
            left, dyn = int(layers), 0.0
            for i in order:
                take = min(left, int(mid[q, i]))
                dyn += take * e_layer[i]
                left -= take
            val += b * (t * float(idle[:q].sum()) / 1e3 + M * dyn / 1e3)
        best = min(best, val)
    return _below(best) if math.isfinite(best) else math.inf


def t_iter_cap(
    objective_ub: float, c_t: float, c_e: float, idle_min: float, dyn_layer_min: float,
    micro_batches: float, layers: int,
) -> float:
    """The largest T_iter a plan with objective <= ``objective_ub`` can have (ms; inf: none known).

    objective = c_t T + c_e E and E = T sum idle / 1000 + M sum dyn c n / 1000
    >= (T idle_min + M L dyn_layer_min) / 1000 (a plan uses at least one GPU;
    each of its L layers costs at least the least active energy per layer),
    so objective >= (c_t + c_e idle_min / 1000) T + c_e M L dyn_layer_min / 1000.
    The overhead o adds to T only, so this holds for every o.
    """
    slope = c_t + c_e * idle_min / 1e3
    if not (slope > 0 and math.isfinite(objective_ub)):
        return math.inf
    return (objective_ub - c_e * micro_batches * layers * dyn_layer_min / 1e3) / slope


def tmax_worst(comp_max: float, comm_max: float, layers: int, overhead: float) -> float:
    """An upper bound on every stage time: at most L layers on the slowest GPU, two links, o."""
    return float(comp_max * layers + 2 * comm_max + overhead)


def t_iter_worst(
    comp_max: float, comm_max: float, layers: int, q_max: int, micro_batches: float,
    overhead: float,
) -> float:
    """An upper bound on T_iter of every plan with at most ``q_max`` stages.

    sum tau <= L c_max + 2 (Q - 1) d_max + Q o (each link is charged by its two
    end stages, one per direction) and max tau <= :func:`tmax_worst`.
    """
    return float(
        comp_max * layers + 2 * (q_max - 1) * comm_max + q_max * overhead
        + (micro_batches - 1) * tmax_worst(comp_max, comm_max, layers, overhead)
    )
