"""Exact split for a fixed GPU order: against enumeration of every composition; prefix bounds
against enumeration of every completion."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import reference_model as ref
from oracle import reference_optimum

from geoplan.cost import evaluate
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.split import ObjectiveWeights, Splitter, optimal_split
from geoplan.errors import InputError
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan


def _best_by_enumeration(inst: Instance, seq: list[int]) -> float:
    """min over every composition of L into len(seq) stages on the GPUs ``seq``, by the
    reference enumerator (inf when none is feasible, or when len(seq) > L)."""
    return reference_optimum(inst, [seq])[0]


def _random_instances(count: int, seed: int, max_n: int = 5, max_l: int = 10) -> list[Instance]:
    """Diverse small instances: tight memory, missing and asymmetric links, u > 1, any lambda."""
    rng = random.Random(seed)
    out: list[Instance] = []
    while len(out) < count:
        d = ref.random_instance(rng, n_gpus=rng.randint(1, max_n), layers=rng.randint(1, max_l))
        try:
            out.append(resolve_normalisers(Instance.from_dict(d)))
        except InputError:
            continue
    return out


def _sequences(rng: random.Random, n: int, k: int) -> list[list[int]]:
    return [rng.sample(range(n), rng.randint(1, n)) for _ in range(k)]


def test_split_matches_enumeration_on_random_instances() -> None:
    rng = random.Random(7)
    checked = feasible = 0
    for inst in _random_instances(40, seed=11):
        sp = Splitter(inst)
        for seq in _sequences(rng, inst.n, 4):
            want = _best_by_enumeration(inst, seq)
            got = sp.split(seq)
            checked += 1
            if not np.isfinite(want):
                assert got is None, (inst.name, seq, got)
                continue
            feasible += 1
            assert got is not None, (seq, want)
            assert got.objective == pytest.approx(want, rel=1e-9)
            ev = evaluate(inst, got.to_plan(inst))
            assert ev.feasible
            assert ev.objective == pytest.approx(got.objective, rel=1e-12)
            assert ev.t_iter_ms == pytest.approx(got.t_iter_ms, rel=1e-12)
            assert ev.e_iter_j == pytest.approx(got.e_iter_j, rel=1e-12)
    assert feasible >= 40 and checked > feasible  # both kinds of cases were exercised


@pytest.mark.parametrize("family", ["geo", "metro", "paper"])
@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_split_matches_enumeration_on_families(family: str, lam: float) -> None:
    inst = resolve_normalisers(Instance.from_dict(by_family(family, 6, 12, 3, lam=lam)))
    sp = Splitter(inst)
    rng = random.Random(3)
    for seq in _sequences(rng, inst.n, 6):
        want = _best_by_enumeration(inst, seq)
        got = sp.split(seq)
        assert got is not None and got.objective == pytest.approx(want, rel=1e-9)


def _two_gpu(mem_fast_gb: float, batch: int = 32, lam: float = 1.0) -> Instance:
    return Instance.from_dict({
        "gpus": [
            {"id": "fast", "peak_tflops": 312, "memory_gb": mem_fast_gb, "idle_w": 50,
             "active_w": 400},
            {"id": "slow", "peak_tflops": 60, "memory_gb": 80, "idle_w": 30, "active_w": 150},
        ],
        "links": [
            {"src": "fast", "dst": "slow", "bandwidth_gbps": 100, "latency_ms": 0.1},
            {"src": "slow", "dst": "fast", "bandwidth_gbps": 100, "latency_ms": 0.1},
        ],
        "model": {"layers": 16, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": batch, "micro_batch_size": 1},
        "objective": {"lambda": lam, "t_ref_ms": 1000.0, "e_ref_j": 500.0},
    })


def test_split_respects_binding_memory() -> None:
    roomy = _two_gpu(80.0)
    tight = _two_gpu(8.0)
    free = Splitter(roomy).split([0, 1])
    bound = Splitter(tight).split([0, 1])
    assert free is not None and bound is not None
    cap = int(tight.coefficients().layer_caps(2, last=False)[0])
    # The fast GPU wants more layers than its memory allows once memory binds.
    assert free.counts[0] > cap
    assert bound.counts[0] == cap
    assert bound.objective == pytest.approx(_best_by_enumeration(tight, [0, 1]), rel=1e-12)


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_split_with_one_micro_batch(lam: float) -> None:
    # M = 1: no bottleneck term, the objective is linear in the counts.
    inst = _two_gpu(80.0, batch=1, lam=lam)
    got = Splitter(inst).split([1, 0])
    assert got is not None
    assert got.objective == pytest.approx(_best_by_enumeration(inst, [1, 0]), rel=1e-12)


def test_split_infeasible_cases(three_gpu: Instance) -> None:
    sp = Splitter(three_gpu)
    assert sp.split([0, 2]) is None  # a and c are not linked
    assert sp.split([0, 1, 2]) is not None
    small = Instance.from_dict({**three_gpu.to_dict(), "model": {
        "layers": 2, "hidden": 2048, "seq_len": 2048, "vocab": 50257}})
    assert Splitter(small).split([0, 1, 2]) is None  # more stages than layers
    with pytest.raises(ValueError):
        sp.split([0, 0])
    with pytest.raises(ValueError):
        sp.split([5])


def test_optimal_split_from_coefficients(three_gpu: Instance) -> None:
    c = three_gpu.coefficients()
    with pytest.raises(ValueError):
        optimal_split(c, [0, 1])
    w = ObjectiveWeights.from_instance(three_gpu)
    a = optimal_split(c, [0, 1], layers=three_gpu.layers, weights=w)
    b = optimal_split(three_gpu, [0, 1])
    assert a is not None and a == b
    plan = a.to_plan(three_gpu)
    assert isinstance(plan, Plan) and plan.gpus == ("a", "b")


def test_objective_weights() -> None:
    w1 = ObjectiveWeights.from_lambda(1.0)
    w0 = ObjectiveWeights.from_lambda(0.0)
    wm = ObjectiveWeights.from_lambda(0.25, 200.0, 50.0)
    assert (w1.a, w1.b, w1.mode) == (1.0, 0.0, 0)
    assert (w0.a, w0.b, w0.mode) == (0.0, 1.0, 1)
    assert wm.a == pytest.approx(0.25 / 200.0) and wm.b == pytest.approx(0.75 / 50.0)
    with pytest.raises(ValueError):
        ObjectiveWeights.from_lambda(0.5)


def test_price_matches_evaluator() -> None:
    rng = random.Random(5)
    n_checked = 0
    for inst in _random_instances(20, seed=21):
        sp = Splitter(inst)
        for _ in range(5):
            p = ref.random_plan(rng, inst.to_dict())
            if p.get("micro_batch_size") not in (None, inst.training.micro_batch_size):
                continue
            plan = Plan.from_dict(p)
            idx = plan.gpu_indices(inst)
            if len(set(idx)) != len(idx):
                continue
            ev = evaluate(inst, plan)
            obj, t, e = sp.price(idx, list(plan.layer_counts))
            if ev.feasible:
                assert obj == pytest.approx(ev.objective, rel=1e-12)
                assert t == pytest.approx(ev.t_iter_ms, rel=1e-12)
                assert e == pytest.approx(ev.e_iter_j, rel=1e-12)
            else:
                assert obj == np.inf
            n_checked += 1
    assert n_checked >= 30


# --------------------------------------------------------------------------- prefix bounds


def _all_completions(sp: Splitter, prefix: list[int]) -> dict[tuple[int, ...], float]:
    """Optimal split value of every sequence starting with ``prefix`` (inf if infeasible)."""
    rest = [g for g in range(sp.n) if g not in prefix]
    out: dict[tuple[int, ...], float] = {}
    for k in range(0, min(sp.n, sp.layers) - len(prefix) + 1):
        for tail in itertools.permutations(rest, k):
            seq = (*prefix, *tail)
            r = sp.split(list(seq))
            out[seq] = np.inf if r is None else r.objective
    return out


def _bound_cases() -> list[Instance]:
    fams = [
        resolve_normalisers(Instance.from_dict(by_family(f, 5, 8, s, lam=lam)))
        for f, s, lam in [("geo", 1, 1.0), ("metro", 2, 0.5), ("paper", 3, 0.0),
                          ("metro", 4, 1.0), ("paper", 5, 0.5)]
    ]
    return fams + _random_instances(12, seed=31, max_n=5, max_l=8)


def test_prefix_bounds_never_exceed_the_best_completion() -> None:
    ratios: list[float] = []
    for inst in _bound_cases():
        sp = Splitter(inst)
        for p_len in (1, 2, 3):
            for prefix in itertools.permutations(range(sp.n), p_len):
                if p_len > min(sp.n, sp.layers):
                    continue
                pre = list(prefix)
                comp = _all_completions(sp, pre)
                best_all = min(comp.values())
                best_ext = min((v for s, v in comp.items() if len(s) > p_len), default=np.inf)
                lb = sp.prefix_bound(pre)
                lb_ext = sp.prefix_bound(pre, extensions_only=True)
                assert lb <= best_all * (1 + 1e-9), (inst.name, pre, lb, best_all)
                assert lb_ext <= best_ext * (1 + 1e-9), (inst.name, pre, lb_ext, best_ext)
                if np.isfinite(best_all) and best_all > 0:
                    ratios.append(lb / best_all)
                # Forcing a GPU: the bound covers every completion that uses it.
                rest = [g for g in range(sp.n) if g not in pre]
                if rest:
                    f = rest[-1]
                    best_f = min((v for s, v in comp.items() if f in s), default=np.inf)
                    assert sp.prefix_bound(pre, forced=[f]) <= best_f * (1 + 1e-9)
    # Valid and useful: on average the bounds are close to the best completion.
    assert len(ratios) > 200
    assert float(np.mean(ratios)) > 0.8


def test_full_prefix_bound_and_leaf(three_gpu: Instance) -> None:
    sp = Splitter(three_gpu)
    exact = sp.split([0, 1, 2])
    assert exact is not None
    # A full-length prefix admits no extension; the bound covers the leaf only.
    assert sp.prefix_bound([0, 1, 2], extensions_only=True) == np.inf
    assert sp.prefix_bound([0, 1, 2]) <= exact.objective * (1 + 1e-12)
    assert sp.prefix_bound([0, 1, 2]) >= 0.9 * exact.objective
    with pytest.raises(ValueError):
        sp.prefix_bound([0], forced=[0])


def test_split_arrays_matches_split() -> None:
    inst = resolve_normalisers(Instance.from_dict(by_family("metro", 7, 14, 2, lam=0.5)))
    sp = Splitter(inst)
    rng = random.Random(9)
    seqs = _sequences(rng, inst.n, 50)
    G = np.zeros((len(seqs), inst.n), dtype=np.int64)
    for p, seq in enumerate(seqs):
        G[p, : len(seq)] = seq
    obj, counts = sp.split_arrays(G, np.array([len(s) for s in seqs]))
    for p, seq in enumerate(seqs):
        one = sp.split(seq)
        if one is None:
            assert obj[p] == np.inf and not counts[p].any()
        else:
            assert obj[p] == one.objective
            assert tuple(counts[p, : len(seq)]) == one.counts and not counts[p, len(seq):].any()
    with pytest.raises(ValueError):
        sp.split_arrays(G, np.zeros(len(seqs), dtype=np.int64))
