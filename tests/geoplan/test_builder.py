"""InstanceBuilder: catalog names or values, link helpers, checks with named fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geoplan import InstanceBuilder
from geoplan.errors import InputError
from geoplan.model.catalog import GPU_TYPES, MODEL_SHAPES
from geoplan.model.instance import Instance
from geoplan.model.network import three_site

DATA = Path(__file__).resolve().parent.parent / "data"


def two_sites() -> InstanceBuilder:
    return (
        InstanceBuilder("two-sites")
        .gpu("a0", "A100-SXM-80GB", site="A", compute_util=0.5)
        .gpu("a1", "a100 sxm 80gb", site="A")  # catalog names are forgiving
        .gpu("b0", "A30", site="B", peak_tflops=100.0)  # explicit values win
        .model("gpt3-1.3b")
        .training(batch_size=32, micro_batch_size=1)
    )


def test_catalog_values_and_overrides() -> None:
    inst = two_sites().full_mesh(bandwidth_gbps=10, latency_ms=1).build()
    a0, a1, b0 = inst.gpus
    a100 = GPU_TYPES["A100-SXM-80GB"]
    assert (a0.peak_tflops, a0.memory_gb, a0.active_w) == (a100.peak_tflops, a100.memory_gb,
                                                           a100.tdp_w)
    assert a0.compute_util == 0.5 and a1.type == "A100-SXM-80GB" and a1.site == "A"
    assert b0.peak_tflops == 100.0 and b0.memory_gb == GPU_TYPES["A30"].memory_gb
    shape = MODEL_SHAPES["gpt3-1.3b"]
    assert (inst.layers, inst.model.hidden) == (shape.layers, shape.hidden)
    assert len(inst.links) == 6  # full mesh of 3 GPUs, both directions


def test_same_as_the_json_it_writes() -> None:
    inst = two_sites().full_mesh(bandwidth_gbps=10, latency_ms=1).build()
    again = Instance.from_dict(json.loads(inst.to_json()))
    assert again.to_dict() == inst.to_dict() and again.fingerprint == inst.fingerprint


def test_site_helpers_and_later_rules_win() -> None:
    inst = (
        two_sites()
        .links_within_site("A", bandwidth_gbps=100, latency_ms=0.1)
        .links_between_sites("A", "B", bandwidth_gbps=10, latency_ms=20, bandwidth_ba_gbps=9)
        .link("a0", "b0", bandwidth_gbps=5, latency_ms=1, util=0.5)
        .build()
    )
    links = {(e.src, e.dst): (e.bandwidth_gbps, e.latency_ms, e.util) for e in inst.links}
    assert links == {
        ("a0", "a1"): (100.0, 0.1, 1.0),
        ("a1", "a0"): (100.0, 0.1, 1.0),
        ("a0", "b0"): (5.0, 1.0, 0.5),  # the later .link replaced the site rule's value
        ("a1", "b0"): (10.0, 20.0, 1.0),
        ("b0", "a0"): (9.0, 20.0, 1.0),
        ("b0", "a1"): (9.0, 20.0, 1.0),
    }
    # the replaced link keeps its place (the order of first appearance)
    assert [(e.src, e.dst) for e in inst.links][2] == ("a0", "b0")


def test_explicit_values_and_both_ways() -> None:
    inst = (
        InstanceBuilder("hand")
        .gpu("x", peak_tflops=84, memory_gb=1.0, idle_w=50, active_w=250)
        .gpu("y", peak_tflops=42, memory_gb=1.0, idle_w=30, active_w=130)
        .link("x", "y", bandwidth_gbps=16, latency_ms=2, both_ways=True)
        .model(layers=2, hidden=1000, seq_len=1000, vocab=10000)
        .training(8, 1, stage_overhead_ms=0.5)
        .objective(lam=0.5, t_ref_ms=10.0, e_ref_j=2.0)
        .build()
    )
    assert inst.has_link.tolist() == [[False, True], [True, False]]
    assert inst.training.stage_overhead_ms == 0.5 and inst.lam == 0.5


def test_network_shorthand_and_gpus_helper() -> None:
    b = InstanceBuilder("three")
    for site, count in zip("ABC", (2, 3, 3), strict=True):
        b.gpus(f"{site.lower()}", "A30", count, site=site)
    inst = b.network(three_site()).model("gpt3-125m").training(8, 1).build()
    assert inst.n == 8 and inst.gpu_ids[:3] == ("a0", "a1", "b0")
    assert len(inst.links) == 8 * 7  # three_site links every pair


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: InstanceBuilder().gpu("a", "NoSuchGPU"), "gpus[0] (a).type"),
        (lambda: InstanceBuilder().gpu("a", peak_tflops=1.0), "gpus[0] (a).memory_gb"),
        (lambda: InstanceBuilder().gpu("a", "A30", peak_tflops=-5), "gpus[0] (a).peak_tflops"),
        (lambda: InstanceBuilder().gpu("a", "A30", idle_w=500), "gpus[0] (a).idle_w"),
        (lambda: InstanceBuilder().link("a", "b", bandwidth_gbps=0, latency_ms=1),
         "link a->b.bandwidth_gbps"),
        (lambda: InstanceBuilder().link("a", "a", bandwidth_gbps=1, latency_ms=1),
         "link a->a.dst"),
        (lambda: InstanceBuilder().model("gpt-9"), "model.preset"),
        (lambda: InstanceBuilder().model(layers=2, hidden=8, seq_len=8), "model.vocab"),
        (lambda: InstanceBuilder().model("gpt3-125m", seq_len=1e308), "model.seq_len"),
        (lambda: InstanceBuilder().training(8, 3), "training.micro_batch_size"),
        (lambda: InstanceBuilder().training(8, 1, stage_overhead=1), "training.stage_overhead"),
        (lambda: InstanceBuilder().objective(lam=2), "objective.lambda"),
        (lambda: InstanceBuilder().build(), "gpus"),
        (lambda: InstanceBuilder().gpu("a", "A30").build(), "model"),
        (lambda: InstanceBuilder().gpu("a", "A30").model("gpt3-125m").link(
            "a", "zz", bandwidth_gbps=1, latency_ms=1).training(8, 1).build(), "link a->zz.dst"),
        (lambda: InstanceBuilder().gpu("a", "T4").gpu("a", "T4").model("gpt3-125m")
         .training(8, 1).build(), "gpus[1].id"),
        (lambda: InstanceBuilder().gpu("a", "T4").model("llama3-70b").training(8, 1).build(),
         "gpus"),  # no GPU can hold the model
    ],
)
def test_errors_name_the_field(make: object, field: str) -> None:
    with pytest.raises(InputError) as exc:
        make()  # type: ignore[operator]
    assert exc.value.field == field, exc.value


def test_unknown_training_field_hint() -> None:
    with pytest.raises(InputError, match="did you mean stage_overhead_ms"):
        InstanceBuilder().training(8, 1, stage_overhead=1)
