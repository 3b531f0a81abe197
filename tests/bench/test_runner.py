"""The runner: isolated runs (crash, exit, time-out recorded), complete rows, resume."""

from __future__ import annotations

import io
import json
import os
import time
import tomllib
from pathlib import Path

import pytest

import geoplan.solving.core as registry
from bench.execution import ResultsFile, execute, run_experiments
from bench.experiments import parse_experiment
from geoplan.cost import evaluate
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions, SolverSpec
from geoplan.solving.result import Outcome

INSTANCE = """
[[instances]]
generator = "paper"
layers = 4
seed = 0
overrides = { hidden = 512, seq_len = 512, batch_size = 8 }
grid = { n = [2, 3] }
"""


def _sleepy(instance: Instance, options: SolveOptions) -> Outcome:
    options.callbacks.on_improvement(0.01, 123.0, None)
    time.sleep(60)
    raise AssertionError("not reached: the runner kills this run")


def _crash(instance: Instance, options: SolveOptions) -> Outcome:
    raise RuntimeError("boom in the solver")


def _exit(instance: Instance, options: SolveOptions) -> Outcome:
    os._exit(3)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Misbehaving solvers, registered for this test only (forked runs inherit them)."""
    for name, target in (("test-sleep", _sleepy), ("test-crash", _crash), ("test-exit", _exit),
                         ("test-missing", "no_such_module_xyz:solve")):
        monkeypatch.setitem(registry._REGISTRY, name,
                            SolverSpec(name, target, "heuristic", "test double"))


def _exp(text: str, profile: str = "full"):
    return parse_experiment(tomllib.loads(text), profile, source="test.toml")


def _rows(out: Path) -> list[dict]:
    return ResultsFile(out / "results.jsonl").rows()


def test_failures_are_recorded_not_fatal(tmp_path: Path, fakes: None) -> None:
    exp = _exp("""
name = "iso"
budgets = [0.5]
grace = 1.5
[[solvers]]
name = "metis-default"
[[solvers]]
name = "test-crash"
[[solvers]]
name = "test-exit"
[[solvers]]
name = "test-sleep"
[[solvers]]
name = "test-missing"
[[instances]]
generator = "paper"
n = 3
layers = 4
seed = 0
overrides = { hidden = 512, seq_len = 512, batch_size = 8 }
""")
    stream = io.StringIO()
    t0 = time.perf_counter()
    # the warm-up runs the misbehaving solvers too, isolated: the runner must survive it
    summary = run_experiments([exp], tmp_path, workers=2, progress=True, stream=stream,
                              warm_up=2.0)
    wall = time.perf_counter() - t0
    rows = {r["solver"]: r for r in _rows(tmp_path)}
    assert set(rows) == {"metis-default", "test-crash", "test-exit", "test-sleep",
                         "test-missing"}
    assert rows["metis-default"]["status"] == "feasible"
    assert rows["test-crash"]["status"] == "crashed"
    assert "boom in the solver" in rows["test-crash"]["message"]
    assert rows["test-exit"]["status"] == "crashed"
    assert "exit status 3" in rows["test-exit"]["message"]
    slow = rows["test-sleep"]
    assert slow["status"] == "timeout"
    assert 2.0 <= slow["elapsed_s"] < 60  # killed, not slept out (no tighter: busy cores)
    assert slow["trace"] == [[0.01, 123.0, None]]  # the partial trace survives the kill
    assert slow["unpriced_incumbent"] == 123.0 and slow["objective"] is None
    assert rows["test-missing"]["status"] == "skipped"
    assert "unavailable" in rows["test-missing"]["message"]
    assert wall < 110  # the 60 s sleeper was killed (in the warm-up and in its run)
    assert summary.executed == 4 and summary.statuses["skipped"] == 1
    assert summary.unavailable.keys() == {"test-missing"}
    # one progress line per executed run when the stream is not a terminal
    assert len(stream.getvalue().strip().splitlines()) == 4


def test_rows_carry_identity_provenance_and_result(tmp_path: Path) -> None:
    exp = _exp('name = "rows"\nseeds = [0, 1]\nbudgets = [2]\ngrace = 5\n'
               '[[solvers]]\nname = "metis-default"\nparams = { note = "x" }\n' + INSTANCE)
    run_experiments([exp], tmp_path, workers=1, progress=False)
    rows = _rows(tmp_path)
    assert len(rows) == 4
    for r in rows:
        for key in ("solver", "params", "seed", "instance", "instance_hash", "version",
                    "git_commit", "status", "objective", "lower_bound", "gap", "wall_s",
                    "trace", "budget_s", "run_key", "plan", "instance_spec"):
            assert key in r, key
        assert r["params"] == {"note": "x"} and r["budget_s"] == 2.0
        data = json.loads((tmp_path / "instances" / r["instance_file"]).read_text())
        inst = Instance.from_dict(data)
        assert inst.fingerprint == r["instance_hash"]
        assert "instance_hash_prepared" not in r
        from geoplan.solving.core import solve

        assert solve(inst, "metis-default", seed=0).instance_hash == r["instance_hash"]
        # the objective in the row is the shared evaluator's price of the row's plan
        from geoplan.model.plan import Plan

        assert evaluate(inst, Plan.from_dict(r["plan"])).objective == pytest.approx(
            r["objective"], rel=1e-12)
        assert r["instance_spec"]["generator"] == "paper"
    assert {r["seed"] for r in rows} == {0, 1}
    assert len({r["run_key"] for r in rows}) == 4
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["experiments"]["rows"]["solvers"][0]["name"] == "metis-default"


def test_interrupted_sweep_resumes_where_it_stopped(tmp_path: Path) -> None:
    text = ('name = "res"\nseeds = [0, 1, 2]\nbudgets = [2]\ngrace = 5\n'
            '[[solvers]]\nname = "metis-default"\n' + INSTANCE)
    exp = _exp(text)
    run_experiments([exp], tmp_path, workers=2, progress=False)
    path = tmp_path / "results.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 6
    # an interruption: three rows written, the fourth torn mid-line
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][:25])
    with pytest.raises(InputError, match="--resume"):
        run_experiments([exp], tmp_path, progress=False)
    summary = run_experiments([exp], tmp_path, workers=2, resume=True, progress=False)
    assert summary.resumed == 3 and summary.executed == 3
    rows = _rows(tmp_path)
    assert len(rows) == 6 and len({r["run_key"] for r in rows}) == 6
    assert all(json.loads(line) for line in path.read_text().splitlines())
    again = run_experiments([exp], tmp_path, resume=True, progress=False)
    assert again.executed == 0 and again.resumed == 6
    fresh = run_experiments([exp], tmp_path, overwrite=True, progress=False)
    assert fresh.executed == 6 and len(_rows(tmp_path)) == 6


def test_max_n_skips_with_a_reason_and_normalise_by(tmp_path: Path) -> None:
    exp = _exp("""
name = "norm"
budgets = [2]
grace = 5
normalise_budget = 2
[[solvers]]
name = "metis-default"
max_n = 2
[[instances]]
generator = "paper"
layers = 4
seed = 0
normalise_by = "metis-default"
overrides = { hidden = 512, seq_len = 512, batch_size = 8, lam = 0.5 }
grid = { n = [2, 3] }
""")
    run_experiments([exp], tmp_path, progress=False)
    rows = {r["n"]: r for r in _rows(tmp_path)}
    assert rows[3]["status"] == "skipped" and "max_n=2" in rows[3]["message"]
    r = rows[2]
    assert r["status"] == "feasible" and r["normalised_by"] == "metis-default"
    inst = Instance.from_dict(json.loads((tmp_path / "instances" / r["instance_file"]
                                          ).read_text()))
    from geoplan.cost.baseline import metis_default_plan

    plain = inst.with_objective(lam=1.0)
    ev = evaluate(plain, metis_default_plan(plain))
    assert inst.objective.t_ref_ms == pytest.approx(ev.t_iter_ms)
    assert r["t_ref_ms"] == pytest.approx(ev.t_iter_ms)
    assert r["normaliser"]["plan"] is not None


def test_execute_in_process_matches_the_solver(tmp_path: Path) -> None:
    exp = _exp('name = "ex"\nbudgets = [2]\n[[solvers]]\nname = "metis-default"\n' + INSTANCE)
    spec = exp.instances[0]
    row = execute({"instance": dict(spec.data),
                   "row": {"solver": "metis-default", "seed": 0, "budget_s": 2.0, "threads": 1,
                           "warm_start": None, "params": {}}})
    inst = Instance.from_dict(spec.data)
    from geoplan.solving.core import solve

    assert row["objective"] == pytest.approx(solve(inst, "metis-default", seed=0).objective)
    assert row["status"] == "feasible" and row["elapsed_s"] >= 0
