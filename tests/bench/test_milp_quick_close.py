"""bench/milp_quick_close.py: the table pairs each instance's runs with and without the
quick try, and the arms differ in that switch alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ab_bench_rows import ab_row, arm_runs, stored_table

from bench import milp_quick_close
from geoplan.cost import parametric


def _row(name: str, on: bool, status: str, wall: float, gap: float | None) -> dict[str, Any]:
    return ab_row(milp_quick_close.KEY, name, on, status, wall, gap, load=0.5)


def test_summary_pairs_the_variants_and_counts_proofs() -> None:
    rows = [_row("a", True, "feasible", 120.0, 0.0019), _row("a", False, "feasible", 120.0,
                                                             0.0048),
            _row("b", True, "optimal", 30.2, 0.0), _row("b", False, "optimal", 41.5, 0.0)]
    lines = milp_quick_close.summary(rows)
    assert lines[0].startswith("| instance | quick close | its HiGHS | three searches |")
    assert lines[2] == ("| a lambda 0.5 | gap 0.19 % | not run | gap 0.48 % | not run | "
                        "0.50 / 0.50 |")
    assert lines[-1] == "proven: 1 of 2 quick close, 1 of 2 three searches"


def test_each_arm_sets_only_the_switch_and_restores_it(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    before = parametric._QUICK_CLOSE
    runs = arm_runs(monkeypatch, tmp_path, milp_quick_close.KEY, milp_quick_close.main,
                    lambda: parametric._QUICK_CLOSE)
    assert runs == [(True, {}), (False, {})]
    assert parametric._QUICK_CLOSE is before is True


def test_the_stored_figures_are_the_ones_the_results_readme_states() -> None:
    """bench/results/README.md quotes the proof count, the two proofs' times, and that the
    unproven runs ended with the same bound in both arms."""
    count, lines, readme = stored_table(milp_quick_close.OUT, milp_quick_close.summary)
    assert count == 2 * len(milp_quick_close.CASES)
    assert f"\n{lines[-1]}\n" in readme
    rows = [json.loads(x) for x in milp_quick_close.OUT.read_text().splitlines() if x]
    by = {(r["instance"].split("-s")[1], r[milp_quick_close.KEY]): r for r in rows}
    text = " ".join(readme.split())
    for seed in ("149", "631"):
        on, off = by[seed, True], by[seed, False]
        assert on["status"] == off["status"] == "optimal"
        assert f"{seed} in {on['wall_s']:.1f} s instead of {off['wall_s']:.1f} s" in text
    unproven = {s for s, _ in by if by[s, True]["status"] != "optimal"}
    assert unproven == {"821", "401", "761", "829"}
    assert all(by[s, True]["lower_bound"] == pytest.approx(by[s, False]["lower_bound"],
                                                           rel=1e-12) for s in unproven)
    loads = [r["load_before"] for r in rows]
    assert f"at load {min(loads):.1f}-{max(loads):.1f}." in text
