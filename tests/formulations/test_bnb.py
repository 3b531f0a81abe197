"""Branch-and-bound: same optimum as brute force, valid bounds at any time, symmetry and
dominance reductions, warm starts, statuses, gap target and the command line."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference_model as ref

from formulations import bnb
from geoplan.cli import main
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.parametric import PROOF_TOLERANCE
from geoplan.cost.split import Splitter
from geoplan.errors import InputError
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.space import plan_space_size
from geoplan.solving.core import Callbacks, SolveOptions, solve


def _check_same(inst: Instance, threads: int = 1, **params: Any) -> tuple[float, float]:
    bf = solve(inst, "bruteforce", seed=0, time_limit=600)
    bb = solve(inst, "bnb", seed=0, time_limit=600, threads=threads, params=params)
    assert bb.status == bf.status, (inst.name, bf.status, bb.status)
    if bf.status != "optimal":
        return np.inf, np.inf
    assert bb.objective == pytest.approx(bf.objective, rel=1e-6)
    assert bb.lower_bound is not None and bb.lower_bound <= bf.objective * (1 + 1e-9)
    for row in bb.trace:
        if row.bound is not None:
            assert row.bound <= bf.objective * (1 + 1e-9)
    return bf.objective, bb.objective


@pytest.mark.parametrize("family", ["geo", "metro", "paper"])
@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_matches_bruteforce_on_families(family: str, lam: float) -> None:
    for n, layers, seed in [(4, 10, 1), (6, 8, 2)]:
        inst = Instance.from_dict(by_family(family, n, layers, seed, lam=lam))
        assert plan_space_size(n, layers) <= 1e6
        _check_same(inst)


def _random_instances(count: int, seed: int) -> list[Instance]:
    """Tight memory, missing/asymmetric links, micro-batches > 1, any lambda; some infeasible."""
    rng = random.Random(seed)
    out: list[Instance] = []
    while len(out) < count:
        d = ref.random_instance(rng, n_gpus=rng.randint(1, 5), layers=rng.randint(1, 10),
                                link_prob=rng.choice([0.3, 0.6, 0.9]))
        if rng.random() < 0.5:  # GPU 0 no longer holds the model alone
            d["gpus"][0]["memory_gb"] *= rng.uniform(0.1, 0.9)
        try:
            out.append(resolve_normalisers(Instance.from_dict(d)))
        except InputError:
            continue
    return out


def test_matches_bruteforce_on_random_instances() -> None:
    statuses = []
    for inst in _random_instances(150, seed=2):
        bf_obj, _ = _check_same(inst)
        _check_same(inst, symmetry=False, dominance=False)
        statuses.append(np.isfinite(bf_obj))
    assert any(statuses) and not all(statuses)  # optimal and infeasible cases both seen


def test_threads_share_the_tree() -> None:
    # parallel_after=0: the worker threads take over at once, even on small trees.
    engaged = 0
    for inst in _random_instances(25, seed=5):
        _check_same(inst, threads=2, parallel_after=0.0)
    for family, lam in [("metro", 1.0), ("paper", 0.5)]:
        inst = Instance.from_dict(by_family(family, 6, 10, 7, lam=lam))
        _check_same(inst, threads=2, parallel_after=0.0)
        res = solve(inst, "bnb", seed=0, time_limit=600, threads=2, params={"parallel_after": 0.0})
        engaged += res.info["threads_used"] == 2
    assert engaged == 2


def test_threads_stopped_early_report_a_valid_bound() -> None:
    inst = Instance.from_dict(by_family("metro", 12, 32, 0, lam=0.5))
    full = solve(inst, "bnb", seed=0, time_limit=600, threads=1)
    assert full.status == "optimal"
    rec = _Recorder()
    part = solve(inst, "bnb", seed=0, time_limit=600, threads=2, callbacks=rec,
                 params={"parallel_after": 0.0, "node_limit": 4000})
    assert part.info["threads_used"] == 2 and part.info["completed"] is False
    assert part.status == "feasible"
    assert part.lower_bound is not None and part.lower_bound <= full.objective * (1 + 1e-9)
    assert part.objective >= full.objective * (1 - 1e-9)
    for _, _, bound in rec.improvements:
        assert bound is None or bound <= full.objective * (1 + 1e-9)


def test_single_thread_is_deterministic() -> None:
    inst = Instance.from_dict(by_family("paper", 8, 16, 3, lam=0.5))
    a = solve(inst, "bnb", seed=0, time_limit=600, threads=1)
    b = solve(inst, "bnb", seed=1, time_limit=600, threads=1)
    assert a.plan == b.plan and a.info["nodes"] == b.info["nodes"]
    assert a.status == "optimal" and a.info["threads_used"] == 1


def _symmetric_instance(lam: float = 1.0) -> Instance:
    """Two sites of identical GPUs: interchangeable within a site."""
    gpus, links = [], []
    for site, (tf, mem) in {"A": (312, 80), "B": (156, 40)}.items():
        for k in range(3):
            gpus.append({"id": f"{site}{k}", "site": site, "peak_tflops": tf, "memory_gb": mem,
                         "idle_w": 50, "active_w": 300})
    for g in gpus:
        for h in gpus:
            if g is not h:
                same = g["site"] == h["site"]
                links.append({"src": g["id"], "dst": h["id"],
                              "bandwidth_gbps": 100 if same else 10,
                              "latency_ms": 0.1 if same else 5 if g["site"] == "A" else 7})
    return Instance.from_dict({
        "gpus": gpus, "links": links,
        "model": {"layers": 10, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 32, "micro_batch_size": 1},
        "objective": {"lambda": lam},
    })


def test_symmetry_classes_and_fewer_nodes() -> None:
    inst = _symmetric_instance()
    sp = Splitter(inst)
    cls = bnb.symmetry_classes(sp)
    assert len(set(cls[:3].tolist())) == 1 and len(set(cls[3:].tolist())) == 1
    assert cls[0] != cls[3]
    on = solve(inst, "bnb", seed=0, time_limit=600, params={"dominance": False})
    off = solve(inst, "bnb", seed=0, time_limit=600, params={"dominance": False, "symmetry": False})
    assert on.info["symmetry_classes"] == 2 and off.info["symmetry_classes"] == 6
    assert on.objective == pytest.approx(off.objective, rel=1e-12)
    assert on.status == off.status == "optimal"
    assert on.info["nodes"] * 3 < off.info["nodes"]
    _check_same(inst)


def test_symmetry_requires_identical_links_both_ways() -> None:
    d = _symmetric_instance().to_dict()
    # One link into A1 is slower than into A0 and A2: A1 is no longer interchangeable.
    for e in d["links"]:
        if e["src"] == "B0" and e["dst"] == "A1":
            e["latency_ms"] = 9.0
    inst = Instance.from_dict(d)
    cls = bnb.symmetry_classes(Splitter(inst))
    assert cls[0] == cls[2] and cls[1] != cls[0]
    # The A0-A1 pair links (0.1 ms both ways) are irrelevant to the A0/A2 symmetry.
    _check_same(inst)


def test_dominance_relation() -> None:
    d = _symmetric_instance().to_dict()
    d["gpus"][1]["compute_util"] = 0.5  # A1 slower than A0 and A2, otherwise identical
    d["gpus"][1]["idle_w"] = 10.0  # ... but draws less idle power
    inst = Instance.from_dict(d)
    succ = bnb.dominance(Splitter(inst))
    assert succ[0, 1] and succ[2, 1] and not succ[1, 0]
    assert succ[0, 2] != succ[2, 0]  # identical GPUs: exactly one direction (index order)
    energy = bnb.dominance(Splitter(resolve_normalisers(inst.with_objective(lam=0.0))))
    assert not energy[0, 1]  # idle power counts now, and A1 draws less
    _check_same(inst)
    _check_same(resolve_normalisers(inst.with_objective(lam=0.0)))


class _Recorder(Callbacks):
    def __init__(self) -> None:
        self.improvements: list[tuple[float, float | None, float | None]] = []

    def on_improvement(self, seconds: float, incumbent: float | None,
                       bound: float | None) -> None:
        self.improvements.append((seconds, incumbent, bound))


def test_node_limit_gives_valid_bound_and_trace() -> None:
    inst = Instance.from_dict(by_family("metro", 6, 10, 4, lam=1.0))
    opt = solve(inst, "bruteforce", seed=0, time_limit=600).objective
    rec = _Recorder()
    res = solve(inst, "bnb", seed=0, time_limit=600, params={"node_limit": 5}, callbacks=rec)
    assert res.status == "feasible"
    assert res.lower_bound is not None and res.lower_bound <= opt * (1 + 1e-9)
    assert res.gap is not None and res.gap > 0
    assert "limit" in (res.message or "")
    assert rec.improvements and res.trace
    incumbents = [r.incumbent for r in res.trace if r.incumbent is not None]
    assert incumbents == sorted(incumbents, reverse=True)


def test_no_incumbent_at_the_limit_is_no_solution() -> None:
    inst = Instance.from_dict(by_family("paper", 5, 8, 1))
    res = solve(inst, "bnb", seed=0, time_limit=600,
                params={"node_limit": 0, "baseline_incumbent": False})
    assert res.status == "no_solution" and res.plan is None
    assert "without a feasible plan" in (res.message or "")


def test_infeasible_instance() -> None:
    gpu = {"peak_tflops": 100, "memory_gb": 12, "idle_w": 30, "active_w": 200}
    inst = Instance.from_dict({
        "gpus": [{"id": "x", **gpu}, {"id": "y", **gpu}], "links": [],
        "model": {"layers": 16, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 8, "micro_batch_size": 1},
    })
    res = solve(inst, "bnb", seed=0, time_limit=600)
    assert res.status == "infeasible"
    assert "no single GPU holds all 16 layers" in (res.message or "")


def test_warm_start(three_gpu: Instance) -> None:
    good = Plan.from_pairs([("a", 6), ("b", 6)])
    res = solve(three_gpu, "bnb", seed=0, time_limit=600, warm_start=good)
    assert res.info["warm_start_accepted"] is True
    assert res.info["warm_start"]["accepted"] is True
    assert res.status == "optimal"
    bad = Plan.from_pairs([("a", 6), ("c", 6)])  # a-c not linked
    opts = SolveOptions(seed=0, warm_start=(bad,), params={"node_limit": 0,
                                                            "baseline_incumbent": False})
    out = bnb.solve(resolve_normalisers(three_gpu), opts)
    assert out.info["warm_start_accepted"] is False and out.status == "no_solution"
    # An accepted warm start is the incumbent even when the search does not run.
    opts = SolveOptions(seed=0, warm_start=(good,), params={"node_limit": 0,
                                                             "baseline_incumbent": False})
    out = bnb.solve(resolve_normalisers(three_gpu), opts)
    assert out.status == "feasible" and out.plan is not None


def test_gap_target() -> None:
    inst = Instance.from_dict(by_family("metro", 6, 10, 4, lam=1.0))
    opt = solve(inst, "bruteforce", seed=0, time_limit=600).objective
    res = solve(inst, "bnb", seed=0, time_limit=600, gap=0.2, params={"baseline_incumbent": False})
    assert res.gap is not None and res.gap <= 0.2 + 1e-12
    assert res.lower_bound <= opt * (1 + 1e-9)
    assert res.objective <= opt / (1 - 0.2) * (1 + 1e-9)


def test_cli_json(tmp_path: Path, three_gpu: Instance, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "inst.json"
    three_gpu.to_json(path)
    assert main(["solve", str(path), "--solver", "bnb", "--time-limit", "600", "--json",
                 "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "optimal"
    # The tree, or the parametric bound to PROOF_TOLERANCE, closes the gap.
    assert out["lower_bound"] == pytest.approx(out["objective"])
    assert out["gap"] <= PROOF_TOLERANCE
    assert out["trace"] and out["info"]["completed"] is True


@pytest.mark.slow
def test_matches_bruteforce_n8_l12() -> None:
    for family, lam in [("paper", 1.0), ("metro", 0.5)]:
        _check_same(Instance.from_dict(by_family(family, 8, 12, 1, lam=lam)))


@pytest.mark.slow
@pytest.mark.parametrize("family", ["geo", "metro", "paper"])
def test_proves_n12_l32(family: str) -> None:
    res = solve(Instance.from_dict(by_family(family, 12, 32, 0)), "bnb", seed=0, time_limit=120)
    assert res.status == "optimal" and res.gap == 0.0
