"""The parametric box search's speed (issue 10): seconds, boxes and DPs to its end.

At N >= 128 with lambda < 1 the exact solvers spend most of their budget in
:func:`geoplan.cost.parametric.parametric_bound`. This script runs it alone on
generated instances, with an incumbent from a short memetic run (seeded), and
prints per instance the seconds, boxes, DP calls, whether the search was
exhausted, and the gap its bound certifies. The machine load (1-minute load
average) is printed before and after. Compare two versions of the code by
running it in each on the same instances, back to back.

Run ``python -m bench.box_search`` (``--n``, ``--layers``, ``--seed``,
``--lam``, ``--families``; ``--deadline`` seconds per search; ``--json``: one
JSON object).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from geoplan.cost import bounds
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.parametric import parametric_bound
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import solve


def measure(family: str, n: int, layers: int, seed: int, lam: float,
            deadline: float) -> dict[str, Any]:
    """One search on a generated instance, with a memetic incumbent."""
    inst = resolve_normalisers(Instance.from_dict(by_family(family, n, layers, seed, lam=lam)))
    ma = solve(inst, "memetic", seed=seed, time_limit=10.0, threads=1)
    inc = ma.objective
    # Compile (or load) the search's kernels before timing it.
    parametric_bound(inst.coefficients(), inst.layers, bounds.clusters(inst),
                     ObjectiveWeights.from_instance(inst), max_boxes=1)
    t0 = time.perf_counter()
    pb = parametric_bound(inst.coefficients(), inst.layers, bounds.clusters(inst),
                          ObjectiveWeights.from_instance(inst), incumbent=inc,
                          deadline=t0 + deadline)
    wall = time.perf_counter() - t0
    gap = None if inc is None else (inc - pb.value) / abs(inc)
    return {"instance": f"{family}-n{n}-l{layers}-s{seed}-lam{lam:g}", "seconds": round(wall, 2),
            "boxes": pb.boxes, "dp_calls": pb.dp_calls, "exhausted": pb.exhausted,
            "incumbent": inc, "bound": pb.value, "gap": gap}


def run(families: Sequence[str], n: int, layers: int, seeds: Sequence[int], lam: float,
        deadline: float) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    rows = [measure(f, n, layers, s, lam, deadline) for f in families for s in seeds]
    return {"rows": rows, "load_before": load_before, "load_after": os.getloadavg()[0]}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", nargs="+", default=["metro"])
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--layers", type=int, default=96)
    ap.add_argument("--seed", type=int, nargs="+", default=[53])
    ap.add_argument("--lam", type=float, default=0.5)
    ap.add_argument("--deadline", type=float, default=150.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = run(args.families, args.n, args.layers, args.seed, args.lam, args.deadline)
    if args.json:
        json.dump(out, sys.stdout)
        print()
        return 0
    print(f"load before {out['load_before']:.2f}")
    print(f"{'instance':32} {'s':>8} {'boxes':>6} {'DPs':>6} {'exh':>4} {'gap %':>8}")
    for r in out["rows"]:
        gap = "-" if r["gap"] is None else f"{100 * r['gap']:.3f}"
        print(f"{r['instance']:32} {r['seconds']:8.2f} {r['boxes']:6d} {r['dp_calls']:6d} "
              f"{'yes' if r['exhausted'] else 'no':>4} {gap:>8}")
    print(f"load after {out['load_after']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
