"""The one dominance rule never removes every optimal plan.

Instances with duplicated GPUs (exact copies, copies that are faster or better
linked, copies whose link to the original is asymmetric) are enumerated by the
independent reference model; the optimum over the plans the rule admits must
equal the optimum over all plans, for the MILP/CP-SAT constraints (y_j <= y_i,
n_i >= n_j) and for B&B's classes plus dominance matrix; the canonical form of
every plan satisfies the rule at no higher price; and the solvers, with their
reductions on, reach the reference optimum.
"""

from __future__ import annotations

import copy
import itertools
import random

import numpy as np
import pytest
import reference_model as ref

from formulations import bnb
from geoplan.cost.dominance import dominance_of
from geoplan.cost.split import Splitter
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.instance import Instance
from geoplan.solving.core import solve


def duplicated(seed: int, lam: float | None = None, o: float = 0.0) -> dict:
    """A random instance with copies of some GPUs (exact, no-worse or asymmetric)."""
    rng = random.Random(3000 + seed)
    d = ref.random_instance(rng, n_gpus=rng.randint(2, 3), layers=rng.randint(3, 6), lam=lam,
                            link_prob=0.9, tight_memory=rng.random() < 0.5)
    for _ in range(rng.randint(1, 2)):
        src = rng.choice(d["gpus"])
        new = copy.deepcopy(src)
        new["id"] = f"{src['id']}c{len(d['gpus'])}"
        kind = rng.choice(["exact", "exact", "faster", "better_link", "asymmetric"])
        if kind == "faster":
            new["peak_tflops"] = src["peak_tflops"] * 1.5
        links = [e for e in d["links"] if src["id"] in (e["src"], e["dst"])]
        for e in links:
            f = copy.deepcopy(e)
            f["src"] = new["id"] if e["src"] == src["id"] else e["src"]
            f["dst"] = new["id"] if e["dst"] == src["id"] else e["dst"]
            if kind == "better_link" and rng.random() < 0.5:
                f["latency_ms"] = f["latency_ms"] / 2
            d["links"].append(f)
        lat = rng.choice([0.0, 0.05, 1.0])
        back = lat * 3 + 1 if kind == "asymmetric" else lat
        d["links"].append({"src": src["id"], "dst": new["id"], "bandwidth_gbps": 100.0,
                           "latency_ms": lat})
        d["links"].append({"src": new["id"], "dst": src["id"], "bandwidth_gbps": 100.0,
                           "latency_ms": back})
        d["gpus"].append(new)
    if o:
        d["training"]["stage_overhead_ms"] = o
    return d


CASES = [(seed, lam, o) for seed in range(14) for lam, o in ((1.0, 0.0), (0.0, 0.0), (None, 3.0))]


def _priced(d: dict, inst: Instance) -> list[tuple[list[int], list[int], float]]:
    index = {g: k for k, g in enumerate(inst.gpu_ids)}
    out = []
    for p in ref.all_plans(d):
        r = ref.evaluate_ref(d, p)
        if r.feasible:
            out.append(([index[s["gpu"]] for s in p["stages"]],
                        [s["layers"] for s in p["stages"]], float(r.objective)))
    return out


def _rule(inst: Instance):
    w = ObjectiveWeights.from_instance(inst)
    return dominance_of(inst.coefficients(), inst.layers, w.b > 0)


def _bnb_admits(gpus: list[int], cls: np.ndarray, succ: np.ndarray) -> bool:
    """B&B's reductions: class members used lowest index first, in pipeline order; succ closed."""
    used = set(gpus)
    for c in set(cls.tolist()):
        members = [int(i) for i in np.flatnonzero(cls == c)]
        in_plan = [g for g in gpus if cls[g] == c]
        if in_plan != members[: len(in_plan)]:
            return False
    return not any(succ[i, j] and j in used and i not in used
                   for i in range(len(cls)) for j in range(len(cls)))


@pytest.mark.parametrize(("seed", "lam", "o"), CASES)
def test_the_rule_keeps_an_optimal_plan(seed: int, lam: float | None, o: float) -> None:
    d = duplicated(seed, lam, o)
    inst = Instance.from_dict(d)
    rule = _rule(inst)
    plans = _priced(d, inst)
    opt = min(p[2] for p in plans)
    kept = [p for p in plans if not rule.violated(p[0], p[1])]
    assert kept and min(p[2] for p in kept) == pytest.approx(opt, rel=1e-12)
    cls, succ = rule.classes(), rule.matrix()
    kept_bnb = [p for p in plans if _bnb_admits(p[0], cls, succ)]
    assert kept_bnb and min(p[2] for p in kept_bnb) == pytest.approx(opt, rel=1e-12)
    # Every plan's canonical form satisfies the rule and costs no more (moves R and S).
    price = {(tuple(g), tuple(n)): v for g, n, v in plans}
    for g, n, v in plans:
        cg, cn = rule.canonical(g, n)
        assert not rule.violated(cg, cn)
        assert price[(tuple(cg), tuple(cn))] <= v * (1 + 1e-12)


@pytest.mark.parametrize(("seed", "lam", "o"), CASES)
def test_structure_of_the_rule(seed: int, lam: float | None, o: float) -> None:
    inst = Instance.from_dict(duplicated(seed, lam, o))
    rule = _rule(inst)
    rank = rule.rank
    assert sorted(rank.tolist()) == list(range(inst.n))
    assert all(rank[i] < rank[j] for i, j in rule.pairs)  # oriented by the total order
    assert set(rule.identical) <= set(rule.pairs)
    assert all(i < j for i, j in rule.identical)  # identical GPUs are ranked by index
    cls = rule.classes()
    ident = set(rule.identical)
    for c in set(cls.tolist()):
        members = [int(i) for i in np.flatnonzero(cls == c)]
        assert all((i, j) in ident for i, j in itertools.combinations(members, 2))
    # bnb uses the same rule
    sp = Splitter(inst)
    assert np.array_equal(bnb.dominance(sp), rule.matrix())
    assert np.array_equal(bnb.symmetry_classes(sp), cls)


def test_exact_copies_are_identical_and_better_copies_dominate() -> None:
    d = ref.random_instance(random.Random(7), n_gpus=3, layers=5, lam=1.0, link_prob=1.0)
    g0 = d["gpus"][0]
    for kind, tf in (("same", g0["peak_tflops"]), ("fast", g0["peak_tflops"] * 2)):
        new = dict(g0, id=f"{kind}")
        new["peak_tflops"] = tf
        for e in [e for e in d["links"] if g0["id"] in (e["src"], e["dst"])]:
            d["links"].append(dict(e, src=kind if e["src"] == g0["id"] else e["src"],
                                   dst=kind if e["dst"] == g0["id"] else e["dst"]))
        d["gpus"].append(new)
    for a, b in (("g0", "same"), ("g0", "fast"), ("same", "fast")):
        d["links"].append({"src": a, "dst": b, "bandwidth_gbps": 100.0, "latency_ms": 0.1})
        d["links"].append({"src": b, "dst": a, "bandwidth_gbps": 100.0, "latency_ms": 0.1})
    inst = Instance.from_dict(d)
    rule = _rule(inst)
    i0, i_same, i_fast = (inst.gpu_ids.index(x) for x in ("g0", "same", "fast"))
    assert (i0, i_same) in rule.identical
    assert (i_fast, i0) in rule.pairs and (i_fast, i_same) in rule.pairs
    assert (i_fast, i0) not in rule.identical
    # Links no worse, not equal (milp's old rule demanded equal links): still a pair.
    d2 = copy.deepcopy(d)
    for e in d2["links"]:
        if e["src"] == "fast" and e["dst"] == "g1":
            e["latency_ms"] = 0.0
            e["bandwidth_gbps"] = 400.0
    rule2 = _rule(Instance.from_dict(d2))
    assert (i_fast, i0) in rule2.pairs


@pytest.mark.parametrize("seed", [0, 3, 5, 8, 12])
@pytest.mark.parametrize("solver", ["milp", "cpsat", "bnb"])
def test_solvers_with_reductions_reach_the_reference_optimum(seed: int, solver: str) -> None:
    for lam, o in ((1.0, 0.0), (0.0, 2.0)):
        d = duplicated(seed, lam, o)
        inst = Instance.from_dict(d)
        want = ref.optimum_ref(d).objective
        res = solve(inst, solver, seed=0, time_limit=600, threads=1)
        assert res.status == "optimal"
        assert res.objective == pytest.approx(want, rel=1e-6)
