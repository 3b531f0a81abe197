"""The scalar evaluator against hand-worked instances (tests/data/hand3.json, hand_u2.json).

Every expected number below is worked out by hand in the comments from
cost-model.md, with round inputs so that the arithmetic can be checked on paper.

hand3.json: L=6, H=1000, T=1000, V=10000, B=8, u=1 (M=8), kappa=2, alpha=17, gamma=2.
  C_l = 24 H^2 + 4 T H = 24e6 + 4e6 = 28e6 FLOP per token per layer
  per-layer compute = (1+gamma) C_l u T / F~ = 3 * 28e6 * 1 * 1000 / F~ = 8.4e10 / F~ s
    a: F~ = 0.5 * 168 = 84 TFLOPS -> 1 ms;  b: F~ = 42 -> 2 ms;  c: F~ = 0.5 * 42 = 21 -> 4 ms
  S_act = kappa u T H = 2 * 1 * 1000 * 1000 = 2e6 bytes = 16e6 bit
  comm = L + 8 S_act / B~:
    a->b: 2 ms + 16e6 / 16e9 s = 2 + 1 = 3 ms     b->a: 1 ms + 16e6 / (0.5*32e9) = 1 + 1 = 2 ms
    b->c: 0 ms + 16e6 / 8e9 = 2 ms                 c->b: 4 ms + 16e6 / 16e9 = 4 + 1 = 5 ms
    no a<->c link.
  memory: P_l = 12 H^2 = 12e6 -> weights 4 P_l kappa = 96e6 B per layer;
    activations alpha kappa u T H = 17 * 2 * 1e6 = 34e6 B per layer per (Q+1);
    last stage: 4 P_lm kappa + 2 kappa u T V = 4*1e7*2 + 2*2*1000*10000 = 80e6 + 40e6 = 120e6 B
  limits: a 0.9 * 1.0 = 0.9 GB, b 0.6 GB, c 0.5 * 2.0 = 1.0 GB
  power (idle/active W): a 50/250, b 30/130, c 20/100
"""

from __future__ import annotations

import math

import pytest

from geoplan.cost import evaluate, objective_units, objective_value
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

REL = 1e-12


def plan_of(*pairs: tuple[str, int], u: int | None = None) -> Plan:
    return Plan.from_pairs(pairs, micro_batch_size=u)


def with_lambda(inst: Instance, lam: float, t_ref: float | None = None,
                e_ref: float | None = None) -> Instance:
    d = inst.to_dict()
    d["objective"] = {"lambda": lam, "t_ref_ms": t_ref, "e_ref_j": e_ref}
    return Instance.from_dict(d)


# ----------------------------------------------------------------------------- hand3, [a:4, b:2]
# Q = 2.
# stage 1 (a, 4 layers): compute 4 * 1 = 4 ms, fwd a->b 3 ms               -> tau 7 ms
# stage 2 (b, 2 layers): compute 2 * 2 = 4 ms, bwd b->a 2 ms               -> tau 6 ms
# T_iter = (7 + 6) + (8 - 1) * 7 = 13 + 49 = 62 ms
# E_iter = T * sum idle + M * sum (act - idle) tau_comp
#        = 0.062 s * (50 + 30) W + 8 * (200 W * 0.004 s + 100 W * 0.004 s)
#        = 4.96 + 8 * 1.2 = 14.56 J
# memory (Q+1 = 3): per layer 96e6 + 3 * 34e6 = 198e6 B
#   stage 1: 4 * 198e6 = 792e6 B = 0.792 GB  (limit 0.9)
#   stage 2: 2 * 198e6 + 120e6 = 516e6 B = 0.516 GB  (limit 0.6)
# objective: lambda 1 -> 62 ms; lambda 0 -> 14.56 J;
#   lambda 0.5 with T_ref = 100 ms, E_ref = 20 J -> 0.5 * 0.62 + 0.5 * 0.728 = 0.674


def test_two_stage_plan_by_hand(hand3: Instance) -> None:
    ev = evaluate(hand3, plan_of(("a", 4), ("b", 2)))
    assert ev.feasible and ev.violations == ()
    s1, s2 = ev.stages
    assert (s1.gpu, s1.layers, s2.gpu, s2.layers) == ("a", 4, "b", 2)
    assert s1.compute_ms == pytest.approx(4.0, rel=REL)
    assert s1.comm_fwd_ms == pytest.approx(3.0, rel=REL)
    assert s1.comm_bwd_ms == 0.0
    assert s1.tau_ms == pytest.approx(7.0, rel=REL)
    assert s2.compute_ms == pytest.approx(4.0, rel=REL)
    assert s2.comm_fwd_ms == 0.0
    assert s2.comm_bwd_ms == pytest.approx(2.0, rel=REL)
    assert s2.tau_ms == pytest.approx(6.0, rel=REL)
    assert s1.memory_gb == pytest.approx(0.792, rel=REL)
    assert s2.memory_gb == pytest.approx(0.516, rel=REL)
    assert s1.memory_limit_gb == pytest.approx(0.9, rel=REL)
    assert s2.memory_limit_gb == pytest.approx(0.6, rel=REL)
    assert ev.t_iter_ms == pytest.approx(62.0, rel=REL)
    assert ev.e_iter_j == pytest.approx(14.56, rel=REL)
    assert ev.objective == pytest.approx(62.0, rel=REL)
    assert ev.bottleneck_stage == 0


@pytest.mark.parametrize(
    ("lam", "t_ref", "e_ref", "expected"),
    [
        (1.0, None, None, 62.0),  # T_iter in ms
        (0.0, None, None, 14.56),  # E_iter in J
        (0.5, 100.0, 20.0, 0.674),  # 0.5 * 62/100 + 0.5 * 14.56/20 = 0.31 + 0.364
        (0.25, 100.0, 20.0, 0.701),  # 0.25 * 0.62 + 0.75 * 0.728 = 0.155 + 0.546
    ],
)
def test_two_stage_objective_by_lambda(
    hand3: Instance, lam: float, t_ref: float | None, e_ref: float | None, expected: float
) -> None:
    ev = evaluate(with_lambda(hand3, lam, t_ref, e_ref), plan_of(("a", 4), ("b", 2)))
    assert ev.objective == pytest.approx(expected, rel=REL)
    assert ev.lam == lam
    if t_ref is not None:
        # The result reports the normalisers it used.
        assert (ev.t_ref_ms, ev.e_ref_j) == (t_ref, e_ref)


# ---------------------------------------------------------------------- hand3, [a:3, b:2, c:1]
# Q = 3.
# stage 1 (a, 3): compute 3 ms, fwd a->b 3 ms                        -> tau 6 ms
# stage 2 (b, 2): compute 4 ms, fwd b->c 2 ms, bwd b->a 2 ms         -> tau 8 ms
# stage 3 (c, 1): compute 4 ms, bwd c->b 5 ms                        -> tau 9 ms
# T_iter = (6 + 8 + 9) + 7 * 9 = 23 + 63 = 86 ms
# E_iter = 0.086 * (50 + 30 + 20) + 8 * (200 * 0.003 + 100 * 0.004 + 80 * 0.004)
#        = 8.6 + 8 * (0.6 + 0.4 + 0.32) = 8.6 + 10.56 = 19.16 J
# memory (Q+1 = 4): per layer 96e6 + 4 * 34e6 = 232e6 B
#   stage 1: 3 * 232e6 = 696e6 (0.696 GB); stage 2: 2 * 232e6 = 464e6 (0.464 GB);
#   stage 3: 232e6 + 120e6 = 352e6 (0.352 GB)   -> all within 0.9 / 0.6 / 1.0
# objective lambda 0.5, T_ref 100, E_ref 20: 0.5 * 0.86 + 0.5 * 0.958 = 0.43 + 0.479 = 0.909


def test_three_stage_plan_by_hand(hand3: Instance) -> None:
    ev = evaluate(hand3, plan_of(("a", 3), ("b", 2), ("c", 1)))
    assert ev.feasible
    expected = [  # compute, fwd, bwd, tau, memory GB
        (3.0, 3.0, 0.0, 6.0, 0.696),
        (4.0, 2.0, 2.0, 8.0, 0.464),
        (4.0, 0.0, 5.0, 9.0, 0.352),
    ]
    for s, (comp, fwd, bwd, tau, mem) in zip(ev.stages, expected, strict=True):
        assert s.compute_ms == pytest.approx(comp, rel=REL)
        assert s.comm_fwd_ms == pytest.approx(fwd, rel=REL)
        assert s.comm_bwd_ms == pytest.approx(bwd, rel=REL)
        assert s.tau_ms == pytest.approx(tau, rel=REL)
        assert s.memory_gb == pytest.approx(mem, rel=REL)
    assert ev.t_iter_ms == pytest.approx(86.0, rel=REL)
    assert ev.e_iter_j == pytest.approx(19.16, rel=REL)
    assert ev.bottleneck_stage == 2
    assert evaluate(with_lambda(hand3, 0.0), plan_of(("a", 3), ("b", 2), ("c", 1))).objective \
        == pytest.approx(19.16, rel=REL)
    mixed = with_lambda(hand3, 0.5, 100.0, 20.0)
    assert evaluate(mixed, plan_of(("a", 3), ("b", 2), ("c", 1))).objective == pytest.approx(
        0.909, rel=REL
    )


# ----------------------------------------------------------------------------- reversal, memory
# [b:2, a:4], Q = 2:
# stage 1 (b, 2): compute 4 ms, fwd b->a 2 ms -> 6 ms; stage 2 (a, 4): compute 4, bwd a->b 3 -> 7
# T_iter = 13 + 7 * 7 = 62 ms (the same multiset of link times as [a:4, b:2]); E_iter = 14.56 J.
# memory: stage 1: 2 * 198e6 = 396e6 (0.396 GB <= 0.6); stage 2 now carries the LM head:
#   4 * 198e6 + 120e6 = 912e6 B = 0.912 GB > 0.9 GB limit of a: 0.012 GB over -> infeasible.


def test_reversed_plan_moves_lm_head_and_breaks_memory(hand3: Instance) -> None:
    ev = evaluate(hand3, plan_of(("b", 2), ("a", 4)))
    assert [s.tau_ms for s in ev.stages] == pytest.approx([6.0, 7.0], rel=REL)
    assert ev.t_iter_ms == pytest.approx(62.0, rel=REL)
    assert ev.e_iter_j == pytest.approx(14.56, rel=REL)
    assert [s.memory_gb for s in ev.stages] == pytest.approx([0.396, 0.912], rel=REL)
    assert not ev.feasible
    (v,) = ev.violations
    assert v.kind == "memory" and v.stage == 1 and v.gpu == "a"
    assert v.amount == pytest.approx(0.012, rel=1e-9)
    # Reported, priced, not raised: the objective is still the plan's T_iter.
    assert ev.objective == pytest.approx(62.0, rel=REL)


# [a:3, c:3]: no a<->c link, so both directions are missing: two violations and an infinite time.
def test_missing_link_prices_infinite_time(hand3: Instance) -> None:
    ev = evaluate(hand3, plan_of(("a", 3), ("c", 3)))
    assert not ev.feasible
    assert [v.kind for v in ev.violations] == ["missing_link", "missing_link"]
    assert math.isinf(ev.stages[0].comm_fwd_ms) and math.isinf(ev.stages[1].comm_bwd_ms)
    assert not math.isfinite(ev.t_iter_ms)
    d = ev.to_dict()
    # JSON has no infinity: non-finite numbers become null.
    assert d["t_iter_ms"] is None and d["stages"][0]["comm_fwd_ms"] is None


# ----------------------------------------------------------------------------- hand_u2
# hand_u2.json: L=4, H=500, T=200, V=2000, C_l overridden = 1e7, B=12, u=2 (M=6),
#   kappa=4, alpha=10, gamma=1; lambda 0 (objective = E_iter in J).
# per-layer compute = (1+1) * 1e7 * 2 * 200 / F~ = 8e9 / F~ s:
#   x: F~ = 0.8 * 10 = 8 TFLOPS -> 1 ms;  y: F~ = 4 -> 2 ms
# S_act = 4 * 2 * 200 * 500 = 8e5 B = 6.4e6 bit;
#   x->y: 0.5 ms + 6.4e6 / (0.5 * 6.4e9) = 0.5 + 2 = 2.5 ms;  y->x: 3 ms + 6.4e6 / 6.4e9 = 4 ms
# memory: weights 4 * 12 * 500^2 * 4 = 48e6 B per layer; activations 10 * 4 * 2 * 200 * 500
#   = 8e6 B per layer per (Q+1); last: 4 * (2000*500) * 4 + 2 * 4 * 2 * 200 * 2000
#   = 16e6 + 6.4e6 = 22.4e6 B; limits x 0.25 * 1.0 = 0.25 GB, y 0.1 GB.
# [x:3, y:1], Q = 2: stage 1: 3 + 2.5 = 5.5 ms; stage 2: 2 + 4 = 6 ms
#   T_iter = 11.5 + 5 * 6 = 41.5 ms
#   E_iter = 0.0415 * (10 + 20) + 6 * (100 * 0.003 + 40 * 0.002) = 1.245 + 6 * 0.38 = 3.525 J
#   memory: 3 * (48e6 + 3 * 8e6) = 216e6 (0.216 GB); 72e6 + 22.4e6 = 94.4e6 (0.0944 GB)


def test_u2_overrides_by_hand(hand_u2: Instance) -> None:
    ev = evaluate(hand_u2, plan_of(("x", 3), ("y", 1)))
    assert ev.feasible
    assert [s.tau_ms for s in ev.stages] == pytest.approx([5.5, 6.0], rel=REL)
    assert [s.memory_gb for s in ev.stages] == pytest.approx([0.216, 0.0944], rel=REL)
    assert ev.t_iter_ms == pytest.approx(41.5, rel=REL)
    assert ev.e_iter_j == pytest.approx(3.525, rel=REL)
    assert ev.objective == pytest.approx(3.525, rel=REL)  # lambda 0: E_iter in J


# [x:4], Q = 1: tau = 4 ms; T_iter = 4 + 5 * 4 = 24 ms; E = 0.024 * 10 + 6 * 100 * 0.004 = 2.64 J
#   memory: 4 * (48e6 + 2 * 8e6) + 22.4e6 = 278.4e6 B = 0.2784 GB > 0.25: 0.0284 GB over.
def test_single_gpu_memory_over_by_hand(hand_u2: Instance) -> None:
    ev = evaluate(hand_u2, plan_of(("x", 4)))
    assert ev.t_iter_ms == pytest.approx(24.0, rel=REL)
    assert ev.e_iter_j == pytest.approx(2.64, rel=REL)
    assert ev.stages[0].memory_gb == pytest.approx(0.2784, rel=REL)
    (v,) = ev.violations
    assert v.kind == "memory" and v.amount == pytest.approx(0.0284, rel=1e-9)
    assert "0.028" in v.message  # the amount over, readable


# The plan's own micro-batch size u = 4 (M = 12 / 4 = 3) on [x:3, y:1]:
#   compute x 2 ms, y 4 ms per layer; S_act = 1.6e6 B = 12.8e6 bit;
#   x->y: 0.5 + 12.8e6 / 3.2e9 = 4.5 ms;  y->x: 3 + 12.8e6 / 6.4e9 = 5 ms
#   stage 1: 6 + 4.5 = 10.5 ms; stage 2: 4 + 5 = 9 ms; T = 19.5 + 2 * 10.5 = 40.5 ms
#   E = 0.0405 * 30 + 3 * (100 * 0.006 + 40 * 0.004) = 1.215 + 2.28 = 3.495 J
#   memory: activations 16e6 per layer per (Q+1): stage 1: 3 * (48e6 + 48e6) = 288e6 B
#   (0.288 > 0.25, 0.038 over); last extra 16e6 + 12.8e6 = 28.8e6: stage 2 = 124.8e6 B
#   (0.1248 > 0.1, 0.0248 over).
def test_plan_micro_batch_size_overrides_instance(hand_u2: Instance) -> None:
    ev = evaluate(hand_u2, plan_of(("x", 3), ("y", 1), u=4))
    assert [s.tau_ms for s in ev.stages] == pytest.approx([10.5, 9.0], rel=REL)
    assert ev.t_iter_ms == pytest.approx(40.5, rel=REL)
    assert ev.e_iter_j == pytest.approx(3.495, rel=REL)
    assert [s.memory_gb for s in ev.stages] == pytest.approx([0.288, 0.1248], rel=REL)
    assert [(v.kind, v.stage) for v in ev.violations] == [("memory", 0), ("memory", 1)]
    assert [v.amount for v in ev.violations] == pytest.approx([0.038, 0.0248], rel=1e-9)


def test_evaluate_json_has_the_keys_of_formats_md(hand3: Instance) -> None:
    d = evaluate(hand3, plan_of(("b", 2), ("a", 4))).to_dict()
    required = {"t_iter_ms", "e_iter_j", "objective", "feasible", "violations", "stages"}
    assert required <= d.keys()
    assert d["feasible"] is False
    assert all(isinstance(v, str) for v in d["violations"]) and len(d["violations"]) == 1
    stage_keys = {"gpu", "layers", "compute_ms", "comm_fwd_ms", "comm_bwd_ms", "tau_ms",
                  "memory_gb", "memory_limit_gb"}
    assert all(set(s) == stage_keys for s in d["stages"])


def test_unknown_gpu_in_plan_raises_input_error(hand3: Instance) -> None:
    with pytest.raises(InputError) as exc:
        evaluate(hand3, plan_of(("a", 3), ("zz", 3)))
    assert "stages[1].gpu" in exc.value.field and exc.value.value == "zz"


def test_objective_value_and_units(hand3: Instance) -> None:
    assert objective_value(with_lambda(hand3, 1.0), 62.0, 14.56) == 62.0
    assert objective_value(with_lambda(hand3, 0.0), 62.0, 14.56) == 14.56
    assert objective_value(with_lambda(hand3, 0.5, 100, 20), 62.0, 14.56) == pytest.approx(0.674)
    # Unresolved normalisers with 0 < lambda < 1 are a programming error, loudly.
    with pytest.raises(ValueError):
        objective_value(with_lambda(hand3, 0.5), 62.0, 14.56)
    assert [objective_units(x) for x in (1.0, 0.0, 0.5)] == ["ms", "J", "1"]


def test_mixed_lambda_without_normalisers_uses_a_reported_baseline(hand3: Instance) -> None:
    inst = with_lambda(hand3, 0.5)
    ev = evaluate(inst, plan_of(("a", 3), ("b", 2), ("c", 1)))
    assert ev.t_ref_ms is not None and ev.e_ref_j is not None
    assert ev.objective == pytest.approx(0.5 * 86.0 / ev.t_ref_ms + 0.5 * 19.16 / ev.e_ref_j,
                                         rel=1e-12)
