"""Experiment definitions: load, validate and expand TOML experiment files.

An experiment file names solvers, instance specs, run seeds and time budgets; it
expands into one :class:`RunSpec` per (solver, instance, seed, budget). Every
mistake (unknown solver, bad budget, missing instance file, unknown generator
parameter, typo in a key) raises :class:`~geoplan.errors.InputError` naming the
file and field, before any run starts. The format is documented in ``docs/bench.md``.

Profiles: a top-level ``[quick]`` or ``[tiny]`` table overrides the experiment's
``seeds``, ``budgets``, ``grace``, ``threads`` and ``normalise_budget``; a
``quick = {...}`` (or ``tiny = {...}``) entry inside a solver or instance block
overrides that block's keys (``skip = true`` leaves the block out of the profile).
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geoplan.errors import InputError

__all__ = [
    "EXPERIMENT_DIR",
    "GENERATORS",
    "PAPER_EXPERIMENTS",
    "PROFILES",
    "WARM_UP_S",
    "Experiment",
    "InstanceSpec",
    "RunSpec",
    "SolverEntry",
    "builtin_experiments",
    "hardware_key",
    "load_experiment",
    "parse_experiment",
    "spec_key",
    "worst_case_seconds",
]

#: The shipped experiment files (``NAME.toml``) sit next to this module.
EXPERIMENT_DIR = Path(__file__).parent
PROFILES = ("full", "quick", "tiny")
#: The experiments ``geoplan bench paper`` runs, in report order.
PAPER_EXPERIMENTS = ("table3", "table4", "table5-6", "network", "table7", "anytime", "warmstart")

_TOP_KEYS = frozenset({
    "name", "title", "description", "paper", "seeds", "budgets", "grace", "threads",
    "normalise_budget", "solvers", "instances", "report", *PROFILES[1:],
})
_PROFILE_KEYS = frozenset({"seeds", "budgets", "grace", "threads", "normalise_budget"})
_SOLVER_KEYS = frozenset({
    "name", "label", "params", "warm_start", "seeds", "budgets", "max_n", "threads", "skip",
})
_INSTANCE_KEYS = frozenset({
    "generator", "n", "layers", "seed", "overrides", "grid", "tag", "normalise_by", "file",
    "skip",
})
#: Short names used in generated instance names.
_SHORT = {
    "n": "n", "layers": "l", "seed": "s", "lam": "lam", "base_latency_ms": "lat",
    "base_bandwidth_gbps": "bw", "cluster": "", "model": "",
}


# --------------------------------------------------------------------------- generators


def _family(family: str) -> Callable[..., dict[str, Any]]:
    def build(*, n: int, layers: int, seed: int, **kw: Any) -> dict[str, Any]:
        from geoplan.model.generators import by_family

        return by_family(family, n, layers, seed, **kw)

    return build


def _table7(*, layers: int, seed: int, **kw: Any) -> dict[str, Any]:
    from geoplan.model.generators import table7

    return table7(seed=seed, layers=layers, **kw)


def _three_site(
    *, layers: int, seed: int, base_latency_ms: float, base_bandwidth_gbps: float, **kw: Any
) -> dict[str, Any]:
    from geoplan.model.generators import three_site_instance

    return three_site_instance(base_latency_ms, base_bandwidth_gbps, layers=layers, seed=seed, **kw)


def _preset(*, cluster: str, model: str, name: str, **kw: Any) -> dict[str, Any]:
    from geoplan.model.presets import preset_instance

    data = preset_instance(cluster, model, **kw)
    data["name"] = name
    return data


#: generator name -> (builder, its generator function for parameter checks, required keys)
GENERATORS: dict[str, tuple[Callable[..., dict[str, Any]], str, tuple[str, ...]]] = {
    "paper": (_family("paper"), "paper_mix", ("n", "layers", "seed")),
    "geo": (_family("geo"), "geo", ("n", "layers", "seed")),
    "metro": (_family("metro"), "metro", ("n", "layers", "seed")),
    "cloud": (_family("cloud"), "cloud", ("n", "layers", "seed")),
    "table7": (_table7, "table7", ("layers", "seed")),
    "three_site": (
        _three_site, "three_site_instance",
        ("layers", "seed", "base_latency_ms", "base_bandwidth_gbps"),
    ),
    # Real clusters and models (geoplan.model.presets): no seed, nothing is drawn.
    "preset": (_preset, "preset_instance", ("cluster", "model")),
}


def _generator_params(gen: str, func_name: str) -> set[str]:
    """The keyword arguments generator ``gen`` accepts (``name`` is set by the runner)."""
    import geoplan.model.generators as g
    import geoplan.model.presets as presets

    module = presets if gen == "preset" else g
    out = set(inspect.signature(getattr(module, func_name)).parameters) - {"name", "n_gpus"}
    if gen == "preset":  # its training keywords are the optional fields of hybrid-model.md
        out = (out - {"training"}) | {"zero", "zero_choices", "max_tp", "micro_batch_choices",
                                      "recompute_choices", "stage_overhead_ms"}
    return out | {"n"} if gen in ("paper", "geo", "metro", "cloud") else out


# --------------------------------------------------------------------------- records


def spec_key(obj: Any) -> str:
    """A short stable hash of a JSON-able object."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def hardware_key(data: Mapping[str, Any]) -> str:
    """Hash of an instance dict without its name and objective (shared normalisers)."""
    return spec_key({k: v for k, v in data.items() if k not in ("objective", "name")})


@dataclass(frozen=True)
class SolverEntry:
    """One solver column of an experiment."""

    name: str
    label: str
    params: Mapping[str, Any] = field(default_factory=dict)
    warm_start: str | None = None
    seeds: tuple[int, ...] | None = None
    budgets: tuple[float, ...] | None = None
    max_n: int | None = None
    threads: int | None = None


@dataclass(frozen=True)
class InstanceSpec:
    """One instance: a generator and its arguments (or a file), and its generated dict."""

    generator: str
    kwargs: Mapping[str, Any]
    name: str
    data: Mapping[str, Any] = field(repr=False, compare=False)
    tag: str | None = None
    normalise_by: str | None = None
    source: str | None = None

    @property
    def key(self) -> str:
        """Hash of the spec (generator, arguments, normaliser), stable across runs."""
        return spec_key({
            "generator": self.generator, "kwargs": dict(self.kwargs), "name": self.name,
            "normalise_by": self.normalise_by,
            "file": None if self.source is None else spec_key(self.data),
        })

    @property
    def n(self) -> int:
        return len(self.data["gpus"])

    @property
    def layers(self) -> int:
        return int(self.data["model"]["layers"])

    def describe(self) -> dict[str, Any]:
        """The spec as recorded in every result row."""
        d: dict[str, Any] = {"generator": self.generator, **dict(self.kwargs)}
        if self.source is not None:
            d["file"] = self.source
        if self.normalise_by:
            d["normalise_by"] = self.normalise_by
        return d


@dataclass(frozen=True)
class RunSpec:
    """One run: a solver entry on an instance with a seed and a budget."""

    experiment: str
    profile: str
    solver: SolverEntry
    instance: InstanceSpec
    seed: int
    budget: float
    grace: float
    threads: int
    skip_reason: str | None = None

    @property
    def key(self) -> str:
        """Identity of the run in a results file (what resume matches on)."""
        return spec_key({
            "experiment": self.experiment, "label": self.solver.label,
            "solver": self.solver.name, "params": dict(self.solver.params),
            "warm_start": self.solver.warm_start, "instance": self.instance.key,
            "seed": self.seed, "budget": self.budget, "threads": self.threads,
        })

    @property
    def hard_limit(self) -> float:
        """Seconds after which the run's process is killed."""
        return self.budget + self.grace


@dataclass(frozen=True)
class Experiment:
    """A validated experiment in one profile."""

    name: str
    title: str
    description: str
    profile: str
    seeds: tuple[int, ...]
    budgets: tuple[float, ...]
    grace: float
    threads: int
    normalise_budget: float
    solvers: tuple[SolverEntry, ...]
    instances: tuple[InstanceSpec, ...]
    report: Mapping[str, Any]
    paper: str | None = None
    source: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def runs(self) -> list[RunSpec]:
        """Every run of the experiment (solver x instance x seed x budget)."""
        out: list[RunSpec] = []
        for inst in self.instances:
            for s in self.solvers:
                skip = None
                if s.max_n is not None and inst.n > s.max_n:
                    from geoplan.model.space import plan_space_size

                    size = plan_space_size(inst.n, inst.layers)
                    skip = (f"N={inst.n} exceeds max_n={s.max_n} set for {s.label} "
                            f"(plan space f(N, L) = {size:.3g})")
                for seed in s.seeds or self.seeds:
                    for budget in s.budgets or self.budgets:
                        out.append(RunSpec(
                            self.name, self.profile, s, inst, seed, budget, self.grace,
                            s.threads or self.threads, skip,
                        ))
        return out

    def worst_case_seconds(self, workers: int) -> float:
        """Upper bound on the wall time with ``workers`` processes (every run hits its kill)."""
        return worst_case_seconds([self], workers)

    def to_manifest(self) -> dict[str, Any]:
        """What the report needs: title, description, report settings, solvers."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "profile": self.profile,
            "paper": self.paper,
            "report": dict(self.report),
            "seeds": list(self.seeds),
            "budgets": list(self.budgets),
            "grace": self.grace,
            "threads": self.threads,
            "source": self.source,
            "solvers": [
                {"name": s.name, "label": s.label, "params": dict(s.params),
                 "warm_start": s.warm_start, "max_n": s.max_n,
                 "seeds": None if s.seeds is None else list(s.seeds),
                 "budgets": None if s.budgets is None else list(s.budgets)}
                for s in self.solvers
            ],
            "instances": [{"name": i.name, "key": i.key, "tag": i.tag, **i.describe()}
                          for i in self.instances],
        }


#: Seconds after which a solver's warm-up run (compiling its kernels) is killed.
WARM_UP_S = 15.0


def worst_case_seconds(
    experiments: Sequence[Experiment], workers: int, warm_up: float = WARM_UP_S
) -> float:
    """Wall time if every run of ``experiments`` hits its hard kill, scheduled as the runner does.

    One warm-up run per solver (killed after ``warm_up`` s), the runs longest first
    onto the least-loaded of ``workers`` slots (0.5 s start-up each; a run of t threads
    takes t slots, from when the t-th least loaded is free), plus one normalising run
    per distinct instance that needs one.
    """
    loads = sorted(((r.hard_limit + 0.5, r.threads) for e in experiments for r in e.runs()
                    if r.skip_reason is None), key=lambda xt: -xt[0])
    bins = [0.0] * max(1, workers)
    for x, threads in loads:
        ks = sorted(range(len(bins)), key=lambda k: bins[k])[:max(1, min(threads, len(bins)))]
        start = max(bins[k] for k in ks)
        for k in ks:
            bins[k] = start + x
    norm: dict[str, float] = {}
    for e in experiments:
        for i in e.instances:
            if i.normalise_by:
                norm[hardware_key(i.data)] = e.normalise_budget + e.grace
    solvers = {r.solver.name for e in experiments for r in e.runs() if r.skip_reason is None}
    solvers |= {r.solver.warm_start for e in experiments for r in e.runs() if r.solver.warm_start}
    warm = math.ceil(len(solvers) / max(1, workers)) * warm_up
    return warm + max(bins) + sum(norm.values())


# --------------------------------------------------------------------------- parsing


class _Ctx:
    """Where we are in the file, for error messages."""

    def __init__(self, where: str) -> None:
        self.where = where

    def err(self, fld: str, value: Any, message: str) -> InputError:
        return InputError(f"{self.where}: {fld}", value, message)


def _check_keys(ctx: _Ctx, d: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    for k in d:
        if k not in allowed:
            raise ctx.err(f"{where}{k}" if not where else f"{where}.{k}", k,
                          f"unknown key; allowed: {', '.join(sorted(allowed))}")


def _seeds(ctx: _Ctx, value: Any, fld: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ctx.err(fld, value, "expected a non-empty list of integer seeds")
    for k, s in enumerate(value):
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ctx.err(f"{fld}[{k}]", s, "expected a non-negative integer seed")
    if len(set(value)) != len(value):
        raise ctx.err(fld, value, "seeds must be distinct")
    return tuple(value)


def _budgets(ctx: _Ctx, value: Any, fld: str) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise ctx.err(fld, value, "expected a non-empty list of time budgets in seconds")
    for k, b in enumerate(value):
        if isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b) or b <= 0:
            raise ctx.err(f"{fld}[{k}]", b, "a time budget must be a positive number of seconds")
    if len(set(value)) != len(value):
        raise ctx.err(fld, value, "budgets must be distinct")
    return tuple(float(b) for b in value)


def _number(ctx: _Ctx, value: Any, fld: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ctx.err(fld, value, "expected a finite number")
    if value < 0 or (positive and value == 0):
        raise ctx.err(fld, value, "must be positive" if positive else "must be non-negative")
    return float(value)


def _posint(ctx: _Ctx, value: Any, fld: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ctx.err(fld, value, "expected a positive integer")
    return value


def _text(ctx: _Ctx, value: Any, fld: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ctx.err(fld, value, "expected a non-empty string")
    return value


def _profiled(ctx: _Ctx, block: Mapping[str, Any], profile: str, where: str) -> dict[str, Any]:
    """The block with its profile override (``quick = {...}``) applied."""
    out = {k: v for k, v in block.items() if k not in PROFILES[1:]}
    for p in PROFILES[1:]:
        over = block.get(p)
        if over is None:
            continue
        if not isinstance(over, Mapping):
            raise ctx.err(f"{where}.{p}", over, "expected a table of overrides")
        if p == profile:
            out.update(over)
    return out


def _solver_name(ctx: _Ctx, value: Any, where: str) -> str:
    """A registered solver's name, or an error naming ``where``."""
    from geoplan.solving.core import get_solver

    name = _text(ctx, value, where)
    try:
        get_solver(name)
    except InputError as exc:
        raise ctx.err(where, name, exc.message) from None
    return name


def _profiled_entry(
    ctx: _Ctx, raw: Any, where: str, table: str, keys: Any, profile: str
) -> Mapping[str, Any] | None:
    """One ``[[table]]`` entry with its profile overrides applied and keys checked.

    None when the entry is skipped in this profile.
    """
    if not isinstance(raw, Mapping):
        raise ctx.err(where, raw, f"expected a table ([[{table}]])")
    for p in PROFILES[1:]:
        if p in raw and isinstance(raw[p], Mapping):
            _check_keys(ctx, raw[p], keys, f"{where}.{p}")
    d = _profiled(ctx, raw, profile, where)
    _check_keys(ctx, d, keys, where)
    return None if d.get("skip", False) else d


def _solver_entry(ctx: _Ctx, raw: Any, k: int, profile: str) -> SolverEntry | None:
    where = f"solvers[{k}]"
    d = _profiled_entry(ctx, raw, where, "solvers", _SOLVER_KEYS, profile)
    if d is None:
        return None
    name = _solver_name(ctx, d.get("name"), f"{where}.name")
    warm = d.get("warm_start")
    if warm is not None:
        warm = _solver_name(ctx, warm, f"{where}.warm_start")
        if warm == name:
            raise ctx.err(f"{where}.warm_start", warm, "a solver cannot warm-start itself")
    params = d.get("params", {})
    if not isinstance(params, Mapping):
        raise ctx.err(f"{where}.params", params, "expected a table of solver parameters")
    label = d.get("label") or (name if warm is None else f"{name}+{warm}")
    return SolverEntry(
        name=name,
        label=_text(ctx, label, f"{where}.label"),
        params=dict(params),
        warm_start=warm,
        seeds=None if d.get("seeds") is None else _seeds(ctx, d["seeds"], f"{where}.seeds"),
        budgets=None if d.get("budgets") is None
        else _budgets(ctx, d["budgets"], f"{where}.budgets"),
        max_n=None if d.get("max_n") is None else _posint(ctx, d["max_n"], f"{where}.max_n"),
        threads=None if d.get("threads") is None
        else _posint(ctx, d["threads"], f"{where}.threads"),
    )


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _instance_specs(
    ctx: _Ctx, raw: Any, k: int, profile: str, base_dir: Path | None
) -> list[InstanceSpec]:
    from geoplan.model.instance import Instance, read_json

    where = f"instances[{k}]"
    d = _profiled_entry(ctx, raw, where, "instances", _INSTANCE_KEYS, profile)
    if d is None:
        return []
    tag = None if d.get("tag") is None else _text(ctx, d["tag"], f"{where}.tag")
    norm = d.get("normalise_by")
    if norm is not None:
        norm = _solver_name(ctx, norm, f"{where}.normalise_by")

    if d.get("file") is not None:
        extra = set(d) - {"file", "tag", "normalise_by", "overrides"}
        if extra:
            raise ctx.err(where, sorted(extra), "a file instance takes only tag, "
                          "normalise_by and overrides = {lam = ...}")
        rel = _text(ctx, d["file"], f"{where}.file")
        path = Path(rel)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.exists():
            raise ctx.err(f"{where}.file", rel, f"instance file not found ({path})")
        try:
            data = read_json(path, "instance")
        except InputError as exc:
            raise ctx.err(f"{where}.file", rel, exc.message) from None
        over = d.get("overrides", {})
        if not isinstance(over, Mapping) or set(over) - {"lam"}:
            raise ctx.err(f"{where}.overrides", over, "a file instance accepts only lam")
        kwargs: dict[str, Any] = dict(over)
        if "lam" in over:
            data = {**data, "objective": {**(data.get("objective") or {}), "lambda": over["lam"]}}
        name = str(data.get("name") or path.stem)
        if "lam" in over:
            name = f"{name}-lam{_fmt(over['lam'])}"
            data["name"] = name
        _check_instance(ctx, where, data, Instance)
        return [InstanceSpec("file", kwargs, name, data, tag, norm, str(rel))]

    gen = d.get("generator")
    if gen not in GENERATORS:
        raise ctx.err(f"{where}.generator", gen,
                      f"unknown generator; known: {', '.join(GENERATORS)} (or file = PATH)")
    builder, func_name, required = GENERATORS[gen]
    allowed = _generator_params(gen, func_name)
    overrides = d.get("overrides", {})
    if not isinstance(overrides, Mapping):
        raise ctx.err(f"{where}.overrides", overrides, "expected a table of generator arguments")
    grid = d.get("grid", {})
    if not isinstance(grid, Mapping):
        raise ctx.err(f"{where}.grid", grid, "expected a table of value lists")
    base: dict[str, Any] = {key: d[key] for key in ("n", "layers", "seed") if key in d}
    for key in overrides:
        if key in base:
            raise ctx.err(f"{where}.overrides.{key}", key, "give it outside overrides")
    base.update(overrides)
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ctx.err(f"{where}.grid.{key}", values, "expected a non-empty list of values")
        if key in base:
            raise ctx.err(f"{where}.grid.{key}", key, "set both as a value and as a grid axis")
    for key in [*base, *grid]:
        if key not in allowed:
            raise ctx.err(f"{where}.{key}", key, f"not a parameter of generator {gen!r}; "
                          f"known: {', '.join(sorted(allowed))}")
    missing = [key for key in required if key not in base and key not in grid]
    if missing:
        raise ctx.err(f"{where}.{missing[0]}", None, f"required by generator {gen!r}")

    specs: list[InstanceSpec] = []
    axes = list(grid)
    for combo in itertools.product(*(grid[a] for a in axes)):
        kwargs = {**base, **dict(zip(axes, combo, strict=True))}
        keys = dict.fromkeys([*required, *axes])
        name = "-".join([gen.replace("_", "-"),
                         *(f"{_SHORT.get(key, key)}{_fmt(kwargs[key])}" for key in keys)])
        try:
            data = builder(**kwargs, name=name)
        except InputError as exc:
            raise ctx.err(f"{where} ({name}): {exc.field}", exc.value, exc.message) from None
        except (TypeError, ValueError, KeyError) as exc:
            raise ctx.err(where, kwargs, f"generator {gen!r} failed: {exc}") from None
        _check_instance(ctx, f"{where} ({name})", data, Instance)
        specs.append(InstanceSpec(gen, kwargs, name, data, tag, norm))
    return specs


def _check_instance(ctx: _Ctx, where: str, data: Mapping[str, Any], cls: Any) -> None:
    try:
        cls.from_dict(data)
    except InputError as exc:
        raise ctx.err(f"{where}: {exc.field}", exc.value, exc.message) from None


def parse_experiment(
    raw: Mapping[str, Any],
    profile: str = "full",
    *,
    source: str | None = None,
    base_dir: Path | None = None,
) -> Experiment:
    """Validate a parsed TOML document and expand it for ``profile``."""
    where = source or str(raw.get("name", "experiment"))
    ctx = _Ctx(where)
    if profile not in PROFILES:
        raise InputError("--profile", profile, f"unknown profile; known: {', '.join(PROFILES)}")
    _check_keys(ctx, raw, _TOP_KEYS, "")
    name = _text(ctx, raw.get("name"), "name")
    if not all(c.isalnum() or c in "-_" for c in name):
        raise ctx.err("name", name, "use letters, digits, '-' and '_' only")
    top = dict(raw)
    for p in PROFILES[1:]:
        over = raw.get(p)
        if over is None:
            continue
        if not isinstance(over, Mapping):
            raise ctx.err(p, over, "expected a table of overrides")
        _check_keys(ctx, over, _PROFILE_KEYS, p)
        if p == profile:
            top.update(over)
    seeds = _seeds(ctx, top.get("seeds", [0]), "seeds")
    budgets = _budgets(ctx, top.get("budgets"), "budgets")
    grace = _number(ctx, top.get("grace", 10.0), "grace", positive=False)
    threads = _posint(ctx, top.get("threads", 1), "threads")
    norm_budget = _number(ctx, top.get("normalise_budget", 30.0), "normalise_budget",
                          positive=True)

    raw_solvers = raw.get("solvers")
    if not isinstance(raw_solvers, list) or not raw_solvers:
        raise ctx.err("solvers", raw_solvers, "expected at least one [[solvers]] entry")
    solvers = [s for k, r in enumerate(raw_solvers)
               if (s := _solver_entry(ctx, r, k, profile)) is not None]
    labels = [s.label for s in solvers]
    for lab in labels:
        if labels.count(lab) > 1:
            raise ctx.err("solvers", lab, "two solver entries share this label")
    if not solvers:
        raise ctx.err("solvers", profile, "every solver entry is skipped in this profile")

    raw_instances = raw.get("instances")
    if not isinstance(raw_instances, list) or not raw_instances:
        raise ctx.err("instances", raw_instances, "expected at least one [[instances]] entry")
    instances: list[InstanceSpec] = []
    for k, r in enumerate(raw_instances):
        instances.extend(_instance_specs(ctx, r, k, profile, base_dir))
    if not instances:
        raise ctx.err("instances", profile, "every instance entry is skipped in this profile")
    instances = _unique_names(instances)

    report = raw.get("report", {})
    if not isinstance(report, Mapping):
        raise ctx.err("report", report, "expected a table")
    for key in ("ours", "baseline", "heuristic"):
        if key in report and report[key] not in labels:
            raise ctx.err(f"report.{key}", report[key],
                          f"not a solver label of this profile; labels: {', '.join(labels)}")
    for k, lab in enumerate(report.get("exact") or []):
        if lab not in labels:
            raise ctx.err(f"report.exact[{k}]", lab,
                          f"not a solver label of this profile; labels: {', '.join(labels)}")
    paper = raw.get("paper")
    if paper is not None:
        from bench.experiments.paper import PAPER

        if paper not in PAPER:
            raise ctx.err("paper", paper, f"unknown paper key; known: {', '.join(PAPER)}")
    return Experiment(
        name=name,
        title=str(raw.get("title") or name),
        description=str(raw.get("description") or ""),
        profile=profile,
        seeds=seeds,
        budgets=budgets,
        grace=grace,
        threads=threads,
        normalise_budget=norm_budget,
        solvers=tuple(solvers),
        instances=tuple(instances),
        report=dict(report),
        paper=paper,
        source=source,
        raw=dict(raw),
    )


def _unique_names(specs: Sequence[InstanceSpec]) -> list[InstanceSpec]:
    """Drop exact duplicates; disambiguate same-named different instances by a hash suffix."""
    seen: dict[str, InstanceSpec] = {}
    out: list[InstanceSpec] = []
    for s in specs:
        other = seen.get(s.name)
        if other is not None and other.key == s.key:
            continue
        if other is not None:
            name = f"{s.name}-{s.key[:6]}"
            data = {**s.data, "name": name}
            s = InstanceSpec(s.generator, s.kwargs, name, data, s.tag, s.normalise_by, s.source)
        seen[s.name] = s
        out.append(s)
    return out


def builtin_experiments() -> list[str]:
    """Names of the experiment files shipped in ``bench/experiments``."""
    names = sorted(p.stem for p in EXPERIMENT_DIR.glob("*.toml"))
    first = [n for n in PAPER_EXPERIMENTS if n in names]
    return first + [n for n in names if n not in first]


def load_experiment(name_or_path: str | Path, profile: str = "full") -> Experiment:
    """Load a shipped experiment by name, or a TOML file by path, for ``profile``."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith(".toml") or path.exists()):
        path = EXPERIMENT_DIR / f"{text}.toml"
        if not path.exists():
            known = ", ".join(builtin_experiments())
            raise InputError("experiment", text, f"no such experiment file or name; known: {known}")
    if not path.exists():
        raise InputError("experiment", text, "experiment file not found")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), None, f"invalid TOML: {exc}") from None
    except OSError as exc:
        raise InputError(str(path), None, f"cannot read file: {exc.strerror}") from None
    return parse_experiment(raw, profile, source=str(path), base_dir=path.parent)
