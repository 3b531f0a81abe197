"""bench/dp_work.py: the DPs on kept work arrays give what they give on fresh ones."""

from __future__ import annotations

from bench import dp_work


def test_kept_and_fresh_work_arrays_give_the_same_values() -> None:
    res = dp_work.run("metro", 12, 12, 3, 1.0, seconds=1.0, reps=1)
    assert res["rows"], "no DP call recorded"
    assert {r["dp"] for r in res["rows"]} >= {"relaxation"}
    for r in res["rows"]:
        assert r["calls"] > 0 and r["same_values"], r
