"""The execution modules on their own: environment, results file, protocol rows, progress."""

from __future__ import annotations

import io
import json
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from bench.execution import env, pool, protocol, results
from bench.execution.progress import Progress

TASK = {"row": {"run_key": "k1", "solver": "metis-default", "seed": 0, "budget_s": 1.0,
                "grace_s": 2.0, "threads": 1, "experiment": "e", "label": "L",
                "instance": "i"}}


def test_environment_names_the_code_and_the_machine() -> None:
    e = env.environment()
    assert {"version", "git_commit", "python", "host", "cpus"} <= set(e)
    assert env.default_workers() in (1, 2)
    assert env.now().endswith("+00:00")


def test_results_file_appends_reads_and_repairs_a_torn_line(tmp_path: Path) -> None:
    f = results.ResultsFile(tmp_path / results.RESULTS_NAME)
    assert f.rows() == []
    f.append({"run_key": "a", "status": "optimal"})
    f.append({"run_key": "b", "status": "feasible"})
    with f.path.open("a") as fh:  # an interrupted write
        fh.write('{"run_key": "c", "sta')
    assert [r["run_key"] for r in f.rows()] == ["a", "b"]
    f.repair()
    f.append({"run_key": "c", "status": "timeout"})
    assert [r["run_key"] for r in f.rows()] == ["a", "b", "c"]
    assert f.path.read_text().count("\n") == 3


def test_results_file_refuses_nan(tmp_path: Path) -> None:
    f = results.ResultsFile(tmp_path / "r.jsonl")
    with pytest.raises(ValueError):
        f.append({"objective": float("nan")})


def test_failure_row_keeps_the_partial_trace() -> None:
    events = [{"event": "improve", "t": 0.1, "incumbent": 9.0, "bound": None},
              {"event": "improve", "t": 0.2, "incumbent": 7.0, "bound": 5.0}]
    row = protocol.failure_row(TASK, "timeout", "killed", 3.0, events)
    assert row["status"] == "timeout" and row["objective"] is None and row["plan"] is None
    assert row["trace"] == [[0.1, 9.0, None], [0.2, 7.0, 5.0]]
    assert row["unpriced_incumbent"] == 7.0
    assert row["run_key"] == "k1" and row["elapsed_s"] == 3.0


def test_long_traces_are_thinned_keeping_both_ends() -> None:
    trace = [[k, float(k), None] for k in range(5000)]
    thin = protocol._thin(trace)
    assert len(thin) == protocol._MAX_TRACE
    assert thin[0] == trace[0] and thin[-1] == trace[-1]


def test_execute_turns_an_input_error_into_an_error_row() -> None:
    task = {**TASK, "instance": {"gpus": []}}
    row = protocol.execute(task)
    assert row["status"] == "error"  # an InputError, not a crash
    assert row["message"]
    json.dumps(row)  # a row is always JSON


def test_progress_writes_one_line_per_run_off_a_terminal() -> None:
    out = io.StringIO()
    bar = Progress(2, 2, out, enabled=True)
    bar.update({**TASK["row"], "status": "feasible", "objective": 12.5}, 10.0)
    bar.update({**TASK["row"], "status": "timeout", "objective": None}, 0.0)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[1/2 ") and lines[0].endswith("feasible 12.5")
    assert lines[1].endswith("timeout")
    assert bar.counts == {"feasible": 1, "timeout": 1}


def test_progress_can_be_silent() -> None:
    out = io.StringIO()
    bar = Progress(1, 1, out, enabled=False)
    bar.update({**TASK["row"], "status": "optimal", "objective": 1.0}, 0.0)
    assert out.getvalue() == "" and bar.done == 1


def test_a_fresh_interpreter_run_returns_its_row() -> None:
    """The subprocess protocol end to end (as on Dask workers), on an input error."""
    row = protocol.run_subprocess({**TASK, "instance": {"gpus": []}, "limit": 60.0})
    assert row["status"] == "error" and "gpus" in row["message"]


def _task(key: str, threads: int) -> dict[str, Any]:
    return {"row": {**TASK["row"], "run_key": key, "threads": threads}, "instance": {},
            "limit": 60.0}


def test_slots_are_a_runs_threads_within_the_workers() -> None:
    assert [pool.slots(_task("a", t), 2) for t in (0, 1, 2, 8)] == [1, 1, 2, 2]
    waiting = deque([_task("a", 2), _task("b", 1), _task("c", 1)])
    assert pool._next_fitting(waiting, 1, 2) == 1
    assert pool._next_fitting(waiting, 2, 2) == 0
    assert pool._next_fitting(deque([_task("a", 2)]), 1, 2) is None


def test_a_two_thread_run_never_shares_two_workers(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs whose threads would exceed the workers never overlap: each fake run writes
    when it started and ended (perf_counter, one clock for every process)."""

    def fake(task: dict[str, Any], emit: object = None) -> dict[str, Any]:
        t0 = time.perf_counter()
        time.sleep(0.15)
        (tmp_path / task["row"]["run_key"]).write_text(f"{t0} {time.perf_counter()}")
        return {**task["row"], "status": "feasible"}

    monkeypatch.setattr(pool, "execute", fake)  # the forked children inherit it
    tasks = [_task("a2", 2), _task("b1", 1), _task("c1", 1), _task("d2", 2), _task("e1", 1)]
    rows: list[dict[str, Any]] = []
    pool.run_local(tasks, 2, rows.append, poll=0.02)
    assert sorted(r["run_key"] for r in rows) == sorted(t["row"]["run_key"] for t in tasks)
    spans = {k: tuple(map(float, (tmp_path / k).read_text().split()))
             for k in ("a2", "b1", "c1", "d2", "e1")}
    for wide in ("a2", "d2"):
        for other, (s, e) in spans.items():
            if other != wide:
                assert e <= spans[wide][0] or s >= spans[wide][1], (wide, other, spans)
