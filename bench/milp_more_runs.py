"""The MILP after kept-apart parts are split by the runs their plans hold, against the
stored run before.

Site branching now splits a kept-apart part left below the incumbent by the runs its
plans hold per site (:func:`geoplan.cost.site_branching._more_runs`), and once those
runs step back as often as its plans, by the plans holding exactly those runs
(:func:`geoplan.cost.site_branching._exact_runs`); nothing else changed and there is no
switch, so this runs the default ``milp`` on the nine instances
of ``bench/milp_three_back.py`` with the same protocol (two threads, 120 s, one run at a
time) and sets each beside ``bench/milp_dp_work.py``'s stored run (commit b82e526).

    python -m bench.milp_more_runs                      # the nine instances, 120 s
    python -m bench.milp_more_runs --report             # the table of the stored rows
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench import milp_dp_work

OUT = Path(__file__).resolve().parent / "results" / "milp-more-runs" / "results.jsonl"
#: The rows set beside these: milp_dp_work's.
BEFORE = milp_dp_work.OUT
KEY = "more_runs"


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """One line per instance: now, and milp_dp_work's stored row; the proof counts."""
    before = [json.loads(line) for line in BEFORE.read_text().splitlines() if line]
    return milp_dp_work.compare(rows, {f"{r['instance']} lambda {r['lambda']:g}": r
                                       for r in before}, "b82e526")


def main(argv: list[str] | None = None) -> int:
    return milp_dp_work.default_main(argv, "python -m bench.milp_more_runs", __doc__ or "",
                                     OUT, KEY, summary)


if __name__ == "__main__":
    sys.exit(main())
