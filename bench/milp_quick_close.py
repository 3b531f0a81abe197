"""The MILP with site branching's boxes first tried for closing by one multiplier search,
against the full three (``geoplan.cost.parametric._QUICK_CLOSE``), at lambda 0.5.

With energy in the objective a box's bound takes three multiplier searches: the least
sum of stage times S, the least idle power P, then the objective with T P linearised at
those two. In site branching's node searches most boxes, started from a parent's boxes
left open near the incumbent, close; the parent's bound on S and P >= 0 give a weaker
linearisation that closes most of them with the last search alone
(:meth:`geoplan.cost.parametric._Boxes._quick_close`). This runs the default ``milp``
with that try and without it on each instance, one run at a time, two threads each.

    python -m bench.milp_quick_close                # the stored instances, 120 s
    python -m bench.milp_quick_close --report       # the table of the stored rows
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench import milp_narrow, paired
from geoplan.cost import parametric

OUT = Path(__file__).resolve().parent / "results" / "milp-quick-close" / "results.jsonl"
#: family:N:L:instance seed:lambda. 821 led to the change (its gap at 120 s was 0.48 %);
#: 401, 149 and 631 are the bench's lambda 0.5 instances; 761 and 829 were checks.
CASES = ("metro:64:48:821:0.5", "metro:64:48:401:0.5", "metro:64:48:149:0.5",
         "metro:64:48:631:0.5", "metro:64:48:761:0.5", "metro:128:96:829:0.5")
#: the row's field that says which variant ran
KEY = "quick_close"
#: what the table calls the two variants
NAMES = ("quick close", "three searches")


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """The table: each instance with the quick try and without."""
    return milp_narrow.summary(rows, KEY, NAMES)


def main(argv: list[str] | None = None) -> int:
    return milp_narrow.ab_main(argv, "python -m bench.milp_quick_close", __doc__ or "", OUT,
                               CASES, KEY, NAMES, lambda on: {},
                               arm=lambda on: paired.module_switch(parametric, "_QUICK_CLOSE", on))


if __name__ == "__main__":
    sys.exit(main())
