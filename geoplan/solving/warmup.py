"""Compile the numba kernels before a budget starts (issue: the first run must tell the truth).

The compiled kernels (batch evaluator, exact split, B&B, the memetic
operators, CP-SAT's relaxation) are cached on disk by numba, but a cold cache
costs 10-30 s of compilation on busy cores. :func:`warm_up` runs a solver
once on a tiny built-in instance, which compiles (or loads from the cache)
every kernel it calls with the argument types real instances give, so the
solve that follows measures search, not compilation. The seconds it took are
reported separately (``warmup_s`` in the result) and never charged to the
budget.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

__all__ = ["tiny_instance", "warm_up", "warmed"]

_lock = threading.RLock()  # a solver may solve() others inside its warm-up (portfolio)
_done: set[str] = set()


def tiny_instance() -> Any:
    """A 3-GPU, 4-layer, fully linked instance (every kernel type, nothing to search)."""
    from geoplan.model.instance import Instance

    gpus = [
        {"id": f"g{k}", "site": "A" if k < 2 else "B", "peak_tflops": 100.0 + 20 * k,
         "memory_gb": 40.0, "idle_w": 50.0, "active_w": 300.0 + 10 * k}
        for k in range(3)
    ]
    links = [
        {"src": f"g{i}", "dst": f"g{j}", "bandwidth_gbps": 10.0 + i + j, "latency_ms": 1.0 + i}
        for i in range(3) for j in range(3) if i != j
    ]
    return Instance.from_dict({
        "name": "warm-up",
        "gpus": gpus,
        "links": links,
        "model": {"layers": 4, "hidden": 512, "seq_len": 256, "vocab": 1000},
        "training": {"batch_size": 8, "micro_batch_size": 1},
        # No normalisers: resolving them compiles the baseline's pricer too.
        "objective": {"lambda": 0.5},
    })


def warmed(solver: str) -> bool:
    """Whether :func:`warm_up` already ran for ``solver`` in this process."""
    return solver in _done


#: Parameters that end a warm-up run without the budget (random-restart restarts until
#: its time limit otherwise: the warm-up took the whole 600 s).
_PARAMS: dict[str, dict[str, Any]] = {"random-restart": {"max_restarts": 4}}

#: Solvers that run others, whose kernels a tiny solve of their own may not reach (the
#: portfolio proves the tiny instance before its memetic run, which may run in a forked
#: process that inherits what is compiled here). Solvers that run others only with some
#: parameters say so through ``SolverParams.runs_solvers``.
_COMPONENTS: dict[str, tuple[str, ...]] = {"portfolio": ("memetic", "milp")}

#: Packages whose solvers call the project's compiled kernels.
_PROJECT = ("geoplan", "formulations", "heuristics")


def warm_up(solver: str) -> float:
    """Run ``solver`` once on :func:`tiny_instance` (once per process); seconds spent.

    Deterministic and budget-free: the tiny instance is solved to completion by
    every solver (its search space has 60 plans), so the warm-up never depends
    on the machine's load. Solvers from other packages (plugins, test doubles)
    are not warmed up: their kernels, if any, are theirs to compile.
    """
    with _lock:
        if solver in _done:
            return 0.0
        _done.add(solver)
        from geoplan.solving.core import get_solver, solve

        module = getattr(get_solver(solver).load(), "__module__", "") or ""
        if module.split(".")[0] not in _PROJECT:
            return 0.0

        t0 = time.perf_counter()
        if get_solver(solver).space == "hybrid":
            # The batch loop's parallel forms, which a one-thread tiny solve never compiles.
            from geoplan.cost.hybrid_batch import warm_up as _hybrid_batch

            _hybrid_batch()
        # Any error here recurs in the real solve that follows, which reports it.
        with contextlib.suppress(Exception):
            solve(tiny_instance(), solver, seed=0, time_limit=600.0, threads=1, warm_up=False,
                  params=_PARAMS.get(solver))
        if get_solver(solver).space != "hybrid":
            # The node-run bound's kernels: the tiny instance has no nodes to call them.
            from geoplan.cost.node_runs import warm_up as _node_runs

            with contextlib.suppress(Exception):
                _node_runs()
        for other in _COMPONENTS.get(solver, ()):
            warm_up(other)
        return time.perf_counter() - t0
