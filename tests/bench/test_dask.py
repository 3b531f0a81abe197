"""The runner hands its runs to a Dask cluster when given a scheduler address."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from bench.execution import ResultsFile, run_experiments
from bench.experiments import parse_experiment
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.solving.core import solve

distributed = pytest.importorskip("distributed")

TEXT = """
name = "dask-tiny"
seeds = [0, 1]
budgets = [5]
grace = 5
[[solvers]]
name = "metis-default"
[[instances]]
generator = "paper"
layers = 4
seed = 0
overrides = { hidden = 512, seq_len = 512, batch_size = 8 }
grid = { n = [2, 3] }
"""


def test_tiny_sweep_through_a_local_dask_cluster(tmp_path: Path) -> None:
    exp = parse_experiment(tomllib.loads(TEXT), source="dask.toml")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        summary = run_experiments([exp], tmp_path, dask=address, progress=False)
    rows = ResultsFile(tmp_path / "results.jsonl").rows()
    assert summary.executed == 4 and len(rows) == 4
    assert {r["runner"] for r in rows} == {f"dask:{address}"}
    for r in rows:
        assert r["status"] == "feasible", r.get("message")
        spec = next(i for i in exp.instances if i.name == r["instance"])
        local = solve(Instance.from_dict(spec.data), "metis-default", seed=r["seed"])
        assert r["objective"] == pytest.approx(local.objective, rel=1e-12)


def test_unreachable_scheduler_is_an_input_error(tmp_path: Path) -> None:
    exp = parse_experiment(tomllib.loads(TEXT), source="dask.toml")
    with pytest.raises(InputError, match="Dask scheduler"):
        run_experiments([exp], tmp_path, dask="tcp://127.0.0.1:9", progress=False,
                        dask_timeout=1.0)
