"""The formulas of cost-model.md, each written exactly once.

Every function here is written once, as plain Python: the scalar evaluator
calls it so (no compilation needed). The same code objects are compiled by
numba into a second namespace where each function calls the compiled forms
of the others (:func:`_compile`); the batch evaluator, the exact split,
branch-and-bound and the baselines call :data:`price_stages_compiled`. Both
forms execute the same operations in the same order, so every caller prices a
plan to the same last bit.

Where an exact model restates a formula as a linearisation it names the
function here that it mirrors; ``docs/architecture.md`` lists those places and a
test per model pins the two together.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
from numba import njit

__all__ = [
    "COMPILED",
    "FEASIBLE",
    "INVALID",
    "MEMORY",
    "MODE_ENERGY",
    "MODE_MIX",
    "MODE_TIME",
    "NO_LINK",
    "compile_together",
    "iteration_energy",
    "iteration_time",
    "objective",
    "per_layer_bytes",
    "price_stages",
    "price_stages_compiled",
    "stage_bytes",
    "stage_terms",
]

# Objective modes (cost-model.md, Objective): lambda = 1, lambda = 0, the mix.
MODE_TIME, MODE_ENERGY, MODE_MIX = 0, 1, 2

# Plan statuses of the compiled pricers.
FEASIBLE = 0
INVALID = 1  # a GPU index out of range, a GPU used twice, a stage without layers
NO_LINK = 2  # two consecutive stages lack a link in one direction
MEMORY = 3  # a stage exceeds its GPU's effective memory

def stage_terms(s, gpus, counts, q, comp_ms, comm_ms, overhead_ms):
    """(compute, forward send, backward send, tau) of stage ``s`` of ``q``, in ms.

    tau_q = n_q c_g + L/B~ to the next stage + L/B~ to the previous one + o
    (cost-model.md, per-stage times); absent sends are 0.
    """
    g = gpus[s]
    comp = counts[s] * comp_ms[g]
    fwd = comm_ms[g, gpus[s + 1]] if s + 1 < q else 0.0
    bwd = comm_ms[g, gpus[s - 1]] if s > 0 else 0.0
    return comp, fwd, bwd, comp + fwd + bwd + overhead_ms


def iteration_time(sum_tau, max_tau, micro_batches):
    """T_iter = sum tau + (M - 1) max tau (1F1B, paper eq. 1), ms.

    M = 1 has no steady phase; skipping the product keeps a missing link at
    inf rather than 0 * inf = nan.
    """
    if micro_batches > 1:
        return sum_tau + (micro_batches - 1) * max_tau
    return sum_tau


def iteration_energy(t_iter_ms, idle_w_sum, micro_batches, dyn_ms_w):
    """E_iter = T_iter sum P^idle + M sum (P^act - P^idle) tau^comp (paper eq. 14), J.

    ``dyn_ms_w`` is sum_q (P^act - P^idle)_q * tau^comp_q in ms * W.
    """
    return t_iter_ms / 1e3 * idle_w_sum + micro_batches * dyn_ms_w / 1e3


def objective(t_iter_ms, e_iter_j, mode, lam, t_ref_ms, e_ref_j):
    """Paper eq. 16: T alone (ms) at lambda = 1, E alone (J) at lambda = 0, else the mix."""
    if mode == MODE_TIME:
        return t_iter_ms
    if mode == MODE_ENERGY:
        return e_iter_j
    return lam * t_iter_ms / t_ref_ms + (1.0 - lam) * e_iter_j / e_ref_j


def per_layer_bytes(mem_w, mem_a, q_stages):
    """Bytes per layer of a stage in a Q-stage pipeline: 4 P_l kappa + (Q + 1) alpha kappa u T H."""
    return mem_w + (q_stages + 1) * mem_a


def stage_bytes(layers, per_layer, last, mem_last):
    """Mem_q (paper eqs. 11-13), bytes; the last stage adds the LM head and logits."""
    return layers * per_layer + (mem_last if last else 0.0)


def price_stages(gpus, counts, q, comp_ms, comm_ms, overhead_ms, idle_w, dyn_w, mem_w, mem_a,
                 mem_last, mem_cap, micro_batches, mode, lam, t_ref_ms,
                 e_ref_j):
    """Price the stage-form plan ``gpus[:q]``, ``counts[:q]``: (status, T_iter, E_iter, objective).

    The objective is inf unless the status is FEASIBLE. GPUs are assumed
    distinct and in range (decoders check that); links, layer counts >= 1 and
    memory are checked here.
    """
    sum_tau = 0.0
    max_tau = 0.0
    idle = 0.0
    dyn_ms_w = 0.0
    per = per_layer_bytes(mem_w, mem_a, q)
    status = FEASIBLE
    for s in range(q):
        g = gpus[s]
        comp, _fwd, _bwd, tau = stage_terms(s, gpus, counts, q, comp_ms, comm_ms, overhead_ms)
        sum_tau += tau
        if tau > max_tau:
            max_tau = tau
        idle += idle_w[g]
        dyn_ms_w += dyn_w[g] * comp
        mem = stage_bytes(counts[s], per, s == q - 1, mem_last)
        if (mem > mem_cap[g] or counts[s] < 1) and status == FEASIBLE:
            status = INVALID if counts[s] < 1 else MEMORY
    t_iter = iteration_time(sum_tau, max_tau, micro_batches)
    e_iter = iteration_energy(t_iter, idle, micro_batches, dyn_ms_w)
    if not np.isfinite(sum_tau) and status != INVALID:
        status = NO_LINK
    if status != FEASIBLE:
        return status, t_iter, e_iter, np.inf
    return status, t_iter, e_iter, objective(t_iter, e_iter, mode, lam, t_ref_ms, e_ref_j)


def _compile(names: tuple[str, ...]) -> dict[str, Any]:
    """numba versions of ``names`` whose globals resolve to each other's compiled forms."""
    return compile_together(globals(), names)


def compile_together(
    namespace: dict[str, Any], names: tuple[str, ...], compiled: dict[str, Any] | None = None
) -> dict[str, Any]:
    """numba versions of ``names`` (functions of ``namespace``, a module's globals) whose
    globals resolve to each other's compiled forms and to ``compiled`` (already compiled
    functions of other modules, by the name the callers use).

    Callees come first in ``names``: each function is compiled against a
    namespace that already holds the compiled forms it calls. (numba's
    register_jitable would share one object for both worlds, but it compiles
    callees behind a call boundary that measured 12% slower in the batch
    evaluator.)
    """
    ns = dict(namespace)
    ns.update(compiled or {})
    for name in names:
        fn = namespace[name]
        clone = types.FunctionType(fn.__code__, ns, name, fn.__defaults__)
        clone.__qualname__ = fn.__qualname__
        clone.__module__ = fn.__module__
        ns[name] = njit(cache=True, inline="always")(clone)
    return {name: ns[name] for name in names}


_COMPILED = _compile(("stage_terms", "iteration_time", "iteration_energy", "objective",
                      "per_layer_bytes", "stage_bytes", "price_stages"))
#: The compiled forms of the formulas, by name (the hybrid kernel calls some of them).
COMPILED = _COMPILED
#: The compiled pricer, inlined by the batch evaluator, the exact split and B&B,
#: and called directly by Python code that prices many stage lists in a loop.
price_stages_compiled = _COMPILED["price_stages"]
