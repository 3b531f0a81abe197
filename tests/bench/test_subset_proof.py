"""bench/subset_proof.py: the table pairs each instance's runs per solver with and without
the rule, the arms differ in that switch alone, and the results README quotes the stored
table."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ab_bench_rows import stored_table

from bench import paired, subset_proof
from formulations import site_subsets


def _row(name: str, solver: str, on: bool, status: str, wall: float, gap: float | None,
         closed: bool = False) -> dict[str, Any]:
    return {"instance": name, "lambda": 0.5, "solver": solver, subset_proof.KEY: on,
            "status": status, "wall_s": wall, "gap": gap, "closed_by_site_subset": closed,
            "load_before": 0.5}


def test_summary_pairs_the_arms_per_solver_and_counts_proofs() -> None:
    rows = [_row("a", "milp", True, "optimal", 12.0, 0.0, closed=True),
            _row("a", "milp", False, "optimal", 18.9, 0.0),
            _row("a", "cpsat", True, "optimal", 12.1, 0.0, closed=True),
            _row("a", "cpsat", False, "feasible", 60.0, 3.6e-5),
            _row("b", "milp", True, "optimal", 1.0, 0.0)]
    lines = subset_proof.summary(rows)
    assert lines[0] == "| instance | milp with | milp without | cpsat with | cpsat without |"
    assert lines[2] == "| a lambda 0.5 | 12.0 s | 18.9 s | 12.1 s | gap 0.00 % |"
    assert lines[3] == "| b lambda 0.5 | 1.0 s | not run | not run | not run |"
    assert lines[-2] == "milp proven: 2 of 2 with the rule, 1 of 1 without; closed by a subset: 1"
    assert lines[-1] == ("cpsat proven: 1 of 1 with the rule, 0 of 1 without; closed by a "
                         "subset: 1")


def test_each_arm_sets_only_the_switch_and_restores_it(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    seen: list[tuple[str, bool, dict[str, Any]]] = []

    def fake(inst: Any, solver: str, **kw: Any) -> SimpleNamespace:
        seen.append((solver, site_subsets._CLOSE_BY_SUBSETS, kw))
        return SimpleNamespace(status="optimal", objective=1.0, lower_bound=1.0, gap=0.0,
                               wall_s=1.0, message=None, info={})

    monkeypatch.setattr(subset_proof, "solve", fake)
    assert subset_proof.main(["--cases", "metro:6:4:1:0.5", "--time-limit", "1",
                              "--out", str(tmp_path / "rows.jsonl")]) == 0
    assert [(s, on) for s, on, _ in seen] == [("milp", True), ("milp", False),
                                             ("cpsat", True), ("cpsat", False)]
    assert all(kw == {"seed": 0, "time_limit": 1.0, "threads": 2} for _, _, kw in seen)
    assert site_subsets._CLOSE_BY_SUBSETS is True


def test_the_stored_figures_are_the_ones_the_results_readme_states() -> None:
    """bench/results/README.md quotes the stored table's counts and the times of the
    instance that led to the rule."""
    count, lines, readme = stored_table(subset_proof.OUT, subset_proof.summary)
    assert count == 2 * len(subset_proof.SOLVERS) * len(subset_proof.CASES)
    for line in lines[-2:]:
        assert f"\n{line}\n" in readme
    rows = [json.loads(x) for x in subset_proof.OUT.read_text().splitlines() if x]
    by = {(r["instance"], r["solver"], r[subset_proof.KEY]): r for r in rows}
    text = " ".join(readme.split())
    name = "geo-n32-l32-s869"
    for solver in subset_proof.SOLVERS:
        on, off = by[name, solver, True], by[name, solver, False]
        assert on["status"] == "optimal" and on["closed_by_site_subset"]
        assert f"{solver} {paired.status_cell(on)} against {paired.status_cell(off)}" in text
    loads = [r["load_before"] for r in rows]
    assert f"at load {min(loads):.1f}-{max(loads):.1f}" in text
