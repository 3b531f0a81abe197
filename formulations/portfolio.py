"""The ``portfolio`` solver: the memetic algorithm first, then an exact model
warm-started from its plan, all within one budget.

It returns the better of the two plans, the exact model's proven bound and the
gap between them. Which exact model runs is ``params["exact"]`` (default:
:func:`default_exact`), and the memetic share of the budget is
``params["ma_fraction"]`` (default 0.2).
"""

from __future__ import annotations

from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions, get_solver
from geoplan.solving.core import solve as run
from geoplan.solving.result import Outcome, TraceRow

__all__ = ["default_exact", "solve"]

EXACT = ("bnb", "milp", "cpsat", "bruteforce")


def default_exact(instance: Instance) -> str:
    """The exact model that proved fastest on instances of this size in bench runs.

    Branch-and-bound (exact splits per GPU sequence, symmetry reduction) wins on
    small pools; the MILP's LP bound scales better to large ones.
    """
    return "bnb" if instance.n <= 12 else "milp"


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Memetic, then the exact model from its plan; best plan and best bound."""
    params = dict(options.params)
    exact = str(params.pop("exact", default_exact(instance)))
    if exact not in EXACT:
        raise InputError("params.exact", exact, f"expected one of {', '.join(EXACT)}")
    fraction = float(params.pop("ma_fraction", 0.2))
    if not 0 < fraction < 1:
        raise InputError("params.ma_fraction", fraction, "must lie in (0, 1)")
    get_solver(exact).load()  # fail early if the backend is missing

    ma = run(
        instance,
        "memetic",
        seed=options.seed,
        time_limit=max(options.time_limit * fraction, 1e-3),
        threads=options.threads,
        warm_start=list(options.warm_start) or None,
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
        status = "infeasible" if ex.status == "infeasible" else "no_solution"
        return Outcome(None, status, trace=trace, info=info, message=ex.message or ma.message)
    best = min(candidates, key=lambda r: r.objective)
    status = "optimal" if ex.status == "optimal" else "feasible"
    return Outcome(best.plan, status, lower_bound=ex.lower_bound, trace=trace, info=info)
