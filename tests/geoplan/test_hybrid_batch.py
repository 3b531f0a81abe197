"""The hybrid batch evaluator against the scalar hybrid evaluator, the validator and GeoTrain.

On seeded random hybrid plans (valid ones and ones with one defect each: a repeated
GPU, tp 3, a replica of the wrong size, samples not summing to u, a missing link,
a memory overflow, ...) the batch status, T, E and objective equal
``HybridEvaluator.price`` bit for bit (both run the formulas of hybrid_kernel, one
compiled, one in Python), the status is FEASIBLE exactly when ``validate_hybrid``
finds nothing, and GeoTrain-form plans keep the GeoTrain evaluator's price.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from geoplan.cost.evaluate import evaluate
from geoplan.cost.hybrid_batch import (
    FEASIBLE,
    INVALID,
    HybridBatchEvaluator,
    HybridPopulation,
    encode_population,
)
from geoplan.cost.hybrid_evaluate import HybridEvaluator
from geoplan.errors import InputError
from geoplan.model.generators import cloud
from geoplan.model.hybrid import HybridPlan, HybridStage, Replica
from geoplan.model.hybrid_validation import validate_hybrid
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan, Stage

DEFECTS = ("repeated_gpu", "tp3", "replica_size", "samples_sum", "samples_zero", "layer_sum",
           "tp_site", "tp_too_large", "zero5", "recompute", "micro_batch")


def hybrid_dict(seed: int, n: int = 24, layers: int = 10, drop_links: float = 0.0,
                small_memory: bool = False, max_tp: int = 8, lam: float = 0.5) -> dict:
    """A cloud instance (8-GPU nodes, several sites) with the hybrid training fields."""
    d = cloud(n, layers, seed, hidden=1024, seq_len=1024, vocab=32000, batch_size=32,
              micro_batch_size=4, lam=lam)
    d["training"].update(zero_choices=[0, 1, 2], micro_batch_choices=[1, 2, 4, 8],
                         max_tp=max_tp)
    rng = random.Random(seed)
    if drop_links:
        d["links"] = [link for link in d["links"] if rng.random() >= drop_links]
    if small_memory:
        # A few GB per GPU: plans holding many layers or samples on one GPU overflow.
        for g in d["gpus"]:
            g["memory_gb"] = rng.choice([1.0, 2.0, 4.0, 8.0])
    return d


def _composition(rng: random.Random, total: int, parts: int) -> list[int]:
    cuts = sorted(rng.sample(range(1, total), parts - 1))
    return [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]


def random_hybrid_plan(rng: random.Random, inst: Instance, defect: str | None = None
                       ) -> HybridPlan:
    """A random plan in the model's shape (distinct GPUs, TP groups inside one site, shares
    summing to u); ``defect`` then breaks one rule of hybrid-model.md."""
    t = inst.training
    by_site: dict[str, list[str]] = {}
    for g in inst.gpus:
        by_site.setdefault(g.site or g.id, []).append(g.id)
    for ids in by_site.values():
        rng.shuffle(ids)
    u = rng.choice(t.micro_batch_choices or (t.micro_batch_size,))
    L = inst.layers
    q = rng.randint(1, min(L, 5))
    budget = inst.n
    stages = []
    for k, n_layers in enumerate(_composition(rng, L, q)):
        room = budget - (q - k - 1)  # leave a GPU for each later stage
        tps = [x for x in (1, 2, 4, 8) if x <= t.max_tp and x <= room
               and any(len(v) >= x for v in by_site.values())]
        tp = rng.choice(tps)
        d = rng.randint(1, max(1, min(u, 3, room // tp)))
        reps = []
        for _ in range(d):
            sites = [s for s, v in by_site.items() if len(v) >= tp]
            if not sites:
                break
            pool = by_site[rng.choice(sites)]
            reps.append(tuple(pool.pop() for _ in range(tp)))
        budget -= tp * len(reps)
        shares = _composition(rng, u, len(reps))
        rc = rng.choice(t.recompute_choices or ("none", "full"))
        stages.append(HybridStage(n_layers, tp, tuple(Replica(g, s) for g, s in
                                                      zip(reps, shares, strict=True)), rc))
    plan = HybridPlan(tuple(stages), u, rng.choice(t.zero_choices or (t.zero,)))
    return _break(rng, inst, plan, defect) if defect else plan


def _break(rng: random.Random, inst: Instance, plan: HybridPlan, defect: str) -> HybridPlan:
    stages = list(plan.stages)
    k = rng.randrange(len(stages))
    s = stages[k]
    reps = list(s.replicas)
    r = rng.randrange(len(reps))
    used = set(plan.gpus)
    free = [g.id for g in inst.gpus if g.id not in used]
    if defect == "repeated_gpu":
        others = [x for x in plan.gpus if x not in reps[r].gpus]
        if others:
            g = list(reps[r].gpus)
            g[rng.randrange(len(g))] = rng.choice(others)
            reps[r] = Replica(tuple(g), reps[r].samples)
            stages[k] = replace(s, replicas=tuple(reps))
        else:  # one replica holds every GPU: a second stage reuses its lead
            stages[k] = replace(s, layers=max(1, s.layers - 1))
            stages.append(HybridStage(1, 1, (Replica(reps[r].gpus[:1], plan.micro_batch_size),)))
    elif defect == "tp3":
        # One replica of three GPUs (its own plus free ones) taking the whole micro-batch.
        g = (*reps[0].gpus, *free)[:3]
        stages[k] = replace(s, tp=3, replicas=(Replica(g, plan.micro_batch_size),))
    elif defect == "replica_size":
        g = reps[r].gpus
        reps[r] = Replica(g[:-1] if len(g) > 1 else (*g, *free[:1]), reps[r].samples)
        stages[k] = replace(s, replicas=tuple(reps))
    elif defect == "samples_sum":
        reps[r] = Replica(reps[r].gpus, (reps[r].samples or 1) + rng.choice([1, 2]))
        stages[k] = replace(s, replicas=tuple(reps))
    elif defect == "samples_zero":
        reps[r] = Replica(reps[r].gpus, 0)
        stages[k] = replace(s, replicas=tuple(reps))
    elif defect == "layer_sum":
        stages[k] = replace(s, layers=s.layers + 1)
    elif defect == "tp_site":
        lead = reps[0].gpus[0]
        site = inst.gpus[inst.gpu_index[lead]].site
        other = [g.id for g in inst.gpus if g.id not in used and g.site != site]
        if other:
            stages[k] = replace(s, tp=2, replicas=(Replica((lead, other[0]),
                                                           plan.micro_batch_size),))
    elif defect == "tp_too_large":
        stages[k] = replace(s, tp=2 * inst.training.max_tp)
    elif defect == "zero5":
        return replace(plan, zero=5)
    elif defect == "recompute":
        stages[k] = replace(s, recompute="partial")
    elif defect == "micro_batch":
        return replace(plan, micro_batch_size=3)
    return replace(plan, stages=tuple(stages))


def same(a: float, b: float) -> bool:
    """Bit-for-bit equality, nan equal to nan."""
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.fixture(scope="module")
def instances() -> list[Instance]:
    return [
        Instance.from_dict(hybrid_dict(1)),
        Instance.from_dict(hybrid_dict(2, drop_links=0.15)),
        Instance.from_dict(hybrid_dict(3, small_memory=True, lam=1.0)),
        Instance.from_dict(hybrid_dict(4, n=13, layers=6, max_tp=4, drop_links=0.05,
                                       lam=0.0)),
    ]


def _plans(inst: Instance, seed: int, count: int) -> list[HybridPlan]:
    rng = random.Random(seed)
    return [random_hybrid_plan(rng, inst, None if rng.random() < 0.5 else rng.choice(DEFECTS))
            for _ in range(count)]


def test_batch_equals_scalar_bit_for_bit_and_validator(instances: list[Instance]) -> None:
    seen: dict[int, int] = {}
    for i, inst in enumerate(instances):
        plans = _plans(inst, 100 + i, 300)
        scalar = HybridEvaluator(inst)
        res = HybridBatchEvaluator(inst).evaluate(encode_population(inst, plans))
        for p, plan in enumerate(plans):
            st = int(res.status[p])
            seen[st] = seen.get(st, 0) + 1
            kinds = {v.kind for v in validate_hybrid(inst, plan)}
            assert (st == FEASIBLE) == (not kinds), (plan, st, kinds)
            if len(set(plan.gpus)) < len(plan.gpus):
                # price_hybrid assumes distinct GPUs; the batch evaluator refuses the row.
                assert "repeated_gpu" in kinds
                assert st == INVALID and math.isnan(res.t_iter_ms[p])
                assert math.isnan(res.e_iter_j[p]) and res.objective[p] == math.inf
                continue
            want = scalar.price(plan)
            got = (st, float(res.t_iter_ms[p]), float(res.e_iter_j[p]),
                   float(res.objective[p]))
            assert got[0] == want[0] and all(same(a, b) for a, b in zip(got[1:], want[1:],
                                                                         strict=True)), \
                (plan, got, want)
    # Every status occurs, so each branch of the kernel was compared.
    assert all(seen.get(code, 0) >= 10 for code in range(4)), seen


def test_parallel_rows_equal_serial_rows(instances: list[Instance]) -> None:
    inst = instances[1]
    pop = encode_population(inst, _plans(inst, 7, 400))
    serial = HybridBatchEvaluator(inst).evaluate(pop)
    for how in ("threads", "prange"):
        ev = HybridBatchEvaluator(inst, threads=2, parallel_threshold=1, parallel=how)
        for a, b in zip(serial, ev.evaluate(pop), strict=True):
            assert np.array_equal(a, b, equal_nan=True), how
    with pytest.raises(ValueError):
        HybridBatchEvaluator(inst, parallel="processes")


def test_geotrain_form_plans_keep_the_geotrain_price(instances: list[Instance]) -> None:
    for i, inst in enumerate(instances):
        rng = random.Random(500 + i)
        ids = list(inst.gpu_ids)
        plans = []
        for _ in range(150):
            q = rng.randint(1, min(inst.layers, inst.n))
            plans.append(Plan(tuple(Stage(g, n) for g, n in zip(
                rng.sample(ids, q), _composition(rng, inst.layers, q), strict=True))))
        res = HybridBatchEvaluator(inst).evaluate(
            encode_population(inst, [HybridPlan.from_pipeline(p) for p in plans]))
        feasible = 0
        for p, plan in enumerate(plans):
            ev = evaluate(inst, plan)
            assert bool(res.feasible[p]) == ev.feasible, (plan, res.status[p], ev.violations)
            feasible += ev.feasible
            for got, want in ((res.t_iter_ms[p], ev.t_iter_ms), (res.e_iter_j[p], ev.e_iter_j),
                              *([(res.objective[p], ev.objective)] if ev.feasible else [])):
                if math.isfinite(want):
                    assert math.isclose(got, want, rel_tol=1e-12, abs_tol=0.0), (plan, got, want)
                else:
                    assert not math.isfinite(got), (plan, got, want)
        assert feasible >= 10


def test_from_arrays_matches_encode_and_round_trips(instances: list[Instance]) -> None:
    inst = instances[0]
    plans = _plans(inst, 11, 60)
    pop = encode_population(inst, plans)
    again = HybridPopulation.from_arrays(pop.layers.tolist(), pop.tp, pop.rec, pop.rep0,
                                         pop.samples, pop.g0, pop.gpus, pop.q, pop.u, pop.zero)
    ev = HybridBatchEvaluator(inst)
    for a, b in zip(ev.evaluate(pop), ev.evaluate(again), strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    for p, plan in enumerate(plans):
        if all(s.recompute in ("none", "full") for s in plan.stages):
            assert pop.to_plan(inst, p) == plan.resolved(inst)
    one = HybridPopulation.from_arrays(pop.layers[:3], pop.tp[:3], pop.rec[:3], pop.rep0[:3],
                                       pop.samples[:3], pop.g0[:3], pop.gpus[:3], pop.q[:3],
                                       4, 0)
    assert one.u.tolist() == [4, 4, 4] and one.zero.tolist() == [0, 0, 0]
    with pytest.raises(ValueError):
        HybridPopulation.from_arrays(pop.layers, pop.tp[:, :1], pop.rec, pop.rep0, pop.samples,
                                     pop.g0, pop.gpus, pop.q, pop.u, pop.zero)


def test_rows_the_kernel_cannot_follow_are_invalid_not_read(instances: list[Instance]) -> None:
    inst = instances[0]
    plan = HybridPlan((HybridStage(inst.layers, 2, (Replica(inst.gpu_ids[:2], 4),)),), 4, 0)
    base = encode_population(inst, [plan])
    ev = HybridBatchEvaluator(inst)
    assert ev.evaluate(base).status[0] == FEASIBLE

    def row(**change: Any) -> int:
        fields = {k: getattr(base, k).copy() for k in
                  ("layers", "tp", "rec", "rep0", "samples", "g0", "gpus", "q", "u", "zero")}
        for k, (idx, v) in change.items():
            fields[k][idx] = v
        res = ev.evaluate(HybridPopulation.from_arrays(**fields))
        assert math.isnan(res.t_iter_ms[0]) and res.objective[0] == math.inf
        return int(res.status[0])

    assert row(q=(0, 0)) == INVALID
    assert row(q=(0, 2)) == INVALID  # more stages than columns
    assert row(rep0=((0, 1), 5)) == INVALID  # replicas beyond the row
    assert row(g0=((0, 1), 9)) == INVALID  # GPUs beyond the row
    assert row(g0=((0, 0), 1)) == INVALID
    assert row(gpus=((0, 1), inst.n)) == INVALID  # out of range
    assert row(gpus=((0, 1), -1)) == INVALID
    assert row(gpus=((0, 1), int(base.gpus[0, 0]))) == INVALID  # repeated


def test_input_errors_and_empty_population(instances: list[Instance]) -> None:
    inst = instances[0]
    bad = HybridPlan((HybridStage(inst.layers, 1, (Replica(("nope",)),)),))
    with pytest.raises(InputError):
        encode_population(inst, [bad])
    res = HybridBatchEvaluator(inst).evaluate(encode_population(inst, []))
    assert all(len(a) == 0 for a in res)
    with pytest.raises(ValueError):
        HybridBatchEvaluator(inst, threads=0)
