"""Brute force: the optimum against the reference enumerator, refusal above the
space cap, statuses and the command line."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import numpy as np
import pytest
from oracle import reference_optimum

from formulations import bruteforce
from geoplan.cli import main
from geoplan.cost.normalise import resolve_normalisers
from geoplan.errors import SolverError
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions, solve


@pytest.mark.parametrize("lam", [1.0, 0.0, 0.5])
def test_three_gpu_optimum_matches_reference_enumeration(three_gpu: Instance,
                                                         lam: float) -> None:
    inst = resolve_normalisers(three_gpu.with_objective(lam=lam))
    res = solve(inst, "bruteforce", seed=0, time_limit=600)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(reference_optimum(inst)[0], rel=1e-12)
    assert res.lower_bound == res.objective and res.gap == 0.0
    assert res.info["priced"] <= res.info["space_size"] == 399
    assert res.trace and res.trace[-1].incumbent == res.objective


def test_refuses_above_the_space_cap(three_gpu: Instance) -> None:
    with pytest.raises(SolverError, match=r"f\(N=3, L=12\) = 399 plans.*max_space = 100"):
        solve(three_gpu, "bruteforce", seed=0, time_limit=600, params={"max_space": 100})
    # The default cap admits f(3, 12) = 399.
    assert solve(three_gpu, "bruteforce", seed=0, time_limit=600).status == "optimal"


def _unlinked_pair() -> Instance:
    """Two GPUs that together (not alone) hold the model, with no link between them."""
    gpu = {"peak_tflops": 100, "memory_gb": 12, "idle_w": 30, "active_w": 200}
    return Instance.from_dict({
        "gpus": [{"id": "x", **gpu}, {"id": "y", **gpu}],
        "links": [],
        "model": {"layers": 16, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 8, "micro_batch_size": 1},
    })


def test_infeasible_instance_is_reported() -> None:
    res = solve(_unlinked_pair(), "bruteforce", seed=0, time_limit=600)
    assert res.status == "infeasible"
    assert res.plan is None and res.objective is None
    assert "no feasible plan" in (res.message or "")


def test_time_limit_without_incumbent_is_no_solution(three_gpu: Instance) -> None:
    out = bruteforce.solve(three_gpu, SolveOptions(seed=0, time_limit=1e-9))
    assert out.status == "no_solution" and out.plan is None
    assert "time limit" in (out.message or "")


def test_compositions_blocks() -> None:
    whole = np.vstack(list(bruteforce.compositions(9, 4)))
    split = np.vstack(list(bruteforce.compositions(9, 4, max_rows=5)))
    assert len(whole) == comb(8, 3)
    assert np.array_equal(whole, split)  # same rows, same (lexicographic) order
    assert (whole.sum(axis=1) == 9).all() and (whole >= 1).all()
    assert len({tuple(r) for r in whole}) == len(whole)
    assert list(bruteforce.compositions(3, 4)) == []


def test_cli_prints_bound_and_gap(tmp_path: Path, three_gpu: Instance,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "inst.json"
    three_gpu.to_json(path)
    assert main(["solve", str(path), "--solver", "bruteforce", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "optimal"
    assert out["lower_bound"] == pytest.approx(out["objective"])
    assert out["gap"] == 0.0
    code = main(["solve", str(path), "--solver", "bruteforce", "--param", "max_space=10",
                 "--quiet"])
    assert code == 1
    assert "399" in capsys.readouterr().err
