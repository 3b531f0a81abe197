"""Batch evaluator of hybrid plans (hybrid-model.md): a whole population per call.

A population is padded arrays, one row per plan (:class:`HybridPopulation`),
in the flat form of :mod:`geoplan.cost.hybrid_kernel`. A compiled loop (numba
``prange`` over chunks of rows) checks each row's GPUs (in range, no GPU twice:
:func:`~geoplan.cost.hybrid_kernel.price_hybrid` assumes distinct GPUs) and the
consistency of its offsets, then prices it with
:data:`~geoplan.cost.hybrid_kernel.price_hybrid_compiled` (called, not inlined:
see :data:`~geoplan.cost.hybrid_kernel.price_hybrid_called`), the same formulas the scalar
:class:`~geoplan.cost.hybrid_evaluate.HybridEvaluator` runs in plain Python, so
both give the same bits (a test pins them together). Rows the
kernel cannot price (a repeated or unknown GPU, inconsistent offsets) get
status INVALID, nan times and an infinite objective.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import numba
import numpy as np
from numba import njit, prange

from geoplan.cost.hybrid_coefficients import HybridCoefficients, encode
from geoplan.cost.hybrid_kernel import price_hybrid_called
from geoplan.cost.kernel import FEASIBLE, INVALID, MEMORY, NO_LINK
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.hybrid import RECOMPUTE, HybridPlan, HybridStage, Replica
from geoplan.model.instance import Instance

__all__ = [
    "FEASIBLE",
    "INVALID",
    "MEMORY",
    "NO_LINK",
    "HybridBatchEvaluator",
    "HybridBatchResult",
    "HybridPopulation",
    "encode_population",
    "warm_up",
]

_I64 = np.int64
_BLOCK = 32  # rows per parallel work item


_price_hybrid = price_hybrid_called


def _owned(x: Any) -> np.ndarray:
    """C-contiguous writable int64 (a read-only array would compile, and cache, the kernels
    a second time for its own numba type)."""
    return np.require(x, dtype=_I64, requirements=("C", "W"))


@dataclass(frozen=True, eq=False)
class HybridPopulation:
    """P hybrid plans as padded int64 arrays (row p is plan p; padding is never read).

    Per stage ``layers``, ``tp``, ``rec`` [P, Qmax] (rec: 0 none, 1 full, -1 unknown)
    and ``rep0`` [P, Qmax+1] (stage q's replicas are ``rep0[q]..rep0[q+1]-1``); per
    replica ``samples`` [P, Rmax] and ``g0`` [P, Rmax+1] (replica r's GPUs are
    ``gpus[g0[r]..g0[r+1]-1]``, ring order, the lead first); ``gpus`` [P, Gmax]
    GPU indices; per plan ``q``, ``u`` (micro-batch size) and ``zero`` [P].
    """

    layers: np.ndarray
    tp: np.ndarray
    rec: np.ndarray
    rep0: np.ndarray
    samples: np.ndarray
    g0: np.ndarray
    gpus: np.ndarray
    q: np.ndarray
    u: np.ndarray
    zero: np.ndarray

    def __len__(self) -> int:
        return int(self.q.shape[0])

    @classmethod
    def from_arrays(cls, layers: Any, tp: Any, rec: Any, rep0: Any, samples: Any, g0: Any,
                    gpus: Any, q: Any, u: Any, zero: Any) -> HybridPopulation:
        """Wrap arrays a heuristic built directly (cast to C-contiguous int64, shapes checked;
        ``u`` and ``zero`` may be scalars). Values are checked by the evaluator, per row."""
        a = {k: _owned(v) for k, v in
             (("layers", layers), ("tp", tp), ("rec", rec), ("rep0", rep0),
              ("samples", samples), ("g0", g0), ("gpus", gpus))}
        qv = _owned(q).reshape(-1)
        P = qv.shape[0]
        for k, v in a.items():
            if v.ndim != 2 or v.shape[0] != P:
                raise ValueError(f"{k}: expected shape ({P}, ...), got {v.shape}")
        qmax, rmax = a["layers"].shape[1], a["samples"].shape[1]
        for k, width in (("tp", qmax), ("rec", qmax), ("rep0", qmax + 1), ("g0", rmax + 1)):
            if a[k].shape[1] != width:
                raise ValueError(f"{k}: expected {width} columns, got {a[k].shape[1]}")
        uv = _owned(np.broadcast_to(np.asarray(u, dtype=_I64), (P,)))
        zv = _owned(np.broadcast_to(np.asarray(zero, dtype=_I64), (P,)))
        return cls(q=qv, u=uv, zero=zv, **a)

    def to_plan(self, instance: Instance, p: int) -> HybridPlan:
        """Row ``p`` as a :class:`HybridPlan` (explicit u, zero and samples)."""
        ids = instance.gpu_ids
        stages = []
        for s in range(int(self.q[p])):
            reps = tuple(
                Replica(tuple(ids[int(g)] for g in
                              self.gpus[p, self.g0[p, r]:self.g0[p, r + 1]]),
                        int(self.samples[p, r]))
                for r in range(int(self.rep0[p, s]), int(self.rep0[p, s + 1])))
            code = int(self.rec[p, s])
            stages.append(HybridStage(int(self.layers[p, s]), int(self.tp[p, s]), reps,
                                      RECOMPUTE[code] if 0 <= code < len(RECOMPUTE) else "?"))
        return HybridPlan(tuple(stages), int(self.u[p]), int(self.zero[p]))


def encode_population(instance: Instance, plans: Sequence[HybridPlan]) -> HybridPopulation:
    """The plans as one padded population (defaults resolved as the scalar evaluator does;
    unknown GPU ids raise :class:`~geoplan.errors.InputError`)."""
    enc = [encode(instance, p) for p in plans]
    P = len(enc)
    qmax = max((a.q for a in enc), default=1)
    rmax = max((len(a.samples) for a in enc), default=1)
    gmax = max((len(a.gpus) for a in enc), default=1)
    layers = np.zeros((P, qmax), _I64)
    tp = np.zeros((P, qmax), _I64)
    rec = np.zeros((P, qmax), _I64)
    rep0 = np.zeros((P, qmax + 1), _I64)
    samples = np.zeros((P, rmax), _I64)
    g0 = np.zeros((P, rmax + 1), _I64)
    gpus = np.full((P, gmax), -1, _I64)
    for p, a in enumerate(enc):
        layers[p, :a.q] = a.layers
        tp[p, :a.q] = a.tp
        rec[p, :a.q] = a.rec
        rep0[p, :a.q + 1] = a.rep0
        samples[p, :len(a.samples)] = a.samples
        g0[p, :len(a.g0)] = a.g0
        gpus[p, :len(a.gpus)] = a.gpus
    return HybridPopulation(
        layers, tp, rec, rep0, samples, g0, gpus,
        q=np.array([a.q for a in enc], _I64), u=np.array([a.u for a in enc], _I64),
        zero=np.array([a.zero for a in enc], _I64),
    )


class HybridBatchResult(NamedTuple):
    """Arrays of length P: status codes, T_iter (ms), E_iter (J), objective (inf unless
    FEASIBLE). Unpacks as ``status, t, e, objective``."""

    status: np.ndarray
    t_iter_ms: np.ndarray
    e_iter_j: np.ndarray
    objective: np.ndarray

    @property
    def feasible(self) -> np.ndarray:
        return self.status == FEASIBLE


@njit(cache=True, nogil=True, _nrt=False)
def _rows(start, stop, layers, tp, rec, rep0, samples, g0, gpus, q, u, zero, stamp,
          tflops, lat_ms, bw_gbps, site, idle_w, dyn_w, mem_cap, n_layers, batch, max_tp,
          flop_ls, gamma, act_bytes, w_bytes, lm_bytes, alpha, logit_bytes, overhead_ms,
          mode, lam, t_ref, e_ref, status, t_out, e_out, obj_out):  # pragma: no cover - compiled
    """Price rows start..stop-1; ``stamp`` (one per thread, length N) marks the GPUs seen
    in the current row with p + 1, so the distinct check needs no clearing.

    GIL-free (pool threads run it side by side) and, like the pricer it calls, without
    reference counting: it allocates nothing, and row views need no counts.
    """
    n_gpus = stamp.shape[0]
    qmax = layers.shape[1]
    rmax = samples.shape[1]
    gmax = gpus.shape[1]
    for p in range(start, stop):
        qc = q[p]
        ok = 1 <= qc <= qmax and rep0[p, 0] == 0 and g0[p, 0] == 0
        if ok:
            # Offsets the kernel follows must stay inside the row (it reads no bounds).
            for s in range(qc):
                if rep0[p, s + 1] < rep0[p, s]:
                    ok = False
                    break
            if ok:
                n_rep = rep0[p, qc]
                if n_rep > rmax:
                    ok = False
                else:
                    for r in range(n_rep):
                        if g0[p, r + 1] < g0[p, r]:
                            ok = False
                            break
                    if ok and g0[p, n_rep] > gmax:
                        ok = False
        if ok:
            mark = p + 1
            for m in range(g0[p, rep0[p, qc]]):
                g = gpus[p, m]
                if g < 0 or g >= n_gpus or stamp[g] == mark:
                    ok = False
                    break
                stamp[g] = mark
        if not ok:
            status[p] = INVALID
            t_out[p] = np.nan
            e_out[p] = np.nan
            obj_out[p] = np.inf
            continue
        st, t, e, obj = _price_hybrid(
            qc, layers[p], tp[p], rec[p], rep0[p], samples[p], g0[p], gpus[p], u[p], zero[p],
            tflops, lat_ms, bw_gbps, site, idle_w, dyn_w, mem_cap, n_layers, batch, max_tp,
            flop_ls, gamma, act_bytes, w_bytes, lm_bytes, alpha, logit_bytes, overhead_ms,
            mode, lam, t_ref, e_ref)
        status[p] = st
        t_out[p] = t
        e_out[p] = e
        obj_out[p] = obj


@njit(cache=True, parallel=True)
def _rows_parallel(chunks, layers, tp, rec, rep0, samples, g0, gpus, q, u, zero, n_gpus,
                   tflops, lat_ms, bw_gbps, site, idle_w, dyn_w, mem_cap, n_layers, batch,
                   max_tp, flop_ls, gamma, act_bytes, w_bytes, lm_bytes, alpha, logit_bytes,
                   overhead_ms, mode, lam, t_ref, e_ref, status, t_out, e_out,
                   obj_out):  # pragma: no cover - compiled
    P = q.shape[0]
    size = (P + chunks - 1) // chunks
    for k in prange(chunks):
        start = k * size
        stop = min(P, start + size)
        if start < stop:
            # A stamp array per chunk: the per-thread scratch of the distinct-GPU check.
            stamp = np.zeros(n_gpus + 16, np.int64)[8:-8]  # padded: no line shared
            _rows(start, stop, layers, tp, rec, rep0, samples, g0, gpus, q, u, zero, stamp,
                  tflops, lat_ms, bw_gbps, site, idle_w, dyn_w, mem_cap, n_layers, batch,
                  max_tp, flop_ls, gamma, act_bytes, w_bytes, lm_bytes, alpha, logit_bytes,
                  overhead_ms, mode, lam, t_ref, e_ref, status, t_out, e_out, obj_out)


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    """One process-wide pool per worker count (evaluators come and go; threads stay)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = _POOLS[workers] = ThreadPoolExecutor(workers, "hybrid-batch")
        return pool


class HybridBatchEvaluator:
    """Prices hybrid populations of one instance (normalisers resolved once, here).

    ``threads``: threads for populations of at least ``parallel_threshold`` plans
    (smaller ones run on the calling thread alone). ``parallel`` chooses how:

    - ``"threads"`` (default): the calling thread and ``threads - 1`` pool threads
      each take blocks of rows from a shared counter and price them with the
      GIL-free compiled loop. Waiting threads sleep, so on a shared machine a
      descheduled thread costs only its own block.
    - ``"prange"``: numba's ``prange`` over blocks of rows (dynamic scheduling),
      ``numba.set_num_threads(threads)`` for the call and restored after. With
      numba's OpenMP layer a waiting thread spins; on the 2 shared cores, loaded
      by other processes, it measured 3.4x slower than one thread
      (bench/hybrid_batch.py).

    Both give the same bits as the serial loop; ``threads`` is capped at numba's
    pool size (``NUMBA_NUM_THREADS``, the number of cores by default).
    """

    def __init__(self, instance: Instance, threads: int = 1, parallel_threshold: int = 256,
                 parallel: str = "threads") -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if parallel not in ("threads", "prange"):
            raise ValueError(f"parallel must be 'threads' or 'prange', got {parallel!r}")
        self.instance = resolve_normalisers(instance)
        self.coefficients = c = HybridCoefficients.of(self.instance)
        mode, lam, t_ref, e_ref = ObjectiveWeights.from_instance(self.instance).args
        # Writable contiguous copies with fixed scalar types: one compiled signature for
        # every instance (int vs float fields would compile, and cache, twice). The casts
        # change no value, so the prices keep the scalar evaluator's bits.
        self._args = (
            np.array(c.tflops, np.float64), np.array(c.lat_ms, np.float64),
            np.array(c.bw_gbps, np.float64), np.array(c.site, _I64),
            np.array(c.idle_w, np.float64), np.array(c.dyn_w, np.float64),
            np.array(c.mem_cap, np.float64), int(c.n_layers), int(c.batch), int(c.max_tp),
            float(c.flop_ls), float(c.gamma), float(c.act_bytes), float(c.w_bytes),
            float(c.lm_bytes), float(c.alpha), float(c.logit_bytes), float(c.overhead_ms),
            int(mode), float(lam), float(t_ref), float(e_ref),
        )
        self.threads = min(int(threads), int(numba.config.NUMBA_NUM_THREADS))
        self.parallel_threshold = parallel_threshold
        self.parallel = parallel
        self.evaluations = 0

    def encode(self, plans: Sequence[HybridPlan]) -> HybridPopulation:
        return encode_population(self.instance, plans)

    def evaluate(self, pop: HybridPopulation) -> HybridBatchResult:
        """Price every row of ``pop``: (status, t_iter_ms, e_iter_j, objective)."""
        P = len(pop)
        status = np.empty(P, np.int8)
        t_out = np.empty(P)
        e_out = np.empty(P)
        obj = np.empty(P)
        plan = (pop.layers, pop.tp, pop.rec, pop.rep0, pop.samples, pop.g0, pop.gpus, pop.q,
                pop.u, pop.zero)
        out = (status, t_out, e_out, obj)
        n = self.instance.n
        if self.threads > 1 and P >= self.parallel_threshold:
            if self.parallel == "threads":
                self._threaded(P, plan, out)
            else:
                before = numba.get_num_threads()
                numba.set_num_threads(self.threads)
                # Blocks handed out one by one to whichever thread is free (rows differ).
                chunk = numba.set_parallel_chunksize(1)
                try:
                    _rows_parallel(-(-P // _BLOCK), *plan, n, *self._args, *out)
                finally:
                    numba.set_parallel_chunksize(chunk)
                    numba.set_num_threads(before)
        elif P:
            _rows(0, P, *plan, np.zeros(n, _I64), *self._args, *out)
        self.evaluations += P
        return HybridBatchResult(status, t_out, e_out, obj)

    def _threaded(self, P: int, plan: tuple[np.ndarray, ...],
                  out: tuple[np.ndarray, ...]) -> None:
        # A few blocks per thread balance rows of unequal size; larger blocks keep the
        # per-call argument unboxing (~40 arguments, microseconds) small.
        block = max(_BLOCK, -(-P // (4 * self.threads)))
        cursor = itertools.count(0, block)  # next() is atomic under the GIL
        n, args = self.instance.n, self._args

        def work() -> None:
            # This thread's scratch for the distinct-GPU check, padded by a cache line on
            # each side so that two threads' stamps never share one.
            stamp = np.zeros(n + 16, _I64)[8:-8]
            for start in cursor:
                if start >= P:
                    return
                _rows(start, min(P, start + block), *plan, stamp, *args, *out)

        futures = [_pool(self.threads - 1).submit(work) for _ in range(self.threads - 1)]
        try:
            work()
        finally:
            for f in futures:
                # Not started yet: nothing is left for it (and waiting could deadlock
                # when evaluate runs inside a pool thread).
                if not f.cancel():
                    f.result()

    def evaluate_plans(self, plans: Sequence[HybridPlan]) -> HybridBatchResult:
        return self.evaluate(self.encode(plans))


def warm_up() -> float:
    """Compile (or load from numba's cache) both kernels with real argument types, on
    :func:`geoplan.solving.warmup.tiny_instance`; seconds spent."""
    from geoplan.solving.warmup import tiny_instance

    t0 = time.perf_counter()
    inst = tiny_instance()
    plan = HybridPlan((HybridStage(2, 1, (Replica(("g0",)),)),
                       HybridStage(2, 1, (Replica(("g2",)),))))
    ev = HybridBatchEvaluator(inst, parallel_threshold=1)
    pop = ev.encode([plan])
    ev.evaluate(pop)  # the loop every path runs
    if numba.config.NUMBA_NUM_THREADS > 1:
        HybridBatchEvaluator(inst, threads=2, parallel_threshold=1,
                             parallel="prange").evaluate(pop)
    return time.perf_counter() - t0
