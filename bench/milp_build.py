"""MILP model-building time (issue 10): seconds from instance to a HiGHS model, at N=64..256.

For each instance (geo and metro, N=64/L=48, N=128/L=96, N=256/L=128, lambda 1 and
0.5) the three uninterruptible steps of :func:`formulations.milp.solver.solve`
before the search are timed separately: :func:`~formulations.milp.data.prepare`
(caps, bounds, arcs, dominance, cut groups), :func:`~formulations.milp.model.build_model`
(the Pyomo model) and the translation to HiGHS
(:class:`formulations.highs_tools.HighsSession`). Each figure is the median of
``--reps`` runs; the total is the median of the per-run sums. Optional bound
steps the solver budgets separately (the start heuristic, the parametric bound,
LP tightening, each a share of the budget) are not part of building and are not
timed here. The machine load (1-minute load average) is printed before and after.

Run ``python -m bench.milp_build`` (``--quick``: N=64 only, one repetition;
``--json``: one JSON object; ``--check``: exit 1 when a median total at N=128 is
above the issue's 5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from formulations.highs_tools import HighsSession
from formulations.milp.data import prepare
from formulations.milp.model import build_model
from geoplan.cost.normalise import resolve_normalisers
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance

TARGET_S = 5.0  # model building at N=128, L=96 (issue 10)
SIZES = ((64, 48), (128, 96), (256, 128))
STEPS = ("prepare", "build", "translate")


def time_build(inst: Instance) -> dict[str, float]:
    """Seconds of each building step on ``inst``, and the model's size."""
    t0 = time.perf_counter()
    data = prepare(inst)
    t1 = time.perf_counter()
    model = build_model(inst, data=data)
    t2 = time.perf_counter()
    session = HighsSession(model)
    t3 = time.perf_counter()
    return {"prepare": t1 - t0, "build": t2 - t1, "translate": t3 - t2,
            "total": t3 - t0, "cols": float(session.num_cols),
            "rows": float(session.highs.getNumRow())}


def run(sizes: Sequence[tuple[int, int]], reps: int, seed: int) -> dict[str, Any]:
    rows = []
    load_before = os.getloadavg()[0]
    # The first model built pays Pyomo's and HiGHS's import-time set-up: not building.
    time_build(Instance.from_dict(by_family("geo", 8, 8, seed)))
    for n, layers in sizes:
        for family in ("geo", "metro"):
            for lam in (1.0, 0.5):
                inst = resolve_normalisers(
                    Instance.from_dict(by_family(family, n, layers, seed, lam=lam)))
                runs = [time_build(inst) for _ in range(reps)]
                row: dict[str, Any] = {"family": family, "n": n, "layers": layers, "lambda": lam,
                                       "cols": int(runs[0]["cols"]), "rows": int(runs[0]["rows"])}
                for key in (*STEPS, "total"):
                    row[key] = statistics.median(r[key] for r in runs)
                rows.append(row)
                print(f"  {family:5s} N={n:3d} L={layers:3d} lambda={lam:g}: "
                      + "  ".join(f"{k} {row[k]:6.2f} s" for k in (*STEPS, "total"))
                      + f"  ({row['cols']} cols, {row['rows']} rows)", file=sys.stderr,
                      flush=True)
    at_target = [r["total"] for r in rows if r["n"] == 128]
    return {"reps": reps, "seed": seed, "rows": rows,
            "load_before": load_before, "load_after": os.getloadavg()[0],
            "target_s": TARGET_S,
            "worst_total_at_128": max(at_target) if at_target else None}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.milp_build",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    sizes = SIZES[:1] if a.quick else SIZES
    out = run(sizes, 1 if a.quick else a.reps, a.seed)
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"MILP building, median of {out['reps']} (seed {out['seed']}; load "
              f"{out['load_before']:.2f} before, {out['load_after']:.2f} after)")
        print(f"{'family':6s} {'N':>4s} {'L':>4s} {'lam':>4s} "
              + " ".join(f"{k:>9s}" for k in (*STEPS, "total")) + f" {'cols':>7s} {'rows':>7s}")
        for r in out["rows"]:
            print(f"{r['family']:6s} {r['n']:4d} {r['layers']:4d} {r['lambda']:4g} "
                  + " ".join(f"{r[k]:8.2f}s" for k in (*STEPS, "total"))
                  + f" {r['cols']:7d} {r['rows']:7d}")
        w = out["worst_total_at_128"]
        if w is not None:
            print(f"slowest build at N=128: {w:.2f} s (target {TARGET_S:g} s, ratio "
                  f"{w / TARGET_S:.2f})")
    w = out["worst_total_at_128"]
    return 1 if a.check and w is not None and w > TARGET_S else 0


if __name__ == "__main__":
    raise SystemExit(main())
