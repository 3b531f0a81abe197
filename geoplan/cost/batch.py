"""Batch evaluator: prices a whole population of chromosomes at once.

A compiled (numba) kernel decodes each chromosome ``[x_1..x_L]`` by one linear
scan and prices it with :func:`geoplan.cost.kernel.price_stages`, the function
the scalar evaluator calls, so the two agree to the bit; a test pins them
together on thousands of random plans. Infeasible rows get an infinite
objective and a status code saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from geoplan.cost.kernel import FEASIBLE, INVALID, MEMORY, NO_LINK, price_stages_compiled
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.weights import ObjectiveWeights
from geoplan.errors import InputError
from geoplan.model.instance import Instance

__all__ = [
    "FEASIBLE",
    "INVALID",
    "MEMORY",
    "NO_LINK",
    "BatchEvaluator",
    "BatchResult",
]



@njit(cache=True, inline="always")
def _price(gpus, counts, q, comp, comm, overhead, idle_w, dyn_w, mem_w, mem_a, mem_last, mem_cap,
           mb, mode, lam, t_ref, e_ref, out, row):  # pragma: no cover - compiled
    status, t_iter, e_iter, obj = price_stages_compiled(gpus, counts, q, comp, comm, overhead,
                                                        idle_w, dyn_w, mem_w, mem_a, mem_last,
                                                        mem_cap, mb, mode, lam, t_ref, e_ref)
    out[0, row] = t_iter
    out[1, row] = e_iter
    out[2, row] = obj
    return status


@njit(cache=True)
def _chromosome_rows(X, start, stop, n_gpus, comp, comm, overhead, idle_w, dyn_w, mem_w, mem_a,
                     mem_last, mem_cap, mb, mode, lam, t_ref, e_ref, out,
                     status):  # pragma: no cover - compiled
    L = X.shape[1]
    gpus = np.empty(L, np.int64)
    counts = np.empty(L, np.int64)
    stamp = np.zeros(n_gpus, np.int64)
    for p in range(start, stop):
        q = 0
        bad = False
        for j in range(L):
            g = X[p, j]
            if g < 0 or g >= n_gpus:
                bad = True
                break
            if q > 0 and gpus[q - 1] == g:
                counts[q - 1] += 1
            else:
                if stamp[g] == p + 1:
                    bad = True
                    break
                stamp[g] = p + 1
                gpus[q] = g
                counts[q] = 1
                q += 1
        if bad:
            out[0, p] = np.nan
            out[1, p] = np.nan
            out[2, p] = np.inf
            status[p] = INVALID
        else:
            status[p] = _price(gpus, counts, q, comp, comm, overhead, idle_w, dyn_w, mem_w, mem_a,
                               mem_last, mem_cap, mb, mode, lam, t_ref, e_ref, out, p)


@njit(cache=True, parallel=True)
def _chromosomes_parallel(X, chunks, n_gpus, comp, comm, overhead, idle_w, dyn_w, mem_w, mem_a,
                          mem_last, mem_cap, mb, mode, lam, t_ref, e_ref, out,
                          status):  # pragma: no cover - compiled
    P = X.shape[0]
    size = (P + chunks - 1) // chunks
    for k in prange(chunks):
        start = k * size
        stop = min(P, start + size)
        if start < stop:
            _chromosome_rows(X, start, stop, n_gpus, comp, comm, overhead, idle_w, dyn_w, mem_w,
                             mem_a, mem_last, mem_cap, mb, mode, lam, t_ref, e_ref, out, status)


@njit(cache=True)
def _stage_rows(G, C, Q, comp, comm, overhead, idle_w, dyn_w, mem_w, mem_a, mem_last, mem_cap, mb,
                mode, lam, t_ref, e_ref, out, status):  # pragma: no cover - compiled
    for p in range(G.shape[0]):
        status[p] = _price(G[p], C[p], Q[p], comp, comm, overhead, idle_w, dyn_w, mem_w, mem_a,
                           mem_last, mem_cap, mb, mode, lam, t_ref, e_ref, out, p)


@dataclass(frozen=True)
class BatchResult:
    """Arrays of length P: objective (inf if infeasible), T_iter (ms), E_iter (J), status."""

    objective: np.ndarray
    t_iter_ms: np.ndarray
    e_iter_j: np.ndarray
    status: np.ndarray

    @property
    def feasible(self) -> np.ndarray:
        return self.status == FEASIBLE


class BatchEvaluator:
    """Prices populations for one instance (normalisers resolved once, at construction).

    ``parallel_threshold``: populations at least this large are split across
    numba threads; smaller ones run on one thread, where thread start-up would
    cost more than it saves.
    """

    def __init__(
        self,
        instance: Instance,
        micro_batch_size: int | None = None,
        parallel_threshold: int = 65536,
    ) -> None:
        self.instance = resolve_normalisers(instance)
        c = self.instance.coefficients(micro_batch_size)
        if self.instance.training.batch_size % c.u:
            # The kernel has no status for this (the validator's micro_batch violation):
            # refuse, rather than price every row feasible with a fractional M.
            raise InputError(
                "micro_batch_size",
                c.u,
                f"batch_size={self.instance.training.batch_size} is not divisible by it",
            )
        self.coefficients = c
        self.weights = ObjectiveWeights.from_instance(self.instance)
        mode, lam, t_ref, e_ref = self.weights.args
        self._args = (
            *(np.ascontiguousarray(x, dtype=np.float64) if isinstance(x, np.ndarray)
              else float(x) for x in c.kernel_args),
            mode, float(lam), float(t_ref), float(e_ref),
        )
        self.parallel_threshold = parallel_threshold
        self.evaluations = 0

    def evaluate(self, chromosomes: np.ndarray) -> BatchResult:
        """Price a (P, L) integer array of chromosomes."""
        X = np.ascontiguousarray(chromosomes, dtype=np.int64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.instance.layers:
            raise ValueError(f"expected shape (P, {self.instance.layers}), got {X.shape}")
        P = X.shape[0]
        out = np.empty((3, P))
        status = np.empty(P, np.int8)
        n = self.instance.n
        if P >= self.parallel_threshold:
            from numba import get_num_threads

            _chromosomes_parallel(X, get_num_threads(), n, *self._args, out, status)
        else:
            _chromosome_rows(X, 0, P, n, *self._args, out, status)
        self.evaluations += P
        return BatchResult(out[2], out[0], out[1], status)

    def evaluate_stages(
        self, gpus: np.ndarray, counts: np.ndarray, q: np.ndarray
    ) -> BatchResult:
        """Price stage-form plans: (P, Qmax) GPU indices and layer counts, Q per row.

        The caller guarantees distinct, in-range GPUs and counts summing to L
        (as enumerators construct them); links and memory are checked here.
        """
        G = np.ascontiguousarray(gpus, dtype=np.int64)
        C = np.ascontiguousarray(counts, dtype=np.int64)
        Qv = np.ascontiguousarray(q, dtype=np.int64)
        P = G.shape[0]
        out = np.empty((3, P))
        status = np.empty(P, np.int8)
        _stage_rows(G, C, Qv, *self._args, out, status)
        self.evaluations += P
        return BatchResult(out[2], out[0], out[1], status)
