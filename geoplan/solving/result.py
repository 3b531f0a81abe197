"""One result type for every solver, and the outcome a solver hands back.

A solver returns an :class:`Outcome` (its plan, status, proven bound, trace and
its model's own objective). :func:`geoplan.solving.core.solve` prices the plan with
the shared evaluator, checks the model's objective and bound against that
price, and builds the :class:`SolveResult` users see. No solver states its own
final cost.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from geoplan.model.hybrid import HybridPlan, any_plan_from_dict
from geoplan.model.plan import Plan

__all__ = ["STATUSES", "Outcome", "SolveResult", "Status", "TraceRow"]

Status = Literal["optimal", "feasible", "infeasible", "no_solution"]
STATUSES: tuple[Status, ...] = get_args(Status)


@dataclass(frozen=True)
class TraceRow:
    """One time-stamped row: seconds since start, incumbent objective, proven bound."""

    seconds: float
    incumbent: float | None
    bound: float | None

    def to_list(self) -> list[float | None]:
        return [round(self.seconds, 6), _num(self.incumbent), _num(self.bound)]


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass
class Outcome:
    """What a solver returns: no final cost, which the shared evaluator supplies.

    ``model_objective`` is the solver's own value for ``plan`` (an exact model's
    objective); it is checked against the evaluator within ``model_tolerance``
    (relative), and a mismatch raises :class:`~geoplan.errors.FormulationError`.
    ``lower_bound`` is a proven bound in objective units (None: none proven).
    """

    plan: Plan | HybridPlan | None
    status: Status
    lower_bound: float | None = None
    model_objective: float | None = None
    model_tolerance: float = 1e-6
    trace: list[TraceRow] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    message: str | None = None


@dataclass
class SolveResult:
    """The result of one solver run, serialisable to the JSON of formats.md."""

    solver: str
    status: Status
    plan: Plan | HybridPlan | None
    objective: float | None
    t_iter_ms: float | None
    e_iter_j: float | None
    lower_bound: float | None
    gap: float | None
    wall_s: float
    t_ref_ms: float | None
    e_ref_j: float | None
    lam: float
    seed: int | None
    trace: list[TraceRow] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    message: str | None = None
    instance_name: str | None = None
    instance_hash: str | None = None

    @property
    def proven_optimal(self) -> bool:
        return self.status == "optimal"

    def to_dict(self) -> dict[str, Any]:
        return {
            "solver": self.solver,
            "status": self.status,
            "plan": None if self.plan is None else self.plan.to_dict(),
            "objective": _num(self.objective),
            "t_iter_ms": _num(self.t_iter_ms),
            "e_iter_j": _num(self.e_iter_j),
            "lower_bound": _num(self.lower_bound),
            "gap": _num(self.gap),
            "wall_s": round(self.wall_s, 6),
            # Seconds spent compiling/loading kernels before the budget (not in wall_s).
            "warmup_s": _num(self.info.get("warmup_s")),
            "t_ref_ms": self.t_ref_ms,
            "e_ref_j": self.e_ref_j,
            "lambda": self.lam,
            "seed": self.seed,
            "trace": [r.to_list() for r in self.trace],
            "params": self.params,
            "info": self.info,
            "message": self.message,
            "instance": self.instance_name,
            "instance_hash": self.instance_hash,
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SolveResult:
        return cls(
            solver=d["solver"],
            status=d["status"],
            plan=None if d.get("plan") is None else any_plan_from_dict(d["plan"]),
            objective=d.get("objective"),
            t_iter_ms=d.get("t_iter_ms"),
            e_iter_j=d.get("e_iter_j"),
            lower_bound=d.get("lower_bound"),
            gap=d.get("gap"),
            wall_s=d.get("wall_s", 0.0),
            t_ref_ms=d.get("t_ref_ms"),
            e_ref_j=d.get("e_ref_j"),
            lam=d.get("lambda", 1.0),
            seed=d.get("seed"),
            trace=[TraceRow(*row) for row in d.get("trace", [])],
            params=d.get("params", {}),
            info=d.get("info", {}),
            message=d.get("message"),
            instance_name=d.get("instance"),
            instance_hash=d.get("instance_hash"),
        )

    def trace_csv(self) -> str:
        """The trace as CSV text: seconds,incumbent,bound."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["seconds", "incumbent", "bound"])
        for r in self.trace:
            w.writerow(["" if v is None else v for v in r.to_list()])
        return buf.getvalue()

    def write_trace_csv(self, path: str | Path) -> None:
        Path(path).write_text(self.trace_csv())

    def summary(self) -> str:
        """A short human-readable summary."""
        parts = [f"{self.solver}: {self.status}"]
        if self.objective is not None:
            parts.append(f"objective {self.objective:.6g}")
        if self.t_iter_ms is not None:
            parts.append(f"T_iter {self.t_iter_ms:.2f} ms")
        if self.e_iter_j is not None:
            parts.append(f"E_iter {self.e_iter_j:.2f} J")
        if self.lower_bound is not None:
            parts.append(f"bound {self.lower_bound:.6g}")
        if self.gap is not None:
            parts.append(f"gap {100 * self.gap:.3f}%")
        parts.append(f"{self.wall_s:.2f} s")
        warm = self.info.get("warmup_s")
        if isinstance(warm, int | float) and warm > 0:
            parts.append(f"warm-up {warm:.1f} s (numba kernels compiled or loaded, not "
                         "charged to the budget)")
        return ", ".join(parts)
