"""The cost model of cost-model.md, written once: coefficients, kernel, evaluators, split."""

from geoplan.cost.evaluate import (
    Evaluation,
    StageCost,
    evaluate,
    objective_units,
    objective_value,
)

__all__ = ["Evaluation", "StageCost", "evaluate", "objective_units", "objective_value"]
