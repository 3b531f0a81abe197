"""All four exact methods agree on small instances, and no bound exceeds the optimum.

The expected optimum comes from the independent reference enumerator
(tests/reference_model.py), which brute force must match too; every returned plan
is re-priced by the reference evaluator. Instances are small (f(N, L) <= 1e6), cover
lambda 0, 0.5 and 1, and in some the memory limit binds (the unconstrained optimum would
not fit).
"""

from __future__ import annotations

import copy

import pytest
import reference_model as ref
from oracle import normalisers, reference_optimum

from geoplan.cost import evaluate
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.space import plan_space_size
from geoplan.solving.core import solve

EXACT = ("bnb", "milp", "cpsat")


def _tight_memory(d: dict, holds_layers: int) -> dict:
    """Shrink the two fastest GPUs' memory so each holds about ``holds_layers`` layers.

    The fastest GPUs are where an unconstrained optimum puts most layers, so the
    cap binds.
    """
    d = copy.deepcopy(d)
    m, t = d["model"], d["training"]
    h, T, u = m["hidden"], m["seq_len"], t["micro_batch_size"]
    per_layer = 4 * 12 * h * h * 2 + 3 * 17 * 2 * u * T * h  # bytes at Q = 2
    fast = sorted(d["gpus"], key=lambda g: -g["peak_tflops"] * g["compute_util"])[:2]
    for g in fast:
        g["memory_gb"] = (holds_layers + 0.5) * per_layer / 1e9 / g["memory_util"]
    d["name"] += f"-tight{holds_layers}"
    return d


def _cases() -> list[tuple[str, dict]]:
    base = [
        ("paper-4x8", by_family("paper", 4, 8, 3)),
        ("geo-5x6", by_family("geo", 5, 6, 7)),
        ("metro-4x10", by_family("metro", 4, 10, 11)),
        ("geo-6x5", by_family("geo", 6, 5, 2)),
        ("geo-6x10", by_family("geo", 6, 10, 4)),  # f = 216,342 plans
    ]
    base.append(("paper-4x8-tight", _tight_memory(base[0][1], 2)))
    base.append(("metro-5x8-tight", _tight_memory(by_family("metro", 5, 8, 5), 3)))
    cases = []
    for name, d in base:
        for lam in (0.0, 0.5, 1.0):
            dd = copy.deepcopy(d)
            dd["objective"]["lambda"] = lam
            cases.append((f"{name}-lam{lam:g}", dd))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("name", "data"), CASES, ids=[c[0] for c in CASES])
def test_exact_methods_agree(name: str, data: dict) -> None:
    inst = Instance.from_dict(data)
    assert plan_space_size(inst.n, inst.layers) <= 1_000_000
    optimum, _, _ = reference_optimum(inst)
    t_ref, e_ref = normalisers(inst)
    for method in ("bruteforce", *EXACT):
        res = solve(inst, method, seed=0, time_limit=600, threads=1)
        assert res.status == "optimal", f"{method}: {res.status} {res.message}"
        tol = 1e-9 if method == "bruteforce" else 1e-6
        if method == "cpsat":
            tol = max(tol, res.info["scaling"]["tolerance"])
        assert res.objective == pytest.approx(optimum, rel=tol), method
        # The reference prices the returned plan as the reported objective, and finds it
        # feasible (res.objective is geoplan's own evaluator by construction).
        priced = ref.evaluate_ref(inst.to_dict(), res.plan.to_dict(), t_ref, e_ref)
        assert priced.feasible, (method, priced.violations)
        assert priced.objective == pytest.approx(res.objective, rel=1e-9), method
        # A bound never exceeds the true optimum.
        assert res.lower_bound <= optimum * (1 + 1e-9), method


def test_memory_binds_in_tight_cases() -> None:
    """The tight variants really bind: the loose optimum does not fit them."""
    loose = Instance.from_dict(by_family("paper", 4, 8, 3))
    tight = Instance.from_dict(_tight_memory(by_family("paper", 4, 8, 3), 2))
    best_loose, plan_loose, _ = reference_optimum(loose)
    assert plan_loose is not None
    assert not evaluate(tight, plan_loose).feasible
    assert not ref.evaluate_ref(tight.to_dict(), plan_loose.to_dict()).feasible
    best_tight, _, _ = reference_optimum(tight)
    assert best_tight > best_loose
