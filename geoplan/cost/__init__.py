"""The cost model of cost-model.md, written once: coefficients, kernel, evaluators, split."""

from geoplan.cost.evaluate import (
    Evaluation,
    Evaluator,
    StageCost,
    evaluate,
    objective_units,
    objective_value,
)

__all__ = ["Evaluation", "Evaluator", "StageCost", "evaluate", "objective_units", "objective_value"]
