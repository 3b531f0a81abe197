"""The improved Metis baseline (paper 6.2): a search over GPU subsets.

For every GPU subset it considers, the Metis-default machinery of
:mod:`geoplan.cost.baseline` picks the stage order (fixed ordering rules) and the
FLOPS-proportional, memory-repaired split (:func:`~geoplan.cost.baseline.best_order_plan`);
candidates are ranked by T_iter alone ("energy off"). Subsets are

* every non-empty subset of at most min(N, L) GPUs when N <= ``exhaustive_max`` (7), or
* sampled at random beyond: size uniform in 1..min(N, L), members uniform without
  replacement, duplicates skipped, until ``samples`` distinct subsets, the time
  budget or the whole subset space is used up.

The Metis-default plan is always the first candidate, so the result is never
slower than ``metis-default``. The core prices the returned plan under the
instance's lambda; the trace reports that objective for each new incumbent.

Parameters (:class:`MetisImprovedParams`, ``--param KEY=VALUE``): ``exhaustive_max``
(int, default 7), ``samples`` (int >= 1 or none for no cap, default 10000; sampling
mode only).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from math import comb
from typing import Any, ClassVar

import numpy as np

from geoplan.cost import evaluate
from geoplan.cost.baseline import (
    best_order_plan,
    metis_default_plan,
    solve_metis_default,
    time_only_cost,
)
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import NoParams, SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, TraceRow

__all__ = [
    "DEFAULT_SAMPLES",
    "EXHAUSTIVE_MAX",
    "METIS_DEFAULT",
    "SPEC",
    "MetisImprovedParams",
    "solve_metis_improved",
    "subset_count",
]

EXHAUSTIVE_MAX = 7
DEFAULT_SAMPLES = 10_000
_PROGRESS_EVERY = 256


def subset_count(n_gpus: int, layers: int) -> int:
    """Number of GPU subsets that can form a plan: sum_{k=1}^{min(N,L)} C(N, k)."""
    return sum(comb(n_gpus, k) for k in range(1, min(n_gpus, layers) + 1))


@dataclass(frozen=True)
class MetisImprovedParams(SolverParams):
    """Parameters of ``metis-improved``."""

    LABEL: ClassVar[str] = "metis-improved"

    exhaustive_max: int = param(EXHAUSTIVE_MAX, "try every GPU subset when N is at most this",
                                at_least=1)
    samples: int | None = param(DEFAULT_SAMPLES, "distinct subsets sampled beyond "
                                "exhaustive_max (none: no cap)", at_least=1)


def _exhaustive(n_gpus: int, k_max: int) -> Iterator[tuple[int, ...]]:
    """All subsets of 1..k_max GPUs, by size then lexicographically."""
    for k in range(1, k_max + 1):
        yield from itertools.combinations(range(n_gpus), k)


def _sampled(rng: np.random.Generator, n_gpus: int, k_max: int) -> Iterator[tuple[int, ...]]:
    """Endless random subsets: size uniform in 1..k_max, members uniform (may repeat)."""
    while True:
        k = int(rng.integers(1, k_max + 1))
        yield tuple(sorted(int(g) for g in rng.choice(n_gpus, size=k, replace=False)))


def solve_metis_improved(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``metis-improved``; see the module docstring for the rules."""
    p = MetisImprovedParams.parse(options.params)
    exhaustive_max, samples = p.exhaustive_max, p.samples
    rng = np.random.default_rng(options.seed)
    c = instance.coefficients()
    n_gpus, layers = instance.n, instance.layers
    k_max = min(n_gpus, layers)
    total = subset_count(n_gpus, layers)
    exhaustive = n_gpus <= exhaustive_max

    trace: list[TraceRow] = []
    best_t = float("inf")
    best_plan: Plan | None = None

    def improve(t: float, plan: Plan) -> None:
        nonlocal best_t, best_plan
        best_t, best_plan = t, plan
        seconds = options.elapsed()
        objective = evaluate(instance, plan).objective
        trace.append(TraceRow(seconds, objective, None))
        options.callbacks.on_improvement(seconds, objective, None)

    default = metis_default_plan(instance)
    default_t = None
    if default is not None:
        default_t = time_only_cost(c, default.gpu_indices(instance), default.layer_counts)
        improve(default_t, default)

    source = _exhaustive(n_gpus, k_max) if exhaustive else _sampled(rng, n_gpus, k_max)
    seen: set[tuple[int, ...]] = set()
    draws = feasible = 0
    timed_out = False
    cap = total if exhaustive or samples is None else min(samples, total)
    for subset in source:
        if len(seen) >= cap:
            break
        if options.remaining() <= 0:
            timed_out = True
            break
        draws += 1
        if subset in seen:
            continue
        seen.add(subset)
        found = best_order_plan(instance, list(subset), c)
        if found is not None:
            feasible += 1
            t, order, counts = found
            if t < best_t:  # strict: earlier candidates (the default first) win ties
                improve(t, Plan.from_indices(instance, order, counts))
        if len(seen) % _PROGRESS_EVERY == 0:
            options.callbacks.on_progress(
                {"subsets": len(seen), "of": total, "best_t_iter_ms": best_t}
            )

    info: dict[str, Any] = {
        "mode": "exhaustive" if exhaustive else "sampled",
        "subsets_tried": len(seen),
        "subsets_total": total,
        "subsets_feasible": feasible,
        "draws": draws,
        "complete": len(seen) == total,
        "timed_out": timed_out,
        "default_t_iter_ms": default_t,
        "t_iter_ms_ranked": None if best_plan is None else best_t,
    }
    if best_plan is None:
        return Outcome(None, "no_solution", trace=trace, info=info,
                       message="no GPU subset gives a feasible plan by the Metis rules")
    return Outcome(best_plan, "feasible", trace=trace, info=info)


SPEC = SolverSpec("metis-improved", solve_metis_improved, "baseline",
                  "Metis improved: GPU subsets (exhaustive up to 7, sampled beyond)",
                  params=MetisImprovedParams)
#: ``metis-default`` lives in geoplan.cost.baseline (other solvers use its plan).
METIS_DEFAULT = SolverSpec(
    "metis-default", solve_metis_default, "baseline",
    "Metis default: every usable GPU, FLOPS-proportional split, rule-based order",
    params=NoParams)
