"""Tolerances and build-time estimates shared by the parts of the MILP solver.

The tolerances are why the model's objective and the evaluator's price agree
(docs/milp.md, "Tolerances"); the estimates decide whether a build that cannot
be interrupted is started at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from formulations.milp.data import MilpData

__all__ = [
    "BOUND_SLACK",
    "HIGHS_TOLERANCES",
    "LP_TOLERANCE",
    "MODEL_TOLERANCE",
    "PREPARE_S_PER_GPU2",
    "below_tolerance",
    "build_estimate",
]

# Relative slack on bounds derived from a known plan, so that plan (priced in
# floating point) stays feasible for the model.
BOUND_SLACK = 1e-7
# HiGHS tolerances used for every solve (tighter than the defaults, so that the
# model's objective and the evaluator's price of the rounded plan agree to
# MODEL_TOLERANCE; see docs/milp.md, "Tolerances").
HIGHS_TOLERANCES = {
    "mip_feasibility_tolerance": 1e-9,
    "primal_feasibility_tolerance": 1e-9,
    "dual_feasibility_tolerance": 1e-9,
}
MODEL_TOLERANCE = 1e-6  # relative; what the core checks model_objective against
LP_TOLERANCE = 1e-6  # relative margin taken off LP optima before they become bounds

PREPARE_S_PER_GPU2 = 2.7e-5  # seconds per N^2 that prepare() takes (measured, N=128..256)
# Building the Pyomo model and translating it to HiGHS (neither interruptible as a
# whole): about 2e-4 s per arc plus GPU (3 s for 8k arcs at N=256; measured on one core).
_BUILD_S_PER_ITEM = 2e-4


def build_estimate(data: MilpData) -> float:
    """Seconds to build the model of ``data`` and translate it to HiGHS (a rough guide)."""
    return _BUILD_S_PER_ITEM * (len(data.arcs) + 20 * len(data.gpus))


def below_tolerance(bound: float) -> float:
    """HiGHS's dual bound holds up to its tolerances: the bound taken that far low."""
    return bound - MODEL_TOLERANCE * max(1.0, abs(bound))
