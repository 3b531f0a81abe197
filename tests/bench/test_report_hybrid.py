"""The hybrid section of the report: its table and statements come from the rows."""

from __future__ import annotations

import json
from pathlib import Path

from hybrid_bench_rows import HYB, INFO, PIPE, _rows

from bench.report import write_report
from bench.report.hybrid import hybrid_frame, hybrid_summary, plan_shape


def test_plan_shape_reads_both_forms() -> None:
    assert plan_shape(PIPE) == {"gpus": 2, "stages": 2, "tp": "1", "replicas": "1",
                                "zero": None, "u": None, "recompute": 0}
    assert plan_shape(HYB)["tp"] == "2" and plan_shape(HYB)["replicas"] == "2"


def test_summary_is_computed_from_the_rows() -> None:
    df = hybrid_frame(_rows())
    lines = hybrid_summary(df, ["i1", "i2"], "pipeline MA", "hybrid MA", "grid")
    assert lines[0].startswith("- On the 1 instances where both spaces have a plan, hybrid "
                               "MA's objective is 25.0-25.0 % below")
    assert "1.33-1.33x faster" in lines[0]
    assert lines[1] == "- hybrid MA is never worse than pipeline MA."
    assert "Only hybrid plans hold the model on: i2" in lines[2]
    assert "16.7-16.7 % lower" in lines[3]


def test_the_report_renders_the_hybrid_section(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    manifest = {"order": ["hybrid"], "experiments": {"hybrid": {
        **INFO, "title": "Hybrid", "description": "", "profile": "full", "seeds": [0],
        "budgets": [60], "grace": 15}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    report = write_report(results, tmp_path / "report", figures=False).read_text()
    assert "section hybrid" not in report  # the renderer did not fail over to generic
    assert "| i1 | hybrid MA | feasible | 150.0 | 300.0 | 150 | 4 | 1 | 2 | 2 | 1 | 2 |" in report
    assert "| i1 | pipeline MA | feasible | 200.0 | 400.0 | 200 | 2 | 2 | 1 | 1 | — | — |" in report


def test_summary_names_instances_where_another_solver_beats_the_hybrid_one() -> None:
    rows = [r for r in _rows() if not (r["instance"] == "i1" and r["label"] == "grid")]
    better = {**_rows()[1], "objective": 120.0, "t_iter_ms": 120.0}
    df = hybrid_frame([*rows, better])
    lines = hybrid_summary(df, ["i1", "i2"], "pipeline MA", "hybrid MA", "grid")
    assert lines[-1] == ("- Another solver's plan is better than hybrid MA's on: i1 (grid, "
                         "20.0 % lower).")
