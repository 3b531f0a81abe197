"""Seconds to proven optimum per exact method, cold and warm-started from the MA.

For each generator family, N, L and lambda it runs every exact method with a
time limit, once cold and once warm-started from the memetic algorithm
(``warm_start="memetic"``, which spends a slice of the same budget), and prints
a table: seconds to proof, or the certified gap at the limit. Rows are also
appended to a JSON-lines file.

    python -m bench.exact_bench --quick
    python -m bench.exact_bench --n 8 12 16 32 --layers 12 32 --lam 1 0.5 --time-limit 120
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from geoplan.errors import GeoplanError
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import get_solver, solve

METHODS = ("bnb", "milp", "cpsat")


def run_one(inst: Instance, method: str, warm: bool, time_limit: float, seed: int,
            threads: int) -> dict[str, Any]:
    """One run, never raising: errors become rows."""
    row: dict[str, Any] = {
        "instance": inst.name, "n": inst.n, "layers": inst.layers, "lambda": inst.lam,
        "method": method, "warm": warm, "time_limit": time_limit, "seed": seed,
    }
    t0 = time.perf_counter()
    try:
        res = solve(inst, method, seed=seed, time_limit=time_limit, threads=threads,
                    warm_start="memetic" if warm else None)
    except GeoplanError as exc:
        row.update(status="error", error=str(exc), wall_s=time.perf_counter() - t0)
        return row
    row.update(
        status=res.status, objective=res.objective, lower_bound=res.lower_bound, gap=res.gap,
        wall_s=res.wall_s,
        warm_accepted=res.info.get("warm_start", {}).get("accepted") if warm else None,
    )
    return row


def fmt(row: dict[str, Any]) -> str:
    if row["status"] == "optimal":
        return f"{row['wall_s']:.1f}s"
    if row["status"] == "error":
        return "error"
    if row.get("gap") is not None:
        return f"gap {100 * row['gap']:.2f}%"
    return row["status"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="N 8 12, L 12, lambda 1, 30 s limit")
    p.add_argument("--families", nargs="+", default=["geo", "metro"])
    p.add_argument("--n", nargs="+", type=int, default=[8, 12, 16, 32])
    p.add_argument("--layers", nargs="+", type=int, default=[12, 32])
    p.add_argument("--lam", nargs="+", type=float, default=[1.0, 0.5])
    p.add_argument("--methods", nargs="+", default=list(METHODS))
    p.add_argument("--time-limit", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-warm", action="store_true", help="cold runs only")
    p.add_argument("--out", default="bench/results/exact_bench.jsonl")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.layers, args.lam, args.time_limit = [8, 12], [12], [1.0], 30.0
    methods = []
    for m in args.methods:
        try:
            get_solver(m).load()
            methods.append(m)
        except GeoplanError as exc:
            print(f"skipping {m}: {exc}", file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    modes = [False] if args.no_warm else [False, True]
    rows: list[dict[str, Any]] = []
    header = ["family", "N", "L", "lambda"] + [
        f"{m}{'+warm' if w else ''}" for m in methods for w in modes
    ]
    print("  ".join(f"{h:>12s}" for h in header), flush=True)
    with out.open("a") as fh:
        for fam in args.families:
            for n in args.n:
                for L in args.layers:
                    for lam in args.lam:
                        d = by_family(fam, n, L, args.seed)
                        d["objective"]["lambda"] = lam
                        inst = Instance.from_dict(d)
                        cells = [fam, str(n), str(L), f"{lam:g}"]
                        for m in methods:
                            for w in modes:
                                row = run_one(inst, m, w, args.time_limit, args.seed,
                                              args.threads)
                                row["family"] = fam
                                rows.append(row)
                                fh.write(json.dumps(row) + "\n")
                                fh.flush()
                                cells.append(fmt(row))
                        print("  ".join(f"{c:>12s}" for c in cells), flush=True)
    proven = [r for r in rows if r["status"] == "optimal"]
    print(f"\n{len(proven)}/{len(rows)} runs proven optimal", end="")
    if proven:
        print(f"; median seconds to proof {statistics.median(r['wall_s'] for r in proven):.2f}")
    else:
        print()
    for m in methods:
        for w in modes:
            sel = [r for r in rows if r["method"] == m and r["warm"] == w]
            ok = [r for r in sel if r["status"] == "optimal"]
            gaps = [r["gap"] for r in sel if r["status"] != "optimal" and r.get("gap") is not None]
            tag = f"{m}{'+warm' if w else ''}"
            med = f"{statistics.median(r['wall_s'] for r in ok):.2f}s" if ok else "-"
            worst = f"{100 * max(gaps):.2f}%" if gaps else "-"
            print(f"{tag:>12s}: proven {len(ok)}/{len(sel)}, median time to proof {med}, "
                  f"worst gap at limit {worst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
