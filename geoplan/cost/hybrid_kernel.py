"""The formulas of hybrid-model.md, each written exactly once.

As in :mod:`geoplan.cost.kernel`, every function is plain Python (the scalar
hybrid evaluator calls them so) and the same code objects are compiled by numba
(:data:`price_hybrid_compiled`, used by the batch evaluator and the hybrid
heuristics). T_iter's pipeline part, the energy sum and the objective are the
GeoTrain kernel's own functions (:func:`~geoplan.cost.kernel.iteration_time`,
:func:`~geoplan.cost.kernel.iteration_energy`, :func:`~geoplan.cost.kernel.objective`).

A plan is passed as flat arrays (:class:`geoplan.cost.hybrid_coefficients.HybridArrays`):
per stage ``layers``, ``tp``, ``rec`` (0 none, 1 full, -1 unknown) and ``rep0``
(its replicas are ``rep0[q]..rep0[q+1]-1``); per replica ``samples`` and ``g0``
(its GPUs are ``gpus[g0[r]..g0[r+1]-1]``, in ring order, the first the lead).
Units: ms, bytes, W; bandwidths in Gbps (0 where no link), latencies in ms.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
from numba import njit

from geoplan.cost import kernel
from geoplan.cost.kernel import (
    FEASIBLE,
    INVALID,
    MEMORY,
    NO_LINK,
    iteration_energy,
    iteration_time,
    objective,
)

__all__ = [
    "allreduce_ms",
    "compute_factor",
    "dp_ring_ms",
    "grad_sync_ms",
    "price_hybrid",
    "price_hybrid_called",
    "price_hybrid_compiled",
    "replica_bytes",
    "replica_compute_ms",
    "replica_tp_ms",
    "send_ms",
    "stage_boundary_ms",
    "structure_ok",
    "tp_ring_ms",
    "zero_sigma",
]


def allreduce_ms(k, l_max, b_min, nbytes):
    """Ring all-reduce AR = 2 (k - 1) (l_max + 8 b / (k B~_min)), ms (0 for k = 1)."""
    if k <= 1:
        return 0.0
    if b_min <= 0.0:
        return np.inf
    return 2.0 * (k - 1) * (l_max + 8.0 * nbytes / (k * b_min * 1e6))


def tp_ring_ms(gpus, a, k, nbytes, lat_ms, bw_gbps):
    """AR over the ring gpus[a] -> gpus[a+1] -> ... -> gpus[a+k-1] -> gpus[a]."""
    l_max = 0.0
    b_min = np.inf
    for m in range(k):
        x = gpus[a + m]
        y = gpus[a + (m + 1) % k]
        if bw_gbps[x, y] < b_min:
            b_min = bw_gbps[x, y]
        if lat_ms[x, y] > l_max:
            l_max = lat_ms[x, y]
    return allreduce_ms(k, l_max, b_min, nbytes)


def dp_ring_ms(gpus, g0, r0, d, j, nbytes, lat_ms, bw_gbps):
    """AR over the ring of the j-th GPUs of replicas r0..r0+d-1 (in replica order)."""
    l_max = 0.0
    b_min = np.inf
    for m in range(d):
        x = gpus[g0[r0 + m] + j]
        y = gpus[g0[r0 + (m + 1) % d] + j]
        if bw_gbps[x, y] < b_min:
            b_min = bw_gbps[x, y]
        if lat_ms[x, y] > l_max:
            l_max = lat_ms[x, y]
    return allreduce_ms(d, l_max, b_min, nbytes)


def compute_factor(rec, gamma):
    """f = 1 + gamma (recompute none) or 2 + gamma (full: the forward pass twice)."""
    return 2.0 + gamma if rec == 1 else 1.0 + gamma


def replica_compute_ms(n, t, s, f, tflops_min, flop_ls):
    """c_{q,r} = f n_q C_l s_{q,r} T / (t_q F_{q,r}), ms (``flop_ls`` = C_l T)."""
    return f * n * flop_ls * s / (t * tflops_min * 1e9)


def replica_tp_ms(gpus, a, t, n, s, rec, act_bytes, lat_ms, bw_gbps):
    """p_{q,r} = a n_q AR(TP ring, kappa s T H), a = 4 (none) or 6 (full)."""
    if t <= 1:
        return 0.0
    per = 6.0 if rec == 1 else 4.0
    return per * n * tp_ring_ms(gpus, a, t, act_bytes * s, lat_ms, bw_gbps)


def send_ms(k, src, dst, act_bytes, lat_ms, bw_gbps):
    """One boundary message of k samples: L + 8 k kappa T H / B~, ms (inf without a link)."""
    if bw_gbps[src, dst] <= 0.0:
        return np.inf
    return lat_ms[src, dst] + 8.0 * k * act_bytes / (bw_gbps[src, dst] * 1e6)


def stage_boundary_ms(q, rep0, samples, g0, gpus, act_bytes, lat_ms, bw_gbps):
    """The boundary q -> q+1: (tau^fwd_q, tau^bwd_{q+1}), the max over lead pairs sharing
    k > 0 samples of their message, forward from the leads of stage q to those of q + 1
    and back along the reverse links with the same k.

    Samples are numbered in replica order in both stages. Both directions in one pass:
    the pairs are the same.
    """
    fwd = 0.0
    bwd = 0.0
    a_lo = 0
    for ra in range(rep0[q], rep0[q + 1]):
        a_hi = a_lo + samples[ra]
        x = gpus[g0[ra]]
        b_lo = 0
        for rb in range(rep0[q + 1], rep0[q + 2]):
            b_hi = b_lo + samples[rb]
            k = min(a_hi, b_hi) - max(a_lo, b_lo)
            if k > 0:
                y = gpus[g0[rb]]
                m = send_ms(k, x, y, act_bytes, lat_ms, bw_gbps)
                if m > fwd:
                    fwd = m
                m = send_ms(k, y, x, act_bytes, lat_ms, bw_gbps)
                if m > bwd:
                    bwd = m
            b_lo = b_hi
        a_lo = a_hi
    return fwd, bwd


def grad_sync_ms(n, t, r0, d, last, g0, gpus, w_bytes, lm_bytes, lat_ms, bw_gbps):
    """A_q = max_j AR(ring of the j-th GPUs of the replicas, n P_l kappa / t [+ P_lm kappa / t]).

    0 with one replica; the same for every ZeRO stage (hybrid-model.md).
    """
    if d <= 1:
        return 0.0
    nbytes = n * w_bytes / t
    if last:
        nbytes += lm_bytes / t
    worst = 0.0
    for j in range(t):
        m = dp_ring_ms(gpus, g0, r0, d, j, nbytes, lat_ms, bw_gbps)
        if m > worst:
            worst = m
    return worst


def zero_sigma(z, d):
    """Bytes of model state per parameter over kappa: 4, 2 + 2/d (ZeRO 1), 1 + 3/d (ZeRO 2)."""
    if z == 1:
        return 2.0 + 2.0 / d
    if z == 2:
        return 1.0 + 3.0 / d
    return 4.0


def replica_bytes(n, t, d, z, rec, s, q_count, last, w_bytes, lm_bytes, alpha, act_bytes,
                  logit_bytes):
    """Memory of each GPU of a replica of a stage, bytes (hybrid-model.md, Memory).

    Model state n P_l kappa sigma / t; activations (Q + 1) n alpha kappa s T H / t,
    or with full recomputation (Q + 1) n kappa s T H / t + alpha kappa s T H / t;
    the last stage adds P_lm kappa sigma / t + 2 kappa s T V / t.
    """
    sigma = zero_sigma(z, d)
    mem = n * w_bytes * sigma / t
    if rec == 1:
        mem += (q_count + 1) * n * act_bytes * s / t + alpha * act_bytes * s / t
    else:
        mem += (q_count + 1) * n * alpha * act_bytes * s / t
    if last:
        mem += lm_bytes * sigma / t + 2.0 * logit_bytes * s / t
    return mem


def structure_ok(q_count, layers, tp, rec, rep0, samples, g0, z):
    """Whether the plan can be priced at all: tp >= 1, every replica tp GPUs, samples >= 1,
    layers >= 1, a known recompute and ZeRO value. (Other violations are priced.)"""
    if z < 0 or z > 2:
        return False
    for q in range(q_count):
        if tp[q] < 1 or layers[q] < 1 or rec[q] < 0 or rep0[q + 1] <= rep0[q]:
            return False
        for r in range(rep0[q], rep0[q + 1]):
            if samples[r] < 1 or g0[r + 1] - g0[r] != tp[q]:
                return False
    return True


def price_hybrid(q_count, layers, tp, rec, rep0, samples, g0, gpus, u, z,
                 tflops, lat_ms, bw_gbps, site, idle_w, dyn_w, mem_cap,
                 n_layers, batch, max_tp, flop_ls, gamma, act_bytes, w_bytes, lm_bytes, alpha,
                 logit_bytes, overhead_ms, mode, lam, t_ref_ms, e_ref_j):
    """Price a hybrid plan: (status, T_iter, E_iter, objective).

    T_iter = sum tau + (M - 1) max tau + max_q A_q; E_iter = T_iter sum P^idle
    + M sum (P^act - P^idle) c_{q,r} over every GPU. The objective is inf unless
    FEASIBLE. GPUs are assumed distinct (the decoders and the validator check
    that); everything else of hybrid-model.md's constraints is checked here.
    """
    if not structure_ok(q_count, layers, tp, rec, rep0, samples, g0, z):
        return INVALID, np.nan, np.nan, np.inf
    status = FEASIBLE
    if batch % u != 0:
        status = INVALID
    micro_batches = batch / u
    sum_tau = 0.0
    max_tau = 0.0
    max_sync = 0.0
    idle = 0.0
    dyn_ms_w = 0.0
    total_layers = 0
    bwd_next = 0.0
    for q in range(q_count):
        n = layers[q]
        t = tp[q]
        total_layers += n
        if (t & (t - 1)) != 0 or t > max_tp:
            status = INVALID
        r0 = rep0[q]
        d = rep0[q + 1] - r0
        last = q == q_count - 1
        f = compute_factor(rec[q], gamma)
        comp = 0.0
        share = 0
        for r in range(r0, r0 + d):
            s = samples[r]
            share += s
            a = g0[r]
            fmin = np.inf
            for m in range(a, a + t):
                g = gpus[m]
                if tflops[g] < fmin:
                    fmin = tflops[g]
                if site[g] != site[gpus[a]]:
                    status = INVALID
            c = replica_compute_ms(n, t, s, f, fmin, flop_ls)
            p = replica_tp_ms(gpus, a, t, n, s, rec[q], act_bytes, lat_ms, bw_gbps)
            if c + p > comp:
                comp = c + p
            mem = replica_bytes(n, t, d, z, rec[q], s, q_count, last, w_bytes, lm_bytes,
                                alpha, act_bytes, logit_bytes)
            for m in range(a, a + t):
                g = gpus[m]
                idle += idle_w[g]
                dyn_ms_w += dyn_w[g] * c
                if mem > mem_cap[g] and status == FEASIBLE:
                    status = MEMORY
        if share != u:
            status = INVALID
        fwd = 0.0
        bwd = bwd_next  # computed with the previous boundary
        bwd_next = 0.0
        if q + 1 < q_count:
            fwd, bwd_next = stage_boundary_ms(q, rep0, samples, g0, gpus, act_bytes, lat_ms,
                                              bw_gbps)
        tau = comp + fwd + bwd + overhead_ms
        sum_tau += tau
        if tau > max_tau:
            max_tau = tau
        sync = grad_sync_ms(n, t, r0, d, last, g0, gpus, w_bytes, lm_bytes, lat_ms, bw_gbps)
        if sync > max_sync:
            max_sync = sync
    if total_layers != n_layers:
        status = INVALID
    t_iter = iteration_time(sum_tau, max_tau, micro_batches) + max_sync
    e_iter = iteration_energy(t_iter, idle, micro_batches, dyn_ms_w)
    if not np.isfinite(t_iter) and status != INVALID:
        status = NO_LINK
    if status != FEASIBLE:
        return status, t_iter, e_iter, np.inf
    return status, t_iter, e_iter, objective(t_iter, e_iter, mode, lam, t_ref_ms, e_ref_j)


_NAMES = ("allreduce_ms", "tp_ring_ms", "dp_ring_ms", "compute_factor", "replica_compute_ms",
          "replica_tp_ms", "send_ms", "stage_boundary_ms", "grad_sync_ms", "zero_sigma",
          "replica_bytes", "structure_ok", "price_hybrid")
_COMPILED = kernel.compile_together(
    globals(), _NAMES,
    {k: kernel.COMPILED[k] for k in ("iteration_time", "iteration_energy", "objective")},
)
#: The compiled hybrid pricer (batch evaluator, hybrid heuristics).
price_hybrid_compiled = _COMPILED["price_hybrid"]


def _outlined(fn: Any) -> Any:
    """A non-inlined numba dispatcher of the compiled kernel function ``fn`` (same code
    object, same compiled callees, so the same bits).

    ``price_hybrid_compiled`` is declared ``inline="always"``, but a numba caller cannot
    inline it: it has 32 parameters and CPython (3.11+) compiles a call with more than 30
    arguments to CALL_FUNCTION_EX, which numba's inliner rejects ("Calling a closure with
    *args is unsupported"). An ordinary call of a dispatcher accepts it. The clone has its
    own qualified name, hence its own numba cache entry.

    Compiled without numba's reference counting (``_nrt=False``; it allocates nothing):
    otherwise every call increments and decrements the count of each array argument,
    28 atomic operations per plan on counts that all threads share (measured: 9% of
    the one-thread time).
    """
    py = fn.py_func
    clone = types.FunctionType(py.__code__, py.__globals__, py.__name__, py.__defaults__)
    clone.__qualname__ = f"called_{py.__name__}"
    clone.__module__ = __name__
    return njit(cache=True, _nrt=False)(clone)


#: The pricer as numba code calls it (the batch evaluator, the hybrid heuristics' loops).
price_hybrid_called = _outlined(price_hybrid_compiled)
