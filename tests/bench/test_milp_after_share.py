"""bench/milp_after_share.py: the table pairs each instance's runs with either share, and
the arms differ in that share alone, the first being the default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ab_bench_rows import ab_row, arm_params, stored_table

from bench import milp_after_share
from formulations.milp.solver import MilpParams


def _row(name: str, on: bool, status: str, wall: float, gap: float | None) -> dict[str, Any]:
    return ab_row(milp_after_share.KEY, name, on, status, wall, gap, load=0.5)


def test_summary_pairs_the_shares_and_counts_proofs() -> None:
    rows = [_row("a", True, "feasible", 120.0, 0.0039), _row("a", False, "feasible", 120.0,
                                                             0.0069),
            _row("b", True, "optimal", 33.1, 0.0), _row("b", False, "optimal", 31.0, 0.0)]
    lines = milp_after_share.summary(rows)
    assert lines[0].startswith("| instance | share 0.25 | its HiGHS | share 0.1 |")
    assert lines[2] == ("| a lambda 0.5 | gap 0.39 % | not run | gap 0.69 % | not run | "
                        "0.50 / 0.50 |")
    assert lines[-1] == "proven: 1 of 2 share 0.25, 1 of 2 share 0.1"


def test_each_arm_sets_only_the_share_and_the_first_is_the_default(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = arm_params(monkeypatch, tmp_path, milp_after_share.KEY, milp_after_share.main)
    assert seen == [{"memetic_share": 0.0, "memetic_after_share": 0.25},
                    {"memetic_share": 0.0, "memetic_after_share": 0.1}]
    assert MilpParams.parse({}).memetic_after_share == milp_after_share.SHARES[0]


def _stored() -> dict[tuple[str, bool], dict[str, Any]]:
    rows = [json.loads(line) for line in milp_after_share.OUT.read_text().splitlines() if line]
    return {(f"{r['instance']} {r['lambda']:g}", r[milp_after_share.KEY]): r for r in rows}


def test_the_stored_count_is_the_one_the_results_readme_states() -> None:
    count, lines, readme = stored_table(milp_after_share.OUT, milp_after_share.summary)
    assert count == 2 * len(milp_after_share.CASES)
    assert lines[-1].startswith("proven: ")
    assert f"\n{lines[-1]}\n" in readme


def test_the_figures_the_results_readme_states() -> None:
    """bench/results/README.md quotes seed 401's two runs, the other seven's plans, the
    proof times and the load, from the stored rows."""
    rows = _stored()
    readme = " ".join((Path(milp_after_share.__file__).resolve().parent / "results"
                       / "README.md").read_text().split())
    on, off = rows["metro-n64-l48-s401 0.5", True], rows["metro-n64-l48-s401 0.5", False]
    assert on["lower_bound"] == off["lower_bound"]
    assert (f"On seed 401 the step ran {on['memetic_after']['seconds']:.1f} s instead of "
            f"{off['memetic_after']['seconds']:.1f} s and found {on['objective']:.6f} where the "
            f"tenth ended at {off['objective']:.6f}, so the gap was {100 * on['gap']:.2f} % "
            f"instead of {100 * off['gap']:.2f} % with the same bound") in readme
    others = {k for k, _ in rows if "s401" not in k}
    assert len(others) == 7
    assert all(rows[k, True]["objective"] == rows[k, False]["objective"] for k in others)
    proofs = sorted(k for k in others if rows[k, True]["status"] == rows[k, False]["status"]
                    == "optimal")
    moved = max(abs(rows[k, True]["wall_s"] - rows[k, False]["wall_s"]) for k in proofs)
    seeds = ", ".join(k.split("-s")[1].split()[0] for k in proofs)
    assert f"the proofs both made ({seeds}) moved by {moved:.1f} s at most" in readme
    s179 = [rows["metro-n64-l48-s179 1", v] for v in (True, False)]
    assert (f"differ ({100 * s179[0]['gap']:.2f} % and {100 * s179[1]['gap']:.2f} %)"
            in readme)
    loads = [r["load_before"] for r in rows.values()]
    assert f"at load {min(loads):.1f}-{max(loads):.1f}." in readme
