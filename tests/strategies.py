"""Hypothesis strategies that draw instances and plans (so that failures shrink).

Each draw builds the canonical JSON dict of formats.md from small sets of values,
field by field, so that a failing example shrinks to a small, readable one: fewer
GPUs and layers, the first value of each set (round numbers, optional fields
left out, full links, roomy memory, lambda 1). Like tests/reference_model.py the
strategies import nothing from geoplan.

- :func:`instances`: N in 1..5, L in 1..8; per-GPU numbers from small sets; links
  drawn one direction at a time (so asymmetric), some missing; optional
  ``compute_util``/``memory_util``/``util``/``type``/``site``; memory from roomy to
  tight (a fix-up keeps some layout that fits, so the instance is valid input);
  lambda from {1, 0, 0.5, 0.25} with normalisers given for mixed lambdas;
  ``training.stage_overhead_ms`` only with ``overhead=True``.
- :func:`plans`: distinct GPUs, counts summing to L (``shape_errors=True`` also
  repeats a GPU, misses the layer sum or adds an empty stage).
- :func:`chromosomes`: the same plans as ``[x_1..x_L]`` GPU-index lists
  (``decodable=False``: any GPU string, most of which encode no plan).
- :func:`cases`: an instance and a plan of it.
"""

from __future__ import annotations

from typing import Any

import reference_model as ref
from hypothesis import strategies as st

Json = dict[str, Any]

LAMBDAS = (1.0, 0.0, 0.5, 0.25)


def _maybe(draw: st.DrawFn, d: Json, key: str, values: list[Any]) -> None:
    """Set d[key] to a value drawn from ``values``; None (shrinks to it first) leaves it out."""
    v = draw(st.sampled_from([None, *values]))
    if v is not None:
        d[key] = v


@st.composite
def instances(
    draw: st.DrawFn,
    min_gpus: int = 1,
    max_gpus: int = 5,
    min_layers: int = 1,
    max_layers: int = 8,
    overhead: bool = False,
    lambdas: tuple[float, ...] = LAMBDAS,
    tight_memory: bool = False,
) -> Json:
    """A canonical instance dict that geoplan must accept (see the module docstring).

    ``tight_memory`` draws memory from the tight end (most GPUs hold part of the model),
    so that optima are pipelines more often than one-GPU plans.
    """
    N = draw(st.integers(min_gpus, max_gpus))
    L = draw(st.integers(min_layers, max_layers))
    model: Json = {
        "layers": L,
        "hidden": draw(st.sampled_from([1024, 256, 2048])),
        "seq_len": draw(st.sampled_from([512, 128, 2048])),
        "vocab": draw(st.sampled_from([32000, 1000, 50257])),
    }
    _maybe(draw, model, "flops_per_token_per_layer", [3e8, 2e7])
    u = draw(st.sampled_from([1, 2, 4]))
    training: Json = {"batch_size": u * draw(st.sampled_from([4, 1, 2, 3, 8])),
                      "micro_batch_size": u}
    _maybe(draw, training, "bytes_per_value", [4, 2])
    _maybe(draw, training, "activation_factor", [10, 34])
    _maybe(draw, training, "backward_factor", [1.0, 3.0, 0.0])
    if overhead:
        training["stage_overhead_ms"] = draw(st.sampled_from([5.0, 0.0, 0.5, 50.0]))
    lam = draw(st.sampled_from(lambdas))
    objective: Json = {"lambda": lam}
    if 0 < lam < 1:
        objective["t_ref_ms"] = draw(st.sampled_from([1000.0, 50.0, 3e4]))
        objective["e_ref_j"] = draw(st.sampled_from([200.0, 5.0, 1e4]))
    d: Json = {"name": "hypothesis", "gpus": [], "links": [], "model": model,
               "training": training, "objective": objective}

    # Memory as a fraction of what the whole model needs on one GPU: roomy (4x) first.
    whole = ref.stage_memory_bytes(d, L, 1, True, u)
    for i in range(N):
        idle = draw(st.sampled_from([50.0, 0.0, 20.0, 90.0]))
        g: Json = {"id": f"g{i}", "peak_tflops": draw(st.sampled_from([100.0, 19.5, 312.0, 65.0])),
                   "idle_w": idle,
                   "active_w": max(1.0, idle + draw(st.sampled_from([200.0, 0.0, 50.0, 400.0])))}
        _maybe(draw, g, "compute_util", [0.5, 0.3, 0.9])
        _maybe(draw, g, "memory_util", [0.9, 0.5])
        shares = [0.6, 0.35, 1.2, 0.15] if tight_memory else [4.0, 1.2, 0.6, 0.35, 0.15]
        share = draw(st.sampled_from(shares))
        g["memory_gb"] = whole * share / 1e9 / g.get("memory_util", 1.0)
        site = draw(st.sampled_from([None, "A", "B"]))
        if site is not None:
            g["site"], g["type"] = site, "custom"
        d["gpus"].append(g)
    if not ref.memory_feasible_somewhere(d):
        # No layout fits (geoplan refuses such input): let the first GPU hold the model.
        g0 = d["gpus"][0]
        g0["memory_gb"] = whole * 1.5 / 1e9 / g0.get("memory_util", 1.0)

    for i in range(N):
        for j in range(N):
            if i == j or not draw(st.sampled_from([True, True, True, False])):
                continue
            e: Json = {"src": f"g{i}", "dst": f"g{j}",
                       "bandwidth_gbps": draw(st.sampled_from([10.0, 1.0, 100.0, 400.0])),
                       "latency_ms": draw(st.sampled_from([1.0, 0.0, 20.0, 150.0]))}
            _maybe(draw, e, "util", [0.5, 0.9])
            d["links"].append(e)
    return d


@st.composite
def plans(draw: st.DrawFn, instance: Json, shape_errors: bool = False,
          micro_batch: bool = False) -> Json:
    """A plan dict of ``instance``: Q distinct GPUs, layer counts >= 1 summing to L.

    It may still break links or memory. ``shape_errors`` may also break the shape;
    ``micro_batch`` may give the plan its own micro-batch size (a divisor of B).
    """
    ids = [g["id"] for g in instance["gpus"]]
    L = int(instance["model"]["layers"])
    Q = draw(st.integers(1, min(len(ids), L)))
    order = draw(st.permutations(ids))[:Q]
    cuts = sorted(draw(st.lists(st.integers(1, L - 1), min_size=Q - 1, max_size=Q - 1,
                                unique=True))) if Q > 1 else []
    counts = [b - a for a, b in zip([0, *cuts], [*cuts, L], strict=True)]
    if shape_errors:
        kind = draw(st.sampled_from(["none", "repeat", "sum", "empty"]))
        if kind == "repeat" and Q >= 2:
            order[-1] = order[0]
        elif kind == "sum":
            counts[draw(st.integers(0, Q - 1))] += draw(st.sampled_from([1, -1]))
        elif kind == "empty":
            order.append(draw(st.sampled_from(ids)))
            counts.append(0)
    p: Json = {"stages": [{"gpu": g, "layers": n} for g, n in zip(order, counts, strict=True)]}
    if micro_batch:
        B = int(instance["training"]["batch_size"])
        _maybe(draw, p, "micro_batch_size", [v for v in range(1, B + 1) if B % v == 0])
    return p


@st.composite
def chromosomes(draw: st.DrawFn, instance: Json, decodable: bool = True) -> list[int]:
    """``[x_1..x_L]`` (x_l = GPU index of layer l) of a drawn plan; with ``decodable``
    False any string of GPU indices (non-contiguous groups encode no plan)."""
    ids = [g["id"] for g in instance["gpus"]]
    L = int(instance["model"]["layers"])
    if not decodable:
        return draw(st.lists(st.integers(0, len(ids) - 1), min_size=L, max_size=L))
    p = draw(plans(instance))
    return [ids.index(s["gpu"]) for s in p["stages"] for _ in range(s["layers"])]


@st.composite
def cases(draw: st.DrawFn, shape_errors: bool = False, micro_batch: bool = False,
          **kw: Any) -> tuple[Json, Json]:
    """(instance dict, plan dict); ``kw`` goes to :func:`instances`."""
    d = draw(instances(**kw))
    return d, draw(plans(d, shape_errors=shape_errors, micro_batch=micro_batch))
