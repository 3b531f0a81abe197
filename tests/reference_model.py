"""An independent, deliberately simple implementation of cost-model.md.

Written from /work/shared/cost-model.md and formats.md alone, working on the raw
instance and plan JSON dicts, so that the tests can hold the core (which
precomputes per-GPU coefficients in ms and bytes) against a second reading of
the contract. Everything is computed per stage in SI units (seconds, bytes,
bits per second, FLOP/s, watts) and converted to ms / GB only at the end.
It must never import geoplan: sharing code would share bugs.

The second half holds seeded random generators of instance and plan dicts
used by the tests (also geoplan-free, for the same reason).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

Json = dict[str, Any]

# Defaults of formats.md ("Optional with defaults").
DEFAULT_KAPPA = 2.0
DEFAULT_ALPHA = 17.0
DEFAULT_GAMMA = 2.0


@dataclass
class RefStage:
    gpu: str
    layers: int
    compute_s: float
    fwd_s: float
    bwd_s: float
    tau_s: float
    mem_bytes: float
    cap_bytes: float

    @property
    def compute_ms(self) -> float:
        return self.compute_s * 1e3

    @property
    def tau_ms(self) -> float:
        return self.tau_s * 1e3


@dataclass
class RefEval:
    t_iter_s: float
    e_iter_j: float
    objective: float | None
    stages: list[RefStage]
    violations: list[str] = field(default_factory=list)  # kinds, see validate_ref

    @property
    def t_iter_ms(self) -> float:
        return self.t_iter_s * 1e3

    @property
    def feasible(self) -> bool:
        return not self.violations


def _get(d: Json, key: str, default: float) -> float:
    v = d.get(key)
    return default if v is None else float(v)


def _gpu(instance: Json, gid: str) -> Json:
    for g in instance["gpus"]:
        if g["id"] == gid:
            return g
    raise KeyError(gid)


def _link(instance: Json, src: str, dst: str) -> Json | None:
    for e in instance.get("links") or []:
        if e["src"] == src and e["dst"] == dst:
            return e
    return None


def micro_batch(instance: Json, plan: Json) -> int:
    u = plan.get("micro_batch_size")
    return int(instance["training"]["micro_batch_size"] if u is None else u)


def flops_per_token_per_layer(instance: Json) -> float:
    m = instance["model"]
    if m.get("flops_per_token_per_layer") is not None:
        return float(m["flops_per_token_per_layer"])
    H, T = float(m["hidden"]), float(m["seq_len"])
    return 24.0 * H * H + 4.0 * T * H


def transfer_s(instance: Json, src: str, dst: str, u: int) -> float:
    """L_ij + 8 S_act / B~_ij in seconds; inf when the link is missing."""
    e = _link(instance, src, dst)
    if e is None:
        return math.inf
    m, t = instance["model"], instance["training"]
    kappa = _get(t, "bytes_per_value", DEFAULT_KAPPA)
    s_act = kappa * u * float(m["seq_len"]) * float(m["hidden"])  # bytes
    bw = _get(e, "util", 1.0) * float(e["bandwidth_gbps"]) * 1e9  # bit/s
    return float(e["latency_ms"]) / 1e3 + 8.0 * s_act / bw


def stage_memory_bytes(instance: Json, layers: int, q_stages: int, last: bool, u: int) -> float:
    """Mem_q of eqs. 11-13 in bytes."""
    m, t = instance["model"], instance["training"]
    kappa = _get(t, "bytes_per_value", DEFAULT_KAPPA)
    alpha = _get(t, "activation_factor", DEFAULT_ALPHA)
    H, T, V = float(m["hidden"]), float(m["seq_len"]), float(m["vocab"])
    p_layer = 12.0 * H * H
    p_head = V * H
    per_layer = 4.0 * p_layer * kappa + (q_stages + 1) * alpha * kappa * u * T * H
    mem = layers * per_layer
    if last:
        mem += 4.0 * p_head * kappa + 2.0 * kappa * u * T * V
    return mem


def capacity_bytes(gpu: Json) -> float:
    return _get(gpu, "memory_util", 1.0) * float(gpu["memory_gb"]) * 1e9


def validate_ref(instance: Json, plan: Json) -> list[str]:
    """Violation kinds of the plan, one entry per violation (constraints of eqs. 17-20)."""
    stages = plan["stages"]
    gpus = [s["gpu"] for s in stages]
    counts = [int(s["layers"]) for s in stages]
    for g in gpus:
        _gpu(instance, g)  # unknown id: KeyError (invalid input, not infeasible)
    L = int(instance["model"]["layers"])
    N = len(instance["gpus"])
    Q = len(stages)
    out: list[str] = []
    if sum(counts) != L:
        out.append("layer_sum")
    out += ["empty_stage" for n in counts if n < 1]
    out += ["repeated_gpu" for k, g in enumerate(gpus) if g in gpus[:k]]
    if not 1 <= Q <= min(N, L):
        out.append("stage_count")
    for a, b in pairwise(gpus):
        # forward a->b carries activations, backward b->a gradients: both must exist.
        out += ["missing_link" for s, d in ((a, b), (b, a)) if _link(instance, s, d) is None]
    u = micro_batch(instance, plan)
    if int(instance["training"]["batch_size"]) % u:
        out.append("micro_batch")
        return out
    for q, (g, n) in enumerate(zip(gpus, counts, strict=True)):
        if n >= 1 and stage_memory_bytes(instance, n, Q, q == Q - 1, u) > capacity_bytes(
            _gpu(instance, g)
        ):
            out.append("memory")
    return out


def evaluate_ref(
    instance: Json,
    plan: Json,
    t_ref_ms: float | None = None,
    e_ref_j: float | None = None,
) -> RefEval:
    """T_iter, E_iter, objective and per-stage detail of ``plan`` (eqs. 1, 7-14, 16).

    ``t_ref_ms``/``e_ref_j`` override the instance's normalisers (the core takes
    them from a baseline plan when absent; callers pass what the core reported).
    """
    m, t = instance["model"], instance["training"]
    gamma = _get(t, "backward_factor", DEFAULT_GAMMA)
    u = micro_batch(instance, plan)
    M = int(t["batch_size"]) / u
    T = float(m["seq_len"])
    C = flops_per_token_per_layer(instance)
    gpus = [s["gpu"] for s in plan["stages"]]
    Q = len(gpus)
    stages: list[RefStage] = []
    for q, s in enumerate(plan["stages"]):
        g = _gpu(instance, s["gpu"])
        n = int(s["layers"])
        f_eff = _get(g, "compute_util", 1.0) * float(g["peak_tflops"]) * 1e12
        comp = (1.0 + gamma) * n * C * u * T / f_eff
        fwd = transfer_s(instance, gpus[q], gpus[q + 1], u) if q < Q - 1 else 0.0
        bwd = transfer_s(instance, gpus[q], gpus[q - 1], u) if q > 0 else 0.0
        stages.append(
            RefStage(
                gpu=gpus[q],
                layers=n,
                compute_s=comp,
                fwd_s=fwd,
                bwd_s=bwd,
                tau_s=comp + fwd + bwd,
                mem_bytes=stage_memory_bytes(instance, n, Q, q == Q - 1, u),
                cap_bytes=capacity_bytes(g),
            )
        )
    taus = [s.tau_s for s in stages]
    t_iter = sum(taus) + (M - 1) * max(taus)
    idle = sum(float(_gpu(instance, g)["idle_w"]) for g in gpus)
    dynamic = sum(
        (float(_gpu(instance, s.gpu)["active_w"]) - float(_gpu(instance, s.gpu)["idle_w"]))
        * s.compute_s
        for s in stages
    )
    e_iter = t_iter * idle + M * dynamic

    o = instance.get("objective") or {}
    lam = _get(o, "lambda", 1.0)
    t_ref = t_ref_ms if t_ref_ms is not None else o.get("t_ref_ms")
    e_ref = e_ref_j if e_ref_j is not None else o.get("e_ref_j")
    objective: float | None
    if lam == 1.0:
        objective = t_iter * 1e3
    elif lam == 0.0:
        objective = e_iter
    elif t_ref is None or e_ref is None:
        objective = None
    else:
        objective = lam * (t_iter * 1e3) / float(t_ref) + (1.0 - lam) * e_iter / float(e_ref)
    return RefEval(t_iter, e_iter, objective, stages, validate_ref(instance, plan))


def memory_feasible_somewhere(instance: Json) -> bool:
    """Whether some stage layout (links ignored) fits every stage's memory.

    Brute force over stage counts Q, ordered GPU choices and layer splits; for
    the "no single GPU and no pipeline can hold the model" input check.
    Exponential: small N and L only.
    """
    from itertools import permutations

    L = int(instance["model"]["layers"])
    ids = [g["id"] for g in instance["gpus"]]
    u = int(instance["training"]["micro_batch_size"])
    for Q in range(1, min(len(ids), L) + 1):
        for order in permutations(ids, Q):
            for counts in compositions(L, Q):
                if all(
                    stage_memory_bytes(instance, n, Q, q == Q - 1, u)
                    <= capacity_bytes(_gpu(instance, g))
                    for q, (g, n) in enumerate(zip(order, counts, strict=True))
                ):
                    return True
    return False


def compositions(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every way to write ``total`` as ``parts`` positive integers, in order."""
    if parts == 1:
        return [(total,)]
    return [
        (first, *rest)
        for first in range(1, total - parts + 2)
        for rest in compositions(total - first, parts - 1)
    ]


# --------------------------------------------------------------------------- random cases


def random_instance(
    rng: random.Random,
    n_gpus: int | None = None,
    layers: int | None = None,
    lam: float | None = None,
    link_prob: float = 0.8,
    tight_memory: bool = True,
) -> Json:
    """A random canonical instance dict that the core should accept.

    Memory is drawn so that many plans break it (tight_memory) while GPU 0 is
    always roomy enough to hold the whole model alone, so the instance passes
    the load-time capacity check. Links are asymmetric and some are missing.
    Optional fields are sometimes left out to exercise the defaults.
    """
    N = n_gpus if n_gpus is not None else rng.randint(2, 6)
    L = layers if layers is not None else rng.randint(2, 16)
    H = rng.choice([256, 512, 1024, 2048])
    T = rng.choice([128, 512, 1024, 2048])
    V = rng.choice([1000, 32000, 50257])
    u = rng.choice([1, 2, 4])
    B = u * rng.choice([1, 2, 3, 8, 16])
    training: Json = {"batch_size": B, "micro_batch_size": u}
    if rng.random() < 0.5:
        training.update(
            bytes_per_value=rng.choice([2, 4]),
            activation_factor=rng.choice([10, 17, 34]),
            backward_factor=rng.choice([1, 2, 3]),
        )
    model: Json = {"layers": L, "hidden": H, "seq_len": T, "vocab": V}
    if rng.random() < 0.2:
        model["flops_per_token_per_layer"] = rng.uniform(1e7, 1e9)
    inst: Json = {"name": "random", "gpus": [], "links": [], "model": model,
                  "training": training}
    # Whole model on one GPU (Q = 1): the roomy GPU 0 gets that much and more.
    whole = stage_memory_bytes(inst, L, 1, True, u) / 1e9
    per_layer = stage_memory_bytes(inst, 1, 2, False, u) / 1e9
    for i in range(N):
        g: Json = {
            "id": f"g{i}",
            "peak_tflops": rng.choice([19.5, 65.0, 125.0, 156.0, 312.0, 989.0]),
            "memory_gb": 0.0,
            "idle_w": rng.uniform(10, 80),
        }
        g["active_w"] = g["idle_w"] + rng.uniform(0, 500)
        if rng.random() < 0.7:
            g["compute_util"] = rng.uniform(0.2, 1.0)
        mem_util = rng.uniform(0.5, 1.0) if rng.random() < 0.7 else 1.0
        if mem_util != 1.0:
            g["memory_util"] = mem_util
        if i == 0:
            need = whole * rng.uniform(1.05, 2.0)
        elif tight_memory:
            need = per_layer * rng.uniform(0.5, L * 0.8) + rng.uniform(0, whole - per_layer)
        else:
            need = whole * rng.uniform(1.05, 3.0)
        g["memory_gb"] = need / mem_util
        if rng.random() < 0.3:
            g["site"] = rng.choice(["A", "B", "C"])
            g["type"] = "custom"
        inst["gpus"].append(g)
    for i in range(N):
        for j in range(N):
            if i != j and rng.random() < link_prob:
                e: Json = {
                    "src": f"g{i}",
                    "dst": f"g{j}",
                    "bandwidth_gbps": rng.choice([1.0, 10.0, 25.0, 100.0, 400.0]),
                    "latency_ms": rng.choice([0.0, 0.05, 1.0, 20.0, 150.0]),
                }
                if rng.random() < 0.5:
                    e["util"] = rng.uniform(0.1, 1.0)
                inst["links"].append(e)
    lam = lam if lam is not None else rng.choice([0.0, 1.0, 0.5, 0.3])
    objective: Json = {"lambda": lam}
    if 0 < lam < 1:
        objective.update(t_ref_ms=rng.uniform(10, 1e4), e_ref_j=rng.uniform(1, 1e4))
    inst["objective"] = objective
    return inst


def random_plan(rng: random.Random, instance: Json, valid_shape: bool = True) -> Json:
    """A random plan dict: distinct GPUs, counts summing to L (unless valid_shape is False).

    Such a plan can still break links or memory. With ``valid_shape`` False it may
    also repeat a GPU, miss the layer sum or hold an empty stage.
    """
    ids = [g["id"] for g in instance["gpus"]]
    L = int(instance["model"]["layers"])
    Q = rng.randint(1, min(len(ids), L))
    order = rng.sample(ids, Q)
    cuts = sorted(rng.sample(range(1, L), Q - 1))
    counts = [b - a for a, b in zip([0, *cuts], [*cuts, L], strict=True)]
    if not valid_shape:
        kind = rng.randrange(3)
        if kind == 0 and Q >= 2:
            order[-1] = order[0]
        elif kind == 1:
            counts[rng.randrange(Q)] += rng.choice([-1, 1])
        else:
            counts.append(0)
            order.append(rng.choice(ids))
    return {"stages": [{"gpu": g, "layers": n} for g, n in zip(order, counts, strict=True)]}
