"""Hybrid plans: JSON forms, bad input, the GeoTrain special case and the command line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import reference_model as ref

from geoplan.cli import main
from geoplan.cost import evaluate
from geoplan.cost.hybrid_evaluate import HybridEvaluator, evaluate_any, evaluate_hybrid
from geoplan.errors import InputError
from geoplan.model.hybrid import HybridPlan, any_plan_from_dict, as_hybrid
from geoplan.model.hybrid_validation import validate_hybrid
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

DATA = Path(__file__).parent.parent / "data"


def _pool(n_sites: int = 2, per_site: int = 4, **training: object) -> Instance:
    """Sites of identical GPUs, fully linked (fast inside a site)."""
    gpus = [{"id": f"s{s}g{k}", "site": f"S{s}", "peak_tflops": 100.0, "memory_gb": 40.0,
             "idle_w": 50.0, "active_w": 300.0} for s in range(n_sites) for k in range(per_site)]
    links = [{"src": a["id"], "dst": b["id"],
              "bandwidth_gbps": 400.0 if a["site"] == b["site"] else 10.0,
              "latency_ms": 0.01 if a["site"] == b["site"] else 20.0}
             for a in gpus for b in gpus if a is not b]
    return Instance.from_dict({
        "gpus": gpus, "links": links,
        "model": {"layers": 8, "hidden": 1024, "seq_len": 512, "vocab": 1000},
        "training": {"batch_size": 16, "micro_batch_size": 4, **training},
    })


def _hybrid(stages: list[dict], **extra: object) -> HybridPlan:
    return HybridPlan.from_dict({"stages": stages, **extra})


def test_geotrain_form_round_trips_and_converts() -> None:
    d = {"stages": [{"gpu": "s0g0", "layers": 5}, {"gpu": "s1g0", "layers": 3}]}
    p = any_plan_from_dict(d)
    assert isinstance(p, Plan)
    h = as_hybrid(p)
    assert h.is_pipeline and h.to_dict() == d
    # The explicit form of the same plan is written back in the GeoTrain form.
    explicit = {"stages": [{"layers": 5, "tp": 1, "replicas": [{"gpus": ["s0g0"]}]},
                           {"layers": 3, "tp": 1, "replicas": [{"gpus": ["s1g0"]}]}]}
    assert any_plan_from_dict(explicit) == p
    hybrid = {"stages": [{"layers": 8, "tp": 2, "recompute": "full",
                          "replicas": [{"gpus": ["s0g0", "s0g1"], "samples": 3},
                                       {"gpus": ["s0g2", "s0g3"], "samples": 1}]}],
              "micro_batch_size": 4, "zero": 1}
    h2 = any_plan_from_dict(hybrid)
    assert isinstance(h2, HybridPlan) and h2.to_dict() == hybrid


@pytest.mark.parametrize(("stage", "field"), [
    ({"layers": 8, "tp": "2", "replicas": [{"gpus": ["s0g0"]}]}, "plan.stages[0].tp"),
    ({"layers": 8, "tp": 1, "replicas": [{"gpus": ["s0g0"], "samples": 1.5}]},
     "plan.stages[0].replicas[0].samples"),
    ({"layers": 8, "tp": 1, "replicas": "s0g0"}, "plan.stages[0].replicas"),
    ({"layers": 8, "tp": 1, "replicas": [{"gpus": []}]}, "plan.stages[0].replicas[0].gpus"),
    ({"layers": 8, "tp": 1, "replicas": [{"gpus": [3]}]}, "plan.stages[0].replicas[0].gpus[0]"),
    ({"layers": 8, "recompute": 1, "replicas": [{"gpus": ["s0g0"]}]},
     "plan.stages[0].recompute"),
    ({"layers": "8", "replicas": [{"gpus": ["s0g0"]}]}, "plan.stages[0].layers"),
    ({"gpu": "s0g0", "layers": 8, "replicas": [{"gpus": ["s0g1"]}]}, "plan.stages[0].gpu"),
])
def test_wrong_types_are_input_errors_naming_the_field(stage: dict, field: str) -> None:
    with pytest.raises(InputError) as e:
        _hybrid([stage])
    assert e.value.field == field


def _kinds(inst: Instance, plan: HybridPlan) -> list[str]:
    return sorted({v.kind for v in validate_hybrid(inst, plan)})


def test_each_broken_rule_is_a_violation() -> None:
    inst = _pool()
    ok = [{"layers": 8, "tp": 2, "replicas": [{"gpus": ["s0g0", "s0g1"], "samples": 2},
                                              {"gpus": ["s0g2", "s0g3"], "samples": 2}]}]
    assert validate_hybrid(inst, _hybrid(ok)) == []
    cases = {
        "tp": [{"layers": 8, "tp": 3, "replicas": [{"gpus": ["s0g0", "s0g1", "s0g2"]}]}],
        "replica_size": [{"layers": 8, "tp": 2, "replicas": [{"gpus": ["s0g0"]}]}],
        "tp_site": [{"layers": 8, "tp": 2, "replicas": [{"gpus": ["s0g0", "s1g0"]}]}],
        "recompute": [{"layers": 8, "recompute": "partial", "replicas": [{"gpus": ["s0g0"]}]}],
        "repeated_gpu": [{"layers": 4, "replicas": [{"gpus": ["s0g0"]}]},
                         {"layers": 4, "replicas": [{"gpus": ["s0g0"]}]}],
        "layer_sum": [{"layers": 7, "replicas": [{"gpus": ["s0g0"]}]}],
    }
    also = {"repeated_gpu": ["missing_link"]}  # a GPU sending to itself has no link
    for kind, stages in cases.items():
        assert _kinds(inst, _hybrid(stages)) == sorted([kind, *also.get(kind, [])]), kind
    shares = [{"layers": 8, "replicas": [{"gpus": ["s0g0"], "samples": 1},
                                          {"gpus": ["s0g1"], "samples": 1}]}]
    assert _kinds(inst, _hybrid(shares)) == ["samples"]
    assert _kinds(inst, _hybrid(ok, zero=3)) == ["zero"]
    assert _kinds(inst, _hybrid(ok, micro_batch_size=3)) == ["micro_batch", "samples"]
    assert _kinds(inst, _hybrid([{"layers": 8, "tp": 16, "replicas": [
        {"gpus": [f"s0g{k}" for k in range(4)] * 4}]}])) == ["repeated_gpu", "tp"]


def test_missing_ring_link_and_memory_are_violations() -> None:
    d = json.loads(json.dumps({
        "gpus": [{"id": f"g{k}", "site": "A", "peak_tflops": 100.0, "memory_gb": 8.0,
                  "idle_w": 50.0, "active_w": 300.0} for k in range(3)],
        "links": [{"src": "g0", "dst": "g1", "bandwidth_gbps": 100.0, "latency_ms": 0.01},
                  {"src": "g1", "dst": "g0", "bandwidth_gbps": 100.0, "latency_ms": 0.01},
                  {"src": "g1", "dst": "g2", "bandwidth_gbps": 100.0, "latency_ms": 0.01},
                  {"src": "g2", "dst": "g1", "bandwidth_gbps": 100.0, "latency_ms": 0.01}],
        "model": {"layers": 4, "hidden": 1024, "seq_len": 512, "vocab": 1000},
        "training": {"batch_size": 8, "micro_batch_size": 2, "max_tp": 2},
    }))
    inst = Instance.from_dict(d)
    # A DP ring g0 -> g2 -> g0 lacks both links; the plan is priced at inf.
    p = _hybrid([{"layers": 4, "replicas": [{"gpus": ["g0"], "samples": 1},
                                             {"gpus": ["g2"], "samples": 1}]}])
    vs = validate_hybrid(inst, p)
    assert [v.kind for v in vs] == ["missing_link", "missing_link"]
    ev = evaluate_hybrid(inst, p)
    assert not ev.feasible and ev.t_iter_ms == float("inf")
    assert ev.to_dict()["t_iter_ms"] is None
    # H = 4608: four layers' weights, gradients and optimizer state take 8.15 GB alone.
    big = Instance.from_dict({**d, "model": {**d["model"], "hidden": 4608}})
    one = _hybrid([{"layers": 4, "replicas": [{"gpus": ["g0"]}]}])
    assert "memory" in {v.kind for v in validate_hybrid(big, one)}
    two = _hybrid([{"layers": 4, "tp": 2, "replicas": [{"gpus": ["g0", "g1"]}]}])
    assert evaluate_hybrid(big, two).stages[0].memory_gb == pytest.approx(
        evaluate_hybrid(big, one).stages[0].memory_gb / 2)


def test_geotrain_plans_keep_their_price() -> None:
    """The hybrid evaluator prices every GeoTrain plan as the GeoTrain evaluator does."""
    rng = random.Random(7)
    checked = 0
    for _ in range(40):
        raw = ref.random_instance(rng, n_gpus=rng.randint(2, 5), layers=rng.randint(2, 8))
        inst = Instance.from_dict(raw)
        for _ in range(10):
            plan = Plan.from_dict(ref.random_plan(rng, raw))
            a, b = evaluate(inst, plan), evaluate_hybrid(inst, HybridPlan.from_pipeline(plan))
            assert a.feasible == b.feasible
            for x, y in ((a.t_iter_ms, b.t_iter_ms), (a.e_iter_j, b.e_iter_j)):
                assert x == pytest.approx(y, rel=1e-12, abs=0) or (x == y)
            if a.feasible:
                assert a.objective == pytest.approx(b.objective, rel=1e-12)
                checked += 1
            for s, h in zip(a.stages, b.stages, strict=True):
                assert s.tau_ms == pytest.approx(h.tau_ms, rel=1e-12)
                assert s.memory_gb == pytest.approx(h.memory_gb, rel=1e-12)
    assert checked > 50


def test_scalar_price_is_the_explained_price() -> None:
    inst = _pool(zero_choices=[0, 1, 2])
    p = _hybrid([{"layers": 5, "tp": 2, "replicas": [{"gpus": ["s0g0", "s0g1"], "samples": 3},
                                                     {"gpus": ["s0g2", "s0g3"], "samples": 1}]},
                 {"layers": 3, "tp": 4, "recompute": "full",
                  "replicas": [{"gpus": ["s1g0", "s1g1", "s1g2", "s1g3"]}]}], zero=2)
    ev = evaluate_any(inst, p)
    status, t, e, obj = HybridEvaluator(inst).price(p)
    assert status == 0 and ev.feasible
    assert (t, e, obj) == (ev.t_iter_ms, ev.e_iter_j, ev.objective)
    taus = [s.tau_ms for s in ev.stages]
    M = 16 / 4
    assert t == pytest.approx(sum(taus) + (M - 1) * max(taus) + ev.grad_sync_ms, rel=1e-12)
    assert ev.stages[0].grad_sync_ms > 0 and ev.stages[1].grad_sync_ms == 0


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_evaluate_validate_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst = _pool()
    ipath = tmp_path / "i.json"
    inst.to_json(ipath)
    good = {"stages": [{"layers": 8, "tp": 2, "replicas": [
        {"gpus": ["s0g0", "s0g1"], "samples": 2}, {"gpus": ["s0g2", "s0g3"], "samples": 2}]}]}
    gpath = tmp_path / "good.json"
    gpath.write_text(json.dumps(good))
    rc, out, _ = _run(capsys, "evaluate", str(ipath), str(gpath), "--json")
    d = json.loads(out)
    assert rc == 0 and d["space"] == "hybrid" and d["feasible"]
    assert [r["samples"] for r in d["stages"][0]["replicas"]] == [2, 2]
    assert _run(capsys, "validate", str(ipath), str(gpath))[0] == 0
    rc, out, _ = _run(capsys, "show", str(gpath), str(ipath))
    assert rc == 0 and "s0g0 s0g1" in out and "sync ms" in out
    bad = {"stages": [{"layers": 8, "tp": 3, "recompute": "partial",
                       "replicas": [{"gpus": ["s0g0", "s0g1", "s1g0"], "samples": 3}]}],
           "zero": 7}
    bpath = tmp_path / "bad.json"
    bpath.write_text(json.dumps(bad))
    rc, out, err = _run(capsys, "validate", str(ipath), str(bpath))
    assert rc == 1 and err == ""
    assert len(out.strip().splitlines()) == 5  # tp, recompute, tp_site, samples, zero
    rc, out, _ = _run(capsys, "evaluate", str(ipath), str(bpath), "--json")
    assert rc == 0 and json.loads(out)["t_iter_ms"] is None  # not priceable: zero 7
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({"stages": [{"layers": 8, "tp": [2], "replicas": []}]}))
    rc, _, err = _run(capsys, "validate", str(ipath), str(typo))
    assert rc == 2 and "plan.stages[0].tp" in err and "Traceback" not in err


def test_solve_hybrid_space_names_the_solvers_that_search_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ipath = tmp_path / "i.json"
    _pool().to_json(ipath)
    rc, _, err = _run(capsys, "solve", str(ipath), "--solver", "bruteforce", "--space",
                      "hybrid", "--seed", "0")
    assert rc == 2 and "no hybrid-space variant" in err
    from geoplan.solving.registry import solver_for_space

    assert solver_for_space("grid", "hybrid").name == "hybrid-grid"  # only a hybrid variant
    assert solver_for_space("memetic", "hybrid").name == "hybrid-memetic"
    assert solver_for_space("memetic", "pipeline").name == "memetic"
    assert solver_for_space("hybrid-milp", "pipeline").name == "hybrid-milp"
