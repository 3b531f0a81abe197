"""The exact models of the restricted hybrid space (formulations/hybrid, docs/hybrid-exact.md).

On tiny class-structured pools the restricted optima of ``hybrid-milp`` and
``hybrid-cpsat`` agree with each other and with a brute-force enumeration of the
restricted space written here (its own placement, priced by the shared
evaluator); the models' tables and the MILP's own objective are pinned to the
kernel on random points of the space; results are reported as ``feasible`` with no
lower bound and the restricted bound in ``info``; pools whose links are not
uniform are refused. Every instance is tiny and solves far inside its budget, so
no status depends on the clock.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from formulations.highs_tools import HighsSession
from formulations.hybrid import cpsat as hcpsat
from formulations.hybrid import milp as hmilp
from formulations.hybrid.classes import Choice, Config, StageChoice, choice_of_plan, class_pool
from geoplan.cost.hybrid_evaluate import HybridEvaluator
from geoplan.cost.normalise import resolve_normalisers
from geoplan.model.generators import by_family
from geoplan.model.hybrid import HybridPlan, HybridStage, Replica, as_hybrid
from geoplan.model.hybrid_validation import validate_hybrid
from geoplan.model.instance import Instance
from geoplan.solving.core import solve

#: Parameters that keep a run inside the restricted space (no pipeline-space plan first).
RESTRICTED_ONLY = {"pipeline_share": 0}

# (site, type, nodes, gpus per node, peak TFLOPS, memory GB, idle W, active W)
POOL = [("a", "X", 2, 2, 100.0, 1.6, 30.0, 200.0), ("b", "Y", 1, 2, 150.0, 1.2, 40.0, 300.0)]
POOL3 = [*POOL, ("a", "Z", 1, 2, 60.0, 2.4, 20.0, 150.0)]


def _links(gpus: list[dict[str, Any]], node: list[int]) -> list[dict[str, Any]]:
    out = []
    for i, gi in enumerate(gpus):
        for j, gj in enumerate(gpus):
            if i == j:
                continue
            if node[i] == node[j]:
                lat, bw = 0.002, 2000.0
            elif gi["site"] == gj["site"]:
                lat, bw = 0.02, 100.0
            else:  # asymmetric WAN: the reverse direction differs
                lat, bw = (20.0, 2.0) if gi["site"] == "a" else (25.0, 1.5)
            out.append({"src": gi["id"], "dst": gj["id"], "bandwidth_gbps": bw, "util": 1.0,
                        "latency_ms": lat})
    return out


def _instance(pool: list[tuple[Any, ...]], *, lam: float = 1.0, layers: int = 4,
              overhead: float = 0.0, batch: int = 8) -> tuple[Instance, list[list[list[str]]]]:
    """The instance and, per class, its nodes' GPU ids (ids carry no node convention)."""
    gpus: list[dict[str, Any]] = []
    node: list[int] = []
    classes: list[list[list[str]]] = []
    k = 0
    for site, typ, nodes, size, tf, mem, idle, act in pool:
        cl = []
        for _ in range(nodes):
            ids = []
            for _ in range(size):
                gid = f"gpu{len(gpus)}"
                gpus.append({"id": gid, "type": typ, "site": site, "peak_tflops": tf,
                             "compute_util": 0.5, "memory_gb": mem, "memory_util": 1.0,
                             "idle_w": idle, "active_w": act})
                node.append(k)
                ids.append(gid)
            cl.append(ids)
            k += 1
        classes.append(cl)
    objective: dict[str, Any] = {"lambda": lam}
    if 0 < lam < 1:
        objective.update(t_ref_ms=500.0, e_ref_j=900.0)
    d = {
        "name": "tiny-classes",
        "gpus": gpus,
        "links": _links(gpus, node),
        "model": {"layers": layers, "hidden": 1024, "seq_len": 1024, "vocab": 32000},
        "training": {"batch_size": batch, "micro_batch_size": 1, "zero_choices": [0, 1],
                     "max_tp": 2, "micro_batch_choices": [1, 2],
                     "recompute_choices": ["none", "full"], "stage_overhead_ms": overhead},
        "objective": objective,
    }
    return resolve_normalisers(Instance.from_dict(d)), classes


def _brute_force(inst: Instance, classes: list[list[list[str]]]) -> tuple[float, HybridPlan]:
    """The best plan of the restricted space, by enumeration (own placement, evaluator price)."""
    ev = HybridEvaluator(inst)
    t = inst.training
    zero = max(t.zero_choices or (t.zero,))
    best: tuple[float, HybridPlan] | None = None
    L = inst.layers
    for u in t.micro_batch_choices or (t.micro_batch_size,):
        # (class, tp, d, recompute, nodes) of every stage the space allows
        kinds = []
        for c, nodes in enumerate(classes):
            size = len(nodes[0])
            for tp in (1, 2, 4, 8):
                if tp > min(size, t.max_tp):
                    continue
                for d in range(1, u + 1):
                    need = -(-d // (size // tp))
                    if u % d == 0 and need <= len(nodes):
                        kinds += [(c, tp, d, rc, need) for rc in ("none", "full")]
        n_nodes = sum(len(n) for n in classes)
        for q in range(1, min(L, n_nodes) + 1):
            for seq in itertools.product(kinds, repeat=q):
                used = [0] * len(classes)
                for c, _, _, _, need in seq:
                    used[c] += need
                if any(used[c] > len(classes[c]) for c in range(len(classes))):
                    continue
                for cuts in itertools.combinations(range(1, L), q - 1):
                    counts = np.diff([0, *cuts, L]).tolist()
                    free = [0] * len(classes)
                    stages = []
                    for (c, tp, d, rc, need), n in zip(seq, counts, strict=True):
                        mine = classes[c][free[c]:free[c] + need]
                        free[c] += need
                        per = len(mine[0]) // tp
                        reps = tuple(Replica(tuple(mine[r // per][(r % per) * tp:
                                                                  (r % per + 1) * tp]), u // d)
                                     for r in range(d))
                        stages.append(HybridStage(int(n), tp, reps, rc))
                    plan = HybridPlan(tuple(stages), u, zero)
                    obj = ev.price(plan)[3]
                    if math.isfinite(obj) and (best is None or obj < best[0]):
                        best = (obj, plan)
    assert best is not None
    return best


CASES = [
    pytest.param(POOL, 1.0, 0.0, id="time"),
    pytest.param(POOL, 0.5, 1.5, id="mixed-overhead"),
    pytest.param(POOL3, 0.0, 0.0, id="energy-3-classes"),
]


@pytest.mark.parametrize(("pool", "lam", "overhead"), CASES)
def test_models_agree_with_brute_force(pool: list[tuple[Any, ...]], lam: float,
                                       overhead: float) -> None:
    inst, classes = _instance(pool, lam=lam, overhead=overhead)
    best, best_plan = _brute_force(inst, classes)
    for name in ("hybrid-milp", "hybrid-cpsat"):
        r = solve(inst, name, seed=3, time_limit=600.0, threads=1, warm_up=False,
                  params=RESTRICTED_ONLY)
        rs = r.info["restricted"]
        assert r.status == "feasible" and r.lower_bound is None, name
        assert rs["optimal_in_restricted_space"] is True, name
        assert r.objective == pytest.approx(best, rel=1e-6), (name, str(r.plan), str(best_plan))
        assert rs["bound"] <= r.objective * (1 + 1e-12)
        # HiGHS's bound is lowered by its tolerance (1e-6 absolute below objective 1).
        assert rs["bound"] == pytest.approx(best, rel=1e-5, abs=2e-6)
        assert "one GPU class" in rs["space"]


def _random_choices(inst: Instance, rng: np.random.Generator, k: int) -> list[Choice]:
    pool = class_pool(inst)
    out: list[Choice] = []
    ev = HybridEvaluator(inst)
    for _ in range(2000):
        u = int(rng.choice(pool.micro_batches))
        q = int(rng.integers(1, pool.q_max + 1))
        configs = pool.configs(u)
        seq = [configs[int(i)] for i in rng.integers(0, len(configs), q)]
        used: dict[int, int] = {}
        for c in seq:
            used[c.cls] = used.get(c.cls, 0) + c.nodes
        if any(v > pool.classes[c].n_nodes for c, v in used.items()):
            continue
        cuts = sorted(int(x) for x in rng.choice(np.arange(1, inst.layers), q - 1,
                                                 replace=False))
        counts = np.diff([0, *cuts, inst.layers]).tolist()
        ch = Choice(u, pool.zero, tuple(StageChoice(c, int(n))
                                        for c, n in zip(seq, counts, strict=True)))
        if math.isfinite(ev.price(pool.decode(ch))[3]):
            out.append(ch)
        if len(out) == k:
            break
    return out


@pytest.mark.parametrize(("pool", "lam", "overhead"), CASES)
def test_tables_and_milp_price_like_the_kernel(pool: list[tuple[Any, ...]], lam: float,
                                               overhead: float) -> None:
    inst, _ = _instance(pool, lam=lam, overhead=overhead, layers=6)
    hp = class_pool(inst)
    ev = HybridEvaluator(inst)
    choices = _random_choices(inst, np.random.default_rng(7), 12)
    assert len(choices) >= 6
    for ch in choices:
        _, t, e, obj = ev.price(hp.decode(ch))
        tt, te, tobj = hp.price(ch)
        assert (tt, te, tobj) == pytest.approx((t, e, obj), rel=1e-12)
        # The MILP with the choice's discrete values fixed: its LP optimum is the price.
        um = hmilp.build(hp, ch.u, len(ch.stages))
        assert um is not None
        slot = {len(ch.stages) - i: st for i, st in enumerate(ch.stages)}
        for (q, k) in um.model.x:
            on = slot[q].config == um.configs[k]
            um.model.x[q, k].fix(1 if on else 0)
            um.model.n[q, k].fix(slot[q].layers if on else 0)
        if not all(st.config in um.configs for st in ch.stages):
            continue  # a dominated configuration: the model holds a no worse one instead
        session = HighsSession(um.model)
        session.set_options(time_limit=60, rel_gap=1e-9, abs_gap=1e-9, threads=1, seed=0)
        run = session.run()
        assert run.status == "optimal"
        assert run.objective == pytest.approx(obj, rel=1e-7)


def test_cpsat_objective_is_within_its_tolerance() -> None:
    inst, classes = _instance(POOL, lam=0.5, overhead=1.5)
    best, plan = _brute_force(inst, classes)
    hp = class_pool(inst)
    ch = choice_of_plan(hp, plan)
    assert isinstance(ch, Choice)
    r = hcpsat.solve_cell(hp, ch.u, len(ch.stages), None, 600.0, ch,
                          _options(), hcpsat.HybridCpsatParams())
    assert r.status == "optimal" and r.model_objective is not None
    tol = r.info["scale"]["tolerance"]
    assert tol < 1e-6
    assert abs(r.model_objective - best) <= tol * best
    assert r.bound <= best * (1 + 1e-12)


def _options() -> Any:
    from geoplan.solving.core import SolveOptions

    return SolveOptions(seed=0, time_limit=600.0, threads=1)


def test_warm_starts_inside_and_outside_the_space() -> None:
    inst, classes = _instance(POOL)
    best, plan = _brute_force(inst, classes)
    # A TP group spanning the two nodes of class X: outside the space.
    x0, x1 = classes[0]
    outside = HybridPlan((HybridStage(inst.layers, 2, (Replica((x0[0], x1[0]), 1),)),), 1, 1)
    r = solve(inst, "hybrid-milp", seed=0, time_limit=600.0, threads=1, warm_up=False,
              warm_start=[plan, outside], params=RESTRICTED_ONLY)
    assert r.objective == pytest.approx(best, rel=1e-9)
    assert r.info["warm_start_accepted"] is True
    assert any("spans nodes" in n for n in r.info["warm_start_notes"])
    r2 = solve(inst, "hybrid-cpsat", seed=0, time_limit=600.0, threads=1, warm_up=False,
               warm_start=outside, params=RESTRICTED_ONLY)
    assert r2.info["warm_start_accepted"] is False
    assert "outside the restricted space" in r2.info["warm_start_reason"]


def test_non_uniform_links_are_refused() -> None:
    """Both models refuse the pool; by default they return the pipeline-space plan.

    L = 3 (186 plans): the default run's pipeline-space search (the portfolio: B&B with
    the memetic algorithm as its warm start) proves that space's optimum at once. At
    L = 4 (816 plans) B&B asks for the memetic plan, whose default stop spends about
    9 s per model on 100 restarts that find nothing better; the refusal and the
    fallback to the pipeline plan are the same either way.
    """
    inst, classes = _instance(POOL, layers=3)
    d = inst.to_dict()
    x0, x1 = classes[0]
    for link in d["links"]:  # one cross-node link of class X slower than the others
        if link["src"] == x0[0] and link["dst"] == x1[1]:
            link["bandwidth_gbps"] = 50.0
    bad = resolve_normalisers(Instance.from_dict(d))
    for name in ("hybrid-milp", "hybrid-cpsat"):
        r = solve(bad, name, seed=0, time_limit=60.0, threads=1, warm_up=False,
                  params=RESTRICTED_ONLY)
        assert r.status == "no_solution" and r.plan is None
        assert "not uniform" in r.info["restricted"]["refused"]
        # By default a pipeline-space plan is searched too, and returned when the
        # restricted space has none (or a worse one): never worse than the pipeline space.
        r = solve(bad, name, seed=0, time_limit=600.0, threads=1, warm_up=False)
        assert r.status == "feasible" and r.plan is not None
        assert not validate_hybrid(bad, as_hybrid(r.plan))
        assert r.objective == pytest.approx(r.info["pipeline_seed"]["objective"], rel=1e-12)
        assert "not uniform" in r.info["restricted"]["refused"]


def test_nodes_and_classes_are_detected() -> None:
    inst, classes = _instance(POOL3)
    hp = class_pool(inst)  # no id convention: nodes from the fastest link tier
    assert [[[inst.gpu_ids[g] for g in node] for node in cl.nodes] for cl in hp.classes] \
        == classes
    cloud = Instance.from_dict(by_family("cloud", 24, 8, 1))
    cp = class_pool(cloud)  # ids {site}-n{node}-g{k}: every node of 8 GPUs is found
    assert sorted(len(node) for cl in cp.classes for node in cl.nodes) == [8, 8, 8]
    assert all(isinstance(c, Config) for c in cp.configs(1))
