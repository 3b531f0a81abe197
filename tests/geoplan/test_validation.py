"""The validator: every violation as a structured record, never an exception.

Instances: tests/data/hand3.json (a, b, c; links a<->b and b<->c only; L = 6; limits
0.9 / 0.6 / 1.0 GB; per-layer bytes 96e6 weights + (Q+1) * 34e6 activations, LM head
120e6 on the last stage; B = 8) and hand_u2.json (x, y; B = 12). See test_cost.py.
"""

from __future__ import annotations

import random

import pytest
import reference_model as ref

from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.validation import KINDS, Violation, validate


def kinds(vs: list[Violation]) -> list[str]:
    return [v.kind for v in vs]


def test_feasible_plans_have_no_violations(hand3: Instance, hand_u2: Instance) -> None:
    assert validate(hand3, Plan.from_pairs([("a", 4), ("b", 2)])) == []
    assert validate(hand3, Plan.from_pairs([("a", 3), ("b", 2), ("c", 1)])) == []
    assert validate(hand_u2, Plan.from_pairs([("x", 3), ("y", 1)])) == []


def test_layer_sum(hand3: Instance) -> None:
    (v,) = validate(hand3, Plan.from_pairs([("a", 3), ("b", 2)]))  # 5 of 6 layers
    assert v.kind == "layer_sum" and v.amount == -1.0
    assert "5" in v.message and "6" in v.message


def test_empty_stage(hand3: Instance) -> None:
    # [a:4, b:2, c:0]: stage 3 is empty; a (4 layers, Q = 3: 4 * 232e6 = 0.928 GB) is over 0.9.
    vs = validate(hand3, Plan.from_pairs([("a", 4), ("b", 2), ("c", 0)]))
    assert kinds(vs) == ["empty_stage", "memory"]
    assert (vs[0].stage, vs[0].gpu) == (2, "c")
    assert vs[1].stage == 0 and vs[1].amount == pytest.approx(0.028, rel=1e-9)


def test_repeated_gpu_and_its_missing_self_link(hand3: Instance) -> None:
    vs = validate(hand3, Plan.from_pairs([("a", 2), ("b", 2), ("a", 2)]))
    assert "repeated_gpu" in kinds(vs)
    rep = next(v for v in vs if v.kind == "repeated_gpu")
    assert rep.stage == 2 and rep.gpu == "a" and "1" in rep.message and "3" in rep.message


def test_missing_link_both_directions(hand3: Instance) -> None:
    vs = validate(hand3, Plan.from_pairs([("a", 3), ("c", 3)]))
    assert kinds(vs) == ["missing_link", "missing_link"]
    assert {v.gpu for v in vs} == {"a", "c"}
    assert all("a" in v.message and "c" in v.message for v in vs)


def test_missing_link_one_direction(hand3_dict: dict) -> None:
    # Drop c -> b only: [b, c] then lacks the backward (gradient) link alone.
    hand3_dict["links"] = [e for e in hand3_dict["links"] if (e["src"], e["dst"]) != ("c", "b")]
    inst = Instance.from_dict(hand3_dict)
    (v,) = validate(inst, Plan.from_pairs([("b", 2), ("c", 4)]))
    assert v.kind == "missing_link" and v.gpu == "c" and "gradient" in v.message


def test_memory_per_stage_with_the_amount_over(hand3: Instance) -> None:
    # [b:2, a:4]: a as last stage needs 4 * 198e6 + 120e6 = 0.912 GB, 0.012 over 0.9.
    (v,) = validate(hand3, Plan.from_pairs([("b", 2), ("a", 4)]))
    assert v.kind == "memory" and v.stage == 1 and v.gpu == "a"
    assert v.amount == pytest.approx(0.012, rel=1e-9)
    assert "0.912" in v.message and "0.900" in v.message and "0.012" in v.message
    # [b:6]: Q = 1: 6 * (96e6 + 2 * 34e6) + 120e6 = 1.104 GB against 0.6: 0.504 over.
    (w,) = validate(hand3, Plan.from_pairs([("b", 6)]))
    assert w.amount == pytest.approx(0.504, rel=1e-9)


def test_micro_batch_divisibility(hand_u2: Instance) -> None:
    # B = 12 is not divisible by 5.
    (v,) = validate(hand_u2, Plan.from_pairs([("x", 3), ("y", 1)], micro_batch_size=5))
    assert v.kind == "micro_batch" and "12" in v.message and "5" in v.message


def test_stage_count_range(hand3: Instance) -> None:
    # Four stages on three GPUs: Q > min(N, L) = 3 (and a GPU necessarily repeats).
    vs = validate(hand3, Plan.from_pairs([("a", 1), ("b", 1), ("c", 2), ("b", 2)]))
    assert "stage_count" in kinds(vs) and "repeated_gpu" in kinds(vs)
    sc = next(v for v in vs if v.kind == "stage_count")
    assert sc.amount == 4.0 and "1..3" in sc.message
    # Q = 0 is out of range as well.
    assert "stage_count" in kinds(validate(hand3, Plan(stages=())))


def test_every_violation_is_returned_at_once(hand3: Instance) -> None:
    # Layer sum 7 != 6, a repeated (and self-linked), a <-> c missing, all in one plan.
    vs = validate(hand3, Plan.from_pairs([("a", 3), ("c", 2), ("a", 2)]))
    got = kinds(vs)
    assert got.count("layer_sum") == 1
    assert got.count("repeated_gpu") == 1
    assert got.count("missing_link") == 4  # a->c, c->a, c->a, a->c
    assert set(got) <= set(KINDS)
    assert all(isinstance(v.message, str) and v.message for v in vs)
    assert all(v.to_dict()["kind"] == v.kind for v in vs)


def test_unknown_gpu_is_input_not_infeasibility(hand3: Instance) -> None:
    with pytest.raises(InputError):
        validate(hand3, Plan.from_pairs([("a", 3), ("zz", 3)]))


def test_agrees_with_reference_on_random_plans() -> None:
    rng = random.Random(5)
    checked = infeasible = 0
    for _ in range(300):
        d = ref.random_instance(rng)
        inst = Instance.from_dict(d)
        for _ in range(5):
            p = ref.random_plan(rng, d, valid_shape=rng.random() < 0.7)
            got = sorted(kinds(validate(inst, Plan.from_dict(p))))
            assert got == sorted(ref.validate_ref(d, p)), (d, p)
            checked += 1
            infeasible += bool(got)
    assert 0.2 * checked < infeasible < 0.95 * checked
