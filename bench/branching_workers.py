"""Site branching on one thread and on two: time to proof and certified gap.

With ``--threads 2`` the exact models search site branching's nodes in two forked
processes (:mod:`geoplan.solving.forkpool`). This runs one exact solver on each instance
once with each thread count, one run at a time (the two workers need the machine's two
cores), and prints per instance the time to proof or the gap at the limit, the nodes
searched, and the median ratio of the one-thread to the two-thread time to proof over
the instances both prove. Rows go to a JSON-lines file; the load average is recorded
before every run.

    python -m bench.branching_workers                      # metro N=64 L=48, 120 s
    python -m bench.branching_workers --seeds 251 179 --lam 1 --time-limit 120
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import paired
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import solve

OUT = Path(__file__).resolve().parent / "results" / "branching-workers" / "results.jsonl"


def run_one(inst: Instance, solver: str, threads: int, time_limit: float) -> dict[str, Any]:
    load = paired.load_now()
    res = solve(inst, solver, seed=0, time_limit=time_limit, threads=threads)
    par = res.info.get("parametric") or {}
    br = par.get("site_branching") or {}
    return {"instance": inst.name, "n": inst.n, "layers": inst.layers, "lambda": inst.lam,
            "solver": solver, "threads": threads, "time_limit": time_limit,
            "status": res.status, "objective": res.objective, "lower_bound": res.lower_bound,
            "gap": res.gap, "wall_s": round(res.wall_s, 3),
            "branching_nodes": br.get("nodes"), "branching_s": br.get("seconds"),
            "load_before": load}


cell = paired.status_cell


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """The table and the median speed-up, from the rows (one per instance and threads)."""
    by: dict[str, dict[int, dict[str, Any]]] = {}
    for r in rows:  # the generator's name leaves lambda out
        by.setdefault(f"{r['instance']} lambda {r.get('lambda', 1.0):g}", {})[r["threads"]] = r
    lines = ["| instance | 1 thread | nodes | 2 threads | nodes | load before (1 / 2) |",
             "| --- | --- | --- | --- | --- | --- |"]
    ratios = []
    for name, pair in by.items():
        one, two = pair.get(1), pair.get(2)
        if one is None or two is None:
            continue
        lines.append(f"| {name} | {cell(one)} | {one['branching_nodes']} | {cell(two)} | "
                     f"{two['branching_nodes']} | {one['load_before']:.2f} / "
                     f"{two['load_before']:.2f} |")
        if one["status"] == two["status"] == "optimal":
            ratios.append(one["wall_s"] / two["wall_s"])
    proven = {t: sum(1 for p in by.values() if t in p and p[t]["status"] == "optimal")
              for t in (1, 2)}
    lines.append("")
    lines.append(f"proven: {proven[1]} of {len(by)} on 1 thread, {proven[2]} of {len(by)} "
                 "on 2")
    if ratios:
        lines.append(f"median speed-up (1-thread / 2-thread time to proof, {len(ratios)} "
                     f"instances proven by both): {statistics.median(ratios):.2f}x "
                     f"(range {min(ratios):.2f}-{max(ratios):.2f})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.branching_workers",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="metro")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--lam", type=float, nargs="+", default=[1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[251, 179, 149, 109, 113])
    ap.add_argument("--solver", default="sliced")

    def runs(args: argparse.Namespace) -> Iterator[tuple[dict[str, Any], str]]:
        for lam in args.lam:
            for seed in args.seeds:
                inst = Instance.from_dict(by_family(args.family, args.n, args.layers, seed,
                                                    lam=lam))
                for threads in (1, 2):
                    row = run_one(inst, args.solver, threads, args.time_limit)
                    yield row, (f"{inst.name} threads={threads}: {cell(row)}, "
                                f"{row['branching_nodes']} nodes")

    return paired.main(ap, OUT, argv, runs, summary)


if __name__ == "__main__":
    sys.exit(main())
