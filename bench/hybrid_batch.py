"""Hybrid batch-evaluator throughput (issue 11): hybrid plans priced per second at N=64, L=48.

The instance is the ``cloud`` family (8-GPU nodes in several regions) with the
hybrid training fields set (micro-batch sizes 4 or 8, ZeRO 0/1/2, lambda 0.5 so
the mixed objective is computed). The plans are realistic random hybrid plans:
4-16 stages, TP degree 1-8 inside one node, 1-4 data-parallel replicas with
random shares of the micro-batch, random recomputation, at most the 64 GPUs,
built straight into arrays as a hybrid heuristic would
(:meth:`HybridPopulation.from_arrays`). Populations are priced by
:class:`geoplan.cost.hybrid_batch.HybridBatchEvaluator` with 1 thread and with
2 threads (pool threads, the default, and numba's prange); each rate is the
median of several timed runs. The machine load (1-minute load average before
and after) and the JIT warm-up (numba cache hit, and a cold
compile in a child process with an empty cache) are reported separately.

Run ``python -m bench.hybrid_batch`` (``--quick`` for a smoke run, ``--json`` for one
JSON object, ``--check`` exits 1 when the 2-thread median is below 500,000 plans/s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from geoplan.cost.hybrid_batch import HybridBatchEvaluator, HybridPopulation
from geoplan.model.generators import cloud, cloud_node_of
from geoplan.model.instance import Instance

TARGET = 500_000.0  # plans per second at N=64, L=48 on 2 cores (issue 11)
#: (key, threads, parallel back-end) of the timed configurations.
MODES = (("1t", 1, "threads"), ("2t", 2, "threads"), ("2t_prange", 2, "prange"))


def hybrid_instance(n: int = 64, layers: int = 48, seed: int = 0) -> Instance:
    d = cloud(n, layers, seed, micro_batch_size=4, lam=0.5)
    d["training"].update(micro_batch_choices=[4, 8], zero_choices=[0, 1, 2])
    return Instance.from_dict(d)


def random_population(rng: np.random.Generator, inst: Instance, size: int,
                      q_range: tuple[int, int] = (4, 16)) -> HybridPopulation:
    """``size`` random hybrid plans as arrays (see the module docstring)."""
    L, N = inst.layers, inst.n
    node = np.array([cloud_node_of(g) for g in inst.gpu_ids])
    nodes = [np.flatnonzero(node == v) for v in range(int(node.max()) + 1)]
    qmax = q_range[1]
    layers = np.zeros((size, qmax), np.int64)
    tp = np.zeros((size, qmax), np.int64)
    rec = np.zeros((size, qmax), np.int64)
    rep0 = np.zeros((size, qmax + 1), np.int64)
    samples = np.zeros((size, 4 * qmax), np.int64)
    g0 = np.zeros((size, 4 * qmax + 1), np.int64)
    gpus = np.full((size, N), -1, np.int64)
    q = np.empty(size, np.int64)
    u = rng.choice(np.array(inst.training.micro_batch_choices or (4,)), size=size)
    zero = rng.choice(np.array(inst.training.zero_choices or (0,)), size=size)
    for p in range(size):
        qc = int(rng.integers(q_range[0], q_range[1] + 1))
        q[p] = qc
        cuts = np.sort(rng.choice(np.arange(1, L), size=qc - 1, replace=False))
        layers[p, :qc] = np.diff(np.concatenate(([0], cuts, [L])))
        free = [list(rng.permutation(v)) for v in nodes]
        left = N
        r = m = 0
        for s in range(qc):
            room = left - (qc - s - 1)  # a GPU for each later stage
            t = int(rng.choice([1, 2, 4, 8]))
            d = int(rng.integers(1, min(4, int(u[p])) + 1))
            while t > 1 and (t > room or not any(len(f) >= t for f in free)):
                t //= 2
            groups = sum(len(f) // t for f in free)  # TP groups of t GPUs still placeable
            d = max(1, min(d, room // t, groups))
            tp[p, s] = t
            rec[p, s] = int(rng.integers(2))
            rep0[p, s] = r
            cut = np.sort(rng.choice(np.arange(1, int(u[p])), size=d - 1, replace=False))
            share = np.diff(np.concatenate(([0], cut, [int(u[p])])))
            for k in range(d):
                fits = [f for f in free if len(f) >= t]
                f = fits[int(rng.integers(len(fits)))]
                g0[p, r] = m
                samples[p, r] = share[k]
                for _ in range(t):
                    gpus[p, m] = f.pop()
                    m += 1
                r += 1
            left -= t * d
        rep0[p, qc] = r
        g0[p, r] = m
    return HybridPopulation.from_arrays(layers, tp, rec, rep0, samples, g0, gpus, q, u, zero)


def timed_rate(ev: HybridBatchEvaluator, pops: Sequence[HybridPopulation], min_seconds: float
               ) -> tuple[float, float]:
    """(wall-clock, CPU-time) plans/s of whole passes over ``pops`` for >= min_seconds."""
    plans = 0
    start, cpu = time.perf_counter(), time.process_time()
    while True:
        for pop in pops:
            ev.evaluate(pop)
        plans += sum(len(pop) for pop in pops)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return plans / elapsed, plans / max(time.process_time() - cpu, 1e-9)


def warm_up_seconds(cold: bool) -> float:
    """The JIT warm-up (hybrid_batch.warm_up) in a fresh process: from numba's cache, or
    compiling everything (an empty NUMBA_CACHE_DIR)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if cold:
            env["NUMBA_CACHE_DIR"] = tmp
        out = subprocess.run(
            [sys.executable, "-c",
             "from geoplan.cost.hybrid_batch import warm_up; print(warm_up())"],
            env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def measure(n: int = 64, layers: int = 48, population: int = 1024, pools: int = 8,
            runs: int = 7, min_seconds: float = 0.25, seed: int = 0, cold: bool = True
            ) -> dict[str, Any]:
    load_before = os.getloadavg()
    warm_cached = warm_up_seconds(cold=False)
    warm_cold = warm_up_seconds(cold=True) if cold else None
    inst = hybrid_instance(n, layers, seed)
    rng = np.random.default_rng(seed)
    pops = [random_population(rng, inst, population) for _ in range(pools)]
    out: dict[str, Any] = {"n_gpus": n, "layers": layers, "population": population,
                           "pools": pools, "runs": runs}
    for key, threads, how in MODES:
        ev = HybridBatchEvaluator(inst, threads=threads, parallel=how)
        t0 = time.perf_counter()
        ev.evaluate(pops[0])  # compile / load outside the timing
        out[f"first_call_s_{key}"] = time.perf_counter() - t0
        timed = [timed_rate(ev, pops, min_seconds) for _ in range(runs)]
        wall = [w for w, _ in timed]
        out[f"plans_per_s_{key}"] = statistics.median(wall)
        out[f"min_plans_per_s_{key}"] = min(wall)
        out[f"max_plans_per_s_{key}"] = max(wall)
        out[f"cpu_plans_per_s_{key}"] = statistics.median(c for _, c in timed)
        out[f"threads_used_{key}"] = ev.threads
    res = HybridBatchEvaluator(inst).evaluate(HybridPopulation.from_arrays(
        *(np.concatenate([getattr(p, k) for p in pops]) for k in
          ("layers", "tp", "rec", "rep0", "samples", "g0", "gpus", "q", "u", "zero"))))
    out["status_fractions"] = {name: float(np.mean(res.status == code)) for code, name in
                               enumerate(("feasible", "invalid", "no_link", "memory"))}
    out["mean_gpus_per_plan"] = float(np.mean(np.concatenate(
        [(p.gpus >= 0).sum(axis=1) for p in pops])))
    out["warm_up_cached_s"] = warm_cached
    out["warm_up_cold_s"] = warm_cold
    out["load_before"] = load_before
    out["load_after"] = os.getloadavg()
    out["cpu_count"] = os.cpu_count() or 1
    out["target_plans_per_s"] = TARGET
    out["target_met"] = out["plans_per_s_2t"] >= TARGET
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hybrid_batch", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="3 short runs, no cold compile")
    ap.add_argument("--runs", type=int, default=None, help="timed runs (default 7; quick 3)")
    ap.add_argument("--population", type=int, default=1024, help="plans per evaluate call")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 if the 2-thread median is below {TARGET:,.0f} plans/s")
    args = ap.parse_args(argv)
    runs = args.runs or (3 if args.quick else 7)
    r = measure(population=args.population, pools=2 if args.quick else 8, runs=runs,
                min_seconds=0.05 if args.quick else 0.25, cold=not args.quick)
    if args.json:
        print(json.dumps(r))
    else:
        print(f"hybrid batch evaluator, N={r['n_gpus']} L={r['layers']}, populations of "
              f"{r['population']} plans ({r['mean_gpus_per_plan']:.1f} GPUs per plan on "
              f"average), median of {runs} runs, {r['cpu_count']} cores visible")
        for key, threads, how in MODES:
            label = f"{threads} thread{'s' if threads > 1 else ''}" + (
                f" ({how})" if threads > 1 else "")
            print(f"  {label:<20}: {r[f'plans_per_s_{key}']:>10,.0f} plans/s (min "
                  f"{r[f'min_plans_per_s_{key}']:,.0f}, max {r[f'max_plans_per_s_{key}']:,.0f};"
                  f" {r[f'cpu_plans_per_s_{key}']:,.0f} per CPU second)")
        fr = ", ".join(f"{k} {v:.2f}" for k, v in r["status_fractions"].items())
        print(f"  statuses of the sampled plans: {fr}")
        cold = ("not measured" if r["warm_up_cold_s"] is None
                else f"{r['warm_up_cold_s']:.1f} s cold compile")
        print(f"  JIT warm-up: {r['warm_up_cached_s']:.2f} s from numba's cache, {cold}")
        lb, la = r["load_before"], r["load_after"]
        print(f"  load average (1/5/15 min): before {lb[0]:.2f} {lb[1]:.2f} {lb[2]:.2f}, "
              f"after {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}")
        print(f"  target {TARGET:,.0f} plans/s on 2 threads: "
              f"{'met' if r['target_met'] else 'NOT met'}")
    return 1 if args.check and not r["target_met"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
