"""Stopping criteria (paper 5.2): time limit, no-improvement limit, generation limit.

Each criterion is a small callable ``criterion(best) -> bool``, called once
after initialisation and then once after every generation with the best
objective so far; it returns True to stop. They keep
their own state, so make fresh ones for every run. :class:`AnyOf` combines them.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = [
    "AnyOf",
    "MaxGenerations",
    "MaxRuntime",
    "NoImprovement",
    "StoppingCriterion",
    "TargetObjective",
]


class StoppingCriterion(Protocol):
    def __call__(self, best: float) -> bool: ...


class MaxRuntime:
    """Stop once ``seconds`` have passed since ``start`` (a ``perf_counter`` value)."""

    def __init__(self, seconds: float, start: float | None = None) -> None:
        if not seconds >= 0:
            raise ValueError(f"seconds must be non-negative, got {seconds}")
        self.seconds = float(seconds)
        self.start = time.perf_counter() if start is None else start

    def __call__(self, best: float) -> bool:
        return time.perf_counter() - self.start >= self.seconds


class MaxGenerations:
    """Stop once ``generations`` generations have run (the first call is initialisation)."""

    def __init__(self, generations: int) -> None:
        if generations < 0:
            raise ValueError(f"generations must be non-negative, got {generations}")
        self.generations = generations
        self.done = -1

    def __call__(self, best: float) -> bool:
        self.done += 1
        return self.done >= self.generations


class NoImprovement:
    """Stop after ``generations`` consecutive generations without a strictly better best."""

    def __init__(self, generations: int) -> None:
        if generations < 0:
            raise ValueError(f"generations must be non-negative, got {generations}")
        self.generations = generations
        self.best = float("inf")
        self.stale = 0

    def __call__(self, best: float) -> bool:
        if best < self.best:
            self.best = best
            self.stale = 0
        else:
            self.stale += 1
        return self.stale >= self.generations


class TargetObjective:
    """Stop once ``best <= target`` (benchmarks and tests with a known optimum)."""

    def __init__(self, target: float, rel_tol: float = 1e-9) -> None:
        self.target = target
        self.rel_tol = rel_tol

    def __call__(self, best: float) -> bool:
        return best <= self.target + self.rel_tol * abs(self.target)


class AnyOf:
    """Stop when any criterion says so (every criterion is called, keeping its state)."""

    def __init__(self, *criteria: StoppingCriterion) -> None:
        self.criteria = criteria
        self.fired: list[str] = []  # names of the criteria that stopped the run

    def __call__(self, best: float) -> bool:
        stops = [c(best) for c in self.criteria]
        self.fired = [type(c).__name__ for c, s in zip(self.criteria, stops, strict=True) if s]
        return any(stops)
