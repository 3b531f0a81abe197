"""The bottleneck-parametric bound (geoplan.cost.parametric) never exceeds the optimum.

The optimum comes from the independent reference enumerator
(``tests/reference_model.py``) on tiny instances of every family, with and
without sites, with a stage overhead, at lambda 1, 0.5 and 0. The search is
stopped by a box count (deterministic), never by the clock.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
import reference_model as ref

from geoplan.cost import bounds, parametric
from geoplan.cost.baseline import metis_default_plan
from geoplan.cost.evaluate import Evaluator
from geoplan.cost.parametric import N_ROLES, parametric_bound, proves, role_prices
from geoplan.cost.transitions import KelleyLP, potential_prices, site_links, walk_rows
from geoplan.model import generators
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import solve


def _case(seed: int) -> tuple[dict, Instance, Evaluator] | None:
    rng = random.Random(7000 + seed)
    fam = ("geo", "metro", "rand")[seed % 3]
    n, layers = rng.randint(2, 5), rng.randint(2, 6)
    lam = (1.0, 0.5, 0.0)[(seed // 3) % 3]
    if fam == "rand":
        d = ref.random_instance(rng, n_gpus=n, layers=layers)
        if rng.random() < 0.7:
            for g in d["gpus"]:
                g["site"] = f"s{rng.randint(0, 1)}"
        d["objective"] = {"lambda": lam}
    else:
        d = generators.by_family(fam, n, layers, seed, lam=lam)
    if seed % 4 == 1:
        d["training"]["stage_overhead_ms"] = rng.choice([0.5, 3.0])
    inst = Instance.from_dict(d)
    try:
        ev = Evaluator(inst)
    except Exception:  # lambda 0.5 with no baseline plan to take normalisers from
        return None
    return d, inst, ev


@pytest.mark.parametrize("seed", range(60))
def test_bound_never_exceeds_the_reference_optimum(seed: int) -> None:
    case = _case(seed)
    if case is None:
        pytest.skip("no normalisers for this random instance")
    d, inst, ev = case
    w = ev.weights
    mixed = 0.0 < w.lam < 1.0
    opt = ref.optimum_ref(d, w.t_ref if mixed else None, w.e_ref if mixed else None)
    c = inst.coefficients()
    pb = parametric_bound(c, inst.layers, bounds.clusters(inst), w, max_boxes=300)
    if not math.isfinite(opt.objective):
        return  # no feasible plan: any bound is right
    assert pb.value <= opt.objective * (1 + 1e-12), (pb, opt.objective)
    # With the optimum as incumbent the bound still holds and is never above it.
    pb2 = parametric_bound(c, inst.layers, bounds.clusters(inst), w,
                           incumbent=opt.objective, max_boxes=300)
    assert pb2.value <= opt.objective
    # From the first search's boxes (as site branching's nodes start), where boxes are
    # first tried for closing by the last multiplier search alone (lambda in (0, 1)).
    pb3 = parametric_bound(c, inst.layers, bounds.clusters(inst), w,
                           incumbent=opt.objective, max_boxes=300, start=pb.open_boxes)
    assert pb3.value <= opt.objective


def test_bound_is_tight_where_the_relaxation_is_exact() -> None:
    """One GPU: the only plans put all layers on it; the bound must reach T = M L c + o M."""
    d = ref.random_instance(random.Random(3), n_gpus=1, layers=4)
    d["objective"] = {"lambda": 1.0}
    inst = Instance.from_dict(d)
    ev = Evaluator(inst)
    opt = ref.optimum_ref(d)
    pb = parametric_bound(inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights,
                          max_boxes=200)
    assert pb.exhausted
    assert pb.value == pytest.approx(opt.objective, rel=1e-9)


#: Two sites of two GPUs; GPU 1 has one inter-site link only.
_FOUR_GPUS = np.array([[math.inf, 1.0, 5.0, 7.0],
                       [1.0, math.inf, 6.0, math.inf],
                       [5.0, 6.0, math.inf, 2.0],
                       [7.0, math.inf, 2.0, math.inf]])
_TWO_SITES = np.array([0, 0, 1, 1])


def test_role_prices_follow_the_cheapest_links() -> None:
    inf = math.inf
    comm, cluster = _FOUR_GPUS, _TWO_SITES
    p = role_prices(comm, cluster)
    assert p.shape == (4, N_ROLES)
    # GPU 0: links 1 (intra), 5 and 7 (inter).
    m2, start_first, start_x, end_last, end_x, single, s_first, s_last, x2 = p[0]
    assert (m2, start_first, start_x, end_last, end_x) == (6.0, 1.0, 6.0, 1.0, 6.0)
    assert (single, s_first, s_last, x2) == (0.0, 5.0, 5.0, 12.0)
    # GPU 1 has one inter link only: two inter sends are impossible.
    assert p[1, 8] == inf and p[1, 6] == 6.0


def test_deterministic_under_a_box_limit() -> None:
    inst = Instance.from_dict(generators.by_family("metro", 12, 12, 5))
    ev = Evaluator(inst)
    args = (inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights)
    a = parametric_bound(*args, max_boxes=25)
    b = parametric_bound(*args, max_boxes=25)
    assert (a.value, a.boxes, a.dp_calls) == (b.value, b.boxes, b.dp_calls)
    more = parametric_bound(*args, max_boxes=120)
    assert more.value >= a.value  # refining only raises the bound


def test_site_sets_name_distinct_sets_of_real_sites() -> None:
    """An unproven search (box limit) names the sites of its least boxes' minimisers:
    distinct non-empty sets of cluster labels, the same on a second run; one cluster
    names none (nothing to restrict to)."""
    inst = Instance.from_dict(generators.by_family("metro", 12, 12, 5))
    ev = Evaluator(inst)
    cl = bounds.clusters(inst)
    args = (inst.coefficients(), inst.layers, cl, ev.weights)
    a = parametric_bound(*args, max_boxes=25)
    assert a.open_boxes and a.site_sets
    assert len(set(a.site_sets)) == len(a.site_sets)
    labels = set(cl.tolist())
    assert all(s and set(s) <= labels and list(s) == sorted(s) for s in a.site_sets)
    assert parametric_bound(*args, max_boxes=25).site_sets == a.site_sets
    one = parametric_bound(inst.coefficients(), inst.layers, np.zeros(inst.n, np.int64),
                           ev.weights, max_boxes=25)
    assert one.site_sets == ()


def test_bound_below_a_solved_plan_at_moderate_size() -> None:
    """N=10 geo: B&B proves its plan optimal (in about a second); the bound stays below it."""
    inst = Instance.from_dict(generators.by_family("geo", 10, 10, 2))
    ev = Evaluator(inst)
    res = solve(inst, "bnb", seed=1, time_limit=600, threads=1)
    pb = parametric_bound(inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights,
                          max_boxes=400)
    assert res.status == "optimal"
    assert pb.value <= res.objective


@pytest.mark.parametrize(("seed", "n"), [(0, 8), (3, 8), (3, 12), (5, 12), (1, 12)])
def test_bound_reaches_the_optimum_on_small_geo_pools(seed: int, n: int) -> None:
    """geo pools, lambda 1: B&B's proven optimum is reached to PROOF_TOLERANCE.

    The first four were 2-7 % short before the single-site/multi-site split and the
    Q split of stalled boxes: merging a revisited site into one run, and the
    stage-count multiplier of a wide Q range, each hid the optimum's bottleneck.
    """
    inst = Instance.from_dict(generators.by_family("geo", n, n, seed))
    ev = Evaluator(inst)
    res = solve(inst, "bnb", seed=1, time_limit=600, threads=1, params={"parametric": False})
    assert res.status == "optimal" and res.objective is not None
    pb = parametric_bound(inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights,
                          max_boxes=2000)
    assert pb.value <= res.objective
    assert proves(pb.value, res.objective), (pb.value, res.objective)


@pytest.mark.parametrize("form", ["walk", "potentials"])
@pytest.mark.parametrize(("n", "seed", "lam"), [(6, 0, 1.0), (6, 4, 0.5), (6, 5, 1.0),
                                                (8, 4, 1.0), (8, 1, 0.5), (10, 0, 0.5)])
def test_transition_prices_stay_below_the_optimum(n: int, seed: int, lam: float, form: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """metro pools where tuning the transition prices raised a box: still at most B&B's
    optimum, and at least the bound with cheapest-link prices (measured on these pools).
    Both forms: walk prices (up to 8 sites) and potentials (forced here)."""
    if form == "potentials":
        monkeypatch.setattr(parametric, "_WALK_SITES", 0)
    inst = Instance.from_dict(generators.by_family("metro", n, n + 2, seed, lam=lam))
    ev = Evaluator(inst)
    res = solve(inst, "bnb", seed=1, time_limit=600, threads=1, params={"parametric": False})
    assert res.status == "optimal" and res.objective is not None
    args = (inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights)
    pb = parametric_bound(*args, max_boxes=2000)
    plain = parametric_bound(*args, max_boxes=2000, tune_transitions=False)
    assert pb.transitions is not None and pb.transitions["rounds"] >= 1
    assert plain.transitions is None
    assert pb.value <= res.objective * (1 + 1e-12)
    assert pb.value >= plain.value


def test_kelley_points_are_admissible() -> None:
    """Whatever the cuts, the next prices keep every constraint exactly (potentials:
    alpha_a + beta_b <= trip(a, b) and the floors; walk prices: every walk row), since
    the bound's validity rests on it."""
    inst = Instance.from_dict(generators.by_family("metro", 24, 24, 3))
    comm = np.asarray(inst.coefficients().comm_ms, np.float64)
    trip, lo, _ = site_links(comm, bounds.clusters(inst))
    n_s = trip.shape[0]
    pot_rows = [(np.array([a, n_s + b]), float(trip[a, b]))
                for a in range(n_s) for b in range(n_s) if a != b]
    forms = [(np.concatenate([lo, lo]), pot_rows), (np.zeros(4 * n_s), walk_rows(trip, lo))]
    rng = np.random.default_rng(0)
    for lo_x, rows in forms:
        hi_x = np.full(lo_x.size, 100.0)
        model = KelleyLP(lo_x, hi_x, rows)
        for _ in range(12):
            g = rng.integers(0, 2, lo_x.size).astype(float)
            model.add_cut(float(rng.uniform(0, 50)), g, lo_x)
            point = model.point(lo_x + 1.0, float(rng.uniform(0.5, 20)))
            assert point is not None
            _, p = point
            assert np.all(p >= lo_x)
            assert all(float(np.sum(p[idx])) <= rhs for idx, rhs in rows)


def _walk_costs_by_enumeration(t: np.ndarray, repeats: int = 0
                               ) -> dict[tuple[int, int, int], float]:
    """(site set, first, last) -> the cheapest walk (that steps back to a visited site
    at least ``repeats`` times), over every walk of up to 7 steps."""
    n = t.shape[0]
    best: dict[tuple[int, int, int], float] = {}
    frontier = [((f,), 0.0) for f in range(n)]
    for _ in range(8):
        nxt = []
        for walk, cost in frontier:
            if len(walk) - len(set(walk)) >= repeats:
                key = (sum(1 << s for s in set(walk)), walk[0], walk[-1])
                best[key] = min(best.get(key, math.inf), cost)
            nxt += [((*walk, v), cost + t[walk[-1], v]) for v in range(n) if v != walk[-1]]
        frontier = nxt
    return best


def test_walk_rows_for_some_plans_only() -> None:
    """Rows for plans with a given first and last site and sites that must be used are
    those of the full set that fit; for revisiting plans, each right-hand side is the
    cheapest walk that visits some site twice (enumerated), at least the plain one."""
    rng = np.random.default_rng(7)
    trip = rng.uniform(2.0, 9.0, (4, 4))
    trip = trip + trip.T
    np.fill_diagonal(trip, math.inf)
    lo = np.array([0.5, 1.0, 0.2, 0.7])
    red = trip - lo[:, None] - lo[None, :]
    np.fill_diagonal(red, math.inf)
    full = {(tuple(sorted(int(k) for k in idx)), rhs) for idx, rhs in walk_rows(trip, lo)}
    some = walk_rows(trip, lo, first=1, last=3, must=(2,))
    assert some
    for idx, rhs in some:
        assert 4 * 1 in idx and 4 * 3 + 1 in idx and any(int(k) // 4 == 2 for k in idx)
        assert (tuple(sorted(int(k) for k in idx)), rhs) in full
    closed = walk_rows(trip, lo, first=2, last=2)
    assert closed and all(4 * 2 + 3 in idx for idx, _ in closed)
    plain = {tuple(sorted(int(k) for k in idx)): rhs for idx, rhs in walk_rows(trip, lo)}
    for need in (1, 2):
        rev = _walk_costs_by_enumeration(red, repeats=need)
        before = _walk_costs_by_enumeration(red, repeats=need - 1)
        rows = walk_rows(trip, lo, revisits=need)
        assert rows
        for idx, rhs in rows:
            sites = {int(k) // 4 for k in idx}
            mask = sum(1 << s for s in sites)
            kinds = {j: [int(k) // 4 for k in idx if int(k) % 4 == j] for j in range(4)}
            if kinds[3]:
                # A closed walk (first site = last) steps back to its first site at the end.
                f = kinds[3][0]
                want = min(before.get((mask, f, u), math.inf) + red[u, f] for u in sites
                           if u != f)
            else:
                want = rev[(mask, kinds[0][0], kinds[1][0])]
            assert rhs == pytest.approx(want, rel=1e-12)
            assert rhs >= plain[tuple(sorted(int(k) for k in idx))] - 1e-12


def test_role_prices_on_a_site_path() -> None:
    """On the path site 1 -> site 0, a send back from site 0 goes to site 1 and none
    forward leaves it; intra-site sends stay on the site."""
    inf = math.inf
    p = role_prices(_FOUR_GPUS, _TWO_SITES, (1, 0))
    # GPU 0 (site 0, last on the path): intra 1, back to site 1 at 5 (GPU 2).
    m2, start_first, start_x, end_last, end_x, single, s_first, s_last, x2 = p[0]
    assert (start_first, start_x, end_last, s_last, single) == (1.0, 6.0, 1.0, 5.0, 0.0)
    assert (m2, end_x, s_first, x2) == (inf, inf, inf, inf)  # one intra partner, no forward
    # GPU 2 (site 1, first): forward to site 0 at 5 (GPU 0), nothing back.
    assert p[2, 6] == 5.0 and p[2, 4] == 7.0 and p[2, 7] == inf and p[2, 2] == inf


def _detour_trips() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four sites with asymmetric round trips where sites 0 and 2 are cheaper to join
    through another site: (trips, floors, reduced trips)."""
    rng = np.random.default_rng(5)
    trip = rng.uniform(2.0, 9.0, (4, 4))
    trip = trip + trip.T
    np.fill_diagonal(trip, math.inf)
    trip[0, 2] = trip[2, 0] = 40.0  # a detour through another site is cheaper
    lo = np.array([0.5, 1.0, 0.2, 0.7])
    return trip, lo, trip - lo[:, None] - lo[None, :]


def test_walk_rows_match_enumerated_walks() -> None:
    """Each walk row's right-hand side is the cheapest walk through its sites (revisits
    allowed), checked against brute-force enumeration on 4 sites with asymmetric trips."""
    trip, lo, red = _detour_trips()
    np.fill_diagonal(red, math.inf)
    walks = _walk_costs_by_enumeration(red)
    rows = walk_rows(trip, lo)
    assert rows
    for idx, rhs in rows:
        kinds = {j: [int(k) // 4 for k in idx if int(k) % 4 == j] for j in range(4)}
        sites = {int(k) // 4 for k in idx}
        mask = sum(1 << s for s in sites)
        if kinds[3]:
            f = kinds[3][0]
            want = min(walks[(mask, f, u)] + red[u, f] for u in sites if u != f)
        else:
            want = walks[(mask, kinds[0][0], kinds[1][0])]
        assert rhs == pytest.approx(want, rel=1e-12)
    assert any(rhs < 40.0 for idx, rhs in rows if {int(k) // 4 for k in idx} == {0, 2})


def test_walk_rows_for_plans_visiting_each_site_once() -> None:
    """For plans visiting each site once the rows are paths: each right-hand side is the
    cheapest path (no site twice, enumerated) from its first to its last site, at least
    the walk's; no closed rows (the first and last stage lie on distinct sites)."""
    trip, lo, red = _detour_trips()
    plain = {tuple(sorted(int(k) for k in idx)): rhs for idx, rhs in walk_rows(trip, lo)}
    rows = walk_rows(trip, lo, once=True)
    assert rows
    for idx, rhs in rows:
        kinds = {j: [int(k) // 4 for k in idx if int(k) % 4 == j] for j in range(4)}
        assert not kinds[3]
        f, last = kinds[0][0], kinds[1][0]
        sites = {int(k) // 4 for k in idx}
        want = min(sum(red[a, b] for a, b in itertools.pairwise((f, *mid, last)))
                   for mid in itertools.permutations(sites - {f, last}))
        assert rhs == pytest.approx(want, rel=1e-12)
        assert rhs >= plain[tuple(sorted(int(k) for k in idx))] - 1e-12
    assert any(rhs >= 40.0 - 2.0 for idx, rhs in rows
               if {int(k) // 4 for k in idx} == {0, 2})
    with pytest.raises(ValueError, match="never step back"):
        walk_rows(trip, lo, revisits=1, once=True)


def test_potential_prices_price_inter_sends_by_site() -> None:
    base = role_prices(_FOUR_GPUS, _TWO_SITES)
    p = potential_prices(base, _TWO_SITES, np.array([2.5, 3.0]), np.array([1.5, 2.0]))
    # GPU 0 (site 0, alpha 2.5, beta 1.5): intra parts as before, inter parts the potentials.
    assert list(p[0]) == [6.0, 1.0, 2.5, 1.0, 3.5, 0.0, 2.5, 1.5, 4.0]
    # Roles a GPU cannot take stay impossible (GPU 1: one inter link, no two inter sends).
    assert p[1, 8] == math.inf and base[1, 8] == math.inf


def test_shared_box_tables_give_the_same_search() -> None:
    """A search given its pool's box tables (as site branching shares them) is the search
    that computes them itself; a start box split afresh (start_stall 0) still bounds."""
    inst = Instance.from_dict(generators.by_family("metro", 12, 12, 5))
    ev = Evaluator(inst)
    cl = bounds.clusters(inst)
    args = (inst.coefficients(), inst.layers, cl, ev.weights)
    own = parametric_bound(*args, max_boxes=60)
    shared = parametric_bound(*args, max_boxes=60,
                              tables=parametric.box_tables(inst.coefficients(), inst.layers, cl))
    assert (own.value, own.boxes, own.dp_calls) == (shared.value, shared.boxes, shared.dp_calls)
    res = solve(inst, "bnb", seed=1, time_limit=600, threads=1, params={"parametric": False})
    assert res.status == "optimal" and res.objective is not None
    again = parametric_bound(*args, start=own.open_boxes, start_stall=0)
    assert own.value <= again.value <= res.objective * (1 + 1e-12)


@pytest.mark.parametrize("seed", [5, 6])
def test_quick_close_keeps_the_bound_and_saves_searches(monkeypatch: pytest.MonkeyPatch,
                                                        seed: int) -> None:
    """With energy in the objective, a search from start boxes tries each box's closing by
    the last multiplier search alone: the bound stays below the optimum, and the search
    takes fewer DPs than with the three searches."""
    inst = Instance.from_dict(generators.by_family("metro", 12, 12, seed, lam=0.5))
    ev = Evaluator(inst)
    cl = bounds.clusters(inst)
    args = (inst.coefficients(), inst.layers, cl, ev.weights)
    res = solve(inst, "bnb", seed=1, time_limit=600, threads=1, params={"parametric": False})
    assert res.status == "optimal" and res.objective is not None
    first = parametric_bound(*args, max_boxes=40)
    got = {}
    for on in (True, False):
        monkeypatch.setattr(parametric, "_QUICK_CLOSE", on)
        got[on] = parametric_bound(*args, incumbent=res.objective, start=first.open_boxes,
                                   max_boxes=400)
        assert got[on].value <= res.objective * (1 + 1e-12)
    assert got[True].dp_calls < got[False].dp_calls


def test_progress_reports_rising_proven_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each progress report is a bound already proven: never above the final value (the
    search only raises it) nor the incumbent, and they rise. PROGRESS_S = 0 reports
    whenever the bound rose, so the test depends on box counts, not on time."""
    monkeypatch.setattr(parametric, "PROGRESS_S", 0.0)
    inst = Instance.from_dict(generators.by_family("metro", 12, 12, 5, lam=0.5))
    ev = Evaluator(inst)
    res = solve(inst, "bnb", seed=1, time_limit=600, threads=1)
    assert res.status == "optimal"
    args = (inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights)
    seen: list[float] = []
    pb = parametric_bound(*args, incumbent=res.objective, max_boxes=200, progress=seen.append)
    quiet = parametric_bound(*args, incumbent=res.objective, max_boxes=200)
    assert pb.value == quiet.value and pb.boxes == quiet.boxes  # reports change nothing
    assert len(seen) >= 2
    assert all(b < a for a, b in zip(seen[1:], seen[:-1], strict=True))
    assert seen[-1] <= pb.value <= res.objective * (1 + 1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stage_count_multiplier_search_reaches_the_dual_maximum(seed: int) -> None:
    # g(mu) = V(mu) - mu q is concave; the tangent search must end within its tolerance
    # of the best of a fine grid of multipliers. Each Q range is searched at three
    # bottleneck caps: the later searches start from the earlier ones' multipliers.
    inst = Instance.from_dict(generators.by_family("metro", 10, 12, seed, lam=0.5))
    ev = Evaluator(inst)
    bx = parametric._Boxes(inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights)
    searched = hinted = 0
    for qa, qb in ((1, 2), (4, 5), (8, 10)):
        for case in (0, 1):
            for z in (bx.z_worst, 0.8 * bx.z_worst, 0.6 * bx.z_worst):
                before = bx.dp_calls
                hinted += (qa, qb, case, False, True) in bx._mu_hint
                got = bx._search_mu(qa, qb, z, 1.0, 0.0, 0.0, bx.mu_scale, case)
                searched += bx.dp_calls - before > 1
                if not math.isfinite(got):
                    continue
                grid = []
                for mu in np.linspace(-20 * bx.mu_scale, 20 * bx.mu_scale, 801):
                    v, _, _ = bx._dp(qa, z, 1.0, 0.0, 0.0, float(mu), case)
                    grid.append(v - mu * (qb if mu >= 0 else qa))
                assert got >= max(grid) - 1e-7 * max(abs(max(grid)), 1.0)
    assert searched  # some Q range needed a multiplier
    assert hinted  # and some search started from an earlier one's


@pytest.mark.parametrize(("n", "seed", "lam"), [(10, 0, 0.5), (16, 1, 0.5), (10, 0, 1.0),
                                                 (16, 1, 1.0)])
def test_multiplier_cutoffs_decide_as_the_full_search(n: int, seed: int, lam: float) -> None:
    # A search cut at the parent's bound (floor) or at the incumbent (ceil) may return
    # less than the full one, but the box's outcome is the same: it keeps max(bound,
    # floor), and it is closed (bound >= ceil) exactly when the full search closes it.
    inst = Instance.from_dict(generators.by_family("metro", n, n, seed, lam=lam))
    ev = Evaluator(inst)
    args = (inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights)
    probe = parametric._Boxes(*args)
    checked = fewer = 0
    for qa, qb in ((1, 3), (4, 6), (5, 20)):
        za = probe.zmin(qa, qb)
        for zb in (probe.z_worst, za + 0.5 * (probe.z_worst - za), za + 0.1 * (probe.z_worst - za)):
            for case in (0, 1):
                whole = parametric._Boxes(*args)
                full, _ = whole._evaluate_case(qa, qb, za, zb, 0.0, case)
                if not math.isfinite(full):
                    continue
                tol = 1e-7 * max(abs(full), 1.0)
                for floor, ceil in ((full + 1e-3 * abs(full), math.inf),
                                    (-math.inf, full - 1e-3 * abs(full)),
                                    (full - 1e-3 * abs(full), full + 1e-3 * abs(full)),
                                    (full - 1e-6 * abs(full), full - 1e-9 * abs(full))):
                    bx = parametric._Boxes(*args)
                    cut, _ = bx._evaluate_case(qa, qb, za, zb, 0.0, case, floor, ceil)
                    fewer += bx.dp_calls < whole.dp_calls
                    assert cut <= full + tol
                    if full >= ceil:
                        assert cut >= ceil
                    else:
                        assert max(cut, floor) >= max(full, floor) - tol
                    checked += 1
    assert checked >= 20
    assert fewer  # the cutoffs saved work somewhere


def test_a_remembered_cut_search_is_redone_for_a_higher_ceil() -> None:
    # A stage-time search cut at a ceil is remembered; asked again with a higher ceil it
    # runs again to the full maximum, and with a ceil it reaches it is reused as it is.
    inst = Instance.from_dict(generators.by_family("metro", 16, 16, 1, lam=1.0))
    ev = Evaluator(inst)
    args = (inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights)
    cut_somewhere = 0
    for qa, qb in ((1, 3), (4, 6), (5, 20), (9, 12)):
        for case in (0, 1):
            z = parametric._Boxes(*args).z_worst
            full = parametric._Boxes(*args)._lagrange(qa, qb, z, 1.0, 0.0, 0.0, 1.0, case)
            if not math.isfinite(full):
                continue
            bx = parametric._Boxes(*args)
            first, _, _ = bx._dp(qa, z, 1.0, 0.0, 0.0, 0.0, case)
            low = min(first, full)
            cut = bx._lagrange(qa, qb, z, 1.0, 0.0, 0.0, 1.0, case, low)
            assert low <= cut <= full
            calls = bx.dp_calls
            assert bx._lagrange(qa, qb, z, 1.0, 0.0, 0.0, 1.0, case, low) == cut
            assert bx.dp_calls == calls  # reused: it reaches that ceil
            assert bx._lagrange(qa, qb, z, 1.0, 0.0, 0.0, 1.0, case) == full
            cut_somewhere += cut < full
    assert cut_somewhere  # some search stopped short of its maximum


def test_remembered_bounds_equal_fresh_ones() -> None:
    inst = Instance.from_dict(generators.by_family("metro", 10, 12, 3, lam=0.5))
    ev = Evaluator(inst)
    c = inst.coefficients()
    cl = bounds.clusters(inst)
    warm = parametric._Boxes(c, inst.layers, cl, ev.weights)
    z = warm.z_worst
    first = warm.evaluate(2, 6, warm.zmin(2, 6), z)
    calls = warm.dp_calls
    # The upper half of a Z split repeats the stage-time and idle-power DPs: remembered.
    upper = warm.evaluate(2, 6, 0.5 * (warm.zmin(2, 6) + z), z)
    fresh = parametric._Boxes(c, inst.layers, cl, ev.weights)
    assert upper == fresh.evaluate(2, 6, 0.5 * (fresh.zmin(2, 6) + z), z)
    assert warm.dp_calls - calls < fresh.dp_calls
    assert first[0][0] <= upper[0][0] and first[1][0] <= upper[1][0]


@pytest.mark.parametrize(("seed", "lam"), [(1, 1.0), (2, 0.5), (4, 0.5)])
def test_path_minimisers_are_plans_on_their_path(seed: int, lam: float) -> None:
    """Each path minimiser of the open boxes is a pipeline visiting the path's sites once
    each, in order; priced by the evaluator it is no better than the path's proven bound."""
    inst = Instance.from_dict(generators.by_family("metro", 12, 12, seed, lam=lam))
    ev = Evaluator(inst)
    c, cl = inst.coefficients(), bounds.clusters(inst)
    w = ev.weights
    start = metis_default_plan(ev.instance)
    assert start is not None
    # With an incumbent, as the exact solvers search: its open boxes span the Z range of
    # the plans better than it (without one, the least boxes hug the relaxation's optimum).
    root = parametric_bound(c, inst.layers, cl, w, max_boxes=200,
                            incumbent=ev.evaluate(start).objective)
    assert root.open_boxes
    seen = 0
    sites = sorted(set(cl.tolist()))
    for path in (p for r in range(2, len(sites) + 1) for p in itertools.permutations(sites, r)):
        floor = parametric_bound(c, inst.layers, cl, w, path=path, max_boxes=400).value
        for config in parametric.path_minimisers(c, inst.layers, cl, w, path,
                                                 root.open_boxes[:8]):
            pairs = parametric.path_plan(config, cl, path)
            assert pairs is not None
            runs = [int(cl[g]) for g, _ in pairs]
            assert [k for i, k in enumerate(runs) if i == 0 or runs[i - 1] != k] == list(path)
            plan = Plan.from_indices(inst, [g for g, _ in pairs], [n for _, n in pairs])
            e = ev.evaluate(plan)
            assert e.feasible
            assert e.objective >= floor * (1 - 1e-12), (path, e.objective, floor)
            seen += 1
    assert seen >= 4
    with pytest.raises(ValueError, match="once"):
        next(parametric.path_minimisers(c, inst.layers, cl, w, (0, 1, 0), root.open_boxes))


def test_node_groups_find_cloud_nodes_only() -> None:
    # Hand-made: one site of four GPUs, pairs (0, 1) and (2, 3) linked ten times faster.
    comm = np.full((4, 4), 1.0)
    comm[0, 1] = comm[1, 0] = comm[2, 3] = comm[3, 2] = 0.1
    np.fill_diagonal(comm, np.inf)
    assert bounds.node_groups(comm, np.zeros(4, np.int64)).tolist() == [0, 0, 1, 1]
    assert bounds.node_groups(np.where(comm < 1, 1.0, comm), np.zeros(4, np.int64)) is None
    inst = Instance.from_dict(generators.by_family("cloud", 64, 16, 5))
    cl = bounds.clusters(inst)
    groups = bounds.node_groups(np.asarray(inst.coefficients().comm_ms), cl)
    assert groups is not None
    nodes = [generators.cloud_node_of(g.id) for g in inst.gpus]
    pairs = set(zip(zip(cl.tolist(), groups.tolist(), strict=True), nodes, strict=True))
    assert len(pairs) == len(set(nodes)) == len({(int(a), int(b)) for a, b in
                                                 zip(cl, groups, strict=True)})
    for fam in ("metro", "geo"):
        other = Instance.from_dict(generators.by_family(fam, 32, 16, 5))
        assert bounds.node_groups(np.asarray(other.coefficients().comm_ms),
                                  bounds.clusters(other)) is None


@pytest.mark.parametrize("lam", [1.0, 0.5])
@pytest.mark.parametrize("seed", range(6))
def test_two_level_bound_reaches_the_optimum_on_small_clouds(seed: int, lam: float) -> None:
    """Two regions of two 2-GPU nodes: the two-level bound never exceeds brute force's
    optimum, reaches it (on these seeds), and is never below the site-level search."""
    inst = Instance.from_dict(generators.by_family("cloud", 8, 8, seed, node_size=2,
                                                   n_sites=2, lam=lam))
    ev = Evaluator(inst)
    opt = solve(ev.instance, "bruteforce", seed=0, time_limit=600, threads=1)
    assert opt.status == "optimal" and opt.objective is not None
    pb = parametric.instance_bound(ev.instance, None, 1.0, math.inf)
    assert pb.levels is not None and pb.levels["sites"] == 2
    assert pb.value <= opt.objective * (1 + 1e-12)
    assert pb.value >= opt.objective * (1 - 1e-6)  # the box resolution
    flat = parametric_bound(inst.coefficients(), inst.layers, bounds.clusters(inst),
                            ev.weights)
    assert pb.value >= flat.value * (1 - 1e-12)
    assert "two_level" in pb.summary()


def test_site_sets_beyond_fifteen_sites() -> None:
    """With more sites than the mask code holds (20 nodes as sites), the minimisers' sites
    are read off a traceback: distinct, sorted sets of existing labels."""
    inst = Instance.from_dict(generators.by_family("cloud", 40, 16, 3, node_size=2,
                                                   n_sites=1))
    ev = Evaluator(inst)
    c = inst.coefficients()
    groups = bounds.node_groups(np.asarray(c.comm_ms), bounds.clusters(inst))
    assert groups is not None and len(set(groups.tolist())) == 20
    pb = parametric_bound(c, inst.layers, groups, ev.weights, max_boxes=100)
    assert pb.site_sets
    assert len(set(pb.site_sets)) == len(pb.site_sets)
    for used in pb.site_sets:
        assert list(used) == sorted(set(used)) and set(used) <= set(groups.tolist())


def test_dp_values_do_not_depend_on_earlier_calls() -> None:
    """The DPs keep their work arrays from call to call (``parametric._work``): each call,
    made after calls of other kinds (kept-apart pairs, a site visited three times, caps
    that leave no plan), gives what it gives on fresh arrays."""
    inst = Instance.from_dict(generators.by_family("metro", 12, 12, 2, lam=1.0))
    cl = bounds.clusters(inst)
    sites = sorted(set(cl.tolist()))
    c, w = inst.coefficients(), Evaluator(inst).weights
    plain = parametric._Boxes(c, inst.layers, cl, w)
    apart = parametric._Boxes(c, inst.layers, cl, w)
    apart.keep_apart((sites[0],))
    walk = parametric._Boxes(c, inst.layers, cl, w)
    walk.follow_gapped((), (sites[0],) * 3 + tuple(sites[1:]), ())
    calls = [(bx, (qa, z, 1.0, 0.2, 0.1, mu, 1))
             for bx in (plain, apart, walk) for qa in (2, 4)
             for z in (bx.zmin(qa, bx.q_max) * 0.5, bx.zmin(qa, bx.q_max) * 1.3, bx.z_worst)
             for mu in (0.0, 3.0)]

    def values(bx: parametric._Boxes, args: tuple) -> tuple[float, int, int]:
        v, k, e, *_ = bx._run_dp(*args, False)
        return float(v), int(k), int(e)

    fresh = []
    for bx, args in calls:
        parametric._WORK.clear()
        fresh.append(values(bx, args))
    kept = [values(bx, args) for bx, args in reversed(calls)][::-1]
    assert kept == fresh
    assert any(math.isfinite(v) for v, _, _ in fresh)
    assert any(v == math.inf and k == 0 for v, k, _ in fresh)


def test_merged_boxes_hold_the_same_plans_at_the_same_bounds() -> None:
    """merge_boxes joins boxes of one stage-count range and one bound that meet end to
    end, and nothing else: every (Q, Z) point of the parts lies in one merged box of the
    same bound, and the merged boxes are no more than the parts."""
    rng = random.Random(5)
    boxes = []
    for qa, qb in ((3, 3), (4, 6)):
        cuts = sorted({round(rng.uniform(1.0, 2.0), 3) for _ in range(12)})
        for za, zb in itertools.pairwise(cuts):
            if rng.random() < 0.8:  # some gaps: boxes closed by the incumbent
                boxes.append(parametric.Box(rng.choice([10.0, 10.0, 11.0]), qa, qb, za, zb,
                                            rng.uniform(0.0, 5.0)))
    merged = parametric.merge_boxes(boxes)
    assert len(merged) < len(boxes)
    assert [b.bound for b in merged] == sorted(b.bound for b in merged)
    for b in boxes:
        for z in (b.za, 0.5 * (b.za + b.zb), b.zb):
            holders = [m for m in merged if (m.qa, m.qb) == (b.qa, b.qb) and m.za <= z <= m.zb]
            assert any(m.bound == b.bound and m.s_floor <= b.s_floor for m in holders)
    for m in merged:  # a merged box is a union of parts, with nothing between them
        parts = sorted((b for b in boxes if (b.qa, b.qb, b.bound) == (m.qa, m.qb, m.bound)
                        and m.za <= b.za and b.zb <= m.zb), key=lambda b: b.za)
        assert parts[0].za == m.za and parts[-1].zb == m.zb
        assert all(x.zb == y.za for x, y in itertools.pairwise(parts))
        assert m.s_floor == min(b.s_floor for b in parts)
