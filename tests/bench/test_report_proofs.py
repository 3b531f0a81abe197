"""The proofs report on hand-made runs whose traces were checked by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.report import write_report
from bench.report.sections import proof_checkpoints, proofs_frame, proofs_table
from bench.report.tables import DASH, certified_gap, gap_pct, trace_at
from bench.report.text import proofs_summary

INFO = {"name": "proofs", "report": {"kind": "proofs"},
        "solvers": [{"name": "milp", "label": "MILP"}, {"name": "sliced", "label": "sliced MILP"}],
        "instances": [{"name": "geo-n32-l32-s31-lam1"}, {"name": "geo-n32-l32-s31-lam0.5"},
                      {"name": "metro-n32-l32-s31-lam1"}]}


def _run(label: str, family: str, lam: float, status: str, objective: float | None,
         bound: float | None, trace: list, wall: float | None = None, budget: float = 120.0,
         n: int = 32, layers: int = 32) -> dict:
    solver = {"MILP": "milp", "sliced MILP": "sliced"}[label]
    name = f"{family}-n{n}-l{layers}-s31-lam{lam:g}"
    return {"experiment": "proofs", "profile": "full", "run_key": f"{label}-{name}-{budget:g}",
            "label": label, "solver": solver, "instance": name, "seed": 0, "budget_s": budget,
            "status": status, "objective": objective, "lower_bound": bound,
            "gap": None if objective is None or bound is None else (objective - bound) / objective,
            "wall_s": wall, "elapsed_s": wall, "n": n, "layers": layers, "lambda": lam,
            "instance_spec": {"generator": family, "seed": 31, "n": n, "layers": layers,
                              "lam": lam}, "trace": trace}


def _rows() -> list[dict]:
    return [
        # proven at 12 s: time to proof 12, gap 0 at 30 s and at the budget
        _run("MILP", "geo", 1.0, "optimal", 105.0, 105.0,
             [[1.0, 110.0, None], [5.0, 105.0, 100.0], [12.0, 105.0, 105.0]], wall=12.0),
        # 2 % at 30 s (100 vs 98), 0.5 % at 120 s (100 vs 99.5), not proven
        _run("sliced MILP", "geo", 1.0, "feasible", 100.0, 99.5,
             [[2.0, 101.0, 90.0], [25.0, 100.0, 98.0], [60.0, 100.0, 99.5]], wall=120.2),
        # a plan but never a bound
        _run("MILP", "geo", 0.5, "feasible", 0.5, None, [[3.0, 0.5, None]], wall=120.0),
        # no plan before 40 s: no gap at 30 s; 12.5 % at 120 s
        _run("sliced MILP", "geo", 0.5, "feasible", 0.8, 0.7, [[40.0, 0.8, 0.7]], wall=120.0),
        # killed without a plan
        _run("MILP", "metro", 1.0, "timeout", None, None, [], wall=None),
    ]


def test_trace_at_takes_the_best_incumbent_and_bound_up_to_the_time() -> None:
    trace = [[1.0, 110.0, None], [5.0, 105.0, 100.0], [8.0, None, 101.0], [40.0, 104.0, 104.0]]
    assert trace_at(trace, 0.5) == (None, None)
    assert trace_at(trace, 5.0) == (105.0, 100.0)  # "at or before"
    assert trace_at(trace, 30.0) == (105.0, 101.0)
    assert trace_at(trace, None) == (104.0, 104.0)
    assert trace_at(None, 30.0) == (None, None)


def test_certified_gap() -> None:
    assert certified_gap(100.0, 98.0) == pytest.approx(0.02)
    assert certified_gap(100.0, None) is None and certified_gap(None, 1.0) is None
    assert certified_gap(100.0, 100.00001) == 0.0  # within the solvers' tolerance
    assert certified_gap(100.0, 101.0) == pytest.approx(-0.01)  # an invalid bound shows


def test_a_small_gap_is_not_shown_as_none() -> None:
    assert gap_pct(0.0) == "0.00" and gap_pct(2.2e-5) == "<0.01"
    assert gap_pct(0.0151) == "1.51" and gap_pct(-0.01) == "-1.00"


def test_checkpoints_follow_the_budget() -> None:
    assert proof_checkpoints(120) == [30.0, 120.0]
    assert proof_checkpoints(300) == [30.0, 120.0, 300.0]
    assert proof_checkpoints(20) == [20.0]
    assert proof_checkpoints(1.5) == [1.5]


def test_proofs_frame_reads_time_to_proof_and_gaps_from_the_traces() -> None:
    pf = proofs_frame(_rows(), [30.0, 120.0])
    by = {(r["label"], r["instance"]): r for _, r in pf.iterrows()}
    a = by[("MILP", "geo-n32-l32-s31-lam1")]
    assert a["proof_s"] == 12.0 and a["gap@30"] == 0.0 and a["gap@120"] == 0.0
    b = by[("sliced MILP", "geo-n32-l32-s31-lam1")]
    assert math.isnan(b["proof_s"])
    assert b["gap@30"] == pytest.approx(0.02) and b["gap@120"] == pytest.approx(0.005)
    c = by[("MILP", "geo-n32-l32-s31-lam0.5")]
    assert math.isnan(c["gap@30"]) and math.isnan(c["gap@120"])
    d = by[("sliced MILP", "geo-n32-l32-s31-lam0.5")]
    assert math.isnan(d["gap@30"]) and d["gap@120"] == pytest.approx(0.125)
    e = by[("MILP", "metro-n32-l32-s31-lam1")]
    assert math.isnan(e["gap@120"]) and math.isnan(e["final_objective"])


def test_proofs_table_cells() -> None:
    header, body, pf, checkpoints, labels = proofs_table(_rows(), INFO)
    assert checkpoints == [30.0, 120.0] and labels == ["MILP", "sliced MILP"]
    assert header == ["family", "N", "L", "λ",
                      "MILP status", "MILP time to proof (s)", "MILP gap at 30 s (%)",
                      "MILP gap at 120 s (%)", "MILP objective", "MILP bound",
                      "sliced MILP status", "sliced MILP time to proof (s)",
                      "sliced MILP gap at 30 s (%)", "sliced MILP gap at 120 s (%)",
                      "sliced MILP objective", "sliced MILP bound"]
    assert body == [
        ["geo", 32, 32, "1", "optimal", "12.0", "0.00", "0.00", "105", "105",
         "feasible", DASH, "2.00", "0.50", "100", "99.5"],
        ["geo", 32, 32, "0.5", "feasible", DASH, DASH, DASH, "0.5", DASH,
         "feasible", DASH, DASH, "12.50", "0.8", "0.7"],
        ["metro", 32, 32, "1", "timeout", DASH, DASH, DASH, DASH, DASH, *[DASH] * 6],
    ]
    assert proofs_summary(pf, labels, checkpoints[-1]) == [
        "- N = 32, L = 32: MILP proved 1 of 3 (slowest proof 12.0 s), 1 with a plan but no "
        "bound, 1 without a plan; sliced MILP proved 0 of 2, largest gap at 120 s 12.50 % "
        "(geo, λ = 0.5)."]


def test_two_instance_seeds_get_a_seed_column() -> None:
    rows = _rows()[:2]
    other = [{**r, "instance": r["instance"].replace("-s31-", "-s37-"),
              "run_key": r["run_key"] + "-s37",
              "instance_spec": {**r["instance_spec"], "seed": 37}} for r in rows]
    other[1] = {**other[1], "objective": 100.0, "lower_bound": 96.0,
                "trace": [[2.0, 100.0, 96.0]]}
    header, body, pf, checkpoints, labels = proofs_table(rows + other, INFO)
    assert header[:5] == ["family", "N", "L", "λ", "instance seed"]
    assert [b[:5] for b in body] == [["geo", 32, 32, "1", 31], ["geo", 32, 32, "1", 37]]
    assert body[1][13:15] == ["4.00", "4.00"]  # seed 37's own sliced run
    assert proofs_summary(pf, labels, checkpoints[-1]) == [
        "- N = 32, L = 32: MILP proved 2 of 2 (slowest proof 12.0 s); sliced MILP proved "
        "0 of 2, largest gap at 120 s 4.00 % (geo, λ = 1, instance seed 37)."]
    # one seed: no column, no seed in the summary
    assert proofs_table(rows, INFO)[0][4] == "MILP status"


def test_a_300_s_budget_adds_the_300_s_gap_read_from_the_final_state() -> None:
    rows = [_run("MILP", "geo", 1.0, "feasible", 100.0, 97.0,
                 [[10.0, 100.0, 90.0], [100.0, 100.0, 95.0], [299.0, 100.0, 96.0]],
                 wall=300.4, budget=300.0, n=256, layers=128)]
    header, body, *_ = proofs_table(rows, INFO)
    assert "MILP gap at 300 s (%)" in header
    # 30 s: 10 %; 120 s: 5 %; 300 s (the budget): the result's bound, 3 %
    assert body[0][6:9] == ["10.00", "5.00", "3.00"]


def test_the_report_renders_the_proofs_section(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    # the settings as the sweep records them, so the test does not depend on the shipped file
    manifest = {"order": ["proofs"], "experiments": {"proofs": {
        **INFO, "title": "Proofs", "description": "", "profile": "full", "seeds": [0],
        "budgets": [120], "grace": 15}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    report = write_report(results, tmp_path / "report").read_text()
    assert "section proofs" not in report  # the renderer did not fail over to generic
    assert "| geo | 32 | 32 | 1 | optimal | 12.0 | 0.00 | 0.00 | 105 | 105 | feasible" in report
    assert "MILP proved 1 of 3" in report
    assert (tmp_path / "report" / "figures" / "gap_vs_time_proofs.png").exists()
