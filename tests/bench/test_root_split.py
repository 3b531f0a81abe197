"""bench/root_split.py: the table pairs each instance's runs with the root search split and
in one process, gives the root search's seconds in each, their median ratio where it was
split and ended in both, and the arms differ in that switch alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ab_bench_rows import ab_row, arm_runs, stored_table

from bench import paired
from bench import root_split as bench
from geoplan.cost import root_split


def _row(name: str, on: bool, status: str, wall: float, gap: float | None, bound_s: float,
         parts: int, exhausted: bool = True) -> dict[str, Any]:
    return {**ab_row(bench.KEY, name, on, status, wall, gap), "bound_s": bound_s,
            "bound_boxes": 500, "bound_parts": parts, "bound_exhausted": exhausted,
            "branching_nodes": 9}


def test_summary_gives_the_root_search_times_and_their_ratio() -> None:
    rows = [_row("a", True, "feasible", 120.0, 9.1e-3, 40.0, 2),
            _row("a", False, "feasible", 120.0, 1.0e-2, 60.0, 0),
            _row("b", True, "optimal", 30.0, 0.0, 10.0, 2),
            _row("b", False, "optimal", 35.0, 0.0, 12.0, 0),
            # not split (the search ended within its first boxes): no ratio
            _row("c", True, "optimal", 2.0, 0.0, 0.5, 0),
            _row("c", False, "optimal", 2.0, 0.0, 0.5, 0),
            # cut by the clock in one arm: no ratio
            _row("d", True, "feasible", 120.0, 1e-3, 70.0, 2),
            _row("d", False, "feasible", 120.0, 1e-3, 72.0, 0, exhausted=False)]
    lines = bench.summary(rows)
    assert lines[0].startswith("| instance | split | its HiGHS | one process |")
    assert "proven: 2 of 4 split, 2 of 4 one process" in lines
    assert "| a lambda 0.5 | 40.0, 500, 2 | 60.0, 500 | 9 / 9 |" in lines
    assert lines[-1] == ("root search split and ended in both arms on 2 of 4 instances; "
                         "median speed-up there 1.35x (range 1.20-1.50x)")


def test_each_arm_sets_only_the_switch_and_restores_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runs = arm_runs(monkeypatch, tmp_path, bench.KEY, bench.main, lambda: root_split.SPLIT)
    assert runs == [(True, {}), (False, {})]
    assert root_split.SPLIT is True


def test_the_stored_figures_are_the_ones_the_results_readme_states() -> None:
    """bench/results/README.md quotes the stored table's last lines, the load, and the
    root search's seconds on the instances that led to the change."""
    count, lines, readme = stored_table(bench.OUT, bench.summary)
    assert count == 2 * len(bench.CASES)
    # The root search's table and its ratio, whole.
    second = lines[next(i for i, x in enumerate(lines) if "| root search, split" in x):]
    assert "\n" + "\n".join(second) + "\n" in readme
    proven = next(x for x in lines if x.startswith("proven:"))
    assert f"\n{proven}\n" in readme
    rows = [json.loads(x) for x in bench.OUT.read_text().splitlines() if x]
    text = " ".join(readme.split())
    loads = [r["load_before"] for r in rows]
    assert f"at load {min(loads):.1f}-{max(loads):.1f}" in text
    by = {(r["instance"], r[bench.KEY]): r for r in rows}
    for seed in (983, 991):
        on, off = by[f"metro-n128-l96-s{seed}", True], by[f"metro-n128-l96-s{seed}", False]
        assert (f"Seed {seed}: root search {on['bound_s']:.1f} s split against "
                f"{off['bound_s']:.1f} s, {paired.status_cell(on)} against "
                f"{paired.status_cell(off)}") in text
