"""GPU classes, nodes, and the restricted hybrid space of the exact models (docs/hybrid-exact.md).

A *class* is a set of GPUs identical in everything the hybrid kernel reads of one
GPU (effective TFLOPS, effective memory, idle and active power, site) and
grouped in *nodes* of one size with one in-node link. The exact models
(:mod:`formulations.hybrid.milp`, :mod:`formulations.hybrid.cpsat`) search the
restricted space :data:`RESTRICTED_SPACE`; this module detects the classes,
checks that links are uniform where that space needs them to be (else
:class:`NotClassStructured`), prices a stage configuration through the kernel's
own per-term functions on a prototype placement (so that the models price a
decoded plan exactly as :mod:`geoplan.cost.hybrid_kernel` does), and decodes a
:class:`Choice` to a :class:`~geoplan.model.hybrid.HybridPlan` with concrete GPUs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from geoplan.cost import hybrid_kernel as hk
from geoplan.cost.hybrid_coefficients import HybridCoefficients
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.generators import cloud_node_of
from geoplan.model.hybrid import RECOMPUTE, HybridPlan, HybridStage, Replica
from geoplan.model.instance import Instance

__all__ = [
    "RESTRICTED_SPACE",
    "Choice",
    "Config",
    "GpuClass",
    "NotClassStructured",
    "Pool",
    "StageChoice",
    "choice_of_plan",
    "class_pool",
]

#: The restricted space, in one sentence (reported in ``info["restricted"]["space"]``).
RESTRICTED_SPACE = (
    "every stage runs on one GPU class, its d replicas are TP groups of t GPUs inside one "
    "node each, on ceil(d / floor(S/t)) whole nodes of that class used by no other stage "
    "(filled in order), every replica takes u/d samples, and ZeRO is the largest offered"
)

_CLOUD_ID = re.compile(r"^.+-n\d+-g\d+$")
_PRESET_ID = re.compile(r"^[^/]+/n\d+/g\d+$")


class NotClassStructured(ValueError):
    """The pool's links are not uniform where the restricted space needs them to be."""


@dataclass(frozen=True)
class GpuClass:
    """One class: identical GPUs in ``nodes`` (GPU indices, canonical order) of one size."""

    index: int
    label: str
    nodes: tuple[tuple[int, ...], ...]
    tflops: float
    mem_cap: float
    idle_w: float
    dyn_w: float
    site: int

    @property
    def node_size(self) -> int:
        return len(self.nodes[0])

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_gpus(self) -> int:
        return self.node_size * self.n_nodes


@dataclass(frozen=True)
class Config:
    """A stage's configuration: class, TP degree, replicas, recompute (0 none, 1 full).

    ``per_node`` = floor(S / t) replicas share a node; the stage takes ``nodes`` =
    ceil(d / per_node) whole nodes of its class."""

    cls: int
    tp: int
    d: int
    rec: int
    per_node: int

    @property
    def nodes(self) -> int:
        return -(-self.d // self.per_node)

    @property
    def block(self) -> tuple[int, int]:
        """What the boundary times depend on: (class, replicas)."""
        return (self.cls, self.d)


@dataclass(frozen=True)
class StageChoice:
    config: Config
    layers: int


@dataclass(frozen=True)
class Choice:
    """A point of the restricted space: u, ZeRO and the stages, first to last."""

    u: int
    zero: int
    stages: tuple[StageChoice, ...]


@dataclass(frozen=True)
class Coef:
    """A configuration's numbers at one micro-batch size (ms, W, bytes).

    tau^comp = comp1 n; energy M dyn1 n / 1000 + T idle / 1000; A = a0 + a1 n
    (``*_last``: as the last stage); memory per GPU = m0 + m1 n + (Q + 1) m2 n."""

    comp1: float
    dyn1: float
    idle: float
    a0: float
    a1: float
    a0_last: float
    a1_last: float
    m0: float
    m0_last: float
    m1: float
    m2: float
    cap: float


@dataclass(frozen=True)
class Cell:
    """What both models need of a cell (u, q): configurations (dominated ones dropped),
    their numbers, layer caps (middle, last), the blocks' message times, the linked block
    pairs, the least number of site crossings, and each class's site."""

    u: int
    q: int
    configs: list[Config]
    coefs: dict[Config, Coef]
    caps: dict[Config, tuple[int, int]]
    blocks: list[tuple[int, int]]
    fwd: dict[tuple[tuple[int, int], tuple[int, int]], float]
    bwd: dict[tuple[tuple[int, int], tuple[int, int]], float]
    linked: list[tuple[tuple[int, int], tuple[int, int]]]
    crossings: int
    site: dict[int, int]

    def cap(self, cfg: Config, slot: int) -> int:
        """Layer cap of ``cfg`` in slot ``slot`` (slot 1 is the last stage)."""
        return self.caps[cfg][1 if slot == 1 else 0]


def _undominated(configs: list[Config], coefs: dict[Config, Coef],
                 caps: dict[Config, tuple[int, int]]) -> list[Config]:
    """Drop a configuration when another of the same block is no worse in every number.

    Same class and replicas (so the same messages), no more nodes, no larger per-layer
    time, gradient sync, idle or dynamic power, and caps at least as large: replacing
    it in any plan keeps the plan feasible and no more costly."""

    def le(a: Config, b: Config) -> bool:
        x, y = coefs[a], coefs[b]
        return (a.block == b.block and a.nodes <= b.nodes and x.comp1 <= y.comp1
                and x.a0 <= y.a0 and x.a1 <= y.a1 and x.a0_last <= y.a0_last
                and x.a1_last <= y.a1_last and x.idle <= y.idle and x.dyn1 <= y.dyn1
                and caps[a][0] >= caps[b][0] and caps[a][1] >= caps[b][1])

    keep = []
    for k, b in enumerate(configs):
        # b goes if some a beats it (ties: the earlier one stays)
        if not any(le(a, b) and (not le(b, a) or j < k)
                   for j, a in enumerate(configs) if a is not b):
            keep.append(b)
    return keep


class Pool:
    """The classes of an instance and the link values between them.

    ``pair_lat[c, c']``/``pair_bw[c, c']``: the link from a GPU of class c to a GPU
    of class c' in another node (uniform, checked); inf / 0 where there is none.
    """

    def __init__(self, instance: Instance, classes: Sequence[GpuClass]) -> None:
        self.instance = instance
        self.classes = tuple(classes)
        self.hc = HybridCoefficients.of(instance)
        n = len(self.classes)
        self.pair_lat = np.full((n, n), np.inf)
        self.pair_bw = np.zeros((n, n))
        node = np.full(instance.n, -1)
        for cl in self.classes:
            for k, members in enumerate(cl.nodes):
                node[list(members)] = cl.index * 100_000 + k
        self._node = node
        self._cells: dict[tuple[int, int], Cell | None] = {}
        self._bounds: dict[tuple[int, int], tuple[float, float, float]] = {}
        self._check_links()

    # ------------------------------------------------------------------ checks
    def _check_links(self) -> None:
        lat, bw = self.hc.lat_ms, self.hc.bw_gbps
        for cl in self.classes:
            for members in cl.nodes:
                if len(members) > 1:
                    idx = np.array(members)
                    off = ~np.eye(len(idx), dtype=bool)
                    _uniform(lat[np.ix_(idx, idx)][off], bw[np.ix_(idx, idx)][off],
                             f"the links inside node {self.gpu_label(members[0])}")
        for a in self.classes:
            for b in self.classes:
                ia = np.array([g for m in a.nodes for g in m])
                ib = np.array([g for m in b.nodes for g in m])
                mask = self._node[ia][:, None] != self._node[ib][None, :]
                if not mask.any():
                    continue
                la, ba = lat[np.ix_(ia, ib)][mask], bw[np.ix_(ia, ib)][mask]
                self.pair_lat[a.index, b.index], self.pair_bw[a.index, b.index] = _uniform(
                    la, ba, f"the links from class {a.label} to class {b.label} "
                    "(between different nodes)")

    def gpu_label(self, g: int) -> str:
        return self.instance.gpus[g].id

    # ------------------------------------------------------------------ the space
    @cached_property
    def zero(self) -> int:
        """The ZeRO stage of the space: the largest offered (it only lowers memory)."""
        t = self.instance.training
        return max(t.zero_choices or (t.zero,))

    @cached_property
    def micro_batches(self) -> tuple[int, ...]:
        t = self.instance.training
        return tuple(sorted(set(t.micro_batch_choices or (t.micro_batch_size,))))

    @cached_property
    def recomputes(self) -> tuple[int, ...]:
        rc = self.instance.training.recompute_choices or RECOMPUTE
        return tuple(sorted(RECOMPUTE.index(r) for r in set(rc)))

    @property
    def q_max(self) -> int:
        return min(self.instance.layers, sum(cl.n_nodes for cl in self.classes))

    def configs(self, u: int) -> list[Config]:
        """Every configuration of the space at micro-batch size u (d divides u, fits the class)."""
        out: list[Config] = []
        max_tp = self.instance.training.max_tp
        for cl in self.classes:
            t = 1
            while t <= min(max_tp, cl.node_size):
                per = cl.node_size // t
                for d in range(1, u + 1):
                    if u % d == 0 and -(-d // per) <= cl.n_nodes:
                        out.extend(Config(cl.index, t, d, r, per) for r in self.recomputes)
                t *= 2
        return out

    # ------------------------------------------------------------------ prototypes
    def proto_gpus(self, cfg: Config) -> list[list[int]]:
        """The replicas' GPUs in the canonical placement on the class's first nodes."""
        cl = self.classes[cfg.cls]
        reps = []
        for r in range(cfg.d):
            node = cl.nodes[r // cfg.per_node]
            a = (r % cfg.per_node) * cfg.tp
            reps.append(list(node[a:a + cfg.tp]))
        return reps

    def coef(self, cfg: Config, u: int) -> Coef:
        """The configuration's numbers, each from the kernel's own function."""
        h = self.hc
        cl = self.classes[cfg.cls]
        reps = self.proto_gpus(cfg)
        gpus = np.array([g for r in reps for g in r], dtype=np.int64)
        g0 = np.arange(0, cfg.d * cfg.tp + 1, cfg.tp, dtype=np.int64)
        s = u // cfg.d
        f = hk.compute_factor(cfg.rec, h.gamma)
        c1 = hk.replica_compute_ms(1, cfg.tp, s, f, cl.tflops, h.flop_ls)
        p1 = hk.replica_tp_ms(gpus, 0, cfg.tp, 1, s, cfg.rec, h.act_bytes, h.lat_ms, h.bw_gbps)

        def sync(n: int, last: bool) -> float:
            return float(hk.grad_sync_ms(n, cfg.tp, 0, cfg.d, last, g0, gpus, h.w_bytes,
                                         h.lm_bytes, h.lat_ms, h.bw_gbps))

        def mem(n: int, q: int, last: bool) -> float:
            return float(hk.replica_bytes(n, cfg.tp, cfg.d, self.zero, cfg.rec, s, q, last,
                                          h.w_bytes, h.lm_bytes, h.alpha, h.act_bytes,
                                          h.logit_bytes))

        m0 = mem(0, 0, False)
        m0_last = mem(0, 0, True)
        m2 = mem(1, 1, False) - mem(1, 0, False)
        m1 = mem(1, 0, False) - m0 - m2
        return Coef(
            comp1=c1 + p1,
            dyn1=cfg.d * cfg.tp * cl.dyn_w * c1,
            idle=cfg.d * cfg.tp * cl.idle_w,
            a0=sync(0, False), a1=sync(1, False) - sync(0, False),
            a0_last=sync(0, True), a1_last=sync(1, True) - sync(0, True),
            m0=m0, m0_last=m0_last, m1=m1, m2=m2, cap=cl.mem_cap,
        )

    def layer_cap(self, cfg: Config, u: int, q_count: int, last: bool) -> int:
        """Most layers a stage of ``cfg`` holds in a ``q_count``-stage plan (the kernel's test)."""
        h = self.hc
        s = u // cfg.d
        cap = self.classes[cfg.cls].mem_cap

        def fits(n: int) -> bool:
            return bool(hk.replica_bytes(n, cfg.tp, cfg.d, self.zero, cfg.rec, s, q_count, last,
                                         h.w_bytes, h.lm_bytes, h.alpha, h.act_bytes,
                                         h.logit_bytes) <= cap)

        lo, hi = 0, self.instance.layers
        if not fits(0):
            return 0
        while lo < hi:  # the largest n that fits (memory grows with n)
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def leads(self, a: int, b: int) -> tuple[int, int] | None:
        """Prototype leads of two consecutive stages of classes a, b (other nodes)."""
        ca, cb = self.classes[a], self.classes[b]
        if a == b:
            return (ca.nodes[0][0], ca.nodes[1][0]) if ca.n_nodes > 1 else None
        return ca.nodes[0][0], cb.nodes[0][0]

    def send(self, a: tuple[int, int], b: tuple[int, int], u: int, forward: bool) -> float:
        """The boundary message time between blocks a = (class, d) and b (inf: no link).

        Under equal shares the largest number of samples two leads share is
        u / max(d_a, d_b) (the first replicas of both stages share that many),
        and every lead pair uses the same class-pair link, so the max over the
        pairs is that one message."""
        pair = self.leads(a[0], b[0])
        if pair is None:
            return math.inf
        x, y = pair
        k = u // max(a[1], b[1])
        h = self.hc
        src, dst = (x, y) if forward else (y, x)
        return float(hk.send_ms(k, src, dst, h.act_bytes, h.lat_ms, h.bw_gbps))

    # ------------------------------------------------------------------ plans
    def decode(self, choice: Choice) -> HybridPlan:
        """The plan of ``choice``: each stage takes the next free nodes of its class."""
        used = [0] * len(self.classes)
        ids = self.instance.gpu_ids
        stages = []
        s_all = choice.u
        for st in choice.stages:
            cfg = st.config
            cl = self.classes[cfg.cls]
            first = used[cfg.cls]
            used[cfg.cls] += cfg.nodes
            if used[cfg.cls] > cl.n_nodes:
                raise ValueError(f"class {cl.label} has {cl.n_nodes} nodes, the choice uses more")
            reps = []
            for r in range(cfg.d):
                node = cl.nodes[first + r // cfg.per_node]
                a = (r % cfg.per_node) * cfg.tp
                reps.append(Replica(tuple(ids[g] for g in node[a:a + cfg.tp]), s_all // cfg.d))
            stages.append(HybridStage(st.layers, cfg.tp, tuple(reps), RECOMPUTE[cfg.rec]))
        return HybridPlan(tuple(stages), choice.u, choice.zero)

    def price(self, choice: Choice) -> tuple[float, float, float]:
        """(T_iter, E_iter, objective) of ``choice`` from the models' tables (no kernel call)."""
        u = choice.u
        m = self.instance.training.batch_size / u
        o = self.hc.overhead_ms
        q = len(choice.stages)
        taus, syncs = [], []
        idle = dyn = 0.0
        for k, st in enumerate(choice.stages):
            c = self.coef(st.config, u)
            last = k == q - 1
            tau = c.comp1 * st.layers + o
            if k + 1 < q:
                tau += self.send(st.config.block, choice.stages[k + 1].config.block, u, True)
            if k > 0:
                tau += self.send(choice.stages[k - 1].config.block, st.config.block, u, False)
            taus.append(tau)
            if st.config.d > 1:
                syncs.append((c.a0_last + c.a1_last * st.layers) if last
                             else (c.a0 + c.a1 * st.layers))
            idle += c.idle
            dyn += c.dyn1 * st.layers
        t_iter = sum(taus) + (m - 1) * max(taus) + max(syncs, default=0.0)
        e_iter = t_iter / 1e3 * idle + m * dyn / 1e3
        w = ObjectiveWeights.from_instance(self.instance)
        return t_iter, e_iter, w.value(t_iter, e_iter)

    def cell(self, u: int, q_count: int) -> Cell | None:
        """The data of the cell (u, q_count); None when no plan of it can exist (cached)."""
        key = (u, q_count)
        if key not in self._cells:
            self._cells[key] = self._cell(u, q_count)
        return self._cells[key]

    def _cell(self, u: int, q_count: int) -> Cell | None:
        if q_count > self.q_max:
            return None
        configs = self.configs(u)
        coefs = {c: self.coef(c, u) for c in configs}
        caps = {c: (self.layer_cap(c, u, q_count, False), self.layer_cap(c, u, q_count, True))
                for c in configs}
        configs = _undominated([c for c in configs if max(caps[c]) >= 1], coefs, caps)
        if not configs:
            return None
        if q_count > 1 and not any(caps[c][0] >= 1 for c in configs):
            return None
        blocks = sorted({c.block for c in configs})
        fwd = {(a, b): self.send(a, b, u, True) for a in blocks for b in blocks}
        bwd = {(a, b): self.send(a, b, u, False) for a in blocks for b in blocks}
        linked = [(a, b) for a in blocks for b in blocks
                  if math.isfinite(fwd[a, b]) and math.isfinite(bwd[a, b])]
        if q_count > 1 and not linked:
            return None
        # A run of consecutive stages on one site uses at most its nodes: the pipeline
        # crosses sites at least (least number of runs covering q_count stages) - 1 times.
        per_site: dict[int, int] = {}
        for cl in self.classes:
            per_site[cl.site] = per_site.get(cl.site, 0) + cl.n_nodes
        runs, covered = 0, 0
        for v in sorted(per_site.values(), reverse=True):
            if covered >= q_count:
                break
            runs, covered = runs + 1, covered + v
        return Cell(u, q_count, configs, {c: coefs[c] for c in configs},
                    {c: caps[c] for c in configs}, blocks, fwd, bwd, linked,
                    max(0, runs - 1), {cl.index: cl.site for cl in self.classes})

    def quick_bound(self, u: int, q_count: int) -> float:
        """A valid lower bound on the objective of every plan of the cell (u, ``q_count``)."""
        return self.cell_bounds(u, q_count)[0]

    def cell_bounds(self, u: int, q_count: int) -> tuple[float, float, float]:
        """(objective, tmax, sum tau) lower bounds of every plan of the cell (cached)."""
        key = (u, q_count)
        if key not in self._bounds:
            self._bounds[key] = self._cell_bounds(u, q_count)
        return self._bounds[key]

    def _cell_bounds(self, u: int, q_count: int) -> tuple[float, float, float]:
        """(objective, tmax, sum tau) lower bounds of every plan of the cell (u, ``q_count``).

        Stage q holds at most (tmax - o - send) / comp1_q layers, so tmax >= L / R + o +
        send with R the largest sum of 1 / comp1 over q_count stages fitting the nodes;
        a site crossing costs its two ends at least the cheapest crossing message each;
        sum tau >= L min comp1 + Q o + the boundaries' cheapest messages. Energy: every
        stage idles at least its cheapest configuration."""
        cell = self.cell(u, q_count)
        if cell is None:
            return math.inf, 0.0, 0.0
        coefs = list(cell.coefs.values())
        L, o = self.instance.layers, self.hc.overhead_ms
        m = self.instance.training.batch_size / u
        c_min = min(c.comp1 for c in coefs)
        rate = self._best_rate(cell.configs, coefs, q_count)
        if rate <= 0:
            return math.inf, 0.0, 0.0
        pair = min((cell.fwd[p] + cell.bwd[p] for p in cell.linked), default=0.0)
        one = min((min(cell.fwd[p], cell.bwd[p]) for p in cell.linked), default=0.0)
        cross = [p for p in cell.linked if cell.site[p[0][0]] != cell.site[p[1][0]]]
        if q_count == 1:
            pair = one = 0.0
        tmax = L / rate + o + one
        sum_lb = L * c_min + q_count * o + (q_count - 1) * pair
        if cell.crossings:
            if not cross:
                return math.inf, 0.0, 0.0
            tmax = max(tmax, o + c_min + min(max(cell.fwd[p], cell.bwd[p]) for p in cross))
            c_pair = min(cell.fwd[p] + cell.bwd[p] for p in cross)
            sum_lb += cell.crossings * (c_pair - pair)
        t_lb = sum_lb + (m - 1) * tmax
        w = ObjectiveWeights.from_instance(self.instance)
        e_lb = (t_lb * q_count * min(c.idle for c in coefs) / 1e3
                + m * L * min(c.dyn1 for c in coefs) / 1e3)
        return (w.value(t_lb, e_lb) if w.b > 0 else t_lb * w.a), tmax, sum_lb

    def _best_rate(self, configs: list[Config], coefs: list[Coef], q_count: int) -> float:
        """max sum_q 1 / comp1_q over q_count stages within every class's nodes (two DPs)."""
        neg = -math.inf
        total = [0.0] + [neg] * q_count  # total[j]: best with j stages over the classes so far
        for cl in self.classes:
            mine = [(c.nodes, 1.0 / k.comp1) for c, k in zip(configs, coefs, strict=True)
                    if c.cls == cl.index and k.comp1 > 0]
            # g[j][v]: best rate of j stages of this class on v nodes
            g = [[neg] * (cl.n_nodes + 1) for _ in range(q_count + 1)]
            g[0][0] = 0.0
            for j in range(1, q_count + 1):
                for v in range(cl.n_nodes + 1):
                    g[j][v] = max((g[j - 1][v - nv] + r for nv, r in mine
                                   if nv <= v and g[j - 1][v - nv] > neg), default=neg)
            best = [max(row) for row in g]
            total = [max((total[j - i] + best[i] for i in range(j + 1)
                          if total[j - i] > neg and best[i] > neg), default=neg)
                     for j in range(q_count + 1)]
        return total[q_count] if total[q_count] > neg else 0.0

    def summary(self) -> list[dict[str, object]]:
        return [{"class": cl.label, "nodes": cl.n_nodes, "gpus_per_node": cl.node_size}
                for cl in self.classes]


def _uniform(lat: np.ndarray, bw: np.ndarray, what: str) -> tuple[float, float]:
    """The one (latency, bandwidth) of a block of links; NotClassStructured if they differ."""
    l0, b0 = float(lat.flat[0]), float(bw.flat[0])
    bad_l = ~((lat == l0) | (np.isinf(lat) & math.isinf(l0)))
    bad_b = bw != b0
    if bad_l.any() or bad_b.any():
        k = int(np.flatnonzero(bad_l | bad_b)[0])
        raise NotClassStructured(
            f"{what} are not uniform (latency {l0:g} ms / {b0:g} Gbps and "
            f"{float(lat.flat[k]):g} ms / {float(bw.flat[k]):g} Gbps): the exact hybrid models "
            "price a stage by its class, which would not be exact here")
    return l0, b0


def _node_keys(instance: Instance, hc: HybridCoefficients) -> list[object]:
    """A node key per GPU: from the ids of ``cloud`` and preset instances, else from links."""
    ids = instance.gpu_ids
    if all(_PRESET_ID.match(g) for g in ids):
        return [g.rsplit("/", 1)[0] for g in ids]  # presets.node_of
    if all(_CLOUD_ID.match(g) for g in ids):
        return [(instance.gpus[k].site, cloud_node_of(g)) for k, g in enumerate(ids)]
    # No id convention: a node is a set of GPUs of one kind whose mutual links (both ways)
    # are the fastest tier of that kind (largest bandwidth, then smallest latency).
    kind = [_kind(instance, hc, k) for k in range(instance.n)]
    keys: list[object] = list(range(instance.n))
    by_kind: dict[object, list[int]] = {}
    for k, key in enumerate(kind):
        by_kind.setdefault(key, []).append(k)
    lat, bw = hc.lat_ms, hc.bw_gbps
    for members in by_kind.values():
        if len(members) < 2:
            continue
        idx = np.array(members)
        sub_b, sub_l = bw[np.ix_(idx, idx)], lat[np.ix_(idx, idx)]
        off = ~np.eye(len(idx), dtype=bool)
        best_b = sub_b[off].max()
        if best_b <= 0:
            continue
        best_l = sub_l[off & (sub_b == best_b)].min()
        fast = (sub_b == best_b) & (sub_l == best_l) & off
        fast = fast & fast.T
        parent = list(range(len(idx)))

        def root(a: int, parent: list[int] = parent) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for a, b in zip(*np.nonzero(fast), strict=True):
            parent[root(int(a))] = root(int(b))
        for a in range(len(idx)):
            keys[members[a]] = ("node", members[root(a)])
    return keys


def _kind(instance: Instance, hc: HybridCoefficients, k: int) -> tuple[object, ...]:
    g = instance.gpus[k]
    return (g.type, float(hc.tflops[k]), float(hc.mem_cap[k]), float(hc.idle_w[k]),
            float(hc.dyn_w[k]), int(hc.site[k]))


def class_pool(instance: Instance) -> Pool:
    """Detect nodes and classes and check link uniformity; NotClassStructured if it fails."""
    hc = HybridCoefficients.of(instance)
    keys = _node_keys(instance, hc)
    nodes: dict[object, list[int]] = {}
    for k, key in enumerate(keys):
        nodes.setdefault(key, []).append(k)
    groups: dict[tuple[object, ...], list[tuple[int, ...]]] = {}
    for members in nodes.values():
        kinds = {_kind(instance, hc, g) for g in members}
        if len(kinds) > 1:
            raise NotClassStructured(
                f"node {instance.gpus[members[0]].id} holds GPUs of different kinds or sites")
        link: tuple[float, float] | None = None
        if len(members) > 1:
            link = float(hc.lat_ms[members[0], members[1]]), float(hc.bw_gbps[members[0],
                                                                               members[1]])
        key = (*kinds.pop(), len(members), link)
        groups.setdefault(key, []).append(tuple(members))
    classes: list[GpuClass] = []
    for key, members_list in sorted(groups.items(), key=lambda kv: min(kv[1])[0]):
        first = members_list[0][0]
        g = instance.gpus[first]
        label = f"{g.site or g.id}/{g.type or 'gpu'}"
        if any(c.label == label for c in classes):
            label = f"{label}#{len(classes)}"
        classes.append(GpuClass(len(classes), label, tuple(sorted(members_list)),
                                float(hc.tflops[first]), float(hc.mem_cap[first]),
                                float(hc.idle_w[first]), float(hc.dyn_w[first]),
                                int(hc.site[first])))
        del key
    return Pool(instance, classes)


def choice_of_plan(pool: Pool, plan: HybridPlan) -> Choice | str:
    """The point of the restricted space whose decoded plan prices as ``plan``, or why not."""
    inst = pool.instance
    p = plan.resolved(inst)
    u = p.micro_batch_size
    assert u is not None
    if u not in pool.micro_batches:
        return f"micro-batch size {u} is not offered"
    of_gpu: dict[int, tuple[int, int]] = {}
    for cl in pool.classes:
        for k, members in enumerate(cl.nodes):
            for g in members:
                of_gpu[g] = (cl.index, k)
    stages = []
    seen_nodes: set[tuple[int, int]] = set()
    for q, s in enumerate(p.stages):
        d = len(s.replicas)
        if s.recompute not in RECOMPUTE or RECOMPUTE.index(s.recompute) not in pool.recomputes:
            return f"stage {q}: recompute {s.recompute!r} is not offered"
        if any(r.samples != u // d for r in s.replicas) or u % d:
            return f"stage {q}: shares are not equal (u/d)"
        where = [[of_gpu.get(inst.index_of(g)) for g in r.gpus] for r in s.replicas]
        if any(w is None for ws in where for w in ws):
            return f"stage {q}: a GPU outside the classes"
        cls = {w[0] for ws in where for w in ws if w is not None}
        if len(cls) != 1:
            return f"stage {q}: GPUs of several classes"
        c = cls.pop()
        if any(len({w for w in ws}) != 1 for ws in where):
            return f"stage {q}: a TP group spans nodes"
        cl = pool.classes[c]
        if s.tp > cl.node_size or s.tp & (s.tp - 1) or s.tp > inst.training.max_tp:
            return f"stage {q}: tp {s.tp} does not fit a node of its class"
        cfg = Config(c, s.tp, d, RECOMPUTE.index(s.recompute), cl.node_size // s.tp)
        mine = {ws[0] for ws in where if ws[0] is not None}
        if len(mine) != cfg.nodes or mine & seen_nodes:
            return f"stage {q}: not on ceil(d / floor(S/t)) whole nodes of its own"
        seen_nodes |= mine
        stages.append(StageChoice(cfg, s.layers))
    choice = Choice(u, pool.zero, tuple(stages))
    # Same price as the plan itself (its rings may be ordered otherwise: then not in the space).
    from geoplan.cost.hybrid_evaluate import HybridEvaluator

    ev = HybridEvaluator(inst)
    mine_price = ev.price(pool.decode(choice))[3]
    theirs = ev.price(p)[3]
    if not math.isfinite(theirs):
        return "it is infeasible"
    if mine_price > theirs * (1 + 1e-12) + 1e-12:
        return "its canonical placement prices differently (ring or node order)"
    return choice
