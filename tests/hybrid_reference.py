"""An independent, deliberately simple implementation of hybrid-model.md.

Written from /work/shared/hybrid-model.md, cost-model.md and formats.md alone, on the
raw instance and plan JSON dicts, so that the tests can hold the project's hybrid
evaluator against a second reading of the contract. Everything is computed in SI
units (seconds, bytes, bit/s, FLOP/s, W) and converted to ms / J / GB at the end.
It must never import geoplan (nor tests/reference_model.py): sharing code would
share bugs.

Parts: the evaluator (:func:`evaluate_hybrid_ref`), the validator
(:func:`validate_hybrid_ref`, violation kinds in :data:`VIOLATION_KINDS`) and seeded
random generators of hybrid instances and plans (:func:`random_hybrid_instance`,
:func:`random_hybrid_plan`).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Json = dict[str, Any]

# Violation kinds returned by validate_hybrid_ref (one entry per occurrence).
VIOLATION_KINDS = {
    "layer_sum": "the stages' layer counts do not sum to L",
    "empty_stage": "a stage with fewer than one layer",
    "no_replica": "a stage with no replica",
    "repeated_gpu": "a GPU listed a second time in the plan",
    "tp_power": "tp not a power of two (or < 1)",
    "tp_max": "tp larger than training.max_tp",
    "replica_size": "a replica whose GPU count differs from the stage's tp",
    "tp_site": "a TP group (replica) spanning two sites (no site label = own site)",
    "share_min": "a replica with samples < 1",
    "share_sum": "a stage whose replicas' samples do not sum to u",
    "micro_batch": "B mod u != 0",
    "zero": "zero not in {0, 1, 2}",
    "recompute": "recompute not in {none, full}",
    "missing_link_tp": "a missing link of a TP ring",
    "missing_link_dp": "a missing link of a gradient (DP) ring",
    "missing_link_boundary": "a missing link between two leads that share samples (either way)",
    "memory": "a GPU whose memory exceeds memory_gb * memory_util",
}
# Kinds after which the contract gives the plan no price (tests compare only verdicts).
STRUCTURAL_KINDS = frozenset(VIOLATION_KINDS) - {
    "missing_link_tp", "missing_link_dp", "missing_link_boundary", "memory",
}

RECOMPUTE = {"none": (1.0, 4.0), "full": (2.0, 6.0)}  # (forward passes, TP all-reduces / 2)


# --------------------------------------------------------------------------- small reads


def _get(d: Json, key: str, default: float) -> float:
    v = d.get(key)
    return default if v is None else float(v)


def _gpu(instance: Json, gid: str) -> Json:
    for g in instance["gpus"]:
        if g["id"] == gid:
            return g
    raise KeyError(gid)  # unknown id: invalid input, not a violation


def _link(instance: Json, src: str, dst: str) -> Json | None:
    for e in instance.get("links") or []:
        if e["src"] == src and e["dst"] == dst:
            return e
    return None


def _flops(g: Json) -> float:
    """Effective FLOP/s of a GPU."""
    return _get(g, "compute_util", 1.0) * float(g["peak_tflops"]) * 1e12


def _cap_bytes(g: Json) -> float:
    return _get(g, "memory_util", 1.0) * float(g["memory_gb"]) * 1e9


def _site(g: Json) -> str:
    s = g.get("site")
    return f"\0own:{g['id']}" if s is None else str(s)  # no label: a site of its own


def micro_batch(instance: Json, plan: Json) -> int:
    u = plan.get("micro_batch_size")
    return int(instance["training"]["micro_batch_size"] if u is None else u)


def zero_of(instance: Json, plan: Json) -> Any:
    z = plan.get("zero")
    if z is None:
        z = instance["training"].get("zero")
    return 0 if z is None else z


def c_layer(instance: Json) -> float:
    m = instance["model"]
    if m.get("flops_per_token_per_layer") is not None:
        return float(m["flops_per_token_per_layer"])
    H, T = float(m["hidden"]), float(m["seq_len"])
    return 24.0 * H * H + 4.0 * T * H


def sigma(z: int, d: int) -> float:
    """Model-state values per parameter (in units of kappa) under ZeRO z over d replicas."""
    return {0: 4.0, 1: 2.0 + 2.0 / d, 2: 1.0 + 3.0 / d}[z]


def normal_stages(instance: Json, plan: Json) -> list[Json]:
    """The plan's stages in hybrid form (GeoTrain ``{"gpu", "layers"}`` -> tp 1, one replica)."""
    u = micro_batch(instance, plan)
    out = []
    for s in plan["stages"]:
        if "gpu" in s and "replicas" not in s:
            out.append({"layers": s["layers"], "tp": 1, "recompute": "none",
                        "replicas": [{"gpus": [s["gpu"]], "samples": u}]})
        else:
            out.append({"layers": s["layers"], "tp": s.get("tp", 1),
                        "recompute": s.get("recompute", "none"), "replicas": s["replicas"]})
    return out


def ring_allreduce_s(instance: Json, ring: list[str], nbytes: float) -> float:
    """AR(ring, b) = 2 (k-1) (l_max + 8 b / (k B~_min)) in s; inf if a ring link is missing."""
    k = len(ring)
    if k <= 1:
        return 0.0
    lat, bw = 0.0, math.inf
    for i in range(k):
        e = _link(instance, ring[i], ring[(i + 1) % k])
        if e is None:
            return math.inf
        lat = max(lat, float(e["latency_ms"]) / 1e3)
        bw = min(bw, _get(e, "util", 1.0) * float(e["bandwidth_gbps"]) * 1e9)
    return 2.0 * (k - 1) * (lat + 8.0 * nbytes / (k * bw))


def send_s(instance: Json, src: str, dst: str, nbytes: float) -> float:
    """L + 8 b / B~ in seconds over one link; inf if it is missing."""
    e = _link(instance, src, dst)
    if e is None:
        return math.inf
    return float(e["latency_ms"]) / 1e3 + 8.0 * nbytes / (
        _get(e, "util", 1.0) * float(e["bandwidth_gbps"]) * 1e9)


def sample_blocks(replicas: list[Json]) -> list[tuple[int, int]]:
    """[start, end) of each replica's consecutive block of samples (0-based)."""
    out, start = [], 0
    for r in replicas:
        s = int(r["samples"])
        out.append((start, start + s))
        start += s
    return out


def lead_pairs(left: list[Json], right: list[Json]) -> list[tuple[str, str, int]]:
    """(lead a of stage q, lead b of stage q+1, k_ab) for every pair sharing k_ab > 0 samples."""
    out = []
    for ra, (a0, a1) in zip(left, sample_blocks(left), strict=True):
        for rb, (b0, b1) in zip(right, sample_blocks(right), strict=True):
            k = min(a1, b1) - max(a0, b0)
            if k > 0:
                out.append((ra["gpus"][0], rb["gpus"][0], k))
    return out


def dp_rings(stage: Json) -> list[list[str]]:
    """For each TP position j, the j-th GPUs of the replicas in replica order."""
    reps = stage["replicas"]
    width = max(len(r["gpus"]) for r in reps)
    return [[r["gpus"][j] for r in reps if j < len(r["gpus"])] for j in range(width)]


# --------------------------------------------------------------------------- evaluator


@dataclass
class RefReplica:
    gpus: list[str]
    samples: int
    compute_s: float  # c_{q,r}
    tp_comm_s: float  # p_{q,r}
    mem_bytes: float  # per GPU of the replica
    caps_bytes: list[float]  # per GPU, same order as gpus

    @property
    def compute_ms(self) -> float:
        return self.compute_s * 1e3

    @property
    def tp_comm_ms(self) -> float:
        return self.tp_comm_s * 1e3

    @property
    def memory_gb(self) -> float:
        return self.mem_bytes / 1e9

    @property
    def memory_limit_gb(self) -> float:
        """The smallest limit among the replica's GPUs (they all hold the same bytes)."""
        return min(self.caps_bytes) / 1e9


@dataclass
class RefHybridStage:
    layers: int
    tp: int
    recompute: str
    compute_s: float  # tau^comp_q = max_r (c + p)
    fwd_s: float
    bwd_s: float
    tau_s: float
    grad_sync_s: float  # A_q
    replicas: list[RefReplica]

    @property
    def compute_ms(self) -> float:
        return self.compute_s * 1e3

    @property
    def comm_fwd_ms(self) -> float:
        return self.fwd_s * 1e3

    @property
    def comm_bwd_ms(self) -> float:
        return self.bwd_s * 1e3

    @property
    def tau_ms(self) -> float:
        return self.tau_s * 1e3

    @property
    def grad_sync_ms(self) -> float:
        return self.grad_sync_s * 1e3

    @property
    def memory_gb(self) -> float:
        return max(r.memory_gb for r in self.replicas)

    @property
    def gpus(self) -> list[str]:
        return [g for r in self.replicas for g in r.gpus]


@dataclass
class RefHybridEval:
    t_iter_s: float
    e_iter_j: float
    objective: float
    stages: list[RefHybridStage]
    violations: list[str] = field(default_factory=list)

    @property
    def t_iter_ms(self) -> float:
        return self.t_iter_s * 1e3

    @property
    def grad_sync_ms(self) -> float:
        return max(s.grad_sync_ms for s in self.stages)

    @property
    def feasible(self) -> bool:
        return not self.violations


def objective_of(instance: Json, t_iter_ms: float, e_iter_j: float) -> float:
    """Eq. 16: T (ms) at lambda 1, E (J) at lambda 0, else the normalised sum."""
    o = instance.get("objective") or {}
    lam = _get(o, "lambda", 1.0)
    if lam == 1.0:
        return t_iter_ms
    if lam == 0.0:
        return e_iter_j
    if o.get("t_ref_ms") is None or o.get("e_ref_j") is None:
        raise ValueError("0 < lambda < 1 needs objective.t_ref_ms and e_ref_j in the instance")
    return lam * t_iter_ms / float(o["t_ref_ms"]) + (1.0 - lam) * e_iter_j / float(o["e_ref_j"])


def memory_bytes(instance: Json, plan: Json, q: int, r: int) -> float:
    """Bytes on each GPU of replica r of stage q (hybrid-model.md, Memory)."""
    m, t = instance["model"], instance["training"]
    stages = normal_stages(instance, plan)
    st = stages[q]
    Q = len(stages)
    n, tp = int(st["layers"]), int(st["tp"])
    s = int(st["replicas"][r]["samples"])
    d = len(st["replicas"])
    kappa = _get(t, "bytes_per_value", 2.0)
    alpha = _get(t, "activation_factor", 17.0)
    H, T, V = float(m["hidden"]), float(m["seq_len"]), float(m["vocab"])
    sg = sigma(int(zero_of(instance, plan)), d)
    mem = n * 12.0 * H * H * kappa * sg / tp
    if st["recompute"] == "full":
        mem += (Q + 1) * n * kappa * s * T * H / tp + alpha * kappa * s * T * H / tp
    else:
        mem += (Q + 1) * n * alpha * kappa * s * T * H / tp
    if q == Q - 1:
        mem += V * H * kappa * sg / tp + 2.0 * kappa * s * T * V / tp
    return mem


def evaluate_hybrid_ref(instance: Json, plan: Json) -> RefHybridEval:
    """T_iter, E_iter, objective and per-stage/replica detail of a hybrid (or GeoTrain) plan."""
    m, t = instance["model"], instance["training"]
    u = micro_batch(instance, plan)
    M = int(t["batch_size"]) / u
    kappa = _get(t, "bytes_per_value", 2.0)
    gamma = _get(t, "backward_factor", 2.0)
    o = _get(t, "stage_overhead_ms", 0.0) / 1e3
    H, T, V = float(m["hidden"]), float(m["seq_len"]), float(m["vocab"])
    Cl = c_layer(instance)
    stages = normal_stages(instance, plan)
    Q = len(stages)
    sample_bytes = kappa * T * H  # one sample's activations at a boundary

    fwd = [0.0] * Q
    bwd = [0.0] * Q
    for q in range(Q - 1):
        pairs = lead_pairs(stages[q]["replicas"], stages[q + 1]["replicas"])
        fwd[q] = max((send_s(instance, a, b, k * sample_bytes) for a, b, k in pairs), default=0.0)
        bwd[q + 1] = max((send_s(instance, b, a, k * sample_bytes) for a, b, k in pairs),
                         default=0.0)

    out: list[RefHybridStage] = []
    for q, st in enumerate(stages):
        n, tp = int(st["layers"]), int(st["tp"])
        passes, n_ar = RECOMPUTE[st["recompute"]]
        f = passes + gamma
        reps = []
        for r, rep in enumerate(st["replicas"]):
            gs = [_gpu(instance, g) for g in rep["gpus"]]
            s = int(rep["samples"])
            F = min(_flops(g) for g in gs)
            c = f * n * Cl * s * T / (tp * F)
            p = n_ar * n * ring_allreduce_s(instance, list(rep["gpus"]), kappa * s * T * H)
            reps.append(RefReplica(list(rep["gpus"]), s, c, p, memory_bytes(instance, plan, q, r),
                                   [_cap_bytes(g) for g in gs]))
        comp = max(r.compute_s + r.tp_comm_s for r in reps)
        grad = 0.0
        if len(reps) > 1:
            nbytes = n * 12.0 * H * H * kappa / tp + (V * H * kappa / tp if q == Q - 1 else 0.0)
            grad = max(ring_allreduce_s(instance, ring, nbytes) for ring in dp_rings(st))
        out.append(RefHybridStage(n, tp, st["recompute"], comp, fwd[q], bwd[q],
                                  comp + fwd[q] + bwd[q] + o, grad, reps))

    taus = [s.tau_s for s in out]
    # M = 1 has no bottleneck term (0 * inf would be nan).
    t_iter = sum(taus) + ((M - 1) * max(taus) if M > 1 else 0.0) + max(s.grad_sync_s for s in out)
    idle = sum(float(_gpu(instance, g)["idle_w"]) for s in out for g in s.gpus)
    dynamic = sum(
        (float(_gpu(instance, g)["active_w"]) - float(_gpu(instance, g)["idle_w"])) * r.compute_s
        for s in out for r in s.replicas for g in r.gpus
    )
    e_iter = (t_iter * idle if math.isfinite(t_iter) else math.inf) + M * dynamic
    objective = objective_of(instance, t_iter * 1e3, e_iter)
    return RefHybridEval(t_iter, e_iter, objective, out, validate_hybrid_ref(instance, plan))


# --------------------------------------------------------------------------- validator


def _ring_links(ring: list[str]) -> list[tuple[str, str]]:
    k = len(ring)
    return [] if k <= 1 else [(ring[i], ring[(i + 1) % k]) for i in range(k)]


def validate_hybrid_ref(instance: Json, plan: Json) -> list[str]:
    """Violation kinds (see :data:`VIOLATION_KINDS`) of a hybrid or GeoTrain plan."""
    t = instance["training"]
    out: list[str] = []
    u = micro_batch(instance, plan)
    if int(t["batch_size"]) % u:
        out.append("micro_batch")
    z = zero_of(instance, plan)
    if z not in (0, 1, 2):
        out.append("zero")
    stages = normal_stages(instance, plan)
    counts = [int(s["layers"]) for s in stages]
    if sum(counts) != int(instance["model"]["layers"]):
        out.append("layer_sum")
    out += ["empty_stage" for n in counts if n < 1]
    max_tp = int(_get(t, "max_tp", 8))
    seen: set[str] = set()
    structural_ok = True
    for st in stages:
        tp = int(st["tp"])
        if tp < 1 or tp & (tp - 1):
            out.append("tp_power")
        if tp > max_tp:
            out.append("tp_max")
        if st["recompute"] not in RECOMPUTE:
            out.append("recompute")
        reps = st["replicas"]
        if not reps:
            out.append("no_replica")
            structural_ok = False
            continue
        for rep in reps:
            gpus = list(rep["gpus"])
            for g in gpus:
                _gpu(instance, g)
                if g in seen:
                    out.append("repeated_gpu")
                seen.add(g)
            if len(gpus) != tp:
                out.append("replica_size")
            if len({_site(_gpu(instance, g)) for g in gpus}) > 1:
                out.append("tp_site")
            if int(rep["samples"]) < 1:
                out.append("share_min")
            out += ["missing_link_tp" for a, b in _ring_links(gpus)
                    if _link(instance, a, b) is None]
            if not gpus:
                structural_ok = False
        if sum(int(r["samples"]) for r in reps) != u:
            out.append("share_sum")
        if len(reps) > 1 and structural_ok:
            for ring in dp_rings(st):
                out += ["missing_link_dp" for a, b in _ring_links(ring)
                        if _link(instance, a, b) is None]
    if not structural_ok:
        return out
    for q in range(len(stages) - 1):
        for a, b, _ in lead_pairs(stages[q]["replicas"], stages[q + 1]["replicas"]):
            out += ["missing_link_boundary" for s, d in ((a, b), (b, a))
                    if _link(instance, s, d) is None]
    if "zero" in out or "recompute" in out or any(int(s["tp"]) < 1 for s in stages):
        return out  # sigma, the activation rule or the tp division is undefined: no memory
    for q, st in enumerate(stages):
        for r, rep in enumerate(st["replicas"]):
            mem = memory_bytes(instance, plan, q, r)
            out += ["memory" for g in rep["gpus"] if mem > _cap_bytes(_gpu(instance, g))]
    return out


# --------------------------------------------------------------------------- random cases


#: The hand-worked cases (derivations in its README.md).
HAND_DIR = Path(__file__).resolve().parent / "data" / "hybrid"
HAND_CASES = sorted(p.name.removesuffix(".expected.json")
                    for p in HAND_DIR.glob("*.expected.json"))


def load_hand_case(name: str) -> tuple[Json, Json, Json]:
    """(instance, plan, expected values) of hand-worked case ``name``."""
    want = json.loads((HAND_DIR / f"{name}.expected.json").read_text())
    return (json.loads((HAND_DIR / want["instance"]).read_text()),
            json.loads((HAND_DIR / want["plan"]).read_text()), want)


#: Links removed from the `boundary` hand case, and whether its plan uses each.
BOUNDARY_LINKS = [
    (("a0", "b2"), False),  # a0 and b2 share no sample
    (("b2", "a0"), False),
    (("a1", "b1"), False),
    (("b1", "b0"), False),  # the gradient ring of stage 2 runs b0 -> b1 -> b2 -> b0 only
    (("a0", "b1"), True),  # forward of the shared samples 2, 3
    (("b1", "a0"), True),  # their backward
    (("b2", "a2"), True),
    (("b0", "b1"), True),  # gradient ring of stage 2
    (("a1", "a0"), True),  # gradient ring of stage 1
]


def _composition(rng: random.Random, total: int, parts: int) -> list[int]:
    """A uniformly random composition of ``total`` into ``parts`` positive integers."""
    cuts = sorted(rng.sample(range(1, total), parts - 1))
    return [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]


def random_hybrid_instance(
    rng: random.Random,
    n: int | None = None,
    layers: int | None = None,
    lam: float | None = None,
    link_prob: float = 1.0,
    big_site: bool = False,
) -> Json:
    """A small random canonical instance with sites (2-4 GPUs each, now and then 8; some
    GPUs unlabelled).

    Complete directed links (``link_prob`` < 1 drops some) with asymmetric values, fast
    inside a site and slow across. Hybrid training fields vary. GPU 0 holds the whole
    model in GeoTrain's memory model so the project's load-time capacity check passes;
    the others are sometimes tight, so memory violations happen. ``big_site`` makes the
    first site 8 GPUs (with n >= 8), so that tp 8 can occur.
    """
    N = n if n is not None else rng.randint(3, 8)
    L = layers if layers is not None else rng.randint(2, 8)
    H = rng.choice([256, 512, 1024])
    T = rng.choice([128, 512, 1024])
    V = rng.choice([1000, 32000])
    u = rng.choice([1, 2, 3, 4, 6, 8])
    B = u * rng.choice([1, 2, 3, 4, 8])
    training: Json = {"batch_size": B, "micro_batch_size": u}
    if rng.random() < 0.5:
        training.update(bytes_per_value=rng.choice([2, 4]),
                        activation_factor=rng.choice([10, 17, 34]),
                        backward_factor=rng.choice([1, 2, 3]))
    if rng.random() < 0.6:
        training["zero"] = rng.choice([0, 1, 2])
    if rng.random() < 0.4:
        training["stage_overhead_ms"] = rng.choice([0.5, 1.0, 3.0])
    if rng.random() < 0.3:
        training["max_tp"] = rng.choice([1, 2, 4])
    model: Json = {"layers": L, "hidden": H, "seq_len": T, "vocab": V}
    if rng.random() < 0.2:
        model["flops_per_token_per_layer"] = rng.uniform(1e7, 1e9)
    inst: Json = {"name": "random-hybrid", "gpus": [], "links": [], "model": model,
                  "training": training}
    kappa = float(training.get("bytes_per_value", 2))
    alpha = float(training.get("activation_factor", 17))
    whole = (L * (48 * H * H * kappa + 2 * alpha * kappa * u * T * H)
             + 4 * V * H * kappa + 2 * kappa * u * T * V) / 1e9  # GeoTrain, Q = 1
    sites: list[str | None] = ["S0"] * 8 if big_site else []
    while len(sites) < N:
        if rng.random() < 0.15:
            sites.append(None)
        else:
            label = f"S{len(sites)}"
            sites += [label] * (8 if rng.random() < 0.1 else rng.randint(2, 4))  # tp 8 too
    sites = sites[:N]
    for i in range(N):
        g: Json = {"id": f"g{i}",
                   "peak_tflops": rng.choice([19.5, 65.0, 125.0, 312.0, 989.0]),
                   "memory_gb": 0.0, "idle_w": rng.uniform(10, 80)}
        g["active_w"] = g["idle_w"] + rng.uniform(0, 500)
        if rng.random() < 0.6:
            g["compute_util"] = rng.uniform(0.2, 1.0)
        mem_util = rng.uniform(0.5, 1.0) if rng.random() < 0.5 else 1.0
        if mem_util != 1.0:
            g["memory_util"] = mem_util
        need = whole * (rng.uniform(1.05, 2.0) if i == 0 else rng.uniform(0.05, 1.5))
        g["memory_gb"] = need / mem_util
        if sites[i] is not None:
            g["site"] = sites[i]
        inst["gpus"].append(g)
    for i in range(N):
        for j in range(N):
            if i == j or rng.random() >= link_prob:
                continue
            same = sites[i] is not None and sites[i] == sites[j]
            e: Json = {"src": f"g{i}", "dst": f"g{j}",
                       "bandwidth_gbps": rng.choice([100.0, 300.0, 900.0] if same
                                                    else [1.0, 10.0, 25.0]),
                       "latency_ms": rng.choice([0.0, 0.005, 0.01] if same
                                                else [1.0, 5.0, 40.0])}
            if rng.random() < 0.4:
                e["util"] = rng.uniform(0.2, 1.0)
            inst["links"].append(e)
    lam = lam if lam is not None else rng.choice([1.0, 0.0, 0.5, 0.3])
    objective: Json = {"lambda": lam}
    if 0 < lam < 1:
        objective.update(t_ref_ms=rng.uniform(10, 1e4), e_ref_j=rng.uniform(1, 1e4))
    inst["objective"] = objective
    return inst


INVALID_KINDS = ("tp3", "zero5", "partial", "share_sum", "repeat", "layers", "site", "size")


def random_hybrid_plan(
    instance: Json,
    rng: random.Random,
    p_invalid: float = 0.1,
    p_geotrain: float = 0.1,
    p_plan_u: float = 0.3,
    max_stages: int | None = None,
) -> Json:
    """A random plan in the hybrid JSON form, mostly structurally valid.

    Random Q, layer split, per stage a tp (power of two <= max_tp that one site can
    host among the free GPUs), d <= u replicas with random shares >= 1 summing to u,
    random recompute; a random plan-level zero (sometimes absent) and sometimes a
    plan-level micro-batch size dividing B. With probability ``p_geotrain`` the plan is
    a pipeline of tp-1 single replicas written in GeoTrain form; with ``p_invalid``
    one structural defect of :data:`INVALID_KINDS` is injected (links and memory
    are never arranged, so those break freely).
    """
    t = instance["training"]
    B = int(t["batch_size"])
    L = int(instance["model"]["layers"])
    max_tp = int(_get(t, "max_tp", 8))
    plan: Json = {}
    u = int(t["micro_batch_size"])
    if rng.random() < p_plan_u:
        u = rng.choice([v for v in range(1, min(B, 8) + 1) if B % v == 0])
        plan["micro_batch_size"] = u
    if rng.random() < 0.8:
        plan["zero"] = rng.choice([0, 1, 2])
    by_site: dict[str, list[str]] = {}
    for g in instance["gpus"]:
        by_site.setdefault(_site(g), []).append(g["id"])
    for ids in by_site.values():
        rng.shuffle(ids)
    N = len(instance["gpus"])
    Q = rng.randint(1, min(L, N, max_stages or N))
    layers = _composition(rng, L, Q)
    if rng.random() < p_geotrain:
        order = rng.sample([g["id"] for g in instance["gpus"]], Q)
        plan["stages"] = [{"gpu": g, "layers": n} for g, n in zip(order, layers, strict=True)]
        return plan
    stages = []
    for q in range(Q):
        spare = sum(len(v) for v in by_site.values()) - (Q - q - 1)  # keep one per later stage
        tps = [k for k in (1, 2, 4, 8) if k <= max_tp and k <= spare
               and any(len(v) >= k for v in by_site.values())]
        tp = rng.choice(tps)
        reps = []
        d_max = rng.randint(1, u)
        while len(reps) < d_max:
            spare = sum(len(v) for v in by_site.values()) - (Q - q - 1)
            hosts = [s for s, v in by_site.items() if len(v) >= tp]
            if not hosts or spare < tp:
                break
            site = rng.choice(hosts)
            reps.append([by_site[site].pop() for _ in range(tp)])
        shares = _composition(rng, u, len(reps))
        stages.append({"layers": layers[q], "tp": tp,
                       "recompute": rng.choice(["none", "full"]),
                       "replicas": [{"gpus": g, "samples": s}
                                    for g, s in zip(reps, shares, strict=True)]})
    plan["stages"] = stages
    if rng.random() < p_invalid:
        _break(instance, plan, rng)
    return plan


def _break(instance: Json, plan: Json, rng: random.Random) -> None:
    """Inject one structural defect (a violation, never malformed input)."""
    stages = plan["stages"]
    st = rng.choice(stages)
    rep = rng.choice(st["replicas"])
    kind = rng.choice(INVALID_KINDS)
    used = [g for s in stages for r in s["replicas"] for g in r["gpus"]]
    free = [g["id"] for g in instance["gpus"] if g["id"] not in used]
    if kind == "tp3":
        st["tp"] = 3
    elif kind == "zero5":
        plan["zero"] = 5
    elif kind == "partial":
        st["recompute"] = "partial"
    elif kind == "share_sum":
        rep["samples"] += 1
    elif kind == "repeat" and [g for g in used if g not in rep["gpus"]]:
        rep["gpus"][-1] = rng.choice([g for g in used if g not in rep["gpus"]])
    elif kind == "layers":
        st["layers"] += 1
    elif kind == "site" and st["tp"] >= 2 and free:
        sites = {g["id"]: _site(g) for g in instance["gpus"]}
        other = [g for g in free if sites[g] != sites[rep["gpus"][0]]]
        if other:
            rep["gpus"][-1] = rng.choice(other)
        else:
            st["layers"] += 1
    elif kind == "size" and free:
        rep["gpus"].append(rng.choice(free))
    else:
        st["tp"] = 3
