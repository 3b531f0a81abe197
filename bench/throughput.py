"""Batch-evaluator throughput (issue 2): plans priced per second at N=64, L=48.

Populations of 256 chromosomes, drawn like the memetic algorithm's initial
population (paper 5.1: a random stage count Q, Q distinct random GPUs in random
order, a random composition of the L layers), are priced by
:class:`geoplan.BatchEvaluator` one population per call, as the memetic
algorithm calls it. The rate is the median over several timed runs; the scalar
evaluator (:func:`geoplan.evaluate`, which also validates and explains) is
timed on the same plans for comparison.

Run ``python -m bench.throughput`` (``--quick`` for a short smoke run; ``--check``
exits 1 when the batch rate is below the 1,000,000 plans/s target).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Sequence

import numpy as np

from geoplan.cost import evaluate
from geoplan.cost.batch import BatchEvaluator
from geoplan.model.generators import paper_mix
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

TARGET = 1_000_000.0  # plans per second, on 2 cores


def sample_population(rng: np.random.Generator, n_gpus: int, layers: int, size: int
                      ) -> np.ndarray:
    """``size`` chromosomes sampled like the MA initialisation (contiguous, distinct GPUs)."""
    out = np.empty((size, layers), dtype=np.int64)
    for p in range(size):
        q = int(rng.integers(1, min(n_gpus, layers) + 1))
        gpus = rng.permutation(n_gpus)[:q]
        cuts = np.sort(rng.choice(np.arange(1, layers), size=q - 1, replace=False))
        counts = np.diff(np.concatenate(([0], cuts, [layers])))
        out[p] = np.repeat(gpus, counts)
    return out


def batch_rate(ev: BatchEvaluator, populations: Sequence[np.ndarray], min_seconds: float
               ) -> tuple[float, float]:
    """(wall-clock, CPU-time) plans per second of one timed run: whole passes over the
    populations for at least min_seconds. The CPU-time rate shows what the kernel does
    when other processes share the cores (wall-clock then understates it)."""
    plans = 0
    start, cpu = time.perf_counter(), time.process_time()
    while True:
        for pop in populations:
            ev.evaluate(pop)
        plans += sum(len(pop) for pop in populations)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return plans / elapsed, plans / max(time.process_time() - cpu, 1e-9)


def scalar_rate(instance: Instance, plans: Sequence[Plan]) -> float:
    start = time.perf_counter()
    for plan in plans:
        evaluate(instance, plan)
    return len(plans) / (time.perf_counter() - start)


def measure(n_gpus: int = 64, layers: int = 48, population: int = 256, runs: int = 7,
            pools: int = 8, min_seconds: float = 0.25, scalar_plans: int = 400,
            lam: float = 0.5, seed: int = 0) -> dict[str, float | int]:
    """The medians (plans/s) of the batch and scalar evaluators on one generated instance.

    lambda 0.5 takes the kernel's mixed-objective branch (the most work per plan).
    """
    instance = Instance.from_dict(paper_mix(n_gpus, layers, seed, lam=lam))
    ev = BatchEvaluator(instance)
    rng = np.random.default_rng(seed)
    populations = [sample_population(rng, n_gpus, layers, population) for _ in range(pools)]
    ev.evaluate(populations[0])  # compile / load the numba kernel outside the timing
    timed = [batch_rate(ev, populations, min_seconds) for _ in range(runs)]
    batch = [wall for wall, _ in timed]

    flat = np.concatenate(populations)[:scalar_plans]
    plans = [Plan.from_chromosome(ev.instance, x) for x in flat]
    evaluate(ev.instance, plans[0])  # warm the coefficient caches
    scalar = [scalar_rate(ev.instance, plans) for _ in range(runs)]

    feasible = float(np.mean(ev.evaluate(np.concatenate(populations)).feasible))
    b, s = statistics.median(batch), statistics.median(scalar)
    return {
        "n_gpus": n_gpus,
        "layers": layers,
        "population": population,
        "runs": runs,
        "batch_plans_per_s": b,
        "batch_min_plans_per_s": min(batch),
        "batch_max_plans_per_s": max(batch),
        "batch_cpu_plans_per_s": statistics.median(cpu for _, cpu in timed),
        "scalar_plans_per_s": s,
        "ratio": b / s,
        "feasible_fraction": feasible,
        "cpu_count": os.cpu_count() or 1,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="3 short runs (a smoke test)")
    ap.add_argument("--runs", type=int, default=None, help="timed runs (default 7; quick 3)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 if the batch median is below {TARGET:,.0f} plans/s")
    args = ap.parse_args(argv)
    runs = args.runs or (3 if args.quick else 7)
    r = measure(runs=runs, pools=4 if args.quick else 8,
                min_seconds=0.05 if args.quick else 0.25,
                scalar_plans=100 if args.quick else 400)
    met = r["batch_plans_per_s"] >= TARGET
    if args.json:
        print(json.dumps({**r, "target_plans_per_s": TARGET, "target_met": met}))
    else:
        print(f"batch evaluator, N={r['n_gpus']} L={r['layers']} population {r['population']}, "
              f"median of {runs} runs ({r['cpu_count']} cores visible)")
        print(f"  batch : {r['batch_plans_per_s']:>14,.0f} plans/s "
              f"(min {r['batch_min_plans_per_s']:,.0f}, max {r['batch_max_plans_per_s']:,.0f})")
        print(f"          {r['batch_cpu_plans_per_s']:>14,.0f} plans per CPU second")
        print(f"  scalar: {r['scalar_plans_per_s']:>14,.0f} plans/s (geoplan.evaluate)")
        print(f"  ratio : {r['ratio']:>14,.0f} x")
        print(f"  feasible fraction of the sampled plans: {r['feasible_fraction']:.2f}")
        print(f"  target {TARGET:,.0f} plans/s: {'met' if met else 'NOT met'}")
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    raise SystemExit(main())
