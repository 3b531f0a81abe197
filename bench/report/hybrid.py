"""The hybrid experiment's section: hybrid plans against pipeline-only plans and a
Metis-style grid, time and energy, and a figure of the chosen plans' stage groups.

``[report]`` keys of the experiment: ``kind = "hybrid"``, ``pipeline`` (the label of
the pipeline-space solver), ``hybrid`` (the label of the hybrid solver the summary
is about) and ``baseline`` (the Metis-style grid's label).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bench.report.tables import DASH, fmt, instance_order, is_ok, status_summary, table

if TYPE_CHECKING:
    from bench.report.data import Ctx
    from geoplan.model.hybrid import HybridPlan
    from geoplan.model.instance import Instance

__all__ = ["hybrid_frame", "hybrid_section", "hybrid_summary", "plan_shape",
           "plot_stage_groups"]

Row = dict[str, Any]


def plan_shape(plan: Mapping[str, Any] | None) -> dict[str, Any]:
    """GPUs, stages, TP degrees, replica counts, ZeRO and micro-batch of a plan JSON."""
    if not plan:
        return {"gpus": None, "stages": None, "tp": None, "replicas": None, "zero": None,
                "u": None, "recompute": None}
    from geoplan.model.hybrid import HybridPlan

    p = HybridPlan.from_dict(plan)
    tps = sorted({s.tp for s in p.stages})
    reps = sorted({len(s.replicas) for s in p.stages})
    return {"gpus": len(p.gpus), "stages": p.q, "tp": "/".join(map(str, tps)),
            "replicas": "/".join(map(str, reps)), "zero": plan.get("zero"),
            "u": plan.get("micro_batch_size"),
            "recompute": sum(s.recompute == "full" for s in p.stages)}


def hybrid_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """One line per run: instance, label, ok, objective, T, E and the plan's shape."""
    recs = []
    for r in rows:
        ok = is_ok(r)
        recs.append({"instance": r["instance"], "label": r["label"], "seed": r.get("seed"),
                     "lam": r.get("lambda"), "ok": ok, "status": r["status"],
                     "objective": r.get("objective") if ok else None,
                     "t_iter_ms": r.get("t_iter_ms") if ok else None,
                     "e_iter_j": r.get("e_iter_j") if ok else None,
                     **plan_shape(r.get("plan") if ok else None), "row": r})
    return pd.DataFrame.from_records(recs)


def _best(df: pd.DataFrame, instance: str, label: str) -> pd.Series | None:
    g = df[(df["instance"] == instance) & (df["label"] == label) & df["ok"]]
    if g.empty:
        return None
    return g.loc[g["objective"].astype(float).idxmin()]


def hybrid_summary(df: pd.DataFrame, order: Sequence[str], pipeline: str, hybrid: str,
                   baseline: str | None) -> list[str]:
    """Computed statements: how much the hybrid plans gain over pipeline-only plans and the
    baseline, and where only hybrid plans hold the model."""
    both, only, neither = [], [], []
    vs_base = []
    for name in order:
        h, p = _best(df, name, hybrid), _best(df, name, pipeline)
        if h is not None and p is not None:
            both.append((name, 100 * (p["objective"] - h["objective"]) / p["objective"],
                         p["t_iter_ms"] / h["t_iter_ms"]))
        elif h is not None:
            only.append(name)
        elif p is None:
            neither.append(name)
        b = _best(df, name, baseline) if baseline else None
        if h is not None and b is not None:
            vs_base.append((name, 100 * (b["objective"] - h["objective"]) / b["objective"]))
    out = []
    if both:
        gains = sorted(g for _, g, _ in both)
        speed = sorted(s for _, _, s in both)
        out.append(f"- On the {len(both)} instances where both spaces have a plan, {hybrid}'s "
                   f"objective is {gains[0]:.1f}-{gains[-1]:.1f} % below {pipeline}'s "
                   f"(median {gains[len(gains) // 2]:.1f} %); iteration time "
                   f"{speed[0]:.2f}-{speed[-1]:.2f}x faster.")
        worse = [n for n, g, _ in both if g < -1e-9]
        out.append(f"- {hybrid} is never worse than {pipeline}." if not worse else
                   f"- {hybrid} is worse than {pipeline} on: {', '.join(worse)}.")
    if only:
        out.append(f"- Only hybrid plans hold the model on: {', '.join(only)} "
                   f"({pipeline} finds no memory-feasible plan).")
    if neither:
        out.append(f"- Neither space has a plan on: {', '.join(neither)}.")
    if vs_base:
        g = sorted(x for _, x in vs_base)
        out.append(f"- Against the {baseline}, {hybrid}'s objective is {g[0]:.1f}-{g[-1]:.1f} % "
                   "lower" + (" (negative: the grid is better)." if g[0] < 0 else "."))
    beaten = []
    for name in order:
        h = _best(df, name, hybrid)
        ok = df[(df["instance"] == name) & df["ok"]]
        if h is None or ok.empty:
            continue
        top = ok.loc[ok["objective"].astype(float).idxmin()]
        if top["objective"] < h["objective"] * (1 - 1e-9):
            beaten.append(f"{name} ({top['label']}, "
                          f"{100 * (h['objective'] - top['objective']) / h['objective']:.1f} % "
                          "lower)")
    if beaten:
        out.append(f"- Another solver's plan is better than {hybrid}'s on: "
                   + "; ".join(beaten) + ".")
    return out


def _int(x: Any) -> str:
    return DASH if x is None or pd.isna(x) else str(int(x))


def hybrid_section(ctx: Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    rep = info.get("report", {})
    pipeline = rep.get("pipeline", "pipeline MA")
    hybrid = rep.get("hybrid", "hybrid MA")
    baseline = rep.get("baseline")
    df = hybrid_frame(rows)
    order = instance_order(rows, info)
    labels = list(dict.fromkeys([s["label"] for s in info.get("solvers", [])]
                                + list(df["label"])))
    labels = [lab for lab in labels if (df["label"] == lab).any()]
    body = []
    for name in order:
        for lab in labels:
            b = _best(df, name, lab)
            runs = df[(df["instance"] == name) & (df["label"] == lab)]
            if runs.empty:
                continue
            if b is None:
                body.append([name, lab, status_summary(list(runs["row"])), *[DASH] * 9])
                continue
            body.append([name, lab, b["status"], fmt(b["t_iter_ms"]), fmt(b["e_iter_j"]),
                         f"{b['objective']:.6g}", _int(b["gpus"]), _int(b["stages"]), b["tp"],
                         b["replicas"], _int(b["zero"]), _int(b["u"])])
    header = ["instance", "solver", "status", "T_iter (ms)", "E_iter (J)", "objective", "GPUs",
              "stages", "tp", "replicas", "ZeRO", "u"]
    out = [table(header, body), "",
           "Best run per solver (objective: ms at λ = 1, else the normalised mix); GPUs used, "
           "pipeline stages, the TP degrees and replica counts the stages use, the plan's ZeRO "
           "stage and micro-batch size (— where the plan leaves the instance's). Every plan "
           "is priced by the same evaluator (hybrid-model.md).", "",
           *hybrid_summary(df, order, pipeline, hybrid, baseline), ""]
    if ctx.figures:
        from geoplan.model.hybrid import HybridPlan

        for name in order:
            panels = []
            for lab in (hybrid, baseline, pipeline):
                b = _best(df, name, lab) if lab else None
                if b is not None:
                    panels.append((lab, HybridPlan.from_dict(b["row"]["plan"])))
            if not panels:
                continue
            inst = ctx.instance(df[df["instance"] == name].iloc[0]["row"])
            md = ctx.figure(plot_stage_groups, f"stage_groups_{name}.png", inst, panels)
            if md:
                out += [f"Stage groups of the best plans on {name} (one box per replica: its "
                        "GPUs' site as colour, tp, samples, layers, memory per GPU against its "
                        "limit):", "", md, ""]
    return out


def plot_stage_groups(instance: Instance, panels: Sequence[tuple[str, HybridPlan]],
                      path: Path) -> Path:
    """One panel per plan: stages left to right (width = layers), replicas stacked (height =
    tp, the GPUs of the TP group), coloured by site, labelled with tp, samples and memory."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    from bench.report.figures import _save
    from geoplan.cost.hybrid_evaluate import evaluate_hybrid

    sites = sorted({g.site or g.id for g in instance.gpus})
    colours = {s: f"C{k % 10}" for k, s in enumerate(sites)}
    site_of = {g.id: g.site or g.id for g in instance.gpus}
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 2.2 + 2.0 * len(panels)),
                             squeeze=False)
    used: set[str] = set()
    for ax, (title, plan) in zip(axes.flat, panels, strict=True):
        ev = evaluate_hybrid(instance, plan)
        x = 0.0
        top = 1.0
        for q, st in enumerate(ev.stages):
            y = 0.0
            for rep in st.replicas:
                site = site_of[rep.gpus[0]]
                used.add(site)
                ax.add_patch(Rectangle((x, y), st.layers, st.tp, facecolor=colours[site],
                                       edgecolor="black", linewidth=0.8, alpha=0.75))
                if st.layers >= 2 or len(ev.stages) <= 12:
                    sep = "\n" if st.tp > 1 else " "  # one line in a one-GPU-high box
                    ax.text(x + st.layers / 2, y + st.tp / 2,
                            f"tp{st.tp} s{rep.samples}{sep}{rep.memory_gb:.0f}/"
                            f"{rep.memory_limit_gb:.0f} GB", ha="center", va="center",
                            fontsize=6)
                y += st.tp
            ax.text(x + st.layers / 2, y + 0.15, f"S{q + 1}\n{st.layers}L"
                    + (" rc" if st.recompute == "full" else ""), ha="center", va="bottom",
                    fontsize=6)
            top = max(top, y)
            x += st.layers
        ax.set_xlim(0, max(x, 1))
        ax.set_ylim(0, top * 1.35 + 0.5)
        ax.set_xlabel("layers (stage width)")
        ax.set_ylabel("GPUs (replicas x tp)")
        ax.set_title(f"{title}: T_iter {ev.t_iter_ms:.1f} ms, E_iter {ev.e_iter_j:.1f} J, "
                     f"{len(plan.gpus)} GPUs in {plan.q} stages, micro-batch "
                     f"{ev.micro_batch_size}, ZeRO {ev.zero}", fontsize=9)
    fig.legend(handles=[Patch(color=colours[s], label=s) for s in sites if s in used],
               loc="upper right", fontsize=7, title="site")
    return _save(fig, path)
