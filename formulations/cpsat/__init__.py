"""CP-SAT model of the planning problem (OR-Tools), registered as ``cpsat``.

The pipeline is a circuit through a depot over optional GPU nodes (a skipped GPU
takes its self-loop), layer counts are integers, the bottleneck is a max
constraint and the memory caps are element constraints on the stage count Q.
Times are integers at a scale of ``S`` units per millisecond; the rounding of
every coefficient is bounded relatively, so the model objective is within a
stated relative tolerance of the evaluator's price and the reported bound is
CP-SAT's bound shrunk by that tolerance. ``docs/cpsat.md`` writes the model out.

Modules, each owning one concern:

* :mod:`.scaling` -- integer scales and the rounding tolerance (:func:`choose_scaling`);
* :mod:`.model` -- :class:`CpsatModel`: variables, integer data, plan <-> model;
* :mod:`.build` -- :func:`build_model`, the constraints;
* :mod:`.bounds` -- redundant bounds from :mod:`geoplan.cost.bounds`;
* :mod:`.symmetry` -- the dominance rule of :mod:`geoplan.cost.dominance` as constraints;
* :mod:`.start` -- known plans: objective cap and hint;
* :mod:`.callbacks` -- the solution callback (incumbents, bounds, trace);
* :mod:`.solver` -- :class:`CpsatParams`, :func:`solve`, :data:`SPEC`.

Parameters (:class:`CpsatParams`, ``--param KEY=VALUE``): ``precision`` (target
relative rounding error per coefficient; default: the finest of 1e-9, 1e-8, ... whose
integers fit, see :func:`choose_scaling`), ``symmetry`` (dominance and identical-GPU symmetry
breaking, default true), ``bounds`` (per-Q bottleneck and sum bounds and other
redundant constraints, default true), ``baseline_cutoff`` (the Metis-default
plan caps the objective, default true), ``log`` (CP-SAT search log on stdout,
default false) and ``sat.<field>`` (any CP-SAT ``SatParameters`` field).

Names are looked up where they are defined: patch ``formulations.cpsat.<module>.<name>``,
not the re-exports here.
"""

from __future__ import annotations

from formulations.cpsat.bounds import MAX_CLUSTERS, sum_bounds, tmax_bounds
from formulations.cpsat.build import build_model
from formulations.cpsat.model import CpsatModel
from formulations.cpsat.scaling import (
    DOMAIN_LIMIT,
    OBJECTIVE_LIMIT,
    PRECISIONS,
    Scaling,
    choose_scaling,
)
from formulations.cpsat.solver import SPEC, UNSOUND_SUBSOLVERS, CpsatParams, solve

__all__ = [
    "DOMAIN_LIMIT",
    "MAX_CLUSTERS",
    "OBJECTIVE_LIMIT",
    "PRECISIONS",
    "SPEC",
    "UNSOUND_SUBSOLVERS",
    "CpsatModel",
    "CpsatParams",
    "Scaling",
    "build_model",
    "choose_scaling",
    "solve",
    "sum_bounds",
    "tmax_bounds",
]
