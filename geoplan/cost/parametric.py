"""The site-aware, bottleneck-parametric lower bound on the objective.

Notation of :mod:`geoplan.cost.bounds`: ``tau_q = n_q c_g + (its links) + o``,
``T = S + (M - 1) Z`` with ``S = sum tau`` and ``Z = max tau``, and
``E = T P / 1000 + M D / 1000`` with ``P`` the idle power of the used GPUs and
``D = sum dyn_g c_g n_g``. The objective is ``a T + b E`` (a, b >= 0).

**Boxes.** The plans are partitioned into boxes ``Q in [qa, qb]`` (stage
count) by ``Z in [za, zb]`` (bottleneck). In a box every stage satisfies
``tau <= zb`` and holds at most ``cap(qa)`` layers (memory caps shrink with
Q), and ``T >= S + (M - 1) za``. So ``min S`` over the *role relaxation*
below, with those caps, bounds T from below in the box; a best-first search
splits the box of smallest bound (Q first while the caps differ across its Q
range, then Z), so the global bound, the minimum over open boxes, rises.

**The role relaxation.** Give each used GPU a role: its send to the previous
stage is of kind none (first stage), intra-site or inter-site, and so is its
send to the next stage; a role's price is the least its sends can cost
(intra priced at the cheapest link of any kind, inter at the cheapest
inter-site link, a middle's two sends at its two cheapest links to distinct
GPUs, two inter sends at its two cheapest inter-site links). A run is a
maximal stretch of consecutive stages on one site; its ends are the first
stage (F), the last stage (L), an inter-site start (S: send back inter) and
an inter-site end (X: send forward inter). The plans split in two cases,
each bounded by its own DP and the box bound is the smaller:

* *single-site* plans are one run F..L: every send is intra-site;
* *multi-site* plans (two or more runs) ask of each used site at most one
  end of each kind: S..X (a site with neither F nor L), F..X (F's site),
  S..L (L's site), or both F..X and S..L (F and L on the same site).

Why every multi-site plan maps into its case at no higher price: on each
site, append every run with neither F nor L (an S..X run) to the site's
F..X run if it has one, else put it in front of its S..L run if it has one,
else join the site's S..X runs into one. Each join puts a run ending in X
before a run starting with S and turns that X and that S into intra-site
sends, priced no higher; the ends that remain are those listed (the DP also
admits a few more combinations of ends, which only lowers the bound). Stage times
only fall, so the caps ``tau <= zb`` still hold. The split matters: merged
into one F..L run, a site visited before and after another site would lose
its two inter-site ends, and with them the two stages whose inter-site
sends keep them out of a small bottleneck (geo pools, where an inter-site
send alone takes most of a stage time). A run of two or more GPUs has its
two ends on distinct GPUs and its middles in between; a one-GPU run is one
GPU holding both ends, so middles on a site need a run of two or more GPUs.

After the joins, a GPU holding both an S and an X end (a one-GPU S..X run)
is the only GPU its site uses: a site with F or L has no S..X run left, and
one without has a single run. The DP seals such a site.

An exact DP over GPUs (grouped by site) with state (layers placed, the
site's mask of run ends and whether middles have a run to sit in,
first/last placed) solves each case; each GPU's cost is linear in its layer
count, so each transition is a sliding-window minimum (O(L)).

**Transition prices.** Pricing each inter-site send at its GPU's cheapest
inter-site link ignores where the plan goes: the send forward of a run
ending at site a and the send back of the run starting at site b are one
round trip. :mod:`geoplan.cost.transitions` has two admissible forms of
prices that no plan's transitions undercut (per-site potentials, and walk
prices per site and end set, bounded by the cheapest walk through the used
sites); both stay above floors that keep the joins above free. Stage caps
keep the cheapest-link prices (a stage's own sends). Any admissible prices
give a valid bound; :meth:`_Boxes.tune_transitions` picks them for the
least box by Kelley's cutting planes (the minimiser's end sets per site are
the supergradient), and the search re-prices each box as it comes up,
keeping the better of its old and new bounds.

**Site paths.** For the plans that visit given sites once each in a given order
(``path``; :mod:`geoplan.cost.site_branching` parts the plans so), each site holds
one run and its neighbours are known: no runs are joined, intra-site sends are
priced by intra-site links, an inter-site send back by the GPU's cheapest link to
the previous site and one forward by its cheapest link to the next, caps included;
only the first site may hold the first stage and only the last the last stage. No
transition prices are needed, and the minimiser is itself a pipeline
(:func:`path_plan`; the DP records its choices on request, :func:`_traceback`). With
only a *prefix* of the order known (``prefix``: the plans visiting every site once,
those sites first), each site still holds one run, and a send is priced by the cheapest
link to any site it may go to: the prefix's by their known neighbours, the last prefix
site's forward and the other sites' sends by the sites outside the prefix (and the last
prefix site, for a send back).

**Site walks.** For the plans whose runs visit the sites in a given order with a site
visited twice (a *walk*), joining that site's two runs would turn two sends to known
sites into intra-site ones, and the join is what weakens the bound (metro N=64 L=48
lambda 1, instance seed 73: the walk B H A H, joined, stayed 0.45 % below the best
plan). So :func:`_walk_dp` keeps every visit's run apart: its state per site is the
tuple of its runs' states (ends placed, middles; a site is visited at most
:data:`MAX_VISITS` times), each GPU takes a role in one of the runs, priced by that
run's neighbouring sites. Its minimiser is a pipeline too. With only the walk's prefix
and suffix known (``gapped``: the visits between them a multiset in unknown order), the
same DP prices each middle visit's sends by the cheapest link to a site that may be next
to it (:func:`_visit_tables`). A site's middle visits are then twins (same neighbours, same
ends), so the DP keeps their runs' states as a multiset, an exact reduction.

**Runs kept apart.** For the plans visiting a given site x twice or more (its site
walk unknown), join x's runs into two rather than one (each of the others to one of
them, by the joins above) and every other site's as before: :func:`_double_step` keeps
x's two runs apart, each with a start (F or S) and an end (L or X) of its own, priced
and capped like any run end, so x's second visit costs its two inter-site sends. The
site is priced as the joined site would be (its end set by whether it holds F and L),
and it must be used. Several sites may be kept apart so (the DP closes each site before
the next, so that costs no states). For a site asked to hold three runs or more
(``apart_runs``) :func:`_multi_step` counts its run starts and run ends instead of telling
its runs apart (states grow with the count, not its power): every run's ends are priced
and capped, runs beyond the count are joined to the others. With ``once`` only plans
visiting each site once are counted: each site holds one run (masks F..X, S..L, S..X) and
the walk prices are bounded by paths.

**Stage count.** The box's Q range enters by Lagrange multiplier: with a
price ``mu`` per stage, ``V(mu) = min (cost + mu k)`` over configurations of
any stage count k gives ``cost >= V(mu) - mu qb`` (mu >= 0) or
``V(mu) - mu qa`` (mu < 0) for every configuration with k in [qa, qb]; mu is
searched on the stage count of the minimiser (V is concave in mu).

**Energy (b > 0).** In a box, ``X = S + (M - 1) za <= T`` and both X and P
have lower bounds (X_lo, P_lo, from the same DP with the costs S and P), so
``X P >= X_lo P + P_lo X - X_lo P_lo`` (McCormick: (X - X_lo)(P - P_lo) >= 0)
and ``a T + b E >= (a + b P_lo / 1000) X + (b X_lo / 1000) P + (b M / 1000) D
- b X_lo P_lo / 1000``, which is separable over GPUs: one more DP.

Float results are taken :data:`~geoplan.cost.bounds.FLOAT_MARGIN` low; stage
caps admit ``n`` up to a relative 1e-12 above ``zb`` so rounding never
excludes a plan.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from geoplan.cost import bounds, node_runs, transitions
from geoplan.cost.coefficients import Coefficients
from geoplan.cost.weights import ObjectiveWeights
from geoplan.errors import InputError

if TYPE_CHECKING:
    from geoplan.model.instance import Instance

__all__ = ["DEFAULT_SHARE", "PROGRESS_S", "PROOF_TOLERANCE", "START_STALL", "Box", "BoxTables",
           "ParametricBound", "PlanClasses", "box_tables", "instance_bound", "parametric_bound",
           "path_minimisers", "path_plan", "proves", "refine_by_sites", "role_prices",
           "two_level_bound"]

_INF = math.inf
#: A plan whose objective is within this relative distance above a proven bound counts as
#: proven optimal (the MILP's and CP-SAT's own rule for their bounds).
PROOF_TOLERANCE = 1e-9
#: The budget share the exact solvers give this bound by default (it returns as soon as
#: its search ends, so the share matters only where it is slow: N >= 128, lambda < 1).
#: There it is often the only bound that moves and the search around it finds no better
#: plan: metro N=128 L=96 lambda 0.5, instance seed 53, MILP 120 s: 2.41 % at 0.3 (the
#: bound cut at 34 s), 0.70 % at 0.6 (it ends at 52 s), the same plan both times.
DEFAULT_SHARE = 0.6
#: Seconds between two progress reports of a search (``parametric_bound(progress=...)``).
PROGRESS_S = 1.0
_CAP_TOL = 1e-12
#: Boxes narrower than this (relative Z width) are not split further; the finer one
#: only once the box's bound is within _NEAR of the incumbent, where the last digits
#: decide a proof (PROOF_TOLERANCE); elsewhere the coarse one bounds the work.
_Z_RESOLUTION = 1e-6
_Z_RESOLUTION_NEAR = 1e-10
_NEAR = 1e-6
#: A box whose last splits (this many in a row) raised no bound is not split further.
_MAX_STALL = 6
_STALL_TOL = 1e-9
#: A split raises the bound when it closes this share of the gap to the incumbent, or
#: without one, this relative amount.
_GAIN_SHARE = 1e-3
_STALL_TOL_FREE = 1e-6
#: At most this many Q splits of stalled boxes per search: a few close a weak
#: stage-count multiplier; a bound that rises only by sweeping Z (lambda = 0, small M)
#: would otherwise keep splitting until its deadline.
_MAX_Q_SPLITS = 64
#: The stall count a part of a Q split starts with. Inheriting its parent's count made a
#: part final without one Z split of its own (metro N=10 L=12 seed 5: 8 % short of the
#: optimum; with 3, exact).
_Q_STALL = 3
#: The stalled splits a start box counts as made (by default).
START_STALL = _Q_STALL
#: At most this many stalled boxes within _NEAR_STALL of the incumbent are split all
#: the same.
_NEAR_SPLITS = 256
_NEAR_STALL = 1e-4
#: Kelley iterations of :meth:`_Boxes.tune_transitions`, and the relative rise of the
#: cutting-plane model below which it stops.
_KELLEY_ITERS = 24
_KELLEY_TOL = 1e-7
#: The first tuning round comes after this many boxes (or once the least box is final,
#: or half of ``max_boxes``). At 2-20 s on metro N=64 and 128, L=96 (instance seed 53) it
#: gave bounds as high as tuning at half the deadline, or higher (N=64 lambda 1 at 2 s:
#: 565.2 against 396.5, where tuning at 1 s took the rest of the time).
_TUNE_AFTER = 128
#: At most this many tuning rounds per search.
_TUNE_ROUNDS = 8
#: Walk prices (one constraint per used site set, first and last site) up to this many
#: sites; potentials (one per site pair) above.
_WALK_SITES = 8
#: Open boxes whose minimisers' sites are read for :attr:`ParametricBound.site_sets`
#: (one once the deadline is past).
HINT_BOXES = 4
#: At most this many tangent intersections per stage-count multiplier search
#: (:meth:`_Boxes._lagrange`), and the relative distance to the cutting-plane top at
#: which it stops.
_MU_ITERS = 8
_MU_TOL = 1e-9
#: The first two multipliers tried lie this far (relative) either side of the last
#: search's best on the same Q range (:meth:`_Boxes._search_mu`).
_MU_HINT_BAND = 0.05
#: The relative margin by which a multiplier search's cutoffs stay clear of the bound
#: they decide (:meth:`_Boxes._evaluate_case`).
_CUT_MARGIN = 1e-9
#: With energy in the objective, a box of a search from start boxes is first tried for
#: closing by one multiplier search from its parent's stage-time bound
#: (:meth:`_Boxes._quick_close`).
_QUICK_CLOSE = True
#: The share of :func:`two_level_bound`'s time its sites' own searches get (they are
#: small pools: 1.3-2.9 s per region at cloud N=512).
_SITE_PARTS_SHARE = 0.3
#: The same for a site whose nodes the node-run bound takes (:mod:`geoplan.cost.node_runs`:
#: exact, 1-4 s per region at cloud N=512, so it is worth the time where it runs long).
_NODE_PARTS_SHARE = 0.6
#: The price version of a start box not yet evaluated.
_PENDING = -1

# Roles: (kind of the send back, kind of the send forward); 0 none, 1 intra, 2 inter.
_ROLE_PREV = np.array([1, 0, 2, 1, 1, 0, 0, 2, 2], np.int64)
_ROLE_NEXT = np.array([1, 1, 1, 0, 2, 0, 2, 0, 2], np.int64)
N_ROLES = 9
#: The DP slot of a site sealed by a one-GPU S..X run (after the 48 slots 3 m + f).
_SEALED = 48

# The two plan cases, as (roles used, masks a site may close with); masks:
# bit 0 first, bit 1 last, bit 2 inter-site start, bit 3 inter-site end.
_SINGLE_SITE = (np.array([1, 1, 0, 1, 0, 1, 0, 0, 0], np.bool_),
                np.array([m == 3 for m in range(16)], np.bool_))
_MULTI_SITE = (np.array([1, 1, 1, 1, 1, 0, 1, 1, 1], np.bool_),
               np.array([m in (6, 9, 12, 15) for m in range(16)], np.bool_))
_CASES = (_SINGLE_SITE, _MULTI_SITE)
#: Multi-site plans that visit each site once: a site holds one run (F..X, S..L, S..X).
_ONCE_CLOSE = np.array([m in (6, 9, 12) for m in range(16)], np.bool_)
#: A site whose runs are kept apart closes as a multi-site plan's site may.
_APART_CLOSE = _MULTI_SITE[1]


def role_prices(comm: np.ndarray, cluster: np.ndarray,
                path: tuple[int, ...] | None = None,
                neighbours: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] | None = None
                ) -> np.ndarray:
    """Per GPU and role (the nine ``(prev, next)`` kinds), the least its sends cost (inf: none).

    Only pairs linked both ways can be consecutive stages, so only those count.
    ``path``: cluster labels, for the plans that visit those sites once each in that
    order: an inter-site send back then goes to the previous site, one forward to the
    next, and intra-site sends stay on the site (no runs are joined). ``neighbours``:
    the same for plans visiting each site once in an order known in part: per cluster
    label, the labels its previous and its next site may have (a send is priced by the
    cheapest link to any of them).
    """
    if path is not None:
        neighbours = {int(k): ((int(path[i - 1]),) if i else (), (int(path[i + 1]),)
                               if i + 1 < len(path) else ()) for i, k in enumerate(path)}
    n = comm.shape[0]
    both = np.isfinite(comm) & np.isfinite(comm.T)
    np.fill_diagonal(both, False)
    out = np.full((n, N_ROLES), _INF)
    if neighbours is not None:
        to_site = _links_to_sites(comm, cluster, both)
    for g in range(n):
        js = np.nonzero(both[g])[0]
        same = cluster[js] == cluster[g]
        if neighbours is None:
            d_all = np.sort(comm[g, js])
            d_back = np.sort(comm[g, js[~same]])
            c_b = c_f = d_back[0] if d_back.size else _INF
            # Two inter-site sends: to distinct GPUs.
            x2 = d_back[0] + d_back[1] if d_back.size >= 2 else _INF
        else:
            d_all = np.sort(comm[g, js[same]])
            back, fwd = neighbours.get(int(cluster[g]), ((), ()))
            c_b, c_f = (min((float(to_site[k][g]) for k in ks), default=_INF)
                        for ks in (back, fwd))
            x2 = c_b + c_f  # one send back, one forward
        c_in = d_all[0] if d_all.size else _INF
        m2 = d_all[0] + d_all[1] if d_all.size >= 2 else _INF
        out[g] = (m2, c_in, c_b + c_in, c_in, c_in + c_f, 0.0, c_f, c_b, x2)
    return out


def _links_to_sites(comm: np.ndarray, cluster: np.ndarray, both: np.ndarray
                    ) -> dict[int, np.ndarray]:
    """Per cluster label, each GPU's cheapest link (linked both ways, ``both``) to a GPU
    of that site (one pass, not one per GPU and send)."""
    linked = np.where(both, comm, _INF)
    return {int(k): linked[:, cluster == k].min(axis=1) for k in np.unique(cluster)}


#: What :func:`_walk_dp` reads of a walk (:func:`_visit_tables`): runs per position, prices
#: and last-stage flags per GPU and run, twin flags per GPU and run.
WalkTables = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

#: A visit of :func:`_visit_tables`: its site's cluster label, the labels the site
#: before it and the one after it may have, whether it may hold the first stage (its send
#: back then may cost nothing) and whether it may hold the last (its send forward).
Visit = tuple[int, tuple[int, ...], tuple[int, ...], bool, bool]


def _walk_tables(comm: np.ndarray, cluster: np.ndarray, order: np.ndarray,
                 walk: tuple[int, ...]) -> WalkTables:
    """What :func:`_walk_dp` needs of the plans whose runs visit the sites in the order
    ``walk`` (each site at most :data:`MAX_VISITS` times): :func:`_visit_tables` of its
    visits, each between its neighbours on the walk."""
    last = len(walk) - 1
    return _visit_tables(comm, cluster, order, [
        (int(k), (int(walk[i - 1]),) if i else (), (int(walk[i + 1]),) if i < last else (),
         i == 0, i == last) for i, k in enumerate(walk)])


def _visit_tables(comm: np.ndarray, cluster: np.ndarray, order: np.ndarray,
                  visits: list[Visit], joined: int | None = None) -> WalkTables:
    """What :func:`_walk_dp` needs of the plans made of these visits (one run each, a site
    visited at most :data:`MAX_VISITS` times): per position the runs its site holds; per
    GPU, run of its site and walk role the least the role's sends cost (intra-site sends
    on the site, the send back by the cheapest link to a site that may come before the
    visit, forward to one that may come after; inf: not allowed); per GPU and run 1 if
    the run ends with the last stage, 2 if it may (0: not); per GPU and run 1 if the run
    is its site's previous run's twin (the same visit: same neighbours, same ends).

    ``joined``: the index in ``visits`` of a run that stands for two visits of its site
    joined (:mod:`geoplan.cost.site_branching`, "Four visits"): its intra-site sends
    are priced by the cheapest link of any kind, since the join turned one inter-site
    send of each of the two into an intra-site one."""
    n = comm.shape[0]
    both = np.isfinite(comm) & np.isfinite(comm.T)
    np.fill_diagonal(both, False)
    by_site: dict[int, list[Visit]] = {}
    joined_at: tuple[int, int] | None = None  # (site, its run)
    for i, v in enumerate(visits):
        if i == joined:
            joined_at = (v[0], len(by_site.get(v[0], [])))
        by_site.setdefault(v[0], []).append(v)
    most = max(len(v) for v in by_site.values())
    if most > MAX_VISITS:
        raise ValueError(f"a site walk visits each site at most {MAX_VISITS} times: {visits}")
    prices = np.full((n, most, _WALK_ROLES), _INF)
    is_last = np.zeros((n, most), np.int8)
    twin = np.zeros((n, most), np.int8)
    to_site = _links_to_sites(comm, cluster, both)
    for g in range(n):
        js = np.nonzero(both[g])[0]
        d_all = np.sort(comm[g, js[cluster[js] == cluster[g]]])
        c_in = d_all[0] if d_all.size else _INF
        m2 = d_all[0] + d_all[1] if d_all.size >= 2 else _INF
        here = by_site.get(int(cluster[g]), [])
        for j, (_, back, fwd, first, last) in enumerate(here):
            c_b, c_f = (min((float(to_site[k][g]) for k in ks if k in to_site), default=_INF)
                        for ks in (back, fwd))
            c_b = 0.0 if first else c_b
            c_f = 0.0 if last else c_f
            if (int(cluster[g]), j) == joined_at:
                d_any = np.sort(comm[g, js])
                c_j = d_any[0] if d_any.size else _INF
                m2_j = d_any[0] + d_any[1] if d_any.size >= 2 else _INF
                prices[g, j] = (m2_j, c_b + c_j, c_j + c_f, c_b + c_f)
            else:
                prices[g, j] = (m2, c_b + c_in, c_in + c_f, c_b + c_f)
            is_last[g, j] = (2 if fwd else 1) if last else 0
            twin[g, j] = j > 0 and here[j] == here[j - 1] and joined_at not in (
                (int(cluster[g]), j), (int(cluster[g]), j - 1))
    runs = np.array([len(by_site.get(int(cluster[g]), [])) for g in order], np.int64)
    return runs, prices, is_last, twin


@njit(cache=True)
def _window(src, srck, srce, dst, dstk, dste, L, cap, sigma, kappa, dq,
            rec, rs, rb, rr, s_id, r_id):  # pragma: no cover
    """dst[l] = min(dst[l], kappa + sigma l + min_{l-cap <= m <= l-1} (src[m] - sigma m)), k + 1
    (and the argmin's mask code carried along).

    ``dq``: scratch of at least L + 1 integers (the monotone queue). With ``rec``, each
    improved ``l`` records the source state ``s_id``, the argmin ``m`` and the role.
    """
    head = 0
    tail = 0
    for ell in range(1, L + 1):
        m = ell - 1
        v = src[m]
        if v < np.inf:
            key = v - sigma * m
            while tail > head and src[dq[tail - 1]] - sigma * dq[tail - 1] >= key:
                tail -= 1
            dq[tail] = m
            tail += 1
        while tail > head and dq[head] < ell - cap:
            head += 1
        if tail > head:
            b = dq[head]
            val = src[b] - sigma * b + sigma * ell + kappa
            if val < dst[ell]:
                dst[ell] = val
                dstk[ell] = srck[b] + 1
                dste[ell] = srce[b]
                if rec:
                    rs[ell] = s_id
                    rb[ell] = b
                    rr[ell] = r_id


@njit(cache=True)
def _layer_cap(mem, price, c, o, z_hi, L):  # pragma: no cover - compiled
    """The most layers a GPU of per-layer time ``c`` holds in a stage of time at most
    ``z_hi`` whose sends cost ``price`` (and at most its memory cap ``mem``, and L)."""
    room = z_hi * (1.0 + 1e-12) - price - o
    if room < c:
        return 0
    cap = int(room // c) if c > 0 else L
    while cap > 1 and cap * c + price + o > z_hi * (1.0 + 1e-12):
        cap -= 1
    if cap > mem:
        cap = mem
    if cap > L:
        cap = L
    return cap


@njit(cache=True)
def _trace_buffers(n_pos, n_st, n_close, L, trace):  # pragma: no cover - compiled
    """The trace records of a GPU-by-GPU DP over ``n_st`` states (:func:`_relaxation_dp`,
    :func:`_walk_dp`); without ``trace``, placeholders of one position and layer count
    (_window never writes them)."""
    n_p = n_pos if trace else 1
    n_ell = L + 1 if trace else 1
    TS = np.full((n_p, n_st, n_ell), -1, np.int32)
    TB = np.zeros((n_p, n_st, n_ell), np.int32)
    TR = np.zeros((n_p, n_st, n_ell), np.int32)
    TC = np.full((n_p, n_close, n_ell), -1, np.int32)
    return TS, TB, TR, TC


#: Work arrays of the DPs by (states, L) (:func:`_work`); cleared when it holds this many.
_WORK: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}
_WORK_SIZES = 8


def _work(n_st: int, L: int) -> tuple[np.ndarray, ...]:
    """The value, stage count and mask code per state and layer count (V, K, E), their
    next-position copies (W, KW, EW), the window's queue, and the rows that may hold a
    finite value in V (alive) and in W (nalive), for a DP over ``n_st`` states.

    Kept from call to call with every row dead and inf (each DP leaves them so,
    :func:`_finish`): fresh arrays of 2,197 states (a site visited three times) took 2.2
    ms of a 3.2 ms walk DP at N=64, L=48 (a page fault per 4 KB). A DP call holds the GIL
    throughout, so threads never share them mid-call."""
    key = (n_st, L)
    work = _WORK.get(key)
    if work is None:
        if len(_WORK) >= _WORK_SIZES:
            _WORK.clear()
        V = np.full((n_st, L + 1), np.inf)
        K = np.zeros((n_st, L + 1), np.int64)
        dead = np.zeros(n_st, np.bool_)
        work = _WORK[key] = (V, K, K.copy(), V.copy(), K.copy(), K.copy(),
                             np.empty(L + 1, np.int64), dead, dead.copy())
    return work


def _walk_states(prices: np.ndarray) -> int:
    """:func:`_walk_dp`'s states for its ``prices``: each of a site's runs in one of
    _RUN_STATES."""
    return int(_RUN_STATES ** prices.shape[1])


def _relaxation_states(double: np.ndarray) -> int:
    """:func:`_relaxation_dp`'s states for its ``double``: site slots, kept-apart pairs or
    a site's run counts (:func:`_multi_slots`), by the first/last flags."""
    most = int(double.max(initial=0))
    return 4 * max(_SEALED + 1, _PAIR_STATES if (double == 2).any() else 0,
                   _multi_slots(most) if most > 2 else 0)


@njit(cache=True)
def _start(V, K, E, alive):  # pragma: no cover - compiled
    """State 0 at 0 layers: nothing placed, at no cost (every other row is dead and inf)."""
    V[0, 0] = 0.0
    K[0, 0] = 0
    E[0, 0] = 0
    alive[0] = True


@njit(cache=True)
def _finish(V, K, E, W, alive, nalive, row, L):  # pragma: no cover - compiled
    """A DP's value, stage count and mask code at state ``row`` and L layers (0, 0 when
    unreached: K and E of such a row are left from earlier calls); the work arrays left
    as the next DP expects them: every row dead and inf (a dead row is inf in its own
    array during a DP, so only rows alive in either move)."""
    v, k, e = V[row, L], K[row, L], E[row, L]
    if not v < np.inf:
        k = 0
        e = 0
    for s in range(V.shape[0]):
        if alive[s] or nalive[s]:
            V[s, :] = np.inf
            W[s, :] = np.inf
            alive[s] = False
            nalive[s] = False
    return v, k, e


@njit(cache=True)
def _next_position(V, K, E, W, KW, EW, alive, nalive):  # pragma: no cover - compiled
    """Start the next GPU's step: W holds V (the GPU unused) on every row alive in either."""
    for s in range(V.shape[0]):
        if alive[s] or nalive[s]:
            W[s, :] = V[s, :]
            KW[s, :] = K[s, :]
            EW[s, :] = E[s, :]
        nalive[s] = alive[s]


@njit(cache=True)
def _relaxation_dp(L, order, site_last, site_pow, site_price, comp, prices, cprices,
                   capmid, caplast, z_hi, o, ws, wp, wd, idle, dyn, mu, role_on,
                   close_ok, force, double, trace, work):  # pragma: no cover - compiled
    """min over role configurations of sum (ws tau + wp idle + wd dyn c n + mu) + ws
    (the closing sites' ``site_price[pos, mask]``); (value, k, the minimiser's mask code:
    the sum over sites of the mask it closes with times ``site_pow`` at its last position).

    State: layers placed, the site's slot ``3 m + f`` and the first/last flags
    gl (bit 0 first placed, bit 1 last placed). ``m`` is the mask of run ends
    placed in the site (bit 0 first, bit 1 last, bit 2 an inter-site start,
    bit 3 an inter-site end; each at most once per site); ``f`` is 0 (no
    middle, no end of a run of two or more GPUs), 1 (middles placed, no such
    end yet) or 2 (such an end placed: middles have a run to sit in). Only
    roles with ``role_on`` are used; a site closes with mask m only if
    ``close_ok[m]`` and f != 1. A site with ``force`` at its last position must be used
    (its slot-0 states, nothing placed on it, end there). A site with ``double`` 2 at its
    positions holds two runs kept apart (:func:`_double_step`; it must be used), one with
    ``double`` k > 2 holds k runs or more (:func:`_multi_step`; it must be used).

    With ``trace``, also the choices of the minimiser (:func:`_traceback`): per position,
    state and layer count the source state (-1: this GPU unused), its layer count and
    the role; per position, gl state and layer count the state its site closed from.
    """
    n_slot = _SEALED + 1
    V, K, E, W, KW, EW, dq, alive, nalive = work
    TS, TB, TR, TC = _trace_buffers(order.shape[0], V.shape[0], 4, L, trace)
    _start(V, K, E, alive)
    caps = np.zeros(9, np.int64)
    kappas = np.zeros(9)
    for pos in range(order.shape[0]):
        g = order[pos]
        _next_position(V, K, E, W, KW, EW, alive, nalive)
        c = comp[g]
        sigma = (ws + wd * dyn[g]) * c
        _role_terms(caps, kappas, g, c, prices, cprices, capmid, caplast, z_hi, o, ws, wp,
                    idle, mu, role_on, L)
        if double[pos] == 2:
            _double_step(V, K, E, W, KW, EW, alive, nalive, dq, L, pos, sigma, caps, kappas,
                         TS, TB, TR, trace)
        elif double[pos] > 2:
            _multi_step(V, K, E, W, KW, EW, alive, nalive, dq, L, pos, sigma, caps, kappas,
                        TS, TB, TR, trace, double[pos])
        else:
            for r in range(9):
                if caps[r] < 1:
                    continue
                pk = _ROLE_PREV[r]
                nk = _ROLE_NEXT[r]
                bits = 0
                if pk == 0:
                    bits |= 1
                elif pk == 2:
                    bits |= 4
                if nk == 0:
                    bits |= 2
                elif nk == 2:
                    bits |= 8
                middle = pk == 1 and nk == 1
                multi = (pk == 1) != (nk == 1)  # an end of a run of two or more GPUs
                sealed = pk == 2 and nk == 2  # a one-GPU S..X run: the site's only GPU
                for slot in range(_SEALED):
                    if sealed and slot != 0:
                        break
                    m = slot // 3
                    f = slot - 3 * m
                    if m & bits:
                        continue
                    nf = f
                    if multi:
                        nf = 2
                    elif middle and f == 0:
                        nf = 1
                    nslot = _SEALED if sealed else 3 * (m | bits) + nf
                    _move(V, K, E, W, KW, EW, alive, nalive, dq, L, pos, slot, nslot, pk, nk,
                          caps[r], sigma, kappas[r], TS, TB, TR, trace, r)
        V, W = W, V
        K, KW = KW, K
        E, EW = EW, E
        alive, nalive = nalive, alive
        if site_last[pos] and double[pos] == 2:
            _double_close(V, K, E, alive, L, pos, site_pow, site_price, ws, TC, trace)
        elif site_last[pos] and double[pos] > 2:
            _multi_close(V, K, E, alive, L, pos, site_pow, site_price, ws, TC, trace,
                         double[pos])
        elif site_last[pos]:
            if force[pos]:
                for gl in range(4):
                    V[gl, :] = np.inf
                    alive[gl] = False
            for slot in range(1, n_slot):
                m = 12 if slot == _SEALED else slot // 3
                ok = close_ok[m] and (slot == _SEALED or slot - 3 * m != 1)
                _close_states(V, K, E, alive, L, slot, ok, site_pow[pos] * m,
                              ws * site_price[pos, m], TC, pos, trace)
    v, k, e = _finish(V, K, E, W, alive, nalive, 3, L)
    return v, k, e, TS, TB, TR, TC


#: A site whose runs are kept apart as two (:func:`_double_step`): a run's state is
#: ``f + 3 (end + 3 start)``, start 0 none, 1 the first stage, 2 an inter-site start; end
#: 0 none, 1 the last stage, 2 an inter-site end; f as the site slots' f. The site's
#: state is ``u0 + _RUN_PAIR u1`` (run 0 is the one its first GPU in DP order joins).
_RUN_PAIR = 27
_PAIR_STATES = _RUN_PAIR * _RUN_PAIR


@njit(cache=True)
def _pair_run_step(u, pk, nk):  # pragma: no cover - compiled
    """A kept-apart run's state after one more GPU whose sends are of kinds ``pk`` back
    and ``nk`` forward (-1: not allowed)."""
    f = u % 3
    end = (u // 3) % 3
    start = u // 9
    if pk != 1:
        if start != 0:
            return -1
        start = 1 if pk == 0 else 2
    if nk != 1:
        if end != 0:
            return -1
        end = 1 if nk == 0 else 2
    if pk == 1 and nk == 1:
        if f == 0:
            f = 1
    elif pk == 1 or nk == 1:
        f = 2
    elif u != 0:  # a one-GPU run: both its ends on this GPU, nothing else in it
        return -1
    return f + 3 * (end + 3 * start)


@njit(cache=True)
def _pair_run_done(u):  # pragma: no cover - compiled
    """A kept-apart run is complete: both ends, middles in a run of two or more GPUs,
    and not the whole pipeline (the plan uses other sites)."""
    f = u % 3
    end = (u // 3) % 3
    start = u // 9
    return start != 0 and end != 0 and f != 1 and not (start == 1 and end == 1)


@njit(cache=True)
def _role_terms(caps, kappas, g, c, prices, cprices, capmid, caplast, z_hi, o, ws, wp, idle,
                mu, role_on, L):  # pragma: no cover - compiled
    """Fill ``caps`` and ``kappas`` per role of GPU ``g``: the most layers it may hold (0:
    the role is off, or its sends leave no room under ``z_hi``) and its cost's constant
    term."""
    for r in range(9):
        caps[r] = 0
        price = prices[g, r]
        if not role_on[r] or not price < np.inf:
            continue
        mem = caplast[g] if _ROLE_NEXT[r] == 0 else capmid[g]
        caps[r] = _layer_cap(mem, price, c, o, z_hi, L)
        kappas[r] = ws * (cprices[g, r] + o) + wp * idle[g] + mu


@njit(cache=True)
def _move(V, K, E, W, KW, EW, alive, nalive, dq, L, pos, slot, nslot, pk, nk, cap, sigma,
          kappa, TS, TB, TR, trace, role):  # pragma: no cover - compiled
    """One GPU in a role taking each alive state of site slot ``slot`` (times 4 plus the
    first/last flags) to ``nslot``: a role holding the first (last) stage needs it not
    yet placed and places it."""
    for gl in range(4):
        s = slot * 4 + gl
        if not alive[s]:
            continue
        ngl = gl
        if pk == 0:
            if gl & 1:
                continue
            ngl |= 1
        if nk == 0:
            if gl & 2:
                continue
            ngl |= 2
        t = nslot * 4 + ngl
        tp = pos if trace else 0
        _window(V[s], K[s], E[s], W[t], KW[t], EW[t], L, cap, sigma, kappa, dq,
                trace, TS[tp, t], TB[tp, t], TR[tp, t], s, role)
        nalive[t] = True


@njit(cache=True)
def _double_step(V, K, E, W, KW, EW, alive, nalive, dq, L, pos, sigma, caps, kappas, TS, TB,
                 TR, trace):  # pragma: no cover - compiled
    """:func:`_relaxation_dp`'s step for GPU ``g`` of a site holding two runs kept apart:
    the GPU joins run 0 or 1 in one of the nine roles (role code ``r + 9 j``: run j).

    Site state ``u0 + _RUN_PAIR u1`` times 4 plus the first/last flags. The runs are
    interchangeable, so only states with ``u0 >= u1`` are kept (a move that breaks the
    order swaps the runs; half the states of both orders), and from ``u0 == u1`` a GPU
    joins run 0 only; the role code's run is the one it joined before any swap."""
    for r in range(9):
        if caps[r] < 1:
            continue
        pk = _ROLE_PREV[r]
        nk = _ROLE_NEXT[r]
        for pair in range(_PAIR_STATES):
            u0 = pair % _RUN_PAIR
            u1 = pair // _RUN_PAIR
            if u1 > u0:
                continue
            if not (alive[4 * pair] or alive[4 * pair + 1] or alive[4 * pair + 2]
                    or alive[4 * pair + 3]):
                continue
            for j in range(2):
                if j == 1 and u0 == u1:
                    break
                nu = _pair_run_step(u0 if j == 0 else u1, pk, nk)
                if nu < 0:
                    continue
                a, b = (nu, u1) if j == 0 else (u0, nu)
                npair = max(a, b) + _RUN_PAIR * min(a, b)
                _move(V, K, E, W, KW, EW, alive, nalive, dq, L, pos, pair, npair, pk, nk,
                      caps[r], sigma, kappas[r], TS, TB, TR, trace, r + 9 * j)


@njit(cache=True)
def _double_close(V, K, E, alive, L, pos, site_pow, site_price, ws, TC,
                  trace):  # pragma: no cover - compiled
    """Close a site of two runs kept apart: both complete; the site is priced as the
    joined site its runs would make (its end set by whether it holds the first and the
    last stage, :func:`_joined_mask`); states with nothing placed on it end (it must be
    used)."""
    for gl in range(4):
        V[gl, :] = np.inf
        alive[gl] = False
    for pair in range(1, _PAIR_STATES):
        u0 = pair % _RUN_PAIR
        u1 = pair // _RUN_PAIR
        ok = _pair_run_done(u0) and _pair_run_done(u1)
        m = _joined_mask(u0 // 9 == 1 or u1 // 9 == 1,
                         (u0 // 3) % 3 == 1 or (u1 // 3) % 3 == 1)
        _close_states(V, K, E, alive, L, pair, ok and _APART_CLOSE[m], site_pow[pos] * m,
                      ws * site_price[pos, m], TC, pos, trace)


@njit(cache=True)
def _joined_mask(first, last):  # pragma: no cover - compiled
    """The end set of a site whose runs are kept apart, joined: S..X, with F..X if it holds
    the first stage and S..L if it holds the last (any multi-site end set: the other sites
    may be held to one run each, this one never)."""
    m = 12 | (1 if first else 0) | (2 if last else 0)
    if m == 13:
        return 9  # the first stage's run ends inter-site: F..X
    if m == 14:
        return 6  # S..L
    return m


@njit(cache=True)
def _multi_slots(runs):  # pragma: no cover - compiled
    """The slots of a site holding ``runs`` runs or more (:func:`_multi_step`)."""
    return 12 * (runs + 1) * (runs + 1)


@njit(cache=True)
def _multi_step(V, K, E, W, KW, EW, alive, nalive, dq, L, pos, sigma, caps, kappas, TS, TB,
                TR, trace, runs):  # pragma: no cover - compiled
    """:func:`_relaxation_dp`'s step for GPU ``g`` of a site holding ``runs`` runs or more
    (more than two): its runs are counted, not told apart. Slot ``f + 3 (first + 2 last +
    4 (starts + (runs + 1) ends))``: f as the site slots' f, whether the site holds the
    first (last) stage, its run starts (the first stage or an inter-site start) and run
    ends (the last stage or an inter-site end), each counted up to ``runs``. A plan's
    runs of the site beyond ``runs`` are joined to the others (each join turns an
    inter-site end and start into intra-site sends, priced no higher)."""
    n = runs + 1
    n_slots = _multi_slots(runs)
    for r in range(9):
        if caps[r] < 1:
            continue
        pk = _ROLE_PREV[r]
        nk = _ROLE_NEXT[r]
        d_start = 1 if pk != 1 else 0
        d_end = 1 if nk != 1 else 0
        middle = pk == 1 and nk == 1
        multi = (pk == 1) != (nk == 1)
        for slot in range(n_slots):
            if not (alive[4 * slot] or alive[4 * slot + 1] or alive[4 * slot + 2]
                    or alive[4 * slot + 3]):
                continue
            f = slot % 3
            fl = (slot // 3) % 4
            st = (slot // 12) % n
            en = slot // (12 * n)
            if pk == 0:
                fl |= 1
            if nk == 0:
                fl |= 2
            nf = f
            if multi:
                nf = 2
            elif middle and f == 0:
                nf = 1
            nslot = nf + 3 * (fl + 4 * (min(st + d_start, runs) + n * min(en + d_end, runs)))
            _move(V, K, E, W, KW, EW, alive, nalive, dq, L, pos, slot, nslot, pk, nk, caps[r],
                  sigma, kappas[r], TS, TB, TR, trace, r)


@njit(cache=True)
def _multi_close(V, K, E, alive, L, pos, site_pow, site_price, ws, TC, trace,
                 runs):  # pragma: no cover - compiled
    """Close a site of ``runs`` runs or more (:func:`_multi_step`): ``runs`` starts and
    ends, middles in a run of two or more GPUs; priced as the joined site
    (:func:`_joined_mask`); states with nothing placed on it end (it must be used)."""
    n = runs + 1
    for gl in range(4):
        V[gl, :] = np.inf
        alive[gl] = False
    for slot in range(1, _multi_slots(runs)):
        f = slot % 3
        fl = (slot // 3) % 4
        st = (slot // 12) % n
        en = slot // (12 * n)
        m = _joined_mask(fl & 1, fl & 2)
        ok = st == runs and en == runs and f != 1 and _APART_CLOSE[m]
        _close_states(V, K, E, alive, L, slot, ok, site_pow[pos] * m, ws * site_price[pos, m],
                      TC, pos, trace)


@njit(cache=True)
def _close_states(V, K, E, alive, L, slot, ok, ends, extra, TC, pos,
                  trace):  # pragma: no cover - compiled
    """Close a site's states of ``slot`` (times 4 plus the first/last flags): with ``ok``
    each carries on in its flags' row at ``extra`` more and mask code ``ends`` added;
    either way they end."""
    for gl in range(4):
        s = slot * 4 + gl
        if not alive[s]:
            continue
        if ok:
            for ell in range(L + 1):
                if V[s, ell] + extra < V[gl, ell]:
                    V[gl, ell] = V[s, ell] + extra
                    K[gl, ell] = K[s, ell]
                    E[gl, ell] = E[s, ell] + ends
                    if trace:
                        TC[pos, gl, ell] = s
            alive[gl] = True
        V[s, :] = np.inf
        alive[s] = False


#: Walk DP (:func:`_walk_dp`): a run's state is 3 * (ends placed: bit 0 its start, bit 1
#: its end) + f (as the site slots' f), or _RUN_SEALED (a one-GPU run, complete); a site
#: of runs 0..R-1 is in state sum q_j _RUN_STATES^j.
_RUN_SEALED = 12
_RUN_STATES = 13
#: Roles within a run: middle, start (its send back inter-site, or none: the first
#: stage; forward intra-site), end (the mirror image), single (the run's only GPU).
_WALK_ROLES = 4
#: A walk visits a site at most this many times (:func:`_walk_dp` has _RUN_STATES^R
#: states per site).
MAX_VISITS = 3


@njit(cache=True)
def _run_step(q, role):  # pragma: no cover - compiled
    """A run's state after one more GPU in ``role`` (-1: not allowed)."""
    if q == _RUN_SEALED:
        return -1
    bits = q // 3
    f = q - 3 * bits
    if role == 0:
        return 3 * bits + (1 if f == 0 else f)
    if role == 3:
        return _RUN_SEALED if q == 0 else -1
    bit = 1 if role == 1 else 2
    if bits & bit:
        return -1
    return 3 * (bits | bit) + 2


@njit(cache=True)
def _canonical(t, j, twin_row):  # pragma: no cover - compiled
    """State ``t`` (run j's state just changed) with each group of twin runs' states in
    non-increasing order: twins are interchangeable, so a site's state is their multiset.
    A run's state only grows (:func:`_run_step`), so run j moves only towards run 0."""
    while j > 0 and twin_row[j]:
        lo = _RUN_STATES ** (j - 1)
        a = (t // lo) % _RUN_STATES
        b = (t // (lo * _RUN_STATES)) % _RUN_STATES
        if a >= b:
            break
        t += (b - a) * lo + (a - b) * lo * _RUN_STATES
        j -= 1
    return t


@njit(cache=True)
def _walk_dp(L, order, site_last, runs, comp, prices, is_last, twin, capmid, caplast, z_hi,
             o, ws, wp, wd, idle, dyn, mu, trace, work):  # pragma: no cover - compiled
    """min over the plans on a site walk (relaxed) of sum (ws tau + wp idle + wd dyn c n
    + mu): each visit of a site is one run, a site visited R times holds R on distinct
    GPUs; (value, k) and, with ``trace``, the minimiser's choices in
    :func:`_relaxation_dp`'s layout (role code ``_WALK_ROLES j + role``: run j of its site; the
    close record per position and layer count in TC[pos, 0]).

    ``prices[g, j, role]``: the role's sends in run j of g's site (inf: not allowed;
    ``prices.shape[1]`` the most runs a site holds); ``is_last[g, j]``: 1 if that run ends
    with the last stage (its end and single roles take the last stage's cap), 2 if it may
    (the looser of the two caps); ``twin[g, j]``: run j of g's site is run j - 1's twin
    (without ``trace`` a site's twin runs take states in non-increasing order, an exact
    reduction: 455 states instead of 2,197 for three twins; with it, run j is the j-th
    visit, as :func:`path_plan` reads it); ``runs`` per
    position: the runs its site holds (0: a site off the walk, left unused). Every run
    must be used.
    """
    n_runs = prices.shape[1]
    V, K, E, W, KW, EW, dq, alive, nalive = work
    TS, TB, TR, TC = _trace_buffers(order.shape[0], V.shape[0], 1, L, trace)
    _start(V, K, E, alive)
    for pos in range(order.shape[0]):
        g = order[pos]
        _next_position(V, K, E, W, KW, EW, alive, nalive)
        c = comp[g]
        sigma = (ws + wd * dyn[g]) * c
        nr = runs[pos]
        n_here = _RUN_STATES ** nr  # a site's states: runs of other sites are empty
        for j in range(nr):
            pw = _RUN_STATES ** j
            tw = twin[g, j] != 0 and not trace
            for role in range(_WALK_ROLES):
                price = prices[g, j, role]
                if not price < np.inf:
                    continue
                mem = capmid[g]
                if role >= 2 and is_last[g, j] == 1:
                    mem = caplast[g]
                elif role >= 2 and is_last[g, j] == 2:  # may be last: the looser cap
                    mem = max(caplast[g], capmid[g])
                cap = _layer_cap(mem, price, c, o, z_hi, L)
                if cap < 1:
                    continue
                kappa = ws * (price + o) + wp * idle[g] + mu
                for s in range(n_here):
                    if not alive[s]:
                        continue
                    qj = (s // pw) % _RUN_STATES
                    if tw and (s // (pw // _RUN_STATES)) % _RUN_STATES == qj:
                        continue  # the same multiset as this role in run j - 1
                    nq = _run_step(qj, role)
                    if nq < 0:
                        continue
                    t = s + (nq - qj) * pw
                    if not trace:
                        t = _canonical(t, j, twin[g])
                    tp = pos if trace else 0
                    _window(V[s], K[s], E[s], W[t], KW[t], EW[t], L, cap, sigma, kappa, dq,
                            trace, TS[tp, t], TB[tp, t], TR[tp, t], s, _WALK_ROLES * j + role)
                    nalive[t] = True
        V, W = W, V
        K, KW = KW, K
        E, EW = EW, E
        alive, nalive = nalive, alive
        if site_last[pos]:
            # Close the site: every run complete (both ends, or sealed); carry on in state 0.
            best = np.full(L + 1, np.inf)
            bk = np.zeros(L + 1, np.int64)
            for s in range(n_here):
                if not alive[s]:
                    continue
                ok = True
                rest = s
                for j in range(n_runs):
                    q = rest % _RUN_STATES
                    rest //= _RUN_STATES
                    done = q == _RUN_SEALED or q // 3 == 3
                    ok = ok and (done if j < nr else q == 0)
                if ok:
                    for ell in range(L + 1):
                        if V[s, ell] < best[ell]:
                            best[ell] = V[s, ell]
                            bk[ell] = K[s, ell]
                            if trace:
                                TC[pos, 0, ell] = s
                V[s, :] = np.inf
                alive[s] = False
            V[0, :] = best
            K[0, :] = bk
            alive[0] = True
    v, k, e = _finish(V, K, E, W, alive, nalive, 0, L)
    return v, k, e, TS, TB, TR, TC


def _traceback(L: int, order: np.ndarray, site_last: np.ndarray, TS: np.ndarray,
               TB: np.ndarray, TR: np.ndarray, TC: np.ndarray, state: int = 3
               ) -> list[tuple[int, int, int]]:
    """The minimiser of a traced :func:`_relaxation_dp` (or :func:`_walk_dp`, whose end
    state is 0): (GPU, role, layers) per used GPU, in DP order (grouped by site)."""
    out: list[tuple[int, int, int]] = []
    ell = L
    for pos in range(order.shape[0] - 1, -1, -1):
        if site_last[pos] and TC[pos, state, ell] >= 0:
            state = int(TC[pos, state, ell])
        src = int(TS[pos, state, ell])
        if src >= 0:
            b = int(TB[pos, state, ell])
            out.append((int(order[pos]), int(TR[pos, state, ell]), ell - b))
            state, ell = src, b
    out.reverse()
    return out


@dataclass(frozen=True)
class Box:
    """Plans with stage count in [qa, qb] and bottleneck in [za, zb]: each has an
    objective >= ``bound`` and a stage-time sum >= ``s_floor`` (ms)."""

    bound: float
    qa: int
    qb: int
    za: float
    zb: float
    s_floor: float


@dataclass(frozen=True)
class PlanClasses:
    """A class of plans left open by branching on sites
    (:mod:`geoplan.cost.site_branching`; the union of some of its open nodes): the plans
    using only ``sites``, every site of ``forced``, and between ``min_sends`` and
    ``max_sends`` inter-site sends (consecutive stages on different sites; None: no
    most). Exact models take a class as constraints (:mod:`formulations.sliced`)."""

    sites: tuple[str, ...]
    forced: tuple[str, ...] = ()
    min_sends: int = 0
    max_sends: int | None = None
    #: The least steps back to a visited site of the class's plans (0: none known).
    revisits: int = 0
    #: Site paths (path nodes'): the plans visit every site once and step between sites
    #: only as one of these paths does (empty: any order).
    orders: tuple[tuple[str, ...], ...] = ()
    #: The open boxes of the class's nodes' searches (empty: not known): every plan of
    #: the class better than branching's incumbent lies in one. Far narrower than the
    #: root's: at metro N=32 L=32 lambda 0.5 (instance seed 883) two path nodes held
    #: theirs at 12 stages and a bottleneck range of 7.5e-4 ms, where the root's open
    #: boxes spanned 8-18 stages and 10.9-23.3 ms; HiGHS closed the slice of those in
    #: 8.7 s and not the other in 60 s.
    boxes: tuple[Box, ...] = field(default=(), compare=False, repr=False)

    @staticmethod
    def hull(classes: Sequence[PlanClasses]) -> PlanClasses:
        """One class holding every plan of ``classes`` (not empty): their sites' union,
        their forced sites' intersection, the widest range of sends; paths only when
        every class has them."""
        if not classes:
            raise ValueError("the hull of no classes")
        most = [c.max_sends for c in classes]
        boxes = tuple(b for c in classes for b in c.boxes) \
            if all(c.boxes for c in classes) else ()
        return PlanClasses(
            tuple(sorted(set().union(*(c.sites for c in classes)))),
            tuple(sorted(set(classes[0].forced).intersection(*(c.forced for c in classes)))),
            min(c.min_sends for c in classes),
            None if None in most else max(m for m in most if m is not None),
            min(c.revisits for c in classes),
            tuple(sorted({o for c in classes for o in c.orders}))
            if all(c.orders for c in classes) else (), boxes)

    def steps(self) -> frozenset[tuple[str, str]]:
        """The steps (from site, to site) of :attr:`orders`."""
        return frozenset(p for o in self.orders for p in itertools.pairwise(o))

    def admits(self, gpu_sites: list[str | None]) -> bool:
        """Whether a plan whose stages' sites are ``gpu_sites`` (in order) is in the class."""
        sends = sum(a != b for a, b in itertools.pairwise(gpu_sites))
        visits = [a for i, a in enumerate(gpu_sites) if i == 0 or a != gpu_sites[i - 1]]
        return (set(gpu_sites) <= set(self.sites) and set(self.forced) <= set(gpu_sites)
                and sends >= self.min_sends
                and (self.max_sends is None or sends <= self.max_sends)
                and (not self.orders or (len(set(visits)) == len(visits) and set(
                    itertools.pairwise(visits)) <= self.steps())))

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {"sites": list(self.sites), "forced": list(self.forced),
                                  "sends": [self.min_sends, self.max_sends],
                                  "revisits": self.revisits}
        if self.orders:
            out["orders"] = [list(o) for o in self.orders]
        return out


@dataclass(frozen=True)
class ParametricBound:
    """The outcome of :func:`parametric_bound`: a proven lower bound on the objective."""

    value: float  #: every feasible plan's objective is >= value (inf: no plan exists)
    boxes: int  #: boxes evaluated
    dp_calls: int
    seconds: float
    exhausted: bool  #: the least open box is final (or every box is above the incumbent)
    #: The open boxes, least bound first: every plan better than the incumbent lies in one.
    open_boxes: tuple[Box, ...] = ()
    #: What tuning the transition prices did (None: not tried).
    transitions: dict[str, object] | None = None
    #: The sites (cluster labels) the relaxed minimisers of the least open boxes use,
    #: distinct sets, least box first: where a plan near the bound would have to lie,
    #: a hint for primal searches (:mod:`formulations.site_subsets`), not a proof.
    site_sets: tuple[tuple[int, ...], ...] = ()
    #: What branching on sites added (:mod:`geoplan.cost.site_branching`; None: not run).
    branching: dict[str, object] | None = None
    #: With a site path: the relaxed minimisers of the least open boxes, (GPU, role,
    #: layers) per used GPU; on a path each is a plan (:func:`path_plan`), a primal hint.
    configs: tuple[tuple[tuple[int, int, int], ...], ...] = ()
    #: A plan (GPU id, layers per stage) better than the incumbent that site branching
    #: found on the way (:func:`refine_by_sites`), and its objective.
    plan: tuple[tuple[str, int], ...] | None = None
    plan_objective: float | None = None
    #: What the two-level search found (:func:`two_level_bound`; None: not run).
    levels: dict[str, object] | None = None
    #: With the two-level search: per site (cluster label) whose own search ran, the node
    #: groups (:func:`geoplan.cost.bounds.node_groups`, labels within the site) its least
    #: boxes' minimisers use, like :attr:`site_sets` one level down (a primal hint).
    node_sets: tuple[tuple[int, tuple[tuple[int, ...], ...]], ...] = ()
    #: After branching on sites: classes holding every plan better than the incumbent
    #: (empty: nothing known beyond the boxes).
    classes: tuple[PlanClasses, ...] = ()
    #: After branching on sites: the site sets (cluster labels) of its open nodes whose
    #: plans need not step back, least first, like :attr:`site_sets` (a primal hint).
    open_sets: tuple[tuple[int, ...], ...] = ()
    #: Per open box read for :attr:`site_sets`, least first: its bound and the sites of its
    #: minimiser (empty: none); parts of one search are merged by them
    #: (:mod:`geoplan.cost.root_split`).
    hints: tuple[tuple[float, tuple[int, ...]], ...] = field(default=(), compare=False,
                                                            repr=False)
    #: The processes the search went on in after its first boxes
    #: (:mod:`geoplan.cost.root_split`; 0: this one only).
    parts: int = 0

    @property
    def floor(self) -> float:
        """The value as an objective floor: -inf when infinite (no plan exists)."""
        return self.value if math.isfinite(self.value) else -_INF

    def summary(self) -> dict[str, object]:
        """What a solver reports of the search in its info."""
        out: dict[str, object] = {
            "bound": self.value, "seconds": round(self.seconds, 3), "boxes": self.boxes,
            "open_boxes": len(self.open_boxes), "exhausted": self.exhausted}
        if self.transitions is not None:
            out["transitions"] = self.transitions
        if self.branching is not None:
            out["site_branching"] = self.branching
        if self.levels is not None:
            out["two_level"] = self.levels
        if self.parts:
            out["parts"] = self.parts
        return out


@dataclass(frozen=True)
class _TransitionSetup:
    """What every tuning round of one search shares (:meth:`_Boxes.tune_transitions`):
    the site links, the price form (walk prices up to :data:`_WALK_SITES` sites, else
    potentials), its constraint rows and variable bounds, and the floor prices."""

    trip: np.ndarray
    lo: np.ndarray
    site: np.ndarray
    pairs: list[tuple[int, int]]
    admissible: bool  #: the floors fit every round trip (else no prices are admissible)
    walk: bool
    rows: list[tuple[np.ndarray, float]]
    lo_x: np.ndarray
    hi_x: np.ndarray
    floor_prices: np.ndarray | None  #: walk form: role prices with floor potentials

    @classmethod
    def build(cls, comm: np.ndarray, cluster: np.ndarray, prices: np.ndarray,
              first: int | None = None, last: int | None = None,
              must: tuple[int, ...] = (), revisits: int = 0, once: bool = False
              ) -> _TransitionSetup:
        trip, lo, site = transitions.site_links(comm, cluster)
        n_s = trip.shape[0]
        pairs = [(a, b) for a in range(n_s) for b in range(n_s)
                 if a != b and math.isfinite(trip[a, b])]
        admissible = all(lo[a] + lo[b] <= trip[a, b] for a, b in pairs)
        walk = n_s <= _WALK_SITES
        big = float(n_s * np.max(np.where(np.isfinite(trip), trip, 0.0))) + 1.0
        if not admissible:
            return cls(trip, lo, site, pairs, False, walk, [], lo, lo, None)
        if walk:
            rows = transitions.walk_rows(trip, lo, first, last, must, revisits, once)
            return cls(trip, lo, site, pairs, True, True, rows,
                       np.zeros(4 * n_s), np.full(4 * n_s, big),
                       transitions.potential_prices(prices, site, lo, lo))
        rows = [(np.array([a, n_s + b]), float(trip[a, b])) for a, b in pairs]
        return cls(trip, lo, site, pairs, True, False, rows, np.concatenate([lo, lo]),
                   np.full(2 * n_s, big), None)


@dataclass(frozen=True)
class BoxTables:
    """What a search needs of a pool that does not depend on the objective, the prices or
    the plans counted (:func:`box_tables`): computed once, shared by searches on one pool
    (site branching's nodes on one site set)."""

    mid: np.ndarray  #: layer caps per stage count (rows), a stage not last
    last: np.ndarray  #: and the last stage
    tlb: dict[int, float]  #: the least bottleneck per stage count
    z_worst: float  #: no plan's bottleneck is larger


def box_tables(c: Coefficients, layers: int, cluster: np.ndarray) -> BoxTables:
    """The :class:`BoxTables` of a pool (coefficients, layers, site labels)."""
    L = int(layers)
    q_max = min(c.n, L)
    mid, last = bounds.layer_cap_table(c, L, q_max)
    relax = bounds.Relaxation.from_coefficients(c, L, np.asarray(cluster, np.int64), q_max)
    worst = bounds.tmax_worst(float(np.max(c.comp_ms)), float(np.max(
        np.where(np.isfinite(c.comm_ms), c.comm_ms, 0.0))), L, float(c.overhead_ms))
    return BoxTables(mid, last, relax.tmax_bounds(worst * (1 + 1e-9)), worst)


class _Boxes:
    """The data one instance's boxes share, and the evaluation of one box."""

    def __init__(self, c: Coefficients, layers: int, cluster: np.ndarray,
                 weights: ObjectiveWeights, tables: BoxTables | None = None) -> None:
        self.L = int(layers)
        self.q_max = min(c.n, self.L)
        self.comp = np.ascontiguousarray(c.comp_ms, np.float64)
        self.o = float(c.overhead_ms)
        self.M = float(c.micro_batches)
        self.a, self.b = float(weights.a), float(weights.b)
        self.idle = np.ascontiguousarray(c.idle_w, np.float64)
        self.dyn = np.ascontiguousarray(c.dyn_w, np.float64)
        cl = np.asarray(cluster, np.int64)
        self.order = np.argsort(cl, kind="stable").astype(np.int64)
        ordered = cl[self.order]
        self.site_last = np.append(ordered[1:] != ordered[:-1], True)
        # The mask code's place value per position: 16 ** (site index), 0 with too many
        # sites for an int64 code (the code then says nothing).
        _, site_idx = np.unique(ordered, return_inverse=True)
        self.n_sites = int(site_idx.max()) + 1 if site_idx.size else 0
        self.site_pow = (16 ** site_idx.astype(np.int64) if self.n_sites <= 15
                         else np.zeros(ordered.size, np.int64))
        self.pos_site = site_idx
        # At a site's last position: the site must be used (set by parametric_bound's forced).
        self.force = np.zeros(ordered.size, np.bool_)
        # At every position of a site whose runs are kept apart (keep_apart): the least
        # runs it holds (2: two told apart, more: counted), 0 elsewhere.
        self.double = np.zeros(ordered.size, np.int64)
        self.site_price = np.zeros((ordered.size, 16))  # walk prices per position and mask
        self.code = 0  # the mask code of the minimiser of the last :meth:`_lagrange`
        self.last_ws = 1.0  # the stage-time weight of the last DP of :meth:`_evaluate_case`
        self.quick_close = False  # boxes are first tried by :meth:`_quick_close`
        self.comm = np.asarray(c.comm_ms, np.float64)
        self.cluster = cl
        # Stage caps use ``prices``; the stage-time sum uses ``cost_prices``, the same
        # until transition prices are tuned (:meth:`tune_transitions`).
        # Prices before any restriction of where the first and last stage may lie
        # (:meth:`restrict_ends`): the transition forms are derived from these.
        self.base_prices = role_prices(self.comm, cl)
        self.prices = self.base_prices
        self.cost_prices = self.prices
        self.role_ok: np.ndarray | None = None  # per GPU and role: allowed (restrict_ends)
        #: Walk rows kept (:func:`transitions.walk_rows`): first and last site index, and
        #: site indices every used set holds.
        self.walk_first: int | None = None
        self.walk_last: int | None = None
        self.walk_must: tuple[int, ...] = ()
        self.walk_revisits = 0  # only walks with this many steps back (walk_rows)
        self.once = False  # only plans visiting each site once (a site holds one run)
        self.single_site = True  # False: plans on one site only are not counted
        #: :func:`_walk_tables` of a walk that visits a site twice (:meth:`follow_walk`).
        self.walk: WalkTables | None = None
        self.walk_code = 0
        self.tuning = [0.0, 0.0, 0.0]  # rounds that raised a bound, iterations, seconds
        self.tx: np.ndarray | None = None  # the transition prices in use (their form's)
        self.setup: _TransitionSetup | None = None  # built at the first tuning round
        if tables is None:
            tables = box_tables(c, layers, cl)
        self.mid, self.last = tables.mid, tables.last
        self.tlb = tables.tlb
        self.z_worst = tables.z_worst
        # Step scales of the multiplier searches (instance constants).
        self.mu_scale = float(np.median(self.comp)) + self.o + max(float(np.min(self.prices)),
                                                                  0.0)
        self.idle_scale = float(np.median(self.idle))
        self.dp_calls = 0
        #: :meth:`_lagrange` results of the stage-time and idle-power bounds (their DPs
        #: depend on the box's Q range and zb only, not za: a Z split's upper part would
        #: repeat its parent's), by (arguments, price version); with the minimiser's mask
        #: code and DP arguments, which :meth:`minimiser` and the tuning read, and the
        #: ``ceil`` it was searched with (a value at or above it may be short of the
        #: maximum).
        self._memo: dict[tuple[Any, ...], tuple[float, int, tuple[Any, ...], float]] = {}
        self.price_version = 0  # bumped whenever the cost prices change
        # Per (Q range, case, cost kind): the last multiplier search's best mu / scale.
        self._mu_hint: dict[tuple[int, int, int, bool, bool], float] = {}
        self._hints_on = True  # off while minimisers are read (_no_hints)
        self.last_dp: tuple[int, float, float, float, float, float, int] = (1, 0.0, 1.0, 0.0,
                                                                           0.0, 0.0, 0)

    def restrict_ends(self, first: int, last: int | tuple[int, ...]) -> None:
        """Count only plans whose first stage lies on site index ``first`` and last
        stage on ``last`` (or one of those site indices): the roles holding a first
        (last) stage are dropped elsewhere."""
        ok = np.ones(self.base_prices.shape, np.bool_)
        gsite = np.empty(self.comp.size, np.int64)
        gsite[self.order] = self.pos_site
        lasts = np.atleast_1d(np.asarray(last, np.int64))
        ok[np.ix_(gsite != first, np.nonzero(_ROLE_PREV == 0)[0])] = False
        ok[np.ix_(~np.isin(gsite, lasts), np.nonzero(_ROLE_NEXT == 0)[0])] = False
        self.role_ok = ok
        # Walk rows know one last site at most (more: any, which only lowers them).
        self.walk_first, self.walk_last = first, (int(lasts[0]) if lasts.size == 1 else None)
        self._price_by(self.base_prices)

    def _price_by(self, base: np.ndarray) -> None:
        """Price with role prices ``base`` (the first and last stage's roles dropped off
        their sites, if :meth:`restrict_ends` said where they lie)."""
        self.base_prices = base
        self.prices = self._restricted(base)
        self.cost_prices = self.prices

    def follow_walk(self, walk: tuple[int, ...]) -> None:
        """Count only the plans whose runs visit the sites in the order ``walk`` (cluster
        labels): on a path (each site once) the site DP with each send priced by the site
        it goes to (:func:`role_prices`); a walk that visits a site twice, :func:`_walk_dp`."""
        if len(set(walk)) == len(walk):
            self._price_by(role_prices(self.comm, self.cluster, walk))
            return
        self.walk = _walk_tables(self.comm, self.cluster, self.order, walk)
        self._code_walk(walk)

    def _code_walk(self, labels: tuple[int, ...] | list[int]) -> None:
        """The walk DP's mask code, which says only which sites are used (``labels``)."""
        self.walk_code = int(sum(self.site_pow[np.nonzero(self.site_last & np.isin(
            self.cluster[self.order], np.asarray(labels)))[0]] * 12))

    def follow_prefix(self, prefix: tuple[int, ...]) -> None:
        """Count only the plans visiting every site once, the sites of ``prefix`` (cluster
        labels) first and in that order: the prefix's sends are priced by the sites they
        go to, the others' by the cheapest link to a site they may go to (any other site
        after the prefix, or the prefix's last site for a send back)."""
        rest = [int(k) for k in np.unique(self.cluster) if int(k) not in prefix]
        nb: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {
            int(k): ((int(prefix[i - 1]),) if i else (),
                     (int(prefix[i + 1]),) if i + 1 < len(prefix) else tuple(rest))
            for i, k in enumerate(prefix)}
        for r in rest:
            others = tuple(x for x in rest if x != r)
            nb[r] = ((int(prefix[-1]), *others), others)
        self._price_by(role_prices(self.comm, self.cluster, neighbours=nb))
        self.once = True

    def follow_gapped(self, prefix: tuple[int, ...], middle: tuple[int, ...],
                      suffix: tuple[int, ...], joined: int | None = None) -> None:
        """Count only the plans whose runs visit the sites (cluster labels) of ``prefix``
        in that order, then those of ``middle`` (a multiset) in some order, then those of
        ``suffix``, never one twice in a row: the walk DP with each visit's run apart
        (:func:`_walk_dp`), a send priced by the cheapest link to a site that may be there
        (a middle visit's by the other middle sites and the prefix's last or the
        suffix's first site; any middle visit may hold the first stage without a prefix,
        and the last without a suffix). ``joined``: a cluster label in ``middle``, whose
        last middle visit stands for two of its visits joined (:func:`_visit_tables`)."""
        if not middle:
            raise ValueError("a gapped walk leaves one or more visits in the middle: "
                             "else it is a walk")
        if any(a == b for part in (prefix, suffix) for a, b in itertools.pairwise(part)):
            raise ValueError(f"a site walk never visits a site twice in a row: {prefix}, "
                             f"{suffix}")
        mid = set(middle)
        visits: list[Visit] = []
        for i, k in enumerate(prefix):
            fwd = (prefix[i + 1],) if i + 1 < len(prefix) else tuple(sorted(mid - {k}))
            visits.append((k, (prefix[i - 1],) if i else (), fwd, i == 0, False))
        if joined is not None and joined not in mid:
            raise ValueError(f"a joined visit is a middle visit: {joined} not in {middle}")
        at = None if joined is None else \
            len(prefix) + len(middle) - 1 - tuple(reversed(middle)).index(joined)
        for k in middle:
            back = tuple(sorted((mid | set(prefix[-1:])) - {k}))
            fwd = tuple(sorted((mid | set(suffix[:1])) - {k}))
            visits.append((k, back, fwd, not prefix, not suffix))
        for j, k in enumerate(suffix):
            back = (suffix[j - 1],) if j else tuple(sorted(mid - {k}))
            last = j + 1 == len(suffix)
            visits.append((k, back, () if last else (suffix[j + 1],), False, last))
        self.walk = _visit_tables(self.comm, self.cluster, self.order, visits, at)
        self._code_walk([v[0] for v in visits])

    def keep_apart(self, labels: tuple[int, ...], runs: tuple[int, ...] | None = None
                   ) -> None:
        """Count only the plans with two or more runs (``runs``: at least that many, per
        label) on each site of cluster labels ``labels``: the DP keeps two of each one's
        runs apart (:func:`_double_step`), or counts three or more (:func:`_multi_step`);
        the sites are closed one after another, so each more of them costs no states."""
        runs = (2,) * len(labels) if runs is None else runs
        if len(runs) != len(labels) or min(runs, default=2) < 2:
            raise ValueError(f"two or more runs per site kept apart: {labels}, {runs}")
        sites = self.cluster[self.order]
        self.double = np.zeros(sites.size, np.int64)
        for k, r in zip(labels, runs, strict=True):
            self.double[sites == k] = r

    def _restricted(self, p: np.ndarray) -> np.ndarray:
        return p if self.role_ok is None else np.where(self.role_ok, p, _INF)

    def tune_transitions(self, qa: int, qb: int, za: float, zb: float,
                         deadline: float | None) -> bool:
        """Choose transition prices (:mod:`geoplan.cost.transitions`: walk prices with up
        to :data:`_WALK_SITES` sites, else potentials) that raise the multi-site bound of
        one box, by Kelley's cutting planes on the concave dual (the minimiser's end sets
        per site give the supergradient), and price with them from now on. False
        (nothing changed) when none are admissible or none raises the bound."""
        with self._no_hints():
            return self._tune(qa, qb, za, zb, deadline)

    @contextlib.contextmanager
    def _no_hints(self) -> Iterator[None]:
        """Multiplier searches without hints, for code that reads their minimisers: where
        several tie, a hinted search may report another one, and Kelley's supergradients
        (so the tuned prices) would then depend on the search's history."""
        self._hints_on = False
        try:
            yield
        finally:
            self._hints_on = True

    def _tune(self, qa: int, qb: int, za: float, zb: float, deadline: float | None) -> bool:
        """:meth:`tune_transitions` with the multiplier hints off."""
        t_start = time.perf_counter()
        if self.setup is None:
            self.setup = _TransitionSetup.build(self.comm, self.cluster, self.base_prices,
                                                self.walk_first, self.walk_last,
                                                self.walk_must, self.walk_revisits,
                                                self.once)
        if not self.setup.admissible:
            return False
        st = self.setup
        trip, lo, site, pairs, walk = st.trip, st.lo, st.site, st.pairs, st.walk
        rows, lo_x, hi_x = st.rows, st.lo_x, st.hi_x
        n_s = trip.shape[0]
        if self.tx is None:
            # Start from each site's cheapest one-way link (the plain prices) where that
            # is admissible, else from the floors.
            x = np.array([np.min(self.base_prices[site == k, 6]) for k in range(n_s)])
            up = np.maximum(np.where(np.isfinite(x), x, lo), lo)
            if any(up[a] + up[b] > trip[a, b] for a, b in pairs):
                up = lo.copy()
            d = up - lo
            start = (np.stack([d, d, 2 * d, 2 * d], axis=1).ravel() if walk
                     else np.concatenate([up, up]))
            if any(float(np.sum(start[idx])) > rhs for idx, rhs in rows):
                start = np.zeros(4 * n_s) if walk else np.concatenate([lo, lo])
            self.tx = start

        def apply(x: np.ndarray) -> None:
            self.price_version += 1
            if walk:
                assert st.floor_prices is not None
                self.cost_prices = self._restricted(st.floor_prices)
                self.site_price[:] = 0.0
                for k, kind in enumerate(transitions.KINDS):
                    self.site_price[:, kind] = x[4 * self.pos_site + k]
            else:
                self.cost_prices = self._restricted(transitions.potential_prices(
                    self.base_prices, site, x[:n_s], x[n_s:]))

        def value(x: np.ndarray) -> tuple[float, np.ndarray]:
            # The box's multi-site bound and (approximately, at b > 0) its supergradient:
            # the last DP's minimiser's end sets per site, times that DP's weight on
            # stage times.
            apply(x)
            v, _ = self._evaluate_case(qa, qb, za, zb, 0.0, 1)
            code, g = self.code, np.zeros(lo_x.size)
            for k in range(n_s):
                m, code = code % 16, code // 16
                if walk and m in transitions.KINDS:
                    g[4 * k + transitions.KINDS.index(m)] = 1.0
                elif not walk:
                    g[k], g[n_s + k] = (m >> 3) & 1, (m >> 2) & 1  # X ends, S ends
            return v, g * self.last_ws

        saved = (self.cost_prices, self.site_price.copy())
        x0 = self.tx
        v0, g0 = value(x0)
        best_v, best_x = v0, x0
        model = transitions.KelleyLP(lo_x, hi_x, rows) if math.isfinite(v0) else None
        if model is not None:
            model.add_cut(v0, g0, x0)
        # A trust region around the best point: without it the model's first maximisers
        # drop every price no cut mentions yet, and the DP then buys exactly those.
        radius = float(np.max(np.where(np.isfinite(trip), trip, 0.0)))
        iters = 0
        while model is not None and iters < _KELLEY_ITERS:
            iters += 1
            if deadline is not None and time.perf_counter() >= deadline:
                break
            nxt = model.point(best_x, radius)
            if nxt is None:
                break
            theta, x = nxt
            if theta <= best_v + _KELLEY_TOL * max(abs(best_v), 1.0):
                break
            v, g = value(x)
            model.add_cut(v, g, x)
            if v > best_v:
                best_v, best_x = v, x
            else:
                radius *= 0.5
        gained = math.isfinite(v0) and best_v > v0 + _KELLEY_TOL * max(abs(v0), 1.0)
        self.cost_prices, self.site_price = saved
        self.price_version += 1
        if gained:
            self.tx = best_x
            apply(best_x)
        self.tuning[0] += gained
        self.tuning[1] += iters
        self.tuning[2] += time.perf_counter() - t_start
        return gained

    @property
    def transitions_summary(self) -> dict[str, object] | None:
        """Tuning rounds that raised a bound, Kelley iterations, seconds (None: untried)."""
        if not self.tuning[1]:
            return None
        return {"rounds": int(self.tuning[0]), "iterations": int(self.tuning[1]),
                "seconds": round(self.tuning[2], 3)}

    def minimiser_sites(self, qa: int, qb: int, za: float, zb: float,
                        cases: tuple[tuple[float, float], ...]) -> tuple[int, ...]:
        """The site indices the relaxed minimiser of the box's least case uses (with the
        current prices; beyond 15 sites, where the mask code cannot say, read off the
        minimiser of the search's last DP by a traceback)."""
        if not self.n_sites:
            return ()
        case = 1 if cases[1][0] <= cases[0][0] else 0
        with self._no_hints():
            v, _ = self._evaluate_case(qa, qb, za, zb, 0.0, case)
        if not math.isfinite(v):
            return ()
        if self.n_sites > 15:
            gsite = np.empty(self.comp.size, np.int64)
            gsite[self.order] = self.pos_site
            return tuple(sorted({int(gsite[g]) for g, _, _ in self.minimiser()}))
        return tuple(i for i in range(self.n_sites) if (self.code >> (4 * i)) & 15)

    def zmin(self, qa: int, qb: int) -> float:
        """The least bottleneck any plan with Q in [qa, qb] has (inf: none)."""
        return min((self.tlb[q] for q in range(qa, qb + 1) if q in self.tlb), default=_INF)

    def caps_differ(self, qa: int, qb: int) -> bool:
        return bool(np.any(self.mid[qa] != self.mid[qb]) or np.any(self.last[qa] != self.last[qb]))

    def _dp(self, qa: int, z_hi: float, ws: float, wp: float, wd: float,
            mu: float, case: int) -> tuple[float, int, int]:
        self.dp_calls += 1
        self.last_dp = (qa, z_hi, ws, wp, wd, mu, case)
        v, k, code, *_ = self._run_dp(qa, z_hi, ws, wp, wd, mu, case, False)
        return float(v), int(k), int(code)

    def _run_dp(self, qa: int, z_hi: float, ws: float, wp: float, wd: float, mu: float,
                case: int, trace: bool) -> tuple[Any, ...]:
        if self.walk is not None:
            if case == 0:  # a walk visits two or more sites
                return _INF, 0, 0, None, None, None, None
            runs, prices, is_last, twin = self.walk
            v, k, _, *rest = _walk_dp(self.L, self.order, self.site_last, runs, self.comp,
                                      prices, is_last, twin, self.mid[qa], self.last[qa], z_hi,
                                      self.o, ws, wp, wd, self.idle, self.dyn, mu, trace,
                                      _work(_walk_states(prices), self.L))
            return (v, k, self.walk_code, *rest)
        roles, close = _CASES[case]
        if case == 0 and self.double.any():  # a site visited twice: two or more sites
            return _INF, 0, 0, None, None, None, None
        if self.once and case == 1:
            close = _ONCE_CLOSE
        return _relaxation_dp(self.L, self.order, self.site_last, self.site_pow,
                              self.site_price, self.comp, self.prices, self.cost_prices,
                              self.mid[qa], self.last[qa], z_hi, self.o, ws, wp, wd,
                              self.idle, self.dyn, mu, roles, close, self.force,
                              self.double, trace, _work(_relaxation_states(self.double),
                                                        self.L))

    def minimiser(self) -> list[tuple[int, int, int]]:
        """The minimiser of the last DP run: (GPU, role, layers) per used GPU."""
        v, _, _, TS, TB, TR, TC = self._run_dp(*self.last_dp, True)
        if not math.isfinite(v):
            return []
        return _traceback(self.L, self.order, self.site_last, TS, TB, TR, TC,
                          0 if self.walk is not None else 3)

    def _lagrange(self, qa: int, qb: int, z_hi: float, ws: float, wp: float, wd: float,
                  scale: float, case: int, ceil: float = _INF) -> float:
        """:meth:`_search_mu`, remembered for the stage-time and idle-power bounds.

        A search given ``ceil`` may stop below its maximum once it reaches ``ceil``: such
        a value is reused only where it reaches the ``ceil`` asked for."""
        if wd != 0.0:
            return self._search_mu(qa, qb, z_hi, ws, wp, wd, scale, case, ceil=ceil)
        key = (qa, qb, z_hi, ws, wp, case, self.price_version)
        hit = self._memo.get(key)
        if hit is None or (hit[0] >= hit[3] and hit[0] < ceil):
            v = self._search_mu(qa, qb, z_hi, ws, wp, wd, scale, case, ceil=ceil)
            hit = self._memo[key] = (v, self.code, self.last_dp, ceil)
        self.code, self.last_dp = hit[1], hit[2]
        return hit[0]

    def _search_mu(self, qa: int, qb: int, z_hi: float, ws: float, wp: float, wd: float,
                   scale: float, case: int, floor: float = -_INF, ceil: float = _INF
                   ) -> float:
        """max over mu of g(mu) = V(mu) - mu (qb if mu >= 0 else qa): a bound for k in
        [qa, qb]. g is concave and piecewise linear; each DP gives a tangent line of
        slope k - q at its mu, so once two tangents of opposite slopes bracket the
        maximum, the DP at their intersection either reaches it (the cutting-plane top)
        or gives a tangent that replaces one side (at most :data:`_MU_ITERS` times).

        The bracket is sought first just around the best multiplier of the last search
        on the same Q range, case and cost (relative to ``scale``): a neighbouring box's
        maximum is usually near, and two tangents there bracket it in two DPs. Any
        multiplier gives a valid bound, so the hint changes the work, not the validity.
        The search stops early once the cutting-plane top is at most ``floor`` or its
        best value reaches ``ceil`` (callers for which those settle the outcome)."""
        v, k, self.code = self._dp(qa, z_hi, ws, wp, wd, 0.0, case)
        if not math.isfinite(v) or qa <= k <= qb or v >= ceil:
            # mu = 0 bounds every stage count; at ``ceil`` the outcome is settled (at
            # metro N=64 L=48 lambda 1 nine boxes in ten of a site-branching search close
            # here, and the full search spent a second DP or more on each).
            return v
        best, best_mu = v, 0.0
        q = qb if k > qb else qa
        sign = 1.0 if k > qb else -1.0
        hkey = (qa, qb, case, ws == 0.0, wd == 0.0)

        def val(mu: float) -> tuple[float, int]:
            nonlocal best, best_mu
            vv, kk, code = self._dp(qa, z_hi, ws, wp, wd, mu, case)
            lv = vv - mu * q
            if lv > best:
                self.code = code
                best, best_mu = lv, mu
            return lv, kk

        def done(cut: bool = False) -> float:
            # A search cut short has not found the maximum: no hint for the next.
            if best_mu != 0.0 and not cut and self._hints_on:
                self._mu_hint[hkey] = best_mu / scale
            return best

        # Tangents (mu, g(mu), slope): ``near`` rises towards the maximum, ``far`` falls.
        near: tuple[float, float, int] = (0.0, v, k - q)
        far: tuple[float, float, int] | None = None
        # Multipliers stay within 4^5 scale (an unbounded dual, no plan in the Q range,
        # would otherwise push the hints ever further out, into rounding noise).
        far_out = scale * 4.0 ** 5
        hint = self._mu_hint.get(hkey, 0.0) * scale if self._hints_on else 0.0
        if hint * sign > 0.0 and abs(hint) * (1.0 + _MU_HINT_BAND) < far_out:
            steps = [abs(hint) * (1.0 - _MU_HINT_BAND), abs(hint) * (1.0 + _MU_HINT_BAND)]
        else:
            steps = [scale]
        while steps[-1] * 4 <= far_out * (1.0 + 1e-12):
            steps.append(steps[-1] * 4)
        if steps[-1] < far_out:
            steps.append(far_out)  # as far out as without a hint
        for step in steps:
            mu = sign * step
            lv, kk = val(mu)
            if not math.isfinite(lv):
                return done()
            if kk == q:  # a zero supergradient: the maximum
                return done()
            if best >= ceil:
                return done(True)
            if (kk - q) * sign < 0:
                far = (mu, lv, kk - q)
                break
            near = (mu, lv, kk - q)
        if far is None:
            return done()
        for _ in range(_MU_ITERS):
            (mn, gn, sn), (mf, gf, sf) = near, far
            x = (gf - gn + sn * mn - sf * mf) / (sn - sf)
            inside = min(mn, mf) <= x <= max(mn, mf)
            x = min(max(x, min(mn, mf)), max(mn, mf))
            top = gn + sn * (x - mn)  # no mu does better than the two tangents allow
            if inside and top <= floor:
                return done(True)
            lv, kk = val(x)
            if not math.isfinite(lv):
                break
            if best >= ceil:
                return done(True)
            if kk == q or lv >= top - _MU_TOL * max(abs(top), 1.0):
                break
            if (kk - q) * sign > 0:
                near = (x, lv, kk - q)
            else:
                far = (x, lv, kk - q)
        return done()

    def evaluate(self, qa: int, qb: int, za: float, zb: float,
                 parent: tuple[tuple[float, float], ...] | None = None,
                 ub: float = _INF) -> tuple[tuple[float, float], ...]:
        """Per plan case (single-site, multi-site), (objective bound, S bound) of every
        plan of that case with Q in [qa, qb] and Z in [za, zb].

        ``za`` must already be raised to :meth:`zmin`; ``parent``: the same of a box
        containing this one, which stays valid here: it is kept where the multiplier
        search finds less, and inherited unchanged by a case already at or above
        ``ub`` (the incumbent) or above the parent's least case (lazily: that case is
        computed once its inherited bound is the least of a box being split).
        """
        if parent is None:
            parent = ((-_INF, 0.0),) * len(_CASES)
            if not self.single_site:  # those plans are not counted: no bound needed
                parent = ((_INF, _INF), *parent[1:])
        if za > zb:
            return ((_INF, _INF),) * len(_CASES)
        least = min(b for b, _ in parent)
        out = []
        for case, (p_bound, p_s) in enumerate(parent):
            if p_bound >= ub or p_bound > least:
                out.append((p_bound, p_s))
                continue
            v, s_lo = self._evaluate_case(qa, qb, za, zb, p_s, case, p_bound, ub)
            out.append((max(v, p_bound), s_lo))
        return tuple(out)

    def _evaluate_case(self, qa: int, qb: int, za: float, zb: float, s_parent: float,
                       case: int, floor: float = -_INF, ceil: float = _INF
                       ) -> tuple[float, float]:
        """:meth:`evaluate` restricted to one plan case (single-site or multi-site).

        Its last multiplier search may stop once its bound is sure to stay at most
        ``floor`` (the parent's: the box keeps that) or has reached ``ceil`` (the
        incumbent: the box is closed), and so may the stage-time search where that is the
        last (no energy term); the value returned is then a weaker bound than the full
        search's, which changes neither outcome."""
        s_ceil = _INF
        if self.b <= 0.0 and self.a > 0.0 and math.isfinite(ceil):
            # The box's bound is a (S + (M - 1) za): it reaches ``ceil`` once S reaches
            # this (a margin above, so that the rounding below keeps it there).
            t_ceil = ceil / self.a
            s_ceil = t_ceil - (self.M - 1.0) * za + _CUT_MARGIN * max(abs(t_ceil), 1.0)
        if self.quick_close and self.b > 0.0 and math.isfinite(ceil) and math.isfinite(s_parent):
            quick = self._quick_close(qa, qb, za, zb, s_parent, case, ceil)
            if quick is not None:
                return quick, s_parent
        s_lo = self._lagrange(qa, qb, zb, 1.0, 0.0, 0.0, self.mu_scale, case, s_ceil)
        self.last_ws = self.a
        if not math.isfinite(s_lo):
            return _INF, _INF
        s_lo = max(bounds._below(s_lo), s_parent)
        x_lo = s_lo + (self.M - 1.0) * za
        if self.b <= 0.0:
            return bounds._below(self.a * x_lo), s_lo
        p_lo = self._lagrange(qa, qb, zb, 0.0, 1.0, 0.0, self.idle_scale, case)
        return bounds._below(self._product_search(qa, qb, za, zb, x_lo, p_lo, case, floor,
                                                  ceil)), s_lo

    def _product_search(self, qa: int, qb: int, za: float, zb: float, x_lo: float,
                        p_lo: float, case: int, floor: float = -_INF, ceil: float = _INF
                        ) -> float:
        """The objective's multiplier search with T P linearised at T >= ``x_lo``,
        P >= ``p_lo`` (T P >= x P + p T - x p), before rounding down; stopped as
        :meth:`_evaluate_case`'s last search by ``floor`` and ``ceil``."""
        ws = self.a + self.b * p_lo / 1e3
        self.last_ws = ws
        wp = self.b * x_lo / 1e3
        wd = self.b * self.M / 1e3
        w_scale = ws * self.mu_scale + wp * self.idle_scale
        const = ws * (self.M - 1.0) * za - self.b * x_lo * p_lo / 1e3
        # Margins well above the rounding of ``rest + const`` and of _below.
        lo = floor - const - _CUT_MARGIN * max(abs(floor), 1.0) if math.isfinite(floor) \
            else -_INF
        hi = ceil - const + _CUT_MARGIN * max(abs(ceil), 1.0) if math.isfinite(ceil) else _INF
        return self._search_mu(qa, qb, zb, ws, wp, wd, w_scale, case, lo, hi) + const

    def _quick_close(self, qa: int, qb: int, za: float, zb: float, s_parent: float,
                     case: int, ceil: float) -> float | None:
        """The box's bound if one multiplier search closes it at ``ceil`` from the parent's
        stage-time bound and no idle-power bound, else None.

        :meth:`_evaluate_case` with energy first searches S's and the idle power P's
        least values, which set its linearisation of the product T P (T >= x, P >= p:
        T P >= x P + p T - x p). ``s_parent`` bounds S here too and P >= 0, so with
        x = s_parent + (M - 1) za and p = 0 the same last search gives a valid, weaker
        bound at a third of the searches: where it reaches the incumbent the box is
        closed all the same."""
        t = self._product_search(qa, qb, za, zb, s_parent + (self.M - 1.0) * za, 0.0, case,
                                 ceil=ceil)
        if not math.isfinite(t):
            return None
        v = bounds._below(t)
        return v if v >= ceil else None


def _restrict(bx: _Boxes, cluster: np.ndarray, forced: tuple[int, ...],
              ends: tuple[int, int] | None, path: tuple[int, ...] | None,
              prefix: tuple[int, ...] | None = None,
              gapped: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None,
              joined: int | None = None) -> bool:
    """Restrict ``bx`` to the plans of :func:`parametric_bound`'s ``forced``, ``ends``,
    ``path``, ``prefix`` and ``gapped`` (cluster labels); False when the pool has no such
    plan (a label missing)."""
    labels = np.unique(np.asarray(cluster, np.int64))  # site index i: labels[i]
    index = {int(k): i for i, k in enumerate(labels)}
    if gapped is not None:
        sites = {int(k) for part in gapped for k in part}
        if not sites <= set(index):
            return False
        head, middle, tail = (tuple(int(k) for k in part) for part in gapped)
        bx.follow_gapped(head, middle, tail, joined=joined)
        forced = tuple(sorted(set(forced) | sites))
    if prefix is not None:
        if not prefix or len(set(prefix)) < len(prefix) or len(labels) - len(prefix) < 2:
            raise ValueError("a site prefix names distinct sites and leaves two or more of "
                             f"the pool's out: {prefix}")
        if not set(prefix) <= set(index):
            return False
        forced = tuple(sorted(set(forced) | {int(k) for k in labels}))
        bx.follow_prefix(tuple(prefix))
        bx.restrict_ends(index[prefix[0]], tuple(i for k, i in index.items()
                                                  if k not in prefix))
    if path is not None:
        if len(set(path)) < 2 or any(a == b for a, b in itertools.pairwise(path)):
            raise ValueError(f"a site walk needs two or more sites, none twice in a row: {path}")
        if not set(path) <= set(np.asarray(cluster).tolist()):
            return False
        forced = tuple(sorted(set(forced) | set(path)))
        ends = (path[0], path[-1])
        bx.follow_walk(tuple(path))
    if forced:
        cl_all = np.asarray(cluster, np.int64)
        if not set(forced) <= set(cl_all.tolist()):
            return False
        bx.force = bx.site_last & np.isin(cl_all[bx.order], np.asarray(forced, np.int64))
    bx.walk_must = tuple(sorted(index[k] for k in forced))
    if ends is not None:
        if not {ends[0], ends[1]} <= set(index):
            return False
        bx.restrict_ends(index[ends[0]], index[ends[1]])
    return True


def _may_prove(cases: tuple[tuple[float, float], ...], ub: float) -> bool:
    """Whether per-case bounds (:meth:`_Boxes.evaluate`) reach or prove ``ub``."""
    low = min(b for b, _ in cases)
    return low >= ub or proves(low, ub)


def merge_boxes(boxes: Sequence[Box]) -> tuple[Box, ...]:
    """``boxes`` (disjoint) with each run of boxes of one stage-count range and one bound
    whose bottleneck ranges meet end to end made one box, least bound first.

    The union holds the same plans and each still has an objective at least that bound,
    so a search starting from the merged boxes counts what it would have from the parts.
    Boxes tied at one bound are where a search splits without gain: at metro N=64 L=48
    lambda 1 (instance seed 251) a site-branching node whose 48 start boxes all held its
    parent's bound split each six times before it ended (2,898 open boxes), and each of its
    children priced all 2,898 again (up to 10 s a child)."""
    runs: dict[tuple[int, int, float], list[Box]] = {}
    for b in sorted(boxes, key=lambda b: (b.qa, b.qb, b.bound, b.za)):
        run = runs.setdefault((b.qa, b.qb, b.bound), [])
        if run and run[-1].zb == b.za:
            last = run[-1]
            run[-1] = Box(last.bound, last.qa, last.qb, last.za, b.zb,
                          min(last.s_floor, b.s_floor))
        else:
            run.append(b)
    return tuple(sorted((b for run in runs.values() for b in run),
                        key=lambda b: (b.bound, b.qa, b.za)))


def parametric_bound(
    c: Coefficients,
    layers: int,
    cluster: np.ndarray,
    weights: ObjectiveWeights,
    *,
    incumbent: float | None = None,
    deadline: float | None = None,
    max_boxes: int | None = None,
    stop: Callable[[], bool] | None = None,
    tune_transitions: bool = True,
    forced: tuple[int, ...] = (),
    ends: tuple[int, int] | None = None,
    path: tuple[int, ...] | None = None,
    revisits: int = 0,
    keep_apart: int | tuple[int, ...] | None = None,
    apart_runs: tuple[int, ...] | None = None,
    once: bool = False,
    prefix: tuple[int, ...] | None = None,
    gapped: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None,
    joined: int | None = None,
    start: tuple[Box, ...] | None = None,
    tables: BoxTables | None = None,
    start_stall: int = START_STALL,
    progress: Callable[[float], None] | None = None,
    single_site: bool = True,
) -> ParametricBound:
    """The best-first box search of the module docstring; a proven bound on ``a T + b E``.

    ``incumbent``: the objective of a known plan (boxes at or above it are
    closed, and Z is capped by what such a plan allows). Stops at
    ``deadline`` (``time.perf_counter()``), after ``max_boxes`` box
    evaluations (a deterministic stop), when ``stop()`` is true, or when no
    open box can be refined. Once the least box is final, or after
    :data:`_TUNE_AFTER` boxes (or half of ``max_boxes``), the transition prices are tuned on the
    least box (``tune_transitions``; :meth:`_Boxes.tune_transitions`), again each
    time a least box is final, and the search goes on with them, re-pricing
    each box as it comes up. The value
    returned is always proven: the minimum over the open boxes (and the
    incumbent, if every box reached it). ``forced``: cluster labels every plan counted
    must use (the bound then holds for those plans only). ``ends``: the cluster labels of
    the first and the last stage's site, for plans with those only. ``path``: cluster
    labels, for the plans whose runs visit those sites in that order (the sites are
    forced, the ends set, each send priced by the site it goes to; no transition prices
    needed): once each, or some up to :data:`MAX_VISITS` times, never twice in a row
    (a *walk*: searched by :func:`_walk_dp`). ``revisits``: for the plans whose walk
    steps back to a site already visited at least that many times (1 or more; their walk
    prices bounded by such walks only). ``keep_apart``: a cluster label (or several), for
    the plans that visit that site (each of them) twice or more (each with two of its
    runs kept apart, the rest joined to them; the site is forced); ``apart_runs``: per
    such label, the least runs its plans hold there (two or more; 2 each by default).
    ``once``: for the plans that visit each site they use once (one run per site; their
    walk prices bounded by paths). ``prefix``:
    cluster labels, for the plans that visit every site of the pool once, those first
    and in that order (each send priced by the sites it may go to; no transition prices;
    two or more sites left out of it: else it is a ``path``). ``gapped``: (prefix,
    middle, suffix) cluster labels, for the plans whose runs visit the prefix's sites in
    that order, then the middle's (a multiset, one or more) in any order, then the
    suffix's, never a site twice in a row (the walk DP, each send priced by the sites
    that may be there; no transition prices). ``joined``: with ``gapped``, a middle
    site whose last middle visit stands for two of its visits joined into one run (its
    intra-site sends priced by the cheapest link of any kind; the plans with that site
    visited once more, :mod:`geoplan.cost.site_branching`). ``start``:
    boxes that hold
    every plan counted better than the incumbent, each plan's objective at least its
    box's bound (the open boxes of a search over a superset of these plans); the search
    starts from them instead of from the whole range, each priced once it comes up.
    ``tables``: the pool's :func:`box_tables`, when already known. ``start_stall``: the
    stalled splits a start box counts as made (fewer: its Z range is split further).
    ``progress(bound)``: called with the bound proven so far (the least open box, at most
    the incumbent) when it has risen, at most every :data:`PROGRESS_S` seconds, so that a
    long search certifies a gap before it ends. Within :data:`_NEAR_STALL` of the
    incumbent stalled boxes are split all the same (at most :data:`_NEAR_SPLITS`): a proof
    is at stake there. ``single_site``: False counts only the plans on two or more
    sites (:func:`instance_bound` bounds the others on each site apart).
    """
    t0 = time.perf_counter()
    bx = _Boxes(c, layers, cluster, weights, tables)
    # Start boxes come from a search over more plans whose boxes were left open near the
    # incumbent (site branching's nodes): most of them close, and one search each closes
    # most of those. From the whole range (the root) most tries fail and cost a search.
    bx.quick_close = _QUICK_CLOSE and start is not None
    if path is not None or prefix is not None or gapped is not None:
        tune_transitions = False
    if gapped is not None and (path is not None or prefix is not None or once or revisits
                               or keep_apart is not None):
        raise ValueError("a gapped walk says how often each site is visited: no path, "
                         "prefix, once, revisits or keep_apart with it")
    if prefix is not None and (path is not None or once or revisits or keep_apart is not None):
        raise ValueError("a site prefix says the plans visit each site once, in part in "
                         "which order: no path, once, revisits or keep_apart with it")
    bx.walk_revisits = revisits
    bx.single_site = single_site
    if once and (revisits or keep_apart is not None):
        raise ValueError("plans visiting each site once neither revisit nor keep runs apart")
    bx.once = once
    apart = (keep_apart,) if isinstance(keep_apart, int) else keep_apart
    if apart is not None:
        if path is not None:
            raise ValueError("a site walk says how often each site is visited: no keep_apart")
        forced = tuple(sorted(set(forced) | set(apart)))
    elif apart_runs is not None:
        raise ValueError("apart_runs counts runs of kept-apart sites: it needs keep_apart")
    if joined is not None and gapped is None:
        raise ValueError("a joined visit is a gapped walk's: no joined without gapped")
    if not _restrict(bx, cluster, forced, ends, path, prefix, gapped, joined):
        return ParametricBound(_INF, 0, 0, time.perf_counter() - t0, True)
    if apart is not None:
        bx.keep_apart(apart, apart_runs)
    labels = np.unique(np.asarray(cluster, np.int64))  # site index i: labels[i]
    ub = _INF if incumbent is None else float(incumbent)
    z_hi = bx.z_worst * (1 + 1e-9)
    if math.isfinite(ub):
        M, a, b = bx.M, bx.a, bx.b
        t_cap = bounds.t_iter_cap(ub, a, b, float(np.min(bx.idle)),
                                  float(np.min(bx.dyn * bx.comp)), M, bx.L)
        z_hi = min(z_hi, t_cap / M * (1 + 1e-9))
    z_lo = bx.zmin(1, bx.q_max)
    if not math.isfinite(z_lo) or z_lo > z_hi:
        val = ub if math.isfinite(ub) else _INF
        return ParametricBound(val, 0, 0, time.perf_counter() - t0, True)
    # Entries: (bound, tie, qa, qb, za, zb, per-case bounds, stall, price version).
    heap: list[tuple[float, int, int, int, float, float, tuple[tuple[float, float], ...],
                     int, int]] = []
    counter = 0
    n_boxes = 0
    version = 0  # bumped when the transition prices change: older entries are re-priced

    def push(qa: int, qb: int, za: float, zb: float, parent: float = -_INF,
             cases: tuple[tuple[float, float], ...] | None = None, stall: int = 0) -> None:
        nonlocal counter, n_boxes
        za = max(za, bx.zmin(qa, qb))
        # A box inside its parent keeps the parent's bounds (the multiplier search may miss).
        cases = bx.evaluate(qa, qb, za, zb, cases, ub)
        v = min(b for b, _ in cases)
        # Splits that never raise the bound (a plateau, e.g. lambda = 0 where Z hardly
        # matters) would go on to the resolution in every box: count them. A rise counts
        # when it closes a share of the gap to the incumbent, so a bound creeping up by
        # ever smaller steps stalls too.
        gain = _GAIN_SHARE * (ub - parent) if math.isfinite(ub) and math.isfinite(parent) \
            else _STALL_TOL_FREE * abs(parent)
        stall = stall + 1 if v <= parent + max(gain, _STALL_TOL * abs(parent)) else 0
        v = max(v, parent)
        n_boxes += 1
        if v < ub:
            counter += 1
            heapq.heappush(heap, (v, counter, qa, qb, za, zb, cases, stall, version))

    def tune_due() -> bool:
        # By boxes, not by the clock: two runs with budgets a few ms apart (the portfolio's
        # exact model and the same model alone) then search the same boxes in the same
        # order; tuned at half the deadline, they took different paths (geo N=64 L=96, 5 s:
        # 829.9 against 863.0, the same plan).
        return n_boxes >= _TUNE_AFTER or (max_boxes is not None and n_boxes >= max_boxes // 2)

    if start is None:
        push(1, bx.q_max, z_lo, z_hi)
    else:
        for box in start:
            qb = min(box.qb, bx.q_max)  # a restricted pool may hold fewer stages
            if box.bound < ub and box.qa <= qb and max(box.za, bx.zmin(box.qa, qb)) <= box.zb:
                # Evaluated once it comes up (_PENDING): a search that ends at its deadline
                # or at a final least box need not price every box it started from.
                counter += 1
                heapq.heappush(heap, (box.bound, counter, box.qa, qb, box.za, box.zb,
                                      ((box.bound, box.s_floor),) * len(_CASES),
                                      start_stall, _PENDING))
        if not heap:
            return ParametricBound(ub if math.isfinite(ub) else _INF, n_boxes, bx.dp_calls,
                                   time.perf_counter() - t0, True)
    exhausted = False
    # Tuning rounds left: one when due (tune_due) or once the least box is final, then one more
    # each time a least box is final again (each round re-prices only what comes up).
    tunes = 0 if not tune_transitions or bx.n_sites < 2 or bx.site_pow[-1] == 0 else _TUNE_ROUNDS
    q_splits = 0  # Q splits of stalled boxes so far
    near_splits = 0  # stalled boxes near the incumbent split all the same
    reported, next_report = -_INF, t0 + PROGRESS_S
    while heap:
        if (deadline is not None and time.perf_counter() >= deadline) or (
                max_boxes is not None and n_boxes >= max_boxes) or (stop is not None and stop()):
            break
        if progress is not None and time.perf_counter() >= next_report:
            # Every box is a valid bound on its plans and children never fall below their
            # parent, so the least one bounds every plan not yet closed by the incumbent.
            low = min(heap[0][0], ub)
            if low > reported:
                reported = low
                progress(low)
            next_report = time.perf_counter() + PROGRESS_S
        v, _, qa, qb, za, zb, cases, stall, ver = heap[0]
        if ver == _PENDING:
            heapq.heappop(heap)
            push(qa, qb, za, zb, v, None, stall)
            continue
        if ver < version:
            # Priced before the transition prices changed: only the multi-site case can move.
            heapq.heappop(heap)
            (b0, s0), (b1, s1) = cases
            if b1 <= b0 and b1 < ub:
                nb, ns = bx._evaluate_case(qa, qb, za, zb, s1, 1)
                cases = ((b0, s0), (max(nb, b1), ns))
            nv = max(v, min(b for b, _ in cases))
            if nv < ub:
                counter += 1
                heapq.heappush(heap, (nv, counter, qa, qb, za, zb, cases,
                                      0 if nv > v else stall, version))
            continue
        if qa < qb and bx.caps_differ(qa, qb):
            heapq.heappop(heap)
            qm = (qa + qb) // 2
            push(qa, qm, za, zb, v, cases)
            push(qm + 1, qb, za, zb, v, cases)
            continue
        near = math.isfinite(ub) and v >= ub * (1 - _NEAR)
        final_width = (_Z_RESOLUTION_NEAR if near else _Z_RESOLUTION) * zb
        if stall >= _MAX_STALL and near_splits < _NEAR_SPLITS and math.isfinite(ub) \
                and v >= ub * (1 - _NEAR_STALL) and (qa < qb or _may_prove(
                    bx.evaluate(qa, qb, za, za, cases, ub), ub)):
            # Close to the incumbent a proof is at stake: split on (a box started from a
            # parent's, with stalls already counted, would stop short of it). Not when
            # Z = za alone leaves the incumbent unproven: the part of the box at za never
            # rises above that, however fine the splits (at metro N=64 L=48 lambda 1,
            # instance seed 251, site-branching nodes 1.7e-5 short at the least bottleneck
            # of their stage count took 10,000 DPs each to end where they started).
            near_splits += 1
            stall = 0
        if qa < qb and (stall >= _MAX_STALL or zb - za <= final_width) \
                and q_splits < _MAX_Q_SPLITS:
            q_splits += 1
            # A Q range stalled on Z (its multiplier bound does not rise) is split on Q:
            # each part's stage-count relaxation is tighter. Each part starts with
            # _Q_STALL stalled splits counted: a few Z splits of its own, while a true
            # plateau (M = 1, or lambda = 0) still ends soon.
            heapq.heappop(heap)
            qm = (qa + qb) // 2
            push(qa, qm, za, zb, v, cases, _Q_STALL)
            push(qm + 1, qb, za, zb, v, cases, _Q_STALL)
            continue
        final = zb - za <= final_width or stall >= _MAX_STALL
        if tunes and (final or (tunes == _TUNE_ROUNDS and tune_due())):
            tunes -= 1
            if cases[1][0] <= cases[0][0] and bx.tune_transitions(qa, qb, za, zb, deadline):
                version += 1
                continue
            if final:
                tunes = 0
        if final:
            exhausted = True  # the least box is final: the bound cannot rise any more
            break
        heapq.heappop(heap)
        zm = 0.5 * (za + zb)
        push(qa, qb, za, zm, v, cases, stall)
        push(qa, qb, zm, zb, v, cases, stall)
    if not heap:
        exhausted = True
    # Box values are already taken FLOAT_MARGIN low; the incumbent is a plan's own value.
    value = min(heap[0][0], ub) if heap else ub
    ordered = sorted(heap)
    boxes = merge_boxes([Box(float(v), qa, qb, za, zb, min(s for _, s in cases))
                         for v, _, qa, qb, za, zb, cases, _, _ in ordered])
    hints: list[tuple[float, tuple[int, ...]]] = []
    configs: list[tuple[tuple[int, int, int], ...]] = []
    if bx.n_sites >= 2 and not (stop is not None and stop()):
        late = deadline is not None and time.perf_counter() >= deadline
        for v, _, qa, qb, za, zb, cases, _, _ in ordered[:1 if late else HINT_BOXES]:
            used = tuple(int(labels[i]) for i in bx.minimiser_sites(qa, qb, za, zb, cases))
            hints.append((float(v), used))
            if path is not None:
                found = tuple(bx.minimiser())
                if found and found not in configs:
                    configs.append(found)
    return ParametricBound(float(value), n_boxes, bx.dp_calls, time.perf_counter() - t0,
                           exhausted, boxes, bx.transitions_summary, hint_sets(hints),
                           configs=tuple(configs), hints=tuple(hints))


def hint_sets(hints: Iterable[tuple[float, tuple[int, ...]]]) -> tuple[tuple[int, ...], ...]:
    """The distinct site sets of ``hints`` (:attr:`ParametricBound.hints`), in their order,
    empty ones left out: a search's :attr:`ParametricBound.site_sets`."""
    out: list[tuple[int, ...]] = []
    for _, used in hints:
        if used and used not in out:
            out.append(used)
    return tuple(out)


def path_minimisers(c: Coefficients, layers: int, cluster: np.ndarray,
                    weights: ObjectiveWeights, path: tuple[int, ...],
                    boxes: tuple[Box, ...], tables: BoxTables | None = None
                    ) -> Iterator[tuple[tuple[int, int, int], ...]]:
    """Per box of ``boxes`` (its Q and Z range only; ``bound`` is not read), the relaxed
    minimiser of the objective over the plans in it that visit the sites of ``path``
    (cluster labels) once each in that order: (GPU, role, layers) per used GPU, a
    pipeline by :func:`path_plan`. A primal candidate, not a bound: one multiplier
    search per box, no splits. Boxes with no such plan are skipped."""
    if len(set(path)) != len(path):
        raise ValueError(f"a site path visits each site once: {path}")
    bx = _Boxes(c, layers, cluster, weights, tables)
    if not _restrict(bx, cluster, (), None, path):
        return
    for box in boxes:
        qb = min(box.qb, bx.q_max)
        za = max(box.za, bx.zmin(box.qa, qb))
        if box.qa > qb or za > box.zb:
            continue
        # Multi-site case only: a path visits two or more sites.
        v, _ = bx._evaluate_case(box.qa, qb, za, box.zb, -_INF, 1)
        if math.isfinite(v):
            found = tuple(bx.minimiser())
            if found:
                yield found


def path_plan(config: tuple[tuple[int, int, int], ...], cluster: np.ndarray,
              path: tuple[int, ...]) -> list[tuple[int, int]] | None:
    """The pipeline (GPU, layers) of a relaxed minimiser on a site ``path`` or walk
    (:attr:`ParametricBound.configs`): per visit in walk order its run, the GPU whose
    send back is not intra-site first, the one whose send forward is not last; None
    when the roles do not form one run per visit."""
    walk = len(set(path)) < len(path)
    runs = []
    seen: dict[int, int] = {}
    for k in path:
        j = seen.get(k, 0)
        seen[k] = j + 1
        if walk:
            # Walk role codes _WALK_ROLES j + role: middle, start, end, single (_walk_dp).
            on = [(g, r % _WALK_ROLES, n) for g, r, n in config
                  if cluster[g] == k and r // _WALK_ROLES == j]
            starts = [x for x in on if x[1] in (1, 3)]
            ends = [x for x in on if x[1] in (2, 3)]
            mids = [x for x in on if x[1] == 0]
        else:
            on = [(g, r, n) for g, r, n in config if cluster[g] == k]
            starts = [x for x in on if _ROLE_PREV[x[1]] != 1]
            ends = [x for x in on if _ROLE_NEXT[x[1]] != 1]
            mids = [x for x in on if _ROLE_PREV[x[1]] == 1 and _ROLE_NEXT[x[1]] == 1]
        if len(starts) != 1 or len(ends) != 1:
            return None
        run = [starts[0], *mids] + ([ends[0]] if ends[0] is not starts[0] else [])
        if len(run) != len(on):
            return None
        runs += [(g, n) for g, _, n in run]
    return runs


def proves(bound: float, objective: float) -> bool:
    """Whether ``bound`` proves a plan of ``objective`` optimal (:data:`PROOF_TOLERANCE`)."""
    return bound >= objective * (1 - PROOF_TOLERANCE)


def instance_bound(instance: Instance, incumbent: float | None, share: float, remaining: float,
                   stop: Callable[[], bool] | None = None,
                   progress: Callable[[float], None] | None = None,
                   workers: int = 1) -> ParametricBound:
    """:func:`parametric_bound` of an instance (normalisers resolved) within ``share`` of
    ``remaining`` seconds (``progress``: as there); on two levels (:func:`two_level_bound`)
    where its sites hold nodes (:func:`geoplan.cost.bounds.node_groups`). ``workers`` > 1:
    the search is split over that many processes (:mod:`geoplan.cost.root_split`)."""
    from geoplan.cost import root_split  # it builds on this module
    deadline = time.perf_counter() + share * remaining if math.isfinite(remaining) else None
    c, cluster = instance.coefficients(), bounds.clusters(instance)
    groups = bounds.node_groups(np.asarray(c.comm_ms), cluster)
    if groups is not None:
        return two_level_bound(instance, groups, incumbent, deadline, stop, progress)
    return root_split.split_bound(c, instance.layers, cluster,
                                  ObjectiveWeights.from_instance(instance), incumbent=incumbent,
                                  deadline=deadline, workers=workers, stop=stop,
                                  progress=progress)


def two_level_bound(instance: Instance, groups: np.ndarray, incumbent: float | None,
                    deadline: float | None, stop: Callable[[], bool] | None = None,
                    progress: Callable[[float], None] | None = None) -> ParametricBound:
    """The parametric bound with the plans parted by whether they stay on one site.

    The plans on one site are bounded site by site, on the pool of that site alone with
    its node ``groups`` as the sites of the relaxation: their sends between nodes are
    then priced by the links between nodes, not by the fastest link inside one (the
    site-level relaxation's single-site case prices every send at the latter, so a
    plan spread over several nodes was priced as if on one: cloud N=512 L=128 lambda 1,
    instance seed 5, 152.42 against a plan of 158.05, where every site's own bound but
    one reached the plan). The plans on two or more sites keep the site-level search
    (``single_site=False``). The sites' searches run first, sharing
    :data:`_SITE_PARTS_SHARE` of the time; the bound is the least over the parts, and the
    open boxes are all parts' (each plan better than the incumbent lies in one of its
    part's)."""
    t0 = time.perf_counter()
    c, cluster = instance.coefficients(), bounds.clusters(instance)
    labels = np.unique(cluster)
    parts: list[tuple[ParametricBound, tuple[tuple[int, ...], ...]]] = []
    plan: tuple[tuple[str, int], ...] | None = None  # a better plan a site's search found
    for i, k in enumerate(labels.tolist()):
        keep = cluster == k
        try:
            sub = instance if keep.all() else instance.subset(
                [g.id for g, x in zip(instance.gpus, keep, strict=True) if x])
        except InputError:  # those GPUs cannot hold the model: no plan on that site alone
            continue
        now = time.perf_counter()
        sc = sub.coefficients()
        tab = node_runs.node_tables(sc, sub.layers, groups[keep]) \
            if np.unique(groups[keep]).size >= 2 else None
        node = tab is not None and tab.uniform
        until = None if deadline is None else now + max(deadline - now, 0.0) * \
            (_NODE_PARTS_SHARE if node else _SITE_PARTS_SHARE) / (labels.size - i)
        if tab is not None and node:
            pb, hit = _node_part(instance, sub, tab, incumbent, until, stop)
            if hit is not None and (incumbent is None or hit[1] < incumbent):
                plan, incumbent = hit
            parts.append((pb, ((int(k),),)))
            continue
        # A search stopped at once still returns its root box's bound, so no site is left
        # without one (its plans would otherwise be unbounded).
        pb = parametric_bound(sc, sub.layers, groups[keep], ObjectiveWeights.from_instance(sub),
                              incumbent=incumbent, deadline=until, stop=stop)
        parts.append((pb, ((int(k),),)))
    one_site = min((pb.value for pb, _ in parts), default=_INF)
    multi = None
    if labels.size >= 2:
        shown = None if progress is None else (lambda b: progress(min(b, one_site)))
        multi = parametric_bound(c, instance.layers, cluster,
                                 ObjectiveWeights.from_instance(instance), incumbent=incumbent,
                                 deadline=deadline, stop=stop, progress=shown,
                                 single_site=False)
        parts.append((multi, multi.site_sets))
    parts.sort(key=lambda t: t[0].value)
    sets: list[tuple[int, ...]] = []
    ub = _INF if incumbent is None else incumbent
    for pb, ss in parts:
        if pb.value < ub:  # a part at the incumbent holds no better plan to point at
            sets += [x for x in ss if x not in sets]
    found = [pb for pb, _ in parts]
    return ParametricBound(
        min((pb.value for pb in found), default=_INF), sum(pb.boxes for pb in found),
        sum(pb.dp_calls for pb in found), time.perf_counter() - t0,
        all(pb.exhausted for pb in found),
        tuple(sorted((b for pb in found for b in pb.open_boxes), key=lambda b: b.bound)),
        None if multi is None else multi.transitions, tuple(sets),
        plan=plan, plan_objective=None if plan is None else incumbent,
        levels={"sites": len(found) - (multi is not None), "one_site_bound": one_site,
                "multi_site_bound": None if multi is None else multi.value,
                "node_runs": sum(pb.levels is not None for pb in found),
                "improved": plan is not None},
        node_sets=tuple((ss[0][0], pb.site_sets) for pb, ss in parts
                        if pb is not multi and pb.levels is None))


def _node_part(instance: Instance, sub: Instance, tab: node_runs.NodeTables,
               incumbent: float | None, deadline: float | None,
               stop: Callable[[], bool] | None
               ) -> tuple[ParametricBound, tuple[tuple[tuple[str, int], ...], float] | None]:
    """The node-run bound (:mod:`geoplan.cost.node_runs`) of the plans on the site of pool
    ``sub``, as a part of :func:`two_level_bound`, and the plan its least final box
    gives (GPU id, layers per stage; priced by the evaluator on ``instance``), if any.
    Cut short, it leaves one open box over the site's whole stage-count and bottleneck
    range at its bound: its own boxes bound the relaxed bottleneck, not the plans'."""
    from geoplan.cost.evaluate import evaluate
    from geoplan.model.plan import Plan

    sc = sub.coefficients()
    res = node_runs.node_run_bound(tab, sub.layers, sc.micro_batches,
                                   ObjectiveWeights.from_instance(sub), incumbent=incumbent,
                                   deadline=deadline, stop=stop)
    found = None
    if res.runs:
        pairs = node_runs.run_plan(tab, res.runs, res.q, res.z, sub.layers)
        if pairs is not None:
            ids = [g.id for g in sub.gpus]
            plan = tuple((ids[g], n) for g, n in pairs)
            ev = evaluate(instance, Plan.from_pairs(plan))
            if ev.feasible:
                found = (plan, float(ev.objective))
    ub = _INF if incumbent is None else incumbent
    boxes: tuple[Box, ...] = ()
    if res.value < ub:
        worst = bounds.tmax_worst(float(np.max(sc.comp_ms)), float(np.max(np.where(
            np.isfinite(sc.comm_ms), sc.comm_ms, 0.0))), sub.layers, float(sc.overhead_ms))
        boxes = (Box(res.value, 1, min(sc.n, sub.layers), 0.0, worst * (1 + 1e-9), 0.0),)
    pb = ParametricBound(res.value, res.boxes, res.dp_calls, res.seconds, res.exhausted, boxes,
                         levels={"node_runs": True})
    return pb, found


def refine_by_sites(instance: Instance, pb: ParametricBound, incumbent: float | None,
                    share: float, remaining: float,
                    stop: Callable[[], bool] | None = None, workers: int = 1,
                    apart_back: int = 2) -> ParametricBound:
    """``pb`` (:func:`instance_bound`'s) raised by branching on sites
    (:mod:`geoplan.cost.site_branching`, node searches in ``workers`` processes) within
    ``share`` of ``remaining`` seconds; as it is when it proves ``incumbent``. A search
    cut by its deadline goes on in the nodes (each starts from its parent's open boxes).
    ``apart_back``: as :func:`~geoplan.cost.site_branching.branch_on_sites`'s."""
    if not math.isfinite(remaining) or not math.isfinite(pb.value) or (
            incumbent is not None and proves(pb.value, incumbent)):
        return pb
    from geoplan.cost.site_branching import branch_on_sites

    deadline = time.perf_counter() + share * remaining
    br = branch_on_sites(instance, pb, incumbent, deadline, stop, workers=workers,
                         apart_back=apart_back)
    if br.nodes == 0:
        return pb
    names = bounds.site_names(instance) or []
    hint = tuple(sorted(names.index(s) for s in br.sites))
    sets = ((hint,) if hint else ()) + tuple(x for x in pb.site_sets if x != hint)
    return replace(pb, value=br.value, seconds=pb.seconds + br.seconds, site_sets=sets,
                   branching=br.summary(), plan=br.plan, plan_objective=br.objective,
                   classes=br.classes,
                   open_sets=tuple(tuple(sorted(names.index(s) for s in x))
                                   for x in br.open_sets))
