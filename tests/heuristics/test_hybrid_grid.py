"""heuristics.hybrid.grid (the hybrid-grid baseline): valid plans, complete over its grids."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from geoplan.cost.baseline import proportional_split
from geoplan.cost.hybrid_evaluate import evaluate_hybrid
from geoplan.model.generators import cloud
from geoplan.model.hybrid import HybridPlan, HybridStage, Replica
from geoplan.model.hybrid_validation import validate_hybrid
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions
from heuristics.hybrid.grid import _ranked_tp_groups, grid_plans, placements, solve_grid
from heuristics.hybrid.groups import device_groups
from heuristics.hybrid.split import _memory_cap, evaluator_of


def _data(seed: int = 2, n: int = 8, lam: float = 1.0) -> dict:
    d = cloud(n, 6, seed, hidden=4096, batch_size=8, micro_batch_size=2, node_size=2,
              n_sites=2, lam=lam)
    d["training"].update(micro_batch_choices=[1, 2, 4], zero_choices=[0, 1, 2], max_tp=2)
    return d


def _brute_grid(inst: Instance) -> float:
    """Every grid shape, placement, u, zero and recompute, priced by the evaluator."""
    ev = evaluator_of(inst)
    c, tr, ids = ev.coefficients, ev.instance.training, inst.gpu_ids
    best = math.inf
    for t in (1, 2):
        ranked = _ranked_tp_groups(ev.instance, t, device_groups(ev.instance))
        for d in range(1, len(ranked) + 1):
            for p in range(1, min(inst.layers, len(ranked) // d) + 1):
                for _, stages in placements(ranked, d, p):
                    rate = [d * t * min(c.tflops[list(r)].min() for r in s.replicas)
                            for s in stages]
                    for u in tr.micro_batch_choices or ():
                        if u % d:
                            continue
                        for z in tr.zero_choices or ():
                            for rec, name in enumerate(("none", "full")):
                                caps = [_memory_cap(ev, s, (u // d,) * d, rec, z, p, q == p - 1,
                                                    inst.layers) for q, s in enumerate(stages)]
                                n = proportional_split(rate, inst.layers, caps)
                                if n is None:
                                    continue
                                plan = HybridPlan(tuple(
                                    HybridStage(n[q], t, tuple(
                                        Replica(tuple(ids[x] for x in r), u // d)
                                        for r in s.replicas), name)
                                    for q, s in enumerate(stages)), u, z)
                                e = evaluate_hybrid(inst, plan)
                                if e.feasible:
                                    best = min(best, e.objective)
    return best


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_grid_is_valid_and_the_best_over_its_grids(seed: int) -> None:
    inst = Instance.from_dict(_data(seed))
    out = solve_grid(inst, SolveOptions(seed=0))
    assert out.status == "feasible" and isinstance(out.plan, HybridPlan)
    assert not validate_hybrid(inst, out.plan)
    ev = evaluate_hybrid(inst, out.plan)
    assert out.model_objective == pytest.approx(ev.objective, rel=1e-12)
    assert ev.objective <= _brute_grid(inst) * (1 + 1e-12)
    assert out.info["complete"] and [r.incumbent for r in out.trace] == sorted(
        (r.incumbent for r in out.trace), reverse=True)


def test_deterministic_and_grid_plans_agree() -> None:
    inst = Instance.from_dict(_data(4, lam=0.5))
    a = solve_grid(inst, SolveOptions(seed=0))
    b = solve_grid(inst, SolveOptions(seed=9))
    assert a.plan == b.plan
    top = grid_plans(inst, 5)
    assert len(top) == 5 and len({x.plan for x in top}) == 5
    assert [x.objective for x in top] == sorted(x.objective for x in top)
    assert top[0].objective == pytest.approx(a.model_objective, rel=1e-12)
    refined = grid_plans(inst, 3, refine=True)
    assert refined[0].objective <= top[0].objective * (1 + 1e-12)
    assert all(not validate_hybrid(inst, x.plan) for x in refined)


def test_stop_ends_the_search() -> None:
    inst = Instance.from_dict(_data(2))
    calls = [0]

    def stop() -> bool:
        calls[0] += 1
        return calls[0] > 3

    assert len(grid_plans(inst, 1000, stop=stop)) < len(grid_plans(inst, 1000))


def test_cli_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(_data(2)))
    run = subprocess.run([sys.executable, "-m", "geoplan", "solve", str(path), "--solver",
                          "hybrid-grid", "--space", "hybrid", "--json"],
                         capture_output=True, text=True, check=True)
    got = json.loads(run.stdout)
    assert got["status"] == "feasible"
    inst = Instance.from_dict(_data(2))
    plan = HybridPlan.from_dict(got["plan"])
    assert not validate_hybrid(inst, plan)
    assert evaluate_hybrid(inst, plan).objective == pytest.approx(got["objective"], rel=1e-9)
