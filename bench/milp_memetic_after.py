"""The exact models' memetic run after site branching, against none (``memetic_after_share``).

When site branching leaves the best plan unproven, ``milp`` (and CP-SAT and the sliced
MILP) run the memetic algorithm from it for at most ``memetic_after_share`` of the budget
left (default 0.1; docs/milp.md). This runs ``milp`` on each instance with the default
and with 0, the step before branching off in both (``memetic_share=0``), one run at a
time, two threads each, and prints per instance the time to proof or the gap at the
limit, and what HiGHS did; each row also holds the memetic run's summary.

    python -m bench.milp_memetic_after                # the stored instances, 120 s
    python -m bench.milp_memetic_after --cases metro:64:48:401:0.5 --time-limit 120
    python -m bench.milp_memetic_after --report       # the table of the stored rows
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import milp_narrow, paired

OUT = Path(__file__).resolve().parent / "results" / "milp-memetic-after" / "results.jsonl"
#: family:N:L:instance seed:lambda. 401 led to the step; 179 and 251 are the instances
#: left unproven at lambda 1; 653 (N=128) was a check of this stop.
CASES = ("metro:64:48:401:0.5", "metro:64:48:179:1", "metro:64:48:251:1",
         "metro:128:96:653:0.5")
#: the share the step gets when on (the default)
SHARE = 0.1
#: the row's field that says which variant ran
KEY = "memetic_after_on"


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """The table: each instance with the memetic run after branching and without."""
    return milp_narrow.summary(rows, KEY, ("memetic after", "none"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.milp_memetic_after",
                                 description=__doc__.split("\n\n")[0])
    paired.add_cases(ap, CASES)

    def runs(args: argparse.Namespace) -> Iterator[tuple[dict[str, Any], str]]:
        for inst, lam in paired.instances(args.cases):
            for on in (True, False):
                row = milp_narrow.run_one(inst, on, args.threads, args.time_limit, key=KEY,
                                          params={"memetic_share": 0.0,
                                                  "memetic_after_share": SHARE if on else 0.0})
                yield row, (f"{inst.name} lambda {lam:g} memetic after={on}: "
                            f"{paired.status_cell(row)}, plan {row['objective']}")

    return paired.main(ap, OUT, argv, runs, summary)


if __name__ == "__main__":
    sys.exit(main())
