"""PNG figures of the report (matplotlib, Agg backend).

Each function takes plain data (no results-file parsing here) and writes one PNG:
anytime curves, gap vs N, the energy-time frontier with its knee, network
sensitivity curves and a pipeline diagram of a plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from geoplan.model.instance import Instance
    from geoplan.model.plan import Plan

__all__ = [
    "EXCESS_FLOOR_PCT",
    "color",
    "plot_anytime",
    "plot_gap_vs_n",
    "plot_gap_vs_time",
    "plot_network",
    "plot_pareto",
    "plot_pipeline",
]

Trace = Sequence[Sequence[float | None]]
_DPI = 110
_COLORS: dict[str, str] = {}


def color(label: str) -> str:
    """One colour per solver label across every figure of a report (first come, first served)."""
    if label not in _COLORS:
        _COLORS[label] = f"C{len(_COLORS) % 10}"
    return _COLORS[label]


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path


#: Floor of the log axes of the anytime figure (percent): smaller values are drawn on it.
EXCESS_FLOOR_PCT = 1e-2


def _running(trace: Trace, end: float | None) -> tuple[list[float], list[float | None],
                                                        list[float | None]]:
    """Times, incumbent and bound as they stood after each trace row (carried forward)."""
    ts: list[float] = []
    incs: list[float | None] = []
    bounds: list[float | None] = []
    inc = bound = None
    for row in trace:
        inc = row[1] if row[1] is not None else inc
        bound = row[2] if row[2] is not None else bound
        ts.append(max(float(row[0] or 0.0), 1e-3))
        incs.append(None if inc is None else float(inc))
        bounds.append(None if bound is None else float(bound))
    if ts and end is not None and end > ts[-1]:
        ts.append(float(end))
        incs.append(incs[-1])
        bounds.append(bounds[-1])
    return ts, incs, bounds


def _floored(ts: list[float], vals: list[float | None]) -> tuple[list[float], list[float]]:
    pts = [(t, max(v, EXCESS_FLOOR_PCT)) for t, v in zip(ts, vals, strict=True) if v is not None]
    return [t for t, _ in pts], [v for _, v in pts]


def plot_anytime(
    curves: Mapping[str, tuple[Trace, float | None]],
    path: Path,
    title: str,
    best_known: float | None = None,
    no_plan: Mapping[str, str] | None = None,
) -> Path:
    """Relative excess of the incumbent over the best known plan, and the certified gap,
    against time; log axes on both.

    ``curves`` maps a solver label to (trace rows ``[seconds, incumbent, bound]``, end time);
    ``no_plan`` maps the labels of solvers that found no plan to why (named in the legend;
    a label "X at 1 s" takes the colour of X).
    Values below :data:`EXCESS_FLOOR_PCT` (the best known plan itself) are drawn on the floor.
    Without ``best_known`` the least incumbent of the curves is used.
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.6))
    ref = best_known
    if ref is None:
        finals = [float(r[1]) for trace, _ in curves.values() for r in trace if r[1] is not None]
        ref = min(finals) if finals else None
    for label, (trace, end) in curves.items():
        c = color(label.split(" (")[0])
        ts, incs, bounds = _running(trace, end)
        if ref:
            ex = [None if v is None else 100.0 * (v - ref) / ref for v in incs]
            xs, ys = _floored(ts, ex)
            if xs:
                ax1.step(xs, ys, where="post", color=c, label=label)
        gap = [None if i is None or b is None or i <= 0 else 100.0 * (i - b) / i
               for i, b in zip(incs, bounds, strict=True)]
        gx, gy = _floored(ts, gap)
        if gx:
            ax2.step(gx, gy, where="post", color=c, label=label)
    if ax1.lines:
        ax1.axhline(EXCESS_FLOOR_PCT, color="0.5", linewidth=0.8, linestyle="--",
                    label=f"best known (<= {EXCESS_FLOOR_PCT:g}%)")
    handles, names = ax1.get_legend_handles_labels()
    for label, why in (no_plan or {}).items():
        handles.append(Line2D([], [], color=color(label.split(" at ")[0]), linestyle="none",
                              marker="x"))
        names.append(f"{label}: no plan ({why})")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom=EXCESS_FLOOR_PCT * 0.7)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("seconds (log)")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_ylabel("above best known plan (%, log)")
    ax2.set_ylabel("certified gap (%, log)")
    ax1.set_title(title + ("" if best_known is None else f"; best known {best_known:.1f}"),
                  fontsize=10)
    ax2.set_title("own certified gap of solvers that prove a bound", fontsize=10)
    ax2.set_ylim(top=150)
    if ax1.lines and ax2.lines:
        ax2.set_xlim(ax1.get_xlim())  # the same time axis on both panels
    if handles:  # one legend for both panels, outside them
        ax2.legend(handles, names, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                   borderaxespad=0)
    if not ax2.lines:
        ax2.text(0.5, 0.5, "no solver proved a bound", ha="center", va="center",
                 transform=ax2.transAxes)
    return _save(fig, path)


def plot_gap_vs_n(
    panels: Mapping[str, Mapping[str, Sequence[tuple[int, float]]]], path: Path
) -> Path:
    """Certified gap (%) against N, one panel per key (family, L), one line per solver."""
    keys = list(panels)
    cols = min(3, max(1, len(keys)))
    rows = (len(keys) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys, strict=False):
        for label, pts in panels[key].items():
            if pts:
                xs, ys = zip(*sorted(pts), strict=True)
                ax.plot(xs, ys, marker="o", color=color(label), label=label)
        ax.set_xscale("log", base=2)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("GPUs N")
        ax.set_ylabel("gap to best bound (%)")
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    return _save(fig, path)


_STYLES: tuple[Any, ...] = ("-", "--", ":", "-.")


def plot_gap_vs_time(
    panels: Mapping[str, Sequence[tuple[str, str, Trace, float | None]]], path: Path,
    budget: float | None = None,
) -> Path:
    """Certified gap (%) against time, one panel per key (a size), log axes.

    Each panel holds (solver label, case, trace rows ``[seconds, incumbent, bound]``, end
    time) tuples: one colour per label, one line style per case (family and lambda). The gap
    uses the best incumbent and best bound so far; 0 (a proof) is drawn at
    :data:`EXCESS_FLOOR_PCT`.
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    keys = list(panels)
    cols = min(3, max(1, len(keys)))
    nrows = (len(keys) + cols - 1) // cols or 1
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.6 * nrows), squeeze=False)
    for ax, key in zip(axes.flat, keys, strict=False):
        cases = list(dict.fromkeys(case for _, case, _, _ in panels[key]))
        labels = list(dict.fromkeys(lab for lab, _, _, _ in panels[key]))
        for label, case, trace, end in panels[key]:
            ts: list[float] = []
            gaps: list[float] = []
            inc = bound = None
            for row in trace:
                if row[1] is not None:
                    inc = float(row[1]) if inc is None else min(inc, float(row[1]))
                if len(row) > 2 and row[2] is not None:
                    bound = float(row[2]) if bound is None else max(bound, float(row[2]))
                if inc is not None and bound is not None and inc > 0:
                    ts.append(max(float(row[0] or 0.0), 1e-3))
                    gaps.append(max(100.0 * (inc - bound) / inc, EXCESS_FLOOR_PCT))
            if ts and end is not None and end > ts[-1]:
                ts.append(float(end))
                gaps.append(gaps[-1])
            if ts:
                ax.step(ts, gaps, where="post", color=color(label),
                        linestyle=_STYLES[cases.index(case) % len(_STYLES)])
        if budget is not None:
            ax.axvline(budget, color="0.5", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom=EXCESS_FLOOR_PCT * 0.7)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("seconds (log)")
        ax.set_ylabel("certified gap (%, log)")
        ax.grid(True, which="both", alpha=0.3)
        handles = [Line2D([], [], color=color(lab)) for lab in labels]
        handles += [Line2D([], [], color="0.3", linestyle=_STYLES[k % len(_STYLES)])
                    for k in range(len(cases))]
        ax.legend(handles, [*labels, *cases], fontsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    return _save(fig, path)


def plot_pareto(
    points: Sequence[tuple[float, float, float]],
    path: Path,
    knee: int | None = None,
    reference: tuple[str, float, float] | None = None,
) -> Path:
    """The energy-time frontier: (lambda, T ms, E J) per point, the knee starred."""
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    pts = sorted(points, key=lambda p: p[1])
    ax.plot([p[1] for p in pts], [p[2] for p in pts], "-o", color="C0", label="best plan per λ")
    same: dict[tuple[float, float], list[float]] = {}
    for lam, t, e in points:  # one label per distinct plan: "λ=0.3, 0.5"
        same.setdefault((round(t, 6), round(e, 6)), []).append(lam)
    for (t, e), lams in same.items():
        ax.annotate("λ=" + ", ".join(f"{x:g}" for x in lams), (t, e), textcoords="offset points",
                    xytext=(5, 4), fontsize=8)
    if knee is not None:
        _, t, e = points[knee]
        ax.plot([t], [e], marker="*", markersize=16, color="C3", linestyle="none", label="knee")
    if reference is not None:
        label, t, e = reference
        ax.plot([t], [e], marker="X", markersize=10, color="C2", linestyle="none", label=label)
    ax.set_xlabel("iteration time T_iter (ms)")
    ax.set_ylabel("energy E_iter (J)")
    ax.set_title("energy-time trade-off")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_network(
    sweeps: Mapping[str, tuple[str, Mapping[str, Sequence[tuple[float, float]]]]], path: Path
) -> Path:
    """Mean iteration time against the swept network value, one panel per sweep.

    ``sweeps`` maps a sweep name to (x-axis label, {solver label: [(x, mean ms), ...]}).
    """
    fig, axes = plt.subplots(1, max(1, len(sweeps)), figsize=(5.6 * max(1, len(sweeps)), 4),
                             squeeze=False)
    for ax, (name, (xlabel, series)) in zip(axes.flat, sweeps.items(), strict=False):
        for label, pts in series.items():
            if pts:
                xs, ys = zip(*sorted(pts), strict=True)
                ax.plot(xs, ys, marker="o", color=color(label), label=label)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel + " (log)")
        ax.set_ylabel("mean iteration time (ms)")
        ax.set_title(f"{name} sweep")
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    return _save(fig, path)


def plot_pipeline(instance: Instance, panels: Sequence[tuple[str, Plan]], path: Path) -> Path:
    """Pipeline diagram: per stage its GPU (type, site), layers, compute and communication.

    One horizontal bar per stage: backward communication, compute, forward
    communication (ms); the bottleneck stage is outlined. Panels share the time axis.
    """
    from matplotlib.patches import Patch

    from geoplan.cost import evaluate

    gpus = {g.id: g for g in instance.gpus}
    parts = (("comm bwd", "C1"), ("compute", "C0"), ("comm fwd", "C2"))
    heights = [max(1, p.q) for _, p in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 1.2 + 0.55 * sum(heights)),
                             squeeze=False, sharex=True, gridspec_kw={"height_ratios": heights})
    evs = [evaluate(instance, plan) for _, plan in panels]
    widest = max((s.tau_ms for ev in evs for s in ev.stages), default=1.0)
    for ax, (title, plan), ev in zip(axes.flat, panels, evs, strict=True):
        labels = []
        first = 1
        bott = ev.bottleneck_stage if ev.stages else -1
        for q, s in enumerate(ev.stages):
            g = gpus.get(s.gpu)
            kind = f"{g.type or '?'}, site {g.site or '?'}" if g is not None else "?"
            labels.append(f"S{q + 1}: {s.gpu} ({kind})\nlayers {first}-{first + s.layers - 1}")
            first += s.layers
            left = 0.0
            for width, (_, c) in zip((s.comm_bwd_ms, s.compute_ms, s.comm_fwd_ms), parts,
                                     strict=True):
                ax.barh(q, width, left=left, color=c)
                left += width
            if q == bott:
                ax.barh(q, left, fill=False, edgecolor="black", linewidth=1.8)
            ax.text(left, q, f" {s.tau_ms:.1f} ms", va="center", fontsize=8)
        ax.set_xlim(0, widest * 1.15)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("per-micro-batch stage time tau (ms); outlined: bottleneck")
        ax.set_title(f"{title}: T_iter {ev.t_iter_ms:.1f} ms, E_iter {ev.e_iter_j:.1f} J, "
                     f"{plan.q} stages", fontsize=9)
        ax.legend(handles=[Patch(color=c, label=n) for n, c in parts], fontsize=7,
                  loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)
