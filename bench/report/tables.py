"""Tables of the report: result rows as a pandas frame, group-bys, statistics, Markdown cells.

Every section works from :func:`frame` (one row a run, the result row itself in
column ``row``) and groups it with pandas. The helpers here format one cell:
an objective with what is known about it, a status summary for a cell without a
value, a Markdown table.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from bench.experiments.paper import PAPER

__all__ = [
    "DASH",
    "OK",
    "PROOF_CHECKPOINTS_S",
    "best",
    "certified_gap",
    "ci95",
    "display_status",
    "fmt",
    "frame",
    "gap_pct",
    "group",
    "is_ok",
    "is_refusal",
    "knee_index",
    "pct",
    "quality",
    "secs",
    "several_seeds",
    "status_summary",
    "table",
    "trace_at",
]

Row = dict[str, Any]
OK = ("optimal", "feasible")
#: Two-sided 97.5% Student t quantiles by degrees of freedom (1..30); 1.96 beyond.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
DASH = "—"


# --------------------------------------------------------------------------- statistics


def ci95(values: Sequence[float]) -> float:
    """Half-width of the 95% confidence interval of the mean (Student t); 0 for n < 2."""
    n = len(values)
    if n < 2:
        return 0.0
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return t * statistics.stdev(values) / math.sqrt(n)


def knee_index(points: Sequence[tuple[float, float]]) -> int | None:
    """Index of the knee: the point farthest from the line joining the two extreme points.

    Extremes are the point of least x (time) and the point of least y (energy);
    None when there are fewer than three distinct points or the extremes coincide.
    """
    if len({(round(x, 9), round(y, 9)) for x, y in points}) < 3:
        return None
    a = min(range(len(points)), key=lambda k: (points[k][0], points[k][1]))
    b = min(range(len(points)), key=lambda k: (points[k][1], points[k][0]))
    (x1, y1), (x2, y2) = points[a], points[b]
    norm = math.hypot(x2 - x1, y2 - y1)
    if norm == 0:
        return None
    dist = [abs((x2 - x1) * (y1 - y) - (x1 - x) * (y2 - y1)) / norm for x, y in points]
    k = max(range(len(points)), key=lambda i: dist[i])
    return None if dist[k] <= 1e-12 else k




def _cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |",
             "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fmt(x: float | None, digits: int = 1) -> str:
    return DASH if x is None else f"{x:.{digits}f}"


def pct(x: float | None, digits: int = 1, sign: bool = True) -> str:
    if x is None:
        return DASH
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def secs(x: float | None) -> str:
    """Seconds: two decimals below 10 s, one above."""
    return DASH if x is None else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def gap_pct(g: float) -> str:
    """A certified gap (a fraction) in percent, two decimals; "<0.01" for a gap above 0
    that two decimals would show as none."""
    return "<0.01" if 0.0 < 100.0 * g < 0.005 else f"{100.0 * g:.2f}"


def several_seeds(pf: pd.DataFrame) -> bool:
    """Whether a proofs frame (``iseed`` column) holds more than one instance seed."""
    return bool(pf["iseed"].nunique() > 1)


def si(n: float) -> str:
    """24, 5.4K, 637K, 43.8M, 40.9B (the paper's style)."""
    for div, suf in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            v = n / div
            return f"{v:.3g}{suf}" if v < 1000 else f"{n:.3g}"
    return f"{int(n)}"


def anchor(text: str) -> str:
    keep = [c.lower() if c.isalnum() else "-" if c in " -" else "" for c in text]
    return "".join(keep).strip("-")


def is_ok(r: Row) -> bool:
    """The run ended with a priced plan."""
    return r.get("status") in OK and r.get("objective") is not None


def status_summary(rows: Sequence[Row]) -> str:
    """'skipped' / 'timeout 2/3, crashed 1/3': why a cell has no value."""
    if not rows:
        return DASH
    c = Counter(display_status(r) for r in rows)
    if len(c) == 1:
        s = next(iter(c))
        return s if len(rows) == 1 else f"{s} ({len(rows)})"
    return ", ".join(f"{s} {k}/{len(rows)}" for s, k in c.most_common())


def quality(r: Row) -> str:
    """One run's objective with what is known about it: opt / certified gap / no bound."""
    if not is_ok(r):
        return display_status(r)
    v = f"{r['objective']:.1f}"
    if r["status"] == "optimal":
        return f"{v} (opt)"
    if r.get("gap") is not None:
        return f"{v} (gap {100 * r['gap']:.2f}%)"
    return f"{v} (no bound)"


def best(rows: Sequence[Row]) -> Row | None:
    """The run with the least objective among those with a plan."""
    ok = [r for r in rows if is_ok(r)]
    return min(ok, key=lambda r: r["objective"]) if ok else None


def spec(r: Row, key: str, default: Any = None) -> Any:
    """A field of the run's instance generator spec."""
    return (r.get("instance_spec") or {}).get(key, default)



def instance_order(rows: Sequence[Row], info: Mapping[str, Any]) -> list[str]:
    names = [i["name"] for i in info.get("instances", [])]
    seen = list(dict.fromkeys(r["instance"] for r in rows))
    return [n for n in names if n in seen] + [n for n in seen if n not in names]


def paper_block(key: str | None) -> str:
    if not key or key not in PAPER or "rows" not in PAPER[key]:
        return ""
    p = PAPER[key]
    cols = list(p["columns"])
    body = [[DASH if v is None else v for v in row] for row in p["rows"]]
    out = [f"**Paper (quoted as published): {p['title']}**", "", table(cols, body)]
    if p.get("note"):
        out += ["", f"_{p['note']}_"]
    return "\n".join(out)



# --------------------------------------------------------------------------- traces

#: Times (s) at which the proofs report reads a run's certified gap from its trace (those
#: below the run's budget, then the budget itself).
PROOF_CHECKPOINTS_S = (30.0, 120.0, 300.0)
#: A bound above the incumbent by less than this (relative) is the solvers' tolerance: gap 0.
_GAP_TOL = 1e-6


def trace_at(trace: Iterable[Sequence[float | None]] | None, t: float | None
             ) -> tuple[float | None, float | None]:
    """The best incumbent (least) and best bound (largest) among the trace rows
    ``[seconds, incumbent, bound]`` at or before ``t`` seconds (every row when ``t`` is None)."""
    inc: float | None = None
    bound: float | None = None
    for row in trace or ():
        if t is not None and float(row[0] or 0.0) > t:
            continue  # traces are time-ordered, but do not rely on it
        if row[1] is not None:
            inc = float(row[1]) if inc is None else min(inc, float(row[1]))
        if len(row) > 2 and row[2] is not None:
            bound = float(row[2]) if bound is None else max(bound, float(row[2]))
    return inc, bound


def certified_gap(incumbent: float | None, bound: float | None) -> float | None:
    """(incumbent - bound) / incumbent; None without both or for a non-positive incumbent.

    A bound above the incumbent within the solvers' tolerance counts as 0; beyond it the
    negative gap is returned, so that an invalid bound shows instead of being hidden."""
    if incumbent is None or bound is None or incumbent <= 0:
        return None
    g = (incumbent - bound) / incumbent
    return 0.0 if -_GAP_TOL < g < 0 else g


# --------------------------------------------------------------------------- statuses

#: A solver's deliberate refusal of an instance, e.g. "bruteforce refuses: the plan space ...".
_REFUSAL = re.compile(r"^[\w-]+ refuses\b")


def is_refusal(r: Mapping[str, Any]) -> bool:
    """True for a run the solver declined by design (brute force above its size cap)."""
    return r.get("status") == "error" and bool(_REFUSAL.match(str(r.get("message") or "")))


def display_status(r: Mapping[str, Any]) -> str:
    """The status the report shows: ``refused`` for a deliberate refusal, else the row's."""
    return "refused" if is_refusal(r) else str(r.get("status"))


# --------------------------------------------------------------------------- the frame

_COLUMNS = ("experiment", "label", "solver", "instance", "seed", "budget_s", "status",
            "objective", "lower_bound", "gap", "wall_s", "elapsed_s", "n", "layers")


def frame(rows: Sequence[Row]) -> pd.DataFrame:
    """One line a run: the main fields, ``ok`` (a priced plan), ``shown`` (display status),
    ``generator`` and ``tag`` of the instance, and the result row itself in ``row``."""
    df = pd.DataFrame({c: [r.get(c) for r in rows] for c in _COLUMNS})
    df["ok"] = [is_ok(r) for r in rows]
    df["shown"] = [display_status(r) for r in rows]
    df["generator"] = [spec(r, "generator", "?") for r in rows]
    df["tag"] = [r.get("instance_tag") for r in rows]
    df["row"] = list(rows)
    return df


def group(rows: Iterable[Row], *keys: str) -> dict[tuple[Any, ...], list[Row]]:
    """Rows grouped by ``keys`` in order of first appearance (a pandas group-by)."""
    rows = list(rows)
    if not rows:
        return {}
    df = pd.DataFrame({k: [r.get(k) for r in rows] for k in keys})
    df["row"] = rows
    grouped = df.groupby(list(keys), sort=False, dropna=False)["row"]
    return {(k if isinstance(k, tuple) else (k,)): list(v) for k, v in grouped}
