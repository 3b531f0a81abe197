"""The MILP with each class of site branching sliced on its own nodes' boxes, against the
root search's boxes (``formulations.milp.slices._CLASS_BOXES``).

Every plan better than the incumbent lies in one of branching's open classes and, within
its nodes, in one of their searches' open boxes (a stage-count range and a bottleneck
range each), far narrower than the root's. The MILP's model is narrowed to one slice of
those ranges (and the sliced MILP's slices of each class are cut from them). This runs the
default ``milp`` in both arms on each instance, one run at a time, two threads each.

    python -m bench.class_boxes                # the stored instances, 120 s
    python -m bench.class_boxes --report       # the table of the stored rows
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench import milp_narrow, paired
from formulations.milp import slices

OUT = Path(__file__).resolve().parent / "results" / "class-boxes" / "results.jsonl"
#: family:N:L:instance seed:lambda. metro N=32 seed 883 led to the change (every solver
#: 2.2e-5 short at 60 s); 869 is an N=32 proof that took 41 s; the N=64 and N=128 ones
#: are the earlier benches' hard instances (821, 401 and 829 at lambda 0.5, 179 at 1).
CASES = ("metro:32:32:883:0.5", "metro:32:32:869:0.5", "metro:64:48:821:0.5",
         "metro:64:48:401:0.5", "metro:64:48:179:1", "metro:128:96:829:0.5")
#: the row's field that says which variant ran
KEY = "class_boxes"
#: what the table calls the two variants
NAMES = ("class boxes", "root boxes")


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """The table: each instance with the classes' boxes and without."""
    return milp_narrow.summary(rows, KEY, NAMES)


def main(argv: list[str] | None = None) -> int:
    return milp_narrow.ab_main(argv, "python -m bench.class_boxes", __doc__ or "", OUT, CASES,
                               KEY, NAMES, lambda on: {},
                               arm=lambda on: paired.module_switch(slices, "_CLASS_BOXES", on))


if __name__ == "__main__":
    sys.exit(main())
