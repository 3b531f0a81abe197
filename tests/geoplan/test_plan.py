"""Plan parsing, serialisation and the chromosome form (paper 5.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan, Stage, load_plan


def test_from_dict_and_back() -> None:
    d = {"stages": [{"gpu": "b", "layers": 5}, {"gpu": "c", "layers": 7}],
         "micro_batch_size": 2}
    p = Plan.from_dict(d)
    assert p.stages == (Stage("b", 5), Stage("c", 7))
    assert p.micro_batch_size == 2
    assert (p.q, p.gpus, p.layer_counts) == (2, ("b", "c"), (5, 7))
    assert p.to_dict() == d
    assert Plan.from_dict(json.loads(p.to_json())) == p
    # micro_batch_size is optional and then not written.
    q = Plan.from_dict({"stages": d["stages"]})
    assert q.micro_batch_size is None and "micro_batch_size" not in q.to_dict()
    assert str(p) == "b:5 | c:7"


def test_integral_float_layers_are_accepted() -> None:
    assert Plan.from_dict({"stages": [{"gpu": "a", "layers": 6.0}]}).layer_counts == (6,)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([{"gpu": "a", "layers": 6}], "plan"),
        ({"stages": []}, "plan.stages"),
        ({"stages": "a:6"}, "plan.stages"),
        ({"layers": 6}, "plan.stages"),
        ({"stages": ["a"]}, "plan.stages[0]"),
        ({"stages": [{"layers": 6}]}, "plan.stages[0].gpu"),
        ({"stages": [{"gpu": 3, "layers": 6}]}, "plan.stages[0].gpu"),
        ({"stages": [{"gpu": "a", "layers": "6"}]}, "plan.stages[0].layers"),
        ({"stages": [{"gpu": "a", "layers": 2.5}]}, "plan.stages[0].layers"),
        ({"stages": [{"gpu": "a"}]}, "plan.stages[0].layers"),
        ({"stages": [{"gpu": "a", "layers": True}]}, "plan.stages[0].layers"),
        ({"stages": [{"gpu": "a", "layers": 6}], "micro_batch_size": 0}, "micro_batch_size"),
        ({"stages": [{"gpu": "a", "layers": 6}], "micro_batch_size": "1"}, "micro_batch_size"),
    ],
)
def test_bad_shapes_raise_naming_the_field(data: Any, field: str) -> None:
    with pytest.raises(InputError) as exc:
        Plan.from_dict(data)
    assert field in exc.value.field


def test_chromosome_round_trip(hand3: Instance) -> None:
    p = Plan.from_pairs([("b", 2), ("a", 3), ("c", 1)])
    x = p.to_chromosome(hand3)
    assert x.dtype == np.int64
    assert x.tolist() == [1, 1, 0, 0, 0, 2]
    assert Plan.from_chromosome(hand3, x) == p
    assert Plan.from_chromosome(hand3, x, micro_batch_size=2).micro_batch_size == 2


@pytest.mark.parametrize(
    "x",
    [
        [0, 1, 0, 0, 0, 0],  # GPU 0 appears in two groups
        [0, 0, 1, 1, 2, 0],
        [0, 0, 3, 3, 3, 3],  # index out of range
        [-1, 0, 0, 0, 0, 0],
        [],
    ],
)
def test_bad_chromosomes_raise(hand3: Instance, x: list[int]) -> None:
    with pytest.raises(InputError):
        Plan.from_chromosome(hand3, x)


def test_reversed_keeps_micro_batch() -> None:
    p = Plan.from_pairs([("a", 1), ("b", 2)], micro_batch_size=4)
    r = p.reversed()
    assert r.stages == (Stage("b", 2), Stage("a", 1)) and r.micro_batch_size == 4
    assert r.reversed() == p


def test_gpu_indices_unknown_id(hand3: Instance) -> None:
    p = Plan.from_pairs([("a", 1), ("q", 5)])
    with pytest.raises(InputError) as exc:
        p.gpu_indices(hand3)
    assert exc.value.field == "plan.stages[1].gpu" and exc.value.value == "q"


def test_load_plan_files(tmp_path: Path) -> None:
    p = Plan.from_pairs([("a", 4), ("b", 2)])
    f = tmp_path / "p.json"
    p.to_json(f)
    assert load_plan(f) == p
    # A solve-result JSON (a "plan" key) is accepted as a plan file.
    g = tmp_path / "r.json"
    g.write_text(json.dumps({"solver": "x", "plan": p.to_dict()}))
    assert load_plan(g) == p
    with pytest.raises(InputError) as exc:
        load_plan(tmp_path / "missing.json")
    assert exc.value.field == "plan" and "not found" in exc.value.message
    bad = tmp_path / "bad.json"
    bad.write_text("{\"stages\": [")
    with pytest.raises(InputError) as exc:
        load_plan(bad)
    assert "invalid JSON" in exc.value.message
