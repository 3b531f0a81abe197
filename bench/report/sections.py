"""The report's sections, one renderer per experiment kind (``[report] kind`` in its file).

A renderer takes the report context, the experiment's result rows and its settings,
and returns Markdown lines: tables grouped with pandas (:mod:`bench.report.tables`),
figures (:mod:`bench.report.figures`) and computed statements (:mod:`bench.report.text`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bench.experiments.paper import PAPER
from bench.report.data import Ctx
from bench.report.hybrid import hybrid_section
from bench.report.tables import (
    DASH,
    PROOF_CHECKPOINTS_S,
    best,
    certified_gap,
    ci95,
    fmt,
    frame,
    gap_pct,
    group,
    instance_order,
    is_ok,
    knee_index,
    paper_block,
    pct,
    quality,
    secs,
    several_seeds,
    si,
    spec,
    status_summary,
    table,
    trace_at,
)
from bench.report.text import portfolio_vs_exact, proofs_summary, warm_vs_cold

__all__ = ["RENDERERS", "Frontier", "frontier", "generic", "proof_checkpoints", "proofs_frame",
           "proofs_table", "types", "versus_frame"]

Row = dict[str, Any]


def versus_frame(rows: Sequence[Row], ours: str, base: str) -> pd.DataFrame:
    """Per instance (in order of appearance): the baseline's mean, our best, mean, 95% CI
    and count of runs with a plan, and gain % = (baseline mean - our best) / baseline mean."""
    df = frame(rows)
    plans = df[df["ok"] & df["label"].isin([ours, base])]
    agg = plans.groupby(["instance", "label"])["objective"].agg(
        mean="mean", least="min", count="count", ci=lambda s: ci95(list(s))).unstack("label")
    out = df.groupby("instance", sort=False)[["n", "layers"]].first()
    out["runs"] = df[df["label"] == ours].groupby("instance").size()
    for col, (stat, lab) in {"base_mean": ("mean", base), "best": ("least", ours),
                             "mean": ("mean", ours), "ci": ("ci", ours),
                             "ok": ("count", ours)}.items():
        out[col] = agg[(stat, lab)] if (stat, lab) in agg.columns else float("nan")
    out["gain"] = 100 * (out["base_mean"] - out["best"]) / out["base_mean"]
    return out.astype({"ok": "float"}).fillna({"ok": 0, "runs": 0})


def _num(x: Any) -> float | None:
    return None if x is None or pd.isna(x) else float(x)


def _versus(ctx: Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    rep = info.get("report", {})
    ours, base = rep.get("ours", "MA"), rep.get("baseline", "impr. Metis")
    paper = PAPER.get(info.get("paper") or "", {})
    pmap = {(r[0], r[1]): r for r in paper.get("rows", [])}
    vs = versus_frame(rows, ours, base)
    cells = group(rows, "instance", "label")
    body = []
    for name in instance_order(rows, info):
        v = vs.loc[name]
        pr = pmap.get((int(v["n"]), int(v["layers"])))
        body.append([
            int(v["n"]), int(v["layers"]),
            fmt(pr[2]) if pr else DASH, fmt(pr[3]) if pr else DASH,
            pct(pr[6]) if pr else DASH,
            fmt(_num(v["base_mean"])) if _num(v["base_mean"]) is not None
            else status_summary(cells.get((name, base), [])),
            fmt(_num(v["best"])) if v["ok"] else status_summary(cells.get((name, ours), [])),
            fmt(_num(v["mean"])), f"±{v['ci']:.1f}" if v["ok"] else DASH,
            pct(_num(v["gain"])),
            f"{int(v['ok'])}/{int(v['runs'])}",
        ])
    header = ["GPUs", "L", "paper: impr. Metis (ms)", "paper: GeoTrain best (ms)",
              "paper: gain %", f"ours: {base} (ms)", f"ours: {ours} best (ms)",
              f"{ours} mean (ms)", "95% CI", "gain %", f"{ours} runs ok"]
    out = [table(header, body), "",
           f"Gain % = (T_{base} - T_{ours} best) / T_{base}, {base} averaged over its seeds; "
           "positive favours the MA. The 95% CI is the Student-t half-width over the MA's "
           "seeds. Paper columns are blank where the paper has no such row."]
    if paper.get("note"):
        out.append(f"Paper: {paper['note']}")
    return out


def _exact(ctx: Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    from geoplan.model.space import plan_space_size

    rep = info.get("report", {})
    heur = rep.get("heuristic", "MA")
    exact = list(rep.get("exact") or [s["label"] for s in info.get("solvers", [])
                                      if s["label"] != heur])
    opt_rows = []
    tract_rows = []
    by_inst = group(rows, "instance")
    for name in instance_order(rows, info):
        ir = by_inst[(name,)]
        by_label = group(ir, "label")
        n, layers = ir[0]["n"], ir[0]["layers"]
        proven = [r for r in ir if r["status"] == "optimal" and r.get("objective") is not None]
        ok = [r for r in ir if is_ok(r)]
        if proven:
            t_star = min(r["objective"] for r in proven)
            by = ", ".join(sorted({r["label"] for r in proven}))
            star = f"{t_star:.3f}"
        elif ok:
            t_star = min(r["objective"] for r in ok)
            bounds = [r["lower_bound"] for r in ir if r.get("lower_bound") is not None]
            by = "best known, unproven" + (
                f" (gap {100 * (t_star - max(bounds)) / t_star:.2f}% to best bound)"
                if bounds else ", no bound")
            star = f"{t_star:.3f}"
        else:
            t_star, by, star = None, "no plan", DASH
        mine = by_label.get((heur,), [])
        vals = [r["objective"] for r in mine if is_ok(r)]
        match = sum(1 for v in vals if t_star is not None and abs(v - t_star) <= 1e-6 * t_star)
        optimality = (100 * t_star / statistics.fmean(vals)) if vals and t_star else None
        opt_rows.append([
            n, layers, star, by,
            fmt(min(vals), 3) if vals else status_summary(mine),
            fmt(statistics.fmean(vals), 3) if vals else DASH,
            (pct(optimality, 2, sign=False) + ("%" if proven else "% of best known"))
            if optimality is not None else DASH,
            f"{match}/{len(mine)}" if mine else DASH,
        ])
        cells: list[Any] = [n, layers, si(plan_space_size(n, layers))]
        for lab in exact:
            er = by_label.get((lab,), [])
            b = best(er)
            if b is not None:
                cells += [quality(b), f"{b.get('wall_s', 0):.1f} s"]
            else:
                t = max((r.get("elapsed_s") or 0 for r in er), default=0)
                cells += [status_summary(er), f"{t:.1f} s" if er and t else DASH]
        walls = [r.get("wall_s") or 0 for r in mine if is_ok(r)]
        cells += [fmt(min(vals)) if vals else status_summary(mine),
                  f"{statistics.fmean(walls):.1f} s" if walls else DASH]
        tract_rows.append(cells)
    out = ["**Ours, cf. Table 5 (optimality)**", "",
           table(["N", "L", "T* (ms)", "T* proven by", f"{heur} best (ms)", f"{heur} mean (ms)",
                   "optimality", "match"], opt_rows), "",
           "T* is the least objective any solver proved optimal; where none did, it is the best "
           "known value and says so. Optimality = T* / mean of the MA's seeds; match counts "
           "seeds within 1e-6 (relative) of T*.", "",
           paper_block(rep.get("paper_optimality")), "",
           "**Ours, cf. Table 6 (tractability)**", ""]
    hdr = ["N", "L", "space f(N,L)"]
    for lab in exact:
        hdr += [f"{lab} iter. (ms)", f"{lab} plan."]
    hdr += [f"{heur} best (ms)", f"{heur} plan. (mean)"]
    out += [table(hdr, tract_rows), "",
            "(opt): proven optimal; (gap x%): certified by the solver's own bound; (no bound): "
            "a plan without proof. A status instead of a value means no plan: timeout (killed "
            "at budget + grace), no_solution (budget ran out without a plan), skipped (not "
            "started, see the list of runs at the end).", ""]
    out.append(paper_block(info.get("paper")))
    return out


def _sites(ctx: Ctx, r: Row | None) -> str:
    if r is None or not r.get("plan"):
        return DASH
    inst = ctx.instance(r)
    if inst is None:
        return "?"
    site = {g.id: g.site or "?" for g in inst.gpus}
    used = list(dict.fromkeys(site.get(s["gpu"], "?") for s in r["plan"]["stages"]))
    return "+".join(sorted(used)) + f" ({len(r['plan']['stages'])} GPUs)"


def _network(ctx: Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    rep = info.get("report", {})
    ours, base = rep.get("ours", "MA"), rep.get("baseline", "impr. Metis")
    sweeps: Mapping[str, str] = rep.get("sweeps") or {}
    paper = PAPER.get(info.get("paper") or "network", {})
    out: list[str] = []
    series: dict[str, tuple[str, dict[str, list[tuple[float, float]]]]] = {}
    best_gain: tuple[float, str] | None = None
    for tag, xkey in sweeps.items():
        tr = [r for r in rows if r.get("instance_tag") == tag]
        if not tr:
            continue
        pts: dict[str, list[tuple[float, float]]] = {base: [], ours: []}
        published = dict(paper.get(tag, {}).get("points", []))
        body = []
        for x, xr in sorted(group(tr, "instance").items(), key=lambda kv: spec(kv[1][0], xkey)):
            xv = spec(xr[0], xkey)
            mine = [r for r in xr if r["label"] == ours]
            theirs = [r for r in xr if r["label"] == base]
            mv = [r["objective"] for r in mine if is_ok(r)]
            bv = [r["objective"] for r in theirs if is_ok(r)]
            mm = statistics.fmean(mv) if mv else None
            bm = statistics.fmean(bv) if bv else None
            gain = 100 * (bm - mm) / bm if mm is not None and bm else None
            if mm is not None:
                pts[ours].append((xv, mm))
            if bm is not None:
                pts[base].append((xv, bm))
            if gain is not None and (best_gain is None or gain > best_gain[0]):
                best_gain = (gain, x[0])
            body.append([f"{xv:g}", fmt(bm) if bv else status_summary(theirs),
                         fmt(mm) if mv else status_summary(mine), fmt(min(mv) if mv else None),
                         pct(gain), _sites(ctx, best(theirs)), _sites(ctx, best(mine)),
                         published.get(xv, DASH), f"{len(mv)}/{len(mine)}"])
        out += [f"**{tag.capitalize()} sweep** ({xkey})", "",
                table([xkey, f"{base} mean (ms)", f"{ours} mean (ms)", f"{ours} best (ms)",
                        "gain % (means)", f"{base} sites", f"{ours} sites",
                        "paper: gain %", f"{ours} runs ok"], body), ""]
        if paper.get(tag, {}).get("text"):
            out += [f"Paper: {paper[tag]['text']}", ""]
        series[tag] = (xkey, pts)
    if paper.get("note"):
        out.append(f"_Paper setting: {paper['note']}_")
    if series:
        from bench.report.figures import plot_network

        md = ctx.figure(plot_network, "network.png", series)
        if md:
            out += ["", md]
    if best_gain is not None:
        inst_rows = [r for r in rows if r["instance"] == best_gain[1]]
        m, b = best([r for r in inst_rows if r["label"] == ours]), best(
            [r for r in inst_rows if r["label"] == base])
        panels = [(f"{lab} ({best_gain[1]})", r) for lab, r in ((base, b), (ours, m)) if r]
        md = _pipeline(ctx, panels, "pipeline_network.png")
        if md:
            out += ["", f"Plans at the largest gain ({best_gain[0]:+.1f}%, {best_gain[1]}), "
                    "cf. the paper's Fig. 9:", "", md]
    return out


def _pipeline(ctx: Ctx, panels: Sequence[tuple[str, Row]], name: str) -> str:
    from bench.report.figures import plot_pipeline
    from geoplan.model.plan import Plan

    if not panels:
        return ""
    inst = ctx.instance(panels[0][1])
    if inst is None:
        return ""
    plans = [(t, Plan.from_dict(r["plan"])) for t, r in panels]
    return ctx.figure(plot_pipeline, name, inst, plans)


def types(ctx: Ctx, r: Row) -> str:
    """The GPU types of a run's plan: '5x A100-PCIe-40GB, 2x A30'."""
    inst = ctx.instance(r)
    if inst is None or not r.get("plan"):
        return DASH
    kinds = {g.id: g.type or g.id for g in inst.gpus}
    c = Counter(kinds.get(s["gpu"], "?") for s in r["plan"]["stages"])
    return ", ".join(f"{k}x {t}" for t, k in sorted(c.items()))


@dataclass(frozen=True)
class Frontier:
    """The energy-time frontier of one solver: its best run per lambda, and the knee."""

    per: list[tuple[float, Row | None, list[Row]]]
    ref: Row | None
    t_ref: float | None
    e_ref: float | None
    norm_by: str | None
    t1: float | None
    e1: float | None
    knee: int | None
    knee_lam: float | None

    @property
    def plans(self) -> list[tuple[float, Row]]:
        """(lambda, best run) for every lambda with a plan, by lambda."""
        return [(lam, b) for lam, b, _ in self.per if b is not None]


def frontier(rows: Sequence[Row], ours: str) -> Frontier:
    """Best run of ``ours`` per instance (one a lambda), normalisers, knee (normalised axes)."""
    mine = [r for r in rows if r["label"] == ours]
    per: list[tuple[float, Row | None, list[Row]]] = []
    for _, lr in sorted(group(mine, "instance").items(),
                        key=lambda kv: kv[1][0].get("lambda", 1.0)):
        per.append((float(lr[0].get("lambda", 1.0)), best(lr), lr))
    ref = next((r for _, r, _ in per if r is not None), None)
    t_ref = ref.get("t_ref_ms") if ref else None
    e_ref = ref.get("e_ref_j") if ref else None
    one = next((b for lam, b, _ in per if lam == 1.0 and b is not None), None)
    pts = [(b["t_iter_ms"] / (t_ref or 1), b["e_iter_j"] / (e_ref or 1)) for _, b, _ in per if b]
    k = knee_index(pts)
    ok_lams = [lam for lam, b, _ in per if b]
    return Frontier(per, ref, t_ref, e_ref, ref.get("normalised_by") if ref else None,
                    one["t_iter_ms"] if one else None, one["e_iter_j"] if one else None,
                    k, ok_lams[k] if k is not None else None)


def _energy(ctx: Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    rep = info.get("report", {})
    ours = rep.get("ours", "MA")
    fr = frontier(rows, ours)
    per, ref, t_ref, e_ref, norm_by = fr.per, fr.ref, fr.t_ref, fr.e_ref, fr.norm_by
    t1, e1, k, knee_lam = fr.t1, fr.e1, fr.knee, fr.knee_lam
    pts = [(b["t_iter_ms"] / (t_ref or 1), b["e_iter_j"] / (e_ref or 1)) for _, b in fr.plans]
    body = []
    for lam, b, lr in per:
        if b is None:
            body.append([f"{lam:g}", status_summary(lr)] + [DASH] * 7)
            continue
        same = sum(1 for r in lr if is_ok(r) and r.get("plan") == b.get("plan"))
        dt = 100 * (b["t_iter_ms"] - t1) / t1 if t1 else None
        de = 100 * (b["e_iter_j"] - e1) / e1 if e1 else None
        body.append([f"{lam:g}" + (" ⋆" if lam == knee_lam else ""), fmt(b["t_iter_ms"]),
                     fmt(b["e_iter_j"]), pct(dt), pct(de),
                     fmt(b["t_iter_ms"] / t_ref, 3) if t_ref else DASH,
                     fmt(b["e_iter_j"] / e_ref, 3) if e_ref else DASH,
                     types(ctx, b), f"{same}/{len(lr)}"])
    if t_ref and e_ref:
        nrec = (ref or {}).get("normaliser") or {}
        gpus = types(ctx, {**ref, "plan": nrec["plan"]}) if ref and nrec.get("plan") else DASH
        body.append([f"{norm_by} (reference)", fmt(t_ref), fmt(e_ref),
                     pct(100 * (t_ref - t1) / t1 if t1 else None),
                     pct(100 * (e_ref - e1) / e1 if e1 else None), "1.000", "1.000", gpus,
                     DASH])
    out = [table(["λ", "T_iter (ms)", "E_iter (J)", "ΔT %", "ΔE %", "T/T_ref", "E/E_ref",
                   "GPUs selected", "seeds on this plan"], body), "",
           f"Best of the {ours}'s seeds per λ. ΔT and ΔE against the λ = 1 plan. Normalisers "
           f"T_ref = {fmt(t_ref)} ms, E_ref = {fmt(e_ref)} J from {norm_by}. ⋆ marks the knee "
           "(maximum perpendicular distance from the line joining the extreme points, on the "
           "normalised axes)" + (" — fewer than three distinct plans, no knee." if k is None
                                 else "."), "",
           paper_block(info.get("paper"))]
    p7 = PAPER.get(info.get("paper") or "", {}).get("reference")
    if p7:
        out += ["", f"Paper reference row: {p7['label']} {p7['t_ms']} ms, {p7['e_j']} J "
                f"({p7['dt_pct']:+.1f}% T, {p7['de_pct']:+.1f}% E against λ = 1), "
                f"{p7['gpus']}."]
    if pts:
        from bench.report.figures import plot_pareto

        raw = [(lam, b["t_iter_ms"], b["e_iter_j"]) for lam, b, _ in per if b]
        md = ctx.figure(plot_pareto, "pareto.png", raw, knee=k,
                        reference=(str(norm_by), t_ref, e_ref) if t_ref and e_ref else None)
        if md:
            out += ["", md]
        if k is not None:
            kb = [b for _, b, _ in per if b][k]
            md = _pipeline(ctx, [(f"knee plan, λ = {knee_lam:g}", kb)], "pipeline_knee.png")
            if md:
                out += ["", md]
    return out


def _best_known(rows: Sequence[Row]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Per instance: the least objective any run found, and the largest proven lower bound."""
    df = frame(rows)
    known = df[df["ok"]].groupby("instance")["objective"].min()
    bounds = df.assign(lb=[r.get("lower_bound") for r in df["row"]]).dropna(subset=["lb"])
    bound = bounds.groupby("instance")["lb"].max()
    names = list(dict.fromkeys(df["instance"]))
    return ({n: float(known[n]) if n in known.index else None for n in names},
            {n: float(bound[n]) if n in bound.index else None for n in names})


def _median(values: Any, digits: int = 2, empty: str = DASH) -> str:
    values = [v for v in values if v is not None]
    return fmt(statistics.median(values), digits) if values else empty


def _anytime(ctx: Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    budgets = sorted({r["budget_s"] for r in rows})
    labels = list(dict.fromkeys([s["label"] for s in info.get("solvers", [])]
                                + [r["label"] for r in rows]))
    order = instance_order(rows, info)
    best_known, best_bound = _best_known(rows)
    df = frame(rows)
    df["known"] = df["instance"].map(best_known)
    df["bound"] = df["instance"].map(best_bound)
    ok = df[df["ok"]]
    df.loc[ok.index, "excess"] = 100 * (ok["objective"] - ok["known"]) / ok["known"]
    df.loc[ok.index, "own"] = 100 * ok["gap"].astype(float)
    df.loc[ok.index, "cert"] = 100 * (ok["objective"] - ok["bound"]) / ok["objective"]
    summary = []
    for (lab, bud), g in df.groupby(["label", "budget_s"], sort=False):
        good = g[g["ok"]]
        summary.append((labels.index(lab), bud, [
            lab, f"{bud:g}", f"{len(good)}/{len(g)}", int((good["status"] == "optimal").sum()),
            _median(good["excess"].dropna()), _median(good["own"].dropna(), empty="no bound"),
            _median(good["cert"].dropna()),
            status_summary(list(g.loc[~g["ok"], "row"])) if len(good) < len(g) else ""]))
    out = ["**Summary over instances** (medians)", "",
           table(["solver", "budget (s)", "plans", "proven optimal", "% above best known",
                  "own certified gap %", "gap to best bound %", "runs without plan"],
                 [cells for *_, cells in sorted(summary, key=lambda s: s[:2])]), "",
           "Best known: the least objective any run found on the instance. Own certified gap: "
           "from the solver's own bound (heuristics prove none). Gap to best bound: against "
           "the largest lower bound any solver proved on the instance, a valid certificate "
           "for every plan.", ""]
    cmp = portfolio_vs_exact(rows)
    if cmp is not None:
        out += ["**The portfolio against the best exact method**", "", cmp.sentence(), ""]
        if cmp.failed:
            out += [table(["instance", "budget (s)", "portfolio (ms)", "best exact (ms)",
                           "best exact by", "portfolio above it %"],
                          [[f["instance"], f"{f['budget_s']:g}",
                            status_summary([r for r in rows if r["instance"] == f["instance"]
                                            and r["budget_s"] == f["budget_s"]
                                            and r["solver"] == "portfolio"])
                            if f["portfolio"] is None else fmt(f["portfolio"]),
                            fmt(f["exact"]), f["by"],
                            DASH if f["portfolio"] is None
                            else fmt(100 * (f["portfolio"] - f["exact"]) / f["exact"], 2)]
                           for f in cmp.failed]), ""]
    for fam, fr in df.groupby("generator", sort=False):
        body = []
        for name in order:
            ir = fr[fr["instance"] == name]
            if ir.empty:
                continue
            n, layers = ir["n"].iloc[0], ir["layers"].iloc[0]
            cells_by = {(lab, bud): list(g["row"]) for (lab, bud), g
                        in ir.groupby(["label", "budget_s"], sort=False)}
            for lab in labels:
                if not any(k[0] == lab for k in cells_by):
                    continue
                cells: list[Any] = [n, layers, lab]
                for bud in budgets:
                    br = cells_by.get((lab, bud), [])
                    b = best(br)
                    cells.append(quality(b) if b else status_summary(br))
                body.append(cells)
            body.append([n, layers, "best known / best bound",
                         f"{fmt(best_known[name])} / {fmt(best_bound[name])}"]
                        + [""] * (len(budgets) - 1))
        out += [f"**Family {fam}**: objective (ms at λ = 1) at each budget", "",
                table(["N", "L", "solver", *(f"{b:g} s" for b in budgets)], body), ""]
    if ctx.figures:
        out += _anytime_figures(ctx, rows, labels, order, budgets, best_known, best_bound)
    return out


def _anytime_figures(ctx: Ctx, rows: list[Row], labels: list[str], order: list[str],
                     budgets: list[float], best_known: Mapping[str, float | None],
                     best_bound: Mapping[str, float | None]) -> list[str]:
    """Anytime curves from the longest run of each solver, and gap against N."""
    from bench.report.figures import plot_anytime, plot_gap_vs_n

    top = max(budgets)
    out: list[str] = []
    figs = []
    cells = group(rows, "instance", "label", "budget_s")
    for name in order:
        curves = {}
        no_plan = {}
        for lab in labels:
            lr = sorted(cells.get((name, lab, top), []), key=lambda r: r.get("seed", 0))
            if not lr:
                continue
            r = lr[0]
            if any(p[1] is not None for p in r.get("trace") or []):
                end = r.get("wall_s") or r.get("elapsed_s")
                curves[lab if is_ok(r) else f"{lab} ({status_summary([r])}, unpriced)"] = (
                    r["trace"], end)
            else:
                no_plan[lab] = status_summary([r])
        for lab in labels:  # shorter budgets at which a solver found no plan
            for bud in budgets[:-1]:
                br = cells.get((name, lab, bud), [])
                if br and best(br) is None:
                    no_plan[f"{lab} at {bud:g} s"] = status_summary(br)
        if curves or no_plan:
            md = ctx.figure(plot_anytime, f"anytime_{name}.png", curves,
                            title=f"{name}, budget {top:g} s", best_known=best_known[name],
                            no_plan=no_plan)
            if md:
                figs.append(md)
    if figs:
        out += [f"Anytime curves (runs with the {top:g} s budget): relative excess of the "
                "incumbent over the best plan any run found on the instance, and the "
                "solver's own certified gap, both on log axes (values below 0.01% are drawn "
                "at 0.01%); solvers that found no plan (at this budget or a shorter one) are "
                "named in the legend.", "", *figs, ""]
    panels: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for name in order:
        ir = [r for (i, _, b), rr in cells.items() if i == name and b == top for r in rr]
        lb = best_bound.get(name)
        if not ir or lb is None:
            continue
        key = f"{spec(ir[0], 'generator', '?')}, L = {ir[0]['layers']}"
        by_label = group(ir, "label")
        for lab in labels:
            b = best(by_label.get((lab,), []))
            if b is not None:
                gap = 100 * (b["objective"] - lb) / b["objective"]
                panels.setdefault(key, {}).setdefault(lab, []).append((ir[0]["n"], gap))
    if panels:
        md = ctx.figure(plot_gap_vs_n, "gap_vs_n.png", panels)
        if md:
            out += [f"Gap to the best proven bound against N ({top:g} s budget):", "", md]
    else:
        out.append("No solver proved a lower bound, so there is no gap-vs-N figure.")
    return out


def _warmstart(ctx: Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    solvers = info.get("solvers") or []
    cold = {s["name"]: s["label"] for s in solvers if not s.get("warm_start")}
    warm = [(s["name"], s["label"]) for s in solvers if s.get("warm_start")]
    body = []

    def describe(rr: list[Row]) -> list[str]:
        b = best(rr)
        if b is None:
            return [status_summary(rr), DASH, DASH]
        proof = f"{b['wall_s']:.1f} s" if b["status"] == "optimal" else \
            f"not proven in {b['budget_s']:g} s"
        return [b["status"], proof, quality(b)]

    cells = group(rows, "instance", "label")
    for name in instance_order(rows, info):
        for solver, wlabel in warm:
            cr = cells.get((name, cold.get(solver)), [])
            wr = cells.get((name, wlabel), [])
            wss = [(r.get("info") or {}).get("warm_start") or {} for r in wr]
            body.append([name, solver, *describe(cr), *describe(wr),
                         ", ".join(str(w.get("ran", True)) for w in wss) or DASH,
                         ", ".join(DASH if w.get("accepted") is None else str(w["accepted"])
                                   for w in wss) or DASH])
    return [table(["instance", "solver", "cold status", "cold time to proof", "cold objective",
                    "warm status", "warm time to proof", "warm objective", "memetic ran",
                    "warm start accepted"], body), "",
            "Warm runs spend up to 20% of the same budget on the memetic algorithm: a solver "
            "that defers its warm start runs it only once its own start plans, bound and site "
            "branching have not proven optimality (\"memetic ran\" false: it never asked). "
            "Their time to proof includes that run. Objectives carry (opt), (gap x%) or "
            "(no bound).", "", warm_vs_cold(rows).sentence()]


def proof_checkpoints(budget: float) -> list[float]:
    """The times (s) at which the proofs report reads the gap: 30, 120, 300 below the budget,
    then the budget (a 120 s run: 30 and 120; a 20 s run: 20)."""
    return [c for c in PROOF_CHECKPOINTS_S if c < budget] + [float(budget)]


def _gap_col(t: float) -> str:
    return f"gap@{t:g}"


def proofs_frame(rows: Sequence[Row], checkpoints: Sequence[float]) -> pd.DataFrame:
    """One line a run (the :func:`frame` columns, plus): ``family``, ``iseed`` (the instance's
    generator seed, -1: none), ``lam``, ``proof_s`` (the
    wall time of an optimal run, else NaN), ``gap@T`` per checkpoint T (fraction; NaN: no plan
    or no bound by then, or T beyond the run's budget), ``final_objective``, ``final_bound``.

    The gap at T comes from the run's trace: its best incumbent and best bound at or before T
    seconds from the run's start. At the run's own budget it is the run's final state (the
    whole trace and the result, which a solver may write a moment after its budget)."""
    df = frame(rows)
    df["family"] = df["generator"]
    # The instance's generator seed, shown when an experiment holds several.
    df["iseed"] = [-1 if spec(r, "seed") is None else int(spec(r, "seed")) for r in rows]
    df["lam"] = [float(r.get("lambda", spec(r, "lam", 1.0)) or 0.0) for r in rows]
    df["proof_s"] = [float(r["wall_s"]) if r.get("status") == "optimal"
                     and r.get("wall_s") is not None else float("nan") for r in rows]
    for t in checkpoints:
        gaps = []
        for r in rows:
            budget = float(r.get("budget_s") or 0.0)
            if t > budget:
                gaps.append(float("nan"))
                continue
            at_end = t == budget
            inc, bound = trace_at(r.get("trace"), None if at_end else t)
            if at_end:  # fold in the result itself
                if is_ok(r):
                    inc = float(r["objective"]) if inc is None else min(inc, r["objective"])
                if r.get("lower_bound") is not None:
                    lb = float(r["lower_bound"])
                    bound = lb if bound is None else max(bound, lb)
            g = certified_gap(inc, bound)
            gaps.append(float("nan") if g is None else g)
        df[_gap_col(t)] = gaps
    df["final_objective"] = [float(r["objective"]) if is_ok(r) else float("nan") for r in rows]
    df["final_bound"] = [float("nan") if r.get("lower_bound") is None else float(r["lower_bound"])
                         for r in rows]
    return df


def _value(x: Any) -> str:
    """An objective or bound: 5 significant digits (ms at lambda = 1, normalised below)."""
    v = _num(x)
    return DASH if v is None else f"{v:.5g}"


def _gap_cell(x: Any) -> str:
    v = _num(x)
    return DASH if v is None else gap_pct(v)


def proofs_table(rows: Sequence[Row], info: Mapping[str, Any]
                 ) -> tuple[list[str], list[list[Any]], pd.DataFrame, list[float], list[str]]:
    """Header and body of the proofs table (a line per family, N, L, lambda, and instance
    seed and budget when the experiment has several; per solver label: status, time to
    proof, gap at each checkpoint, final objective and bound), the frame, the checkpoints
    and the labels."""
    budgets = sorted({float(r["budget_s"]) for r in rows})
    checkpoints = proof_checkpoints(max(budgets))
    labels = list(dict.fromkeys([s["label"] for s in info.get("solvers", [])]
                                + [r["label"] for r in rows]))
    labels = [lab for lab in labels if any(r["label"] == lab for r in rows)]
    pf = proofs_frame(rows, checkpoints)
    order = {name: k for k, name in enumerate(instance_order(rows, info))}
    pf["order"] = pf["instance"].map(order)
    pf["seed0"] = pf["seed"].fillna(0)
    pf = pf.sort_values(["n", "order", "budget_s", "seed0"], kind="stable")
    seeds = several_seeds(pf)
    keys = ["family", "n", "layers", "lam"] + (["iseed"] if seeds else []) \
        + (["budget_s"] if len(budgets) > 1 else [])
    body: list[list[Any]] = []
    for key, g in pf.groupby(keys, sort=False):
        cells: list[Any] = [key[0], int(key[1]), int(key[2]), f"{key[3]:g}"]
        extra = list(key[4:])
        if seeds:
            cells.append(int(extra.pop(0)))
        if len(budgets) > 1:
            cells.append(f"{extra.pop(0):g}")
        for lab in labels:
            lr = g[g["label"] == lab]
            if lr.empty:
                cells += [DASH] * (4 + len(checkpoints))
                continue
            r = lr.iloc[0]  # the first seed (the experiments run one)
            cells += [r["shown"], secs(_num(r["proof_s"])),
                      *(_gap_cell(r[_gap_col(t)]) for t in checkpoints),
                      _value(r["final_objective"]), _value(r["final_bound"])]
        body.append(cells)
    header = ["family", "N", "L", "λ"] + (["instance seed"] if seeds else []) \
        + (["budget (s)"] if len(budgets) > 1 else [])
    for lab in labels:
        header += [f"{lab} status", f"{lab} time to proof (s)",
                   *(f"{lab} gap at {t:g} s (%)" for t in checkpoints),
                   f"{lab} objective", f"{lab} bound"]
    return header, body, pf, checkpoints, labels


def _proofs(ctx: Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    header, body, pf, checkpoints, labels = proofs_table(rows, info)
    last = checkpoints[-1]
    out = [table(header, body), "",
           "Status at the budget; time to proof: seconds from the run's start to the proof "
           "(its wall time) when the solver proved optimality, else —. Certified gap = "
           "(incumbent - bound) / incumbent, from the best plan and the best bound the run's "
           f"trace holds at or before that time (at {last:g} s, the budget: the run's final "
           "state); — where the run had no plan or no bound yet. Objective and bound are the "
           "run's final ones (ms at λ = 1, normalised below).", "",
           *proofs_summary(pf, labels, last), ""]
    if ctx.figures:
        from bench.report.figures import plot_gap_vs_time

        panels: dict[str, list[tuple[str, str, Any, float | None]]] = {}
        seeds = several_seeds(pf)
        for _, r in pf.iterrows():
            row = r["row"]
            if any(len(p) > 2 and p[1] is not None and p[2] is not None
                   for p in row.get("trace") or []):
                key = f"N = {int(r['n'])}, L = {int(r['layers'])}"
                tag = f" s{int(r['iseed'])}" if seeds else ""
                panels.setdefault(key, []).append(
                    (r["label"], f"{r['family']}{tag} λ={r['lam']:g}", row["trace"],
                     row.get("wall_s") or row.get("elapsed_s")))
        if panels:
            name = f"gap_vs_time_{info.get('name') or rows[0]['experiment']}.png"
            md = ctx.figure(plot_gap_vs_time, name, panels, budget=last)
            if md:
                out += ["Certified gap against time from each run's trace (log axes; a proof, "
                        "gap 0, is drawn at 0.01%), one panel per size, one colour per solver, "
                        "one line style per family and λ:", "", md]
        else:
            out.append("No run proved a bound while holding a plan, so there is no gap figure.")
    return out


def generic(ctx: Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    """Any experiment: per instance, solver and budget, runs with a plan, best and mean."""
    df = frame(rows)
    body = []
    for name in instance_order(rows, info):
        for (lab, bud), g in df[df["instance"] == name].groupby(["label", "budget_s"],
                                                                 sort=False):
            plans = g.loc[g["ok"], "objective"]
            b = best(list(g["row"]))
            body.append([name, lab, f"{bud:g}", f"{len(plans)}/{len(g)}",
                         quality(b) if b else status_summary(list(g["row"])),
                         fmt(float(plans.mean())) if len(plans) else DASH])
    return [table(["instance", "solver", "budget (s)", "runs ok", "best", "mean"], body)]


RENDERERS: dict[str, Callable[[Ctx, list[Row], Mapping[str, Any]], list[str]]] = {
    "versus": _versus,
    "exact": _exact,
    "network": _network,
    "energy": _energy,
    "anytime": _anytime,
    "warmstart": _warmstart,
    "proofs": _proofs,
    "hybrid": hybrid_section,
    "generic": generic,
}

