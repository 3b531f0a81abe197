"""An independent, deliberately simple implementation of cost-model.md.

Written from /work/shared/cost-model.md and formats.md alone, working on the raw
instance and plan JSON dicts, so that the tests can hold the core (which
precomputes per-GPU coefficients in ms and bytes) against a second reading of
the contract. Everything is computed per stage in SI units (seconds, bytes,
bits per second, FLOP/s, watts) and converted to ms / GB only at the end.
It must never import geoplan: sharing code would share bugs.

Three parts: the evaluator (:func:`evaluate_ref`, :func:`validate_ref`), the
enumerator (:func:`optimum_ref`, :func:`price_space`: every plan of the space
f(N, L) priced, the exact optimum of an instance), and seeded random generators
of instance and plan dicts used by the tests (also geoplan-free, for the same
reason).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import groupby, islice, pairwise, permutations
from typing import Any

import numpy as np

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


def stage_overhead_s(instance: Json) -> float:
    """o of cost-model.md (``training.stage_overhead_ms``, default 0), in seconds."""
    return _get(instance["training"], "stage_overhead_ms", 0.0) / 1e3


def compute_s(instance: Json, gid: str, layers: int, u: int) -> float:
    """tau^comp = (1 + gamma) * n * C_l * u * T / F~ in seconds (eq. 7)."""
    m, t = instance["model"], instance["training"]
    gamma = _get(t, "backward_factor", DEFAULT_GAMMA)
    g = _gpu(instance, gid)
    f_eff = _get(g, "compute_util", 1.0) * float(g["peak_tflops"]) * 1e12  # FLOP/s
    return (1.0 + gamma) * layers * flops_per_token_per_layer(instance) * u * float(
        m["seq_len"]) / f_eff


def objective_of(instance: Json, t_iter_ms: Any, e_iter_j: Any,
                 t_ref_ms: float | None = None, e_ref_j: float | None = None) -> Any:
    """Eq. 16 (scalars or numpy arrays); None for 0 < lambda < 1 without normalisers.

    ``t_ref_ms``/``e_ref_j`` override the instance's normalisers.
    """
    o = instance.get("objective") or {}
    lam = _get(o, "lambda", 1.0)
    if lam == 1.0:
        return t_iter_ms
    if lam == 0.0:
        return e_iter_j
    t_ref = t_ref_ms if t_ref_ms is not None else o.get("t_ref_ms")
    e_ref = e_ref_j if e_ref_j is not None else o.get("e_ref_j")
    if t_ref is None or e_ref is None:
        return None
    return lam * t_iter_ms / float(t_ref) + (1.0 - lam) * e_iter_j / float(e_ref)


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
    t = instance["training"]
    u = micro_batch(instance, plan)
    M = int(t["batch_size"]) / u
    overhead = stage_overhead_s(instance)  # per stage and micro-batch, idle power only
    gpus = [s["gpu"] for s in plan["stages"]]
    Q = len(gpus)
    stages: list[RefStage] = []
    for q, s in enumerate(plan["stages"]):
        g = _gpu(instance, s["gpu"])
        n = int(s["layers"])
        comp = compute_s(instance, gpus[q], n, u)
        fwd = transfer_s(instance, gpus[q], gpus[q + 1], u) if q < Q - 1 else 0.0
        bwd = transfer_s(instance, gpus[q], gpus[q - 1], u) if q > 0 else 0.0
        stages.append(
            RefStage(
                gpu=gpus[q],
                layers=n,
                compute_s=comp,
                fwd_s=fwd,
                bwd_s=bwd,
                tau_s=comp + fwd + bwd + overhead,
                mem_bytes=stage_memory_bytes(instance, n, Q, q == Q - 1, u),
                cap_bytes=capacity_bytes(g),
            )
        )
    taus = [s.tau_s for s in stages]
    # M = 1 has no bottleneck term (and 0 * inf, a missing link, must stay inf).
    t_iter = sum(taus) + ((M - 1) * max(taus) if M > 1 else 0.0)
    idle = sum(float(_gpu(instance, g)["idle_w"]) for g in gpus)
    dynamic = sum(
        (float(_gpu(instance, s.gpu)["active_w"]) - float(_gpu(instance, s.gpu)["idle_w"]))
        * s.compute_s
        for s in stages
    )
    e_iter = t_iter * idle + M * dynamic

    objective = objective_of(instance, t_iter * 1e3, e_iter, t_ref_ms, e_ref_j)
    return RefEval(t_iter, e_iter, objective, stages, validate_ref(instance, plan))


def memory_feasible_somewhere(instance: Json) -> bool:
    """Whether some stage layout (links ignored) fits every stage's memory.

    Brute force over stage counts Q, ordered GPU choices and layer splits; for
    the "no single GPU and no pipeline can hold the model" input check.
    Exponential: small N and L only.
    """
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


# --------------------------------------------------------------------------- enumerator
#
# Every plan of the space (paper 6.5): for Q = 1..min(N, L), every ordered choice of Q
# distinct GPUs (itertools.permutations, in the instance's GPU order) times every
# composition of L into Q positive parts (lexicographic). All compositions of a block of
# GPU orders of one length are priced at once with numpy, from the same per-stage
# quantities the evaluator uses (compute_s, transfer_s, stage_memory_bytes,
# capacity_bytes, each asked once per GPU or GPU pair): each is linear in the stage's
# layer count n, so stage q costs n * (its value at n = 1) plus its fixed part.
# tests/geoplan/test_properties.py holds this against evaluate_ref plan by plan.


def space_size(n_gpus: int, layers: int) -> int:
    """f(N, L) = sum_k C(L-1, k-1) N! / (N-k)! (paper 6.5)."""
    return sum(math.comb(layers - 1, k - 1) * math.perm(n_gpus, k)
               for k in range(1, min(n_gpus, layers) + 1))


@lru_cache(maxsize=64)
def composition_array(total: int, parts: int) -> np.ndarray:
    """compositions(total, parts) as a read-only (K, parts) int array."""
    a = np.array(compositions(total, parts), dtype=np.int64).reshape(-1, parts)
    a.setflags(write=False)
    return a


@dataclass
class OrderPrices:
    """Every split of the L layers over one GPU order, priced (row k: counts[k])."""

    order: tuple[str, ...]
    counts: np.ndarray  # (K, Q) layer counts
    t_iter_ms: np.ndarray  # (K,) inf where a link is missing
    e_iter_j: np.ndarray  # (K,)
    links_ok: bool  # every consecutive pair linked both ways
    memory_ok: np.ndarray  # (K,) every stage within its memory
    objective: np.ndarray  # (K,) eq. 16; inf where infeasible

    @property
    def feasible(self) -> np.ndarray:
        return self.memory_ok & self.links_ok


@dataclass
class BlockPrices:
    """Every split of the L layers over each of P GPU orders of one length Q, priced.

    Row p is GPU order p (indices into the instance's GPU list), column k the
    composition ``counts[k]``; read row by row, the block is in enumeration order.
    """

    orders: np.ndarray  # (P, Q) GPU indices
    counts: np.ndarray  # (K, Q) layer counts
    t_iter_ms: np.ndarray  # (P, K) inf where a link is missing
    e_iter_j: np.ndarray  # (P, K)
    links_ok: np.ndarray  # (P,) every consecutive pair linked both ways
    memory_ok: np.ndarray  # (P, K) every stage within its memory
    objective: np.ndarray  # (P, K) eq. 16; inf where infeasible


def price_orders(instance: Json, orders: np.ndarray, t_ref_ms: float | None = None,
                 e_ref_j: float | None = None) -> BlockPrices:
    """Every composition of L into Q stages on each GPU order (a (P, Q) array of indices
    into ``instance["gpus"]``), priced at the instance's micro-batch size."""
    t = instance["training"]
    L = int(instance["model"]["layers"])
    u = int(t["micro_batch_size"])
    M = int(t["batch_size"]) / u
    orders = np.asarray(orders, dtype=np.int64)
    P, Q = orders.shape
    if Q > 1 and (np.diff(np.sort(orders, axis=1), axis=1) == 0).any():
        raise ValueError("a GPU order repeats a GPU")
    ids = [g["id"] for g in instance["gpus"]]
    gpus = instance["gpus"]
    # Per GPU and per GPU pair, then gathered along each order.
    per_layer_s = np.array([compute_s(instance, g, 1, u) for g in ids])[orders]  # (P, Q)
    link_s = np.array([[transfer_s(instance, a, b, u) if a != b else math.inf for b in ids]
                       for a in ids])
    fwd = np.zeros((P, Q))
    bwd = np.zeros((P, Q))
    fwd[:, :-1] = link_s[orders[:, :-1], orders[:, 1:]]  # stage q -> q + 1
    bwd[:, 1:] = link_s[orders[:, 1:], orders[:, :-1]]  # stage q -> q - 1
    fixed_s = fwd + bwd + stage_overhead_s(instance)  # (P, Q)
    links_ok = np.isfinite(fixed_s).all(axis=1)
    n = composition_array(L, Q).astype(float)  # (K, Q); no rows when Q > L
    comp = n[None, :, :] * per_layer_s[:, None, :]  # (P, K, Q) tau^comp
    tau = comp + fixed_s[:, None, :]
    t_iter_s = tau.sum(axis=2) + ((M - 1) * tau.max(axis=2) if M > 1 else 0.0)
    t_iter_s = np.where(links_ok[:, None], t_iter_s, math.inf)
    idle_w = np.array([float(g["idle_w"]) for g in gpus])
    idle = np.zeros(P)
    for q in range(Q):  # summed stage by stage, as the evaluator does
        idle = idle + idle_w[orders[:, q]]
    dynamic = np.array([float(g["active_w"]) - float(g["idle_w"]) for g in gpus])[orders]
    with np.errstate(invalid="ignore"):  # inf * 0 W (a missing link, no idle power): nan
        e_iter = t_iter_s * idle[:, None] + M * (comp * dynamic[:, None, :]).sum(axis=2)
    # Mem_q = n * (its per-layer bytes at this Q) + the LM head on the last stage.
    per_layer_b = stage_memory_bytes(instance, 1, Q, False, u)
    head_b = np.array([stage_memory_bytes(instance, 0, Q, q == Q - 1, u) for q in range(Q)])
    caps = np.array([capacity_bytes(g) for g in gpus])[orders]  # (P, Q)
    memory_ok = (n * per_layer_b + head_b <= caps[:, None, :]).all(axis=2)
    t_iter_ms = t_iter_s * 1e3
    value = objective_of(instance, t_iter_ms, e_iter, t_ref_ms, e_ref_j)
    if value is None:
        raise ValueError("0 < lambda < 1 needs t_ref_ms and e_ref_j (in the dict or given)")
    feasible = memory_ok & links_ok[:, None]
    objective = np.where(feasible, value, math.inf)
    return BlockPrices(orders, n.astype(np.int64), t_iter_ms, e_iter, links_ok, memory_ok,
                       objective)


def price_order(instance: Json, order: Sequence[str], t_ref_ms: float | None = None,
                e_ref_j: float | None = None) -> OrderPrices:
    """Every composition of L into len(order) stages on the GPUs ``order``, priced at the
    instance's micro-batch size."""
    if len(set(order)) != len(order):
        raise ValueError(f"GPU order {order} repeats a GPU")
    index = {g["id"]: i for i, g in enumerate(instance["gpus"])}
    b = price_orders(instance, np.array([[index[g] for g in order]]).reshape(1, len(order)),
                     t_ref_ms, e_ref_j)
    return OrderPrices(tuple(order), b.counts, b.t_iter_ms[0], b.e_iter_j[0],
                       bool(b.links_ok[0]), b.memory_ok[0], b.objective[0])


def gpu_orders(instance: Json) -> Iterable[tuple[str, ...]]:
    """Every ordered choice of 1..min(N, L) distinct GPUs, by Q then lexicographically."""
    ids = [g["id"] for g in instance["gpus"]]
    L = int(instance["model"]["layers"])
    for q in range(1, min(len(ids), L) + 1):
        yield from permutations(ids, q)


def order_blocks(instance: Json, orders: Iterable[Sequence[str]] | None = None,
                 max_rows: int = 1 << 16) -> Iterable[np.ndarray]:
    """``orders`` (default: :func:`gpu_orders`) as (P, Q) arrays of GPU indices, in order.

    A block holds consecutive orders of one length, at most about ``max_rows`` plans.
    """
    N, L = len(instance["gpus"]), int(instance["model"]["layers"])
    if orders is None:  # every order: permutations of the indices, in the same order
        for q in range(1, min(N, L) + 1):
            step = max(1, max_rows // len(composition_array(L, q)))
            it = permutations(range(N), q)
            while block := list(islice(it, step)):
                yield np.array(block, dtype=np.int64).reshape(len(block), q)
        return
    index = {g["id"]: i for i, g in enumerate(instance["gpus"])}
    for q, same_q in groupby(orders, key=len):
        step = max(1, max_rows // max(1, len(composition_array(L, q)))) if q else 1
        it = iter(same_q)
        while block := list(islice(it, step)):
            yield np.array([[index[g] for g in o] for o in block],
                           dtype=np.int64).reshape(len(block), q)


def plan_dict(order: Sequence[str], counts: Sequence[int]) -> Json:
    return {"stages": [{"gpu": g, "layers": int(c)} for g, c in
                       zip(order, counts, strict=True)]}


def all_plans(instance: Json) -> Iterable[Json]:
    """Every plan of the space, as plan dicts (the enumerator's order)."""
    L = int(instance["model"]["layers"])
    for order in gpu_orders(instance):
        for counts in compositions(L, len(order)):
            yield plan_dict(order, counts)


@dataclass
class RefOptimum:
    objective: float  # inf when no plan is feasible
    plan: Json | None  # the first optimal plan in enumeration order
    plans: int  # plans enumerated
    feasible: int  # of which feasible
    t_iter_ms: float | None = None
    e_iter_j: float | None = None


def optimum_ref(instance: Json, t_ref_ms: float | None = None, e_ref_j: float | None = None,
                orders: Iterable[Sequence[str]] | None = None,
                max_plans: int = 3_000_000) -> RefOptimum:
    """The exact optimum by pricing every plan (or every split of the given GPU orders).

    ``t_ref_ms``/``e_ref_j`` override the instance's normalisers (needed for
    0 < lambda < 1 when the dict has none).
    """
    if orders is None:
        N, L = len(instance["gpus"]), int(instance["model"]["layers"])
        if space_size(N, L) > max_plans:
            raise ValueError(f"f({N}, {L}) = {space_size(N, L)} plans is too many to enumerate")
    ids = [g["id"] for g in instance["gpus"]]
    best = RefOptimum(math.inf, None, 0, 0)
    for block in order_blocks(instance, orders):
        r = price_orders(instance, block, t_ref_ms, e_ref_j)
        best.plans += r.objective.size
        best.feasible += int((r.memory_ok & r.links_ok[:, None]).sum())
        if not r.objective.size:
            continue
        p, k = np.unravel_index(int(np.argmin(r.objective)), r.objective.shape)  # first minimum
        if r.objective[p, k] < best.objective:
            best.objective = float(r.objective[p, k])
            best.plan = plan_dict([ids[i] for i in r.orders[p]], r.counts[k])
            best.t_iter_ms, best.e_iter_j = float(r.t_iter_ms[p, k]), float(r.e_iter_j[p, k])
    return best


@dataclass
class RefSpace:
    """Every plan of the space priced: row k is plan(k)."""

    orders: list[tuple[str, ...]]  # per row
    counts: list[tuple[int, ...]]  # per row
    t_iter_ms: np.ndarray
    e_iter_j: np.ndarray
    links_ok: np.ndarray
    memory_ok: np.ndarray
    objective: np.ndarray  # inf where infeasible

    @property
    def feasible(self) -> np.ndarray:
        return self.links_ok & self.memory_ok

    def plan(self, k: int) -> Json:
        return plan_dict(self.orders[k], self.counts[k])

    def __len__(self) -> int:
        return len(self.orders)


def price_space(instance: Json, t_ref_ms: float | None = None,
                e_ref_j: float | None = None, max_plans: int = 200_000) -> RefSpace:
    """Every plan of the space priced (small spaces: it keeps one Python row per plan)."""
    N, L = len(instance["gpus"]), int(instance["model"]["layers"])
    if space_size(N, L) > max_plans:
        raise ValueError(f"f({N}, {L}) = {space_size(N, L)} plans is too many to keep")
    ids = [g["id"] for g in instance["gpus"]]
    blocks = [price_orders(instance, b, t_ref_ms, e_ref_j) for b in order_blocks(instance)]
    K = [len(b.counts) for b in blocks]
    return RefSpace(
        orders=[tuple(ids[i] for i in o) for b, k in zip(blocks, K, strict=True)
                for o in b.orders for _ in range(k)],
        counts=[tuple(int(c) for c in row) for b in blocks for _ in b.orders for row in b.counts],
        t_iter_ms=np.concatenate([b.t_iter_ms.ravel() for b in blocks]),
        e_iter_j=np.concatenate([b.e_iter_j.ravel() for b in blocks]),
        links_ok=np.concatenate([np.repeat(b.links_ok, k) for b, k in zip(blocks, K, strict=True)]),
        memory_ok=np.concatenate([b.memory_ok.ravel() for b in blocks]),
        objective=np.concatenate([b.objective.ravel() for b in blocks]),
    )


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
