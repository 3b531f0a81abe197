"""The portfolio: memetic first, then an exact model from its plan, in one budget."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from formulations import memetic_peer
from geoplan.cli import main
from geoplan.errors import InputError
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import Callbacks, solve

#: The memetic run inside the portfolio stops after 20 generations (all runs together).
#: On geo6 its initial population already holds the optimum (B&B asks for it, MILP and
#: CP-SAT prove geo6 without it). Status, objective, bound and the trace's rows are the
#: same either way; the cap only makes the run short and independent of the clock.
MA_CAP = {"memetic.max_generations": 20}


@pytest.fixture(scope="module")
def geo6() -> Instance:
    return Instance.from_dict(by_family("geo", 6, 10, 4))


@pytest.mark.parametrize("exact", ["bnb", "milp", "cpsat"])
def test_portfolio_proves_the_brute_force_optimum(geo6: Instance, exact: str) -> None:
    ref = solve(geo6, "bruteforce", seed=0, time_limit=600, threads=1)
    res = solve(geo6, "portfolio", seed=3, time_limit=600, threads=1,
                params={"exact": exact, **MA_CAP})
    assert res.status == "optimal"
    assert res.objective == pytest.approx(ref.objective, rel=1e-6)
    assert res.lower_bound <= ref.objective * (1 + 1e-9)
    assert res.info["exact"]["solver"] == exact
    # The exact model said whether it took the memetic plan (if it needed one).
    assert res.info["exact"]["warm_start_accepted"] in (True, False)
    ma = res.info["memetic"]
    assert ma["ran"] is False or ma["objective"] >= ref.objective * (1 - 1e-9)


@pytest.mark.parametrize("exact", ["milp", "cpsat"])
def test_portfolio_runs_the_memetic_only_when_the_exact_model_asks(
        geo6: Instance, exact: str) -> None:
    quick = solve(geo6, "portfolio", seed=3, time_limit=600, threads=1,
                  params={"exact": exact, **MA_CAP})
    # The parametric bound proves this instance at once; without it the exact model
    # asks for the memetic plan before its search.
    slow = solve(geo6, "portfolio", seed=3, time_limit=600, threads=1,
                 params={"exact": exact, "exact.parametric": False,
                         **MA_CAP})
    assert quick.status == slow.status == "optimal"
    assert quick.objective == pytest.approx(slow.objective, rel=1e-9)
    assert quick.info["memetic"]["ran"] is False
    assert slow.info["memetic"]["ran"] is True
    assert slow.info["memetic"]["objective"] >= slow.objective * (1 - 1e-9)
    assert 0 <= slow.info["memetic"]["started_s"] <= slow.wall_s


def test_portfolio_trace_is_one_anytime_curve(geo6: Instance) -> None:
    res = solve(geo6, "portfolio", seed=1, time_limit=600, threads=1, params=MA_CAP)
    assert res.info["memetic"]["ran"] is True  # both parts of the curve are there
    secs = [r.seconds for r in res.trace]
    assert secs == sorted(secs)
    assert secs[-1] <= res.wall_s + 1e-6
    incumbents = [r.incumbent for r in res.trace if r.incumbent is not None]
    # Never worse than what was already found: the curve only goes down.
    assert all(b <= a * (1 + 1e-12) for a, b in pairwise(incumbents))
    assert incumbents[-1] == pytest.approx(res.objective, rel=1e-9)


def test_portfolio_default_exact_by_size() -> None:
    from formulations.portfolio import default_exact

    small = Instance.from_dict(by_family("geo", 8, 12, 0))
    large = Instance.from_dict(by_family("geo", 16, 12, 0))
    assert default_exact(small) == "bnb"
    assert default_exact(large) == "milp"


@pytest.mark.parametrize(
    ("params", "field"),
    [({"exact": "memetic"}, "params.exact"), ({"ma_fraction": 1.5}, "params.ma_fraction")],
)
def test_portfolio_rejects_bad_params(geo6: Instance, params: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        solve(geo6, "portfolio", seed=0, time_limit=5, params=params)
    assert err.value.field == field


def test_portfolio_bad_param_from_cli_exits_2(tmp_path, capsys) -> None:
    path = tmp_path / "i.json"
    Instance.from_dict(by_family("geo", 4, 6, 1)).to_json(path)
    code = main(["solve", str(path), "--solver", "portfolio", "--param", "exact=foo",
                 "--time-limit", "5"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("geoplan: error: params.exact")


def test_portfolio_memetic_run_takes_the_warm_start_defaults(geo6: Instance) -> None:
    """The deferred memetic run is one run with the paper's stop (the memetic algorithm's
    warm-start defaults), not its standalone restarts; a ``memetic.`` parameter given to
    the portfolio still overrides them."""
    base = {"exact": "milp", "exact.parametric": False}
    res = solve(geo6, "portfolio", seed=3, time_limit=600, threads=1, params=base)
    assert res.info["memetic"]["ran"] is True
    assert res.info["memetic"]["params"]["stop"] == "paper"
    given = solve(geo6, "portfolio", seed=3, time_limit=600, threads=1,
                  params={**base, "memetic.stop": "budget", **MA_CAP})
    assert given.info["memetic"]["params"]["stop"] == "budget"
    assert given.objective == pytest.approx(res.objective, rel=1e-9)


def test_portfolio_keeps_the_sequence_search_a_plain_warm_start_does_not(geo6: Instance
                                                                         ) -> None:
    base = {"exact": "milp", "exact.parametric": False}
    res = solve(geo6, "portfolio", seed=3, time_limit=600, threads=1, params=base)
    assert res.info["memetic"]["params"]["ils"] == 200
    plain = solve(geo6, "milp", seed=3, time_limit=600, threads=1, warm_start="memetic",
                  params={"parametric": False})
    assert plain.info["warm_start"]["params"]["ils"] == 0
    off = solve(geo6, "portfolio", seed=3, time_limit=600, threads=1,
                params={**base, "memetic.ils": 0})
    assert off.info["memetic"]["params"]["ils"] == 0


def test_budget_left_by_an_unproven_exact_run_goes_to_the_memetic_algorithm() -> None:
    # B&B stopped by a node limit ends unproven long before the budget; the memetic
    # algorithm then runs from the best plan (capped at 20 generations, so the run does
    # not depend on the clock) and the portfolio returns the better plan with B&B's bound.
    inst = Instance.from_dict(by_family("metro", 24, 32, 3))
    params = {"exact": "bnb", "exact.node_limit": 1, "exact.parametric": False, **MA_CAP}
    res = solve(inst, "portfolio", seed=3, time_limit=600, threads=1, params=params)
    assert res.status == "feasible"
    after = res.info["memetic_after"]
    exact = res.info["exact"]
    assert res.objective == pytest.approx(min(after["objective"], exact["objective"]),
                                          rel=1e-12)
    assert res.lower_bound == exact["lower_bound"]
    assert 0 < after["started_s"] <= res.wall_s
    assert [r.incumbent for r in res.trace] == sorted((r.incumbent for r in res.trace),
                                                      reverse=True)


@pytest.mark.skipif(not memetic_peer.available(), reason="no fork here")
@pytest.mark.parametrize("exact", ["bnb", "milp"])
def test_parallel_portfolio_proves_the_brute_force_optimum(geo6: Instance, exact: str) -> None:
    ref = solve(geo6, "bruteforce", seed=0, time_limit=600, threads=1)
    res = solve(geo6, "portfolio", seed=3, time_limit=600, threads=2,
                params={"exact": exact, "exact.parametric": False, **MA_CAP})
    assert res.info["mode"] == "parallel"
    assert res.status == "optimal"
    assert res.objective == pytest.approx(ref.objective, rel=1e-6)
    assert res.info["memetic"]["ran"] is True
    assert res.info["exact"]["solver"] == exact
    assert res.info["exact"]["threads"] == 2  # the peer is niced, not given a thread


@pytest.mark.skipif(not memetic_peer.available(), reason="no fork here")
def test_parallel_portfolio_returns_the_better_plan_with_the_exact_bound() -> None:
    # B&B stopped by a node limit ends unproven; the memetic run (capped by generations,
    # so it does not depend on the clock) goes on in its process and is waited for.
    inst = Instance.from_dict(by_family("metro", 24, 32, 3))
    params = {"exact": "bnb", "exact.node_limit": 1, "exact.parametric": False, **MA_CAP}
    res = solve(inst, "portfolio", seed=3, time_limit=600, threads=2, params=params)
    alone = solve(inst, "memetic", seed=3, time_limit=600, threads=1,
                  params={"max_generations": 20})
    assert res.status == "feasible"
    ma, exact = res.info["memetic"], res.info["exact"]
    assert ma["objective"] == alone.objective  # the same run as alone, in the peer
    assert res.objective == pytest.approx(min(ma["objective"], exact["objective"]), rel=1e-12)
    assert res.objective <= alone.objective
    assert res.lower_bound == exact["lower_bound"]
    secs = [r.seconds for r in res.trace]
    assert secs == sorted(secs)
    incumbents = [r.incumbent for r in res.trace if r.incumbent is not None]
    assert all(b <= a for a, b in pairwise(incumbents))
    assert incumbents[-1] == pytest.approx(res.objective, rel=1e-9)
    assert all(r.bound is None or r.bound <= r.incumbent for r in res.trace
               if r.incumbent is not None)


def test_portfolio_runs_in_one_process_with_one_thread_or_when_told(geo6: Instance) -> None:
    one = solve(geo6, "portfolio", seed=3, time_limit=600, threads=1, params=MA_CAP)
    told = solve(geo6, "portfolio", seed=3, time_limit=600, threads=2,
                 params={"parallel": False, **MA_CAP})
    assert "mode" not in one.info and "mode" not in told.info
    assert one.objective == told.objective


@pytest.mark.skipif(not memetic_peer.available(), reason="no fork here")
def test_parallel_portfolio_from_the_cli(tmp_path, capsys) -> None:
    # geo6 is proven whatever the memetic run does (the limit is never near); the result
    # file says the two ran side by side and the peer was stopped or answered.
    path, out = tmp_path / "i.json", tmp_path / "r.json"
    Instance.from_dict(by_family("geo", 6, 10, 4)).to_json(path)
    code = main(["solve", str(path), "--solver", "portfolio", "--threads", "2",
                 "--param", "exact=milp", "--param", "memetic.max_generations=20",
                 "--time-limit", "600", "--result", str(out), "--quiet"])
    capsys.readouterr()
    assert code == 0
    res = json.loads(out.read_text())
    assert res["status"] == "optimal" and res["info"]["mode"] == "parallel"
    assert res["info"]["memetic"]["ended"] in ("its result", "stopped before its result")
    assert res["params"]["threads"] == 2


@pytest.mark.skipif(not memetic_peer.available(), reason="no fork here")
def test_parallel_portfolio_shows_incumbents_that_only_go_down() -> None:
    # B&B stopped by a node limit, the memetic run capped by generations: whichever order
    # their reports come in, the incumbents passed to the caller's callbacks never rise,
    # and the last one shown is no better than the answer.
    class Rec(Callbacks):
        def __init__(self) -> None:
            self.shown: list[float] = []

        def on_improvement(self, seconds: float, incumbent: float | None,
                           bound: float | None) -> None:
            if incumbent is not None:
                self.shown.append(incumbent)

    inst = Instance.from_dict(by_family("metro", 24, 32, 3))
    rec = Rec()
    params = {"exact": "bnb", "exact.node_limit": 1, "exact.parametric": False, **MA_CAP}
    res = solve(inst, "portfolio", seed=3, time_limit=600, threads=2, params=params,
                callbacks=rec)
    assert rec.shown and res.objective is not None
    assert all(b <= a for a, b in pairwise(rec.shown))
    assert rec.shown[-1] >= res.objective * (1 - 1e-9)


@pytest.mark.skipif(not memetic_peer.available(), reason="no fork here")
def test_parallel_portfolio_can_give_the_memetic_run_a_thread(geo6: Instance) -> None:
    res = solve(geo6, "portfolio", seed=3, time_limit=600, threads=2,
                params={"ma_thread": True, "exact.parametric": False, **MA_CAP})
    assert res.status == "optimal" and res.info["exact"]["threads"] == 1


@pytest.mark.parametrize("given", [{}, {"exact.memetic_after_share": 0.2}])
def test_the_exact_model_leaves_the_memetic_run_to_the_portfolio(
        geo6: Instance, given: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The portfolio runs the memetic algorithm itself, so its exact model's own run after
    site branching is off, unless the user asks for it (``exact.memetic_after_share``)."""
    from formulations import portfolio
    from formulations.site_subsets import SiteSearchParams

    seen: list[object] = []
    real = portfolio.run

    def spy(instance: Instance, solver: str, **kw: object) -> object:
        if solver == "milp":
            seen.append(kw.get("params"))
        return real(instance, solver, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(portfolio, "run", spy)
    solve(geo6, "portfolio", seed=0, time_limit=60, threads=1,
          params={"exact": "milp", **given})
    assert len(seen) == 1 and isinstance(seen[0], SiteSearchParams)
    assert seen[0].memetic_after_share == (0.2 if given else 0.0)
