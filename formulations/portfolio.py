"""The ``portfolio`` solver: the memetic algorithm first, then an exact model
warm-started from its plan, all within one budget.

It returns the better of the two plans, the exact model's proven bound and the
gap between them. Which exact model runs is ``params["exact"]`` (default:
:func:`default_exact`), and the memetic share of the budget is
``params["ma_fraction"]`` (default 0.2). ``memetic.KEY=VALUE`` and
``exact.KEY=VALUE`` pass parameters to the two solvers (:class:`PortfolioParams`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions, get_solver
from geoplan.solving.core import solve as run
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, Status, TraceRow

__all__ = ["SPEC", "PortfolioParams", "default_exact", "solve"]

EXACT = ("bnb", "milp", "cpsat", "bruteforce")


def default_exact(instance: Instance) -> str:
    """The exact model that proved fastest on instances of this size in bench runs.

    Branch-and-bound (exact splits per GPU sequence, symmetry reduction) wins on
    small pools; the MILP's LP bound scales better to large ones.
    """
    return "bnb" if instance.n <= 12 else "milp"


@dataclass(frozen=True)
class PortfolioParams(SolverParams):
    """Parameters of ``portfolio``; ``memetic.KEY`` and ``exact.KEY`` reach its two solvers."""

    LABEL: ClassVar[str] = "portfolio"

    exact: Literal["bnb", "milp", "cpsat", "bruteforce"] | None = param(
        None, "the exact model (none: bnb up to 12 GPUs, milp beyond)")
    ma_fraction: float = param(0.2, "share of the budget for the memetic algorithm",
                               above=0.0, below=1.0)
    memetic: Mapping[str, Any] = param(None, "a memetic parameter (see its list)",
                                       prefix="memetic.", decode=False)
    exact_params: Mapping[str, Any] = param(None, "a parameter of the exact model (see its "
                                            "list)", prefix="exact.", decode=False)


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Memetic, then the exact model from its plan; best plan and best bound."""
    params = PortfolioParams.parse(options.params)
    exact = params.exact or default_exact(instance)
    fraction = params.ma_fraction
    exact_spec = get_solver(exact)
    exact_spec.load()  # fail early if the backend is missing
    # Both inner parameter sets are checked before either solver runs.
    ma_params, _ = get_solver("memetic").parse_params(params.memetic, where="params.memetic")
    ex_params, _ = exact_spec.parse_params(params.exact_params, where="params.exact")

    ma = run(
        instance,
        "memetic",
        seed=options.seed,
        time_limit=max(options.time_limit * fraction, 1e-3),
        threads=options.threads,
        warm_start=list(options.warm_start) or None,
        params=ma_params,
        callbacks=options.callbacks,
    )
    ma_offset = options.elapsed()
    starts = [ma.plan] if ma.plan is not None else list(options.warm_start)
    ex = run(
        instance,
        exact,
        seed=options.seed,
        time_limit=max(options.remaining(), 1e-3),
        threads=options.threads,
        gap=options.gap,
        warm_start=starts or None,
        params=ex_params,
        callbacks=options.callbacks,
    )

    trace = [TraceRow(r.seconds, r.incumbent, None) for r in ma.trace]
    best_ma = ma.objective if ma.objective is not None else float("inf")
    for r in ex.trace:
        inc = r.incumbent if r.incumbent is not None else None
        inc = best_ma if inc is None else min(inc, best_ma)
        trace.append(TraceRow(ma_offset + r.seconds, None if inc == float("inf") else inc, r.bound))

    candidates = [res for res in (ma, ex) if res.plan is not None and res.objective is not None]
    info = {
        "memetic": {"objective": ma.objective, "wall_s": round(ma.wall_s, 6), "status": ma.status},
        "exact": {
            "solver": exact,
            "objective": ex.objective,
            "lower_bound": ex.lower_bound,
            "status": ex.status,
            "wall_s": round(ex.wall_s, 6),
            "warm_start_accepted": ex.info.get("warm_start", {}).get("accepted"),
        },
    }
    if options.warm_start:
        info["warm_start_accepted"] = ma.info.get("warm_start", {}).get("accepted", False)
    if not candidates:
        none: Status = "infeasible" if ex.status == "infeasible" else "no_solution"
        return Outcome(None, none, trace=trace, info=info, message=ex.message or ma.message)
    best = min(candidates, key=lambda r: math.inf if r.objective is None else r.objective)
    status: Status = "optimal" if ex.status == "optimal" else "feasible"
    return Outcome(best.plan, status, lower_bound=ex.lower_bound, trace=trace, info=info)


SPEC = SolverSpec("portfolio", solve, "exact",
                  "memetic first, then the best exact model warm-started from it",
                  warm_start=True, params=PortfolioParams)
