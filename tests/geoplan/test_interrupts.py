"""SIGINT and SIGTERM end every solver as a time-out does (issue 9, "Interrupts as time-outs").

Each CLI run uses the test hook of :mod:`geoplan.solving.stop`
(``GEOPLAN_TEST_STOP_AFTER_INCUMBENTS=K``: the solve signals itself after its
K-th improvement), so nothing here depends on timing: the budget is far longer
than the run. Also the mechanism itself: a model build given an expired
budget is abandoned with the documented status.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions, solve
from geoplan.solving.stop import StopFlag, call_stoppable, stop_scope

ROOT = Path(__file__).resolve().parents[2]

# solver -> (K: the improvement after which it signals itself, whether a bound is expected)
CASES = {
    "bnb": (1, True),
    "cpsat": (1, True),
    "milp": (3, True),  # 1: heuristic plan, 2: the MIP start, 3: in HiGHS's search
    "memetic": (2, False),
    "random-restart": (2, False),
    "metis-improved": (1, False),
    "greedy": (1, False),
    "portfolio": (1, False),
}


@pytest.fixture(scope="module")
def instance_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Large enough that no solver finishes within seconds, small enough to load fast.
    path = tmp_path_factory.mktemp("interrupts") / "metro-48.json"
    path.write_text(json.dumps(by_family("metro", 48, 32, 1)))
    return path


def _run(instance: Path, solver: str, k: int, tmp: Path, signal_name: str = "INT",
         extra: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    out, result = tmp / f"{solver}.plan.json", tmp / f"{solver}.result.json"
    env = {**os.environ, "GEOPLAN_TEST_STOP_AFTER_INCUMBENTS": str(k),
           "GEOPLAN_TEST_STOP_SIGNAL": signal_name}
    proc = subprocess.run(
        [sys.executable, "-m", "geoplan", "solve", str(instance), "--solver", solver,
         "--time-limit", "120", "--threads", "1", "--json", "--out", str(out),
         "--result", str(result), *extra],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=240,
    )
    return proc, out, result


def _check(proc: subprocess.CompletedProcess[str], out: Path, result: Path,
           bound: bool, signal_name: str = "SIGINT") -> dict:
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    d = json.loads(proc.stdout)
    assert d["plan"] is not None and d["status"] in ("feasible", "optimal"), d["message"]
    assert d["info"].get("stopped") == f"interrupted by {signal_name}", d["info"]
    assert d["wall_s"] < 60  # the stop ended it, not the 120 s budget
    if bound:
        assert d["lower_bound"] is not None and d["lower_bound"] <= d["objective"]
    assert json.loads(out.read_text())["stages"] == d["plan"]["stages"]
    assert json.loads(result.read_text())["objective"] == d["objective"]
    return d


@pytest.mark.parametrize("solver", sorted(CASES))
def test_sigint_ends_the_solver_with_its_best_plan(solver: str, instance_file: Path,
                                                   tmp_path: Path) -> None:
    k, bound = CASES[solver]
    proc, out, result = _run(instance_file, solver, k, tmp_path)
    _check(proc, out, result, bound)


@pytest.mark.parametrize("solver", ["milp", "bnb"])
def test_sigterm_is_handled_as_sigint(solver: str, instance_file: Path, tmp_path: Path) -> None:
    k, bound = CASES[solver]
    proc, out, result = _run(instance_file, solver, k, tmp_path, signal_name="TERM")
    _check(proc, out, result, bound, signal_name="SIGTERM")


def test_portfolio_keeps_the_memetic_plan_when_its_exact_phase_is_interrupted(
        instance_file: Path, tmp_path: Path) -> None:
    # Without its parametric bound the milp asks for the memetic plan before its model
    # (a memetic phase of 3 improvements at most); then the milp phase is interrupted.
    proc, out, result = _run(instance_file, "portfolio", 4, tmp_path,
                             extra=("--param", "memetic.max_generations=1",
                                    "--param", "exact=milp",
                                    "--param", "exact.parametric=false"))
    d = _check(proc, out, result, bound=False)
    assert d["info"]["memetic"]["ran"] is True
    assert d["objective"] <= d["info"]["memetic"]["objective"] * (1 + 1e-12)


# --------------------------------------------------------------------------- mechanism


def _inst(family: str = "metro", n: int = 24, layers: int = 16) -> Instance:
    return Instance.from_dict(by_family(family, n, layers, 0))


def test_a_stop_makes_the_deadline_pass() -> None:
    flag = StopFlag()
    opts = SolveOptions(seed=0, time_limit=100.0, stop=flag)
    assert opts.remaining() > 99 and not opts.stopped()
    flag.set("interrupted by SIGINT")
    assert opts.stopped() and opts.remaining() == 0.0 and opts.deadline <= time.perf_counter()
    flag.set("later")  # the first reason wins
    assert flag.reason == "interrupted by SIGINT"


def test_call_stoppable_cancels_and_returns() -> None:
    flag = StopFlag()
    release = threading.Event()

    def blocking() -> str:
        release.wait(30)
        return "returned"

    threading.Timer(0.2, flag.set).start()
    t0 = time.perf_counter()
    assert call_stoppable(blocking, flag, release.set) == "returned"
    assert time.perf_counter() - t0 < 10


def test_call_stoppable_abandons_a_call_that_ignores_its_cancel() -> None:
    """Past ``abandon_at`` the call is cancelled and left to its thread."""
    from geoplan.solving.stop import NativeCallAbandoned, abandoned_calls

    release = threading.Event()
    cancelled: list[bool] = []
    with pytest.raises(NativeCallAbandoned) as caught:
        call_stoppable(lambda: release.wait(30), StopFlag(), lambda: cancelled.append(True),
                       abandon_at=time.perf_counter())
    assert cancelled == [True] and caught.value.thread.is_alive()
    assert caught.value.thread in abandoned_calls()
    release.set()
    caught.value.thread.join(30)
    assert not caught.value.thread.is_alive() and not abandoned_calls()


def test_exit_status_ends_the_process_while_an_abandoned_call_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No interpreter teardown under a running native call: os._exit with the status."""
    import geoplan.solving.stop as stop

    exits: list[int] = []
    monkeypatch.setattr(stop.os, "_exit", exits.append)
    assert stop.exit_status(3) == 3 and exits == []
    release = threading.Event()
    with pytest.raises(stop.NativeCallAbandoned) as caught:
        call_stoppable(lambda: release.wait(30), StopFlag(), lambda: None,
                       abandon_at=time.perf_counter())
    stop.exit_status(4)
    assert exits == [4]
    release.set()
    caught.value.thread.join(30)
    assert stop.exit_status(5) == 5 and exits == [4]


def test_a_process_with_an_abandoned_call_exits_with_its_status_and_output() -> None:
    code = (
        "import threading, time\n"
        "from geoplan.solving.stop import StopFlag, NativeCallAbandoned, call_stoppable, "
        "exit_status\n"
        "try:\n"
        "    call_stoppable(threading.Event().wait, StopFlag(), lambda: None, "
        "abandon_at=time.perf_counter())\n"
        "except NativeCallAbandoned:\n"
        "    print('abandoned', end='')\n"
        "raise SystemExit(exit_status(7))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stdout) == (7, "abandoned"), done.stderr


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_a_build_with_no_budget_left_is_abandoned(solver: str) -> None:
    """An already-expired budget (a stop before the model exists): the build gives up and
    the result carries the best known plan, with info["model"] saying why."""
    flag = StopFlag()
    flag.set("interrupted by SIGINT")
    inst = _inst()
    spec_fn = {"milp": "formulations.milp", "cpsat": "formulations.cpsat"}[solver]
    module = __import__(spec_fn, fromlist=["solve"])
    outcome = module.solve(inst, SolveOptions(seed=0, time_limit=60.0, stop=flag))
    assert outcome.info["model"] == "abandoned: interrupted by SIGINT"
    assert outcome.status in ("feasible", "no_solution")
    if outcome.status == "feasible":
        assert outcome.plan is not None


def test_milp_build_past_its_deadline_says_so() -> None:
    from formulations.milp import BuildAbandoned, build_checker, build_model, prepare

    inst = _inst()
    opts = SolveOptions(seed=0, time_limit=1e-3, start=time.perf_counter() - 1.0)
    with pytest.raises(BuildAbandoned, match="building exceeded the budget"):
        build_model(inst, data=prepare(inst), check=build_checker(opts, "milp model"))


def test_solve_stopped_by_the_caller_returns_a_plan() -> None:
    flag = StopFlag()
    threading.Timer(0.5, flag.set, args=("stopped by the caller",)).start()
    r = solve(_inst(), "bnb", seed=0, time_limit=120.0, threads=1, stop=flag)
    assert r.plan is not None and r.status == "feasible"
    assert r.info["stopped"] == "stopped by the caller"
    assert r.lower_bound is not None


def test_stop_before_the_solver_starts_is_no_solution() -> None:
    flag = StopFlag()
    flag.set("interrupted by SIGINT")
    r = solve(_inst(), "memetic", seed=0, time_limit=10.0, stop=flag)
    assert r.status == "no_solution" and r.plan is None and r.lower_bound is None
    assert r.info["stopped"] == "interrupted by SIGINT"


def test_signal_handlers_are_restored() -> None:
    import signal

    before = signal.getsignal(signal.SIGINT)
    with stop_scope() as flag:
        assert signal.getsignal(signal.SIGINT) is not before
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.perf_counter() + 5
        while not flag.is_set() and time.perf_counter() < deadline:
            time.sleep(0.01)
        assert flag.reason == "interrupted by SIGINT"
    assert signal.getsignal(signal.SIGINT) is before
