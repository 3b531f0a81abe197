"""The memetic algorithm in a forked process: the same run as in this one, stoppable."""

from __future__ import annotations

import os
import time

import pytest

from formulations import memetic_peer
from formulations.memetic_peer import MemeticPeer
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import get_solver, solve

pytestmark = pytest.mark.skipif(not memetic_peer.available(), reason="no fork here")


@pytest.fixture(scope="module")
def metro12() -> Instance:
    return Instance.from_dict(by_family("metro", 12, 16, 5))


def _params(**given: object):  # the memetic solver's parsed parameters
    return get_solver("memetic").parse_params(given)[0]


def test_peer_runs_the_same_memetic_run_as_this_process(metro12: Instance) -> None:
    # Capped by generations, so neither run depends on the clock.
    params = _params(max_generations=15)
    here = solve(metro12, "memetic", seed=4, time_limit=600, threads=1, params=params)
    peer = MemeticPeer(metro12, 4, 600.0, params)
    there = peer.result()
    assert there is not None and peer.error is None
    assert there.objective == here.objective
    assert there.plan is not None and here.plan is not None
    assert there.plan.to_dict() == here.plan.to_dict()
    # Every new best was sent as it was found; the last one is the result's plan.
    best = peer.best()
    assert best is not None
    assert best[1] == pytest.approx(there.objective, rel=1e-9)
    assert best[2].to_dict() == there.plan.to_dict()
    assert best[0] >= peer.started


def test_peer_stops_when_asked_and_still_answers(metro12: Instance) -> None:
    peer = MemeticPeer(metro12, 4, 600.0, _params())  # restarts until the budget is spent
    peer.stop()
    res = peer.result()
    assert res is not None
    assert res.info.get("stopped") == "the parallel portfolio's exact model ended"
    assert res.wall_s < 600


def test_peer_reports_a_run_that_raises(metro12: Instance) -> None:
    # Another solver's parameters: the memetic solver refuses them in the child, which
    # sends the error instead of a result.
    wrong = get_solver("milp").parse_params({})[0]
    peer = MemeticPeer(metro12, 0, 600.0, wrong)
    assert peer.result() is None
    assert peer.error is not None and "Error" in peer.error
    assert peer.best() is None


def test_a_result_not_waited_for_leaves_what_was_sent(metro12: Instance) -> None:
    # A 600 s run (restarts until its budget is spent) cannot answer at once: result()
    # with no time to wait ends it and answers None; the plans it sent are kept.
    peer = MemeticPeer(metro12, 4, 600.0, _params())
    while peer.best() is None:  # the first plan comes within the first generations
        time.sleep(0.01)
    assert peer.result(timeout=0.0) is None
    best = peer.best()
    assert best is not None and peer.sent and peer.sent[-1][1] >= best[1]
    assert min(obj for _, obj in peer.sent) == best[1]


def _nices(pid: int) -> set[int]:
    """The niceness of each thread of process ``pid`` (Linux: per thread)."""
    return {os.getpriority(os.PRIO_PROCESS, int(tid)) for tid in os.listdir(f"/proc/{pid}/task")}


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="no /proc here")
def test_peer_runs_niced_below_this_process(metro12: Instance) -> None:
    # The exact model next to it keeps every thread; the peer takes what it leaves idle.
    # (stop=budget: the child runs until it is closed, so its threads are there to read.)
    peer = MemeticPeer(metro12, 4, 600.0, _params(stop="budget"), nice_after=0.0)
    try:
        while peer.best() is None:  # a plan is sent only after the child has reniced
            time.sleep(0.01)
        pid = peer._pid
        assert pid is not None
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert _nices(pid) == {min(19, mine + memetic_peer.NICE)}
    finally:
        peer.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="no /proc here")
def test_peer_is_niced_only_after_its_first_seconds(metro12: Instance) -> None:
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    # stop=budget: both children run until closed. Under the adaptive stop this read
    # {10} only in the moment between the search's end (its queue's feeder thread, started
    # at nice 0 by a plan sent within 0.05 s, gone) and the child's exit: a CI run caught
    # the exit instead.
    never = MemeticPeer(metro12, 4, 600.0, _params(stop="budget"), nice_after=None)
    later = MemeticPeer(metro12, 4, 600.0, _params(stop="budget"), nice_after=0.05)
    try:
        while never.best() is None or later.best() is None:
            time.sleep(0.01)
        assert never._pid is not None and later._pid is not None
        niced = min(19, mine + memetic_peer.NICE)
        # Every thread of the child (its solve's, the one watching for a stop, its queue's
        # feeder) is reniced within a few of its 20 ms polls; 60 s is never near.
        for _ in range(6000):
            if _nices(later._pid) == {niced}:
                break
            time.sleep(0.01)
        assert _nices(later._pid) == {niced}
        assert _nices(never._pid) == {mine}
        assert _nices(os.getpid()) == {mine}  # this process's threads are left alone
    finally:
        never.close()
        later.close()
