"""Each exact model's restatement of the cost kernel, pinned to the kernel on random plans.

The MILP and CP-SAT models restate :mod:`geoplan.cost.kernel` as linear
constraints (see docs/architecture.md, "Restatements"). Here each model is
handed random feasible plans, its own variables are set to encode them, and
its objective is compared with the shared evaluator's price: exactly (1e-9)
for the MILP, within the stated rounding tolerance for integer-scaled CP-SAT.
The MILP check also verifies that the encoded plan satisfies every
constraint, so a wrong tau, T_iter or energy row fails here.
"""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest

from formulations import cpsat, milp
from geoplan.cost import evaluate
from geoplan.cost.normalise import resolve_normalisers
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan


def _instance(family: str, seed: int, lam: float, overhead: float) -> Instance:
    d = by_family(family, 5, 8, seed)
    d["objective"] = {"lambda": lam}
    if overhead:
        d["training"]["stage_overhead_ms"] = overhead
    return resolve_normalisers(Instance.from_dict(d))


def _random_feasible_plans(inst: Instance, rng: np.random.Generator, k: int) -> list[Plan]:
    plans: list[Plan] = []
    for _ in range(400):
        q = int(rng.integers(1, min(inst.n, inst.layers) + 1))
        gpus = [int(g) for g in rng.permutation(inst.n)[:q]]
        cuts = sorted(int(x) for x in rng.choice(np.arange(1, inst.layers), q - 1, replace=False))
        counts = np.diff([0, *cuts, inst.layers]).tolist()
        plan = Plan.from_indices(inst, gpus, counts)
        if evaluate(inst, plan).feasible:
            plans.append(plan)
        if len(plans) == k:
            break
    return plans


CASES = [(f, s, lam, o) for f in ("geo", "metro") for s in (1, 2) for lam in (1.0, 0.5, 0.0)
         for o in (0.0, 3.5)]


@pytest.mark.parametrize(("family", "seed", "lam", "overhead"), CASES)
def test_milp_objective_is_the_kernel_price(family: str, seed: int, lam: float,
                                             overhead: float) -> None:
    inst = _instance(family, seed, lam, overhead)
    model = milp.build_model(inst, symmetry=False)
    plans = _random_feasible_plans(inst, np.random.default_rng(seed), 12)
    assert plans, "no feasible plan drawn"
    checked = 0
    for plan in plans:
        vals = milp.start_values(model, plan)
        if vals is None:  # an arc the model dropped by its bottleneck bound
            continue
        for var, v in vals.items():
            var.set_value(v, skip_validation=True)
        for con in model.component_data_objects(pyo.Constraint, active=True):
            body = pyo.value(con.body)
            tol = 1e-6 * max(1.0, abs(body))
            assert con.lower is None or body >= pyo.value(con.lower) - tol, con.name
            assert con.upper is None or body <= pyo.value(con.upper) + tol, con.name
        price = evaluate(inst, plan).objective
        assert pyo.value(model.obj) == pytest.approx(price, rel=1e-9)
        checked += 1
    assert checked >= len(plans) // 2


@pytest.mark.parametrize(("family", "seed", "lam", "overhead"), CASES)
def test_cpsat_objective_is_the_kernel_price(family: str, seed: int, lam: float,
                                              overhead: float) -> None:
    inst = _instance(family, seed, lam, overhead)
    cm = cpsat.build_model(inst, symmetry=False, bounds=False)
    plans = _random_feasible_plans(inst, np.random.default_rng(seed + 100), 12)
    assert plans
    tol = cm.scaling.tolerance
    for plan in plans:
        v = cm.values_of(plan)
        model_obj = v["objective"] / cm.scaling.obj_scale
        price = evaluate(inst, plan).objective
        assert abs(model_obj - price) <= tol * price + 1e-12, (model_obj, price, tol)
        t_model = v["t_iter"] / cm.scaling.time_scale
        assert t_model == pytest.approx(evaluate(inst, plan).t_iter_ms, rel=tol + 1e-12)
