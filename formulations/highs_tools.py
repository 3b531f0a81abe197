"""Running a Pyomo model on HiGHS with what Pyomo's interface does not expose.

Pyomo's persistent HiGHS interface (``pyomo.contrib.solver.solvers.highs``)
translates the model into a ``highspy.Highs`` object; we then drive that object
directly for a MIP start (``setSolution``), incumbent and bound callbacks
(``kCallbackMipImprovingSolution``, ``kCallbackMipInterrupt``) and the HiGHS
log, none of which Pyomo passes through. Pyomo keeps the translated object and
its variable-to-column map in private attributes (checked here, so a Pyomo
upgrade that renames them fails loudly rather than silently).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import highspy
import numpy as np
import pyomo.environ as pyo
from pyomo.contrib.solver.solvers.highs import Highs as PyomoHighs

from geoplan.errors import SolverError
from geoplan.solving.stop import NativeCallAbandoned, StopFlag, abandoned_calls, call_stoppable

__all__ = ["DEADLINE_SLACK_S", "HighsRun", "HighsSession", "analytic_centre_estimate",
           "reset_scheduler"]

#: How long past its deadline a run may go before the interrupt callbacks stop it
#: (HiGHS's own time limit, set to the same moment, normally acts first).
DEADLINE_SLACK_S = 0.5
#: How long past its deadline a run is waited for before it is abandoned: some of
#: HiGHS's root work looks at no interrupt (the analytic centre, a line-search rounding
#: heuristic that ran 120 s at geo N=256 L=128 lambda 0.5, instance seed 109, started
#: with 67 s left), and a solver must return near its budget.
ABANDON_AFTER_S = 2.0
#: A MIP is started only if this many times :func:`analytic_centre_estimate` fits before
#: its deadline: the estimate is a one-core measurement, and with two solver runs on two
#: cores the wait was seen to take twice as long (metro N=128 L=96 lambda 0.5, instance
#: seed 149: started with about 10 s left against an estimate near 7 s, HiGHS returned
#: 13 s past the deadline, its bound below the one it started with).
SHARED_CORE_MARGIN = 2.0


def analytic_centre_estimate(nonzeros: int) -> float:
    """Seconds HiGHS's MIP root spends on its analytic centre, a little high.

    After five root separation rounds HiGHS (1.16, ``HighsMipSolverData``) waits
    for an IPX run on the whole LP (zero costs, up to 200 iterations) in an inner
    ``Highs`` with no time limit and no callbacks: neither its time limit nor our
    interrupt reaches it. Measured on one core (``ipx``, the same options), milp
    models of metro pools: 0.78 s at 0.11 M nonzeros (N=64), 5.9-6.6 s at 0.51-0.54 M
    (N=128), 47 s at 3.0 M (N=256; the whole wait was about 70 s there, and a
    300 s milp run overran by 57 s). The fit ``1.7e-5 nnz (nnz / 1e6)^0.23`` lies
    12-43 % above each measurement (67 s at N=256, near that whole wait).
    """
    nnz = max(int(nonzeros), 0)
    return 1.7e-5 * nnz * (nnz / 1e6) ** 0.23

# Model statuses after which HiGHS may hold a usable incumbent but proved nothing.
_STOPPED = {
    highspy.HighsModelStatus.kTimeLimit: "time_limit",
    highspy.HighsModelStatus.kIterationLimit: "iteration_limit",
    highspy.HighsModelStatus.kSolutionLimit: "solution_limit",
    highspy.HighsModelStatus.kInterrupt: "interrupted",
    highspy.HighsModelStatus.kObjectiveBound: "objective_bound",
    highspy.HighsModelStatus.kObjectiveTarget: "objective_target",
}

# Phrases HiGHS logs about a user-supplied MIP start (HiGHS 1.7 .. 1.16 wording).
_START_OK = "mip start solution is feasible"
_START_BAD = (
    "mip start solution is infeasible",
    "attempting to find feasible solution by solving lp for user-supplied values",
)


@dataclass
class HighsRun:
    """What one HiGHS run produced, in the model's own objective units.

    ``status``: ``optimal`` (HiGHS proved its gap targets), ``infeasible``,
    ``unbounded``, ``stopped`` (a limit hit; see ``reason``) or ``error``.
    ``values``: column values of the incumbent (None without one).
    ``start_accepted``: whether HiGHS took the MIP start as a feasible solution
    (None when no start was given).
    """

    status: str
    reason: str
    objective: float | None
    dual_bound: float | None
    values: np.ndarray | None
    start_accepted: bool | None
    seconds: float
    nodes: int
    log: list[str] = field(default_factory=list)


def reset_scheduler() -> None:
    """Drop HiGHS's process-wide thread pool so the next run may use another thread count.

    HiGHS sizes one global scheduler on its first run and rejects a different
    ``threads`` option afterwards. Solves in one process run one after another
    (the solver contract), so resetting before each run is safe, except while an
    abandoned run (:data:`ABANDON_AFTER_S`) still unwinds on it: then it is kept.
    """
    if not abandoned_calls():
        highspy.Highs.resetGlobalScheduler(True)


class HighsSession:
    """A Pyomo model translated to ``highspy`` through Pyomo's HiGHS interface."""

    def __init__(self, model: pyo.ConcreteModel) -> None:
        self._opt = PyomoHighs()
        if not self._opt.available():
            raise SolverError("HiGHS (highspy) is not available")
        self._opt.set_instance(model)
        highs = getattr(self._opt, "_solver_model", None)
        col_map = getattr(self._opt, "_pyomo_var_to_solver_var_map", None)
        if not isinstance(highs, highspy.Highs) or not isinstance(col_map, dict):
            raise SolverError(
                "this Pyomo version no longer exposes the highspy object of its HiGHS "
                "interface (_solver_model / _pyomo_var_to_solver_var_map)"
            )
        self.highs: highspy.Highs = highs
        self._col: dict[int, int] = col_map
        self._vars = {id(v): v for v in model.component_data_objects(pyo.Var, descend_into=True)}
        # From the model, not HiGHS's LP (getLp copies it: 3 M nonzeros at N=256).
        self._is_mip = any(not v.is_continuous() for v in self._vars.values())
        self._start_given = False
        #: Set when a run was abandoned: its thread may still use ``highs``.
        self.abandoned = False
        self.log: list[str] = []
        self.highs.setOptionValue("log_to_console", False)
        self.highs.cbLogging.subscribe(self._on_log)

    # ------------------------------------------------------------------ set-up
    def column(self, var: Any) -> int:
        """The HiGHS column index of a Pyomo variable."""
        return self._col[id(var)]

    @property
    def num_cols(self) -> int:
        return int(self.highs.getNumCol())

    @property
    def is_mip(self) -> bool:
        """Whether any column is integer (HiGHS then runs its MIP solver)."""
        return self._is_mip

    def root_wait(self) -> float:
        """Seconds a MIP run needs before its root can be interrupted: the analytic-centre
        estimate, taken :data:`SHARED_CORE_MARGIN` times."""
        return SHARED_CORE_MARGIN * analytic_centre_estimate(self.highs.getNumNz())

    def set_options(
        self,
        *,
        time_limit: float,
        rel_gap: float,
        abs_gap: float,
        threads: int,
        seed: int,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Set the limits every run needs; ``extra`` passes further HiGHS options."""
        opts: dict[str, Any] = {
            "time_limit": max(float(time_limit), 1e-3),
            "mip_rel_gap": float(rel_gap),
            "mip_abs_gap": float(abs_gap),
            "threads": int(threads),
            # HiGHS's random_seed is a non-negative int (32-bit).
            "random_seed": int(seed) % 2_147_483_647,
            **dict(extra or {}),
        }
        for key, value in opts.items():
            if self.highs.setOptionValue(key, value) != highspy.HighsStatus.kOk:
                raise SolverError(f"HiGHS rejected option {key}={value!r}")

    def set_start(self, values: Mapping[Any, float]) -> bool:
        """Pass a full assignment (Pyomo var -> value) as the MIP start.

        Every column must be given: HiGHS would otherwise treat the start as
        partial and spend a sub-MIP completing it.
        """
        n = self.num_cols
        idx = np.empty(len(values), dtype=np.int32)
        val = np.empty(len(values), dtype=np.float64)
        for k, (var, x) in enumerate(values.items()):
            idx[k] = self.column(var)
            val[k] = float(x)
        if len(set(idx.tolist())) != n:
            missing = n - len(set(idx.tolist()))
            raise SolverError(f"MIP start misses {missing} of {n} columns")
        status = self.highs.setSolution(len(idx), idx, val)
        self._start_given = status == highspy.HighsStatus.kOk
        return self._start_given

    # ------------------------------------------------------------------ running
    def _on_log(self, event: Any) -> None:
        msg = event.message.rstrip()
        if msg:
            self.log.append(msg)

    def run(
        self,
        on_incumbent: Callable[[float, float, float], None] | None = None,
        on_bound: Callable[[float, float], None] | None = None,
        stop: StopFlag | None = None,
        deadline: float | None = None,
    ) -> HighsRun:
        """Run HiGHS; ``on_incumbent(seconds, objective, bound)`` fires on each new
        incumbent, ``on_bound(seconds, bound)`` whenever the dual bound rises.

        Seconds are measured from the start of this call. The callbacks run on a
        HiGHS thread while it holds the GIL, so they must be quick.

        ``stop`` (an interrupt): HiGHS runs in a helper thread while this one
        waits, and a stop raises HiGHS's own user interrupt from its simplex,
        IPM and MIP interrupt callbacks, so it returns with its incumbent
        (status ``stopped``, reason ``interrupted``); it is never killed mid-LP.
        The dual bound reported is the best one seen during the run.

        ``deadline`` (``time.perf_counter()``): a backstop to HiGHS's own time limit,
        which a long LP inside the MIP (a restart's root LP at N=256) was seen to
        overrun by over a minute; past it (plus :data:`DEADLINE_SLACK_S`) the same
        interrupt callbacks stop HiGHS. A MIP whose root analytic centre (which
        nothing interrupts, :func:`analytic_centre_estimate`, taken
        :data:`SHARED_CORE_MARGIN` times) would end past the deadline is not started:
        status ``stopped``, reason ``not_started``. A run still going
        :data:`ABANDON_AFTER_S` past the deadline (in root work that looks at no
        interrupt) is abandoned: status ``stopped``, reason ``abandoned``, the best bound
        seen and no incumbent (HiGHS's own may hold slack that only :meth:`polish`
        removes, and the session can no longer be used: :attr:`abandoned`).
        """
        if self.abandoned:
            raise SolverError("this HiGHS session's last run was abandoned and may still run")
        start = time.perf_counter()
        h = self.highs
        if deadline is not None and self.is_mip and start + self.root_wait() > deadline:
            # The root's analytic centre cannot be interrupted: a run started now would
            # overrun the deadline (at N=256 by about a minute) to give at best a root bound.
            return HighsRun(status="stopped", reason="not_started", objective=None,
                            dual_bound=None, values=None, start_accepted=None, seconds=0.0,
                            nodes=0, log=[])
        best_bound = -math.inf
        cancel = threading.Event()
        late_at = math.inf if deadline is None else deadline + DEADLINE_SLACK_S

        def user_interrupt(event: Any) -> None:
            if cancel.is_set() or time.perf_counter() > late_at:
                event.interrupt()

        def improving(event: Any) -> None:
            out = event.data_out
            if on_incumbent is not None:
                on_incumbent(
                    time.perf_counter() - start,
                    float(out.objective_function_value),
                    float(out.mip_dual_bound),
                )

        def interrupt(event: Any) -> None:
            nonlocal best_bound
            if cancel.is_set() or time.perf_counter() > late_at:
                event.interrupt()
            bound = float(event.data_out.mip_dual_bound)
            if math.isfinite(bound) and bound > best_bound + 1e-9 * max(1.0, abs(bound)):
                best_bound = bound
                if on_bound is not None:
                    on_bound(time.perf_counter() - start, bound)

        h.cbMipImprovingSolution.subscribe(improving)
        h.cbMipInterrupt.subscribe(interrupt)
        watch = stop is not None or deadline is not None
        if watch:
            h.cbSimplexInterrupt.subscribe(user_interrupt)
            h.cbIpmInterrupt.subscribe(user_interrupt)
        self.log.clear()
        reset_scheduler()
        abandon_at = None if deadline is None else deadline + ABANDON_AFTER_S

        def detach() -> None:
            h.cbMipImprovingSolution.unsubscribe(improving)
            h.cbMipInterrupt.unsubscribe(interrupt)
            if watch:
                h.cbSimplexInterrupt.unsubscribe(user_interrupt)
                h.cbIpmInterrupt.unsubscribe(user_interrupt)

        try:
            if not watch:
                run_status = h.run()
            else:
                run_status = call_stoppable(h.run, stop or StopFlag(), cancel.set,
                                            abandon_at=abandon_at)
        except NativeCallAbandoned:
            # The callbacks stay subscribed: the thread still runs HiGHS, which calls them
            # (and is interrupted by them) once it looks at an interrupt again.
            self.abandoned = True
            return HighsRun(status="stopped", reason="abandoned", objective=None,
                            dual_bound=best_bound if math.isfinite(best_bound) else None,
                            values=None, start_accepted=None,
                            seconds=time.perf_counter() - start, nodes=0, log=list(self.log))
        except BaseException:
            detach()
            raise
        detach()
        seconds = time.perf_counter() - start

        model_status = h.getModelStatus()
        if run_status == highspy.HighsStatus.kError and model_status in (
            highspy.HighsModelStatus.kNotset,
            highspy.HighsModelStatus.kLoadError,
            highspy.HighsModelStatus.kModelError,
        ):
            tail = "; ".join(self.log[-3:]) or h.modelStatusToString(model_status)
            raise SolverError(f"HiGHS refused to run: {tail}")
        info = h.getInfo()
        has_solution = info.primal_solution_status == 2  # 2: feasible
        values = np.asarray(h.getSolution().col_value, dtype=float) if has_solution else None
        objective = float(info.objective_function_value) if has_solution else None
        bound = float(info.mip_dual_bound) if info.valid else None
        if bound is not None and not math.isfinite(bound):
            bound = None
        if math.isfinite(best_bound) and (bound is None or best_bound > bound):
            bound = best_bound  # an interrupted run may report no (or an older) bound
        if model_status == highspy.HighsModelStatus.kOptimal:
            status, reason = "optimal", "optimal"
        elif model_status == highspy.HighsModelStatus.kInfeasible:
            status, reason = "infeasible", "infeasible"
        elif model_status in (
            highspy.HighsModelStatus.kUnbounded,
            highspy.HighsModelStatus.kUnboundedOrInfeasible,
        ):
            status, reason = "unbounded", h.modelStatusToString(model_status)
        elif model_status in _STOPPED:
            status, reason = "stopped", _STOPPED[model_status]
        else:
            status, reason = "error", h.modelStatusToString(model_status)

        accepted: bool | None = None
        if self._start_given:
            text = "\n".join(self.log).lower()
            if _START_OK in text:
                accepted = True
            elif any(p in text for p in _START_BAD):
                accepted = False
        return HighsRun(
            status=status,
            reason=reason,
            objective=objective,
            dual_bound=bound,
            values=values,
            start_accepted=accepted,
            seconds=seconds,
            nodes=int(info.mip_node_count),
            log=list(self.log),
        )

    def polish(self, values: np.ndarray) -> tuple[float, np.ndarray] | None:
        """Fix the integer columns at ``values`` (rounded) and re-solve the LP.

        An incumbent from a HiGHS heuristic may leave continuous variables
        above their tightest values (a bottleneck above every stage time); the
        LP over the continuous variables restores the model's own price of the
        integer assignment. Leaves the session holding that LP. Returns
        (objective, column values), or None if the LP fails.
        """
        if self.abandoned:
            return None
        h = self.highs
        lp = h.getLp()
        ints = np.array(
            [k for k, t in enumerate(lp.integrality_) if t != highspy.HighsVarType.kContinuous],
            dtype=np.int32,
        )
        if ints.size:
            fixed = np.round(values[ints])
            h.changeColsBounds(len(ints), ints, fixed, fixed)
            h.changeColsIntegrality(
                len(ints), ints, np.full(len(ints), highspy.HighsVarType.kContinuous)
            )
        h.clearSolver()
        # The MIP may have used up its time limit; this LP is tiny.
        h.setOptionValue("time_limit", highspy.kHighsInf)
        reset_scheduler()
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        return float(h.getInfo().objective_function_value), np.asarray(
            h.getSolution().col_value, dtype=float
        )

    def load(self, values: np.ndarray) -> None:
        """Write column values back into the Pyomo variables."""
        for vid, col in self._col.items():
            var = self._vars.get(vid)
            if var is not None:
                var.set_value(float(values[col]), skip_validation=True)
