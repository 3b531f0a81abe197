"""Run-to-run spread of the bound at a short budget: the same solve, several times.

At budgets of a few seconds the exact models' parametric bound is cut by the clock, so
the bound they end with depends on how much CPU the bound phase got. This solves each
instance with each solver ``--repeats`` times, one run at a time, and stores the rows
(load average before each run); the README quotes the spread next to the portfolio's
bound comparison.

    python -m bench.bound_noise                      # the defaults below, 4 repeats
    python -m bench.bound_noise --report
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import solve

OUT = Path(__file__).resolve().parent / "results" / "bound-noise" / "results.jsonl"
#: (family, N, L, generator seed, budget s): cells of the anytime sweep neither proves.
CELLS = (("geo", 64, 96, 0, 5.0), ("metro", 128, 96, 0, 5.0))
SOLVERS = ("milp", "portfolio")


def spread(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (instance, budget, solver): runs, least and largest bound, loads seen."""
    groups: dict[tuple[str, float, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["instance"], r["budget_s"], r["solver"]), []).append(r)
    out = []
    for (inst, budget, solver), rs in groups.items():
        lbs = [r["lower_bound"] for r in rs if r["lower_bound"] is not None]
        out.append({"instance": inst, "budget_s": budget, "solver": solver, "runs": len(rs),
                    "lb_min": min(lbs, default=None), "lb_max": max(lbs, default=None),
                    "proven": sum(r["status"] == "optimal" for r in rs),
                    "load_min": min(r["load_before"] for r in rs),
                    "load_max": max(r["load_before"] for r in rs)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bound_noise",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--report", action="store_true", help="summarise the stored rows")
    args = ap.parse_args(argv)
    if not args.report:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as fh:
            for family, n, layers, seed, budget in CELLS:
                inst = Instance.from_dict(by_family(family, n, layers, seed))
                for _ in range(args.repeats):
                    for solver in SOLVERS:  # interleaved: both see the same drift in load
                        load = os.getloadavg()[0]
                        res = solve(inst, solver, seed=0, time_limit=budget, threads=1)
                        row = {"instance": inst.name, "budget_s": budget, "solver": solver,
                               "threads": 1, "status": res.status,
                               "lower_bound": res.lower_bound, "objective": res.objective,
                               "wall_s": round(res.wall_s, 3), "load_before": load}
                        fh.write(json.dumps(row) + "\n")
                        fh.flush()
                        print(json.dumps(row), file=sys.stderr)
    rows = [json.loads(line) for line in args.out.read_text().splitlines() if line]
    for s in spread(rows):
        print(f"{s['instance']} at {s['budget_s']:g} s, {s['solver']}: {s['runs']} runs, "
              f"bound {s['lb_min']:.1f}-{s['lb_max']:.1f}, load {s['load_min']:.2f}-"
              f"{s['load_max']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
