"""The memetic algorithm over hybrid plans: solver ``hybrid-memetic`` (docs/hybrid-memetic.md).

GeoTrain's loop (paper section 5, :mod:`heuristics.memetic`) on the genomes of
:mod:`heuristics.hybrid.encoding`: tournament selection, best-cut crossover with
repair, mutation of the offspring no better than the population best (reverted
when infeasible), a local search on a share of them, duplicate removal and
elitist replacement; restarts keep the elite. Seeding makes it never worse than
the pipeline space: the pipeline-space ``memetic`` runs first for
``pipeline_share`` of the budget and its plan enters as an elite, with the
warm starts, the grid plans of :mod:`heuristics.hybrid.grid` when that module
exists, hybrid expansions of the pipeline plan and random node-packed genomes.
Every price comes from the shared kernel (:mod:`heuristics.hybrid.encoding`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from geoplan.model.hybrid import HybridPlan
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions
from geoplan.solving.core import solve as run_solver
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, TraceRow
from heuristics.hybrid.encoding import Genome, HybridSpace, from_plan, price, to_plan
from heuristics.hybrid.grid import grid_plans
from heuristics.hybrid.operators import (
    crossover_children,
    crossover_cuts,
    expansions,
    local_search,
    mutate,
    random_genome,
    regroupings,
)
from heuristics.hybrid.split import StageGroups, solve_split
from heuristics.memetic.selection import tournament

__all__ = ["SPEC", "HybridMemeticParams", "HybridMemeticResult", "run_hybrid_memetic",
           "solve"]


@dataclass(frozen=True)
class HybridMemeticParams(SolverParams):
    """Parameters of ``hybrid-memetic`` (docs/hybrid-memetic.md explains the choices)."""

    population: int = param(60, "population size P", at_least=2)
    tournament: int = param(3, "tournament size k", at_least=1)
    elite: int = param(2, "elite individuals E kept every generation (< population)",
                       at_least=1)
    ls_rate: float = param(0.3, "share of offspring improved by the local search",
                           at_least=0.0, at_most=1.0)
    ls_steps: int = param(64, "improving moves per local search at most", at_least=0)
    p_fall: float = param(0.1, "probability that a crossover tries every cut",
                          at_least=0.0, at_most=1.0)
    max_cuts: int = param(8, "cuts priced per crossover at most (drawn from the candidates)",
                          at_least=1)
    pipeline_share: float = param(
        0.3, "share of the budget for the pipeline-space memetic seed (0: no such seed)",
        at_least=0.0, below=1.0)
    pipeline_solver: Literal["auto", "memetic", "portfolio"] = param(
        "auto", "the pipeline-space seed's solver: memetic, portfolio (memetic, then the "
        "exact MILP from its plan: the pipeline optimum where it is provable in the share) "
        "or auto (portfolio up to 32 GPUs, else memetic)")
    pipeline_generations: int | None = param(
        None, "cap on the pipeline seed's generations (none: its budget share decides)",
        at_least=0)
    max_generations: int | None = param(
        None, "generations over all runs (none: no cap; with a cap a seed gives one run)",
        at_least=0)
    no_improvement: int = param(
        60, "generations without a new best that end a run (a restart follows)",
        at_least=1)
    stall_restarts: int = param(
        8, "runs in a row without a new best that end the search", at_least=1)
    grid_share: float = param(
        0.25, "share of the remaining budget the grid seeds may take", above=0.0, at_most=1.0)
    replacement: Literal["generational", "improving"] = param(
        "generational", "offspring replace the P - E worst, or only those they beat")
    grid_seeds: bool = param(True, "seed with heuristics.hybrid.grid.grid_plans")
    split_rate: float = param(
        0.1, "share of the locally searched offspring first re-split by "
        "heuristics.hybrid.split", at_least=0.0, at_most=1.0)
    init_draws: int = param(40, "random genomes drawn per population place at most",
                            at_least=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.elite < self.population:
            from geoplan.errors import InputError

            raise InputError("params.elite", self.elite, "must lie in 1..population-1")

    LABEL: ClassVar[str] = "hybrid-memetic"
    ALIASES: ClassVar[dict[str, str]] = {
        "P": "population", "k": "tournament", "E": "elite", "r_ls": "ls_rate",
        "w": "no_improvement", "G_max": "max_generations",
    }


@dataclass
class HybridMemeticResult:
    """What a run found: the best genome and plan, its objective, the trace and counts."""

    best: Genome | None = None
    objective: float = math.inf
    plan: HybridPlan | None = None
    trace: list[TraceRow] = field(default_factory=list)
    generations: int = 0
    restarts: int = 0
    evaluations: int = 0
    time_to_best_s: float | None = None
    runtime_s: float = 0.0
    stop_reason: str = ""
    history: list[tuple[int, float]] = field(default_factory=list)  # (generation, best)
    seeds: dict[str, Any] = field(default_factory=dict)
    pipeline: dict[str, Any] = field(default_factory=dict)
    warm_start_accepted: bool | None = None

    def info(self) -> dict[str, Any]:
        pipe = self.pipeline.get("objective")
        d: dict[str, Any] = {
            "generations": self.generations,
            "restarts": self.restarts,
            "evaluations": self.evaluations,
            "time_to_best_s": None if self.time_to_best_s is None
            else round(self.time_to_best_s, 6),
            "runtime_s": round(self.runtime_s, 6),
            "stop_reason": self.stop_reason,
            "pipeline_seed": self.pipeline,
            "pipeline_objective": pipe,
            # Relative improvement over the pipeline seed (0: none, null: no such seed).
            "improvement_over_pipeline": None if pipe is None or not math.isfinite(
                self.objective) else (pipe - self.objective) / pipe,
            "seeds": self.seeds,
        }
        if self.warm_start_accepted is not None:
            d["warm_start_accepted"] = self.warm_start_accepted
        return d


class _Search:
    """The population, the best genome found and the bookkeeping of one call."""

    def __init__(self, space: HybridSpace, rng: np.random.Generator,
                 params: HybridMemeticParams, start: float, deadline: float,
                 options: SolveOptions | None, res: HybridMemeticResult) -> None:
        self.space, self.rng, self.params = space, rng, params
        self.start, self.deadline, self.options, self.res = start, deadline, options, res
        self.pop: list[Genome] = []
        self.obj = np.empty(0)
        self.splitter = _splitter(space)
        self.saturated = False  # the last fill found fewer than P distinct feasible genomes

    # ----------------------------------------------------------------- budget
    def out_of_time(self) -> bool:
        if self.options is not None and self.options.stopped():
            return True
        return time.perf_counter() >= self.deadline

    # ----------------------------------------------------------------- pricing
    def price(self, genomes: Sequence[Genome]) -> np.ndarray:
        self.res.evaluations += len(genomes)
        return price(self.space, genomes)

    def improve(self, g: Genome, value: float, split: bool = False) -> tuple[Genome, float]:
        """The local search of ``g`` (after the split-and-share DP when ``split`` and
        :mod:`heuristics.hybrid.split` is present), kept only if no worse. An infeasible
        ``g`` may come back feasible (any feasible neighbour improves on it)."""
        if split:
            got = self.splitter(g)
            if got is not None and got[1] < value:
                g, value = got
        if self.params.ls_steps == 0:
            return g, value
        h, v = local_search(self.space, g, self.params.ls_steps)
        return (h, v) if v <= value else (g, value)

    def offer(self, g: Genome, value: float) -> None:
        """Record ``g`` if it beats the best found so far."""
        if value < self.res.objective:
            now = time.perf_counter() - self.start
            self.res.best, self.res.objective = g, value
            self.res.time_to_best_s = now
            self.res.trace.append(TraceRow(now, value, None))
            if self.options is not None:
                self.options.callbacks.on_improvement(now, value, None)

    # ----------------------------------------------------------------- population
    def fill(self, seeds: Iterable[Genome], keep: Sequence[tuple[Genome, float]] = ()
             ) -> dict[str, int]:
        """A new population: ``keep`` (priced), the feasible ``seeds`` and their local
        search results, then random genomes until P distinct feasible ones (or the draws
        or the time run out); sorted best first."""
        P = self.params.population
        members: dict[Genome, float] = dict(keep)
        seeds = [s for s in seeds if s not in members]
        counts = {"seeds": len(seeds), "seeds_feasible": 0, "random_drawn": 0,
                  "random_feasible": 0, "random_duplicates": 0}
        if seeds:
            values = self.price(seeds)
            for g, v in zip(seeds, values.tolist(), strict=True):
                if math.isfinite(v):
                    counts["seeds_feasible"] += 1
                    members.setdefault(g, v)
                    h, w = self.improve(g, v, split=True)
                    members.setdefault(h, w)
        draws = self.params.init_draws * P
        while len(members) < P and counts["random_drawn"] < draws and not self.out_of_time():
            batch = []
            for _ in range(min(P, draws - counts["random_drawn"])):
                counts["random_drawn"] += 1
                drawn = random_genome(self.rng, self.space)
                if drawn is not None and (drawn in members or drawn in batch):
                    counts["random_duplicates"] += 1
                elif drawn is not None:
                    batch.append(drawn)
            if not batch:
                continue
            for g, v in zip(batch, self.price(batch).tolist(), strict=True):
                if math.isfinite(v) and len(members) < P:
                    counts["random_feasible"] += 1
                    h, w = self.improve(g, v)
                    members.setdefault(h, w)
        # Short of P although most draws repeated a member: the plan space is (nearly)
        # covered. (Short because draws were infeasible is not: memory-bound instances.)
        self.saturated = (len(members) < P and not self.out_of_time()
                          and 2 * counts["random_duplicates"] >= counts["random_drawn"])
        ranked = sorted(members.items(), key=lambda kv: kv[1])[:max(P, len(keep))]
        self.pop = [g for g, _ in ranked]
        self.obj = np.array([v for _, v in ranked], dtype=float)
        if self.pop:
            self.offer(self.pop[0], float(self.obj[0]))
        return counts

    # ----------------------------------------------------------------- one generation
    def generation(self) -> None:
        """Select, cross (best cut), mutate, search locally, drop duplicates, replace."""
        p, rng, space = self.params, self.rng, self.space
        n_off = p.population - p.elite
        n_cross = (n_off + 1) // 2
        size = len(self.pop)
        winners = tournament(rng, self.obj, 2 * n_cross, p.tournament).reshape(n_cross, 2)
        full = rng.random(n_cross) < p.p_fall
        groups: list[list[Genome]] = []
        for (a, b), f in zip(winners.tolist(), full.tolist(), strict=True):
            if size < 2 or a == b:
                groups.append([])
                groups.append([])
                continue
            cuts = crossover_cuts(rng, space, self.pop[a], self.pop[b], bool(f), p.max_cuts)
            groups.append(crossover_children(space, self.pop[a], self.pop[b], cuts))
            groups.append(crossover_children(space, self.pop[b], self.pop[a], cuts))
        flat = [g for grp in groups for g in grp]
        values = self.price(flat) if flat else np.empty(0)
        children: list[Genome] = []
        cobj: list[float] = []
        k = 0
        for grp in groups:
            if grp:
                v = values[k:k + len(grp)]
                j = int(np.argmin(v))
                if math.isfinite(v[j]):
                    children.append(grp[j])
                    cobj.append(float(v[j]))
            k += len(grp)
        if size and not children:
            # No crossover child (tiny or single populations): mutate the parents instead.
            picks = tournament(rng, self.obj, n_off, p.tournament).tolist()
            children = [self.pop[i] for i in picks]
            cobj = [float(self.obj[i]) for i in picks]

        # Mutation spares children that beat the population best; infeasible mutants revert.
        best = float(self.obj[0]) if size else math.inf
        mut_idx = [i for i, v in enumerate(cobj) if v >= best]
        mutants = [mutate(rng, space, children[i]) for i in mut_idx]
        live = [(i, m) for i, m in zip(mut_idx, mutants, strict=True) if m is not None]
        reverted = 0
        if live:
            mv = self.price([m for _, m in live])
            for (i, m), v in zip(live, mv.tolist(), strict=True):
                if math.isfinite(v):
                    children[i], cobj[i] = m, v
                else:
                    reverted += 1
        ls = rng.random(len(children)) < p.ls_rate
        resplit = rng.random(len(children)) < p.split_rate
        for i in np.flatnonzero(ls).tolist():
            children[i], cobj[i] = self.improve(children[i], cobj[i], bool(resplit[i]))

        members = set(self.pop)
        fresh: dict[Genome, float] = {}
        for g, c in zip(children, cobj, strict=True):
            if g not in members and g not in fresh:
                fresh[g] = c
        self.stats = (len(children), len(live), reverted, len(fresh))
        self.replace(fresh)

    def replace(self, fresh: dict[Genome, float]) -> None:
        """The E best incumbents survive; the best children take the places of the worst
        incumbents (at most P - E of them; a short population first grows)."""
        P, E = self.params.population, self.params.elite
        kids = sorted(fresh.items(), key=lambda kv: kv[1])
        pop = list(zip(self.pop, self.obj.tolist(), strict=True))
        room = max(0, P - len(pop))
        pop += kids[:room]
        kids = kids[room:]
        n_in = min(len(kids), max(0, len(pop) - E))
        if self.params.replacement == "improving":
            # (mu + lambda): a child enters only while it beats the incumbent it replaces.
            worst = [v for _, v in reversed(pop)]
            n_in = next((k for k in range(n_in) if not kids[k][1] < worst[k]), n_in)
        if n_in:
            pop = pop[:len(pop) - n_in] + kids[:n_in]
        pop.sort(key=lambda kv: kv[1])
        self.pop = [g for g, _ in pop]
        self.obj = np.array([v for _, v in pop], dtype=float)
        if self.pop:
            self.offer(self.pop[0], float(self.obj[0]))


def _pipeline_seed(instance: Instance, seed: int, params: HybridMemeticParams,
                   budget: float, options: SolveOptions | None
                   ) -> tuple[HybridPlan | None, dict[str, Any], list[TraceRow], float]:
    """The pipeline-space seed of this run (:func:`pipeline_plan` with the run's params)."""
    return pipeline_plan(instance, seed, budget, params.pipeline_solver,
                         params.pipeline_generations,
                         None if options is None else options.stop)


def pipeline_plan(instance: Instance, seed: int, budget: float, solver: str = "auto",
                  generations: int | None = None, stop: Any = None
                  ) -> tuple[HybridPlan | None, dict[str, Any], list[TraceRow], float]:
    """The best pipeline-space plan ``solver`` finds in ``budget`` seconds (and at most
    ``generations`` memetic generations), as a hybrid plan; a summary, its trace and when
    it started (``perf_counter``). ``auto``: the portfolio (memetic, then the MILP from its
    plan, which on small pools proves the pipeline optimum and ends early) up to 32 GPUs,
    else the memetic algorithm."""
    t0 = time.perf_counter()
    name = solver
    if name == "auto":
        name = "portfolio" if instance.n <= 32 else "memetic"
    ps: dict[str, Any] = {}
    if generations is not None:
        key = "max_generations" if name == "memetic" else "memetic.max_generations"
        ps[key] = generations
    r = run_solver(instance, name, seed=seed, time_limit=max(budget, 1e-3), threads=1,
                   params=ps, warm_up=False, stop=stop)
    info = {"solver": name, "status": r.status, "objective": r.objective,
            "wall_s": round(r.wall_s, 6), "generations": r.info.get("generations")}
    plan = None if r.plan is None else HybridPlan.from_pipeline(r.plan)  # type: ignore[arg-type]
    return plan, info, list(r.trace), t0


def _splitter(space: HybridSpace) -> Callable[[Genome], tuple[Genome, float] | None]:
    """The fast split-and-share DP of :mod:`heuristics.hybrid.split` for a genome's groups
    (its layers, shares and recompute; GPUs, tp, u and z kept)."""

    def split(g: Genome) -> tuple[Genome, float] | None:
        stages = [StageGroups(s.tp, s.replicas) for s in g.stages]
        got = solve_split(space.instance, stages, g.u, g.z, exact=False)
        if got is None:
            return None
        h = from_plan(space, got.plan)
        if h is None:
            return None
        return h, float(price(space, [h])[0])

    return split


def _grid_seeds(instance: Instance, stop: Callable[[], bool]) -> list[HybridPlan]:
    """The plans of :func:`heuristics.hybrid.grid.grid_plans` found before ``stop()``."""
    return [c.plan for c in grid_plans(instance, stop=stop)]


def run_hybrid_memetic(
    instance: Instance,
    seed: int,
    params: HybridMemeticParams | None = None,
    *,
    time_limit: float = 60.0,
    starts: Sequence[HybridPlan] = (),
    options: SolveOptions | None = None,
    start: float | None = None,
) -> HybridMemeticResult:
    """Run the hybrid memetic algorithm; see the module docstring and docs/hybrid-memetic.md.

    ``seed`` drives one Generator (and seeds the pipeline memetic); with
    ``max_generations`` and ``pipeline_generations`` set and a budget that is not
    reached, a seed gives one result. ``options`` supplies callbacks and the stop flag.
    """
    params = params or HybridMemeticParams()
    start = time.perf_counter() if start is None else start
    deadline = start + time_limit
    space = HybridSpace(instance)
    rng = np.random.default_rng(seed)
    res = HybridMemeticResult()
    search = _Search(space, rng, params, start, deadline, options, res)

    seeds: list[Genome] = []
    pipe_genome: Genome | None = None
    if params.pipeline_share > 0:
        budget = params.pipeline_share * max(0.0, deadline - time.perf_counter())
        plan, pinfo, ptrace, t0 = _pipeline_seed(space.instance, seed, params, budget, options)
        res.pipeline = pinfo
        if plan is not None:
            pipe_genome = from_plan(space, plan)
        if pipe_genome is not None:
            seeds.append(pipe_genome)
            value = float(search.price([pipe_genome])[0])
            res.pipeline["hybrid_objective"] = value
            off = t0 - start
            res.trace.extend(TraceRow(r.seconds + off, r.incumbent, None) for r in ptrace
                             if r.incumbent is not None and r.incumbent > value)
            search.offer(pipe_genome, value)
    started = [g for g in (from_plan(space, p) for p in starts) if g is not None]
    seeds += started
    grid: list[HybridPlan] | None = None
    if params.grid_seeds:
        # The grid enumeration is not bounded by itself at large N: give it a share.
        until = time.perf_counter() + params.grid_share * max(0.0, deadline - time.perf_counter())
        grid = _grid_seeds(space.instance, lambda: search.out_of_time()
                           or time.perf_counter() >= until)
    n_grid = 0
    if grid is not None:
        gg = [g for g in (from_plan(space, p) for p in grid) if g is not None]
        n_grid = len(gg)
        seeds += gg
    for base in ([pipe_genome] if pipe_genome is not None else []) + started:
        seeds += expansions(space, base) + regroupings(space, base)
    counts = search.fill(seeds)
    res.seeds = {"pipeline": pipe_genome is not None, "warm_starts": len(starts),
                 "warm_starts_encoded": len(started),
                 "grid": None if grid is None else n_grid, **counts}
    if starts:
        sv = search.price(started) if started else np.empty(0)
        res.warm_start_accepted = bool(np.isfinite(sv).any())

    generation = 0
    stale = 0  # generations since the best improved
    stale_runs = 0
    run_best = res.objective
    reason = "no feasible genome" if not search.pop else ""
    while search.pop:
        if params.max_generations is not None and generation >= params.max_generations:
            reason = "MaxGenerations"
            break
        if search.out_of_time():
            reason = "Interrupted" if options is not None and options.stopped() else "MaxRuntime"
            break
        before = res.objective
        search.generation()
        generation += 1
        res.history.append((generation, res.objective))
        stale = 0 if res.objective < before else stale + 1
        if options is not None:
            options.callbacks.on_progress({"generation": generation, "restart": res.restarts,
                                           "best": res.objective,
                                           "elapsed": time.perf_counter() - start})
        if stale >= params.no_improvement:
            stale_runs = stale_runs + 1 if res.objective >= run_best else 0
            run_best = res.objective
            if stale_runs >= params.stall_restarts:
                reason = "StallRestarts"
                break
            if search.saturated:
                # The draws found fewer than P distinct feasible genomes: a fresh population
                # would hold (nearly) the same plans again.
                reason = "PlanSpaceCovered"
                break
            # Restart: keep the elite, redraw the rest (with the best's expansions).
            res.restarts += 1
            keep = list(zip(search.pop[:params.elite], search.obj[:params.elite].tolist(),
                            strict=True))
            assert res.best is not None
            search.fill(expansions(space, res.best) + regroupings(space, res.best), keep)
            stale = 0
    res.generations = generation
    res.stop_reason = reason
    if res.best is not None:
        res.plan = to_plan(space, res.best)
    res.runtime_s = time.perf_counter() - start
    return res


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``hybrid-memetic`` (``geoplan solve --solver memetic --space hybrid``)."""
    raw = options.params
    params = raw if isinstance(raw, HybridMemeticParams) else HybridMemeticParams.parse(raw)
    res = run_hybrid_memetic(instance, options.seed, params, time_limit=options.time_limit,
                             starts=options.hybrid_starts, options=options,
                             start=options.start)
    info = res.info()
    info["params"] = asdict(params)
    if res.plan is None:
        return Outcome(None, "no_solution", trace=res.trace, info=info,
                       message="no feasible hybrid plan found (pipeline seed, warm starts, "
                       "grid and random genomes)")
    return Outcome(res.plan, "feasible", model_objective=res.objective, trace=res.trace,
                   info=info)


SPEC = SolverSpec("hybrid-memetic", solve, "heuristic",
                  "memetic algorithm over hybrid plans (TP, DP, ZeRO, recompute, u), seeded "
                  "by the pipeline-space memetic", warm_start=True,
                  params=HybridMemeticParams, space="hybrid")
