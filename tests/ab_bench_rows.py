"""Rows and a stubbed run for the MILP on/off benches (bench.milp_narrow.ab_main and the
benches built on it), shared by their tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import milp_narrow


def ab_row(key: str, name: str, on: bool, status: str, wall: float, gap: float | None,
           lam: float = 0.5, load: float = 1.5) -> dict[str, Any]:
    """One stored row of an on/off bench whose variant is recorded under ``key``."""
    return {"instance": name, "lambda": lam, key: on, "status": status, "wall_s": wall,
            "gap": gap, "highs_status": None, "load_before": load}


def arm_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, key: str,
             main: Callable[[list[str]], int], read: Callable[[], object] = lambda: None
             ) -> list[tuple[object, dict[str, Any]]]:
    """Per run of ``main``'s arms, on one tiny instance (the runs stubbed): what ``read()``
    returns as it starts (a module switch) and the solver parameters it runs with."""
    seen: list[tuple[object, dict[str, Any]]] = []

    def fake(inst: Any, on: bool, threads: int, tl: float, **kw: Any) -> dict[str, Any]:
        params = kw.get("params")
        seen.append((read(), dict(params or {})))
        return {**ab_row(key, inst.name, on, "optimal", 1.0, 0.0), "objective": 1.0}

    monkeypatch.setattr(milp_narrow, "run_one", fake)
    assert main(["--cases", "metro:8:8:1:1", "--out", str(tmp_path / "r.jsonl"),
                 "--time-limit", "5"]) == 0
    return seen


def arm_params(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, key: str,
               main: Callable[[list[str]], int]) -> list[dict[str, Any]]:
    """The solver parameters each arm of ``main`` runs with (:func:`arm_runs`)."""
    return [params for _, params in arm_runs(monkeypatch, tmp_path, key, main)]


def stored_table(path: Path, summary: Callable[[list[dict[str, Any]]], list[str]]
                 ) -> tuple[int, list[str], str]:
    """The rows stored at ``path`` (their count), the table ``summary`` makes of them, and
    the text of bench/results/README.md, which quotes it."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    readme = (Path(milp_narrow.__file__).resolve().parent / "results" / "README.md")
    return len(rows), summary(rows), readme.read_text()
