"""bench/paths_after.py: the table pairs each instance's runs with and without the site-path
search after branching, counts the runs where it found a better plan, and the arms differ
in that switch alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ab_bench_rows import ab_row, arm_runs, stored_table

from bench import paths_after
from formulations import site_subsets


def _row(name: str, on: bool, status: str, wall: float, gap: float | None,
         after: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**ab_row(paths_after.KEY, name, on, status, wall, gap, load=0.5),
            "site_paths_after": after}


def test_summary_pairs_the_variants_and_counts_the_better_plans() -> None:
    rows = [_row("a", True, "feasible", 120.0, 4.6e-3, {"sets": 2, "objective": 511.37}),
            _row("a", False, "feasible", 120.0, 8.7e-3),
            _row("b", True, "optimal", 30.2, 0.0),
            _row("b", False, "optimal", 31.5, 0.0),
            _row("c", True, "feasible", 120.0, 1e-3, {"sets": 1}),
            _row("c", False, "feasible", 120.0, 1e-3)]
    lines = paths_after.summary(rows)
    assert lines[0].startswith("| instance | paths after | its HiGHS | none after |")
    assert lines[-2] == "proven: 1 of 3 paths after, 1 of 3 none after"
    assert lines[-1] == ("the search after branching ran in 2 of 3 runs and found a better "
                         "plan in 1")


def test_each_arm_sets_only_the_switch_and_restores_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    runs = arm_runs(monkeypatch, tmp_path, paths_after.KEY, paths_after.main,
                    lambda: site_subsets._PATHS_AFTER_BRANCHING)
    assert runs == [(True, {}), (False, {})]
    assert site_subsets._PATHS_AFTER_BRANCHING is True
    # The printed summary is this bench's, with its count of better plans.
    assert "the search after branching ran in 0 of 1 runs" in capsys.readouterr().out


def test_the_stored_figures_are_the_ones_the_results_readme_states() -> None:
    """bench/results/README.md quotes the stored counts, the plans of the instance that
    led to the change, and the load."""
    count, lines, readme = stored_table(paths_after.OUT, paths_after.summary)
    assert count == 2 * len(paths_after.CASES)
    for line in lines[-2:]:
        assert f"\n{line}\n" in readme
    rows = [json.loads(x) for x in paths_after.OUT.read_text().splitlines() if x]
    by = {(r["instance"], r[paths_after.KEY]): r for r in rows}
    text = " ".join(readme.split())
    on, off = by["metro-n64-l48-s179", True], by["metro-n64-l48-s179", False]
    step = on["site_paths_after"]
    assert step["objective"] == on["objective"] < off["objective"]
    assert (f"found {on['objective']:.2f} in {step['seconds']:.1f} s, where the run without "
            f"it ended at {off['objective']:.2f}; the gap fell from {100 * off['gap']:.2f} % "
            f"to {100 * on['gap']:.2f} %") in text
    # Elsewhere the same plans in both arms, and the step found none.
    for (name, arm), r in by.items():
        if name != "metro-n64-l48-s179":
            assert r["objective"] == pytest.approx(by[name, not arm]["objective"], rel=1e-9)
            assert "objective" not in (r.get("site_paths_after") or {})
    loads = [r["load_before"] for r in rows]
    assert f"at load {min(loads):.1f}-{max(loads):.1f}" in text
