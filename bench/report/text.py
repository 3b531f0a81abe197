"""Statements of the report computed from the results, never typed.

Each function takes the result rows (or their :func:`~bench.report.tables.frame`)
and returns the numbers a sentence quotes together with the sentence, so that a
claim such as "the portfolio matched the best exact method" says in how many
cells it holds and where it fails, and the reproduce commands are the ones that
made the stored runs.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.report.tables import fmt, frame, gap_pct, secs, several_seeds

__all__ = [
    "EXACT_SOLVERS",
    "NOISE_REL",
    "NOISE_S",
    "REL_TOL",
    "PortfolioComparison",
    "WarmStartComparison",
    "portfolio_vs_components",
    "portfolio_vs_exact",
    "proofs_summary",
    "reproduce_commands",
    "warm_vs_cold",
]

#: Solvers that prove optimality (their plans are "exact methods" in the report's claims).
EXACT_SOLVERS = ("bruteforce", "bnb", "milp", "cpsat")
#: Relative tolerance under which two objectives count as equal (as the report's "match").
REL_TOL = 1e-6

Row = dict[str, Any]


def _plans(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["ok"]]


@dataclass(frozen=True)
class PortfolioComparison:
    """The portfolio against the best exact method, per instance-by-budget cell.

    ``cells`` counts the cells in which some exact method found a plan; ``held`` those
    where the portfolio's plan is at most the best exact plan (within :data:`REL_TOL`),
    ``better`` those where it is strictly better. ``failed`` lists the others, worst
    first: instance, budget_s, portfolio (None: no plan), exact (objective), by (label).
    """

    cells: int
    held: int
    better: int
    exact_labels: tuple[str, ...]
    failed: list[dict[str, Any]] = field(default_factory=list)

    def sentence(self) -> str:
        """One sentence with the counts and up to three examples."""
        methods = ", ".join(self.exact_labels)
        if not self.cells:
            return "No exact method found a plan: nothing to compare the portfolio with."
        text = (f"The portfolio's plan was at least as good as the best exact method's "
                f"({methods}; equal within a relative {REL_TOL:g}) in {self.held} of "
                f"{self.cells} instance-by-budget cells (strictly better in {self.better})")
        if not self.failed:
            return text + "."
        examples = "; ".join(_failed_cell(f) for f in self.failed[:3])
        return text + f", and worse in {len(self.failed)}, for example {examples}."


def _failed_cell(f: Mapping[str, Any]) -> str:
    mine = "no plan" if f["portfolio"] is None else fmt(f["portfolio"])
    return f"{f['instance']} at {f['budget_s']:g} s: {mine} vs {f['by']} {fmt(f['exact'])}"


def portfolio_vs_exact(rows: Sequence[Row], portfolio: str = "portfolio",
                       label: str | None = None) -> PortfolioComparison | None:
    """Compare the portfolio with the best exact solver in every (instance, budget) cell.

    ``label``: only the portfolio's rows with that label (a sweep may run it twice, on
    one thread and on two). None when the rows hold no portfolio run or no exact run.
    """
    df = frame(rows)
    exact = df[df["solver"].isin(EXACT_SOLVERS)]
    mine = df[(df["solver"] == portfolio) & ((df["label"] == label) if label is not None
                                             else True)]
    if exact.empty or mine.empty:
        return None
    labels = tuple(dict.fromkeys(exact["label"]))
    ex = _plans(exact).sort_values("objective").groupby(["instance", "budget_s"], sort=False)
    ex_best = ex.first()[["objective", "label"]].rename(columns={"objective": "exact",
                                                                  "label": "by"})
    po = _plans(mine).groupby(["instance", "budget_s"])["objective"].min().rename("portfolio")
    cells = ex_best.join(po, how="left")
    cells = cells.reindex([k for k in dict.fromkeys(zip(df["instance"], df["budget_s"],
                                                        strict=True)) if k in cells.index])
    worse = cells["portfolio"].isna() | (cells["portfolio"] > cells["exact"] * (1 + REL_TOL))
    better = cells["portfolio"] < cells["exact"] * (1 - REL_TOL)
    # From the selected rows only: assigning a full-length column to an empty frame
    # would give it every row back (pandas takes the column's index).
    sub = cells[worse]
    failed = sub.assign(excess=(sub["portfolio"] - sub["exact"]) / sub["exact"])
    failed = failed.sort_values("excess", ascending=False, na_position="first")
    out = [{"instance": i, "budget_s": float(b), "exact": float(r["exact"]), "by": r["by"],
            "portfolio": None if pd.isna(r["portfolio"]) else float(r["portfolio"])}
           for (i, b), r in failed.iterrows()]
    return PortfolioComparison(len(cells), int((~worse).sum()), int(better.sum()), labels, out)


#: Timing noise under which a warm-started proof counts as "no later" than the cold one:
#: this many seconds or this share of the cold time, whichever is larger (runs on a
#: shared 2-core machine; a run that did the cold run's work exactly differs by this).
NOISE_S = 0.1
NOISE_REL = 0.1


def portfolio_vs_components(rows: Sequence[Row], exact: str = "milp",
                            portfolio: str = "portfolio", heuristic: str = "memetic",
                            label: str | None = None) -> dict[str, Any]:
    """The portfolio against its two components run alone, cell by (instance, budget) cell.

    ``plan_cells``/``plan_held``: cells where ``heuristic`` alone has a plan, and those
    where the portfolio's plan is at least as good (:data:`REL_TOL`), ``plan_failed`` the
    others; ``bound_cells``/``bound_held``/``bound_failed``: the same for the proven bound
    against ``exact`` alone (a missing portfolio bound counts as worse). ``label``: only
    the portfolio's rows with that label.
    """
    cells: dict[tuple[str, float], dict[str, Row]] = {}
    for r in rows:
        if r["solver"] == portfolio and label is not None and r.get("label") != label:
            continue
        cells.setdefault((r["instance"], float(r["budget_s"])), {})[r["solver"]] = r
    out: dict[str, Any] = {"plan_cells": 0, "plan_held": 0, "plan_failed": [],
                           "bound_cells": 0, "bound_held": 0, "bound_failed": []}
    for (inst, budget), c in cells.items():
        mine = c.get(portfolio)
        if mine is None:
            continue
        mo = mine.get("objective") if mine.get("status") in ("optimal", "feasible") else None
        alone = c.get(heuristic)
        if alone is not None and alone.get("status") in ("optimal", "feasible"):
            out["plan_cells"] += 1
            if mo is not None and mo <= alone["objective"] * (1 + REL_TOL):
                out["plan_held"] += 1
            else:
                out["plan_failed"].append({"instance": inst, "budget_s": budget,
                                           "portfolio": mo, "alone": alone["objective"]})
        ex = c.get(exact)
        if ex is not None and ex.get("lower_bound") is not None:
            out["bound_cells"] += 1
            lb = mine.get("lower_bound")
            if lb is not None and lb >= ex["lower_bound"] * (1 - REL_TOL):
                out["bound_held"] += 1
            else:
                out["bound_failed"].append({"instance": inst, "budget_s": budget,
                                            "portfolio": lb, "alone": ex["lower_bound"]})
    return out


@dataclass(frozen=True)
class WarmStartComparison:
    """Proof times of the same solver cold and warm-started, where both proved optimality.

    ``no_later``: pairs whose warm proof took at most the cold time plus the noise
    (:data:`NOISE_S`, :data:`NOISE_REL`); ``by_solver``: (no later, pairs) per solver;
    ``warm_runs`` and ``ma_ran``: warm-started runs from a solver, and those in which the
    warm-start solver ran (a deferred one is skipped when the model proves without it).
    """

    pairs: int
    faster: int
    slower: int
    ratios: list[float]
    no_later: int = 0
    by_solver: dict[str, tuple[int, int]] = field(default_factory=dict)
    warm_runs: int = 0
    ma_ran: int = 0

    def sentence(self) -> str:
        if not self.pairs:
            return "No solver proved optimality both cold and warm-started."
        lo, hi = min(self.ratios), max(self.ratios)
        per = ", ".join(f"{s} {k} of {n}" for s, (k, n) in self.by_solver.items())
        return (f"Of the {self.pairs} instance-and-solver pairs proven optimal both cold and "
                f"warm-started, the warm-started proof came no later than the cold one in "
                f"{self.no_later} ({per}; within {NOISE_S:g} s or {100 * NOISE_REL:g} % of "
                f"the cold time, the timing noise of a shared machine); strictly, it took less "
                f"wall time in {self.faster} and more in {self.slower} (warm / cold time "
                f"{lo:.2f}-{hi:.2f}; the warm start's run is counted). The warm-start solver "
                f"ran in {self.ma_ran} of the {self.warm_runs} warm-started runs (the others "
                "proved optimality before they asked for it).")


def warm_vs_cold(rows: Sequence[Row]) -> WarmStartComparison:
    """Pair each warm-started run with the same solver's cold run on the same instance."""
    df = frame(rows)
    df["warm"] = [bool(r.get("warm_start")) for r in df["row"]]
    opt = df[df["status"] == "optimal"]
    cold = opt[~opt["warm"]].groupby(["instance", "solver"])["wall_s"].min().rename("cold")
    warm = opt[opt["warm"]].groupby(["instance", "solver"])["wall_s"].min().rename("warm")
    both = pd.concat([cold, warm], axis=1, join="inner")
    ratios = [float(w / c) for c, w in zip(both["cold"], both["warm"], strict=True) if c]
    noise = [max(NOISE_S, NOISE_REL * c) for c in both["cold"]]
    ok = [w <= c + e for c, w, e in zip(both["cold"], both["warm"], noise, strict=True)]
    by_solver: dict[str, tuple[int, int]] = {}
    for (_, solver), hit in zip(both.index, ok, strict=True):
        k, n = by_solver.get(solver, (0, 0))
        by_solver[solver] = (k + int(hit), n + 1)
    from_solver = [r for r in df[df["warm"]]["row"] if isinstance(r.get("warm_start"), str)]
    ran = [((r.get("info") or {}).get("warm_start") or {}).get("ran", True) for r in from_solver]
    return WarmStartComparison(len(both), int((both["warm"] < both["cold"]).sum()),
                               int((both["warm"] > both["cold"]).sum()), ratios,
                               no_later=sum(ok), by_solver=by_solver,
                               warm_runs=len(from_solver), ma_ran=sum(bool(x) for x in ran))


def proofs_summary(pf: pd.DataFrame, labels: Sequence[str], last: float) -> list[str]:
    """One line per size (N, L) of a proofs frame (:func:`bench.report.sections.proofs_frame`):
    per solver, how many runs it proved optimal and its slowest proof, and among the others
    the largest certified gap at ``last`` seconds (the budget), and the runs without a bound
    or without a plan."""
    col = f"gap@{last:g}"
    out = []
    for (n, layers), g in pf.groupby(["n", "layers"], sort=False):
        parts = []
        for lab in labels:
            lr = g[g["label"] == lab]
            if lr.empty:
                continue
            proven = lr[lr["status"] == "optimal"]
            text = f"{lab} proved {len(proven)} of {len(lr)}"
            if len(proven):
                text += f" (slowest proof {secs(float(proven['proof_s'].max()))} s)"
            rest = lr[lr["status"] != "optimal"]
            gaps = rest[col].dropna()
            if len(gaps):
                worst = rest.loc[gaps.idxmax()]
                seed = f", instance seed {int(worst['iseed'])}" if several_seeds(pf) else ""
                text += (f", largest gap at {last:g} s {gap_pct(float(gaps.max()))} % "
                         f"({worst['family']}, λ = {worst['lam']:g}{seed})")
            no_plan = int((~rest["ok"]).sum())
            no_bound = int((rest["ok"] & rest[col].isna()).sum())
            if no_bound:
                text += f", {no_bound} with a plan but no bound"
            if no_plan:
                text += f", {no_plan} without a plan"
            parts.append(text)
        out.append(f"- N = {int(n)}, L = {int(layers)}: " + "; ".join(parts) + ".")
    return out


def _builtin_source(source: str | None, name: str) -> bool:
    from bench.experiments import EXPERIMENT_DIR

    if not source:
        return True
    path = Path(source)
    if path.name == f"{name}.toml" and path.parent.name == EXPERIMENT_DIR.name:
        return True  # the shipped file, wherever the checkout was
    return path.resolve() == (EXPERIMENT_DIR / f"{name}.toml").resolve()


def reproduce_commands(rows: Sequence[Row], manifest: Mapping[str, Any], results: Path,
                       report_dir: Path, order: Sequence[str]) -> list[str]:
    """The commands that made the stored runs, then the report command.

    Experiments from shipped files are named (one command per profile); an experiment
    run from another file (the manifest records its ``source``) is run from that file.
    """
    exps = manifest.get("experiments", {})
    groups: dict[tuple[str, str], list[str]] = {}
    for name in order:
        info = exps.get(name, {})
        profile = str(info.get("profile") or next(
            (r.get("profile") for r in rows if r["experiment"] == name), "full"))
        source = info.get("source")
        target = name if _builtin_source(source, name) else str(source)
        groups.setdefault((profile, "file" if target != name else "name"), []).append(target)
    out_dir = shlex.quote(str(results.parent))
    lines = []
    for (profile, _), targets in groups.items():
        prof = "" if profile == "full" else f" --profile {profile}"
        lines.append(f"geoplan bench run {' '.join(shlex.quote(t) for t in targets)}{prof} "
                     f"--out {out_dir} --resume")
    lines.append(f"geoplan bench report {shlex.quote(str(results))} --out "
                 f"{shlex.quote(str(report_dir))}")
    return lines
