"""Smoke test of bench/memetic_bench.py: figures, table and command line."""

from __future__ import annotations

import pytest

from bench.memetic_bench import bench_instance, format_table, main
from heuristics.memetic import MemeticParams


def test_bench_row_and_table() -> None:
    params = MemeticParams(population=30, no_improvement=10, time_limit=10.0)
    row = bench_instance("geo", 4, 8, seeds=2, ref_seeds=1, exact_time=0.0, params=params)
    assert row.source == "best of MA (3 runs)"
    assert len(row.objectives) == 2 and min(row.gaps) >= 0.0
    assert row.reference <= min(row.objectives)
    table = format_table([row])
    assert "best of MA (3 runs)" in table and "/2" in table


def test_bench_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--families", "metro", "--n", "4", "--layers", "8", "--seeds", "2",
                 "--ref-seeds", "0", "--exact-time", "0", "--param", "population=30",
                 "--param", "w=5"]) == 0
    out = capsys.readouterr().out
    assert "memetic (population=30, w=5); 2 seeds" in out
    assert "median time-to-best" in out and " metro " in out
