"""MILP model of the planning problem, built in Pyomo and solved by HiGHS.

GPU-indexed formulation (written out in ``docs/milp.md``): selection ``y_i``,
integer layer counts ``n_i``, successor arcs ``a_ij`` whose in/out degrees are
tied to ``y_i`` with first/last markers, Desrochers-Laporte order variables
against subtours, cumulative stage-count indicators ``z_k = [Q >= k]`` that
carry the Q-dependent memory caps, a bottleneck variable above every stage time
and, for lambda < 1, a linearised ``T_iter * y_i`` for the idle energy. Times
are milliseconds inside the model. Bounds derived from a known plan (warm start
or a cheap heuristic) tighten the layer bounds and big-Ms without cutting off
any plan at least as good as it.

Where each part lives:

* :mod:`~formulations.milp.data`: :class:`MilpData` and :func:`prepare` (caps,
  arcs, bounds, dominance pairs, cut groups);
* :mod:`~formulations.milp.bounds`: the variable bounds (worst case, from a
  known plan, lower bounds);
* :mod:`~formulations.milp.model`: :func:`build_model` and the build budget
  (:func:`build_checker`, :class:`BuildAbandoned`);
* :mod:`~formulations.milp.symmetry`: the dominance rule's rows and
  :func:`canonical_plan`;
* :mod:`~formulations.milp.cuts`: the valid inequalities;
* :mod:`~formulations.milp.tightening`: LP bound tightening (:func:`tighten`);
* :mod:`~formulations.milp.values`: plans to variable values and back
  (:func:`start_values`, :func:`read_plan`);
* :mod:`~formulations.milp.start`: start plans (:func:`heuristic_plans`,
  :func:`improve_plan`);
* :mod:`~formulations.milp.tolerances`: tolerances and build-time estimates;
* :mod:`~formulations.milp.solver`: :class:`MilpParams`, :func:`solve` and
  :data:`SPEC` (registered as ``milp``).

Tests that replace a function must patch the submodule that looks it up
(e.g. ``formulations.milp.solver.heuristic_plans``), not this package.
"""

from formulations.milp.data import MilpData, prepare
from formulations.milp.model import BuildAbandoned, build_checker, build_model
from formulations.milp.solver import SPEC, MilpParams, solve
from formulations.milp.start import heuristic_plans, improve_plan
from formulations.milp.symmetry import canonical_plan
from formulations.milp.tightening import tighten
from formulations.milp.tolerances import MODEL_TOLERANCE
from formulations.milp.values import read_plan, start_values

__all__ = [
    "MODEL_TOLERANCE",
    "SPEC",
    "BuildAbandoned",
    "MilpData",
    "MilpParams",
    "build_checker",
    "build_model",
    "canonical_plan",
    "heuristic_plans",
    "improve_plan",
    "prepare",
    "read_plan",
    "solve",
    "start_values",
    "tighten",
]
