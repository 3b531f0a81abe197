"""bench/milp_build.py: the figures it prints are the steps of one real build."""

from __future__ import annotations

import pytest

from bench import milp_build


def test_one_small_build_is_timed_step_by_step() -> None:
    out = milp_build.run([(12, 12)], reps=1, seed=0)
    assert [(r["family"], r["lambda"]) for r in out["rows"]] == [
        ("geo", 1.0), ("geo", 0.5), ("metro", 1.0), ("metro", 0.5)]
    for r in out["rows"]:
        assert all(r[k] > 0 for k in milp_build.STEPS)
        assert r["total"] == pytest.approx(sum(r[k] for k in milp_build.STEPS))
        assert r["cols"] > 0 and r["rows"] > 0
    assert out["worst_total_at_128"] is None  # no N=128 case was run


def test_check_exit_code_follows_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = {"reps": 1, "seed": 0, "rows": [], "load_before": 0.0, "load_after": 0.0,
            "target_s": milp_build.TARGET_S, "worst_total_at_128": milp_build.TARGET_S + 1}
    monkeypatch.setattr(milp_build, "run", lambda *a, **k: fake)
    assert milp_build.main(["--check", "--json"]) == 1
    fake["worst_total_at_128"] = milp_build.TARGET_S - 1
    assert milp_build.main(["--check", "--json"]) == 0
