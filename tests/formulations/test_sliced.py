"""The ``sliced`` solver: exact on small instances, and its slices cover every open box."""

from __future__ import annotations

import pytest
import reference_model as ref

import formulations.sliced as sliced_mod
from formulations.milp.start import best_plan, search_from
from formulations.sliced import Slice, SliceResult
from geoplan.cost import evaluate
from geoplan.model import generators
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import Callbacks, SolveOptions, solve


@pytest.mark.parametrize(("family", "n", "layers", "seed", "lam"), [
    ("geo", 4, 5, 0, 1.0), ("metro", 5, 4, 1, 1.0), ("geo", 4, 4, 2, 0.5),
    ("metro", 4, 5, 3, 0.5), ("geo", 5, 3, 4, 0.0),
])
def test_sliced_reaches_the_reference_optimum(family: str, n: int, layers: int, seed: int,
                                               lam: float) -> None:
    d = generators.by_family(family, n, layers, seed, lam=lam)
    inst = Instance.from_dict(d)
    res = solve(inst, "sliced", seed=0, time_limit=600, threads=1)
    t_ref, e_ref = (res.t_ref_ms, res.e_ref_j) if 0 < lam < 1 else (None, None)
    opt = ref.optimum_ref(d, t_ref, e_ref)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(opt.objective, rel=1e-9)
    assert res.lower_bound <= opt.objective * (1 + 1e-12)


def test_worker_processes_reach_the_same_optimum() -> None:
    # An instance the parametric bound alone does not prove (most this small it does),
    # so that slices reach the workers; without site branching, whose classes of plans
    # stepping back are one slice each (here the only class left).
    inst = Instance.from_dict(generators.by_family("metro", 7, 7, 1))
    two = solve(inst, "sliced", seed=0, time_limit=600, threads=1,
                params={"workers": 2, "slices": 3, "site_branching": False})
    tree = solve(inst, "bnb", seed=0, time_limit=600, threads=1)
    assert two.status == tree.status == "optimal"
    assert len(two.info["slices"]) >= 2
    assert two.objective == pytest.approx(tree.objective, rel=1e-9)


def test_slices_given_less_than_a_refused_one_needed_are_not_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The first slice is refused HiGHS's start (its share shorter than its model's build
    # plus the root's analytic centre): the others, given shares no longer than that need,
    # are skipped instead of built, and the rounds end.
    inst = Instance.from_dict(generators.by_family("metro", 6, 6, 0, lam=1.0))
    calls: list[float] = []

    def refuse(instance, sl, inc, cutoff, share, *args, **kw):  # type: ignore[no-untyped-def]
        calls.append(share)
        return SliceResult(False, sl.bound, None, None, 0.0, 0, "not_started", 1e9)

    monkeypatch.setattr(sliced_mod, "solve_slice", refuse)
    slices = [Slice(1, 6, float(k), float(k + 1), 10.0 + k, 0.0) for k in range(5)]
    info: dict = {}
    out = sliced_mod._sequential(inst, slices, None, SolveOptions(seed=0, time_limit=1e6),
                                 [], info)
    assert len(calls) == 1 and info["rounds"] == 1
    assert [r is None for _, r in out] == [False, True, True, True, True]


def test_search_from_improves_a_poor_start_at_the_shared_price() -> None:
    inst = Instance.from_dict(generators.by_family("metro", 7, 7, 1))
    start = best_plan(inst, [Plan.from_indices(inst, [0], [7])])
    assert start is not None
    trace: list = []
    options = SolveOptions(time_limit=600, seed=0, threads=1, callbacks=Callbacks())
    found = search_from(inst, options, start, 600.0, trace)
    assert found[1] < start[1]
    assert evaluate(inst, found[0]).objective == pytest.approx(found[1], rel=1e-12)
    assert [r.incumbent for r in trace] == [found[1]]
    tree = solve(inst, "bnb", seed=0, time_limit=600, threads=1)
    assert found[1] >= tree.objective * (1 - 1e-9)
