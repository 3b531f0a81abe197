"""Benchmark of the memetic algorithm: time to its final best, and quality.

For each generated instance (``geo`` and ``metro`` families, N in {8, 12, 16,
32}, L in {12, 32}, generator seed 1) the MA runs with its default
parameters under several seeds. The table gives the median time at which a
run reached its final best (``time_to_best_s``, counted from the start of the
run, initialisation included), the median run length, and the gap of each
run's best to the best known objective:

- ``optimal (NAME)``: proven by an exact solver of the registry (``bnb``,
  ``milp``) when one is importable and proves optimality within
  ``--exact-time``;
- ``best of MA (K runs)`` otherwise: the best over the measured runs and
  ``--ref-seeds`` longer MA runs (w = 300, G_max = 2000), which is only a
  best known value, not an optimum.

Run ``python -m bench.memetic_bench`` (full) or ``--quick`` (fewer sizes and
seeds). Timings are wall clock on a shared machine: read medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geoplan.errors import GeoplanError, SolverError
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.space import plan_space_size
from geoplan.solving.core import get_solver, solve
from heuristics.memetic import MemeticParams, run_memetic

__all__ = ["Row", "bench_instance", "main"]

EXACT = ("bnb", "milp")
REL_TOL = 1e-9


@dataclass
class Row:
    """Figures for one instance."""

    family: str
    n: int
    layers: int
    reference: float
    source: str
    objectives: list[float] = field(default_factory=list)
    time_to_best: list[float] = field(default_factory=list)
    runtime: list[float] = field(default_factory=list)
    generations: list[int] = field(default_factory=list)

    @property
    def gaps(self) -> list[float]:
        """Relative gaps to the reference; rounding-level differences count as 0."""
        gaps = [o / self.reference - 1.0 for o in self.objectives]
        return [0.0 if abs(g) <= REL_TOL else g for g in gaps]

    @property
    def hits(self) -> int:
        return sum(g <= REL_TOL for g in self.gaps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family, "n": self.n, "layers": self.layers,
            "reference": self.reference, "source": self.source,
            "objectives": self.objectives, "time_to_best_s": self.time_to_best,
            "runtime_s": self.runtime, "generations": self.generations,
        }


def _exact_reference(inst: Instance, seconds: float) -> tuple[float, str] | None:
    """A proven optimum from the first registered, importable exact solver that proves one."""
    for name in EXACT:
        try:
            get_solver(name).load()
        except (SolverError, GeoplanError):
            continue
        try:
            res = solve(inst, name, seed=0, time_limit=seconds)
        except GeoplanError as exc:
            print(f"  ({name} failed: {exc})", file=sys.stderr)
            continue
        if res.status == "optimal" and res.objective is not None:
            return res.objective, f"optimal ({name})"
    return None


def bench_instance(
    family: str, n: int, layers: int, seeds: int, ref_seeds: int, exact_time: float,
    params: MemeticParams, instance_seed: int = 1,
) -> Row:
    """Run the MA ``seeds`` times on one generated instance and find its reference."""
    inst = Instance.from_dict(by_family(family, n, layers, instance_seed))
    time_limit = params.time_limit
    results = [run_memetic(inst, s, params) for s in range(seeds)]
    found = min(r.objective for r in results)
    ref = _exact_reference(inst, exact_time) if exact_time > 0 else None
    if ref is None:
        long = MemeticParams(time_limit=time_limit, no_improvement=300, max_generations=2000)
        extra = [run_memetic(inst, 1000 + s, long).objective for s in range(ref_seeds)]
        ref = (min([found, *extra]), f"best of MA ({seeds + ref_seeds} runs)")
    row = Row(family, n, layers, ref[0], ref[1])
    for r in results:
        row.objectives.append(r.objective)
        row.time_to_best.append(float(r.time_to_best_s or 0.0))
        row.runtime.append(r.runtime_s)
        row.generations.append(r.generations)
    return row


def format_table(rows: list[Row]) -> str:
    header = ["family", "N", "L", "f(N,L)", "best known", "source", "ttb med s", "ttb max s",
              "run med s", "gens med", "gap med %", "gap max %", "hits"]
    lines = []
    for r in rows:
        lines.append([
            r.family, str(r.n), str(r.layers), f"{plan_space_size(r.n, r.layers):.2e}",
            f"{r.reference:.3f}", r.source,
            f"{statistics.median(r.time_to_best):.3f}", f"{max(r.time_to_best):.3f}",
            f"{statistics.median(r.runtime):.3f}", f"{statistics.median(r.generations):.0f}",
            f"{100 * statistics.median(r.gaps):.3f}", f"{100 * max(r.gaps):.3f}",
            f"{r.hits}/{len(r.objectives)}",
        ])
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(header)]
    out = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(x.rjust(w) for x, w in zip(line, widths, strict=True)) for line in lines]
    return "\n".join(out)


def _warm_up() -> None:
    """Load the compiled evaluator kernels once, so that no run pays for it."""
    inst = Instance.from_dict(by_family("geo", 4, 8, 0))
    run_memetic(inst, 0, MemeticParams(population=10, max_generations=2))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memetic_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="N in {8, 16}, 3 seeds, 2 reference runs, no exact solvers")
    p.add_argument("--families", nargs="+", default=["geo", "metro"])
    p.add_argument("--n", nargs="+", type=int, default=None, help="GPU counts (8 12 16 32)")
    p.add_argument("--layers", nargs="+", type=int, default=[12, 32])
    p.add_argument("--seeds", type=int, default=None, help="MA seeds per instance (10)")
    p.add_argument("--ref-seeds", type=int, default=None, help="extra long MA runs (10)")
    p.add_argument("--exact-time", type=float, default=None,
                   help="seconds per exact reference solve (60; 0 = none)")
    p.add_argument("--time-limit", type=float, default=120.0, help="MA T_max per run (120)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="MA parameter override, as for geoplan solve (repeatable)")
    p.add_argument("--instance-seed", type=int, default=1)
    p.add_argument("--json", help="write the raw figures here")
    a = p.parse_args(argv)
    quick = a.quick
    ns = a.n or ([8, 16] if quick else [8, 12, 16, 32])
    seeds = a.seeds or (3 if quick else 10)
    ref_seeds = a.ref_seeds if a.ref_seeds is not None else (2 if quick else 10)
    exact_time = a.exact_time if a.exact_time is not None else (0.0 if quick else 60.0)

    overrides: dict[str, Any] = {}
    for text in a.param:
        key, _, value = text.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    params = MemeticParams.from_mapping(overrides, MemeticParams(time_limit=a.time_limit))
    print(f"memetic parameters: {params}", file=sys.stderr)

    _warm_up()
    rows: list[Row] = []
    t0 = time.perf_counter()
    for family in a.families:
        for n in ns:
            for layers in a.layers:
                rows.append(bench_instance(family, n, layers, seeds, ref_seeds, exact_time,
                                           params, a.instance_seed))
                r = rows[-1]
                print(f"{family} N={n} L={layers}: ttb median "
                      f"{statistics.median(r.time_to_best):.3f} s, gap median "
                      f"{100 * statistics.median(r.gaps):.3f}% ({r.source})",
                      file=sys.stderr, flush=True)
    changed = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "paper defaults"
    print(f"memetic ({changed}); {seeds} seeds per instance, generator seed "
          f"{a.instance_seed}\n")
    print(format_table(rows))
    for r in rows:
        if r.source.startswith("optimal") and min(r.gaps) < 0:
            print(f"WARNING: {r.family} N={r.n} L={r.layers}: the MA beat the proven optimum "
                  f"of {r.source} ({min(r.objectives)!r} < {r.reference!r})")
    small = [t for r in rows if r.n <= 16 and r.layers <= 32 for t in r.time_to_best]
    if small:
        print(f"\nmedian time-to-best over all runs with N <= 16, L <= 32: "
              f"{float(np.median(small)):.3f} s (target <= 5 s); "
              f"bench wall {time.perf_counter() - t0:.1f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([r.to_dict() for r in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
