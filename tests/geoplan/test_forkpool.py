"""Forked workers: results under their keys, a failing task raised, busy workers killed."""

from __future__ import annotations

import os
import time

import pytest

from geoplan.solving import forkpool
from geoplan.solving.forkpool import ForkPool

pytestmark = pytest.mark.skipif(not forkpool.available(), reason="no fork here")


def _square_or_fail(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x}")
    if x == 999:
        time.sleep(600)  # killed by close()
    return x * x


def test_every_task_comes_back_under_its_key() -> None:
    seen: dict[str, int] = {}
    with ForkPool(2, _square_or_fail) as pool:
        todo = list(range(7))
        while todo or pool.running:
            while todo and pool.idle:
                x = todo.pop()
                pool.submit(f"k{x}", x)
            for key, value in pool.results(None):
                seen[key] = value
    assert seen == {f"k{x}": x * x for x in range(7)}


def test_a_failing_task_is_raised_with_its_message() -> None:
    with ForkPool(1, _square_or_fail) as pool:
        pool.submit("bad", -3)
        with pytest.raises(RuntimeError, match="ValueError: negative: -3"):
            pool.results(None)


def test_closing_ends_every_worker_busy_or_not() -> None:
    pool = ForkPool(2, _square_or_fail)
    pids = list(pool._pids)
    pool.submit("long", 999)
    assert pool.idle == 1 and pool.running == 1
    pool.close()
    for pid in pids:  # reaped: no such child any more
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
