"""Integer scaling: the scale of times and objective, and the rounding error it bounds.

CP-SAT works on integers, so times are integers at ``time_scale`` units per ms and
the objective at ``obj_scale`` units per evaluator unit. :func:`choose_scaling`
picks the finest precision whose integers stay below the int64 limits;
:class:`Scaling` states the relative tolerance that rounding leaves between the
model objective and the evaluator's price (docs/cpsat.md, "Integer scaling").
The objective weights in evaluator units (:func:`_weights`) live here too: the
scale of the objective is chosen for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from geoplan.cost.weights import ObjectiveWeights
from geoplan.errors import SolverError
from geoplan.model.instance import Instance

#: Largest objective value reachable under the cap. Above 2**53 CP-SAT's float objective and
#: bound are rounded (relative 1e-16, far inside the tolerance); the plan's objective is read
#: back exactly as an integer.
OBJECTIVE_LIMIT = 2**60
#: Largest objective over the variables' domains (CP-SAT refuses possible int64 overflow).
DOMAIN_LIMIT = 2**61
#: Precision targets tried in turn when none is given.
PRECISIONS = (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3)
#: Candidate objective scale factors, ascending: powers of two and of ten.
_FACTORS = tuple(sorted({2.0**m for m in range(-40, 64)} | {10.0**m for m in range(-12, 19)}))
#: Float round-off allowance added to the analytic error bound.
_EPS = 1e-12


@dataclass(frozen=True)
class Scaling:
    """Integer scaling of the model and the relative rounding error it bounds.

    Times are integers in units of ``1/time_scale`` ms; the model objective is
    an integer in units of ``1/obj_scale`` evaluator objective units. Every time
    coefficient (per-layer compute time, link time) is off by at most
    ``time_rel_error`` relatively, every objective weight by ``obj_rel_error``;
    since T_iter and the objective are sums and maxima of positive terms, the
    model objective of any plan is within ``tolerance`` (relative) of its price.
    """

    time_scale: float
    obj_scale: float
    time_rel_error: float
    obj_rel_error: float
    target: float

    @property
    def tolerance(self) -> float:
        """Relative bound on |model objective - evaluator objective| / objective."""
        return (1 + self.time_rel_error) * (1 + self.obj_rel_error) - 1 + _EPS

    def to_dict(self) -> dict[str, float]:
        return {
            "time_units_per_ms": self.time_scale,
            "objective_units": self.obj_scale,
            "time_rel_error": self.time_rel_error,
            "obj_rel_error": self.obj_rel_error,
            "tolerance": self.tolerance,
            "target": self.target,
        }


def _rel_error(values: Sequence[float] | np.ndarray, scale: float) -> float:
    """Largest relative error of rounding ``scale * v`` to an integer (v > 0 only)."""
    v = np.asarray([x for x in values if x > 0], dtype=float) * scale
    if v.size == 0:
        return 0.0
    r = np.rint(v)
    if np.any(r == 0):
        return 1.0
    return float(np.max(np.abs(r - v) / v))


def _first_power(values: Sequence[float], target: float) -> int | None:
    """Smallest k in [-6, 18] with rounding error of 10^k * values <= target."""
    for k in range(-6, 19):
        if _rel_error(values, 10.0**k) <= target:
            return k
    return None


@dataclass(frozen=True)
class _Weights:
    """Objective = a0 T + sum_{i used} a[i] T + sum_i b[i] n_i (evaluator units, T in ms)."""

    a0: float
    a: np.ndarray
    b: np.ndarray


def _weights(instance: Instance) -> _Weights:
    c = instance.coefficients()
    ow = ObjectiveWeights.from_instance(instance)
    a0, we = ow.a, ow.b
    m = float(c.micro_batches)
    # Mirrors geoplan.cost.kernel.iteration_energy:
    # E_iter = T/1000 * sum idle + M * sum dyn * n * comp / 1000.
    a = we * c.idle_w / 1000.0
    b = we * m * c.dyn_w * c.comp_ms / 1000.0
    return _Weights(a0, np.asarray(a, dtype=float), np.asarray(b, dtype=float))


def choose_scaling(
    time_values: Sequence[float],
    weights: _Weights,
    t_ub_ms: float,
    n_ub: Sequence[int],
    precision: float | None = None,
    obj_ub: float | None = None,
) -> Scaling:
    """Scales for times (a power of ten) and objective: the finest precision that fits.

    ``t_ub_ms`` bounds T_iter over the model's domains and ``n_ub`` the layer
    counts; ``obj_ub`` (evaluator units) bounds the objective values the search
    can reach (a known plan's price). Values must stay below
    :data:`OBJECTIVE_LIMIT` and the objective over the whole domains below
    :data:`DOMAIN_LIMIT` (CP-SAT refuses models that might overflow int64).
    """
    targets = (precision,) if precision is not None else PRECISIONS
    time_only = weights.a0 == 1.0 and not np.any(weights.a) and not np.any(weights.b)
    for r in targets:
        ks = _first_power(time_values, r)
        if ks is None:
            continue
        s = 10.0**ks
        if time_only:
            k_obj, rc = s, 0.0
        else:
            # Integer weights a0 f, a_i f per time unit and b_i S f per layer, f the smallest
            # power of two or ten that meets the target: ten keeps decimal watts exact, two
            # wastes at most a factor 2 of the objective's range, which runs out first.
            vals = [weights.a0, *weights.a]

            def err(f: float, s: float = s, vals: list[float] = vals) -> float:
                return max(_rel_error(vals, f), _rel_error(weights.b, s * f))

            mk = next((f for f in _FACTORS if err(f) <= r), None)
            if mk is None:
                continue
            k_obj, rc = s * mk, err(mk)
        t_int = t_ub_ms * s * (1 + r) + len(n_ub)
        a_sum = round(weights.a0 * k_obj / s) + sum(round(x * k_obj / s) for x in weights.a)
        b_sum = sum(round(x * k_obj) * n for x, n in zip(weights.b, n_ub, strict=True))
        domain_max = max(t_int, a_sum * t_int + b_sum)
        value_max = domain_max if obj_ub is None else obj_ub * k_obj * (1 + 2 * r) + 1
        if value_max <= OBJECTIVE_LIMIT and domain_max <= DOMAIN_LIMIT:
            return Scaling(s, k_obj, _rel_error(time_values, s), rc, r)
    raise SolverError(
        "cpsat: no integer scaling keeps the model below 2**60 at precision "
        f"{targets[-1]:g}; the instance's time coefficients span too many orders of magnitude"
    )
