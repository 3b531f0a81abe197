"""Turn a results file into a Markdown report with PNG figures.

The report puts the paper's published tables (``bench.paper``) beside ours, says
which optima are proven and which values are only best known, shows certified
gaps only where a solver proved a bound, and lists every run that crashed,
timed out or was skipped. Experiment settings come from ``manifest.json`` next to
the results file (written by the runner), else from the shipped experiment files.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paper import CAVEAT, PAPER
from bench.runner import FAILED, MANIFEST_NAME, ResultsFile
from geoplan.errors import InputError

__all__ = ["OK", "ci95", "knee_index", "load_results", "write_report"]

OK = ("optimal", "feasible")
Row = dict[str, Any]
#: Two-sided 97.5% Student t quantiles by degrees of freedom (1..30); 1.96 beyond.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_DASH = "—"


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


# --------------------------------------------------------------------------- loading


def load_results(path: str | Path) -> tuple[list[Row], dict[str, Any], Path]:
    """Rows (one per run key, the last one written wins), the manifest, the results path."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.jsonl"
    if not p.exists():
        raise InputError("results", str(path), "results file not found")
    raw = ResultsFile(p).rows()
    if not raw:
        raise InputError("results", str(p), "no result rows in the file")
    by_key: dict[str, Row] = {}
    for k, r in enumerate(raw):
        if "experiment" not in r or "status" not in r:
            raise InputError("results", str(p), f"line {k + 1} is not a geoplan bench row")
        by_key[r.get("run_key") or f"line-{k}"] = r
    manifest_path = p.parent / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    return list(by_key.values()), manifest, p


def _experiment_info(name: str, manifest: Mapping[str, Any], profile: str) -> dict[str, Any]:
    info = manifest.get("experiments", {}).get(name)
    if info:
        return dict(info)
    try:
        from bench.experiments import load_experiment

        return load_experiment(name, profile).to_manifest()
    except InputError:
        return {"name": name, "title": name, "description": "", "report": {}, "solvers": [],
                "instances": []}


# --------------------------------------------------------------------------- formatting


def _cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |",
             "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _f(x: float | None, digits: int = 1) -> str:
    return _DASH if x is None else f"{x:.{digits}f}"


def _pct(x: float | None, digits: int = 1, sign: bool = True) -> str:
    if x is None:
        return _DASH
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _si(n: float) -> str:
    """24, 5.4K, 637K, 43.8M, 40.9B (the paper's style)."""
    for div, suf in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            v = n / div
            return f"{v:.3g}{suf}" if v < 1000 else f"{n:.3g}"
    return f"{int(n)}"


def _anchor(text: str) -> str:
    keep = [c.lower() if c.isalnum() else "-" if c in " -" else "" for c in text]
    return "".join(keep).strip("-")


def _ok(r: Row) -> bool:
    return r.get("status") in OK and r.get("objective") is not None


def _status_summary(rows: Sequence[Row]) -> str:
    """'skipped' / 'timeout 2/3, crashed 1/3': why a cell has no value."""
    if not rows:
        return _DASH
    c = Counter(r["status"] for r in rows)
    if len(c) == 1:
        s = next(iter(c))
        return s if len(rows) == 1 else f"{s} ({len(rows)})"
    return ", ".join(f"{s} {k}/{len(rows)}" for s, k in c.most_common())


def _quality(r: Row) -> str:
    """One run's objective with what is known about it: opt / certified gap / no bound."""
    if not _ok(r):
        return r["status"]
    v = f"{r['objective']:.1f}"
    if r["status"] == "optimal":
        return f"{v} (opt)"
    if r.get("gap") is not None:
        return f"{v} (gap {100 * r['gap']:.2f}%)"
    return f"{v} (no bound)"


def _best(rows: Sequence[Row]) -> Row | None:
    ok = [r for r in rows if _ok(r)]
    return min(ok, key=lambda r: r["objective"]) if ok else None


def _spec(r: Row, key: str, default: Any = None) -> Any:
    return (r.get("instance_spec") or {}).get(key, default)


# --------------------------------------------------------------------------- context


class _Ctx:
    """Shared state while writing one report."""

    def __init__(self, rows: list[Row], manifest: Mapping[str, Any], results: Path, out: Path,
                 figures: bool) -> None:
        self.rows = rows
        self.manifest = manifest
        self.results = results
        self.out = out
        self.fig_dir = out / "figures"
        self.figures = figures
        self.made: list[Path] = []
        self.notes: list[str] = []
        self._instances: dict[str, Any] = {}

    def instance(self, r: Row) -> Any:
        """The run's instance (from the results' instances folder, else regenerated)."""
        from geoplan.model.instance import Instance

        key = f"{r['instance']}/{r.get('instance_hash')}"
        if key in self._instances:
            return self._instances[key]
        inst = None
        f = r.get("instance_file")
        path = self.results.parent / "instances" / f if f else None
        if path is not None and path.exists():
            inst = Instance.from_dict(json.loads(path.read_text()))
        else:
            spec = dict(r.get("instance_spec") or {})
            gen = spec.pop("generator", None)
            spec.pop("normalise_by", None)
            from bench.experiments import GENERATORS

            if gen in GENERATORS:
                inst = Instance.from_dict(GENERATORS[gen][0](**spec, name=r["instance"]))
                if inst.fingerprint != r.get("instance_hash"):
                    self.notes.append(f"instance {r['instance']} was regenerated from its spec "
                                      "and differs from the one run (normalisers?)")
        self._instances[key] = inst
        return inst

    def figure(self, fn: Callable[..., Path], name: str, *args: Any, **kw: Any) -> str:
        """Draw a figure; return its Markdown (empty when figures are off or drawing failed)."""
        if not self.figures:
            return ""
        path = self.fig_dir / name
        try:
            fn(*args, path=path, **kw)
        except Exception as exc:  # a broken figure must not cost the report
            self.notes.append(f"figure {name} could not be drawn: {type(exc).__name__}: {exc}")
            return ""
        self.made.append(path)
        return f"![{name}](figures/{name})"


def _by(rows: Iterable[Row], *keys: str) -> dict[tuple[Any, ...], list[Row]]:
    out: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for r in rows:
        out[tuple(r.get(k) for k in keys)].append(r)
    return out


def _instance_order(rows: Sequence[Row], info: Mapping[str, Any]) -> list[str]:
    names = [i["name"] for i in info.get("instances", [])]
    seen = list(dict.fromkeys(r["instance"] for r in rows))
    return [n for n in names if n in seen] + [n for n in seen if n not in names]


def _paper_block(key: str | None) -> str:
    if not key or key not in PAPER or "rows" not in PAPER[key]:
        return ""
    p = PAPER[key]
    cols = list(p["columns"])
    body = [[_DASH if v is None else v for v in row] for row in p["rows"]]
    out = [f"**Paper (quoted as published): {p['title']}**", "", _table(cols, body)]
    if p.get("note"):
        out += ["", f"_{p['note']}_"]
    return "\n".join(out)


# --------------------------------------------------------------------------- renderers


def _versus(ctx: _Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    rep = info.get("report", {})
    ours, base = rep.get("ours", "MA"), rep.get("baseline", "impr. Metis")
    paper = PAPER.get(info.get("paper") or "", {})
    pmap = {(r[0], r[1]): r for r in paper.get("rows", [])}
    body = []
    for name in _instance_order(rows, info):
        ir = [r for r in rows if r["instance"] == name]
        n, layers = ir[0]["n"], ir[0]["layers"]
        mine = [r for r in ir if r["label"] == ours]
        theirs = [r for r in ir if r["label"] == base]
        vals = [r["objective"] for r in mine if _ok(r)]
        bvals = [r["objective"] for r in theirs if _ok(r)]
        bmean = statistics.fmean(bvals) if bvals else None
        best = min(vals) if vals else None
        mean = statistics.fmean(vals) if vals else None
        gain = (100 * (bmean - best) / bmean) if best is not None and bmean else None
        pr = pmap.get((n, layers))
        body.append([
            n, layers,
            _f(pr[2]) if pr else _DASH, _f(pr[3]) if pr else _DASH,
            _pct(pr[6]) if pr else _DASH,
            _f(bmean) if bvals else _status_summary(theirs),
            _f(best) if vals else _status_summary(mine),
            _f(mean), f"±{ci95(vals):.1f}" if vals else _DASH,
            _pct(gain),
            f"{len(vals)}/{len(mine)}",
        ])
    header = ["GPUs", "L", "paper: impr. Metis (ms)", "paper: GeoTrain best (ms)",
              "paper: gain %", f"ours: {base} (ms)", f"ours: {ours} best (ms)",
              f"{ours} mean (ms)", "95% CI", "gain %", f"{ours} runs ok"]
    out = [_table(header, body), "",
           f"Gain % = (T_{base} - T_{ours} best) / T_{base}, {base} averaged over its seeds; "
           "positive favours the MA. The 95% CI is the Student-t half-width over the MA's "
           "seeds. Paper columns are blank where the paper has no such row."]
    if paper.get("note"):
        out.append(f"Paper: {paper['note']}")
    return out


def _exact(ctx: _Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    from geoplan.model.space import plan_space_size

    rep = info.get("report", {})
    heur = rep.get("heuristic", "MA")
    exact = list(rep.get("exact") or [s["label"] for s in info.get("solvers", [])
                                      if s["label"] != heur])
    opt_rows = []
    tract_rows = []
    for name in _instance_order(rows, info):
        ir = [r for r in rows if r["instance"] == name]
        n, layers = ir[0]["n"], ir[0]["layers"]
        proven = [r for r in ir if r["status"] == "optimal" and r.get("objective") is not None]
        ok = [r for r in ir if _ok(r)]
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
            t_star, by, star = None, "no plan", _DASH
        mine = [r for r in ir if r["label"] == heur]
        vals = [r["objective"] for r in mine if _ok(r)]
        match = sum(1 for v in vals if t_star is not None and abs(v - t_star) <= 1e-6 * t_star)
        optimality = (100 * t_star / statistics.fmean(vals)) if vals and t_star else None
        opt_rows.append([
            n, layers, star, by,
            _f(min(vals), 3) if vals else _status_summary(mine),
            _f(statistics.fmean(vals), 3) if vals else _DASH,
            (_pct(optimality, 2, sign=False) + ("%" if proven else "% of best known"))
            if optimality is not None else _DASH,
            f"{match}/{len(mine)}" if mine else _DASH,
        ])
        cells: list[Any] = [n, layers, _si(plan_space_size(n, layers))]
        for lab in exact:
            er = [r for r in ir if r["label"] == lab]
            b = _best(er)
            if b is not None:
                cells += [_quality(b), f"{b.get('wall_s', 0):.1f} s"]
            else:
                t = max((r.get("elapsed_s") or 0 for r in er), default=0)
                cells += [_status_summary(er), f"{t:.1f} s" if er and t else _DASH]
        walls = [r.get("wall_s") or 0 for r in mine if _ok(r)]
        cells += [_f(min(vals)) if vals else _status_summary(mine),
                  f"{statistics.fmean(walls):.1f} s" if walls else _DASH]
        tract_rows.append(cells)
    out = ["**Ours, cf. Table 5 (optimality)**", "",
           _table(["N", "L", "T* (ms)", "T* proven by", f"{heur} best (ms)", f"{heur} mean (ms)",
                   "optimality", "match"], opt_rows), "",
           "T* is the least objective any solver proved optimal; where none did, it is the best "
           "known value and says so. Optimality = T* / mean of the MA's seeds; match counts "
           "seeds within 1e-6 (relative) of T*.", "",
           _paper_block(rep.get("paper_optimality")), "",
           "**Ours, cf. Table 6 (tractability)**", ""]
    hdr = ["N", "L", "space f(N,L)"]
    for lab in exact:
        hdr += [f"{lab} iter. (ms)", f"{lab} plan."]
    hdr += [f"{heur} best (ms)", f"{heur} plan. (mean)"]
    out += [_table(hdr, tract_rows), "",
            "(opt): proven optimal; (gap x%): certified by the solver's own bound; (no bound): "
            "a plan without proof. A status instead of a value means no plan: timeout (killed "
            "at budget + grace), no_solution (budget ran out without a plan), skipped (not "
            "started, see the list of runs at the end).", ""]
    out.append(_paper_block(info.get("paper")))
    return out


def _sites(ctx: _Ctx, r: Row | None) -> str:
    if r is None or not r.get("plan"):
        return _DASH
    inst = ctx.instance(r)
    if inst is None:
        return "?"
    site = {g.id: g.site or "?" for g in inst.gpus}
    used = list(dict.fromkeys(site.get(s["gpu"], "?") for s in r["plan"]["stages"]))
    return "+".join(sorted(used)) + f" ({len(r['plan']['stages'])} GPUs)"


def _network(ctx: _Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
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
        for x, xr in sorted(_by(tr, "instance").items(), key=lambda kv: _spec(kv[1][0], xkey)):
            xv = _spec(xr[0], xkey)
            mine = [r for r in xr if r["label"] == ours]
            theirs = [r for r in xr if r["label"] == base]
            mv = [r["objective"] for r in mine if _ok(r)]
            bv = [r["objective"] for r in theirs if _ok(r)]
            mm = statistics.fmean(mv) if mv else None
            bm = statistics.fmean(bv) if bv else None
            gain = 100 * (bm - mm) / bm if mm is not None and bm else None
            if mm is not None:
                pts[ours].append((xv, mm))
            if bm is not None:
                pts[base].append((xv, bm))
            if gain is not None and (best_gain is None or gain > best_gain[0]):
                best_gain = (gain, x[0])
            body.append([f"{xv:g}", _f(bm) if bv else _status_summary(theirs),
                         _f(mm) if mv else _status_summary(mine), _f(min(mv) if mv else None),
                         _pct(gain), _sites(ctx, _best(theirs)), _sites(ctx, _best(mine)),
                         published.get(xv, _DASH), f"{len(mv)}/{len(mine)}"])
        out += [f"**{tag.capitalize()} sweep** ({xkey})", "",
                _table([xkey, f"{base} mean (ms)", f"{ours} mean (ms)", f"{ours} best (ms)",
                        "gain % (means)", f"{base} sites", f"{ours} sites",
                        "paper: gain %", f"{ours} runs ok"], body), ""]
        if paper.get(tag, {}).get("text"):
            out += [f"Paper: {paper[tag]['text']}", ""]
        series[tag] = (xkey, pts)
    if paper.get("note"):
        out.append(f"_Paper setting: {paper['note']}_")
    if series:
        from bench.plots import plot_network

        md = ctx.figure(plot_network, "network.png", series)
        if md:
            out += ["", md]
    if best_gain is not None:
        inst_rows = [r for r in rows if r["instance"] == best_gain[1]]
        m, b = _best([r for r in inst_rows if r["label"] == ours]), _best(
            [r for r in inst_rows if r["label"] == base])
        panels = [(f"{lab} ({best_gain[1]})", r) for lab, r in ((base, b), (ours, m)) if r]
        md = _pipeline(ctx, panels, "pipeline_network.png")
        if md:
            out += ["", f"Plans at the largest gain ({best_gain[0]:+.1f}%, {best_gain[1]}), "
                    "cf. the paper's Fig. 9:", "", md]
    return out


def _pipeline(ctx: _Ctx, panels: Sequence[tuple[str, Row]], name: str) -> str:
    from bench.plots import plot_pipeline
    from geoplan.model.plan import Plan

    if not panels:
        return ""
    inst = ctx.instance(panels[0][1])
    if inst is None:
        return ""
    plans = [(t, Plan.from_dict(r["plan"])) for t, r in panels]
    return ctx.figure(plot_pipeline, name, inst, plans)


def _types(ctx: _Ctx, r: Row) -> str:
    inst = ctx.instance(r)
    if inst is None or not r.get("plan"):
        return _DASH
    kinds = {g.id: g.type or g.id for g in inst.gpus}
    c = Counter(kinds.get(s["gpu"], "?") for s in r["plan"]["stages"])
    return ", ".join(f"{k}x {t}" for t, k in sorted(c.items()))


def _energy(ctx: _Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    rep = info.get("report", {})
    ours = rep.get("ours", "MA")
    mine = [r for r in rows if r["label"] == ours]
    per: list[tuple[float, Row | None, list[Row]]] = []
    for _, lr in sorted(_by(mine, "instance").items(),
                        key=lambda kv: kv[1][0].get("lambda", 1.0)):
        per.append((float(lr[0].get("lambda", 1.0)), _best(lr), lr))
    ref = next((r for _, r, _ in per if r is not None), None)
    t_ref = ref.get("t_ref_ms") if ref else None
    e_ref = ref.get("e_ref_j") if ref else None
    norm_by = ref.get("normalised_by") if ref else None
    one = next((b for lam, b, _ in per if lam == 1.0 and b is not None), None)
    t1 = one["t_iter_ms"] if one else None
    e1 = one["e_iter_j"] if one else None
    pts = [(b["t_iter_ms"] / (t_ref or 1), b["e_iter_j"] / (e_ref or 1)) for _, b, _ in per if b]
    k = knee_index(pts)
    ok_lams = [lam for lam, b, _ in per if b]
    knee_lam = ok_lams[k] if k is not None else None
    body = []
    for lam, b, lr in per:
        if b is None:
            body.append([f"{lam:g}", _status_summary(lr)] + [_DASH] * 7)
            continue
        same = sum(1 for r in lr if _ok(r) and r.get("plan") == b.get("plan"))
        dt = 100 * (b["t_iter_ms"] - t1) / t1 if t1 else None
        de = 100 * (b["e_iter_j"] - e1) / e1 if e1 else None
        body.append([f"{lam:g}" + (" ⋆" if lam == knee_lam else ""), _f(b["t_iter_ms"]),
                     _f(b["e_iter_j"]), _pct(dt), _pct(de),
                     _f(b["t_iter_ms"] / t_ref, 3) if t_ref else _DASH,
                     _f(b["e_iter_j"] / e_ref, 3) if e_ref else _DASH,
                     _types(ctx, b), f"{same}/{len(lr)}"])
    if t_ref and e_ref:
        nrec = (ref or {}).get("normaliser") or {}
        gpus = _types(ctx, {**ref, "plan": nrec["plan"]}) if ref and nrec.get("plan") else _DASH
        body.append([f"{norm_by} (reference)", _f(t_ref), _f(e_ref),
                     _pct(100 * (t_ref - t1) / t1 if t1 else None),
                     _pct(100 * (e_ref - e1) / e1 if e1 else None), "1.000", "1.000", gpus,
                     _DASH])
    out = [_table(["λ", "T_iter (ms)", "E_iter (J)", "ΔT %", "ΔE %", "T/T_ref", "E/E_ref",
                   "GPUs selected", "seeds on this plan"], body), "",
           f"Best of the {ours}'s seeds per λ. ΔT and ΔE against the λ = 1 plan. Normalisers "
           f"T_ref = {_f(t_ref)} ms, E_ref = {_f(e_ref)} J from {norm_by}. ⋆ marks the knee "
           "(maximum perpendicular distance from the line joining the extreme points, on the "
           "normalised axes)" + (" — fewer than three distinct plans, no knee." if k is None
                                 else "."), "",
           _paper_block(info.get("paper"))]
    p7 = PAPER.get(info.get("paper") or "", {}).get("reference")
    if p7:
        out += ["", f"Paper reference row: {p7['label']} {p7['t_ms']} ms, {p7['e_j']} J "
                f"({p7['dt_pct']:+.1f}% T, {p7['de_pct']:+.1f}% E against λ = 1), "
                f"{p7['gpus']}."]
    if pts:
        from bench.plots import plot_pareto

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


def _anytime(ctx: _Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    budgets = sorted({r["budget_s"] for r in rows})
    labels = list(dict.fromkeys([s["label"] for s in info.get("solvers", [])]
                                + [r["label"] for r in rows]))
    order = _instance_order(rows, info)
    best_known: dict[str, float | None] = {}
    best_bound: dict[str, float | None] = {}
    for name in order:
        ir = [r for r in rows if r["instance"] == name]
        b = _best(ir)
        best_known[name] = b["objective"] if b else None
        lbs = [r["lower_bound"] for r in ir if r.get("lower_bound") is not None]
        best_bound[name] = max(lbs) if lbs else None
    out: list[str] = []
    # Summary per solver and budget.
    summary = []
    for lab in labels:
        for bud in budgets:
            sr = [r for r in rows if r["label"] == lab and r["budget_s"] == bud]
            if not sr:
                continue
            ok = [r for r in sr if _ok(r)]
            excess = [100 * (r["objective"] - best_known[r["instance"]]) / best_known[
                r["instance"]] for r in ok if best_known.get(r["instance"])]
            own = [100 * r["gap"] for r in ok if r.get("gap") is not None]
            cert = [100 * (r["objective"] - best_bound[r["instance"]]) / r["objective"]
                    for r in ok if best_bound.get(r["instance"]) is not None]
            summary.append([lab, f"{bud:g}", f"{len(ok)}/{len(sr)}",
                            sum(1 for r in ok if r["status"] == "optimal"),
                            _f(statistics.median(excess), 2) if excess else _DASH,
                            _f(statistics.median(own), 2) if own else "no bound",
                            _f(statistics.median(cert), 2) if cert else _DASH,
                            _status_summary([r for r in sr if not _ok(r)]) if len(ok) < len(sr)
                            else ""])
    out += ["**Summary over instances** (medians)", "",
            _table(["solver", "budget (s)", "plans", "proven optimal", "% above best known",
                    "own certified gap %", "gap to best bound %", "runs without plan"],
                   summary), "",
            "Best known: the least objective any run found on the instance. Own certified gap: "
            "from the solver's own bound (heuristics prove none). Gap to best bound: against "
            "the largest lower bound any solver proved on the instance, a valid certificate "
            "for every plan.", ""]
    families = list(dict.fromkeys(_spec(r, "generator", "?") for r in rows))
    for fam in families:
        body = []
        for name in order:
            ir = [r for r in rows if r["instance"] == name and _spec(r, "generator") == fam]
            if not ir:
                continue
            for lab in labels:
                lr = [r for r in ir if r["label"] == lab]
                if not lr:
                    continue
                cells = [ir[0]["n"], ir[0]["layers"], lab]
                for bud in budgets:
                    br = [r for r in lr if r["budget_s"] == bud]
                    b = _best(br)
                    cells.append(_quality(b) if b else _status_summary(br))
                body.append(cells)
            body.append([ir[0]["n"], ir[0]["layers"], "best known / best bound",
                         f"{_f(best_known[name])} / {_f(best_bound[name])}"]
                        + [""] * (len(budgets) - 1))
        out += [f"**Family {fam}**: objective (ms at λ = 1) at each budget", "",
                _table(["N", "L", "solver", *(f"{b:g} s" for b in budgets)], body), ""]
    # Figures: anytime curves from the longest run of each solver, and gap vs N.
    if ctx.figures:
        from bench.plots import plot_anytime, plot_gap_vs_n

        top = max(budgets)
        figs = []
        for name in order:
            curves = {}
            for lab in labels:
                lr = sorted((r for r in rows if r["instance"] == name and r["label"] == lab
                             and r["budget_s"] == top and r.get("trace")),
                            key=lambda r: r.get("seed", 0))
                if lr:
                    r = lr[0]
                    curves[lab] = (r["trace"], r.get("wall_s") or r.get("elapsed_s"))
            if curves:
                md = ctx.figure(plot_anytime, f"anytime_{name}.png", curves,
                                title=f"{name}, budget {top:g} s", best_known=best_known[name])
                if md:
                    figs.append(md)
        if figs:
            out += [f"Anytime curves (runs with the {top:g} s budget):", "", *figs, ""]
        panels: dict[str, dict[str, list[tuple[int, float]]]] = {}
        for name in order:
            ir = [r for r in rows if r["instance"] == name and r["budget_s"] == top]
            if not ir or best_bound.get(name) is None:
                continue
            key = f"{_spec(ir[0], 'generator', '?')}, L = {ir[0]['layers']}"
            for lab in labels:
                b = _best([r for r in ir if r["label"] == lab])
                if b is not None:
                    gap = 100 * (b["objective"] - best_bound[name]) / b["objective"]
                    panels.setdefault(key, {}).setdefault(lab, []).append((ir[0]["n"], gap))
        if panels:
            md = ctx.figure(plot_gap_vs_n, "gap_vs_n.png", panels)
            if md:
                out += [f"Gap to the best proven bound against N ({top:g} s budget):", "", md]
        else:
            out.append("No solver proved a lower bound, so there is no gap-vs-N figure.")
    return out


def _warmstart(ctx: _Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    solvers = info.get("solvers") or []
    cold = {s["name"]: s["label"] for s in solvers if not s.get("warm_start")}
    warm = [(s["name"], s["label"]) for s in solvers if s.get("warm_start")]
    body = []

    def describe(rr: list[Row]) -> list[str]:
        b = _best(rr)
        if b is None:
            return [_status_summary(rr), _DASH, _DASH]
        proof = f"{b['wall_s']:.1f} s" if b["status"] == "optimal" else \
            f"not proven in {b['budget_s']:g} s"
        return [b["status"], proof, _quality(b)]

    for name in _instance_order(rows, info):
        ir = [r for r in rows if r["instance"] == name]
        for solver, wlabel in warm:
            clabel = cold.get(solver)
            cr = [r for r in ir if r["label"] == clabel]
            wr = [r for r in ir if r["label"] == wlabel]
            acc = [((r.get("info") or {}).get("warm_start") or {}).get("accepted") for r in wr]
            body.append([name, solver, *describe(cr), *describe(wr),
                         ", ".join(_DASH if a is None else str(a) for a in acc) or _DASH])
    return [_table(["instance", "solver", "cold status", "cold time to proof", "cold objective",
                    "warm status", "warm time to proof", "warm objective", "warm start accepted"],
                   body), "",
            "Warm runs spend the first 20% of the same budget on the memetic algorithm; their "
            "time to proof includes it. Objectives carry (opt), (gap x%) or (no bound)."]


def _generic(ctx: _Ctx, rows: list[Row], info: Mapping[str, Any]) -> list[str]:
    body = []
    for name in _instance_order(rows, info):
        for (lab, bud), lr in _by([r for r in rows if r["instance"] == name], "label",
                                  "budget_s").items():
            vals = [r["objective"] for r in lr if _ok(r)]
            b = _best(lr)
            body.append([name, lab, f"{bud:g}", f"{len(vals)}/{len(lr)}",
                         _quality(b) if b else _status_summary(lr),
                         _f(statistics.fmean(vals)) if vals else _DASH])
    return [_table(["instance", "solver", "budget (s)", "runs ok", "best", "mean"], body)]


RENDERERS: dict[str, Callable[[_Ctx, list[Row], Mapping[str, Any]], list[str]]] = {
    "versus": _versus,
    "exact": _exact,
    "network": _network,
    "energy": _energy,
    "anytime": _anytime,
    "warmstart": _warmstart,
    "generic": _generic,
}


# --------------------------------------------------------------------------- the report


def _failures(rows: Sequence[Row]) -> list[str]:
    bad = [r for r in rows if r["status"] in (*FAILED, "skipped")]
    if not bad:
        return ["Every run finished with a solver status; none crashed, timed out or was "
                "skipped."]
    body = []
    for r in sorted(bad, key=lambda r: (r["status"], r["experiment"], r["label"],
                                        r["instance"], r.get("seed", 0))):
        msg = str(r.get("message") or "")
        body.append([r["status"], r["experiment"], r["label"], r["instance"], r.get("seed"),
                     f"{r.get('budget_s', 0):g}", msg[:180] + ("…" if len(msg) > 180 else "")])
    c = Counter(r["status"] for r in bad)
    return [", ".join(f"{k}: {v}" for k, v in sorted(c.items())) + ".", "",
            _table(["status", "experiment", "solver", "instance", "seed", "budget (s)",
                    "message"], body)]


def write_report(results: str | Path, out: str | Path | None = None, *, figures: bool = True
                 ) -> Path:
    """Write ``report.md`` (and ``figures/*.png``) for a results file; returns the report path."""
    rows, manifest, path = load_results(results)
    out_dir = Path(out) if out is not None else path.parent / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = _Ctx(rows, manifest, path, out_dir, figures)
    order = list(dict.fromkeys([*manifest.get("order", []), *(r["experiment"] for r in rows)]))
    order = [e for e in order if any(r["experiment"] == e for r in rows)]
    profiles = sorted({str(r.get("profile")) for r in rows})
    versions = sorted({f"{r.get('version')} @ {str(r.get('git_commit'))[:12]}"
                       + (" (dirty)" if str(r.get("git_commit")).endswith("-dirty") else "")
                       for r in rows})
    starts = [r["started_at"] for r in rows if r.get("started_at")]
    ends = [r["finished_at"] for r in rows if r.get("finished_at")]
    statuses = Counter(r["status"] for r in rows)
    head = [
        "# geoplan benchmark report", "",
        f"Results: `{path}` — {len(rows)} runs, profile {', '.join(profiles)}; "
        f"generated {datetime.now(UTC).isoformat(timespec='seconds')}.",
        f"Package: {'; '.join(versions)}. Hosts: "
        f"{', '.join(sorted({str(r.get('host')) for r in rows}))}.",
        f"Runs: {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}."
        + (f" First run started {min(starts)}, last finished {max(ends)}."
           if starts and ends else ""),
        "", f"> {CAVEAT}", "",
        "Statuses: `optimal` proven by the solver; `feasible` a plan without proof (a gap is "
        "shown only when the solver proved a bound); `no_solution` no plan within the budget; "
        "`timeout` killed at budget + grace; `crashed`/`error` the run failed; `skipped` not "
        "started (solver unavailable or excluded by the experiment). All objectives are "
        "priced by the shared evaluator (ms at λ = 1).", "",
        "## Contents", "",
    ]
    sections: list[str] = []
    for name in order:
        er = [r for r in rows if r["experiment"] == name]
        info = _experiment_info(name, manifest, str(er[0].get("profile", "full")))
        title = info.get("title") or name
        kind = (info.get("report") or {}).get("kind", "generic")
        head.append(f"- [{title}](#{_anchor(title)})")
        c = Counter(r["status"] for r in er)
        sec = [f"## {title}", ""]
        if info.get("description"):
            sec += [" ".join(str(info["description"]).split()), ""]
        sec += [f"Profile `{er[0].get('profile')}`: seeds {info.get('seeds')}, budgets "
                f"{info.get('budgets')} s, grace {info.get('grace')} s, {len(er)} runs ("
                + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) + ").", ""]
        try:
            sec += RENDERERS.get(kind, _generic)(ctx, er, info)
        except Exception as exc:  # keep the rest of the report
            ctx.notes.append(f"section {name} ({kind}) failed: {type(exc).__name__}: {exc}; "
                             "shown as a generic table")
            sec += _generic(ctx, er, info)
        sections += [*sec, ""]
    head += ["- [Runs that failed, timed out or were skipped](#runs-that-failed-timed-out-or-"
             "were-skipped)", ""]
    tail = ["## Runs that failed, timed out or were skipped", "", *_failures(rows), ""]
    if ctx.notes:
        tail += ["## Report notes", "", *(f"- {n}" for n in ctx.notes), ""]
    tail += ["## Reproduce", "",
             "```",
             f"geoplan bench report {path} --out {out_dir}",
             *(f"geoplan bench run {n} --profile {profiles[0]} --resume --out {path.parent}"
               for n in order),
             "```", ""]
    report = out_dir / "report.md"
    report.write_text("\n".join([*head, *sections, *tail]))
    return report
