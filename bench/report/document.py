"""The report document: a header, one section per experiment, failures, how to reproduce."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.execution.results import FAILED
from bench.experiments.paper import CAVEAT
from bench.report.data import Ctx, experiment_info, load_results
from bench.report.sections import RENDERERS, generic
from bench.report.tables import anchor, frame, table
from bench.report.text import reproduce_commands

__all__ = ["write_report"]

Row = dict[str, Any]
_FAILURES = "Runs that failed, timed out, were refused or skipped"


def _counts(rows: Sequence[Row]) -> str:
    """'error 1, feasible 30, refused 2': display statuses, alphabetically."""
    c = frame(rows)["shown"].value_counts().sort_index()
    return ", ".join(f"{k} {v}" for k, v in c.items())


def _failures(rows: Sequence[Row]) -> list[str]:
    df = frame(rows)
    bad = df[df["status"].isin([*FAILED, "skipped"])]
    if bad.empty:
        return ["Every run finished with a solver status; none crashed, timed out, was "
                "refused or was skipped."]
    bad = bad.assign(seed0=bad["seed"].fillna(0)).sort_values(
        ["shown", "experiment", "label", "instance", "seed0"], kind="stable")
    body = []
    for r in bad["row"]:
        msg = str(r.get("message") or "")
        body.append([frame([r])["shown"].iloc[0], r["experiment"], r["label"], r["instance"],
                     r.get("seed"), f"{r.get('budget_s', 0):g}",
                     msg[:180] + ("…" if len(msg) > 180 else "")])
    c = bad["shown"].value_counts().sort_index()
    return [", ".join(f"{k}: {v}" for k, v in c.items()) + ".", "",
            "`refused`: the solver declined the instance by design (brute force above its "
            "plan-space cap); `skipped`: not started (excluded by the experiment, or the "
            "solver is unavailable).", "",
            table(["status", "experiment", "solver", "instance", "seed", "budget (s)",
                   "message"], body)]


def write_report(results: str | Path, out: str | Path | None = None, *, figures: bool = True
                 ) -> Path:
    """Write ``report.md`` (and ``figures/*.png``) for a results file; returns the report path."""
    rows, manifest, path = load_results(results)
    out_dir = Path(out) if out is not None else path.parent / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(rows, manifest, path, out_dir, figures)
    order = list(dict.fromkeys([*manifest.get("order", []), *(r["experiment"] for r in rows)]))
    order = [e for e in order if any(r["experiment"] == e for r in rows)]
    profiles = sorted({str(r.get("profile")) for r in rows})
    versions = sorted({f"{r.get('version')} @ {str(r.get('git_commit'))[:12]}"
                       + (" (dirty)" if str(r.get("git_commit")).endswith("-dirty") else "")
                       for r in rows})
    starts = [r["started_at"] for r in rows if r.get("started_at")]
    ends = [r["finished_at"] for r in rows if r.get("finished_at")]
    head = [
        "# geoplan benchmark report", "",
        f"Results: `{path}` — {len(rows)} runs, profile {', '.join(profiles)}; "
        f"generated {datetime.now(UTC).isoformat(timespec='seconds')}.",
        f"Package: {'; '.join(versions)}. Hosts: "
        f"{', '.join(sorted({str(r.get('host')) for r in rows}))}.",
        f"Runs: {_counts(rows)}."
        + (f" First run started {min(starts)}, last finished {max(ends)}."
           if starts and ends else ""),
        "", f"> {CAVEAT}", "",
        "Statuses: `optimal` proven by the solver; `feasible` a plan without proof (a gap is "
        "shown only when the solver proved a bound); `no_solution` no plan within the budget; "
        "`timeout` killed at budget + grace; `crashed`/`error` the run failed; `refused` the "
        "solver declined the instance by design (brute force above its plan-space cap); "
        "`skipped` not started (solver unavailable or excluded by the experiment). All "
        "objectives are "
        "priced by the shared evaluator (ms at λ = 1).", "",
        "## Contents", "",
    ]
    sections: list[str] = []
    for name in order:
        er = [r for r in rows if r["experiment"] == name]
        info = experiment_info(name, manifest, str(er[0].get("profile", "full")))
        title = info.get("title") or name
        kind = (info.get("report") or {}).get("kind", "generic")
        head.append(f"- [{title}](#{anchor(title)})")
        sec = [f"## {title}", ""]
        if info.get("description"):
            sec += [" ".join(str(info["description"]).split()), ""]
        sec += [f"Profile `{er[0].get('profile')}`: seeds {info.get('seeds')}, budgets "
                f"{info.get('budgets')} s, grace {info.get('grace')} s, {len(er)} runs ("
                + _counts(er) + ").", ""]
        try:
            sec += RENDERERS.get(kind, generic)(ctx, er, info)
        except Exception as exc:  # keep the rest of the report
            ctx.notes.append(f"section {name} ({kind}) failed: {type(exc).__name__}: {exc}; "
                             "shown as a generic table")
            sec += generic(ctx, er, info)
        sections += [*sec, ""]
    head += [f"- [{_FAILURES}](#{anchor(_FAILURES)})", ""]
    tail = [f"## {_FAILURES}", "", *_failures(rows), ""]
    if ctx.notes:
        tail += ["## Report notes", "", *(f"- {n}" for n in ctx.notes), ""]
    tail += ["## Reproduce", "",
             "The commands that made these results (each experiment from the file and "
             "profile it was run with, as recorded in the manifest), then this report:", "",
             "```",
             *reproduce_commands(rows, manifest, path, out_dir, order),
             "```", ""]
    report = out_dir / "report.md"
    report.write_text("\n".join([*head, *sections, *tail]))
    return report
