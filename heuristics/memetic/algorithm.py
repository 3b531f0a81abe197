"""The memetic main loop (paper 5.2, Alg. 1), its parameters, result and solver entry.

One generation: tournament-select parent pairs, best-cut crossover (one
batch), mutate offspring no better than the population best (one batch),
rebalance some of them by local search (one batch), drop infeasible and
duplicate offspring, and let them replace the worst non-elite incumbents.
Every price comes from the shared :class:`~geoplan.cost.batch.BatchEvaluator`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar, Literal

import numpy as np

from geoplan.cost.batch import FEASIBLE, BatchEvaluator
from geoplan.cost.split import Splitter
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import Callbacks, SolveOptions
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, TraceRow
from heuristics.memetic.crossover import best_cut_crossover
from heuristics.memetic.encoding import decode, row_keys
from heuristics.memetic.local_search import CapacityTable, local_search
from heuristics.memetic.mutation import mutate
from heuristics.memetic.population import InitialPopulation, initial_population
from heuristics.memetic.selection import replace_worst, tournament
from heuristics.memetic.stop import (
    AnyOf,
    MaxGenerations,
    MaxRuntime,
    NoImprovement,
    StoppingCriterion,
)
from heuristics.sequence_ils import iterated_polish
from heuristics.site_order import site_groups, site_order_plans

__all__ = [
    "SPEC",
    "GenerationStats",
    "MemeticParams",
    "MemeticResult",
    "default_stop",
    "run_memetic",
    "solve",
]


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class MemeticParams(SolverParams):
    """Parameters of the memetic algorithm; defaults are the paper's (section 5, 6.2).

    ``population`` P, ``tournament`` k, ``elite`` E, ``ls_rate`` r_ls,
    ``p_fall`` (probability that a crossover tries every cut; the paper gives no
    value), ``time_limit`` T_max seconds, ``no_improvement`` w generations,
    ``max_generations`` G_max, ``max_init_samples`` (random chromosomes the
    initialisation may draw), ``offspring`` per generation (None: P - E),
    ``replacement`` (``generational``: offspring replace the P - E worst
    incumbents; ``improving``: only those they beat), ``ls_load`` (what the
    local search balances: ``tau``, compute plus the stage's fixed link times,
    or ``compute``, the paper's n_q / F~), ``restarts`` (fresh runs after a
    run stops on w or G_max, while time remains; 0 in the paper).
    docs/memetic.md explains the choices. Types and ranges are checked by
    :class:`~geoplan.solving.params.SolverParams`; ``__post_init__`` adds the
    checks across fields.
    """

    population: int = param(200, "population size P", at_least=2)
    tournament: int = param(4, "tournament size k", at_least=1)
    elite: int = param(2, "elite individuals E kept each generation (< population)",
                       at_least=0)
    ls_rate: float = param(0.5, "share r_ls of offspring rebalanced by local search",
                           at_least=0.0, at_most=1.0)
    p_fall: float = param(0.1, "probability that a crossover tries every cut",
                          at_least=0.0, at_most=1.0)
    time_limit: float = param(120.0, "T_max seconds (geoplan solve: from --time-limit)",
                              above=0.0)
    no_improvement: int = param(100, "stop after w generations without improvement",
                                at_least=1)
    max_generations: int | None = param(
        None, "G_max: generations per run under stop=paper, over all runs otherwise "
        "(none: 500 per run under stop=paper, no cap otherwise)", at_least=0)
    max_init_samples: int = param(100_000, "random chromosomes the initialisation may draw",
                                  at_least=1)
    offspring: int | None = param(None, "offspring per generation (none: P - E)", at_least=1)
    replacement: Literal["generational", "improving"] = param(
        "generational", "offspring replace the P - E worst, or only those they beat")
    ls_load: Literal["tau", "compute"] = param(
        "tau", "what the local search balances: tau, or compute (the paper's)")
    restarts: int = param(0, "fresh runs after the first under stop=paper, while time "
                          "remains (the other stop rules restart by themselves)", at_least=0)
    stop: Literal["adaptive", "budget", "paper"] = param(
        "adaptive", "adaptive: restart until T_max or a stall of stall_restarts runs; budget: "
        "restart until T_max; paper: one run (w, G_max, T_max) plus `restarts`")
    stall_restarts: int = param(
        100, "stop=adaptive: end after this many runs in a row without a new best (and at "
        "least as many as the runs before the last new best)", at_least=1)
    site_order: bool = param(
        True, "seed populations with the site-order plans (heuristics.site_order)")
    seeding: Literal["alternate", "every", "first"] = param(
        "alternate", "which runs get the site-order plans: every other run (the first, "
        "third, ...), every run, or the first only")
    ils: int = param(
        200, "kicks of the sequence search (heuristics.sequence_ils) run from the best plan "
        "after each run, while time remains (0: none; 0 for a warm start)", at_least=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.elite < self.population:
            raise InputError("params.elite", self.elite, "must lie in 0..population-1")

    @property
    def generations_per_run(self) -> int | None:
        """G_max of one run: the paper's 500 under stop=paper, else none (a cap on all runs)."""
        if self.stop == "paper":
            return 500 if self.max_generations is None else self.max_generations
        return None

    @property
    def n_offspring(self) -> int:
        """Offspring bred per generation (two per crossover)."""
        return self.population - self.elite if self.offspring is None else self.offspring

    LABEL: ClassVar[str] = "memetic"
    #: Accepted ``--param`` keys: field names and the paper's symbols.
    ALIASES: ClassVar[dict[str, str]] = {
        "P": "population", "k": "tournament", "E": "elite", "r_ls": "ls_rate",
        "w": "no_improvement", "G_max": "max_generations", "T_max": "time_limit",
    }
    #: Fields that a KEY=VALUE mapping may not set (build the dataclass directly instead).
    REFUSED: ClassVar[dict[str, str]] = {
        "time_limit": "set the memetic budget with --time-limit (time_limit= in Python)",
    }

    @classmethod
    def from_mapping(cls, params: Mapping[str, Any], base: MemeticParams | None = None
                     ) -> MemeticParams:
        """Overrides from ``--param KEY=VALUE`` (field names or the paper's symbols).

        Values are text or JSON/TOML values, read by
        :func:`~geoplan.solving.params.parse_params` (integral floats become ints
        where an integer is expected, ints become floats where a number is).
        """
        return cls.parse(params, base=base)


# --------------------------------------------------------------------------- result


@dataclass(frozen=True)
class GenerationStats:
    """One compact row per generation."""

    generation: int
    restart: int  # 0 for the first run
    seconds: float
    best: float  # best found so far (all runs)
    population_best: float
    offspring: int  # distinct, feasible, new offspring offered to replacement
    entered: int  # offspring that entered the population
    mutated: int
    reverted: int  # mutants that violated a constraint and reverted to their parent
    ls_improved: int
    evaluations: int


@dataclass
class MemeticResult:
    """What a run found and how: best chromosome and plan, trace, per-generation rows."""

    best: np.ndarray | None
    objective: float
    plan: Plan | None
    trace: list[TraceRow] = field(default_factory=list)
    history: list[GenerationStats] = field(default_factory=list)
    generations: int = 0
    evaluations: int = 0
    time_to_best_s: float | None = None
    runtime_s: float = 0.0
    stop_reason: str = ""
    restarts: int = 0
    population_size: int = 0
    init: dict[str, Any] = field(default_factory=dict)
    warm_start_accepted: bool | None = None
    message: str | None = None
    site_order: dict[str, Any] | None = None  # the seeding plans (params.site_order)
    ils: dict[str, Any] = field(default_factory=dict)  # the sequence search between runs

    def info(self) -> dict[str, Any]:
        """The JSON-friendly summary placed in ``Outcome.info``."""
        d: dict[str, Any] = {
            "generations": self.generations,
            "evaluations": self.evaluations,
            "time_to_best_s": None if self.time_to_best_s is None
            else round(self.time_to_best_s, 6),
            "runtime_s": round(self.runtime_s, 6),
            "stop_reason": self.stop_reason,
            "restarts": self.restarts,
            "population": self.population_size,
            "init": self.init,
        }
        if self.site_order is not None:
            d["site_order"] = self.site_order
        if self.ils:
            d["ils"] = self.ils
        if self.warm_start_accepted is not None:
            d["warm_start_accepted"] = self.warm_start_accepted
        return d

    def best_series(self) -> list[tuple[int, float]]:
        """(generation, best objective) per generation: the seed-determined trajectory."""
        return [(h.generation, h.best) for h in self.history]


# --------------------------------------------------------------------------- main loop


def default_stop(params: MemeticParams, start: float | None = None,
                 generations_done: int = 0) -> AnyOf:
    """The criteria that end one run: T_max, w and G_max of ``params`` (any of them).

    Under ``stop=paper`` G_max caps each run; otherwise a given G_max caps all
    runs together, ``generations_done`` being those already run.
    """
    criteria: list[StoppingCriterion] = [MaxRuntime(params.time_limit, start),
                                         NoImprovement(params.no_improvement)]
    per_run = params.generations_per_run
    if per_run is not None:
        criteria.append(MaxGenerations(per_run))
    elif params.max_generations is not None:
        criteria.append(MaxGenerations(max(params.max_generations - generations_done, 0)))
    return AnyOf(*criteria)


def _warm_chromosomes(instance: Instance, plans: Sequence[Plan]) -> np.ndarray:
    """Chromosomes of the warm-start plans that have the instance's shape.

    A plan whose counts do not form a partition of L cannot be encoded; it is
    left out here and counts as rejected. Plans for another micro-batch size
    are encoded all the same (the MA prices them with the instance's).
    """
    L = instance.layers
    rows = []
    for p in plans:
        counts = p.layer_counts
        if sum(counts) == L and min(counts, default=0) >= 1:
            rows.append(p.to_chromosome(instance))
    return np.stack(rows) if rows else np.empty((0, L), np.int64)


@dataclass
class _Generation:
    """The population after one generation and what happened in it."""

    X: np.ndarray
    objective: np.ndarray
    offspring: int
    entered: int
    mutated: int
    reverted: int
    ls_improved: int


def _generation(
    rng: np.random.Generator,
    X: np.ndarray,
    obj: np.ndarray,
    keys: set[bytes],
    ev: BatchEvaluator,
    table: CapacityTable,
    params: MemeticParams,
) -> _Generation:
    """Alg. 1, one generation: select, cross, mutate, search locally, replace."""
    n_cross = (params.n_offspring + 1) // 2
    pairs = tournament(rng, obj, 2 * n_cross, params.tournament).reshape(n_cross, 2)
    full = rng.random(n_cross) < params.p_fall
    C, cobj, _ = best_cut_crossover(X, pairs, full, ev)
    ok = np.isfinite(cobj)  # rejected children (see crossover) have no fitness
    C, cobj = C[ok], cobj[ok]

    # Mutation spares offspring that already beat the population best.
    mut = np.flatnonzero(cobj >= obj[0])
    reverted = 0
    if mut.size:
        C[mut], cobj[mut], _, rev = mutate(rng, C[mut], cobj[mut], ev)
        reverted = int(rev.sum())

    ls = np.flatnonzero(rng.random(C.shape[0]) < params.ls_rate)
    ls_improved = 0
    if ls.size:
        C[ls], cobj[ls], imp = local_search(C[ls], cobj[ls], ev, table)
        ls_improved = int(imp.sum())

    # Duplicates (of incumbents or of each other) are discarded.
    fresh = []
    for i, key in enumerate(row_keys(C)):
        if key not in keys:
            keys.add(key)
            fresh.append(i)
    X, obj, entered = replace_worst(
        X, obj, C[fresh], cobj[fresh], params.elite, params.population,
        unconditional=params.replacement == "generational",
    )
    return _Generation(X, obj, len(fresh), entered, int(mut.size), reverted, ls_improved)


def run_memetic(
    instance: Instance,
    seed: int | np.random.Generator,
    params: MemeticParams | None = None,
    *,
    warm_start: Sequence[Plan] = (),
    callbacks: Callbacks | None = None,
    stop_when: StoppingCriterion | None = None,
    start: float | None = None,
    stopped: Callable[[], bool] | None = None,
) -> MemeticResult:
    """Run the memetic algorithm on ``instance``.

    ``seed`` (or a Generator made from one) drives every random choice, so a
    seed gives the same run up to the time limit. A run ends on
    :func:`default_stop`; whether fresh runs follow is ``params.stop``'s rule
    (docs/memetic.md, Stopping). ``stop_when`` is an extra criterion, called
    after initialisation and every generation with the best objective found so
    far, that ends everything (e.g. a target). ``start`` is the
    ``perf_counter`` value the trace's seconds, the time to best and the time
    limit count from. ``stopped()`` true (an interrupt,
    ``SolveOptions.stopped``) ends the run as T_max does.
    """
    params = params or MemeticParams()
    callbacks = callbacks or Callbacks()
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    start = time.perf_counter() if start is None else start
    # Serial pricing: batches are a few thousand rows, where threads cost more than they save.
    ev = BatchEvaluator(instance, parallel_threshold=1 << 62)
    table = CapacityTable.build(ev.coefficients, instance.layers, params.ls_load == "tau")
    res = MemeticResult(best=None, objective=math.inf, plan=None)
    warm = _warm_chromosomes(instance, warm_start)
    seeds = None
    # One splitter for the site-order plans and the sequence search.
    sp = Splitter(ev.instance) if params.site_order or params.ils else None
    groups = site_groups(ev.instance, sp.comp, sp.mem_cap)[1] if sp and params.ils else []
    if params.site_order:
        so = site_order_plans(ev.instance, splitter=sp, deadline=start + params.time_limit)
        seeds = _warm_chromosomes(instance, [p.plan for p in so.plans])
        res.site_order = {
            "plans": len(so.plans),
            "best": None if so.best is None else so.best.objective,
            "sites": len(so.sites),
            "seconds": round(so.seconds, 6),
        }
    generation = 0
    stale_runs = 0  # runs in a row that found no better plan than the runs before them
    best_run = 0  # the run that found the best plan so far

    def offer(x: np.ndarray, value: float) -> None:
        """Record ``x`` if it beats the best found so far (elite-free runs may lose it)."""
        if value < res.objective:
            now = time.perf_counter() - start
            res.best, res.objective = x.copy(), value
            res.trace.append(TraceRow(now, value, None))
            res.time_to_best_s = now
            callbacks.on_improvement(now, value, None)
            callbacks.on_plan(now, Plan.from_chromosome(instance, x), value)

    attempt = 0
    while True:
        before = res.objective
        init = initial_population(
            rng, ev, params.population, params.max_init_samples,
            warm if attempt == 0 else None, deadline=start + params.time_limit,
            stopped=stopped, seeds=seeds if _seeded(params, attempt) else None,
        )
        if attempt == 0:
            res.init = _init_info(init)
            if warm_start:
                res.warm_start_accepted = init.warm_accepted > 0
            if init.size == 0:
                res.message = init.failure_message()
                res.stop_reason = "no feasible individual"
                break
        if init.size == 0:
            break
        X, obj = init.X, init.objective
        keys = set(row_keys(X))
        offer(X[0], float(obj[0]))
        stop = default_stop(params, start, generation)
        extra = stop_when is not None and stop_when(res.objective)
        while not extra and not stop(float(obj[0])):
            if stopped is not None and stopped():
                stop.fired = ["Interrupted"]  # ends the run (and the restarts) as T_max does
                break
            generation += 1
            g = _generation(rng, X, obj, keys, ev, table, params)
            X, obj = g.X, g.objective
            keys = set(row_keys(X))
            offer(X[0], float(obj[0]))
            now = time.perf_counter() - start
            res.history.append(GenerationStats(
                generation, attempt, now, res.objective, float(obj[0]), g.offspring, g.entered,
                g.mutated, g.reverted, g.ls_improved, ev.evaluations,
            ))
            callbacks.on_progress({"generation": generation, "restart": attempt,
                                   "best": res.objective, "elapsed": now})
            extra = stop_when is not None and stop_when(res.objective)
        ended = extra or "MaxRuntime" in stop.fired or "Interrupted" in stop.fired
        if sp is not None and params.ils and not ended and res.best is not None:
            def searching(kicks: int, _best: float, run: int = attempt) -> None:
                callbacks.on_progress({"restart": run, "sequence_search": kicks,
                                       "best": res.objective,
                                       "elapsed": time.perf_counter() - start})

            _sequence_search(instance, ev, sp, groups, res.best, rng, params, start, stopped,
                             offer, res.ils, searching)
            if stopped is not None and stopped():
                stop.fired.append("Interrupted")
            elif time.perf_counter() >= start + params.time_limit:
                stop.fired.append("MaxRuntime")
            extra = stop_when is not None and stop_when(res.objective)
        res.restarts = attempt
        res.population_size = int(X.shape[0])
        res.stop_reason = type(stop_when).__name__ if extra else ", ".join(stop.fired)
        if res.objective < before:
            stale_runs, best_run = 0, attempt
        else:
            stale_runs += 1
        if extra or "MaxRuntime" in stop.fired or "Interrupted" in stop.fired:
            break
        if params.stop == "paper":
            if attempt >= params.restarts:
                break
        elif "MaxGenerations" in stop.fired:
            break  # G_max of all runs together
        elif init.saturated:
            # The last 10 P feasible draws were all duplicates: the population
            # holds (nearly) the whole plan space, fresh runs would redraw it.
            res.stop_reason += ", PlanSpaceCovered"
            break
        elif params.stop == "adaptive" and stale_runs >= max(params.stall_restarts, best_run):
            res.stop_reason += ", StallRestarts"
            break
        attempt += 1

    if res.best is not None:
        res.plan = Plan.from_chromosome(instance, res.best)
    res.generations = generation
    res.evaluations = ev.evaluations
    res.runtime_s = time.perf_counter() - start
    return res


def _sequence_search(
    instance: Instance, ev: BatchEvaluator, sp: Splitter, groups: list[list[int]],
    best: np.ndarray, rng: np.random.Generator, params: MemeticParams, start: float,
    stopped: Callable[[], bool] | None, offer: Callable[[np.ndarray, float], None],
    stats: dict[str, Any], progress: Callable[[int, float], None] | None = None,
) -> None:
    """``params.ils`` kicks of :func:`iterated_polish` from ``best``; new bests are offered.

    Each new best sequence is split exactly, encoded, and priced again by the
    shared evaluator, whose value is the one offered.
    """
    def found(seq: list[int], value: float) -> None:
        split = sp.split(seq)
        if split is None:  # pragma: no cover - the search only reports feasible splits
            return
        x = split.to_plan(ev.instance).to_chromosome(instance)
        priced = ev.evaluate(x[None, :])
        if priced.status[0] == FEASIBLE:
            offer(x, float(priced.objective[0]))

    t0 = time.perf_counter()
    out = iterated_polish(sp, decode(best)[0], groups, rng, params.ils,
                          deadline=start + params.time_limit, stopped=stopped,
                          on_improvement=found, on_iteration=progress)
    stats["phases"] = stats.get("phases", 0) + 1
    stats["iterations"] = stats.get("iterations", 0) + out.iterations
    stats["improvements"] = stats.get("improvements", 0) + out.improvements
    stats["seconds"] = round(stats.get("seconds", 0.0) + time.perf_counter() - t0, 6)


def _seeded(params: MemeticParams, attempt: int) -> bool:
    """Whether run ``attempt`` (0 = the first) starts with the site-order plans."""
    if not params.site_order:
        return False
    if params.seeding == "every":
        return True
    if params.seeding == "first":
        return attempt == 0
    return attempt % 2 == 0  # alternate: seeded and unseeded runs take turns


def _init_info(init: InitialPopulation) -> dict[str, Any]:
    return {
        "size": init.size,
        "samples": init.samples,
        "rejected": init.rejected,
        "duplicates": init.duplicates,
        "exhausted": init.exhausted,
        "saturated": init.saturated,
        "warm_offered": init.warm_offered,
        "warm_accepted": init.warm_accepted,
        "seeds_offered": init.seeds_offered,
        "seeds_accepted": init.seeds_accepted,
    }


# --------------------------------------------------------------------------- solver entry


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``memetic``: ``--param`` overrides, budget from ``--time-limit``."""
    raw = options.params
    if isinstance(raw, MemeticParams):  # parsed by geoplan.solving.core.solve
        params = replace(raw, time_limit=options.time_limit)
    else:
        params = MemeticParams.parse(raw, base=MemeticParams(time_limit=options.time_limit))
    res = run_memetic(
        instance,
        options.seed,
        params,
        warm_start=options.warm_start,
        callbacks=options.callbacks,
        start=options.start,
        stopped=options.stopped,
    )
    info = res.info()
    info["params"] = asdict(params)
    if res.plan is None:
        return Outcome(None, "no_solution", trace=res.trace, info=info, message=res.message)
    return Outcome(res.plan, "feasible", trace=res.trace, info=info)


SPEC = SolverSpec("memetic", solve, "heuristic", "GeoTrain memetic algorithm (paper section 5)",
                  warm_start=True, params=MemeticParams,
                  # As a warm start, one run (the paper's stop) without the sequence search:
                  # restarts and the search polish the plan by fractions of a percent, which
                  # an exact model does faster (the portfolio asks for the search).
                  as_warm_start=(("stop", "paper"), ("ils", 0)))
