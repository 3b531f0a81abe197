"""bench/dp_work.py: the DPs on kept work arrays give what they give on fresh ones."""

from __future__ import annotations

import json
from pathlib import Path

from bench import dp_work


def test_kept_and_fresh_work_arrays_give_the_same_values() -> None:
    res = dp_work.run("metro", 12, 12, 3, 1.0, seconds=1.0, reps=1)
    assert res["rows"], "no DP call recorded"
    assert {r["dp"] for r in res["rows"]} >= {"relaxation"}
    for r in res["rows"]:
        assert r["calls"] > 0 and r["same_values"], r


def test_the_stored_replay_returned_the_same_values() -> None:
    """bench/results/README.md says both arms of the stored replay agreed on every call,
    and that it covers the large DPs (a site visited three times, a kept-apart pair)."""
    path = Path(dp_work.__file__).resolve().parent / "results" / "dp-work" / "result.json"
    res = json.loads(path.read_text())
    assert all(r["same_values"] for r in res["rows"])
    assert {(r["dp"], r["states"]) for r in res["rows"]} >= {("walk", 2197),
                                                              ("relaxation", 2916)}
