"""The site-subset primal search (formulations.site_subsets) and the MILP's use of it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from formulations import site_subsets
from formulations.site_subsets import improve_on_site_subsets, subset_instance
from formulations.sliced import SlicedParams
from geoplan.cost import bounds, evaluate
from geoplan.cost.baseline import metis_default_plan
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.parametric import PlanClasses, instance_bound, proves
from geoplan.errors import InputError
from geoplan.model import generators
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions, solve

#: The memetic steps off (before and after branching), for tests of the other steps.
NO_MA = {"memetic_share": 0, "memetic_after_share": 0}


def _instance(family: str, n: int, seed: int) -> Instance:
    return resolve_normalisers(Instance.from_dict(generators.by_family(family, n, n, seed)))


def _sites_of(inst: Instance, plan: object) -> list[int]:
    cl = bounds.clusters(inst)
    return sorted({int(cl[inst.gpu_index[st.gpu]]) for st in plan.stages})  # type: ignore[attr-defined]


def test_subset_instance_is_a_proper_part() -> None:
    inst = _instance("metro", 10, 1)
    cl = bounds.clusters(inst)
    sub = subset_instance(inst, [0, 2])
    assert sub is not None
    assert sub.gpu_ids == tuple(g.id for g, c in zip(inst.gpus, cl, strict=True) if c in (0, 2))
    # Same prices: the normalisers and the links among the kept GPUs are the instance's.
    assert sub.objective == inst.objective
    assert subset_instance(inst, sorted(set(cl.tolist()))) is None  # the whole pool
    assert subset_instance(inst, [99]) is None  # no GPU


@pytest.mark.parametrize(("family", "seed"), [("metro", 1), ("geo", 2)])
def test_the_optimum_s_sites_give_the_optimum(family: str, seed: int) -> None:
    """Pointed at the sites of B&B's proven optimum, the search returns a plan of that
    price from a poor start, priced on the whole instance."""
    inst = _instance(family, 10, seed)
    opt = solve(inst, "bnb", seed=1, time_limit=600, threads=1)
    assert opt.status == "optimal" and opt.plan is not None and opt.objective is not None
    used = _sites_of(inst, opt.plan)
    assert len(used) < len(set(bounds.clusters(inst).tolist()))
    start = metis_default_plan(inst)
    assert start is not None
    start_obj = evaluate(inst, start).objective
    assert start_obj > opt.objective * (1 + 1e-6)
    better, info = improve_on_site_subsets(inst, [used], (start, start_obj), 60.0, seed=0,
                                           threads=1, stopped=lambda: False)
    assert better is not None
    assert better[1] == pytest.approx(opt.objective, rel=1e-9)
    assert better[1] == pytest.approx(evaluate(inst, better[0]).objective, rel=1e-12)
    assert info["sets"][0]["improved"] is True  # type: ignore[index]
    # Nothing better to find: no plan returned.
    again, _ = improve_on_site_subsets(inst, [used], better, 60.0, seed=0, threads=1,
                                       stopped=lambda: False)
    assert again is None


def test_milp_finds_the_optimum_through_a_site_subset() -> None:
    """From a poor warm start (no start heuristic), the parametric bound cannot prove the
    start; its minimisers' sites hold the optimum, which the MILP then returns: through
    the site-subset search when site branching is off, through the subset search on the
    bound's first site set before branching when it is on, and through site branching (a
    path node's minimiser) without subset searches (the plans on site paths, which find
    it first, off: tests/formulations/test_site_paths.py)."""
    inst = _instance("metro", 10, 1)
    opt = solve(inst, "bnb", seed=1, time_limit=600, threads=1)
    start = metis_default_plan(inst)
    assert start is not None and opt.objective is not None
    r = solve(inst, "milp", seed=0, time_limit=120, threads=1, warm_start=start,
              params={"heuristic": False, "site_branching": False, "site_paths": False,
                      "memetic_share": 0, "memetic_after_share": 0})
    assert r.status == "optimal"
    assert r.objective == pytest.approx(opt.objective, rel=1e-9)
    sets = r.info["site_subsets"]["sets"]
    assert any(row.get("improved") for row in sets)
    first = solve(inst, "milp", seed=0, time_limit=120, threads=1, warm_start=start,
                  params={"heuristic": False, "site_paths": False, **NO_MA})
    assert first.status == "optimal"
    assert first.objective == pytest.approx(opt.objective, rel=1e-9)
    row = first.info["site_subsets"]["sets"][0]
    assert row["before_branching"] and row.get("improved")
    br = solve(inst, "milp", seed=0, time_limit=120, threads=1, warm_start=start,
               params={"heuristic": False, "site_paths": False, "site_subsets": False,
                       "memetic_share": 0, "memetic_after_share": 0})
    assert br.status == "optimal" and "site_subsets" not in br.info
    assert br.info["parametric"]["site_branching"]["plan_objective"] == pytest.approx(
        opt.objective, rel=1e-9)
    off = solve(inst, "milp", seed=0, time_limit=120, threads=1, warm_start=start,
                params={"heuristic": False, "site_subsets": False, "site_branching": False})
    assert "site_subsets" not in off.info


@pytest.mark.parametrize("status", ["feasible", "optimal"])
def test_a_set_cut_short_before_branching_is_searched_again_after(
        monkeypatch: pytest.MonkeyPatch, status: str) -> None:
    """The search on the bound's first site set runs before site branching with a short
    budget; unless it ended there (proven or infeasible), the set is searched again after
    branching. Branching and the searches are stubbed: only the order is checked."""
    calls: list[list[tuple[int, ...]]] = []

    def fake(instance: Instance, site_sets: object, incumbent: object, seconds: float,
             **kw: object) -> tuple[None, dict[str, list[dict[str, object]]]]:
        calls.append([tuple(x) for x in site_sets])  # type: ignore[attr-defined]
        return None, {"sets": [{"gpus": 3, "status": status, "objective": None,
                                "seconds": 0.0}]}

    monkeypatch.setattr(site_subsets, "improve_on_site_subsets", fake)
    monkeypatch.setattr(site_subsets, "refine_by_sites", lambda instance, pb, *a, **k: pb)
    inst = _instance("metro", 10, 1)
    start = metis_default_plan(inst)
    r = solve(inst, "milp", seed=0, time_limit=60, threads=1, warm_start=start,
              params={"heuristic": False, "site_paths": False, **NO_MA})
    assert len(calls[0]) == 1  # the first set alone, before branching
    rows = r.info["site_subsets"]["sets"]
    assert rows[0]["before_branching"]
    later = calls[1] if len(calls) > 1 else []
    assert (calls[0][0] in later) == (status == "feasible")


@pytest.mark.parametrize("back", [None, 3])
def test_branching_gets_the_steps_back_it_is_asked_to_split(
        monkeypatch: pytest.MonkeyPatch, back: int | None) -> None:
    """``site_branching_back`` reaches branching (2 unless given); a value outside 2-3 is
    refused with its parameter's name."""
    seen: list[object] = []

    def fake(instance: Instance, pb: object, *a: object, **k: object) -> object:
        seen.append(k.get("apart_back"))
        return pb

    monkeypatch.setattr(site_subsets, "refine_by_sites", fake)
    inst = _instance("metro", 10, 1)
    start = metis_default_plan(inst)
    params = {"heuristic": False, "site_paths": False, "site_subsets": False, **NO_MA}
    solve(inst, "milp", seed=0, time_limit=60, threads=1, warm_start=start,
          params={**params, **({} if back is None else {"site_branching_back": back})})
    assert seen == [2 if back is None else back]
    with pytest.raises(InputError, match="site_branching_back"):
        SlicedParams.parse({"site_branching_back": 4})


@pytest.mark.parametrize(("class_sites", "classes_solved", "late"),
                         [(4, True, False), (5, True, True), (4, False, True)])
def test_a_solver_of_small_classes_skips_the_late_subset_search(
        monkeypatch: pytest.MonkeyPatch, class_sites: int, classes_solved: bool,
        late: bool) -> None:
    """After branching, a solver that solves the classes itself (``classes_solved``: the
    sliced MILP) does not search the site subsets again when every class has at most
    four sites; otherwise it does. Branching and the searches are stubbed."""
    calls: list[list[tuple[int, ...]]] = []

    def fake(instance: Instance, site_sets: object, incumbent: object, seconds: float,
             **kw: object) -> tuple[None, dict[str, list[dict[str, object]]]]:
        calls.append([tuple(x) for x in site_sets])  # type: ignore[attr-defined]
        return None, {"sets": [{"gpus": 3, "status": "feasible", "objective": None,
                                "seconds": 0.0}]}

    cls = PlanClasses(tuple("ABCDEFGH"[:class_sites]))
    monkeypatch.setattr(site_subsets, "improve_on_site_subsets", fake)
    monkeypatch.setattr(site_subsets, "refine_by_sites",
                        lambda instance, pb, *a, **k: replace(pb, classes=(cls,)))
    inst = _instance("metro", 10, 1)
    start = metis_default_plan(inst)
    best = (start, float(evaluate(inst, start).objective))
    pb = instance_bound(inst, best[1], 0.5, 30.0)
    assert pb.site_sets and not proves(pb.value, best[1])
    site_subsets.after_bound(inst, SolveOptions(seed=0, time_limit=60), SlicedParams.parse(
        {"site_paths": False, **NO_MA}), 0.5, pb, best, [], {},
        classes_solved=classes_solved)
    assert len(calls) == (2 if late else 1)


def test_the_late_subset_search_skips_sets_no_class_can_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After branching, a site set that misses a forced site of every class holds no
    better plan: it is not searched. A class forcing a site of none of the bound's sets
    leaves none; one forcing no site keeps them all. Branching and the searches are
    stubbed."""
    inst = _instance("metro", 10, 1)
    start = metis_default_plan(inst)
    best = (start, float(evaluate(inst, start).objective))
    pb = instance_bound(inst, best[1], 0.5, 30.0)
    assert pb.site_sets and not proves(pb.value, best[1])
    names = bounds.site_names(inst)
    assert names is not None
    used = {names[k] for x in pb.site_sets for k in x}
    spare = sorted(set(names) - used)
    assert spare, "every site is in some set: pick another instance"
    sets = [tuple(x) for x in pb.site_sets]
    calls: list[list[tuple[int, ...]]] = []

    def fake(instance: Instance, site_sets: object, incumbent: object, seconds: float,
             **kw: object) -> tuple[None, dict[str, list[dict[str, object]]]]:
        calls.append([tuple(x) for x in site_sets])  # type: ignore[attr-defined]
        return None, {"sets": []}

    for forced, late in (((spare[0],), None), ((), sets)):
        calls.clear()
        cls = PlanClasses(tuple(names), forced)
        monkeypatch.setattr(site_subsets, "improve_on_site_subsets", fake)
        monkeypatch.setattr(site_subsets, "refine_by_sites",
                            lambda instance, pb, *a, _c=cls, **k: replace(pb, classes=(_c,)))
        site_subsets.after_bound(inst, SolveOptions(seed=0, time_limit=60),
                                 SlicedParams.parse({"site_paths": False, **NO_MA}),
                                 0.5, pb, best, [], {})
        # The first set before branching; after it, every set some class can hold.
        assert calls[0] == sets[:1]
        assert (calls[1] if len(calls) > 1 else None) == late


def test_the_memetic_algorithm_runs_before_the_site_searches_and_branching(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``memetic_share`` > 0, where the bound does not prove the start plan and
    branching is to follow, the memetic algorithm runs first, from the start plan; its
    better plan is the incumbent of the searches after it (here all stubbed, so the answer
    is its plan and the order of the calls is checked). By default (``memetic_share=0``),
    or with branching off, it does not run."""
    order: list[str] = []
    seen: list[float] = []

    def fake_paths(instance: Instance, pb: object, incumbent: tuple[object, float],
                   seconds: float, stopped: object) -> tuple[None, dict[str, object]]:
        order.append("paths")
        seen.append(incumbent[1])
        return None, {"searched": []}

    def fake_subsets(instance: Instance, site_sets: object, incumbent: object,
                     seconds: float, **kw: object) -> tuple[None, dict[str, list[object]]]:
        order.append("subsets")
        return None, {"sets": []}

    def fake_branching(instance: Instance, pb: object, *a: object, **k: object) -> object:
        order.append("branching")
        return pb

    monkeypatch.setattr(site_subsets, "improve_on_site_paths", fake_paths)
    monkeypatch.setattr(site_subsets, "improve_on_site_subsets", fake_subsets)
    monkeypatch.setattr(site_subsets, "refine_by_sites", fake_branching)
    inst = _instance("metro", 12, 1)
    start = metis_default_plan(inst)
    assert start is not None
    best = (start, float(evaluate(inst, start).objective))
    pb = instance_bound(inst, best[1], 0.5, 30.0)
    # The memetic plan (the optimum, 325.04, against a bound of 322.42) does not raise the
    # bound when it runs again: the searches after it are reached.
    monkeypatch.setattr(site_subsets, "instance_bound", lambda *a, **k: pb)
    info: dict[str, object] = {}
    _, got, _ = site_subsets.after_bound(inst, SolveOptions(seed=0, time_limit=600),
                                         SlicedParams.parse({"memetic_share": 0.05}), 0.5,
                                         pb, best, [], info)
    assert order[0] == "paths" and "branching" in order
    ma = info["memetic"]
    assert isinstance(ma, dict) and ma["from"] == best[1]
    assert got is not None and ma["to"] == got[1] < best[1]  # a better plan, returned
    assert got[1] == evaluate(inst, got[0]).objective
    assert seen == [got[1]]  # the site-path search started from it
    for off in ({}, {"memetic_share": 0.05, "site_branching": False}):  # off by default
        info = {}
        _, same, _ = site_subsets.after_bound(inst, SolveOptions(seed=0, time_limit=600),
                                              SlicedParams.parse({**off,
                                                                  "memetic_after_share": 0}),
                                              0.5, pb, best, [], info)
        assert "memetic" not in info and same == best
    # After branching (stubbed: it proves nothing), by default: from the best plan, before
    # the site-subset search; not with branching off, nor with a share of 0.
    real_memetic = site_subsets.memetic_from

    def traced_memetic(*a: Any, **k: Any) -> Any:
        order.append("memetic")
        return real_memetic(*a, **k)

    monkeypatch.setattr(site_subsets, "memetic_from", traced_memetic)
    for params, runs in (({"site_paths": False}, True),
                         ({"site_paths": False, "site_branching": False}, False),
                         ({"site_paths": False, "memetic_after_share": 0}, False)):
        order.clear()
        info = {}
        _, got, _ = site_subsets.after_bound(inst, SolveOptions(seed=0, time_limit=600),
                                             SlicedParams.parse(params), 0.5, pb, best, [],
                                             info)
        assert ("memetic_after" in info) == runs and "memetic" not in info
        if runs:
            ma = info["memetic_after"]
            assert isinstance(ma, dict) and ma["from"] == best[1]
            assert got is not None and ma["to"] == got[1] < best[1]
            after = order[order.index("branching") + 1:]
            assert after[0] == "memetic" and "memetic" not in order[:order.index("branching")]
        else:
            assert got == best


def test_the_memetic_kernels_are_warmed_up_only_when_the_step_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``memetic_share`` > 0 makes the exact model run the memetic algorithm, whose kernels
    are then warmed up with its own, before the budget; by default they are not."""
    from geoplan.solving import warmup

    assert SlicedParams.parse({"memetic_after_share": 0}).runs_solvers() == ()
    assert SlicedParams.parse({"memetic_share": 0.05, "memetic_after_share": 0}
                              ).runs_solvers() == ("memetic",)
    assert SlicedParams.parse({}).runs_solvers() == ("memetic",)  # after branching
    warmed: list[str] = []
    monkeypatch.setattr(warmup, "warm_up", lambda name: warmed.append(name) or 0.0)
    inst = _instance("metro", 8, 1)
    for share, expected in ((0.0, ["milp"]), (0.05, ["milp", "memetic"])):
        warmed.clear()
        solve(inst, "milp", seed=0, time_limit=600, threads=1,
              params={"memetic_share": share, "memetic_after_share": share})
        assert warmed == expected


def test_a_solved_subset_holding_every_class_bounds_them() -> None:
    """The classes branching leaves open are bounded by a subset search that ended (its
    proven bound; no plan at all if infeasible) on sites holding all of them; a subset
    missing one of their sites, or cut short, bounds nothing."""
    inst = _instance("metro", 10, 1)
    pb = instance_bound(inst, None, 0.5, 30.0)
    pb = replace(pb, classes=(PlanClasses(("A", "B")), PlanClasses(("B", "C"), ("C",))))

    def row(sites: str, status: str, lower: float | None = None) -> dict[str, object]:
        return {"sites": list(sites), "gpus": 4, "status": status, "objective": None,
                "lower_bound": lower, "seconds": 0.0}

    close = site_subsets.subsets_close_classes
    assert close(inst, pb, [row("ABC", "optimal", 5.0)]) == 5.0
    assert close(inst, pb, [row("ABCD", "optimal", 5.0), row("ABC", "optimal", 6.0)]) == 6.0
    assert close(inst, pb, [row("ABC", "infeasible")]) == float("inf")
    assert close(inst, pb, [row("AB", "optimal", 5.0)]) is None  # C's class not held
    assert close(inst, pb, [row("ABC", "feasible", 5.0)]) is None  # cut short
    assert close(inst, replace(pb, classes=()), [row("ABC", "optimal", 5.0)]) is None
    # Normalisers left to each pool would price the subset's plans differently.
    raw = Instance.from_dict(generators.by_family("metro", 10, 10, 1, lam=0.5))
    assert close(raw, pb, [row("ABC", "optimal", 5.0)]) is None
    assert close(resolve_normalisers(raw), pb, [row("ABC", "optimal", 5.0)]) == 5.0


@pytest.mark.parametrize(("when", "status"), [("before", "optimal"), ("after", "optimal"),
                                               ("after", "infeasible"), ("after", "feasible")])
def test_a_solved_subset_holding_the_classes_proves_the_best_plan(
        monkeypatch: pytest.MonkeyPatch, when: str, status: str) -> None:
    """After branching, a site subset solved to the end (before branching or after it)
    whose sites hold every class left open proves the best plan: the bound becomes the
    least of it and the subset's bound, and the memetic step after branching is skipped
    when the first set proved it. Cut short (feasible), it proves nothing. Branching and
    the searches are stubbed."""
    inst = _instance("metro", 10, 1)
    names = bounds.site_names(inst)
    start = metis_default_plan(inst)
    assert names is not None and start is not None
    best = (start, float(evaluate(inst, start).objective))
    pb = instance_bound(inst, best[1], 0.5, 30.0)
    assert pb.site_sets and not proves(pb.value, best[1])
    held = [names[k] for k in pb.site_sets[0]]
    lower = best[1] * (1 - 1e-7)  # a MILP's optimum, up to its tolerance
    calls: list[str] = []

    def fake(instance: Instance, site_sets: object, incumbent: object, seconds: float,
             **kw: object) -> tuple[None, dict[str, list[dict[str, object]]]]:
        now = "before" if not calls else "after"
        calls.append(now)
        rows = [{"sites": held, "gpus": 4, "status": status if now == when else "feasible",
                 "objective": best[1], "lower_bound": lower if status == "optimal" else None,
                 "seconds": 0.0}]
        return None, {"sets": rows}

    monkeypatch.setattr(site_subsets, "improve_on_site_subsets", fake)
    monkeypatch.setattr(site_subsets, "refine_by_sites", lambda instance, pb, *a, **k: replace(
        pb, classes=(PlanClasses(tuple(held[:2]), tuple(held[:1])),)))
    monkeypatch.setattr(site_subsets, "memetic_from", lambda *a, **k: (None, {"stub": 1}))
    info: dict[str, Any] = {}
    got_pb, got, proven = site_subsets.after_bound(
        inst, SolveOptions(seed=0, time_limit=60), SlicedParams.parse(
            {"site_paths": False, "memetic_share": 0}), 0.5, pb, best, [], info)
    assert got == best
    assert proven == (status != "feasible")
    if status == "feasible":
        assert got_pb.value == pb.value
        return
    assert got_pb.value == (lower if status == "optimal" else best[1])
    assert info["parametric"]["closed_by_site_subset"] is True
    assert ("memetic_after" in info) == (when == "after")
    assert calls == (["before"] if when == "before" else ["before", "after"])


def test_cpsat_returns_a_plan_the_site_searches_proved_without_its_search(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """When the steps after the bound prove a plan (a solved subset holding every class),
    CP-SAT returns it as optimal, with their bound, and does not search; otherwise it
    searches. The steps are stubbed, returning B&B's proven optimum."""
    from formulations.cpsat import solver as cpsat_solver

    inst = _instance("metro", 8, 1)
    opt = solve(inst, "bnb", seed=1, time_limit=600, threads=1)
    assert opt.status == "optimal" and opt.plan is not None and opt.objective is not None
    found = (opt.plan, float(opt.objective))
    lower = found[1] * (1 - 1e-7)

    for proven in (True, False):
        def fake(instance: Instance, options: object, params: object, share: float,
                 pb: Any, best: object, trace: object, info: dict[str, Any],
                 _p: bool = proven, **k: object) -> tuple[Any, object, bool]:
            info["stubbed"] = True
            return replace(pb, value=min(pb.value, lower)), found, _p

        monkeypatch.setattr(cpsat_solver.site_subsets, "after_bound", fake)
        r = solve(inst, "cpsat", seed=0, time_limit=60, threads=1,
                  params={"heuristic": False})
        assert r.info.get("stubbed") is True
        assert r.status == "optimal" and r.objective == pytest.approx(found[1], rel=1e-12)
        by_subset = r.message == ("a site subset solved to the end holds every plan site "
                                  "branching left open")
        assert by_subset == proven
        assert ("cpsat_status" in r.info) == (not proven)


@pytest.mark.parametrize("on", [True, False])
def test_the_site_path_search_runs_again_on_branching_s_open_sets(
        monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """After branching leaves the best plan unproven, the site-path search runs again on
    the site sets of its open nodes (``open_sets``) that it did not search before, after
    the memetic algorithm; a better plan it finds is returned. Not with the switch off."""
    calls: list[tuple[tuple[int, ...], ...]] = []
    order: list[str] = []
    inst = _instance("metro", 12, 1)
    start = metis_default_plan(inst)
    assert start is not None
    best = (start, float(evaluate(inst, start).objective))
    pb = instance_bound(inst, best[1], 0.5, 30.0)
    pb = replace(pb, site_sets=((0, 1), (1, 2), (0, 2)))
    better = solve(inst, "milp", seed=0, time_limit=60, threads=1).plan
    assert better is not None and evaluate(inst, better).objective < best[1]

    def fake_paths(instance: Instance, bound: Any, incumbent: tuple[object, float],
                   seconds: float, stopped: object) -> tuple[Any, dict[str, object]]:
        order.append("paths")
        calls.append(tuple(bound.site_sets))
        if len(calls) == 1:  # (1, 2) begun, then cut off by the clock
            return None, {"searched": [[0, 1]]}
        return (better, float(evaluate(inst, better).objective)), {"stub": 1}

    monkeypatch.setattr(site_subsets, "_PATHS_AFTER_BRANCHING", on)
    monkeypatch.setattr(site_subsets, "improve_on_site_paths", fake_paths)
    monkeypatch.setattr(site_subsets, "improve_on_site_subsets",
                        lambda *a, **k: (None, {"sets": []}))
    monkeypatch.setattr(site_subsets, "instance_bound", lambda *a, **k: pb)
    # Branching's open nodes (its classes) and their site sets, as it returns them.
    monkeypatch.setattr(site_subsets, "refine_by_sites", lambda instance, b, *a, **k: replace(
        b, classes=(PlanClasses(("A", "B", "C")),), open_sets=((1, 2), (0, 1, 2), (0, 2))))
    monkeypatch.setattr(site_subsets, "memetic_from",
                        lambda *a, **k: (order.append("memetic"), (None, {}))[1])
    info: dict[str, object] = {}
    _, got, _ = site_subsets.after_bound(inst, SolveOptions(seed=0, time_limit=600),
                                         SlicedParams.parse({}), 0.5, pb, best, [], info)
    assert calls[0] == ((0, 1), (1, 2), (0, 2))
    if on:
        # (0, 1) was searched to the end before branching; (1, 2) was cut off, so it is
        # searched again, with the sets none searched.
        assert calls[1:] == [((1, 2), (0, 1, 2), (0, 2))]
        assert info["site_paths_after"] == {"stub": 1}
        assert got is not None and got[0] == better
        assert order == ["paths", "memetic", "paths"]
    else:
        assert order == ["paths", "memetic"] and "site_paths_after" not in info
        assert got == best
