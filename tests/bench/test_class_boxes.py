"""bench/class_boxes.py: the table pairs each instance's runs with and without the classes'
own boxes, the arms differ in that switch alone, and the results README quotes the stored
table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ab_bench_rows import ab_row, arm_runs, stored_table

from bench import class_boxes
from formulations.milp import slices


def _row(name: str, on: bool, status: str, wall: float, gap: float | None) -> dict[str, Any]:
    return ab_row(class_boxes.KEY, name, on, status, wall, gap, load=0.5)


def test_summary_pairs_the_variants_and_counts_proofs() -> None:
    rows = [_row("a", True, "optimal", 21.5, 0.0), _row("a", False, "feasible", 120.0, 2.2e-5),
            _row("b", True, "optimal", 30.2, 0.0), _row("b", False, "optimal", 41.5, 0.0)]
    lines = class_boxes.summary(rows)
    assert lines[0].startswith("| instance | class boxes | its HiGHS | root boxes |")
    assert lines[-1] == "proven: 2 of 2 class boxes, 1 of 2 root boxes"


def test_each_arm_sets_only_the_switch_and_restores_it(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    runs = arm_runs(monkeypatch, tmp_path, class_boxes.KEY, class_boxes.main,
                    lambda: slices._CLASS_BOXES)
    assert runs == [(True, {}), (False, {})]
    assert slices._CLASS_BOXES is True


def test_the_stored_figures_are_the_ones_the_results_readme_states() -> None:
    """bench/results/README.md quotes the proof count and the times of the instance that
    led to the change."""
    count, lines, readme = stored_table(class_boxes.OUT, class_boxes.summary)
    assert count == 2 * len(class_boxes.CASES)
    assert f"\n{lines[-1]}\n" in readme
    rows = [json.loads(x) for x in class_boxes.OUT.read_text().splitlines() if x]
    by = {(r["instance"], r[class_boxes.KEY]): r for r in rows}
    text = " ".join(readme.split())
    on, off = by["metro-n32-l32-s883", True], by["metro-n32-l32-s883", False]
    assert on["status"] == "optimal" and off["status"] != "optimal"
    assert (f"883 proven in {on['wall_s']:.1f} s against {100 * off['gap']:.4f} % short"
            in text)
    on, off = by["metro-n128-l96-s829", True], by["metro-n128-l96-s829", False]
    assert on["status"] == "optimal" and off["status"] != "optimal"
    assert f"Seed 829 too, in {on['wall_s']:.1f} s" in text
    q_on, q_off = on["narrowed"]["q"], off["narrowed"]["q"]
    assert q_on[0] == q_on[1] and f"at {q_on[0]} stages instead of {q_off[0]}-{q_off[1]}" in text
    unproven = {k for k, r in by.items() if r["status"] != "optimal"}
    assert len(unproven) == 2 * 3 + 2  # 821, 401 and 179 in both arms; 883 and 829 without
    loads = [r["load_before"] for r in rows]
    assert f"at load {min(loads):.1f}-{max(loads):.1f}" in text
