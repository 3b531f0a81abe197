"""``hybrid-grid``: a Metis/Sailor-style baseline over uniform (DP x TP x PP) grids.

Search (docs/hybrid-heuristics.md relates it to Metis and Sailor):

* device groups by class (type, fractions, site) and node (:mod:`.groups`);
* for each TP degree t (a power of two <= ``training.max_tp`` such that some class
  holds t GPUs), TP groups are cut node by node inside each class (so a TP group
  stays in a node when it can and never leaves a site) and ranked by speed
  t x TFLOPS (ties: class, then GPU index);
* for each DP degree d and pipeline depth p with d p TP groups available and p <= L,
  two placements of d p groups: *fastest* (the d p fastest groups) and *packed*
  (sites in descending order of their TP groups' total speed, fastest groups of a
  site first); the chosen groups are ordered site by site (sites in order of their
  fastest chosen group) and cut into p stages of d consecutive groups, so that a
  stage's replicas share a site and class where the counts allow;
* for each u in ``micro_batch_choices`` with d | u (equal shares u / d, as Metis's
  intra-stage plans use; Sailor's unequal per-GPU micro-batches are not searched),
  each ZeRO stage in ``zero_choices`` and each recompute choice (the same for every
  stage): layers in proportion to each stage's compute rate
  d t min_r F_r, repaired to the memory caps
  (:func:`geoplan.cost.baseline.proportional_split`), priced by the shared kernel;
  the best feasible plan is kept (strictly better only: the first found wins ties).

Deterministic (the seed is unused); the budget (``options.remaining()``) is checked
before every grid shape, so a time-out returns the best plan so far
(``info["complete"]`` false). ``refine`` (default off, not part of the baseline)
re-splits the best ``refine`` plans with the fast split-and-share DP
(:func:`.split.solve_split`, ``exact=False``). :func:`grid_plans` returns the best K
distinct plans, to seed other hybrid searches.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from geoplan.cost.baseline import proportional_split
from geoplan.cost.hybrid_kernel import price_hybrid_compiled
from geoplan.cost.kernel import FEASIBLE
from geoplan.model.hybrid import RECOMPUTE, HybridPlan, HybridStage, Replica
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, TraceRow
from heuristics.hybrid.groups import DeviceGroup, device_groups, tp_groups
from heuristics.hybrid.split import StageGroups, _memory_cap, evaluator_of, solve_split

__all__ = ["SPEC", "GridCandidate", "GridParams", "grid_candidates", "grid_plans",
           "placements", "solve_grid"]


@dataclass(frozen=True)
class GridParams(SolverParams):
    """Parameters of ``hybrid-grid``."""

    LABEL: ClassVar[str] = "hybrid-grid"

    refine: int = param(0, "re-split the best this many grid plans with the fast "
                        "split-and-share DP (0: the pure baseline)", at_least=0)


@dataclass(frozen=True)
class GridCandidate:
    """One priced grid plan: its objective and where it came from."""

    objective: float
    plan: HybridPlan
    d: int
    t: int
    p: int
    placement: str


# --------------------------------------------------------------------------- placement


def _ranked_tp_groups(instance: Instance, t: int, groups: Sequence[DeviceGroup]
                      ) -> list[tuple[float, int, tuple[int, ...]]]:
    """(speed t F, site, GPUs) of every TP group of t GPUs, fastest first."""
    by_class: dict[int, list[DeviceGroup]] = {}
    for g in groups:
        by_class.setdefault(g.cls, []).append(g)
    out = []
    for k in sorted(by_class):
        cls = by_class[k]
        for grp in tp_groups(cls, t):
            out.append((t * cls[0].tflops, cls[0].site, k, grp))
    out.sort(key=lambda x: (-x[0], x[2], x[3]))
    return [(f, s, grp) for f, s, _, grp in out]


def _site_ordered(chosen: list[tuple[float, int, tuple[int, ...]]]
                  ) -> list[tuple[float, int, tuple[int, ...]]]:
    order: dict[int, int] = {}
    for _, s, _ in chosen:
        order.setdefault(s, len(order))
    return sorted(chosen, key=lambda x: order[x[1]])  # stable: speed order inside a site


def placements(ranked: list[tuple[float, int, tuple[int, ...]]], d: int, p: int
               ) -> list[tuple[str, list[StageGroups]]]:
    """The *fastest* and *packed* placements of p stages of d TP groups (deduplicated)."""
    need = d * p
    if need > len(ranked):
        return []
    fastest = _site_ordered(ranked[:need])
    total: dict[int, float] = {}
    for f, s, _ in ranked:
        total[s] = total.get(s, 0.0) + f
    sites = sorted(total, key=lambda s: (-total[s], s))
    packed = [x for s in sites for x in ranked if x[1] == s][:need]
    out: list[tuple[str, list[StageGroups]]] = []
    seen: set[tuple[tuple[int, ...], ...]] = set()
    for name, chosen in (("fastest", fastest), ("packed", packed)):
        key = tuple(x[2] for x in chosen)
        if key in seen:
            continue
        seen.add(key)
        t = len(chosen[0][2])
        stages = [StageGroups(t, tuple(x[2] for x in chosen[q * d:(q + 1) * d]))
                  for q in range(p)]
        out.append((name, stages))
    return out


# --------------------------------------------------------------------------- pricing


def _arrays(stages: Sequence[StageGroups], layers: Sequence[int], rec: int, u: int
            ) -> tuple[Any, ...]:
    q = len(stages)
    d = len(stages[0].replicas)
    t = stages[0].tp
    gpus = np.array([x for st in stages for r in st.replicas for x in r], dtype=np.int64)
    return (q, np.asarray(layers, dtype=np.int64), np.full(q, t, dtype=np.int64),
            np.full(q, rec, dtype=np.int64), np.arange(0, q * d + 1, d, dtype=np.int64),
            np.full(q * d, u // d, dtype=np.int64),
            np.arange(0, q * d * t + 1, t, dtype=np.int64), gpus)


def _plan(instance: Instance, stages: Sequence[StageGroups], layers: Sequence[int], rec: int,
          u: int, z: int) -> HybridPlan:
    ids = instance.gpu_ids
    d = len(stages[0].replicas)
    return HybridPlan(tuple(
        HybridStage(int(n), st.tp, tuple(Replica(tuple(ids[x] for x in r), u // d)
                                         for r in st.replicas), RECOMPUTE[rec])
        for n, st in zip(layers, stages, strict=True)), u, z)


def grid_candidates(instance: Instance, stop: Callable[[], bool] = lambda: False,
                    stats: dict[str, Any] | None = None) -> Iterator[GridCandidate]:
    """Every feasible grid plan, in search order (module docstring); ``stop`` is asked
    before each grid shape and ends the search when true (``stats["complete"]`` False)."""
    ev = evaluator_of(instance)
    inst, c = ev.instance, ev.coefficients
    tr = inst.training
    n_layers = c.n_layers
    us = sorted(tr.micro_batch_choices or (tr.micro_batch_size,))
    zs = sorted(tr.zero_choices or (tr.zero,))
    recs = [RECOMPUTE.index(r) for r in (tr.recompute_choices or RECOMPUTE)]
    wargs = ev.weights.args
    kargs = c.kernel_args
    groups = device_groups(inst)
    stats = {} if stats is None else stats
    caps_seen: dict[tuple[Any, ...], int] = {}

    def mem_cap(st: StageGroups, s: int, rec: int, z: int, q_count: int, last: bool) -> int:
        # Equal shares: the stage's cap is that of its smallest memory; cached by it.
        limit = float(min(c.mem_cap[list(r)].min() for r in st.replicas))
        key = (limit, st.tp, len(st.replicas), s, rec, z, q_count, last)
        got = caps_seen.get(key)
        if got is None:
            one = StageGroups(st.tp, (min(st.replicas, key=lambda r: c.mem_cap[list(r)].min()),))
            got = caps_seen[key] = _memory_cap(ev, one, (s,), rec, z, q_count, last, n_layers,
                                               d=len(st.replicas))
        return got

    stats.update(shapes=0, priced=0, feasible=0, complete=True)
    t = 1
    while t <= tr.max_tp:
        ranked = _ranked_tp_groups(inst, t, groups)
        for d in range(1, len(ranked) + 1):
            dus = [u for u in us if u % d == 0]
            if not dus:
                continue
            for p in range(1, min(n_layers, len(ranked) // d) + 1):
                if stop():
                    stats["complete"] = False
                    return
                stats["shapes"] += 1
                for name, stages in placements(ranked, d, p):
                    rate = [d * t * float(min(c.tflops[list(r)].min() for r in st.replicas))
                            for st in stages]
                    for u in dus:
                        for z in zs:
                            for rec in recs:
                                caps = [mem_cap(st, u // d, rec, z, p, q == p - 1)
                                        for q, st in enumerate(stages)]
                                layers = proportional_split(rate, n_layers, caps)
                                if layers is None:
                                    continue
                                stats["priced"] += 1
                                status, _, _, obj = price_hybrid_compiled(
                                    *_arrays(stages, layers, rec, u), u, z, *kargs, *wargs)
                                if status != FEASIBLE:
                                    continue
                                stats["feasible"] += 1
                                yield GridCandidate(float(obj),
                                                    _plan(inst, stages, layers, rec, u, z),
                                                    d, t, p, name)
        t *= 2


def _refined(instance: Instance, cand: GridCandidate) -> GridCandidate:
    """The candidate re-split by the fast split-and-share DP (kept if not better)."""
    ids = {g: i for i, g in enumerate(instance.gpu_ids)}
    plan = cand.plan
    stages = [StageGroups(s.tp, tuple(tuple(ids[g] for g in r.gpus) for r in s.replicas))
              for s in plan.stages]
    assert plan.micro_batch_size is not None and plan.zero is not None
    got = solve_split(instance, stages, plan.micro_batch_size, plan.zero, exact=False)
    if got is None or not got.objective < cand.objective:
        return cand
    return GridCandidate(got.objective, got.plan, cand.d, cand.t, cand.p,
                         cand.placement + "+split")


def grid_plans(instance: Instance, k: int = 8, *, refine: bool = False,
               stop: Callable[[], bool] = lambda: False) -> list[GridCandidate]:
    """The best ``k`` distinct grid plans, best first (ties: search order); ``refine``
    re-splits each with the fast split-and-share DP."""
    heap: list[tuple[float, int, GridCandidate]] = []  # max-heap by objective via -obj
    for m, cand in enumerate(grid_candidates(instance, stop)):
        item = (-cand.objective, -m, cand)
        if len(heap) < k:
            heapq.heappush(heap, item)
        elif item[:2] > heap[0][:2]:
            heapq.heapreplace(heap, item)
    out = [x[2] for x in sorted(heap, key=lambda x: (-x[0], -x[1]))]
    if refine:
        out = sorted((_refined(instance, x) for x in out), key=lambda x: x.objective)
    return out


# --------------------------------------------------------------------------- the solver


def solve_grid(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``hybrid-grid``; see the module docstring."""
    p = GridParams.parse(options.params)
    trace: list[TraceRow] = []
    best: GridCandidate | None = None
    stats: dict[str, Any] = {}
    top: list[GridCandidate] = []

    def stop() -> bool:
        return options.remaining() <= 0 or options.stopped()

    def improved(cand: GridCandidate) -> None:
        seconds = options.elapsed()
        trace.append(TraceRow(seconds, cand.objective, None))
        options.callbacks.on_improvement(seconds, cand.objective, None)

    for cand in grid_candidates(instance, stop, stats):
        if best is None or cand.objective < best.objective:
            best = cand
            improved(cand)
        if p.refine:
            top = sorted([*top, cand], key=lambda x: x.objective)[:p.refine]
    if best is not None and p.refine:
        for cand in top:
            if stop():
                break
            r = _refined(instance, cand)
            if r.objective < best.objective:
                best = r
                improved(r)
    info: dict[str, Any] = {**stats, "timed_out": not stats.get("complete", True)}
    if best is None:
        return Outcome(None, "no_solution", trace=trace, info=info,
                       message="no uniform grid gives a feasible plan")
    info.update(d=best.d, t=best.t, p=best.p, placement=best.placement)
    assert math.isfinite(best.objective)
    return Outcome(best.plan, "feasible", model_objective=best.objective, trace=trace,
                   info=info)


SPEC = SolverSpec("hybrid-grid", solve_grid, "baseline",
                  "Metis/Sailor-style grid: uniform DP x TP x PP, equal shares, "
                  "FLOPS-proportional layers", params=GridParams, space="hybrid")
