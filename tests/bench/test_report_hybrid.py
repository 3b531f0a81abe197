"""The hybrid section of the report: its table and statements come from the rows."""

from __future__ import annotations

import json
from pathlib import Path

from bench.report import write_report
from bench.report.hybrid import hybrid_frame, hybrid_summary, plan_shape

INFO = {"name": "hybrid", "report": {"kind": "hybrid", "pipeline": "pipeline MA",
                                     "hybrid": "hybrid MA", "baseline": "grid"},
        "solvers": [{"name": "memetic", "label": "pipeline MA"},
                    {"name": "hybrid-grid", "label": "grid"},
                    {"name": "hybrid-memetic", "label": "hybrid MA"}],
        "instances": [{"name": "i1"}, {"name": "i2"}]}

PIPE = {"stages": [{"gpu": "a0", "layers": 2}, {"gpu": "a1", "layers": 2}]}
HYB = {"stages": [{"layers": 4, "tp": 2, "recompute": "none",
                   "replicas": [{"gpus": ["a0", "a1"], "samples": 1},
                                {"gpus": ["a2", "a3"], "samples": 1}]}],
       "micro_batch_size": 2, "zero": 1}


def _row(label: str, instance: str, status: str, objective: float | None,
         plan: dict | None) -> dict:
    solver = {"pipeline MA": "memetic", "grid": "hybrid-grid", "hybrid MA": "hybrid-memetic"}
    return {"experiment": "hybrid", "profile": "full", "run_key": f"{label}-{instance}",
            "label": label, "solver": solver[label], "instance": instance, "seed": 0,
            "budget_s": 60.0, "status": status, "objective": objective,
            "t_iter_ms": objective, "e_iter_j": None if objective is None else 2 * objective,
            "lower_bound": None, "gap": None, "wall_s": 60.0, "n": 4, "layers": 4,
            "lambda": 1.0, "plan": plan, "trace": [],
            "instance_spec": {"generator": "preset", "cluster": "small-3r",
                              "model": "llama2-7b"}}


def _rows() -> list[dict]:
    return [
        _row("pipeline MA", "i1", "feasible", 200.0, PIPE),
        _row("grid", "i1", "feasible", 180.0, HYB),
        _row("hybrid MA", "i1", "feasible", 150.0, HYB),
        # only the hybrid space holds the model on i2
        _row("pipeline MA", "i2", "no_solution", None, None),
        _row("grid", "i2", "feasible", 120.0, HYB),
        _row("hybrid MA", "i2", "feasible", 100.0, HYB),
    ]


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
