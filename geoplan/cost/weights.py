"""The objective weights: how lambda and the normalisers turn (T_iter, E_iter) into one number.

``objective = a * T_iter[ms] + b * E_iter[J]`` (paper eq. 16); ``mode`` says
which branch of :func:`geoplan.cost.kernel.objective` prices it, so that a model
that optimises ``a T + b E`` and the evaluator agree to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from geoplan.cost import kernel

if TYPE_CHECKING:
    from geoplan.model.instance import Instance

__all__ = ["ObjectiveWeights", "objective_units"]


@dataclass(frozen=True)
class ObjectiveWeights:
    """``objective = a * T_iter[ms] + b * E_iter[J]`` and the evaluator's branch ``mode``."""

    a: float
    b: float
    mode: int
    lam: float
    t_ref: float
    e_ref: float

    @classmethod
    def from_lambda(
        cls, lam: float, t_ref_ms: float | None = None, e_ref_j: float | None = None
    ) -> ObjectiveWeights:
        if lam == 1.0:
            return cls(1.0, 0.0, kernel.MODE_TIME, 1.0, 1.0, 1.0)
        if lam == 0.0:
            return cls(0.0, 1.0, kernel.MODE_ENERGY, 0.0, 1.0, 1.0)
        if t_ref_ms is None or e_ref_j is None:
            raise ValueError(
                "0 < lambda < 1 needs t_ref_ms and e_ref_j: build a "
                "geoplan.cost.Evaluator (or call resolve_normalisers) first"
            )
        return cls(lam / t_ref_ms, (1.0 - lam) / e_ref_j, kernel.MODE_MIX, lam,
                   float(t_ref_ms), float(e_ref_j))

    @classmethod
    def from_instance(cls, instance: Instance) -> ObjectiveWeights:
        """From ``instance.objective``; ValueError if lambda needs normalisers it lacks."""
        o = instance.objective
        return cls.from_lambda(o.lam, o.t_ref_ms, o.e_ref_j)

    @property
    def args(self) -> tuple[int, float, float, float]:
        """(mode, lam, t_ref, e_ref): the objective arguments of the kernel functions."""
        return (self.mode, self.lam, self.t_ref, self.e_ref)

    def value(self, t_iter_ms: float, e_iter_j: float) -> float:
        """The objective of (T, E): :func:`geoplan.cost.kernel.objective`."""
        return float(kernel.objective(t_iter_ms, e_iter_j, *self.args))

    @property
    def units(self) -> str:
        return objective_units(self.lam)


def objective_units(lam: float) -> str:
    """The unit of the objective value: ms (lambda=1), J (lambda=0), else dimensionless."""
    return "ms" if lam == 1.0 else "J" if lam == 0.0 else "1"
