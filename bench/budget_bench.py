"""Hard budgets: does every solver end within ``time_limit + 0.5 s``? (issue 9, item 7)

Runs each registered solver once per (family, N, time limit) through the CLI,
``python -m geoplan solve INST --solver S --time-limit T --json``, on geo and
metro instances with N in {32, 128, 256} GPUs and L = min(N / 2, 128) layers,
at T in {2, 5}, and prints ``wall_s - T`` per run (``wall_s`` is the solve's
own budget clock: model building included, the JIT warm-up and the process
start-up not) and the largest overrun. A solver that refuses a size on
purpose (bruteforce beyond its plan-space cap: exit 1) is listed as refused.

    python bench/budget_bench.py [--solvers a,b] [--sizes 32,128] [--limits 2,5]

Takes about 8 minutes on 2 cores. Stored output: bench/results/budgets.txt
(with the machine's load at the time, from ``uptime``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from geoplan.model.generators import by_family
from geoplan.solving.core import solver_names

SLACK = 0.5


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solvers", default=",".join(solver_names()))
    ap.add_argument("--sizes", default="32,128,256")
    ap.add_argument("--limits", default="2,5")
    ap.add_argument("--families", default="geo,metro")
    args = ap.parse_args(argv)
    solvers = [s for s in args.solvers.split(",") if s]
    sizes = [int(x) for x in args.sizes.split(",")]
    limits = [float(x) for x in args.limits.split(",")]
    families = args.families.split(",")

    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"# budget bench {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print(f"# load: {load}")
    print(f"# {'solver':15s} {'family':6s} {'N':>4s} {'L':>4s} {'T':>4s} {'wall_s':>8s} "
          f"{'over_s':>8s}  status")
    worst: tuple[float, str] = (-float("inf"), "")
    rows = 0
    with tempfile.TemporaryDirectory() as tmp:
        for family in families:
            for n in sizes:
                layers = min(n // 2, 128)
                path = Path(tmp) / f"{family}-{n}.json"
                path.write_text(json.dumps(by_family(family, n, layers, 1)))
                for limit in limits:
                    for solver in solvers:
                        cmd = [sys.executable, "-m", "geoplan", "solve", str(path),
                               "--solver", solver, "--time-limit", str(limit), "--json",
                               "--quiet"]
                        t0 = time.perf_counter()
                        proc = subprocess.run(cmd, capture_output=True, text=True,
                                              timeout=limit + 600)
                        process_s = time.perf_counter() - t0
                        label = f"{solver:15s} {family:6s} {n:4d} {layers:4d} {limit:4.0f}"
                        if proc.returncode != 0:
                            msg = (proc.stderr.strip().splitlines() or ["?"])[-1][:70]
                            kind = "refused" if proc.returncode == 1 else "error"
                            print(f"  {label} {'-':>8s} {'-':>8s}  {kind} (exit "
                                  f"{proc.returncode}): {msg}")
                            continue
                        d = json.loads(proc.stdout)
                        over = d["wall_s"] - limit
                        rows += 1
                        model = d["info"].get("model")
                        note = f" ({model})" if isinstance(model, str) else ""
                        flag = "  OVER" if over > SLACK else ""
                        print(f"  {label} {d['wall_s']:8.3f} {over:+8.3f}  {d['status']}"
                              f"{note} [process {process_s:.1f} s]{flag}", flush=True)
                        if over > worst[0]:
                            worst = (over, label.split()[0] + " " + " ".join(label.split()[1:]))
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"# load at the end: {load}")
    print(f"# runs: {rows}; max wall_s - time_limit: {worst[0]:+.3f} s ({worst[1]}); "
          f"target <= +{SLACK} s")
    return 0 if worst[0] <= SLACK else 1


if __name__ == "__main__":
    sys.exit(main())
