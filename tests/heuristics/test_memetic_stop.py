"""Stopping criteria: time, no-improvement, generations, target, combined."""

from __future__ import annotations

import time

import pytest

from heuristics.memetic.stop import (
    AnyOf,
    MaxGenerations,
    MaxRuntime,
    NoImprovement,
    TargetObjective,
)


def test_max_generations_counts_after_initialisation() -> None:
    stop = MaxGenerations(3)
    # First call: after initialisation; then one call per generation.
    assert [stop(1.0) for _ in range(5)] == [False, False, False, True, True]
    assert MaxGenerations(0)(1.0) is True


def test_no_improvement_resets_on_strict_improvement() -> None:
    stop = NoImprovement(2)
    assert stop(10.0) is False  # initial best
    assert stop(10.0) is False  # 1 stale generation
    assert stop(9.0) is False  # improvement resets
    assert stop(9.0) is False
    assert stop(9.0) is True  # 2 stale generations


def test_max_runtime() -> None:
    assert MaxRuntime(0.0)(1.0) is True
    assert MaxRuntime(100.0)(1.0) is False
    assert MaxRuntime(1.0, start=time.perf_counter() - 2.0)(1.0) is True
    with pytest.raises(ValueError):
        MaxRuntime(-1.0)


def test_target_objective() -> None:
    stop = TargetObjective(100.0)
    assert stop(100.0 + 1e-8) is True  # within the relative tolerance
    assert stop(100.1) is False


def test_any_of_reports_what_fired_and_keeps_state() -> None:
    gens, stale = MaxGenerations(2), NoImprovement(5)
    stop = AnyOf(gens, stale)
    assert stop(3.0) is False
    assert stop(2.0) is False
    assert stop(2.0) is True
    assert stop.fired == ["MaxGenerations"]
    assert stale.stale == 1  # every criterion was called, so its count is current
