"""``geoplan bench``: list, run and report benchmark experiments.

::

    geoplan bench list [--quick | --profile P] [--workers K]
    geoplan bench run EXPERIMENT.toml|NAME ... [--quick] [--out DIR] [--workers K]
                      [--dask ADDRESS] [--resume | --overwrite] [--dry-run] [--report]
    geoplan bench report RESULTS.jsonl [--out DIR] [--no-figures]
    geoplan bench paper [--quick] [--out DIR] [--workers K] [--dask ADDRESS] [--resume]

Bad input (unknown experiment or solver, bad budget, missing instance file, an
existing results file without ``--resume``) raises
:class:`~geoplan.errors.InputError`: exit status 2, one message, before any run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from geoplan.cli import int_at_least
from geoplan.errors import InputError

__all__ = ["add_bench_parser"]


_workers = int_at_least(1, "a positive integer")


def _profile(args: argparse.Namespace) -> str:
    if args.quick and args.profile not in (None, "quick"):
        raise InputError("--profile", args.profile, "conflicts with --quick")
    return "quick" if args.quick else args.profile or "full"


def _hms(s: float) -> str:
    m, sec = divmod(round(s), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s"


def _load(names: list[str], profile: str) -> list[Any]:
    from bench.experiments import load_experiment

    exps = [load_experiment(n, profile) for n in names]
    seen = [e.name for e in exps]
    for n in seen:
        if seen.count(n) > 1:
            raise InputError("experiment", n, "given twice")
    return exps


def _plan_text(exps: list[Any], workers: int) -> str:
    from bench.execution.sweep import availability
    from bench.experiments import worst_case_seconds

    lines = []
    names = {s.name for e in exps for s in e.solvers} | {
        s.warm_start for e in exps for s in e.solvers if s.warm_start}
    missing = availability(names)
    for e in exps:
        runs = e.runs()
        skip = sum(1 for r in runs if r.skip_reason or r.solver.name in missing
                   or r.solver.warm_start in missing)
        lines.append(f"{e.name:10s} {e.profile:5s} {len(e.instances):3d} instances "
                     f"{len(runs):5d} runs ({skip} skipped)  worst case "
                     f"{_hms(e.worst_case_seconds(workers))} on {workers} workers  {e.title}")
    lines.append(f"{'all':10s} worst case {_hms(worst_case_seconds(exps, workers))} on "
                 f"{workers} workers (every run killed at budget + grace)")
    for name, why in sorted(missing.items()):
        lines.append(f"unavailable (its runs are recorded as skipped): {name}: {why}")
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
    from bench.execution import default_workers
    from bench.experiments import builtin_experiments

    exps = _load(builtin_experiments(), _profile(args))
    print(_plan_text(exps, args.workers or default_workers()))
    return 0


def _run(args: argparse.Namespace, exps: list[Any], out: Path) -> Any:
    from bench.execution import default_workers, run_experiments

    if args.resume and args.overwrite:
        raise InputError("--overwrite", True, "conflicts with --resume")
    if args.dry_run:
        print(_plan_text(exps, args.workers or default_workers()))
        return None
    summary = run_experiments(exps, out, workers=args.workers, dask=args.dask,
                              resume=args.resume, overwrite=args.overwrite,
                              progress=not args.no_progress)
    print(summary.line())
    print(f"results: {summary.results}")
    for name, why in sorted(summary.unavailable.items()):
        print(f"skipped (unavailable): {name}: {why}")
    return summary


def cmd_run(args: argparse.Namespace) -> int:
    profile = _profile(args)
    exps = _load(args.experiments, profile)
    default = exps[0].name if len(exps) == 1 else "sweep"
    out = Path(args.out or Path("bench-out") / f"{default}-{profile}")
    summary = _run(args, exps, out)
    if summary is not None and args.report:
        from bench.report import write_report

        print(f"report: {write_report(summary.results, out / 'report')}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from bench.report import write_report

    path = write_report(args.results, args.out, figures=not args.no_figures)
    print(f"report: {path}")
    return 0


def cmd_paper(args: argparse.Namespace) -> int:
    from bench.experiments import PAPER_EXPERIMENTS
    from bench.report import write_report

    profile = _profile(args)
    exps = _load(list(PAPER_EXPERIMENTS), profile)
    out = Path(args.out or Path("bench-out") / f"paper-{profile}")
    summary = _run(args, exps, out)
    if summary is not None:
        print(f"report: {write_report(summary.results, out / 'report')}")
    return 0


def _common(p: argparse.ArgumentParser, *, sweep: bool) -> None:
    p.add_argument("--quick", action="store_true", help="the quick profile (< 10 min, 2 cores)")
    p.add_argument("--profile", choices=("full", "quick", "tiny"), default=None,
                   help="full (default), quick, or tiny (tests)")
    p.add_argument("--workers", type=_workers, default=None,
                   help="parallel run processes (default: 2 on 2+ cores, else 1)")
    if not sweep:
        return
    p.add_argument("--out", help="output directory (default bench-out/NAME-PROFILE)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="hand the runs to this Dask scheduler instead of local processes")
    p.add_argument("--resume", action="store_true",
                   help="continue an existing results file, skipping runs already in it")
    p.add_argument("--overwrite", action="store_true", help="discard an existing results file")
    p.add_argument("--dry-run", action="store_true",
                   help="validate and print the run plan with its worst-case time; run nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress output")


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``bench`` and its actions to the ``geoplan`` sub-command parser."""
    b = subparsers.add_parser("bench", help="benchmark experiments: run sweeps, write reports")
    sub = b.add_subparsers(dest="bench_command", required=True, metavar="ACTION")

    ls = sub.add_parser("list", help="shipped experiments with run counts and worst-case time")
    _common(ls, sweep=False)
    ls.set_defaults(func=cmd_list)

    r = sub.add_parser("run", help="run experiments (names or TOML files)")
    r.add_argument("experiments", nargs="+", metavar="EXPERIMENT",
                   help="a shipped experiment name or an experiment TOML file")
    _common(r, sweep=True)
    r.add_argument("--report", action="store_true", help="write the report afterwards")
    r.set_defaults(func=cmd_run)

    rep = sub.add_parser("report", help="Markdown report and figures from a results file")
    rep.add_argument("results", help="results.jsonl (or the directory holding it)")
    rep.add_argument("--out", help="report directory (default: RESULTS_DIR/report)")
    rep.add_argument("--no-figures", action="store_true", help="tables only")
    rep.set_defaults(func=cmd_report)

    pa = sub.add_parser("paper", help="run every paper experiment, then the report")
    _common(pa, sweep=True)
    pa.set_defaults(func=cmd_paper)
    return b


if __name__ == "__main__":  # pragma: no cover - use `geoplan bench`
    from geoplan.cli import main

    sys.exit(main(["bench", *sys.argv[1:]]))
