"""The report's parts on small hand-made rows: tables, computed statements, reproduce, figures."""

from __future__ import annotations

import json
from pathlib import Path

from bench.experiments import load_experiment
from bench.report.figures import plot_anytime
from bench.report.readme import RESULTS
from bench.report.tables import display_status, frame, group, is_refusal, status_summary
from bench.report.text import portfolio_vs_exact, reproduce_commands, warm_vs_cold

ROOT = Path(__file__).resolve().parents[2]


def _row(solver: str, instance: str, budget: float, status: str, objective: float | None,
         **kw: object) -> dict:
    return {"experiment": "anytime", "label": kw.pop("label", solver), "solver": solver,
            "instance": instance, "budget_s": budget, "seed": 0, "status": status,
            "objective": objective, "n": 4, "layers": 8, **kw}


def test_refusals_are_shown_as_refused_and_other_errors_stay_errors() -> None:
    refused = _row("bruteforce", "i", 1, "error", None,
                   message="bruteforce refuses: the plan space has f(N=10, L=12) = 1 plans")
    broken = _row("milp", "i", 1, "error", None, message="HiGHS failed")
    assert is_refusal(refused) and not is_refusal(broken)
    assert display_status(refused) == "refused" and display_status(broken) == "error"
    assert status_summary([refused]) == "refused"
    assert status_summary([refused, broken]) in ("refused 1/2, error 1/2",
                                                 "error 1/2, refused 1/2")
    assert list(frame([refused, broken])["shown"]) == ["refused", "error"]


def test_group_keeps_first_appearance_order() -> None:
    rows = [_row("b", "x", 1, "feasible", 2.0), _row("a", "x", 1, "feasible", 1.0),
            _row("b", "y", 1, "feasible", 3.0)]
    g = group(rows, "solver")
    assert list(g) == [("b",), ("a",)]
    assert [r["instance"] for r in g[("b",)]] == ["x", "y"]


def test_portfolio_comparison_counts_cells_and_names_the_failures() -> None:
    rows = [
        # i1 @ 1 s: portfolio worse than B&B
        _row("portfolio", "i1", 1, "feasible", 110.0), _row("bnb", "i1", 1, "feasible", 100.0),
        _row("milp", "i1", 1, "no_solution", None, label="MILP"),
        # i1 @ 5 s: equal within the tolerance
        _row("portfolio", "i1", 5, "optimal", 100.0000001),
        _row("bnb", "i1", 5, "optimal", 100.0),
        # i2 @ 1 s: portfolio better; i2 @ 5 s: portfolio has no plan
        _row("portfolio", "i2", 1, "feasible", 90.0), _row("bnb", "i2", 1, "feasible", 95.0),
        _row("portfolio", "i2", 5, "timeout", None), _row("bnb", "i2", 5, "feasible", 93.0),
        # i3: no exact plan, so the cell is not judged
        _row("portfolio", "i3", 1, "feasible", 50.0), _row("bnb", "i3", 1, "timeout", None),
        _row("memetic", "i1", 1, "feasible", 1.0),  # heuristics are not exact methods
    ]
    cmp = portfolio_vs_exact(rows)
    assert cmp is not None
    assert (cmp.cells, cmp.held, cmp.better, len(cmp.failed)) == (4, 2, 1, 2)
    assert [(f["instance"], f["budget_s"]) for f in cmp.failed] == [("i2", 5.0), ("i1", 1.0)]
    text = cmp.sentence()
    assert "in 2 of 4 instance-by-budget cells" in text and "worse in 2" in text
    assert "i1 at 1 s: 110.0 vs bnb 100.0" in text
    assert portfolio_vs_exact([r for r in rows if r["solver"] != "portfolio"]) is None


def test_a_portfolio_never_worse_has_no_failed_cells() -> None:
    rows = [_row("portfolio", "i1", 1, "optimal", 100.0), _row("bnb", "i1", 1, "optimal", 100.0),
            _row("portfolio", "i2", 1, "feasible", 90.0), _row("milp", "i2", 1, "feasible", 95.0)]
    cmp = portfolio_vs_exact(rows)
    assert cmp is not None
    assert (cmp.cells, cmp.held, cmp.better, cmp.failed) == (2, 2, 1, [])
    assert "worse" not in cmp.sentence()


def test_warm_against_cold_pairs_optimal_runs_only() -> None:
    rows = [_row("milp", "i", 9, "optimal", 1.0, wall_s=2.0),
            _row("milp", "i", 9, "optimal", 1.0, wall_s=1.0, warm_start="memetic"),
            _row("bnb", "i", 9, "optimal", 1.0, wall_s=1.0),
            _row("bnb", "i", 9, "feasible", 1.0, wall_s=9.0, warm_start="memetic")]
    ws = warm_vs_cold(rows)
    assert (ws.pairs, ws.faster, ws.slower) == (1, 1, 0) and ws.ratios == [0.5]
    assert ws.no_later == 1 and ws.by_solver == {"milp": (1, 1)}
    assert (ws.warm_runs, ws.ma_ran) == (2, 2)  # rows without the "ran" record ran


def test_no_later_allows_the_timing_noise_and_counts_skipped_warm_starts() -> None:
    from bench.report.text import NOISE_REL, NOISE_S

    skipped = {"warm_start": {"deferred": True, "ran": False}}
    ran = {"warm_start": {"deferred": True, "ran": True}}
    rows = [_row("milp", "a", 9, "optimal", 1.0, wall_s=0.05),  # within NOISE_S
            _row("milp", "a", 9, "optimal", 1.0, wall_s=0.05 + 0.9 * NOISE_S,
                 warm_start="memetic", info=skipped),
            _row("milp", "b", 9, "optimal", 1.0, wall_s=10.0),  # within NOISE_REL
            _row("milp", "b", 9, "optimal", 1.0, wall_s=10.0 * (1 + 0.9 * NOISE_REL),
                 warm_start="memetic", info=ran),
            _row("cpsat", "b", 9, "optimal", 1.0, wall_s=10.0),  # beyond both
            _row("cpsat", "b", 9, "optimal", 1.0, wall_s=10.0 * (1 + 1.1 * NOISE_REL),
                 warm_start="memetic", info=ran)]
    ws = warm_vs_cold(rows)
    assert (ws.pairs, ws.no_later, ws.faster, ws.slower) == (3, 2, 0, 3)
    assert ws.by_solver == {"milp": (2, 2), "cpsat": (0, 1)}
    assert (ws.warm_runs, ws.ma_ran) == (3, 2)
    assert "no later than the cold one in 2 (milp 2 of 2, cpsat 0 of 1;" in ws.sentence()


def test_reproduce_commands_follow_the_recorded_sources(tmp_path: Path) -> None:
    manifest = {"experiments": {
        "table3": {"profile": "full", "source": "/elsewhere/bench/experiments/table3.toml"},
        "table4": {"profile": "quick", "source": "bench/experiments/table4.toml"},
        "anytime": {"profile": "full", "source": "bench/results/anytime-session.toml"}}}
    rows = [{"experiment": e} for e in manifest["experiments"]]
    res = tmp_path / "out" / "results.jsonl"
    lines = reproduce_commands(rows, manifest, res, tmp_path / "rep",
                               ["table3", "table4", "anytime"])
    assert lines == [
        f"geoplan bench run table3 --out {res.parent} --resume",
        f"geoplan bench run table4 --profile quick --out {res.parent} --resume",
        f"geoplan bench run bench/results/anytime-session.toml --out {res.parent} --resume",
        f"geoplan bench report {res} --out {tmp_path / 'rep'}",
    ]


def test_the_stored_runs_designs_are_those_of_the_files_the_report_names() -> None:
    """Reproducing the stored run with the report's commands runs the same design."""
    manifest = json.loads((RESULTS / "manifest.json").read_text())
    for name, info in manifest["experiments"].items():
        src = Path(info["source"])
        shipped = src.parent.name == "experiments"
        target = name if shipped else str(src if src.is_absolute() else ROOT / src)
        design = load_experiment(target, info["profile"]).to_manifest()
        for key in ("seeds", "budgets", "grace", "threads", "solvers", "instances"):
            assert design[key] == info[key], (name, key)


def test_anytime_figure_with_zero_excess_and_solvers_without_a_plan(tmp_path: Path) -> None:
    curves = {"A": ([[0.1, 120.0, None], [0.5, 100.0, 90.0]], 2.0),
              "B": ([[0.2, 150.0, None]], 2.0)}
    path = plot_anytime(curves, tmp_path / "f.png", "t", best_known=100.0,
                        no_plan={"C": "no_solution", "A at 1 s": "timeout"})
    assert path.exists() and path.stat().st_size > 10_000
