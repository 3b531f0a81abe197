"""Progress of a sweep: a one-line bar on a terminal, one line per finished run elsewhere."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, TextIO

from bench.execution.results import FAILED

__all__ = ["Progress"]


class Progress:
    """A one-line progress bar on a terminal, or one line per finished run elsewhere."""

    def __init__(self, total: int, workers: int, stream: TextIO | None, enabled: bool) -> None:
        self.total = total
        self.workers = max(1, workers)
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = self.enabled and self.stream.isatty()
        self.done = 0
        self.counts: Counter[str] = Counter()
        self.t0 = time.perf_counter()

    def update(self, row: Mapping[str, Any], remaining_s: float) -> None:
        self.done += 1
        self.counts[str(row.get("status"))] += 1
        if not self.enabled:
            return
        el = time.perf_counter() - self.t0
        left = remaining_s / self.workers
        if self.tty:
            width = 28
            fill = int(width * self.done / self.total)
            bad = sum(self.counts[s] for s in FAILED)
            self.stream.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total}"
                              f"  {bad} failed  {_hms(el)} elapsed, <= {_hms(left)} left ")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            obj = row.get("objective")
            val = "" if obj is None else f" {obj:.6g}"
            self.stream.write(
                f"[{self.done}/{self.total} {_hms(el)}] {row.get('experiment')} "
                f"{row.get('label')} {row.get('instance')} seed {row.get('seed')} "
                f"{row.get('budget_s'):g}s: {row.get('status')}{val}\n")
        self.stream.flush()


def _hms(s: float) -> str:
    s = max(0, round(s))
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"

