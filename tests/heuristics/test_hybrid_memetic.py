"""hybrid-memetic: valid plans, never worse than its pipeline seed or warm starts, the
same result twice for a seed under generation caps, TP found where one-GPU stages
cannot hold the model, the operators' invariants, and the command line end to end.
No test depends on a wall-clock budget: generations are capped and budgets are large."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from geoplan.cost.hybrid_evaluate import evaluate_hybrid
from geoplan.model.generators import cloud
from geoplan.model.hybrid import HybridPlan
from geoplan.model.hybrid_validation import validate_hybrid
from geoplan.model.instance import Instance
from heuristics.hybrid import operators as op
from heuristics.hybrid.encoding import HybridSpace, from_plan, price, structure_errors, to_plan
from heuristics.hybrid.memetic import HybridMemeticParams, run_hybrid_memetic

#: Caps that end every phase by count, never by the (large) budget.
CAPS = {"max_generations": 6, "pipeline_generations": 6, "population": 16}


def _cloud(seed: int = 1, n: int = 16, layers: int = 8) -> Instance:
    d = cloud(n, layers, seed, hidden=1024, seq_len=512, vocab=8000, batch_size=8,
              micro_batch_size=1, node_size=4, n_sites=2)
    d["training"].update(micro_batch_choices=[1, 2, 4], zero_choices=[0, 1, 2], max_tp=4)
    return Instance.from_dict(d)


def _tp_needed(recompute: tuple[str, ...] = ("none",)) -> Instance:
    """8 GPUs in two 4-GPU sites, 0.15 GB each: one layer on one GPU needs 0.19 GB, so no
    pipeline plan fits (every stage holds a layer), while tp 2 or 4 halves the need."""
    gpus = [{"id": f"g{k}", "site": "A" if k < 4 else "B", "peak_tflops": 100.0 + 10 * (k % 4),
             "memory_gb": 0.15, "idle_w": 50.0, "active_w": 300.0} for k in range(8)]
    links = [{"src": f"g{i}", "dst": f"g{j}",
              "bandwidth_gbps": 400.0 if (i < 4) == (j < 4) else 10.0,
              "latency_ms": 0.01 if (i < 4) == (j < 4) else 5.0}
             for i in range(8) for j in range(8) if i != j]
    return Instance.from_dict({
        "name": "tp-needed", "gpus": gpus, "links": links,
        "model": {"layers": 4, "hidden": 1024, "seq_len": 512, "vocab": 1000},
        "training": {"batch_size": 8, "micro_batch_size": 1, "max_tp": 4,
                     "micro_batch_choices": [1, 2], "recompute_choices": list(recompute)},
        "objective": {"lambda": 1.0},
    })


def _run(inst: Instance, seed: int = 3, **kw: object):
    params = HybridMemeticParams(**{**CAPS, **kw})  # type: ignore[arg-type]
    return run_hybrid_memetic(inst, seed, params, time_limit=600.0)


@pytest.mark.parametrize("seed", [1, 2])
def test_valid_and_never_worse_than_the_pipeline_seed(seed: int) -> None:
    inst = _cloud(seed)
    res = _run(inst, seed)
    assert res.plan is not None
    assert not validate_hybrid(inst, res.plan)
    ev = evaluate_hybrid(inst, res.plan)
    assert ev.objective == pytest.approx(res.objective, rel=1e-9)
    pipe = res.pipeline["objective"]
    assert pipe is not None and res.pipeline["hybrid_objective"] == pytest.approx(pipe, rel=1e-9)
    assert res.objective <= pipe * (1 + 1e-12)
    # Nor worse than any other seed: the grid plans (when that module is installed).
    try:
        from heuristics.hybrid.grid import grid_plans
    except ImportError:
        pass
    else:
        assert res.objective <= min(c.objective for c in grid_plans(inst)) * (1 + 1e-12)
    info = res.info()
    assert info["generations"] == CAPS["max_generations"]
    assert info["improvement_over_pipeline"] == pytest.approx((pipe - res.objective) / pipe)
    # The trace falls and ends at the returned plan.
    values = [r.incumbent for r in res.trace]
    assert values == sorted(values, reverse=True) and values[-1] == res.objective


def test_same_seed_same_result() -> None:
    inst = _cloud(2)
    a, b = _run(inst, 5), _run(inst, 5)
    assert a.plan == b.plan and a.objective == b.objective
    assert a.history == b.history and a.evaluations == b.evaluations


def test_never_worse_than_a_warm_start() -> None:
    inst = _cloud(1)
    seeded = _run(inst, 4, max_generations=2)
    assert seeded.plan is not None
    # Without the pipeline seed, the warm start is the plan to beat.
    res = run_hybrid_memetic(inst, 9, HybridMemeticParams(
        **{**CAPS, "max_generations": 1, "pipeline_share": 0.0, "grid_seeds": False}),
        time_limit=600.0, starts=[seeded.plan])
    assert res.warm_start_accepted
    assert res.objective <= seeded.objective * (1 + 1e-12)


def test_tensor_parallel_where_one_gpu_stages_cannot_hold_the_model() -> None:
    inst = _tp_needed()
    res = _run(inst, 1, grid_seeds=False)
    assert res.pipeline["status"] in ("no_solution", "infeasible")  # MILP proves it
    assert res.plan is not None and not validate_hybrid(inst, res.plan)
    assert max(s.tp for s in res.plan.stages) >= 2
    assert math.isfinite(res.objective) and res.info()["improvement_over_pipeline"] is None


def test_operators_keep_the_structure() -> None:
    inst = _cloud(3)
    space = HybridSpace(inst)
    rng = np.random.default_rng(0)
    pool = [g for g in (op.random_genome(rng, space) for _ in range(60)) if g is not None]
    assert pool
    for g in pool:
        assert not structure_errors(space, g)
        back = from_plan(space, to_plan(space, g))
        assert back == g
    for k in range(600):
        g = pool[k % len(pool)]
        m = op.MUTATIONS[k % len(op.MUTATIONS)](rng, space, g)
        if m is not None:
            assert not structure_errors(space, m), op.MUTATIONS[k % len(op.MUTATIONS)].__name__
    for k in range(40):
        a, b = pool[k % len(pool)], pool[(3 * k + 1) % len(pool)]
        for c in op.crossover_children(space, a, b, op.crossover_cuts(rng, space, a, b,
                                                                          k % 4 == 0, 8)):
            assert not structure_errors(space, c)
    for g in pool[:10] + op.expansions(space, pool[0]) + op.regroupings(space, pool[0]):
        assert not structure_errors(space, g)
        v = float(price(space, [g])[0])
        h, w = op.local_search(space, g)
        assert not structure_errors(space, h) and w <= v
        assert [s.replicas for s in h.stages] == [s.replicas for s in g.stages]
        if math.isfinite(w):
            assert evaluate_hybrid(inst, to_plan(space, h)).objective == pytest.approx(w)


def test_prices_agree_with_the_evaluator() -> None:
    inst = _cloud(2)
    space = HybridSpace(inst)
    rng = np.random.default_rng(1)
    pool = [g for g in (op.random_genome(rng, space) for _ in range(40)) if g is not None]
    got = price(space, pool)
    for g, v in zip(pool, got.tolist(), strict=True):
        ev = evaluate_hybrid(inst, to_plan(space, g))
        assert ev.feasible == math.isfinite(v)
        if ev.feasible:
            assert ev.objective == v


def test_cli_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(_tp_needed(("none", "full")).to_dict()))
    run = subprocess.run(
        [sys.executable, "-m", "geoplan", "solve", str(path), "--solver", "memetic",
         "--space", "hybrid", "--seed", "2", "--threads", "1", "--json",
         "--param", "max_generations=4", "--param", "pipeline_generations=4",
         "--param", "population=12"],
        capture_output=True, text=True, check=True)
    got = json.loads(run.stdout)
    assert got["solver"] == "hybrid-memetic" and got["status"] == "feasible"
    inst = _tp_needed(("none", "full"))
    plan = HybridPlan.from_dict(got["plan"])
    assert not validate_hybrid(inst, plan)
    assert evaluate_hybrid(inst, plan).objective == pytest.approx(got["objective"], rel=1e-9)
    assert got["info"]["generations"] == 4
    assert got["info"]["pipeline_seed"]["status"] in ("no_solution", "infeasible")


def test_never_worse_than_the_pipeline_optimum_on_small_pools() -> None:
    """With the default pipeline seed (portfolio up to 32 GPUs) the hybrid plan is at most the
    pipeline space's proven optimum, whatever the few generations find."""
    from geoplan.solving.core import solve

    for seed in (1, 2):
        inst = _cloud(seed, n=8, layers=6)
        opt = solve(inst, "bruteforce", seed=0, time_limit=600.0, threads=1, warm_up=False)
        assert opt.status == "optimal" and opt.objective is not None
        res = _run(inst, seed, grid_seeds=False)
        assert res.pipeline["solver"] == "portfolio" and res.pipeline["status"] == "optimal"
        assert res.objective <= opt.objective * (1 + 1e-9)
