"""The results file (append-only JSON lines, one row a run) and the manifest beside it."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.execution.env import now

if TYPE_CHECKING:
    from bench.experiments import Experiment

__all__ = ["FAILED", "MANIFEST_NAME", "RESULTS_NAME", "ResultsFile", "write_manifest"]

RESULTS_NAME = "results.jsonl"
MANIFEST_NAME = "manifest.json"
#: Runner statuses besides the solver statuses of formats.md.
FAILED = ("timeout", "crashed", "error", "formulation-error")


class ResultsFile:
    """An append-only JSON-lines results file that survives interruption."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def rows(self) -> list[dict[str, Any]]:
        """Every complete row (a torn last line from an interruption is ignored)."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def repair(self) -> None:
        """Cut a torn last line so that appends start on a fresh line."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with self.path.open("r+b") as f:
                f.truncate(cut)

    def append(self, row: Mapping[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row, default=str, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


def write_manifest(out: Path, experiments: Sequence[Experiment], env: Mapping[str, Any]) -> None:
    """Record the experiment definitions next to the results (the report reads them)."""
    path = out / MANIFEST_NAME
    old = json.loads(path.read_text()) if path.exists() else {}
    exps = dict(old.get("experiments", {}))
    for e in experiments:
        exps[e.name] = e.to_manifest()
    order = list(dict.fromkeys([*old.get("order", []), *(e.name for e in experiments)]))
    path.write_text(json.dumps({"experiments": exps, "order": order, "environment": dict(env),
                                "updated_at": now()}, indent=1) + "\n")

