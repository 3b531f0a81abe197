"""What the one-instance-at-a-time A/B benches share (``bench.branching_workers``,
``bench.milp_narrow``, ``bench.milp_memetic``, ``bench.portfolio_threads``): the load,
a row's status cell, and their command line (run and append JSON-lines rows, or
``--report`` the stored ones)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geoplan.model.instance import Instance

__all__ = ["add_cases", "by_instance", "instances", "load_now", "main", "module_switch",
           "status_cell"]


def add_cases(ap: argparse.ArgumentParser, cases: Sequence[str]) -> None:
    """``--cases`` (default ``cases``) and ``--threads`` (default 2, the machine's cores)."""
    ap.add_argument("--cases", nargs="+", default=list(cases),
                    help="family:N:L:instance seed:lambda")
    ap.add_argument("--threads", type=int, default=2)


def instances(cases: Sequence[str]) -> Iterator[tuple[Instance, float]]:
    """Each case's instance (``family:N:L:instance seed:lambda``) and its lambda."""
    from geoplan.model.generators import by_family
    from geoplan.model.instance import Instance

    for case in cases:
        family, n, layers, seed, lam = case.split(":")
        yield Instance.from_dict(by_family(family, int(n), int(layers), int(seed),
                                           lam=float(lam))), float(lam)


def by_instance(rows: Sequence[dict[str, Any]], field: str, variants: Sequence[Any]
                ) -> dict[str, dict[Any, dict[str, Any]]]:
    """The rows by instance (``NAME lambda L``: the generator's name leaves lambda out),
    each as {its ``field`` value: row}; only instances with every one of ``variants``."""
    by: dict[str, dict[Any, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(f"{r['instance']} lambda {r['lambda']:g}", {})[r[field]] = r
    return {name: got for name, got in by.items() if set(variants) <= set(got)}


@contextmanager
def module_switch(module: ModuleType, name: str, value: object) -> Iterator[None]:
    """``module.name`` set to ``value`` for one run, then restored (the arms of benches
    whose variants are a module switch, read when a search starts, not a parameter)."""
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


def load_now() -> float | None:
    """The 1-minute load average, recorded before each run (None where unknown)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def status_cell(row: dict[str, Any]) -> str:
    """Time to proof, else the gap at the limit, else the status."""
    if row["status"] == "optimal":
        return f"{row['wall_s']:.1f} s"
    gap = row.get("gap")
    return f"gap {100 * gap:.2f} %" if gap is not None else row["status"]


def main(ap: argparse.ArgumentParser, out: Path, argv: list[str] | None,
         runs: Callable[[argparse.Namespace], Iterator[tuple[dict[str, Any], str]]],
         summary: Callable[[list[dict[str, Any]]], list[str]]) -> int:
    """Add ``--time-limit``, ``--out`` and ``--report`` to ``ap``; then either print
    ``summary`` of the stored rows, or append each row ``runs`` yields (with its progress
    line, to stderr) and print ``summary`` of the new ones."""
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--out", type=Path, default=out)
    ap.add_argument("--report", action="store_true",
                    help="print the table of the stored rows and run nothing")
    args = ap.parse_args(argv)
    if args.report:
        rows = [json.loads(line) for line in args.out.read_text().splitlines() if line]
        print("\n".join(summary(rows)))
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with args.out.open("a") as fh:
        for row, line in runs(args):
            rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(line, file=sys.stderr)
    print("\n".join(summary(rows)))
    return 0
