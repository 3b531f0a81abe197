"""The MILP after the box-search speed-ups, against the stored runs before them.

Kept DP work arrays (:func:`geoplan.cost.parametric._work`; ``bench/dp_work.py``), merged
tied boxes and near splits only where Z = za alone may prove the incumbent
(:func:`geoplan.cost.parametric.merge_boxes`) change no parameter, so there is no switch
to compare within one version. This runs the default ``milp`` on the nine instances of
``bench/milp_three_back.py``, with the same protocol (two threads, 120 s, one run at a
time), and its table sets each beside that bench's stored default arm, run at 9c8b4c2
before these changes.

    python -m bench.milp_dp_work                      # the nine instances, 120 s
    python -m bench.milp_dp_work --report             # the table of the stored rows
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import milp_narrow, milp_three_back, paired

OUT = Path(__file__).resolve().parent / "results" / "milp-dp-work" / "results.jsonl"
#: The rows set beside these: milp_three_back's default arm.
BEFORE = milp_three_back.OUT
KEY = "dp_work"


def _before() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in BEFORE.read_text().splitlines() if line]
    return {f"{r['instance']} lambda {r['lambda']:g}": r for r in rows
            if r[milp_three_back.KEY] is False}


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """One line per instance: now, and the stored default before; the proof counts."""
    return compare(rows, _before(), "9c8b4c2")


def compare(rows: list[dict[str, Any]], before: dict[str, dict[str, Any]], then: str
            ) -> list[str]:
    """One line per instance: now, and the row of ``before`` (by instance and lambda) run
    at commit ``then``; the proof counts."""
    lines = [f"| instance | now | its HiGHS | before ({then}) | load before (now / then) |",
             "| --- | --- | --- | --- | --- |"]
    proven_now = proven_then = 0
    for r in rows:
        name = f"{r['instance']} lambda {r['lambda']:g}"
        old = before.get(name)
        proven_now += r["status"] == "optimal"
        proven_then += old is not None and old["status"] == "optimal"
        lines.append(f"| {name} | {milp_narrow.cell(r)} | {milp_narrow.highs_cell(r)} | "
                     f"{'not run' if old is None else milp_narrow.cell(old)} | "
                     f"{r['load_before']:.2f} / "
                     f"{'-' if old is None else format(old['load_before'], '.2f')} |")
    lines += ["", f"proven: {proven_now} of {len(rows)} now, {proven_then} of {len(rows)} "
              "before"]
    return lines


def default_main(argv: list[str] | None, prog: str, doc: str, out: Path, key: str,
                 table: Callable[[list[dict[str, Any]]], list[str]]) -> int:
    """Run (or ``--report``) the default ``milp`` on milp_three_back's instances, each row
    marked ``key``, into ``out``; ``table`` makes the report of the rows."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    paired.add_cases(ap, milp_three_back.CASES)

    def runs(args: argparse.Namespace) -> Iterator[tuple[dict[str, Any], str]]:
        for inst, lam in paired.instances(args.cases):
            row = milp_narrow.run_one(inst, True, args.threads, args.time_limit, key=key,
                                      params={})
            yield row, (f"{inst.name} lambda {lam:g}: {milp_narrow.cell(row)}, plan "
                        f"{row['objective']}; HiGHS {milp_narrow.highs_cell(row)}")

    return paired.main(ap, out, argv, runs, table)


def main(argv: list[str] | None = None) -> int:
    return default_main(argv, "python -m bench.milp_dp_work", __doc__ or "", OUT, KEY,
                        summary)


if __name__ == "__main__":
    sys.exit(main())
