"""Properties of the hybrid reference itself (tests/hybrid_reference.py).

The reference is held to tests/reference_model.py (GeoTrain's model, written
separately) on GeoTrain-form plans, and to facts that follow from hybrid-model.md
by a line of algebra: tp divides compute and memory, rotating a one-stage plan's
replicas or TP rings changes nothing, reversing TP rings behind their leads changes
nothing on symmetric links, zero moves memory only, the boundary pairs cover the
micro-batch. Its random generators keep their promises.
"""

from __future__ import annotations

import copy
import math
import random
from itertools import pairwise
from typing import Any

import hybrid_reference as href
import pytest
import reference_model as ref

REL = 1e-12




def close(a: float, b: float, rel: float = REL) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def valid_plans(seed: int, count: int, **knobs: Any) -> list[tuple[dict, dict]]:
    """Structurally valid random hybrid plans (links and memory may still break)."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        inst = href.random_hybrid_instance(rng, **knobs)
        for _ in range(10):
            plan = href.random_hybrid_plan(inst, rng, p_invalid=0.0, p_geotrain=0.0)
            assert href.STRUCTURAL_KINDS.isdisjoint(href.validate_hybrid_ref(inst, plan))
            out.append((inst, plan))
    return out


def prices(inst: dict, plan: dict) -> tuple[float, float, float]:
    r = href.evaluate_hybrid_ref(inst, plan)
    return r.t_iter_ms, r.e_iter_j, r.objective


# ------------------------------------------------------------------ GeoTrain's special case


@pytest.mark.parametrize("seed", range(6))
def test_geotrain_plans_keep_the_cost_model_price(seed: int) -> None:
    """Every GeoTrain-form plan costs what tests/reference_model.py says, to 1e-12."""
    rng = random.Random(seed)
    for _ in range(15):
        inst = ref.random_instance(rng)
        if rng.random() < 0.5:
            inst["training"]["stage_overhead_ms"] = rng.choice([0.5, 2.0])
        if rng.random() < 0.5:
            inst["training"]["zero"] = rng.choice([0, 1, 2])  # d = 1: sigma = 4 at every z
        for _ in range(20):
            plan = ref.random_plan(rng, inst, valid_shape=rng.random() < 0.8)
            want = ref.evaluate_ref(inst, plan)
            got = href.evaluate_hybrid_ref(inst, plan)
            assert close(got.t_iter_ms, want.t_iter_ms)
            assert close(got.e_iter_j, want.e_iter_j)
            assert close(got.objective, want.objective)
            assert got.grad_sync_ms == 0.0
            Q = len(plan["stages"])
            for q, (gs, ws) in enumerate(zip(got.stages, want.stages, strict=True)):
                assert close(gs.tau_ms, ws.tau_ms) and close(gs.compute_ms, ws.compute_ms)
                assert close(gs.comm_fwd_ms, ws.fwd_s * 1e3)
                assert close(gs.comm_bwd_ms, ws.bwd_s * 1e3)
                if ws.layers >= 1:
                    want_mem = ref.stage_memory_bytes(inst, ws.layers, Q, q == Q - 1,
                                                      ref.micro_batch(inst, plan))
                    assert close(gs.memory_gb, want_mem / 1e9)
            assert (not got.violations) == want.feasible, (got.violations, want.violations)


def test_hybrid_spelling_of_a_geotrain_plan_is_the_same_plan() -> None:
    rng = random.Random(7)
    for _ in range(40):
        inst = href.random_hybrid_instance(rng)
        plan = href.random_hybrid_plan(inst, rng, p_invalid=0.0, p_geotrain=1.0)
        u = href.micro_batch(inst, plan)
        spelled = dict(plan, stages=[
            {"layers": s["layers"], "tp": 1, "recompute": "none",
             "replicas": [{"gpus": [s["gpu"]], "samples": u}]} for s in plan["stages"]])
        assert prices(inst, plan) == prices(inst, spelled)
        assert href.validate_hybrid_ref(inst, plan) == href.validate_hybrid_ref(inst, spelled)


# ------------------------------------------------------------------ algebraic facts


def test_tp_divides_compute_and_memory() -> None:
    """A replica of t GPUs computes and holds 1/t of what its slowest GPU alone would.

    The variant keeps each stage's shares and replica count but gives every replica
    only its slowest GPU (tp 1); d, Q and z are unchanged, so sigma is too.
    """
    checked = 0
    for inst, plan in valid_plans(11, 150):
        variant = copy.deepcopy(plan)
        for st in variant["stages"]:
            for rep in st["replicas"]:
                rep["gpus"] = [min(rep["gpus"], key=lambda g: href._flops(href._gpu(inst, g)))]
            st["tp"] = 1
        a, b = href.evaluate_hybrid_ref(inst, plan), href.evaluate_hybrid_ref(inst, variant)
        for sa, sb in zip(a.stages, b.stages, strict=True):
            for ra, rb in zip(sa.replicas, sb.replicas, strict=True):
                assert close(ra.compute_s * sa.tp, rb.compute_s)
                assert close(ra.mem_bytes * sa.tp, rb.mem_bytes)
                assert rb.tp_comm_s == 0.0
                checked += sa.tp > 1
    assert checked > 20


def test_rotations_of_a_one_stage_plan_change_nothing() -> None:
    """Q = 1 has no boundary; the TP rings and the DP rings are the same link sets after
    rotating the replica order and every replica's GPU list by the same shift."""
    rng = random.Random(5)
    n = 0
    for inst, plan in valid_plans(12, 200, layers=None):
        if len(plan["stages"]) != 1:
            continue
        st = plan["stages"][0]
        rot = copy.deepcopy(plan)
        k, j = rng.randrange(len(st["replicas"])), rng.randrange(st["tp"])
        reps = rot["stages"][0]["replicas"]
        reps[:] = reps[k:] + reps[:k]
        for rep in reps:
            rep["gpus"] = rep["gpus"][j:] + rep["gpus"][:j]
        for x, y in zip(prices(inst, plan), prices(inst, rot), strict=True):
            assert close(x, y)
        n += 1
    assert n > 20


def _symmetric(inst: dict) -> dict:
    """The instance with each link j->i replaced by a copy of i->j (i < j in list order)."""
    out = copy.deepcopy(inst)
    first = {}
    for e in inst["links"]:
        a, b = sorted((e["src"], e["dst"]))
        first.setdefault((a, b), e)
    out["links"] = [dict(e, src=s, dst=d) for e in first.values()
                    for s, d in ((e["src"], e["dst"]), (e["dst"], e["src"]))]
    return out


def test_reversing_tp_rings_behind_their_leads_changes_nothing_on_symmetric_links() -> None:
    """[g1, g2, .., gk] -> [g1, gk, .., g2]: same lead, each ring link reversed; the
    position-j DP rings become the position-(k+2-j) rings."""
    n = 0
    for inst, plan in valid_plans(13, 200):
        sym = _symmetric(inst)
        rev = copy.deepcopy(plan)
        for st in rev["stages"]:
            for rep in st["replicas"]:
                rep["gpus"] = rep["gpus"][:1] + rep["gpus"][1:][::-1]
        n += any(st["tp"] > 2 for st in plan["stages"])
        for x, y in zip(prices(sym, plan), prices(sym, rev), strict=True):
            assert close(x, y)
    assert n > 5


def test_zero_moves_memory_only() -> None:
    for inst, plan in valid_plans(14, 150):
        runs = [href.evaluate_hybrid_ref(inst, dict(plan, zero=z)) for z in (0, 1, 2)]
        assert len({(r.t_iter_ms, r.e_iter_j) for r in runs}) == 1
        for q, st in enumerate(plan["stages"]):
            for r in range(len(st["replicas"])):
                m0, m1, m2 = (x.stages[q].replicas[r].mem_bytes for x in runs)
                if len(st["replicas"]) == 1:
                    assert close(m0, m1) and close(m0, m2)
                else:
                    assert m0 > m1 > m2


def test_boundary_pairs_cover_the_micro_batch() -> None:
    """Shares summing to u on both sides: the k_ab sum to u, and two interval partitions
    of 1..u overlap in at most d_q + d_{q+1} - 1 pairs."""
    for _inst, plan in valid_plans(15, 150):
        u = sum(r["samples"] for r in plan["stages"][0]["replicas"])
        for left, right in pairwise(plan["stages"]):
            pairs = href.lead_pairs(left["replicas"], right["replicas"])
            assert sum(k for _, _, k in pairs) == u
            assert len(pairs) <= len(left["replicas"]) + len(right["replicas"]) - 1


def test_ring_allreduce_formula() -> None:
    inst = {"links": [{"src": "x", "dst": "y", "bandwidth_gbps": 8.0, "latency_ms": 3.0},
                      {"src": "y", "dst": "z", "bandwidth_gbps": 4.0, "util": 0.5,
                       "latency_ms": 1.0},
                      {"src": "z", "dst": "x", "bandwidth_gbps": 16.0, "latency_ms": 0.0}]}
    assert href.ring_allreduce_s(inst, ["x"], 1e9) == 0.0
    # k = 3, l_max 3 ms, B~_min 2 Gbps: 2 * 2 * (0.003 + 8 * 3e6 / (3 * 2e9)) = 0.028 s
    assert close(href.ring_allreduce_s(inst, ["x", "y", "z"], 3e6), 0.028)
    assert href.ring_allreduce_s(inst, ["x", "z", "y"], 3e6) == math.inf  # x->z missing


# ------------------------------------------------------------------ the generators


def test_generators_are_deterministic() -> None:
    def run(seed: int) -> list:
        rng = random.Random(seed)
        inst = href.random_hybrid_instance(rng)
        return [inst] + [href.random_hybrid_plan(inst, rng) for _ in range(20)]

    assert run(3) == run(3)


def test_generated_plans_are_mostly_valid_and_varied() -> None:
    rng = random.Random(21)
    seen: dict[str, int] = {}
    for _ in range(60):
        inst = href.random_hybrid_instance(rng)
        for _ in range(10):
            plan = href.random_hybrid_plan(inst, rng, p_invalid=0.0)
            gpus = [g for s in href.normal_stages(inst, plan) for r in s["replicas"]
                    for g in r["gpus"]]
            assert len(gpus) == len(set(gpus))
            v = href.validate_hybrid_ref(inst, plan)
            assert href.STRUCTURAL_KINDS.isdisjoint(v), v
            for s in href.normal_stages(inst, plan):
                seen[f"tp{s['tp']}"] = seen.get(f"tp{s['tp']}", 0) + 1
                seen[s["recompute"]] = seen.get(s["recompute"], 0) + 1
                if len(s["replicas"]) > 1:
                    seen["dp"] = seen.get("dp", 0) + 1
            for kind in set(v):
                seen[kind] = seen.get(kind, 0) + 1
    for key in ("tp1", "tp2", "tp4", "none", "full", "dp", "memory"):
        assert seen.get(key, 0) > 5, (key, seen)


def test_injected_defects_are_structural_violations() -> None:
    rng = random.Random(22)
    for _ in range(40):
        inst = href.random_hybrid_instance(rng)
        for _ in range(10):
            plan = href.random_hybrid_plan(inst, rng, p_invalid=1.0, p_geotrain=0.0)
            v = href.validate_hybrid_ref(inst, plan)
            assert not href.STRUCTURAL_KINDS.isdisjoint(v), (plan, v)


def test_missing_links_are_found_in_every_role() -> None:
    rng = random.Random(23)
    kinds: set[str] = set()
    for _ in range(60):
        inst = href.random_hybrid_instance(rng, link_prob=0.85)
        for _ in range(10):
            plan = href.random_hybrid_plan(inst, rng, p_invalid=0.0)
            v = href.validate_hybrid_ref(inst, plan)
            r = href.evaluate_hybrid_ref(inst, plan)
            broken = {k for k in v if k.startswith("missing_link")}
            kinds |= broken
            assert math.isfinite(r.t_iter_ms) == (not broken)
    assert kinds == {"missing_link_tp", "missing_link_dp", "missing_link_boundary"}
