"""Branch-and-bound over GPU sequences with exact splits (registered as ``bnb``).

A node is a GPU sequence prefix ``g_1..g_p``. At each node the prefix itself
is priced as a complete plan with the exact split of :mod:`geoplan.cost.split`
(the leaf), and the plans extending it are bounded by the relaxation of
:meth:`geoplan.cost.split.Splitter.prefix_bound`; children (one more GPU,
linked both ways to ``g_p``) are explored depth first, best bound first.

Two reductions keep optimal plans in the tree while cutting the rest, both
from the one rule of :mod:`geoplan.cost.dominance` (conditions and proof there):

* symmetry: classes of pairwise identical GPUs (equal compute, memory caps,
  power where energy counts, links to and from every third GPU, and the same
  link time both ways between them); only the lowest-index unused member of
  each class is branched on;
* dominance: if GPU ``i`` dominates ``j`` (no worse in each of those, links
  no slower) and ranks before it, some optimal plan that uses ``j`` also uses
  ``i``; so a prefix using ``j`` but not ``i`` is not a leaf and forces ``i``
  into its bound.

The root's children are also floored by a global objective bound
(:func:`root_bound`, from :mod:`geoplan.cost.bounds`).

The depth-first search runs in a compiled kernel in slices of nodes; between
slices Python checks the time limit, records the trace and calls the
callbacks. The lower bound at any moment is the minimum of the incumbent, the
bounds of the unexplored children and of the nodes pruned by the gap target.
See ``docs/exact-enumeration.md``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numba import njit

from geoplan.cost import bounds, parametric
from geoplan.cost.dominance import Dominance, dominance_of
from geoplan.cost.kernel import price_stages_compiled
from geoplan.cost.parametric import DEFAULT_SHARE
from geoplan.cost.split import Splitter, link_floors, prefix_bound, split_sequence
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions, record_bound
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, Status, TraceRow

__all__ = ["SPEC", "BnbParams", "dominance", "solve", "symmetry_classes"]

_INF = np.inf
_DONE, _BUDGET, _IMPROVED = 0, 1, 2


# --------------------------------------------------------------------------- reductions


def _rule(sp: Splitter) -> Dominance:
    """The one dominance rule of :mod:`geoplan.cost.dominance` for this instance."""
    return dominance_of(sp.coefficients, sp.layers, bool(sp.weights.b > 0))


def symmetry_classes(sp: Splitter, rule: Dominance | None = None) -> np.ndarray:
    """Class id per GPU: cliques of pairwise identical GPUs (:meth:`Dominance.classes`).

    Only the lowest-index unused member of a class is branched on; valid by
    move S of :mod:`geoplan.cost.dominance` (identical GPUs swap at no cost).
    """
    return (_rule(sp) if rule is None else rule).classes()


def dominance(sp: Splitter, rule: Dominance | None = None) -> np.ndarray:
    """``succ[i, j]``: some optimal plan using ``j`` also uses ``i`` (:meth:`Dominance.matrix`).

    The pairs are oriented by the rule's total order, which ranks identical
    GPUs by index, so that together with :func:`symmetry_classes` one plan
    satisfies both reductions (proof in :mod:`geoplan.cost.dominance`).
    """
    return (_rule(sp) if rule is None else rule).matrix()


def root_bound(sp: Splitter, cluster: np.ndarray | None = None) -> float:
    """A lower bound on the objective of every plan (``bounds.objective_lower_bound``).

    The floor of every root child's bound (their prefix bounds are valid on
    their own; the larger of two valid bounds is valid). 0 when no plan exists.
    ``cluster``: a partition of the GPUs (:func:`geoplan.cost.bounds.clusters`).
    """
    c = sp.coefficients
    cluster = np.zeros(sp.n, np.int64) if cluster is None else cluster
    relax = bounds.Relaxation.from_coefficients(c, sp.layers, cluster, sp.qmax)
    comm = c.comm_ms[np.isfinite(c.comm_ms)]
    tw = bounds.tmax_worst(float(np.max(c.comp_ms)), float(comm.max()) if comm.size else 0.0,
                           sp.layers, float(c.overhead_ms))
    tlb = relax.tmax_bounds(tw)
    if not tlb:
        return 0.0
    slb = relax.sum_bounds(sorted(tlb))
    val = bounds.objective_lower_bound(c, sp.layers, sp.weights.a, sp.weights.b, tlb, slb,
                                       relax.mid)
    return max(0.0, val) if np.isfinite(val) else 0.0


# --------------------------------------------------------------------------- kernel


@njit(cache=True)
def _expand(p, path, used, domcnt, succ, prev_cls, forced, lf, cand, cbound, nch, ptr, inc,
            factor, pruned, floor, qmax, L, comp, comm, overhead, idle_w, active_w, capmid, mb, a,
            b, fs, js):  # pragma: no cover - compiled
    """Children of the prefix ``path[:p]`` with their bounds, sorted, into level ``p``.

    ``floor`` is a bound valid for every extension of the prefix (its own
    extension bound), hence for every child.
    """
    n = comp.shape[0]
    thresh = inc[0] * factor
    last = path[p - 1] if p > 0 else -1
    # Every child's S (its unused GPUs plus itself) is this prefix's unused set.
    link_floors(used, -1, comm, lf)
    m = 0
    for j in range(n):
        if used[j]:
            continue
        if prev_cls[j] >= 0 and not used[prev_cls[j]]:
            continue  # not the first unused member of its symmetry class
        if last >= 0 and not (comm[last, j] < _INF and comm[j, last] < _INF):
            continue
        for i in range(n):
            forced[i] = (not used[i]) and i != j and (domcnt[i] > 0 or succ[i, j])
        path[p] = j
        used[j] = True
        bnd = prefix_bound(path, p + 1, used, forced, False, lf, qmax, L, comp, comm, overhead,
                           idle_w, active_w, capmid, mb, a, b, fs, js)
        used[j] = False
        if bnd < floor:
            bnd = floor
        if bnd < thresh:
            # Insertion into the sorted list of this level.
            t = m
            while t > 0 and cbound[p, t - 1] > bnd:
                cand[p, t] = cand[p, t - 1]
                cbound[p, t] = cbound[p, t - 1]
                t -= 1
            cand[p, t] = j
            cbound[p, t] = bnd
            m += 1
        elif bnd < inc[0] and bnd < pruned[0]:
            pruned[0] = bnd
    nch[p] = m
    ptr[p] = 0


@njit(cache=True, nogil=True)
def _dfs(lvl, path, used, domcnt, succ, prev_cls, forced, lf, cand, cbound, nch, ptr, inc, inc_seq,
         inc_cnt, inc_q, pruned, stats, budget, factor, qmax, L, comp, comm, overhead, idle_w,
         active_w, capmid, caplast, dyn_w, mem_w, mem_a, mem_last, mem_cap, mb, a, b, mode, lam,
         t_ref, e_ref, fs, js):  # pragma: no cover - compiled
    """Resume the depth-first search for at most ``budget`` nodes.

    Returns _DONE (tree exhausted), _BUDGET, or _IMPROVED (new incumbent).
    ``lvl[0]`` is the current level: the children list ``cand[l]`` belongs to
    the prefix ``path[:l]``.
    """
    n = comp.shape[0]
    done_nodes = 0
    while True:
        lv = lvl[0]
        k = ptr[lv]
        if k >= nch[lv] or cbound[lv, k] >= inc[0] * factor:
            if k < nch[lv] and cbound[lv, k] < inc[0] and cbound[lv, k] < pruned[0]:
                pruned[0] = cbound[lv, k]
            nch[lv] = 0
            ptr[lv] = 0
            if lv == 0:
                return _DONE
            j = path[lv - 1]
            used[j] = False
            for i in range(n):
                if succ[i, j]:
                    domcnt[i] -= 1
            lvl[0] = lv - 1
            continue
        if done_nodes >= budget:
            return _BUDGET
        j = cand[lv, k]
        ptr[lv] = k + 1
        path[lv] = j
        used[j] = True
        for i in range(n):
            if succ[i, j]:
                domcnt[i] += 1
        p = lv + 1
        lvl[0] = p
        nch[p] = 0
        ptr[p] = 0
        done_nodes += 1
        stats[0] += 1
        n_forced = 0
        for i in range(n):
            forced[i] = (not used[i]) and domcnt[i] > 0
            if forced[i]:
                n_forced += 1
        improved = False
        if n_forced == 0:
            stats[1] += 1
            val = split_sequence(path, p, L, comp, comm, overhead, idle_w, active_w, capmid,
                                 caplast, mb, a, b, fs, js)
            if val < inc[0]:
                counts = js[4]
                _s, _t, _e, obj = price_stages_compiled(path, counts, p, comp, comm, overhead,
                                                        idle_w, dyn_w, mem_w, mem_a, mem_last,
                                                        mem_cap, mb, mode, lam, t_ref, e_ref)
                if obj < inc[0]:
                    inc[0] = obj
                    inc_q[0] = p
                    for s in range(p):
                        inc_seq[s] = path[s]
                        inc_cnt[s] = counts[s]
                    improved = True
        if p < qmax:
            link_floors(used, path[p - 1], comm, lf)
            ext = prefix_bound(path, p, used, forced, True, lf, qmax, L, comp, comm, overhead,
                               idle_w, active_w, capmid, mb, a, b, fs, js)
            if ext < inc[0] * factor:
                stats[2] += 1
                _expand(p, path, used, domcnt, succ, prev_cls, forced, lf, cand, cbound, nch, ptr,
                        inc, factor, pruned, ext, qmax, L, comp, comm, overhead, idle_w, active_w,
                        capmid, mb, a, b, fs, js)
            elif ext < inc[0] and ext < pruned[0]:
                pruned[0] = ext
        if improved:
            return _IMPROVED


# --------------------------------------------------------------------------- driver


class _Search:
    """The search state (arrays the kernel resumes from) and its Python-side views."""

    def __init__(self, sp: Splitter, succ: np.ndarray, prev_cls: np.ndarray, gap: float) -> None:
        n, qmax = sp.n, sp.qmax
        self.sp = sp
        self.succ = succ
        self.prev_cls = prev_cls
        self.factor = 1.0 - gap
        self.lvl = np.zeros(1, dtype=np.int64)
        self.path = np.zeros(n + 1, dtype=np.int64)
        self.used = np.zeros(n, dtype=np.bool_)
        self.domcnt = np.zeros(n, dtype=np.int64)
        self.forced = np.zeros(n, dtype=np.bool_)
        self.lf = np.zeros((3, n))
        self.cand = np.zeros((qmax + 1, n), dtype=np.int64)
        self.cbound = np.full((qmax + 1, n), _INF)
        self.nch = np.zeros(qmax + 1, dtype=np.int64)
        self.ptr = np.zeros(qmax + 1, dtype=np.int64)
        self.inc = np.array([_INF])
        self.floor = 0.0  # a bound valid for every plan (set by root, shared with helpers)
        self.inc_seq = np.zeros(n, dtype=np.int64)
        self.inc_cnt = np.zeros(n, dtype=np.int64)
        self.inc_q = np.zeros(1, dtype=np.int64)
        self.pruned = np.array([_INF])
        self.stats = np.zeros(3, dtype=np.int64)  # nodes, leaves priced, nodes expanded
        self.scratch = sp.scratch()

    def offer(self, gpus: list[int], counts: list[int], objective: float) -> bool:
        if objective < self.inc[0]:
            self.inc[0] = objective
            q = len(gpus)
            self.inc_q[0] = q
            self.inc_seq[:q] = gpus
            self.inc_cnt[:q] = counts
            return True
        return False

    def _common(self) -> tuple:
        sp = self.sp
        return (sp.qmax, sp.layers, sp.comp, sp.comm, sp.overhead, sp.idle_w, sp.active_w)

    def root(self, floor: float = 0.0) -> None:
        """Expand the root; ``floor`` is a lower bound valid for every plan (:func:`root_bound`)."""
        sp = self.sp
        w = sp.weights
        self.floor = floor
        _expand(0, self.path, self.used, self.domcnt, self.succ, self.prev_cls, self.forced,
                self.lf, self.cand, self.cbound, self.nch, self.ptr, self.inc, self.factor,
                self.pruned, floor, *self._common(), sp.capmid, sp.mb, w.a, w.b, *self.scratch)

    def run(self, budget: int) -> int:
        sp = self.sp
        w = sp.weights
        return int(_dfs(self.lvl, self.path, self.used, self.domcnt, self.succ, self.prev_cls,
                        self.forced, self.lf, self.cand, self.cbound, self.nch, self.ptr, self.inc,
                        self.inc_seq, self.inc_cnt, self.inc_q, self.pruned, self.stats, budget,
                        self.factor, *self._common(), sp.capmid, sp.caplast, sp.dyn_w,
                        float(sp.coefficients.mem_w), float(sp.coefficients.mem_a),
                        sp.c_mem_last, sp.mem_cap, sp.mb, w.a, w.b, w.mode, w.lam, w.t_ref,
                        w.e_ref,
                        *self.scratch))

    def adopt(self, prefix: np.ndarray, child: int, bound: float, incumbent: float) -> None:
        """Restart from one open node: ``child`` appended to ``prefix`` (a donated subtree)."""
        p = len(prefix)
        self.used[:] = False
        self.domcnt[:] = 0
        self.nch[:] = 0
        self.ptr[:] = 0
        for g in prefix:
            g = int(g)
            self.used[g] = True
            self.domcnt += self.succ[:, g]
        self.path[:p] = prefix
        self.lvl[0] = p
        self.cand[p, 0] = child
        self.cbound[p, 0] = bound
        self.nch[p] = 1
        self.inc[0] = min(float(self.inc[0]), incumbent)

    def lower_bound(self, done: bool) -> float:
        """min(incumbent, gap-pruned bounds, unexplored children's bounds), never below the
        root floor (valid for every plan) unless the incumbent is: valid any time."""
        inc = float(self.inc[0])
        lb = min(inc, float(self.pruned[0]))
        if not done:
            for lv in range(int(self.lvl[0]) + 1):
                k = int(self.ptr[lv])
                if k < int(self.nch[lv]):
                    lb = min(lb, float(self.cbound[lv, k]))
        return max(lb, min(self.floor, inc))

    @property
    def incumbent(self) -> float:
        return float(self.inc[0])

    def incumbent_plan(self, instance: Instance) -> Plan | None:
        if not self.inc[0] < _INF:
            return None
        q = int(self.inc_q[0])
        return Plan.from_indices(instance, self.inc_seq[:q], self.inc_cnt[:q])


@dataclass(frozen=True)
class BnbParams(SolverParams):
    """Parameters of ``bnb`` (``--param KEY=VALUE``)."""

    LABEL: ClassVar[str] = "bnb"

    symmetry: bool = param(True, "branch on one GPU of each class of interchangeable GPUs")
    dominance: bool = param(True, "prune successors dominated by a no-worse GPU")
    baseline_incumbent: bool = param(
        True, "start from the Metis-default order, optimally split")
    node_limit: int | None = param(None, "stop after this many nodes, like a time limit "
                                   "(none: no limit)", at_least=0)
    parametric: bool = param(True, "raise the root bound with the bottleneck-parametric "
                             "bound (geoplan.cost.parametric)")
    parametric_share: float = param(DEFAULT_SHARE,
                                    "share of the remaining budget the parametric "
                                    "bound may take", at_least=0.0)
    parallel_after: float = param(0.1, "seconds of single-threaded search before "
                                  "--threads workers share the tree", at_least=0.0)


def _infeasible_reason(sp: Splitter) -> str:
    L, n = sp.layers, sp.n
    single = int(sp.caplast[1].max())
    linked = int(np.sum(np.isfinite(sp.comm) & np.isfinite(sp.comm.T)))
    return (
        f"no feasible plan exists: no single GPU holds all {L} layers (the largest holds "
        f"{max(single, 0)}), and no pipeline over the {linked} ordered GPU pairs linked in both "
        f"directions (of {n * (n - 1)}) satisfies memory"
    )


class _Pool:
    """Worker searches sharing one incumbent; idle workers take open nodes from busy ones.

    Each worker runs its compiled search in slices, in its own thread (the
    kernel releases the GIL). Between slices, under the lock, it publishes an
    improved incumbent, records a lower bound valid for its open nodes, and
    hands its shallowest open node to an idle worker. Every open node belongs
    to exactly one worker at every moment, so the minimum of the recorded
    bounds (and the incumbent) stays a valid global lower bound.
    """

    def __init__(self, searches: list[_Search], options: SolveOptions,
                 node_limit: int | None) -> None:
        self.searches = searches
        self.options = options
        self.node_limit = node_limit
        self.cond = threading.Condition()
        lead = searches[0]
        self.inc = lead.incumbent
        q = int(lead.inc_q[0])
        self.plan = (lead.inc_seq[:q].copy(), lead.inc_cnt[:q].copy()) if q else None
        self.version = 0
        self.idle = set(range(1, len(searches)))
        self.worker_lb = [lead.lower_bound(False)] + [_INF] * (len(searches) - 1)
        self.stop = False
        self.done = False
        self.error: BaseException | None = None

    def nodes(self) -> int:
        return sum(int(s.stats[0]) for s in self.searches)

    def bound(self) -> float:
        """A valid global lower bound (call with the lock held)."""
        return min([self.inc, *self.worker_lb])

    def _publish(self, k: int) -> None:
        s = self.searches[k]
        if s.incumbent < self.inc:
            self.inc = s.incumbent
            q = int(s.inc_q[0])
            self.plan = (s.inc_seq[:q].copy(), s.inc_cnt[:q].copy())
            self.version += 1

    def _donate(self, k: int) -> None:
        """Give idle workers the shallowest open nodes of worker k while it keeps one."""
        s = self.searches[k]
        while self.idle:
            open_levels = [lv for lv in range(int(s.lvl[0]) + 1) if s.ptr[lv] < s.nch[lv]]
            n_open = sum(int(s.nch[lv] - s.ptr[lv]) for lv in open_levels)
            if n_open < 2:
                return
            lv = open_levels[0]
            t = int(s.nch[lv]) - 1
            s.nch[lv] = t
            thief = self.idle.pop()
            self.searches[thief].adopt(s.path[:lv], int(s.cand[lv, t]), float(s.cbound[lv, t]),
                                       self.inc)
            self.worker_lb[thief] = self.searches[thief].lower_bound(False)
            self.cond.notify_all()

    def work(self, k: int) -> None:
        """Thread body: a failing worker stops the others and is re-raised by the caller."""
        try:
            self._work(k)
        except BaseException as exc:
            with self.cond:
                self.error = exc
                self.stop = True
                self.cond.notify_all()

    def _work(self, k: int) -> None:
        s = self.searches[k]
        opts = self.options
        budget = _first_budget(s.sp.n)
        while True:
            with self.cond:
                while k in self.idle and not (self.stop or self.done):
                    self.cond.wait(0.05)
                    if time.perf_counter() >= opts.deadline:
                        self.stop = True
                if self.stop or self.done:
                    return
                if self.inc < s.inc[0]:
                    s.inc[0] = self.inc  # prune with the best value any worker found
                if time.perf_counter() >= opts.deadline or (
                    self.node_limit is not None and self.nodes() >= self.node_limit
                ):
                    self.stop = True
                    self.cond.notify_all()
                    return
            t_slice = time.perf_counter()
            code = s.run(budget)
            dt = time.perf_counter() - t_slice
            if code == _BUDGET:
                budget = int(min(max(budget * (0.02 / max(dt, 1e-6)), 1), 1 << 22))
            with self.cond:
                self._publish(k)
                if code == _DONE:
                    self.worker_lb[k] = min(_INF, float(s.pruned[0]))
                    self.idle.add(k)
                    if len(self.idle) == len(self.searches):
                        self.done = True
                    self.cond.notify_all()
                else:
                    self.worker_lb[k] = s.lower_bound(False)
                    self._donate(k)


def _sequential(search: _Search, options: SolveOptions, node_limit: int | None,
                trace: list[TraceRow], t0: float, hand_over: float) -> tuple[int, bool]:
    """Run one search in this thread; returns (last kernel code, stopped by a limit).

    After ``hand_over`` seconds of search, stop so that threads can take over.
    """
    cb = options.callbacks
    budget = _first_budget(search.sp.n)
    code = _BUDGET
    started = last_progress = time.perf_counter()
    last_bound = -_INF
    while True:
        if time.perf_counter() >= options.deadline or (
            node_limit is not None and int(search.stats[0]) >= node_limit
        ):
            return code, True
        if time.perf_counter() - started >= hand_over:
            return code, False
        t_slice = time.perf_counter()
        code = search.run(budget)
        dt = time.perf_counter() - t_slice
        # Aim at slices of ~20 ms so the deadline is honoured closely.
        if code == _BUDGET:
            budget = int(min(max(budget * (0.02 / max(dt, 1e-6)), 1), 1 << 22))
        if code == _DONE:
            return code, False
        now = time.perf_counter()
        if code == _IMPROVED:
            lb = search.lower_bound(False)
            trace.append(TraceRow(now - t0, search.incumbent, lb))
            cb.on_improvement(now - t0, search.incumbent, lb)
        if now - last_progress >= 0.5:
            last_progress = now
            lb = search.lower_bound(False)
            cb.on_progress({"nodes": int(search.stats[0]), "incumbent": search.incumbent,
                            "bound": lb})
            if last_bound * (1 + 1e-9) < lb < _INF:
                inc = search.incumbent
                trace.append(TraceRow(now - t0, inc if inc < _INF else None, lb))
                last_bound = lb


def _parallel(pool: _Pool, options: SolveOptions, trace: list[TraceRow],
              t0: float) -> tuple[int, bool]:
    """Run the pool's workers in threads; this thread reports improvements and progress."""
    cb = options.callbacks
    threads = [threading.Thread(target=pool.work, args=(k,), daemon=True)
               for k in range(len(pool.searches))]
    for th in threads:
        th.start()
    seen = pool.version
    last_progress = time.perf_counter()
    while any(th.is_alive() for th in threads):
        with pool.cond:
            pool.cond.wait(0.05)
            version, inc, lb, nodes = pool.version, pool.inc, pool.bound(), pool.nodes()
        now = time.perf_counter()
        if version != seen:
            seen = version
            trace.append(TraceRow(now - t0, inc, lb))
            cb.on_improvement(now - t0, inc, lb)
        if now - last_progress >= 0.5:
            last_progress = now
            cb.on_progress({"nodes": nodes, "incumbent": inc, "bound": lb,
                            "threads": len(threads)})
    for th in threads:
        th.join()
    if pool.error is not None:
        raise pool.error
    return (_DONE if pool.done else _BUDGET), pool.stop and not pool.done


def _first_budget(n: int) -> int:
    """Nodes in a first slice: 256 up to 16 GPUs, fewer beyond (a node costs O(N) splits;
    about 4 ms at N=256), so the first slices end near 20 ms and the deadline holds."""
    return max(1, 4096 // max(n, 16))


_ROOT_S_PER_GPU2 = 2e-5  # seconds per N^2 of root_bound (measured at N=256)


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Branch-and-bound.

    ``params``: ``symmetry`` and ``dominance`` (reductions, default on),
    ``baseline_incumbent`` (start from the Metis-default order, optimally
    split; default on), ``node_limit`` (stop after this many nodes, like a
    time limit), ``parallel_after`` (seconds of single-threaded search before
    ``options.threads`` workers share the tree; default 0.1, so that small
    trees stay deterministic and pay no thread start-up).
    """
    t0 = options.start
    params = BnbParams.parse(options.params)
    sp = Splitter(instance)
    use_sym = params.symmetry
    use_dom = params.dominance
    node_limit = params.node_limit

    rule = _rule(sp) if use_sym or use_dom else None
    cls = symmetry_classes(sp, rule) if use_sym else np.arange(sp.n, dtype=np.int64)
    prev_cls = np.full(sp.n, -1, dtype=np.int64)
    last_of: dict[int, int] = {}
    for i in range(sp.n):
        c = int(cls[i])
        if c in last_of:
            prev_cls[i] = last_of[c]
        last_of[c] = i
    succ = dominance(sp, rule) if use_dom else np.zeros((sp.n, sp.n), dtype=np.bool_)
    search = _Search(sp, succ, prev_cls, options.gap)
    info: dict[str, Any] = {
        "symmetry_classes": len(last_of),
        "dominance_pairs": int(succ.sum()),
        "threads_used": 1,
    }
    trace: list[TraceRow] = []
    cb = options.callbacks

    def now() -> float:
        return time.perf_counter() - t0

    def offer_starts(plans: Sequence[Plan]) -> None:
        # Warm starts become incumbents as given, and re-split.
        accepted = resplit = False
        for plan in plans:
            try:
                idx = plan.gpu_indices(instance)
            except Exception:  # an unknown id: not a usable warm start
                continue
            if plan.micro_batch_size not in (None, instance.training.micro_batch_size):
                continue
            unique = len(set(idx)) == len(idx)  # a GPU used twice is no plan
            obj = sp.price(idx, list(plan.layer_counts))[0] if unique else _INF
            if obj < _INF:  # accepted: feasible as given, and the first incumbent
                accepted = True
                search.offer(idx, list(plan.layer_counts), obj)
            if unique and len(idx) <= sp.qmax:
                r = sp.split(idx)
                if r is not None:  # its GPU order, split optimally (not "accepted" alone)
                    resplit = True
                    search.offer(list(r.gpus), list(r.counts), r.objective)
        info["warm_start_accepted"] = accepted
        info["warm_start_resplit"] = resplit

    # Initial incumbents: warm starts and the baseline order.
    if options.warm_start:
        offer_starts(options.warm_start)
    if params.baseline_incumbent:
        from geoplan.cost.baseline import metis_default_plan

        base = metis_default_plan(instance)
        if base is not None:
            r = sp.split(base.gpu_indices(instance))
            if r is not None:
                search.offer(list(r.gpus), list(r.counts), r.objective)
    if search.incumbent < _INF:
        trace.append(TraceRow(now(), search.incumbent, None))
        cb.on_improvement(now(), search.incumbent, None)

    # root_bound cannot be interrupted (about 2e-5 N^2 s: 1.3 s at N=256); without that
    # time left (and unless it is cheap: a bound is worth 0.2 s even after an interrupt),
    # the incumbent is returned with no bound, as at a time-out.
    root_s = _ROOT_S_PER_GPU2 * sp.n ** 2
    if root_s > max(options.remaining(), 0.2) and search.incumbent < _INF:
        inc = search.incumbent
        info.update(nodes=0, leaves_priced=0, nodes_expanded=0, completed=False)
        return Outcome(search.incumbent_plan(instance), "feasible", model_objective=inc,
                       trace=trace, info=info,
                       message="stopped at the time limit before the root bound")
    floor = root_bound(sp, bounds.clusters(instance))
    info["root_bound"] = floor
    if params.parametric:
        known = search.incumbent if search.incumbent < _INF else None
        pb = parametric.instance_bound(
            instance, known, params.parametric_share, options.remaining(), options.stopped,
            lambda b: record_bound(options, trace, known, max(b, floor)),
            workers=options.threads)
        info["parametric"] = pb.summary()
        floor = max(floor, pb.floor)
        if pb.plan is not None:  # a plan the bound's own search found (node runs)
            found = Plan.from_pairs(pb.plan)
            idx, counts = found.gpu_indices(instance), list(found.layer_counts)
            obj = sp.price(idx, counts)[0]
            if obj < search.incumbent:
                search.offer(idx, counts, obj)
                trace.append(TraceRow(now(), search.incumbent, None))
                cb.on_improvement(now(), search.incumbent, None)
    if options.deferred_start is not None and not (
            search.incumbent < _INF and parametric.proves(floor, search.incumbent)):
        # The deferred warm start, once the root's plans and bound prove nothing.
        before = search.incumbent
        offer_starts(options.deferred_plans())
        if search.incumbent < before:
            trace.append(TraceRow(now(), search.incumbent, None))
            cb.on_improvement(now(), search.incumbent, None)
    if params.parametric and search.incumbent < _INF and parametric.proves(floor, search.incumbent):
        # The bound reaches the incumbent: it is optimal, no tree needed.
        inc = search.incumbent
        info.update(nodes=0, leaves_priced=0, nodes_expanded=0, completed=True)
        trace.append(TraceRow(now(), inc, min(floor, inc)))
        cb.on_improvement(now(), inc, min(floor, inc))
        return Outcome(search.incumbent_plan(instance), "optimal",
                       lower_bound=min(floor, inc), model_objective=inc, trace=trace,
                       info=info, message="the parametric bound reaches the incumbent")
    if options.remaining() <= 0 and search.incumbent < _INF:
        # No time left to expand the root (a large pool, or an interrupt): the incumbent,
        # with the root bound (valid for every plan), as at a time-out.
        inc = search.incumbent
        lb0 = min(floor, inc)
        info.update(nodes=0, leaves_priced=0, nodes_expanded=0, completed=False)
        trace.append(TraceRow(now(), inc, lb0))
        cb.on_improvement(now(), inc, lb0)
        return Outcome(search.incumbent_plan(instance), "feasible", lower_bound=lb0,
                       model_objective=inc, trace=trace, info=info,
                       message="stopped at the time limit before the root was expanded")
    search.root(floor)
    hand_over = params.parallel_after if options.threads > 1 else _INF
    status_code, timed_out = _sequential(search, options, node_limit, trace, t0, hand_over)
    n_threads = 1
    if status_code != _DONE and not timed_out and options.threads > 1:
        # A tree that survives its first slices is worth a few threads.
        searches = [search] + [_Search(sp, succ, prev_cls, options.gap)
                               for _ in range(options.threads - 1)]
        for w in searches:
            w.floor = search.floor
        pool = _Pool(searches, options, node_limit)
        status_code, timed_out = _parallel(pool, options, trace, t0)
        n_threads = len(searches)
        lb = min(pool.inc, *(w.lower_bound(status_code == _DONE) for w in searches))
        nodes = pool.nodes()
        leaves = sum(int(w.stats[1]) for w in searches)
        expanded = sum(int(w.stats[2]) for w in searches)
        inc_value = pool.inc
        best = None if pool.plan is None else Plan.from_indices(instance, *pool.plan)
    done = status_code == _DONE and not timed_out
    if n_threads == 1:
        lb = search.lower_bound(done)
        nodes, leaves, expanded = (int(x) for x in search.stats)
        inc_value = search.incumbent
        best = search.incumbent_plan(instance)
    info.update(nodes=nodes, leaves_priced=leaves, nodes_expanded=expanded, completed=done,
                threads_used=n_threads)
    lower = None if not lb < _INF else lb
    if best is None:
        if done:
            return Outcome(None, "infeasible", trace=trace, info=info,
                           message=_infeasible_reason(sp))
        return Outcome(None, "no_solution", lower_bound=lower, trace=trace, info=info,
                       message=f"{'node' if node_limit is not None else 'time'} limit reached "
                       f"after {nodes} nodes without a feasible plan")
    inc = inc_value
    proven = done and lb >= inc * (1 - 1e-12)
    status: Status = "optimal" if proven else "feasible"
    trace.append(TraceRow(now(), inc, lb))
    cb.on_improvement(now(), inc, lb)
    msg = None
    if not done:
        msg = (f"stopped at the {'node' if node_limit is not None else 'time'} limit, "
               "gap not closed")
    elif not proven:
        msg = f"relative gap target {options.gap:g} reached"
    return Outcome(best, status, lower_bound=min(lb, inc), model_objective=inc, trace=trace,
                   info=info, message=msg)


SPEC = SolverSpec("bnb", solve, "exact",
                  "branch-and-bound over stage sequences with exact splits", warm_start=True,
                  defers_warm_start=True,
                  params=BnbParams)
