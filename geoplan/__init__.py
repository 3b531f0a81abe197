"""geoplan: exact and heuristic planners for pipeline-parallel training on
heterogeneous, geo-distributed GPUs (after the GeoTrain paper).

The core shared by every solver: :class:`Instance`, :class:`Plan`, the one cost
evaluator :class:`Evaluator` / :func:`evaluate` (and :class:`BatchEvaluator` for
populations), the
one validator :func:`validate`, and :func:`solve`, which runs any registered
solver and prices its plan.
"""

from geoplan.cost import Evaluation, Evaluator, StageCost, evaluate, objective_value
from geoplan.cost.batch import BatchEvaluator, BatchResult
from geoplan.cost.coefficients import Coefficients
from geoplan.cost.normalise import resolve_normalisers
from geoplan.errors import FormulationError, GeoplanError, InputError, SolverError
from geoplan.model.builder import InstanceBuilder
from geoplan.model.instance import Instance, load_instance
from geoplan.model.plan import Plan, Stage, load_plan
from geoplan.model.space import plan_space_size
from geoplan.model.validation import Violation, validate
from geoplan.solving.core import Callbacks, SolveOptions, available_solvers, solve
from geoplan.solving.result import Outcome, SolveResult, TraceRow

__version__ = "0.1.0"

__all__ = [
    "BatchEvaluator",
    "BatchResult",
    "Callbacks",
    "Coefficients",
    "Evaluation",
    "Evaluator",
    "FormulationError",
    "GeoplanError",
    "InputError",
    "Instance",
    "InstanceBuilder",
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
