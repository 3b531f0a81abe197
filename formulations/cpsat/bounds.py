"""Redundant bounds of the model, from the relaxations of :mod:`geoplan.cost.bounds`.

The per-Q layer caps (:func:`_caps`), the stage-role relaxation in model integers
(:func:`_relaxation`), its bottleneck and sum bounds per stage count
(:func:`tmax_bounds`, :func:`sum_bounds`) and the bottleneck bounds per set of
sites used (:func:`_add_cluster_bounds`). The per-Q bound constraints themselves
are stated in :func:`formulations.cpsat.build.build_model`, in constraint order.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
from ortools.sat.python import cp_model

from geoplan.cost.bounds import Relaxation as _Relaxation
from geoplan.cost.bounds import clusters, layer_cap_table
from geoplan.model.instance import Instance

#: Largest number of clusters (sites) whose subsets get their own bottleneck bounds.
MAX_CLUSTERS = 6


def _caps(instance: Instance, q_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-Q layer caps (rows 0..Qmax, row 0 unused), clipped to [0, L]:
    :func:`geoplan.cost.bounds.layer_cap_table`."""
    return layer_cap_table(instance.coefficients(), instance.layers, q_max)


def _relaxation(
    instance: Instance, cc: Sequence[int], cm: Mapping[tuple[int, int], int], mid: np.ndarray,
    last: np.ndarray, overhead: int = 0,
) -> _Relaxation:
    """The stage-role relaxation of :mod:`geoplan.cost.bounds` in model integers."""
    return _Relaxation(np.asarray(cc, np.int64), cm, mid, last, instance.layers,
                       clusters(instance), overhead)


def tmax_bounds(
    instance: Instance,
    cc: Sequence[int],
    cm: Mapping[tuple[int, int], int],
    mid: np.ndarray,
    last: np.ndarray,
    ub: int,
    overhead: int = 0,
) -> dict[int, int]:
    """Lower bounds on the bottleneck (model integers) of every feasible stage count Q.

    :meth:`geoplan.cost.bounds.Relaxation.tmax_bounds` on the integer
    coefficients (its docstring proves it); stage counts missing from the
    result cannot hold the layers at all within ``ub``.
    """
    return {q: int(v) for q, v in
            _relaxation(instance, cc, cm, mid, last, overhead).tmax_bounds(ub).items()}


def sum_bounds(
    instance: Instance, cc: Sequence[int], cm: Mapping[tuple[int, int], int], mid: np.ndarray,
    q_dom: Sequence[int], overhead: int = 0,
) -> dict[int, int]:
    """Lower bounds on sum_q tau_q (model integers) per stage count Q:
    :meth:`geoplan.cost.bounds.Relaxation.sum_bounds` on the integer coefficients."""
    return {q: int(v) for q, v in
            _relaxation(instance, cc, cm, mid, mid, overhead).sum_bounds(q_dom).items()}


def _add_cluster_bounds(
    md: cp_model.CpModel,
    relax: _Relaxation,
    x: Sequence[cp_model.IntVar],
    y: Mapping[int, cp_model.IntVar],
    tmax: cp_model.IntVar,
    tlb: Mapping[int, int],
    ub: int,
) -> None:
    """Bottleneck bounds per (stage count, set of clusters used).

    Literal u_c says cluster c holds a stage, v_S that the clusters used are
    exactly S (one of them is true), w_QS = y_Q and v_S. A plan using exactly S
    with Q stages has tmax >= tlb(Q, S), the relaxation of :func:`tmax_bounds`
    on S's GPUs with |S| - 1 crossings, or cannot exist. All bounds go into one
    linear constraint ``tmax >= sum tlb(Q) y_Q + sum (tlb(Q, S) - tlb(Q)) w_QS``:
    CP-SAT 9.15's presolve mishandled the same bounds written as copies of
    ``tmax >= b`` under different enforcement literals (it declared a feasible
    model infeasible). A linear encoding of w by its marginals measured no faster.
    """
    nc = relax.n_clusters
    u = [md.new_bool_var(f"cluster{c}") for c in range(nc)]
    for c in range(nc):
        md.add_max_equality(u[c], [x[int(i)] for i in np.flatnonzero(relax.cluster == c)])
    v: dict[tuple[int, ...], cp_model.IntVar] = {}
    for size in range(1, nc + 1):
        for subset in itertools.combinations(range(nc), size):
            vs = md.new_bool_var(f"sites{subset}")
            lits = [u[c] if c in subset else ~u[c] for c in range(nc)]
            md.add_bool_and(lits).only_enforce_if(vs)
            md.add_bool_or([vs, *(~lit for lit in lits)])
            v[subset] = vs
    md.add_exactly_one(v.values())
    terms = []
    for subset, vs in v.items():
        sb = relax.tmax_bounds(ub, clusters=subset, start=tlb)
        for q, yq in y.items():
            if q not in sb:
                md.add_bool_or([~yq, ~vs])
            elif sb[q] > tlb[q]:
                w = md.new_bool_var(f"w{q}_{subset}")
                md.add_bool_and([yq, vs]).only_enforce_if(w)
                md.add_bool_or([w, ~yq, ~vs])
                terms.append((sb[q] - tlb[q]) * w)
    if terms:
        md.add(tmax >= sum(tlb[q] * yq for q, yq in y.items()) + sum(terms))
