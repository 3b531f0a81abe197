"""The validator of hybrid plans: every constraint of hybrid-model.md, as violations.

Shares :class:`~geoplan.model.validation.Violation` with the GeoTrain validator
(a GeoTrain-form plan gets the same verdict from both). Unknown GPU ids are
invalid input and raise :class:`~geoplan.errors.InputError`.
"""

from __future__ import annotations

from geoplan.cost import hybrid_kernel as hk
from geoplan.cost.hybrid_coefficients import HybridArrays, HybridCoefficients, encode
from geoplan.model.hybrid import RECOMPUTE, HybridPlan
from geoplan.model.instance import Instance
from geoplan.model.validation import Violation

__all__ = ["validate_hybrid"]


def validate_hybrid(instance: Instance, plan: HybridPlan) -> list[Violation]:
    """Every violation of ``plan`` on ``instance`` (empty list: feasible)."""
    out: list[Violation] = []
    a = encode(instance, plan)  # raises on unknown ids
    L = instance.layers
    u, z = a.u, a.zero
    B = instance.training.batch_size
    max_tp = instance.training.max_tp
    gpu_site = [g.site for g in instance.gpus]

    total = sum(plan.layer_counts)
    if total != L:
        out.append(Violation("layer_sum", f"layer counts add up to {total}, the model has "
                             f"{L} layers", amount=float(total - L)))
    if not 1 <= plan.q <= L:
        out.append(Violation("stage_count", f"{plan.q} stages; allowed 1..{L}",
                             amount=float(plan.q)))
    if B % u:
        out.append(Violation("micro_batch", f"batch size {B} is not divisible by the "
                             f"micro-batch size {u}", amount=float(u)))
    if z not in (0, 1, 2):
        out.append(Violation("zero", f"zero is {z}; expected 0, 1 or 2", amount=float(z)))
    seen: dict[str, int] = {}
    for q, s in enumerate(plan.stages):
        where = f"stage {q + 1}"
        lead = s.replicas[0].gpus[0]
        if s.layers < 1:
            out.append(Violation("empty_stage", f"{where} ({lead}) has {s.layers} layers",
                                 q, lead))
        if s.tp < 1 or s.tp & (s.tp - 1) or s.tp > max_tp:
            out.append(Violation("tp", f"{where} has tp {s.tp}; expected a power of two "
                                 f"in 1..{max_tp} (max_tp)", q, lead, float(s.tp)))
        if s.recompute not in RECOMPUTE:
            out.append(Violation("recompute", f"{where} has recompute {s.recompute!r}; "
                                 f"expected one of {list(RECOMPUTE)}", q, lead))
        share = 0
        for r, rep in enumerate(s.replicas):
            rw = f"{where}, replica {r + 1}"
            n_samples = u if rep.samples is None else rep.samples
            share += n_samples
            if len(rep.gpus) != s.tp:
                out.append(Violation("replica_size", f"{rw} has {len(rep.gpus)} GPUs; tp is "
                                     f"{s.tp}", q, rep.lead, float(len(rep.gpus))))
            if n_samples < 1:
                out.append(Violation("samples", f"{rw} has {n_samples} samples; at least 1",
                                     q, rep.lead, float(n_samples)))
            sites = {gpu_site[instance.gpu_index[g]] or f"(own site of {g})" for g in rep.gpus}
            if len(sites) > 1:
                out.append(Violation("tp_site", f"{rw}: its TP group spans sites "
                                     f"{sorted(map(str, sites))}", q, rep.lead))
            for g in rep.gpus:
                if g in seen:
                    out.append(Violation("repeated_gpu", f"GPU {g} is used by stages "
                                         f"{seen[g] + 1} and {q + 1}", q, g))
                else:
                    seen[g] = q
        if share != u:
            out.append(Violation("samples", f"{where}: replica samples add up to {share}, "
                                 f"the micro-batch has {u}", q, lead, float(share - u)))
    if not hk.structure_ok(a.q, a.layers, a.tp, a.rec, a.rep0, a.samples, a.g0, a.zero):
        return out  # links and memory are not defined for this plan (the kernel's own test)
    out.extend(_links(instance, a))
    out.extend(_memory(instance, plan, a))
    return out


def _links(instance: Instance, a: HybridArrays) -> list[Violation]:
    """Every link a TP ring, a DP ring or a boundary (both directions) needs and lacks."""
    has = instance.has_link
    ids = instance.gpu_ids
    out: list[Violation] = []
    missing: set[tuple[int, int]] = set()

    def need(x: int, y: int, q: int, what: str) -> None:
        if not has[x, y] and (x, y) not in missing:
            missing.add((x, y))
            out.append(Violation("missing_link", f"no link {ids[x]} -> {ids[y]} for the "
                                 f"{what} of stage {q + 1}", q, ids[x]))

    for q in range(a.q):
        t = int(a.tp[q])
        r0, r1 = int(a.rep0[q]), int(a.rep0[q + 1])
        for r in range(r0, r1):
            g = a.gpus[a.g0[r]:a.g0[r + 1]]
            if t > 1:
                for m in range(t):
                    need(int(g[m]), int(g[(m + 1) % t]), q, "TP ring")
        d = r1 - r0
        if d > 1:
            for j in range(t):
                ring = [int(a.gpus[a.g0[r] + j]) for r in range(r0, r1)]
                for m in range(d):
                    need(ring[m], ring[(m + 1) % d], q, "gradient ring")
        if q + 1 < a.q:
            lo = 0
            for ra in range(r0, r1):
                hi = lo + int(a.samples[ra])
                blo = 0
                for rb in range(int(a.rep0[q + 1]), int(a.rep0[q + 2])):
                    bhi = blo + int(a.samples[rb])
                    if min(hi, bhi) - max(lo, blo) > 0:
                        x, y = int(a.gpus[a.g0[ra]]), int(a.gpus[a.g0[rb]])
                        need(x, y, q, "activations to the next stage")
                        need(y, x, q + 1, "gradients to the previous stage")
                    blo = bhi
                lo = hi
    return out


def _memory(instance: Instance, plan: HybridPlan, a: HybridArrays) -> list[Violation]:
    c = HybridCoefficients.of(instance)
    out: list[Violation] = []
    for q, s in enumerate(plan.stages):
        r0 = int(a.rep0[q])
        d = int(a.rep0[q + 1]) - r0
        for r, rep in enumerate(s.replicas):
            need = hk.replica_bytes(s.layers, s.tp, d, a.zero, int(a.rec[q]),
                                    int(a.samples[r0 + r]), a.q, q == a.q - 1, c.w_bytes,
                                    c.lm_bytes, c.alpha, c.act_bytes, c.logit_bytes)
            for g in rep.gpus:
                cap = float(c.mem_cap[instance.gpu_index[g]])
                if need > cap:
                    out.append(Violation(
                        "memory", f"stage {q + 1}, replica {r + 1}: {g} needs "
                        f"{need / 1e9:.3f} GB, limit {cap / 1e9:.3f} GB "
                        f"({(need - cap) / 1e9:.3f} GB over)", q, g, (need - cap) / 1e9))
    return out
