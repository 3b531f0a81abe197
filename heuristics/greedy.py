"""Greedy constructive plan: a deterministic, rule-based reference on the full objective.

Rule: from every GPU as the first stage (fastest effective FLOPS first), grow a
chain one GPU at a time, appending the unused GPU, linked both ways to the
current tail, whose chain has the best objective after splitting the layers;
record the chain at every length 1..min(N, L) and keep the best plan seen.
When no candidate chain is feasible yet (memory), the candidate with the most
effective memory is appended (then the fastest, then the lowest index), since
memory is what makes longer chains feasible.

Each chain is split by the exact optimal split for its fixed order
(:class:`geoplan.cost.split.Splitter`, on the instance's objective) when that
module is importable, otherwise by :func:`geoplan.cost.baseline.proportional_split`
(repaired to the memory caps) and priced by the batch evaluator.

Parameters (:class:`GreedyParams`, ``--param KEY=VALUE``): ``split`` (``"exact"``, the default when
available, or ``"proportional"``), ``starts`` (how many first GPUs to try,
fastest first; default all). The result does not depend on the seed; the time
budget only truncates the list of starts after the first (``info["complete"]``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from geoplan.cost.baseline import proportional_split
from geoplan.cost.batch import BatchEvaluator
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, TraceRow

__all__ = ["SPEC", "GreedyParams", "greedy_chains", "make_splitter", "solve"]

#: order -> (objective, counts), or None when no split of that order is feasible.
SplitFn = Callable[[Sequence[int]], tuple[float, tuple[int, ...]] | None]


def _exact_splitter(instance: Instance) -> SplitFn | None:
    try:
        from geoplan.cost.split import Splitter
    except ImportError:
        return None
    splitter = Splitter(instance)

    def split(order: Sequence[int]) -> tuple[float, tuple[int, ...]] | None:
        res = splitter.split(order)
        return None if res is None else (res.objective, res.counts)

    return split


def _proportional_splitter(instance: Instance) -> SplitFn:
    c = instance.coefficients()
    ev = BatchEvaluator(instance)
    L = instance.layers
    caps = {q: (c.layer_caps(q, last=False), c.layer_caps(q, last=True))
            for q in range(1, min(instance.n, L) + 1)}

    def split(order: Sequence[int]) -> tuple[float, tuple[int, ...]] | None:
        q = len(order)
        if q > L:
            return None
        mid, last = caps[q]
        cap = [min(L, int(mid[g])) for g in order]
        cap[-1] = min(L, int(last[order[-1]]))
        counts = proportional_split(1.0 / c.comp_ms[list(order)], L, cap)
        if counts is None:
            return None
        x = np.repeat(np.asarray(order, dtype=np.int64), counts)
        f = float(ev.evaluate(x).objective[0])
        return (f, tuple(counts)) if np.isfinite(f) else None

    return split


def make_splitter(instance: Instance, method: str = "exact") -> tuple[SplitFn, str]:
    """The split function for ``method`` and the method actually used."""
    if method == "exact":
        fn = _exact_splitter(instance)
        if fn is not None:
            return fn, "exact"
    return _proportional_splitter(instance), "proportional"


def greedy_chains(
    instance: Instance,
    first: int,
    split: SplitFn,
    over: Callable[[], bool] | None = None,
) -> list[tuple[float, list[int], tuple[int, ...]]]:
    """The feasible plans (objective, order, counts) of the chain grown from GPU ``first``.

    ``over()`` true (the budget spent, or an interrupt) stops the growth once a
    feasible plan is known (a chain costs seconds at N=256).
    """
    c = instance.coefficients()
    q_max = min(instance.n, instance.layers)
    linked = instance.has_link & instance.has_link.T
    chain = [first]
    out: list[tuple[float, list[int], tuple[int, ...]]] = []
    found = split(chain)
    if found is not None:
        out.append((found[0], list(chain), found[1]))
    while len(chain) < q_max:
        if out and over is not None and over():
            break
        used = set(chain)
        best_key: tuple[float, float, float, int] | None = None
        best_found = None
        for g in range(instance.n):
            if g in used or not linked[chain[-1], g]:
                continue
            found = split([*chain, g])
            f = float("inf") if found is None else found[0]
            key = (f, -float(c.mem_cap[g]), float(c.comp_ms[g]), g)
            if best_key is None or key < best_key:
                best_key, best_found = key, found
        if best_key is None:
            break  # the tail has no two-way link to any unused GPU
        chain.append(best_key[3])
        if best_found is not None:
            out.append((best_found[0], list(chain), best_found[1]))
    return out


@dataclass(frozen=True)
class GreedyParams(SolverParams):
    """Parameters of ``greedy``."""

    LABEL: ClassVar[str] = "greedy"

    split: Literal["exact", "proportional"] = param(
        "exact", "split of each chain: the exact optimal split, or FLOPS-proportional")
    starts: int | None = param(None, "first GPUs to try, fastest first (none: all)", at_least=1)


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``greedy``; see the module docstring."""
    p = GreedyParams.parse(options.params)
    method = p.split
    starts = instance.n if p.starts is None else p.starts
    split, used_method = make_splitter(instance, method)
    c = instance.coefficients()
    firsts = sorted(range(instance.n), key=lambda g: (c.comp_ms[g], g))[:starts]

    trace: list[TraceRow] = []
    best: tuple[float, list[int], tuple[int, ...]] | None = None
    tried = 0
    for first in firsts:
        if tried and options.remaining() <= 0:
            break  # the first start always runs, so a plan comes back whenever it can
        tried += 1
        for cand in greedy_chains(instance, first, split,
                                  over=lambda: options.remaining() <= 0):
            if best is None or cand[0] < best[0]:  # strict: earlier chains win ties
                best = cand
                seconds = options.elapsed()
                trace.append(TraceRow(seconds, cand[0], None))
                options.callbacks.on_improvement(seconds, cand[0], None)
        options.callbacks.on_progress({"start": tried, "of": len(firsts)})

    info: dict[str, Any] = {
        "split": used_method,
        "starts_tried": tried,
        "complete": tried == len(firsts),
    }
    if best is None:
        return Outcome(None, "no_solution", trace=trace, info=info,
                       message="no greedy chain gives a feasible plan")
    objective, order, counts = best
    # model_objective lets the core cross-check the split's own price against the evaluator.
    return Outcome(Plan.from_indices(instance, order, counts), "feasible",
                   model_objective=objective, trace=trace, info=info)


SPEC = SolverSpec("greedy", solve, "heuristic", "greedy constructive plan", params=GreedyParams)
