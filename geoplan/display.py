"""Human-readable tables of plans and evaluations, and a progress printer."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from geoplan.cost import Evaluation, objective_units
from geoplan.cost.hybrid_evaluate import HybridEvaluation
from geoplan.model.hybrid import HybridPlan
from geoplan.model.plan import Plan
from geoplan.solving.core import Callbacks

__all__ = [
    "ProgressPrinter",
    "format_count",
    "format_evaluation",
    "format_hybrid_evaluation",
    "format_hybrid_plan",
    "format_plan",
    "format_solvers",
    "space_size_text",
]

#: Integers with more digits than this are printed as mantissa, exponent and digit count.
MAX_EXACT_DIGITS = 60
#: Above this many stage counts min(N, L), f(N, L) is summed in logarithms (exact is slow).
_EXACT_SPACE_TERMS = 1000


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[k]) for r in rows)) if rows else len(h)
              for k, h in enumerate(header)]
    line = "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def format_plan(plan: Plan) -> str:
    """Stage table of a plan alone: stage, GPU, layers and the layer range."""
    rows = []
    first = 1
    for q, s in enumerate(plan.stages):
        rows.append([str(q + 1), s.gpu, str(s.layers), f"{first}-{first + s.layers - 1}"])
        first += s.layers
    return _table(["stage", "gpu", "layers", "range"], rows)


def format_evaluation(ev: Evaluation) -> str:
    """Stage table with per-stage times and memory, then the totals."""
    rows = []
    first = 1
    bott = ev.bottleneck_stage if ev.stages else -1
    for q, s in enumerate(ev.stages):
        rows.append([
            str(q + 1) + ("*" if q == bott else ""),
            s.gpu,
            str(s.layers),
            f"{first}-{first + s.layers - 1}",
            f"{s.compute_ms:.3f}",
            f"{s.comm_fwd_ms:.3f}",
            f"{s.comm_bwd_ms:.3f}",
            f"{s.tau_ms:.3f}",
            f"{s.memory_gb:.2f}/{s.memory_limit_gb:.2f}",
        ])
        first += s.layers
    table = _table(
        ["stage", "gpu", "layers", "range", "compute ms", "fwd ms", "bwd ms", "tau ms",
         "memory GB"],
        rows,
    )
    return "\n".join([table, "(* bottleneck stage)", f"T_iter    {ev.t_iter_ms:.3f} ms",
                      *_totals(ev)])


def _totals(ev: Evaluation | HybridEvaluation) -> list[str]:
    """E_iter, the objective with its normalisers, feasibility and the violations."""
    return [
        f"E_iter    {ev.e_iter_j:.3f} J",
        f"objective {ev.objective:.6g} {objective_units(ev.lam)} (lambda {ev.lam:g}"
        + (f", T_ref {ev.t_ref_ms:.6g} ms, E_ref {ev.e_ref_j:.6g} J)"
           if ev.t_ref_ms is not None and ev.e_ref_j is not None else ")"),
        "feasible  " + ("yes" if ev.feasible else "NO"),
        *(f"  - {v.message}" for v in ev.violations),
    ]


def format_hybrid_plan(plan: HybridPlan) -> str:
    """Stage table of a hybrid plan alone: layers, tp, recompute, replicas (GPUs x samples)."""
    rows = []
    first = 1
    for q, s in enumerate(plan.stages):
        reps = "  ".join("[" + " ".join(r.gpus) + "]" + (f" x{r.samples}" if r.samples else "")
                         for r in s.replicas)
        rows.append([str(q + 1), str(s.layers), f"{first}-{first + s.layers - 1}", str(s.tp),
                     str(len(s.replicas)), s.recompute, reps])
        first += s.layers
    head = _table(["stage", "layers", "range", "tp", "replicas", "recompute", "GPUs x samples"],
                  rows)
    extra = []
    if plan.micro_batch_size is not None:
        extra.append(f"micro-batch {plan.micro_batch_size}")
    if plan.zero is not None:
        extra.append(f"zero {plan.zero}")
    return head + ("\n" + ", ".join(extra) if extra else "")


def format_hybrid_evaluation(ev: HybridEvaluation) -> str:
    """Per stage and replica: GPUs, samples, compute, TP, sends, tau, A_q, memory; totals."""
    rows = []
    first = 1
    bott = ev.bottleneck_stage if ev.stages else -1
    for q, s in enumerate(ev.stages):
        for r, rep in enumerate(s.replicas):
            head = r == 0
            rows.append([
                (str(q + 1) + ("*" if q == bott else "")) if head else "",
                f"{first}-{first + s.layers - 1}" if head else "",
                (f"{s.tp}" + (" rc" if s.recompute == "full" else "")) if head else "",
                " ".join(rep.gpus),
                str(rep.samples),
                f"{rep.compute_ms:.3f}",
                f"{rep.tp_comm_ms:.3f}",
                f"{s.comm_fwd_ms:.3f}" if head else "",
                f"{s.comm_bwd_ms:.3f}" if head else "",
                f"{s.tau_ms:.3f}" if head else "",
                f"{s.grad_sync_ms:.3f}" if head else "",
                f"{rep.memory_gb:.2f}/{rep.memory_limit_gb:.2f}",
            ])
        first += s.layers
    table = _table(["stage", "layers", "tp", "replica GPUs", "samples", "compute ms", "TP ms",
                    "fwd ms", "bwd ms", "tau ms", "sync ms", "memory GB"], rows)
    return "\n".join([
        table,
        f"(* bottleneck stage; micro-batch {ev.micro_batch_size}, zero {ev.zero})",
        f"T_iter    {ev.t_iter_ms:.3f} ms (gradient sync {ev.grad_sync_ms:.3f} ms)",
        *_totals(ev),
    ])


class ProgressPrinter(Callbacks):
    """Prints improvements and (at most twice a second) progress lines to a stream."""

    def __init__(self, stream: TextIO | None = None, interval: float = 0.5) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self._last = 0.0
        self._t0 = time.perf_counter()
        self._live = False

    def on_start(self, solver: str, instance: Any, options: Any) -> None:
        self._t0 = time.perf_counter()
        self.stream.write(
            f"{solver}: {instance.name} (N={instance.n}, L={instance.layers}), "
            f"budget {options.time_limit:.1f} s, seed {options.seed}, {options.threads} thread(s)\n"
        )

    def _clear(self) -> None:
        if self._live and self.stream.isatty():
            self.stream.write("\r\033[K")
        self._live = False

    def on_improvement(self, seconds: float, incumbent: float | None, bound: float | None) -> None:
        self._clear()
        parts = [f"[{seconds:8.2f} s]"]
        if incumbent is not None:
            parts.append(f"incumbent {incumbent:.6g}")
        if bound is not None:
            parts.append(f"bound {bound:.6g}")
        if incumbent and bound is not None and incumbent > 0:
            parts.append(f"gap {100 * max(0.0, incumbent - bound) / incumbent:.3f}%")
        self.stream.write("  ".join(parts) + "\n")
        self.stream.flush()

    def on_progress(self, info: Mapping[str, Any]) -> None:
        now = time.perf_counter()
        if now - self._last < self.interval or not self.stream.isatty():
            return
        self._last = now
        body = "  ".join(
            f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in info.items()
        )
        self.stream.write(f"\r\033[K[{now - self._t0:8.2f} s] {body}")
        self.stream.flush()
        self._live = True

    def on_end(self, result: Any) -> None:
        self._clear()
        self.stream.write(result.summary() + "\n")
        self.stream.flush()


def _digits(n: int) -> int:
    """Decimal digits of a positive integer, without converting it to text."""
    d = max(1, int(n.bit_length() * math.log10(2)))
    while 10**d <= n:
        d += 1
    while d > 1 and 10 ** (d - 1) > n:
        d -= 1
    return d


def format_count(n: int) -> str:
    """``n`` in full when short; else ``1.23456e+5730 (5731 digits)`` (leading digits)."""
    if n < 10**MAX_EXACT_DIGITS:
        return str(n)
    d = _digits(n)
    lead = str(n // 10 ** (d - 6))  # the 6 leading digits (truncated, never rounded up)
    return f"{lead[0]}.{lead[1:]}e+{d - 1} ({d} digits)"


def space_size_text(n_gpus: int, layers: int) -> str:
    """f(N, L) for ``geoplan space``: exact, or from logarithms when it is astronomically large.

    The sum has min(N, L) terms of thousands of digits each; beyond
    ``_EXACT_SPACE_TERMS`` of them it is summed as logarithms (lgamma), which gives
    the leading digits and the digit count, marked ``about``.
    """
    from geoplan.model.space import plan_space_size

    if min(n_gpus, layers) <= _EXACT_SPACE_TERMS:
        return format_count(plan_space_size(n_gpus, layers))
    lg = math.lgamma
    logs = [
        (lg(layers) - lg(k) - lg(layers - k + 1) + lg(n_gpus + 1) - lg(n_gpus - k + 1))
        / math.log(10)
        for k in range(1, min(n_gpus, layers) + 1)
    ]
    top = max(logs)
    log10 = top + math.log10(math.fsum(10 ** (x - top) for x in logs))
    exp = math.floor(log10)
    mantissa = min(10 ** (log10 - exp), 9.99999)
    return f"about {mantissa:.5f}e+{exp} ({exp + 1} digits)"


def format_solvers(solvers: list[Any], *, params: bool = True) -> str:
    """``geoplan solvers``: one line per solver, then its parameters (indented)."""
    from geoplan.solving.registry import SolverUnavailable

    lines: list[str] = []
    for s in solvers:
        try:
            spec = s.spec()
        except SolverUnavailable as exc:
            lines.append(f"{s.name:16s} {'-':9s} unavailable: {exc}")
            continue
        ws = " (warm start)" if spec.warm_start else ""
        sp = " [hybrid space]" if spec.space == "hybrid" else ""
        lines.append(f"{spec.name:16s} {spec.kind:9s} {spec.description}{ws}{sp}")
        if not params:
            continue
        rows = spec.describe()
        if not rows:
            lines.append("    (no parameters)")
            continue
        name_w = max(len(r.name) for r in rows)
        type_w = max(len(r.type) for r in rows)
        def_w = max(len(r.default) for r in rows)
        rng_w = max(len(r.range) for r in rows)
        for r in rows:
            lines.append(f"    {r.name:{name_w}s}  {r.type:{type_w}s}  {r.default:>{def_w}s}  "
                         f"{r.range:{rng_w}s}  {r.help}")
    return "\n".join(lines)
