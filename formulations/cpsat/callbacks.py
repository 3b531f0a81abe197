"""The solution callback: incumbents priced by the evaluator, bounds, the trace.

:class:`_Recorder` turns CP-SAT's integer objective bound into a valid bound on
the true objective (:attr:`Scaling.tolerance`) and reports every improvement to
``options.callbacks``.
"""

from __future__ import annotations

import math
import threading

from ortools.sat.python import cp_model

from formulations.cpsat.model import CpsatModel
from geoplan.cost import evaluate
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions
from geoplan.solving.result import TraceRow


class _Recorder(cp_model.CpSolverSolutionCallback):
    """Records incumbents (priced by the evaluator) and bounds, with timestamps."""

    def __init__(self, built: CpsatModel, options: SolveOptions) -> None:
        super().__init__()
        self.built = built
        self.options = options
        self.lock = threading.Lock()
        self.trace: list[TraceRow] = []
        self.incumbent: float | None = None
        self.bound: float | None = None
        self.first_objective: int | None = None
        self.first_plan: Plan | None = None
        self.solutions = 0

    def to_bound(self, raw: float) -> float | None:
        """CP-SAT's bound (model integers) as a valid bound on the true objective."""
        if not math.isfinite(raw):
            return None
        sc = self.built.scaling
        # (1 + 1e-15): the float bound may be rounded above 2**53.
        return max(0.0, raw / sc.obj_scale / (1 + sc.tolerance) / (1 + 1e-15))

    def _row(self) -> None:
        row = TraceRow(self.options.elapsed(), self.incumbent, self.bound)
        self.trace.append(row)
        self.options.callbacks.on_improvement(row.seconds, row.incumbent, row.bound)

    def on_solution_callback(self) -> None:
        plan = self.built.decode(self.value)
        price = evaluate(self.built.instance, plan).objective
        with self.lock:
            self.solutions += 1
            if self.first_objective is None:
                self.first_objective = int(self.value(self.built.objective))
                self.first_plan = plan
            b = self.to_bound(self.best_objective_bound)
            if b is not None and (self.bound is None or b > self.bound):
                self.bound = b
            if self.incumbent is None or price < self.incumbent:
                self.incumbent = price
            self._row()

    def on_bound(self, raw: float) -> None:
        b = self.to_bound(raw)
        with self.lock:
            if b is not None and (self.bound is None or b > self.bound):
                self.bound = b
                self._row()
