"""metis-improved: subset coverage, sampling determinism, never worse than metis-default."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import heuristics.metis as metis
from geoplan.cli import main
from geoplan.cost import evaluate
from geoplan.cost.baseline import metis_default_plan
from geoplan.errors import InputError
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions, solve

SOLVE_KEYS = {"solver", "status", "plan", "objective", "t_iter_ms", "e_iter_j", "lower_bound",
              "gap", "wall_s", "t_ref_ms", "e_ref_j", "trace"}


def generated(family: str, n: int, layers: int, seed: int, **kw: Any) -> Instance:
    return Instance.from_dict(by_family(family, n, layers, seed, **kw))


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """Every GPU subset handed to best_order_plan by heuristics.metis, in call order."""
    calls: list[tuple[int, ...]] = []
    original: Callable[..., Any] = metis.best_order_plan

    def spy(instance: Instance, gpus: list[int], c: Any = None) -> Any:
        calls.append(tuple(gpus))
        return original(instance, gpus, c)

    monkeypatch.setattr(metis, "best_order_plan", spy)
    return calls


def run(instance: Instance, seed: int = 0, time_limit: float = 60.0, **params: Any):
    return metis.solve_metis_improved(
        instance, SolveOptions(seed=seed, time_limit=time_limit, params=params)
    )


# ----------------------------------------------------------------------------- exhaustive mode


@pytest.mark.parametrize(("family", "n"), [("paper", 3), ("geo", 5), ("metro", 7)])
def test_exhaustive_tries_every_nonempty_subset(
    recorded: list[tuple[int, ...]], family: str, n: int
) -> None:
    out = run(generated(family, n, 12, seed=n))
    expected = {s for k in range(1, n + 1) for s in itertools.combinations(range(n), k)}
    assert len(recorded) == 2**n - 1  # each subset exactly once
    assert set(recorded) == expected
    assert out.info["mode"] == "exhaustive" and out.info["complete"] is True
    assert out.info["subsets_tried"] == 2**n - 1 == out.info["subsets_total"]


def test_exhaustive_three_gpu_fixture(recorded: list[tuple[int, ...]], three_gpu: Instance) -> None:
    out = run(three_gpu)
    assert sorted(recorded, key=lambda s: (len(s), s)) == [
        (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)
    ]
    assert out.status == "feasible" and out.plan is not None


def test_exhaustive_skips_subsets_larger_than_layers(recorded: list[tuple[int, ...]]) -> None:
    # N = 5, L = 3: a plan has at most 3 stages, so subsets of 4 or 5 GPUs are not tried:
    # C(5,1) + C(5,2) + C(5,3) = 5 + 10 + 10 = 25.
    out = run(generated("paper", 5, 3, seed=1))
    assert len(recorded) == 25 == out.info["subsets_tried"]
    assert max(len(s) for s in recorded) == 3


def test_exhaustive_is_at_least_as_good_as_every_single_gpu_plan() -> None:
    # Singletons are subsets, and the rules put all L layers on a lone GPU; so the
    # search can be no slower than the fastest feasible one-GPU plan (priced independently).
    inst = generated("geo", 6, 12, seed=3)
    out = run(inst)
    assert out.plan is not None
    t = evaluate(inst, out.plan).t_iter_ms
    singles = [evaluate(inst, Plan.from_pairs([(g, inst.layers)])) for g in inst.gpu_ids]
    feasible = [e.t_iter_ms for e in singles if e.feasible]
    assert feasible, "fixture should admit a one-GPU plan"
    assert t <= min(feasible) * (1 + 1e-12)


def test_subset_count() -> None:
    assert metis.subset_count(7, 12) == 127
    assert metis.subset_count(5, 3) == 25
    assert metis.subset_count(1, 1) == 1


# ----------------------------------------------------------------------------- sampled mode


def test_sampling_is_deterministic_given_the_seed(recorded: list[tuple[int, ...]]) -> None:
    inst = generated("paper", 10, 12, seed=4)
    a = run(inst, seed=7, samples=150)
    first = list(recorded)
    recorded.clear()
    b = run(inst, seed=7, samples=150)
    assert recorded == first
    assert a.plan == b.plan
    assert [r.incumbent for r in a.trace] == [r.incumbent for r in b.trace]
    assert a.info["mode"] == "sampled" and a.info["subsets_tried"] == 150
    assert len(set(first)) == 150  # distinct subsets, within 1..min(N, L) GPUs
    assert all(1 <= len(s) <= 10 and list(s) == sorted(set(s)) for s in first)
    recorded.clear()
    run(inst, seed=8, samples=150)
    assert recorded != first  # the seed does drive the sampling


def test_sampling_stops_when_every_subset_has_been_seen() -> None:
    # N = 8 > 7 samples; with no cap, the 255 subsets are all found, then it stops.
    out = run(generated("metro", 8, 12, seed=2), samples=None)
    assert out.info["mode"] == "sampled" and out.info["complete"] is True
    assert out.info["subsets_tried"] == 255 and out.info["draws"] >= 255


def test_exhaustive_threshold_is_a_parameter(recorded: list[tuple[int, ...]]) -> None:
    out = run(generated("geo", 5, 12, seed=5), exhaustive_max=4, samples=10)
    assert out.info["mode"] == "sampled" and len(recorded) == 10


def test_time_budget_keeps_the_default_plan() -> None:
    inst = generated("paper", 10, 12, seed=4)
    # A budget that is already spent: the loop stops at once, the default plan remains.
    options = SolveOptions(seed=0, time_limit=0.5, start=time.perf_counter() - 1.0)
    out = metis.solve_metis_improved(inst, options)
    assert out.info["timed_out"] is True and out.info["subsets_tried"] == 0
    assert out.plan == metis_default_plan(inst)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many", True])
def test_bad_samples_parameter(three_gpu: Instance, bad: Any) -> None:
    with pytest.raises(InputError):
        run(three_gpu, samples=bad)


# ----------------------------------------------------------------------------- vs metis-default


CASES = [(f, n, s) for f in ("paper", "geo", "metro") for n in (4, 6, 9, 12) for s in (1, 2)]


def test_improved_never_slower_than_default() -> None:
    strictly_better = 0
    for family, n, seed in CASES:
        inst = generated(family, n, 12, seed)
        d = solve(inst, "metis-default", seed=0)
        r = solve(inst, "metis-improved", seed=0, params={"samples": 100})
        assert r.status == "feasible"
        assert r.t_iter_ms <= d.t_iter_ms * (1 + 1e-12), (family, n, seed)
        strictly_better += r.t_iter_ms < d.t_iter_ms * (1 - 1e-9)
    # The subset search must matter somewhere (the paper's point about stragglers).
    assert strictly_better >= len(CASES) // 3


def test_energy_is_off() -> None:
    # The ranking is by T_iter alone, so lambda does not change the plan; the core
    # still prices it under the instance's lambda.
    fast = generated("geo", 6, 12, seed=6, lam=1.0)
    green = generated("geo", 6, 12, seed=6, lam=0.0)
    a = solve(fast, "metis-improved", seed=0)
    b = solve(green, "metis-improved", seed=0)
    assert a.plan == b.plan
    assert b.objective == pytest.approx(b.e_iter_j) and a.objective == pytest.approx(a.t_iter_ms)


def test_trace_reports_the_objective_of_each_incumbent() -> None:
    inst = generated("geo", 6, 12, seed=6, lam=1.0)
    r = solve(inst, "metis-improved", seed=0)
    inc = [row.incumbent for row in r.trace]
    assert inc == sorted(inc, reverse=True) and inc[-1] == pytest.approx(r.objective)


# ----------------------------------------------------------------------------- command line


def test_cli_solve_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(by_family("paper", 5, 12, 3)))
    code = main(["solve", str(path), "--solver", "metis-improved", "--json", "--quiet"])
    out, _ = capsys.readouterr()
    assert code == 0
    d = json.loads(out)
    assert SOLVE_KEYS <= d.keys()
    assert d["solver"] == "metis-improved" and d["status"] == "feasible"
    assert d["objective"] == pytest.approx(d["t_iter_ms"])  # lambda 1
    assert d["lower_bound"] is None and d["gap"] is None
    assert all(len(row) == 3 and row[2] is None for row in d["trace"])
    plan = Plan.from_dict(d["plan"])
    inst = Instance.from_dict(json.loads(path.read_text()))
    assert evaluate(inst, plan).t_iter_ms == pytest.approx(d["t_iter_ms"])
    assert d["info"]["subsets_tried"] == 31
