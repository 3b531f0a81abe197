"""Instance parsing, defaults, coefficients and the load-time input checks."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference_model as ref

from geoplan.errors import InputError
from geoplan.model.instance import (
    GPU,
    Instance,
    Link,
    LinkTable,
    ModelSpec,
    ObjectiveSpec,
    TrainingSpec,
    load_instance,
)

DATA = Path(__file__).resolve().parent.parent / "data"


def raw(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def test_defaults_of_formats_md() -> None:
    d = raw("hand3.json")
    inst = Instance.from_dict(d)
    b = inst.gpus[1]
    assert (b.compute_util, b.memory_util) == (1.0, 1.0)  # omitted -> 1
    assert inst.links[0].util == 1.0
    t = inst.training
    assert (t.bytes_per_value, t.activation_factor, t.backward_factor) == (2.0, 17.0, 2.0)
    del d["objective"]
    o = Instance.from_dict(d).objective
    assert (o.lam, o.t_ref_ms, o.e_ref_j) == (1.0, None, None)
    assert inst.n == 3 and inst.layers == 6 and inst.micro_batches == 8


def test_coefficients_by_hand(hand3: Instance, hand_u2: Instance) -> None:
    # See test_cost.py for the arithmetic: 1, 2, 4 ms per layer; link times in ms.
    c = hand3.coefficients()
    assert c.comp_ms == pytest.approx([1.0, 2.0, 4.0], rel=1e-12)
    expected = np.array([[np.inf, 3.0, np.inf], [2.0, np.inf, 2.0], [np.inf, 5.0, np.inf]])
    assert np.isinf(c.comm_ms).tolist() == np.isinf(expected).tolist()
    fin = np.isfinite(expected)
    assert c.comm_ms[fin] == pytest.approx(expected[fin], rel=1e-12)
    assert (c.mem_w, c.mem_a, c.mem_last) == pytest.approx((96e6, 34e6, 120e6), rel=1e-12)
    assert c.mem_cap == pytest.approx([0.9e9, 0.6e9, 1.0e9], rel=1e-12)
    assert c.micro_batches == 8
    assert c.dyn_w.tolist() == [200.0, 100.0, 80.0]
    # u=2 instance: weights 48e6, activations 8e6, last 22.4e6 bytes.
    c2 = hand_u2.coefficients()
    assert (c2.mem_w, c2.mem_a, c2.mem_last) == pytest.approx((48e6, 8e6, 22.4e6), rel=1e-12)
    assert c2.comp_ms == pytest.approx([1.0, 2.0], rel=1e-12)
    # Another micro-batch size gives other coefficients (u = 4: twice the compute).
    c4 = hand_u2.coefficients(4)
    assert c4.comp_ms == pytest.approx([2.0, 4.0], rel=1e-12)
    assert c4.micro_batches == 3
    assert c4.comm_ms[0, 1] == pytest.approx(4.5, rel=1e-12)


def test_stage_bytes_and_fits(hand3: Instance) -> None:
    c = hand3.coefficients()
    # Q = 2: 198e6 per layer; stage of 4 on a as last: 912e6 > 0.9e9; as middle: 792e6 fits.
    assert c.stage_bytes(4, 2, last=True) == pytest.approx(912e6)
    assert not c.fits(0, 4, 2, last=True)
    assert c.fits(0, 4, 2, last=False)
    # The (Q+1) factor: the same 4 layers in a 3-stage pipeline need 4 * 232e6 = 928e6.
    assert c.stage_bytes(4, 3, last=False) == pytest.approx(928e6)
    assert not c.fits(0, 4, 3, last=False)


def test_layer_caps_agree_with_fits() -> None:
    rng = random.Random(7)
    for _ in range(40):
        inst = Instance.from_dict(ref.random_instance(rng))
        c = inst.coefficients()
        for q in range(1, inst.n + 2):
            for last in (False, True):
                caps = c.layer_caps(q, last)
                for g in range(inst.n):
                    k = int(caps[g])
                    # caps is the largest count that fits: k fits (if >= 1), k + 1 does not.
                    if k >= 1:
                        assert c.fits(g, k, q, last)
                    assert not c.fits(g, k + 1, q, last)


def test_layer_caps_exact_boundary() -> None:
    # Memory exactly equal to the need of 3 middle layers of a 2-stage pipeline: cap must be 3.
    d = raw("hand3.json")
    d["gpus"][1]["memory_gb"] = 3 * 198e6 / 1e9
    c = Instance.from_dict(d).coefficients()
    assert c.layer_caps(2, last=False)[1] == 3
    assert c.fits(1, 3, 2, last=False)


def test_round_trip_and_fingerprint(hand3: Instance, tmp_path: Path) -> None:
    d = hand3.to_dict()
    again = Instance.from_dict(d)
    assert again.to_dict() == d
    assert again.fingerprint == hand3.fingerprint
    p = tmp_path / "i.json"
    hand3.to_json(p)
    assert load_instance(p).to_dict() == d
    d2 = copy.deepcopy(d)
    d2["gpus"][0]["peak_tflops"] = 169
    assert Instance.from_dict(d2).fingerprint != hand3.fingerprint


def test_subset_and_with_objective(hand3: Instance) -> None:
    sub = hand3.subset(["b", "c"])
    assert sub.gpu_ids == ("b", "c")
    assert {(e.src, e.dst) for e in sub.links} == {("b", "c"), ("c", "b")}
    mixed = hand3.with_objective(lam=0.5, t_ref_ms=100.0, e_ref_j=20.0)
    assert (mixed.lam, mixed.objective.t_ref_ms, mixed.objective.e_ref_j) == (0.5, 100.0, 20.0)
    assert hand3.lam == 1.0  # immutable: the original is unchanged
    with pytest.raises(InputError):
        hand3.with_objective(lam=1.5)


def test_links_and_views(hand3: Instance) -> None:
    assert hand3.has_link.tolist() == [[False, True, False], [True, False, True],
                                       [False, True, False]]
    assert hand3.eff_bandwidth_gbps[1, 0] == pytest.approx(16.0)
    assert hand3.index_of("c") == 2
    with pytest.raises(InputError):
        hand3.index_of("nope")
    assert hand3.eff_tflops.tolist() == pytest.approx([84.0, 42.0, 21.0])


# ----------------------------------------------------------------------------- input errors


def _mutate(path: list[Any], value: Any) -> dict[str, Any]:
    """hand3.json with the item at ``path`` set to ``value`` (a ``...`` value deletes it)."""
    d = raw("hand3.json")
    node: Any = d
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return d


BAD: list[tuple[str, list[Any], Any, str]] = [
    # (case id, path, new value or ... to delete, expected text in the field)
    ("no-gpus", ["gpus"], ..., "gpus"),
    ("empty-gpus", ["gpus"], [], "gpus"),
    ("gpus-not-list", ["gpus"], {"a": 1}, "gpus"),
    ("gpu-not-object", ["gpus", 0], "a100", "gpus[0]"),
    ("no-id", ["gpus", 0, "id"], ..., "id"),
    ("no-peak", ["gpus", 0, "peak_tflops"], ..., "peak_tflops"),
    ("no-memory", ["gpus", 1, "memory_gb"], ..., "memory_gb"),
    ("no-idle", ["gpus", 2, "idle_w"], ..., "idle_w"),
    ("no-active", ["gpus", 2, "active_w"], ..., "active_w"),
    ("zero-flops", ["gpus", 0, "peak_tflops"], 0, "peak_tflops"),
    ("neg-flops", ["gpus", 0, "peak_tflops"], -5, "peak_tflops"),
    ("str-flops", ["gpus", 0, "peak_tflops"], "fast", "peak_tflops"),
    ("bool-flops", ["gpus", 0, "peak_tflops"], True, "peak_tflops"),
    ("zero-memory", ["gpus", 1, "memory_gb"], 0, "memory_gb"),
    ("zero-active", ["gpus", 1, "active_w"], 0, "active_w"),
    ("neg-idle", ["gpus", 1, "idle_w"], -1, "idle_w"),
    ("idle-over-active", ["gpus", 1, "idle_w"], 131, "idle_w"),
    ("util-zero", ["gpus", 0, "compute_util"], 0, "compute_util"),
    ("util-over", ["gpus", 0, "compute_util"], 1.5, "compute_util"),
    ("mem-util-over", ["gpus", 0, "memory_util"], 2, "memory_util"),
    ("dup-id", ["gpus", 1, "id"], "a", "id"),
    ("link-unknown-src", ["links", 0, "src"], "zz", "src"),
    ("link-unknown-dst", ["links", 0, "dst"], "zz", "dst"),
    ("self-link", ["links", 0, "dst"], "a", "dst"),
    ("dup-link", ["links", 1], {"src": "a", "dst": "b", "bandwidth_gbps": 1, "latency_ms": 1},
     "links[1]"),
    ("zero-bandwidth", ["links", 0, "bandwidth_gbps"], 0, "bandwidth_gbps"),
    ("no-bandwidth", ["links", 0, "bandwidth_gbps"], ..., "bandwidth_gbps"),
    ("neg-latency", ["links", 0, "latency_ms"], -1, "latency_ms"),
    ("link-util-zero", ["links", 0, "util"], 0, "util"),
    ("links-not-list", ["links"], "a-b", "links"),
    ("no-model", ["model"], ..., "model"),
    ("no-hidden", ["model", "hidden"], ..., "hidden"),
    ("frac-layers", ["model", "layers"], 12.5, "layers"),
    ("str-layers", ["model", "layers"], "12", "layers"),
    ("zero-layers", ["model", "layers"], 0, "layers"),
    ("no-training", ["training"], ..., "training"),
    ("no-batch", ["training", "batch_size"], ..., "batch_size"),
    ("bool-batch", ["training", "batch_size"], True, "batch_size"),
    ("indivisible", ["training", "micro_batch_size"], 3, "micro_batch_size"),
    ("lambda-over", ["objective", "lambda"], 1.5, "lambda"),
    ("lambda-neg", ["objective", "lambda"], -0.1, "lambda"),
    ("t-ref-zero", ["objective", "t_ref_ms"], 0, "t_ref_ms"),
    ("nan-flops", ["gpus", 0, "peak_tflops"], float("nan"), "peak_tflops"),
]


@pytest.mark.parametrize(("path", "value", "field"), [c[1:] for c in BAD],
                         ids=[c[0] for c in BAD])
def test_bad_instances_raise_input_error_naming_the_field(
    path: list[Any], value: Any, field: str
) -> None:
    with pytest.raises(InputError) as exc:
        Instance.from_dict(_mutate(path, value))
    assert field in exc.value.field
    assert field in str(exc.value)


def test_instance_must_be_an_object() -> None:
    with pytest.raises(InputError) as exc:
        Instance.from_dict([1, 2])  # type: ignore[arg-type]
    assert exc.value.field == "instance"


def test_no_gpu_and_no_pipeline_can_hold_the_model() -> None:
    # hand3 with every GPU at 0.3 GB: even 6 stages of one layer (impossible: N = 3) would not
    # do; any 3-stage layout has a stage of >= 2 layers = 2 * 232e6 B = 0.464 GB > 0.3 GB.
    d = raw("hand3.json")
    for g in d["gpus"]:
        g["memory_gb"], g["memory_util"] = 0.3, 1.0
    assert not ref.memory_feasible_somewhere(d)
    with pytest.raises(InputError) as exc:
        Instance.from_dict(d)
    assert exc.value.field == "gpus"
    assert "no single GPU and no pipeline" in exc.value.message


def test_capacity_check_matches_brute_force() -> None:
    """The load-time check rejects an instance exactly when no stage layout fits memory.

    Links do not count (cost-model: solvers report link-induced infeasibility).
    """
    rng = random.Random(11)
    rejected = accepted = 0
    for _ in range(150):
        d = ref.random_instance(rng, n_gpus=rng.randint(1, 4), layers=rng.randint(1, 7))
        # Shrink every GPU's memory at random so that both outcomes occur.
        for g in d["gpus"]:
            g["memory_gb"] *= rng.uniform(0.05, 1.0)
        expect = ref.memory_feasible_somewhere(d)
        try:
            Instance.from_dict(d)
        except InputError as exc:
            assert exc.field == "gpus"
            assert not expect, "rejected although some layout fits"
            rejected += 1
        else:
            assert expect, "accepted although no layout fits memory"
            accepted += 1
    assert rejected > 10 and accepted > 10  # both branches were exercised


def test_catalog_type_fills_missing_fields_but_explicit_fields_win() -> None:
    d = raw("hand3.json")
    d["gpus"][2] = {"id": "c", "type": "A100-SXM-80GB", "peak_tflops": 42,
                    "compute_util": 0.5}
    inst = Instance.from_dict(d)
    assert inst.gpus[2].peak_tflops == 42.0  # explicit value kept
    assert inst.gpus[2].memory_gb > 0 and inst.gpus[2].active_w > 0  # filled from the catalog


# ----------------------------------------------------------------------------- built from Python


def _records(**training: Any) -> dict[str, Any]:
    """hand3 as records, for building an Instance with its constructor."""
    inst = Instance.from_dict(raw("hand3.json"))
    return {"name": "py", "gpus": inst.gpus, "links": tuple(inst.links), "model": inst.model,
            "training": TrainingSpec(**{"batch_size": 8, "micro_batch_size": 1, **training})}


def test_constructor_accepts_records_and_stores_links_as_columns() -> None:
    inst = Instance(**_records())
    assert isinstance(inst.links, LinkTable) and len(inst.links) == 4
    assert inst.links[1] == Link("b", "a", 32.0, 1.0, 0.5)
    assert inst.links[-1].src == "c" and [e.dst for e in inst.links[1:3]] == ["a", "c"]
    assert inst.to_dict()["links"] == Instance.from_dict(raw("hand3.json")).to_dict()["links"]


@pytest.mark.parametrize(
    ("build", "field"),
    [
        # issue 8: each of these once reached evaluate() and gave T_iter = -18 ms
        (lambda: GPU("a3", peak_tflops=-5, memory_gb=1, idle_w=1, active_w=2), "peak_tflops"),
        (lambda: GPU("a3", peak_tflops=5, memory_gb=1, idle_w=300, active_w=200), "idle_w"),
        (lambda: TrainingSpec(batch_size=8, micro_batch_size=3), "micro_batch_size"),
        (lambda: GPU("a3", peak_tflops=5, memory_gb=1, idle_w=1, active_w=2,
                     compute_util=0), "compute_util"),
        (lambda: GPU("", peak_tflops=5, memory_gb=1, idle_w=1, active_w=2), "id"),
        (lambda: Link("a", "a", 1.0, 1.0), "dst"),
        (lambda: Link("a", "b", float("inf"), 1.0), "bandwidth_gbps"),
        (lambda: Link("a", "b", 1.0, -1.0), "latency_ms"),
        (lambda: ModelSpec(layers=12.5, hidden=8, seq_len=8, vocab=8), "layers"),  # type: ignore[arg-type]
        (lambda: ModelSpec(layers=True, hidden=8, seq_len=8, vocab=8), "layers"),
        (lambda: ObjectiveSpec(lam=1.5), "lambda"),
        (lambda: ObjectiveSpec(t_ref_ms=0.0), "t_ref_ms"),
        (lambda: TrainingSpec(batch_size=8, micro_batch_size=1, stage_overhead_ms=-1),
         "stage_overhead_ms"),
    ],
    ids=["neg-flops", "idle-over-active", "indivisible", "util-0", "empty-id", "self-link",
         "inf-bandwidth", "neg-latency", "frac-layers", "bool-layers", "lambda", "t-ref",
         "overhead"],
)
def test_records_check_themselves(build: Any, field: str) -> None:
    with pytest.raises(InputError) as exc:
        build()
    assert exc.value.field == field


def test_records_normalise_numbers() -> None:
    g = GPU("a", peak_tflops=312, memory_gb=80, idle_w=60, active_w=400)
    assert isinstance(g.peak_tflops, float) and g.peak_tflops == 312.0
    m = ModelSpec(layers=12.0, hidden=8, seq_len=8, vocab=8)  # type: ignore[arg-type]
    assert isinstance(m.layers, int) and m.layers == 12


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: {**r, "gpus": (*r["gpus"], r["gpus"][0])}, "gpus[3].id"),
        (lambda r: {**r, "gpus": ()}, "gpus"),
        (lambda r: {**r, "links": (*r["links"], Link("a", "zz", 1.0, 1.0))}, "links[4].dst"),
        (lambda r: {**r, "links": (*r["links"], r["links"][0])}, "links[4]"),
        (lambda r: {**r, "links": "a->b"}, "links"),
        (lambda r: {**r, "model": {"layers": 6}}, "model"),
        (lambda r: {**r, "gpus": tuple(GPU(g.id, g.peak_tflops, 0.01, g.idle_w, g.active_w)
                                       for g in r["gpus"])}, "gpus"),  # capacity check
    ],
    ids=["dup-id", "no-gpus", "unknown-link-gpu", "dup-link", "links-str", "model-dict",
         "capacity"],
)
def test_constructor_checks_the_whole_instance(change: Any, field: str) -> None:
    with pytest.raises(InputError) as exc:
        Instance(**change(_records()))
    assert exc.value.field == field


def test_subset_keeps_columns_and_rechecks() -> None:
    inst = Instance.from_dict(raw("hand3.json"))
    sub = inst.subset(["c", "b"])  # instance order is kept
    assert sub.gpu_ids == ("b", "c")
    assert sub.link_table.src.tolist() == [0, 1] and sub.link_table.dst.tolist() == [1, 0]
    assert sub.eff_bandwidth_gbps.tolist() == [[0.0, 8.0], [16.0, 0.0]]
    assert np.isnan(sub.latency_ms[0, 0]) and sub.latency_ms[1, 0] == 4.0


def test_instances_pickle_and_copy_with_their_link_columns() -> None:
    import pickle

    inst = Instance.from_dict(raw("hand3.json"))
    for other in (pickle.loads(pickle.dumps(inst)), copy.deepcopy(inst)):
        assert other.to_dict() == inst.to_dict()
        assert other.has_link.tolist() == inst.has_link.tolist()


def test_fingerprint_is_the_hash_of_the_canonical_json() -> None:
    import hashlib

    def direct(inst: Instance) -> str:
        return hashlib.sha256(json.dumps(inst.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    rng = random.Random(3)
    for k in range(30):
        d = ref.random_instance(rng)
        if k % 3 == 0:  # ids that JSON must escape
            new = {g["id"]: f'g"{j}\\é' for j, g in enumerate(d["gpus"])}
            for g in d["gpus"]:
                g["id"] = new[g["id"]]
            for e in d["links"]:
                e["src"], e["dst"] = new[e["src"]], new[e["dst"]]
        if k % 4 == 0:
            d["links"] = []
        inst = Instance.from_dict(d)
        assert inst.fingerprint == direct(inst)
