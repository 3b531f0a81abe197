"""Prices of inter-site transitions for the parametric bound (:mod:`geoplan.cost.parametric`).

A transition from a run ending on site a (its X end, the send forward) to a run starting
on site b (its S end, the send back) costs its round trip ``c(g->h) + c(h->g)``, at least
``trip(a, b)``. The parametric bound's DP sees each site's ends, not which site follows
which, so it needs prices that no plan's transitions undercut. Two forms, each a set of
linear constraints on a few numbers per site (any point of them gives a valid bound;
:meth:`geoplan.cost.parametric._Boxes.tune_transitions` picks one by Kelley's cutting
planes, :class:`KelleyLP`):

* **Potentials** ``alpha_a`` (per X end) and ``beta_b`` (per S end) with
  ``alpha_a + beta_b <= trip(a, b)``: each transition pays at most its round trip.
* **Walk prices** ``h(s, kind)`` per site and kind of end set it closes with (F..X,
  S..L, S..X, or F..X with S..L), on top of floor potentials: for every set U of used
  sites, first site F and last site L, the prices of U's sites are at most the cheapest
  walk from F to L through all of U (revisits allowed) in reduced round trips
  ``trip(a, b) - floor_a - floor_b`` (:func:`walk_rows`). A site passed through
  between two others then pays for the detour its transitions take.

Both keep every price at least the site's floor (the largest second-cheapest link of its
GPUs), so joining a site's runs (the parametric module's merge argument) never raises a
plan's price: a joined X or S end becomes intra-site sends priced no higher.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["KINDS", "KelleyLP", "potential_prices", "site_links", "walk_rows"]

_INF = math.inf
#: The end sets (run-end masks: bit 0 F, 1 L, 2 S, 3 X) a site of a multi-site plan
#: closes with, in the order of the walk prices' kinds.
KINDS = (9, 6, 12, 15)


def site_links(comm: np.ndarray, cluster: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """Per site pair the least round trip (inf: no GPU pair linked both ways), per site the
    floor (the largest second-cheapest link of its GPUs), and each GPU's site (0..S-1)."""
    sites, idx = np.unique(np.asarray(cluster), return_inverse=True)
    n_s = sites.size
    both = np.isfinite(comm) & np.isfinite(comm.T)
    np.fill_diagonal(both, False)
    trip = np.where(both, comm + comm.T, _INF)
    t = np.full((n_s, n_s), _INF)
    lo = np.zeros(n_s)
    for a in range(n_s):
        ga = idx == a
        for b in range(n_s):
            if a != b:
                t[a, b] = float(np.min(trip[np.ix_(ga, idx == b)], initial=_INF))
        for g in np.nonzero(ga)[0]:
            d = np.sort(comm[g, both[g]])
            lo[a] = max(lo[a], d[1] if d.size >= 2 else (d[0] if d.size else 0.0))
    return t, lo, idx


def potential_prices(base: np.ndarray, site: np.ndarray, alpha: np.ndarray,
                     beta: np.ndarray) -> np.ndarray:
    """Role prices (``parametric.role_prices`` layout) with each inter-site send priced by
    its site's potential: ``base`` the cheapest-link prices, ``site`` each GPU's site."""
    out = base.copy()
    for g in range(base.shape[0]):
        c_in = base[g, 1]
        a, b = alpha[site[g]], beta[site[g]]
        new = np.array([base[g, 0], c_in, b + c_in, c_in, c_in + a, 0.0, a, b, a + b])
        out[g] = np.where(np.isfinite(base[g]), new, _INF)
    return out


@njit(cache=True)
def _walks(t, simple=False):  # pragma: no cover - compiled
    """D[f, S, v]: the cheapest walk from site f through exactly the sites of bit set S
    (revisits allowed; ``simple``: each once, a path) ending at v (inf: none); ``t`` the
    nonnegative step costs."""
    n = t.shape[0]
    full = 1 << n
    D = np.full((n, full, n), np.inf)
    for f in range(n):
        D[f, 1 << f, f] = 0.0
        for S in range(full):
            if not (S >> f) & 1 or S == 1 << f:
                continue
            for v in range(n):
                if (S >> v) & 1 and v != f:
                    prev = S & ~(1 << v)
                    best = np.inf
                    for u in range(n):
                        if (prev >> u) & 1 and D[f, prev, u] + t[u, v] < best:
                            best = D[f, prev, u] + t[u, v]
                    D[f, S, v] = best
            # Walks may step back to sites already in S: relax within S (costs >= 0).
            if not simple:
                _relax_within(D, f, S, t)
    return D


@njit(cache=True)
def _relax_within(D, f, S, t):  # pragma: no cover - compiled
    """Lower D[f, S, v] by steps between sites of S (Bellman-Ford; costs >= 0)."""
    n = t.shape[0]
    for _ in range(n):
        changed = False
        for u in range(n):
            if not (S >> u) & 1 or D[f, S, u] == np.inf:
                continue
            for v in range(n):
                if (S >> v) & 1 and v != u and D[f, S, u] + t[u, v] < D[f, S, v]:
                    D[f, S, v] = D[f, S, u] + t[u, v]
                    changed = True
        if not changed:
            break


@njit(cache=True)
def _revisiting_walks(t, need):  # pragma: no cover - compiled
    """R[f, S, v]: the cheapest walk from site f through exactly the sites of bit set S
    ending at v that makes at least ``need`` (1 or more) steps to a site already visited
    (inf: none); ``t`` as in :func:`_walks`."""
    n = t.shape[0]
    full = 1 << n
    # Per level (repeats so far, the last level: at least need), as _walks' D.
    D = np.full((need + 1, n, full, n), np.inf)
    for f in range(n):
        D[0, f, 1 << f, f] = 0.0
        for S in range(full):
            if not (S >> f) & 1:
                continue
            for v in range(n):
                if not (S >> v) & 1:
                    continue
                prev = S & ~(1 << v)
                if v != f and prev:
                    for u in range(n):
                        if (prev >> u) & 1:
                            for lv in range(need + 1):
                                if D[lv, f, prev, u] + t[u, v] < D[lv, f, S, v]:
                                    D[lv, f, S, v] = D[lv, f, prev, u] + t[u, v]
            # A step back to a site already on the walk is one more repeat.
            for lv in range(need):
                for v in range(n):
                    if not (S >> v) & 1:
                        continue
                    for u in range(n):
                        if (S >> u) & 1 and u != v and \
                                D[lv, f, S, u] + t[u, v] < D[lv + 1, f, S, v]:
                            D[lv + 1, f, S, v] = D[lv, f, S, u] + t[u, v]
            _relax_within(D[need], f, S, t)
    return D[need]


def walk_rows(trip: np.ndarray, lo: np.ndarray, first: int | None = None,
              last: int | None = None, must: tuple[int, ...] = (), revisits: int = 0,
              once: bool = False) -> list[tuple[np.ndarray, float]]:
    """The walk prices' constraints: (variable indices, right-hand side) rows of
    ``sum x[i] <= rhs``, variable ``4 s + k`` the price of site s closing with ``KINDS[k]``.

    For every used set U (two or more sites), first site F and last site L:
    ``h(F, F..X) + h(L, S..L) + sum of h(m, S..X) over U's other sites <= W(U, F, L)``,
    and with F = L, ``h(F, both) + sum h(m, S..X) <= `` the cheapest closed walk.
    Requires ``lo[a] + lo[b] <= trip[a, b]`` (reduced trips are nonnegative). Prices
    for only the plans whose first site is ``first``, last site ``last`` and used sites
    include ``must`` need only the rows of those (first, last, used set); for only the
    plans whose walk steps back to a visited site at least ``revisits`` times (1 or more),
    only walks that do; ``once``: for only the plans visiting each site once, paths
    (no closed walks: the first and last stage are then on distinct sites).
    """
    n = trip.shape[0]
    red = trip - lo[:, None] - lo[None, :]
    red = np.where(np.isfinite(red), np.maximum(red, 0.0), _INF)
    np.fill_diagonal(red, _INF)
    if once and revisits:
        raise ValueError("plans visiting each site once never step back")
    D = _walks(red, once)
    R = _revisiting_walks(red, int(revisits)) if revisits else D
    # A closed walk's step back to its first site is a repeat of its own.
    C = _revisiting_walks(red, int(revisits) - 1) if revisits >= 2 else D
    rows: list[tuple[np.ndarray, float]] = []
    need = sum(1 << m for m in must)
    for S in range(1, 1 << n):
        members = [s for s in range(n) if (S >> s) & 1]
        if len(members) < 2 or S & need != need:
            continue
        for f in members:
            if first is not None and f != first:
                continue
            closed = min((C[f, S, u] + red[u, f] for u in members if u != f), default=_INF)
            mids = [4 * m + 2 for m in members if m != f]
            if math.isfinite(closed) and (last is None or last == f) and not once:
                rows.append((np.array([4 * f + 3, *mids]), float(closed)))
            for end in members:
                w = R[f, S, end]
                if end == f or not math.isfinite(w) or (last is not None and end != last):
                    continue
                idx = [4 * f, 4 * end + 1, *(4 * m + 2 for m in members if m not in (f, end))]
                rows.append((np.array(idx), float(w)))
    return rows


class KelleyLP:
    """Kelley's cutting-plane model: max theta s.t. theta <= v_k + g_k (x - x_k) for every
    cut, ``sum x[rows] <= rhs``, ``lo_x <= x <= hi_x`` (GLOP, built once; cuts and the
    trust region change between solves)."""

    def __init__(self, lo_x: np.ndarray, hi_x: np.ndarray,
                 rows: list[tuple[np.ndarray, float]]) -> None:
        from ortools.linear_solver import pywraplp

        self.lo_x, self.hi_x, self.rows = lo_x, hi_x, rows
        self.solver = pywraplp.Solver.CreateSolver("GLOP")
        self.x = [self.solver.NumVar(float(lo_x[k]), float(hi_x[k]), "")
                  for k in range(lo_x.size)]
        inf = self.solver.infinity()
        self.theta = self.solver.NumVar(-inf, inf, "")
        for idx, rhs in rows:
            ct = self.solver.Constraint(-inf, rhs)
            for k in idx:
                ct.SetCoefficient(self.x[int(k)], 1.0)
        self.solver.Maximize(self.theta)

    def add_cut(self, v: float, g: np.ndarray, xk: np.ndarray) -> None:
        """theta <= v + g (x - xk)."""
        ct = self.solver.Constraint(-self.solver.infinity(), float(v - g @ xk))
        ct.SetCoefficient(self.theta, 1.0)
        for k in np.nonzero(g)[0]:
            ct.SetCoefficient(self.x[int(k)], -float(g[k]))

    def point(self, centre: np.ndarray, radius: float) -> tuple[float, np.ndarray] | None:
        """The model's maximiser within ``radius`` of ``centre`` (per coordinate); (theta, x)
        or None. The point is made exactly feasible (the LP's tolerance may leave a hair
        above a side): a row still above its side lowers its variables, which only eases
        the other rows."""
        from ortools.linear_solver import pywraplp

        lo = np.maximum(self.lo_x, centre - radius)
        hi = np.minimum(self.hi_x, centre + radius)
        for k, var in enumerate(self.x):
            var.SetBounds(float(lo[k]), float(hi[k]))
        if self.solver.Solve() != pywraplp.Solver.OPTIMAL:
            return None
        out = np.clip(np.array([v.solution_value() for v in self.x]), self.lo_x, self.hi_x)
        for idx, rhs in self.rows:
            over = float(np.sum(out[idx])) - rhs
            for k in idx:
                if over <= 0:
                    break
                cut = min(over, out[k] - self.lo_x[k])
                out[k] -= cut
                over -= cut
        if any(float(np.sum(out[idx])) > rhs for idx, rhs in self.rows):
            return None
        return float(self.theta.solution_value()), out
