"""The genome of the hybrid memetic algorithm (docs/hybrid-memetic.md) and its pricing.

A :class:`Genome` is an ordered tuple of :class:`Group` (one per pipeline stage:
layers, tp, recompute code, replicas as tuples of GPU indices in ring order and
their sample shares) plus the plan-level micro-batch size ``u`` and ZeRO stage
``z``. Genomes are immutable and hashable (duplicates are detected by equality).

The operators keep every genome *structurally* valid (:func:`structure_errors`):
layers >= 1 summing to L, tp a power of two <= max_tp, every replica tp GPUs of
one site, shares >= 1 summing to u, no GPU twice, u, z and recompute from the
instance's choices. Memory and links are left to the price: genomes packed into
flat arrays (:func:`pack`) are priced by the shared batch evaluator
(:class:`geoplan.cost.hybrid_batch.HybridBatchEvaluator`, :func:`price_packed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geoplan.cost.hybrid_batch import HybridBatchEvaluator, HybridPopulation
from geoplan.cost.hybrid_coefficients import HybridCoefficients
from geoplan.cost.hybrid_kernel import price_hybrid_called
from geoplan.cost.kernel import FEASIBLE
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.hybrid import RECOMPUTE, HybridPlan, HybridStage, Replica
from geoplan.model.instance import Instance

__all__ = [
    "Genome",
    "Group",
    "HybridSpace",
    "Packed",
    "from_plan",
    "pack",
    "price_packed",
    "structure_errors",
    "to_plan",
]


@dataclass(frozen=True, slots=True)
class Group:
    """One stage: ``layers``, ``tp``, ``rec`` (0 none, 1 full), replicas and their shares."""

    layers: int
    tp: int
    rec: int
    replicas: tuple[tuple[int, ...], ...]
    shares: tuple[int, ...]

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(g for r in self.replicas for g in r)


@dataclass(frozen=True, slots=True)
class Genome:
    """A hybrid plan over GPU indices: stages in pipeline order, micro-batch u, ZeRO z."""

    stages: tuple[Group, ...]
    u: int
    z: int

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(g for s in self.stages for g in s.gpus)

    @property
    def q(self) -> int:
        return len(self.stages)


class HybridSpace:
    """What the operators and the pricer need of one instance, computed once.

    ``u_choices``/``z_choices`` are the instance's lists plus its default (a plan
    may always omit u and z); ``rec_choices`` are kernel codes; ``tp_choices``
    the powers of two up to ``max_tp`` that some site can hold. ``near[g]``
    lists the other GPUs of g's site, highest bandwidth from g first (ties:
    lowest latency, then index), so TP groups and replicas grow inside a node.
    """

    def __init__(self, instance: Instance) -> None:
        self.instance = resolve_normalisers(instance)
        inst = self.instance
        t = inst.training
        self.coefficients = HybridCoefficients.of(inst)
        c = self.coefficients
        self.weights = ObjectiveWeights.from_instance(inst)
        # Fixed scalar and array types: one compiled signature for every instance (an
        # integral activation factor would otherwise compile, and cache, a second one).
        # The casts change no value, so prices keep the scalar evaluator's bits.
        f64, i64 = np.float64, np.int64
        self.kernel_args: tuple[Any, ...] = (
            np.array(c.tflops, f64), np.array(c.lat_ms, f64), np.array(c.bw_gbps, f64),
            np.array(c.site, i64), np.array(c.idle_w, f64), np.array(c.dyn_w, f64),
            np.array(c.mem_cap, f64), int(c.n_layers), int(c.batch), int(c.max_tp),
            float(c.flop_ls), float(c.gamma), float(c.act_bytes), float(c.w_bytes),
            float(c.lm_bytes), float(c.alpha), float(c.logit_bytes), float(c.overhead_ms))
        mode, lam, t_ref, e_ref = self.weights.args
        self.weight_args: tuple[Any, ...] = (int(mode), float(lam), float(t_ref), float(e_ref))
        self.n = inst.n
        self.L = inst.layers
        self.ids = inst.gpu_ids
        self.site = np.asarray(c.site, dtype=np.int64)
        self.max_tp = int(t.max_tp)
        self.u_default = int(t.micro_batch_size)
        self.z_default = int(t.zero)
        self.u_choices = tuple(sorted(set(t.micro_batch_choices or ()) | {self.u_default}))
        self.z_choices = tuple(sorted(set(t.zero_choices or ()) | {self.z_default}))
        rc = t.recompute_choices if t.recompute_choices is not None else RECOMPUTE
        self.rec_choices = tuple(RECOMPUTE.index(r) for r in RECOMPUTE if r in rc) or (0,)
        self.site_gpus: dict[int, tuple[int, ...]] = {}
        for g in range(self.n):
            s = int(self.site[g])
            self.site_gpus[s] = (*self.site_gpus.get(s, ()), g)
        biggest = max(len(v) for v in self.site_gpus.values())
        self.tp_choices = tuple(k for k in (1 << e for e in range(11))
                                if k <= min(self.max_tp, biggest))
        bw, lat = c.bw_gbps, c.lat_ms
        self.near: list[tuple[int, ...]] = []
        for g in range(self.n):
            mates = [h for h in self.site_gpus[int(self.site[g])] if h != g]
            mates.sort(key=lambda h: (-bw[g, h], lat[g, h], h))
            self.near.append(tuple(mates))
        self.tflops = np.asarray(c.tflops, dtype=float)
        self.batch_evaluator = HybridBatchEvaluator(inst, threads=1)


# --------------------------------------------------------------------------- conversion


def from_plan(space: HybridSpace, plan: HybridPlan) -> Genome | None:
    """The genome of ``plan`` (u, z, samples resolved); None when it cannot be one:
    unknown GPU ids, layers that do not partition L, a replica without tp GPUs,
    shares that do not sum to u, or a GPU used twice."""
    p = plan.resolved(space.instance)
    assert p.micro_batch_size is not None and p.zero is not None
    index = {g: k for k, g in enumerate(space.ids)}
    stages = []
    for s in p.stages:
        if s.recompute not in RECOMPUTE:
            return None
        reps = []
        for r in s.replicas:
            if any(g not in index for g in r.gpus):
                return None
            reps.append(tuple(index[g] for g in r.gpus))
        stages.append(Group(s.layers, s.tp, RECOMPUTE.index(s.recompute), tuple(reps),
                            tuple(int(r.samples or 0) for r in s.replicas)))
    g = Genome(tuple(stages), int(p.micro_batch_size), int(p.zero))
    errs = structure_errors(space, g, choices=False)
    return None if errs else g


def to_plan(space: HybridSpace, genome: Genome) -> HybridPlan:
    """The :class:`HybridPlan` of ``genome`` (u and zero explicit)."""
    ids = space.ids
    return HybridPlan(
        tuple(HybridStage(s.layers, s.tp,
                          tuple(Replica(tuple(ids[g] for g in r), k)
                                for r, k in zip(s.replicas, s.shares, strict=True)),
                          RECOMPUTE[s.rec])
              for s in genome.stages),
        genome.u, genome.z,
    )


def structure_errors(space: HybridSpace, genome: Genome, choices: bool = True) -> list[str]:
    """What breaks the structural invariants (empty: none). ``choices``: also require u, z
    and recompute from the instance's choices (plans from outside need not)."""
    out = []
    if sum(s.layers for s in genome.stages) != space.L:
        out.append("layers do not sum to L")
    seen: set[int] = set()
    for q, s in enumerate(genome.stages):
        if s.layers < 1:
            out.append(f"stage {q} has no layer")
        if s.tp < 1 or s.tp & (s.tp - 1) or s.tp > space.max_tp:
            out.append(f"stage {q} tp {s.tp}")
        if not s.replicas or len(s.shares) != len(s.replicas):
            out.append(f"stage {q} replicas/shares")
        if sum(s.shares) != genome.u or min(s.shares, default=0) < 1:
            out.append(f"stage {q} shares {s.shares} for u {genome.u}")
        if choices and s.rec not in space.rec_choices:
            out.append(f"stage {q} recompute {s.rec}")
        for r in s.replicas:
            if len(r) != s.tp:
                out.append(f"stage {q} replica {r} is not tp {s.tp} GPUs")
            if len({int(space.site[g]) for g in r}) > 1:
                out.append(f"stage {q} replica {r} spans sites")
            for g in r:
                if g in seen or not 0 <= g < space.n:
                    out.append(f"GPU {g} twice or unknown")
                seen.add(g)
    if choices and genome.u not in space.u_choices:
        out.append(f"u {genome.u}")
    if choices and genome.z not in space.z_choices:
        out.append(f"z {genome.z}")
    return out


# --------------------------------------------------------------------------- pricing


@dataclass(frozen=True, eq=False)
class Packed:
    """A batch of genomes as the kernel's arrays, concatenated plan after plan.

    Plan k's stages are ``s0[k]..s0[k+1]-1`` (``layers``, ``tp``, ``rec``), its
    ``rep0`` entries ``s0[k]+k .. s0[k+1]+k`` (relative to the plan), its replicas
    ``r0[k]..r0[k+1]-1`` (``samples``) with ``g0`` entries ``r0[k]+k .. r0[k+1]+k``
    (relative), its GPUs ``p0[k]..p0[k+1]-1``."""

    s0: np.ndarray
    r0: np.ndarray
    p0: np.ndarray
    layers: np.ndarray
    tp: np.ndarray
    rec: np.ndarray
    rep0: np.ndarray
    samples: np.ndarray
    g0: np.ndarray
    gpus: np.ndarray
    u: np.ndarray
    z: np.ndarray

    def plan(self, k: int) -> tuple[Any, ...]:
        """Plan k's kernel arguments ``(q, layers, tp, rec, rep0, samples, g0, gpus, u, z)``."""
        a, b = int(self.s0[k]), int(self.s0[k + 1])
        c, d = int(self.r0[k]), int(self.r0[k + 1])
        return (b - a, self.layers[a:b], self.tp[a:b], self.rec[a:b],
                self.rep0[a + k:b + k + 1], self.samples[c:d], self.g0[c + k:d + k + 1],
                self.gpus[int(self.p0[k]):int(self.p0[k + 1])], int(self.u[k]), int(self.z[k]))


def pack(genomes: Sequence[Genome]) -> Packed:
    """The arrays of ``genomes`` (see :class:`Packed`)."""
    s0, r0, p0 = [0], [0], [0]
    layers: list[int] = []
    tp: list[int] = []
    rec: list[int] = []
    rep0: list[int] = []
    samples: list[int] = []
    g0: list[int] = []
    gpus: list[int] = []
    for gen in genomes:
        nr = 0
        ng = 0
        rep0.append(0)
        g0.append(0)
        for s in gen.stages:
            layers.append(s.layers)
            tp.append(s.tp)
            rec.append(s.rec)
            for r, k in zip(s.replicas, s.shares, strict=True):
                samples.append(k)
                gpus.extend(r)
                ng += len(r)
                g0.append(ng)
            nr += len(s.replicas)
            rep0.append(nr)
        s0.append(len(layers))
        r0.append(len(samples))
        p0.append(len(gpus))

    def arr(x: list[int]) -> np.ndarray:
        return np.array(x, dtype=np.int64)

    return Packed(arr(s0), arr(r0), arr(p0), arr(layers), arr(tp), arr(rec), arr(rep0),
                  arr(samples), arr(g0), arr(gpus),
                  arr([g.u for g in genomes]), arr([g.z for g in genomes]))


#: The shared kernel's pricer, callable from this package's numba loops.
kernel_price = price_hybrid_called


def _padded(starts: np.ndarray, values: np.ndarray, extra: int) -> np.ndarray:
    """Ragged rows (row k has ``starts[k+1] - starts[k] + extra`` entries beginning at
    ``starts[k] + k * extra`` of ``values``) as a zero-padded matrix."""
    counts = np.diff(starts) + extra
    P = counts.shape[0]
    out = np.zeros((P, max(int(counts.max()), 1)), dtype=np.int64)
    rows = np.repeat(np.arange(P), counts)
    first = starts[:-1] + np.arange(P) * extra
    cols = np.arange(values.shape[0]) - np.repeat(first, counts)
    out[rows, cols] = values
    return out


def price_packed(space: HybridSpace, p: Packed) -> tuple[np.ndarray, np.ndarray]:
    """(status, objective) per packed genome, by the shared kernel (inf unless feasible),
    through :class:`geoplan.cost.hybrid_batch.HybridBatchEvaluator` (one thread)."""
    if p.s0.shape[0] <= 1:
        return np.empty(0, np.int64), np.empty(0)
    pop = HybridPopulation.from_arrays(
        _padded(p.s0, p.layers, 0), _padded(p.s0, p.tp, 0), _padded(p.s0, p.rec, 0),
        _padded(p.s0, p.rep0, 1), _padded(p.r0, p.samples, 0), _padded(p.r0, p.g0, 1),
        _padded(p.p0, p.gpus, 0), np.diff(p.s0), p.u, p.z)
    res = space.batch_evaluator.evaluate(pop)
    st = np.asarray(res.status, dtype=np.int64)
    return st, np.where(st == FEASIBLE, res.objective, np.inf)


def price(space: HybridSpace, genomes: Sequence[Genome]) -> np.ndarray:
    """The objective of each genome (inf when infeasible)."""
    return price_packed(space, pack(genomes))[1]
