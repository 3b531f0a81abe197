"""Catalog lookups and the shorthand expander."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoplan.errors import InputError
from geoplan.model.catalog import (
    GPU_TYPES,
    MODEL_SHAPES,
    GPUType,
    expand_instance_dict,
    gpu_type,
    model_shape,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _shorthand() -> dict:
    return {
        "name": "shorthand",
        "gpus": [
            {"id": "a0", "type": "A30", "site": "A"},
            {"id": "b0", "type": "a100 sxm 80gb", "site": "B", "compute_util": 0.5},
            {"id": "b1", "type": "A100-PCIe-40GB", "site": "B", "idle_w": 35.0},
        ],
        "network": {
            "intra": {"latency_ms": 0.1, "bandwidth_gbps": 100},
            "inter": [
                {
                    "a": "A",
                    "b": "B",
                    "latency_ms": 10,
                    "bandwidth_gbps": 10,
                    "latency_ba_ms": 12,
                    "bandwidth_ba_gbps": 8,
                }
            ],
        },
        "model": {"preset": "gpt3-1.3b", "layers": 12},
        "training": {"batch_size": 32, "micro_batch_size": 1},
    }


# --------------------------------------------------------------------------- GPU catalog


def test_required_gpus_present() -> None:
    for name in (
        "A100-SXM-80GB",
        "A100-PCIe-40GB",
        "H100-SXM-80GB",
        "A30",
        "A40",
        "L4",
        "V100-SXM2-32GB",
        "T4",
        "MI250X",
        "MI300X",
    ):
        assert gpu_type(name).name == name


@pytest.mark.parametrize("g", list(GPU_TYPES.values()), ids=list(GPU_TYPES))
def test_gpu_figures_sane(g: GPUType) -> None:
    assert g.peak_tflops > 0 and g.memory_gb > 0 and g.tdp_w > 0
    assert g.idle_w is not None and 0 < g.idle_w < g.tdp_w
    assert g.active_w == g.tdp_w
    assert g.source.startswith("https://")


def test_datasheet_values() -> None:
    # Dense BF16/FP16 tensor TFLOPS, memory GB, TDP W (vendor datasheets).
    expected = {
        "A100-SXM-80GB": (312, 80, 400),
        "A100-PCIe-40GB": (312, 40, 250),
        "H100-SXM-80GB": (989, 80, 700),
        "A30": (165, 24, 165),
        "A40": (149.7, 48, 300),
        "L4": (121, 24, 72),
        "V100-SXM2-32GB": (125, 32, 300),
        "T4": (65, 16, 70),
        "MI250X": (383, 128, 560),
        "MI300X": (1307.4, 192, 750),
    }
    for name, (tf, mem, tdp) in expected.items():
        g = GPU_TYPES[name]
        assert (g.peak_tflops, g.memory_gb, g.tdp_w) == (tf, mem, tdp)


def test_table7_powers_and_idle_default() -> None:
    # GeoTrain 6.7: idle/active 25/165, 40/250, 60/400 W.
    assert (GPU_TYPES["A30"].idle_w, GPU_TYPES["A30"].active_w) == (25, 165)
    assert (GPU_TYPES["A100-PCIe-40GB"].idle_w, GPU_TYPES["A100-PCIe-40GB"].active_w) == (40, 250)
    assert (GPU_TYPES["A100-SXM-80GB"].idle_w, GPU_TYPES["A100-SXM-80GB"].active_w) == (60, 400)
    # Everyone else: 15 % of TDP.
    assert GPU_TYPES["L4"].idle_w == pytest.approx(10.8)
    assert GPU_TYPES["H100-SXM-80GB"].idle_w == pytest.approx(105.0)
    assert GPUType("X", 1.0, 1.0, 200.0).idle_w == pytest.approx(30.0)


def test_gpu_lookup_is_forgiving_and_unknown_names_listed() -> None:
    assert gpu_type("a100_sxm_80gb") is GPU_TYPES["A100-SXM-80GB"]
    assert gpu_type(" mi300x ") is GPU_TYPES["MI300X"]
    with pytest.raises(InputError) as exc:
        gpu_type("B200")
    assert exc.value.field == "gpu type"
    assert exc.value.value == "B200"
    assert "A100-SXM-80GB" in exc.value.message and "MI300X" in exc.value.message


# --------------------------------------------------------------------------- model catalog


def test_model_shapes() -> None:
    assert model_shape("geotrain-h2048").model_fields() == {
        "layers": 12,
        "hidden": 2048,
        "seq_len": 2048,
        "vocab": 50257,
    }
    g = model_shape("gpt3-175b")
    assert (g.layers, g.hidden, g.seq_len, g.vocab) == (96, 12288, 2048, 50257)
    assert (model_shape("gpt3-125m").layers, model_shape("gpt3-125m").hidden) == (12, 768)
    assert model_shape("GPT3-13B").hidden == 5120
    l3 = model_shape("llama3-8b")
    assert (l3.layers, l3.hidden, l3.seq_len, l3.vocab) == (32, 4096, 8192, 128256)
    l2 = model_shape("llama2-70b")
    assert (l2.layers, l2.hidden, l2.seq_len, l2.vocab) == (80, 8192, 4096, 32000)
    for m in MODEL_SHAPES.values():
        assert m.source and m.layers > 0 and m.hidden > 0


def test_unknown_model_lists_known() -> None:
    with pytest.raises(InputError) as exc:
        model_shape("gpt5")
    assert "llama3-70b" in exc.value.message and exc.value.field == "model preset"


# --------------------------------------------------------------------------- expansion


def test_expand_fills_gpus_model_and_links() -> None:
    d = _shorthand()
    before = copy.deepcopy(d)
    out = expand_instance_dict(d)
    assert d == before  # pure
    a0, b0, b1 = out["gpus"]
    assert (a0["peak_tflops"], a0["memory_gb"], a0["idle_w"], a0["active_w"]) == (165, 24, 25, 165)
    assert b0["peak_tflops"] == 312 and b0["memory_gb"] == 80 and b0["compute_util"] == 0.5
    assert b1["idle_w"] == 35.0 and b1["active_w"] == 250  # explicit key kept
    assert out["model"] == {"layers": 12, "hidden": 2048, "seq_len": 2048, "vocab": 50257}
    assert "network" not in out
    links = {(e["src"], e["dst"]): e for e in out["links"]}
    assert len(links) == 6
    assert links[("b0", "b1")]["latency_ms"] == 0.1
    assert (links[("a0", "b0")]["latency_ms"], links[("a0", "b0")]["bandwidth_gbps"]) == (10, 10)
    assert (links[("b1", "a0")]["latency_ms"], links[("b1", "a0")]["bandwidth_gbps"]) == (12, 8)


def test_explicit_links_win_over_network() -> None:
    d = _shorthand()
    d["links"] = [{"src": "a0", "dst": "b0", "bandwidth_gbps": 1.0, "latency_ms": 99.0}]
    out = expand_instance_dict(d)
    hits = [e for e in out["links"] if (e["src"], e["dst"]) == ("a0", "b0")]
    assert len(hits) == 1 and hits[0]["latency_ms"] == 99.0
    assert len(out["links"]) == 6


def test_shorthand_loads_as_instance() -> None:
    from geoplan.model.instance import Instance

    inst = Instance.from_dict(_shorthand())
    assert inst.n == 3 and inst.layers == 12 and len(inst.links) == 6


def test_unknown_type_with_missing_fields_names_the_gpu() -> None:
    d = _shorthand()
    d["gpus"][1]["type"] = "RTX-9090"
    with pytest.raises(InputError) as exc:
        expand_instance_dict(d)
    assert exc.value.field == "gpus[1].type"


def test_unknown_type_with_all_fields_is_left_alone() -> None:
    g = {
        "id": "x",
        "type": "custom",
        "peak_tflops": 10.0,
        "memory_gb": 8.0,
        "idle_w": 5.0,
        "active_w": 50.0,
    }
    out = expand_instance_dict({"gpus": [g]})
    assert out["gpus"] == [g]


def test_unknown_preset() -> None:
    d = _shorthand()
    d["model"] = {"preset": "nope"}
    with pytest.raises(InputError) as exc:
        expand_instance_dict(d)
    assert exc.value.field == "model.preset"


@pytest.mark.parametrize("name", ["three-site.json", "table7-14gpu.json", "tiny.json"])
def test_identity_on_canonical_examples(name: str) -> None:
    d = json.loads((EXAMPLES / name).read_text())
    out = expand_instance_dict(d)
    assert out == d and out is not d
    assert out["gpus"] is not d["gpus"]  # a new dict, not shared structure


@settings(max_examples=60, deadline=None)
@given(
    types=st.lists(st.sampled_from(sorted(GPU_TYPES)), min_size=1, max_size=6),
    preset=st.sampled_from(sorted(MODEL_SHAPES)),
    layers=st.none() | st.integers(1, 200),
)
def test_expansion_matches_catalog_and_is_idempotent(
    types: list[str], preset: str, layers: int | None
) -> None:
    model: dict = {"preset": preset}
    if layers is not None:
        model["layers"] = layers
    d = {
        "gpus": [{"id": f"g{k}", "type": t, "site": "S"} for k, t in enumerate(types)],
        "network": {"intra": {"latency_ms": 0.1, "bandwidth_gbps": 100}},
        "model": model,
    }
    out = expand_instance_dict(d)
    for g, t in zip(out["gpus"], types, strict=True):
        spec = GPU_TYPES[t]
        assert g["peak_tflops"] == spec.peak_tflops and g["memory_gb"] == spec.memory_gb
        assert g["idle_w"] == spec.idle_w and g["active_w"] == spec.tdp_w
    m = MODEL_SHAPES[preset]
    assert out["model"]["layers"] == (m.layers if layers is None else layers)
    assert out["model"]["hidden"] == m.hidden and "preset" not in out["model"]
    assert len(out["links"]) == len(types) * (len(types) - 1)
    assert expand_instance_dict(out) == out
