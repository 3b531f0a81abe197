"""geoplan: exact and heuristic planners for pipeline-parallel training on
heterogeneous, geo-distributed GPUs (after the GeoTrain paper).

The core shared by every solver: :class:`Instance`, :class:`Plan`, the one cost
evaluator :func:`evaluate` (and :class:`BatchEvaluator` for populations), the
one validator :func:`validate`, and :func:`solve`, which runs any registered
solver and prices its plan.
"""

from geoplan.batch import BatchEvaluator, BatchResult
from geoplan.cost import Evaluation, StageCost, evaluate, objective_value
from geoplan.errors import FormulationError, GeoplanError, InputError, SolverError
from geoplan.instance import Coefficients, Instance, load_instance
from geoplan.normalise import resolve_normalisers
from geoplan.plan import Plan, Stage, load_plan
from geoplan.result import Outcome, SolveResult, TraceRow
from geoplan.solvers import Callbacks, SolveOptions, available_solvers, solve
from geoplan.space import plan_space_size
from geoplan.validation import Violation, validate

__version__ = "0.1.0"

__all__ = [
    "BatchEvaluator",
    "BatchResult",
    "Callbacks",
    "Coefficients",
    "Evaluation",
    "FormulationError",
    "GeoplanError",
    "InputError",
    "Instance",
    "Outcome",
    "Plan",
    "SolveOptions",
    "SolveResult",
    "SolverError",
    "Stage",
    "StageCost",
    "TraceRow",
    "Violation",
    "available_solvers",
    "evaluate",
    "load_instance",
    "load_plan",
    "objective_value",
    "plan_space_size",
    "resolve_normalisers",
    "solve",
    "validate",
]
