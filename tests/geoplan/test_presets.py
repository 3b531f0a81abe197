"""Real-workload presets (geoplan.model.presets, docs/presets.md)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from geoplan.cli import main
from geoplan.cost import kernel
from geoplan.errors import InputError
from geoplan.model.catalog import MODEL_SHAPES
from geoplan.model.instance import Instance
from geoplan.model.network import AWS_REGIONS
from geoplan.model.presets import (
    AWS_REGION_NAMES,
    CLUSTER_PRESETS,
    cluster_preset,
    gpu_memory_gb,
    memory_cases,
    memory_table_markdown,
    node_of,
    one_gpu_stage_floor_gb,
    preset_instance,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "presets.md"
LLAMAS = ("llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b")


@pytest.fixture(scope="module", params=list(CLUSTER_PRESETS))
def built(request: pytest.FixtureRequest) -> tuple[str, dict, Instance]:
    d = preset_instance(request.param, "llama2-70b")
    return request.param, d, Instance.from_dict(d)


@pytest.mark.parametrize("cluster", list(CLUSTER_PRESETS))
@pytest.mark.parametrize("model", LLAMAS)
def test_every_preset_builds_and_loads(cluster: str, model: str) -> None:
    d = preset_instance(cluster, model, batch_size=32, micro_batch_size=2, lam=0.5)
    inst = Instance.from_dict(d)
    c = CLUSTER_PRESETS[cluster]
    assert inst.n == c.n_gpus == len({g["id"] for g in d["gpus"]})
    assert inst.model.layers == MODEL_SHAPES[model].layers
    assert inst.model.seq_len == MODEL_SHAPES[model].seq_len
    t = inst.training
    assert (t.batch_size, t.micro_batch_size, t.bytes_per_value) == (32, 2, 2)
    assert t.zero_choices == (0, 1, 2) and t.max_tp == 8
    assert t.recompute_choices == ("none", "full")
    assert t.micro_batch_choices is not None and 2 in t.micro_batch_choices
    assert all(32 % u == 0 for u in t.micro_batch_choices)
    assert inst.objective.lam == 0.5
    # Canonical: the loaded instance writes the same GPUs back.
    assert [g.to_dict() for g in inst.gpus] == [
        {k: g[k] for k in ("id", "type", "site", "peak_tflops", "compute_util", "memory_gb",
                           "memory_util", "idle_w", "active_w")}
        for g in d["gpus"]
    ]


def test_training_overrides_and_bad_values() -> None:
    d = preset_instance("small-3r", "llama2-7b", zero=1, max_tp=4, recompute_choices=["none"])
    t = Instance.from_dict(d).training
    assert (t.zero, t.max_tp, t.recompute_choices) == (1, 4, ("none",))
    with pytest.raises(InputError, match="must divide"):
        preset_instance("small-3r", "llama2-7b", batch_size=6, micro_batch_size=4)
    with pytest.raises(InputError, match="known: a100-40-3r"):
        preset_instance("nope", "llama2-7b")
    with pytest.raises(InputError, match=r"known: .*llama2-70b"):
        preset_instance("small-3r", "llama9")


def test_sizes_and_names() -> None:
    sizes = {name: c.n_gpus for name, c in CLUSTER_PRESETS.items()}
    assert min(sizes.values()) <= 32
    a100 = CLUSTER_PRESETS["a100-40-3r"]
    assert 2 <= len(a100.regions) <= 4 and a100.gpu_types == ("A100-SXM-40GB",)
    mixed = CLUSTER_PRESETS["mixed-4r"]
    assert len(mixed.regions) == 4
    assert set(mixed.gpu_types) == {"A100-SXM-80GB", "H100-SXM-80GB", "L4"}
    assert set(CLUSTER_PRESETS["mi300x-h100"].gpu_types) == {"MI300X", "H100-SXM-80GB"}
    assert set(AWS_REGION_NAMES.values()) == set(AWS_REGIONS)
    assert cluster_preset(" Small-3R ") is CLUSTER_PRESETS["small-3r"]
    for c in CLUSTER_PRESETS.values():
        assert c.sources and all(c.sources)


def test_nodes_are_homogeneous(built: tuple[str, dict, Instance]) -> None:
    _, d, _inst = built
    by_node: dict[str, list[dict]] = defaultdict(list)
    for g in d["gpus"]:
        by_node[node_of(g["id"])].append(g)
        assert g["site"] == g["id"].split("/")[0]
    for node, gpus in by_node.items():
        assert len(gpus) == 8, node
        fields = [{k: v for k, v in g.items() if k != "id"} for g in gpus]
        assert all(f == fields[0] for f in fields), node


def test_links_both_directions_and_ordered(built: tuple[str, dict, Instance]) -> None:
    inst = built[2]
    n = inst.n
    assert inst.has_link.sum() == n * (n - 1)  # every ordered pair of distinct GPUs
    assert np.array_equal(inst.has_link, inst.has_link.T)
    ids = [g.id for g in inst.gpus]
    node = np.array([node_of(i) for i in ids])
    site = np.array([g.site for g in inst.gpus])
    same_node = node[:, None] == node[None, :]
    same_site = site[:, None] == site[None, :]
    off = ~np.eye(n, dtype=bool)
    bw, lat = inst.eff_bandwidth_gbps, inst.latency_ms
    in_node, in_region, across = off & same_node, same_site & ~same_node, ~same_site
    # From every GPU: each in-node link beats each in-region link, which beats each
    # inter-region link (across GPUs an L4 node's PCIe is slower than H100s' network).
    assert in_region.any()  # every preset has a region with two nodes or more
    inf = np.inf
    for rank in (bw, -lat):  # higher is better
        node_worst = np.where(in_node, rank, inf).min(axis=1)
        region_best = np.where(in_region, rank, -inf).max(axis=1)
        region_worst = np.where(in_region | in_node, rank, inf).min(axis=1)
        wan_best = np.where(across, rank, -inf).max(axis=1)
        assert np.all(node_worst > region_best)
        assert np.all(region_worst > wan_best)
    assert lat[in_node].max() < 0.01  # under 10 us
    assert 0.01 <= lat[in_region].min() and lat[in_region].max() <= 0.05


def test_inter_region_links_are_dtfm() -> None:
    d = preset_instance("mixed-4r", "llama2-7b")
    link = {(e["src"], e["dst"]): e for e in d["links"]}
    e = link[("us-east-1/n0/g0", "ap-northeast-1/n0/g5")]
    assert (e["latency_ms"], e["bandwidth_gbps"]) == (143, 0.524)  # Virginia-Tokyo in DT-FM
    # Two node products in one region: the slower NIC (g6: 12.5 Gbps per GPU).
    e = link[("eu-west-1/n0/g0", "eu-west-1/n1/g0")]
    assert e["bandwidth_gbps"] == 12.5


def test_node_of() -> None:
    assert node_of("us-east-1/n0/g3") == "us-east-1/n0"
    assert node_of("eu-west-1/n12/g7") == "eu-west-1/n12"
    for bad in ("a-n0-g1", "us-east-1/n0", "us-east-1/x/g1", "/n0/g1"):
        with pytest.raises(InputError):
            node_of(bad)


def test_llama2_70b_needs_more_than_one_gpu_stages_on_a100_40() -> None:
    shape = MODEL_SHAPES["llama2-70b"]
    assert (shape.layers, shape.hidden) == (80, 8192)
    c = CLUSTER_PRESETS["a100-40-3r"]
    cap = 40.0 * c.groups[0].node.memory_util
    q, floor = one_gpu_stage_floor_gb(shape)
    assert q == 80 and floor > cap
    # By hand, cost-model.md: 80 one-layer stages, u = 1, kappa 2, alpha 17.
    P_l, T, H = 12 * 8192**2, 4096, 8192
    assert floor == pytest.approx((4 * P_l * 2 + 81 * 17 * 2 * T * H) / 1e9)
    # Every stage count, every stage of ceil(L / Q) layers or more: over capacity.
    for k in range(1, 81):
        need = math.ceil(80 / k) * (4 * P_l * 2 + (k + 1) * 17 * 2 * T * H) / 1e9
        assert need > cap
    # The project's own necessary condition agrees (96 A100 40 GB, one GPU per stage).
    from geoplan.cost.coefficients import memory_admits_pipeline

    caps = np.full(c.n_gpus, cap * 1e9)
    mem_last = 4.0 * 32000 * 8192 * 2 + 2.0 * 2 * T * 32000
    assert not memory_admits_pipeline(caps, 4.0 * P_l * 2, 17.0 * 2 * T * H, mem_last, 80)
    # TP 8 inside a node fits, with or without ZeRO; ZeRO 2 makes 2 stages fit.
    rows = {case.label: (gb, fits) for case, gb, _cap, fits in memory_cases()}
    assert not rows["one GPU per stage, 80 x 1 layer (GeoTrain)"][1]
    assert rows["TP 8, 4 stages x 20 layers"][1]
    assert not rows["TP 8, 2 stages x 40 layers"][1]
    assert rows["TP 8, 2 stages x 40 layers, 4 replicas, ZeRO 2"][1]
    # That ZeRO 2 row by hand (hybrid-model.md): sigma = 1 + 3/4, activations / 8.
    sigma = 1 + 3 / 4
    hand = (40 * P_l * 2 * sigma / 8 + 3 * 40 * 17 * 2 * T * H / 8
            + 32000 * H * 2 * sigma / 8 + 2 * 2 * T * 32000 / 8) / 1e9
    assert rows["TP 8, 2 stages x 40 layers, 4 replicas, ZeRO 2"][0] == pytest.approx(hand)


def test_memory_table_agrees_with_the_hybrid_evaluator() -> None:
    """Each layout of the docs table, placed node by node, is feasible iff it fits."""
    from geoplan.cost.hybrid_evaluate import evaluate_hybrid
    from geoplan.model.hybrid import HybridPlan

    inst = Instance.from_dict(preset_instance("a100-40-3r", "llama2-70b"))
    for case, _gb, _cap, fits in memory_cases():
        ids = iter(g.id for g in inst.gpus)
        u = case.replicas  # one sample per replica
        stages = [
            {"layers": 80 // case.stages, "tp": case.tp, "recompute": case.recompute,
             "replicas": [{"gpus": [next(ids) for _ in range(case.tp)], "samples": 1}
                          for _ in range(case.replicas)]}
            for _ in range(case.stages)
        ]
        plan = HybridPlan.from_dict({"stages": stages, "micro_batch_size": u,
                                     "zero": case.zero})
        ev = evaluate_hybrid(inst, plan)
        assert ev.feasible == fits, (case.label, [v.message for v in ev.violations][:2])
        assert all("GB" in v.message for v in ev.violations)  # memory is the only reason


def test_gpu_memory_reduces_to_the_geotrain_kernel() -> None:
    shape = MODEL_SHAPES["llama2-13b"]
    kappa, T, H, V = 2.0, shape.seq_len, shape.hidden, shape.vocab
    mem_w, mem_a = 4 * 12 * H * H * kappa, 17 * kappa * 2 * T * H
    mem_last = 4 * V * H * kappa + 2 * kappa * 2 * T * V
    for n, q, last in ((3, 5, False), (1, 40, True), (10, 4, True)):
        want = kernel.stage_bytes(n, kernel.per_layer_bytes(mem_w, mem_a, q), last, mem_last)
        got = gpu_memory_gb(shape, layers=n, stages=q, samples=2, last=last)
        assert got == pytest.approx(want / 1e9, rel=1e-12)


def test_docs_hold_the_computed_memory_table() -> None:
    assert memory_table_markdown() in DOCS.read_text()


def test_cli_list_build_and_bad_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preset", "--list"]) == 0
    out = capsys.readouterr().out
    for name, c in CLUSTER_PRESETS.items():
        line = next(ln for ln in out.splitlines() if ln.startswith(name))
        assert str(c.n_gpus) in line.split() and c.gpu_types[0] in line
    path = tmp_path / "i.json"
    assert main(["preset", "small-3r", "--model", "llama2-7b", "--batch-size", "16",
                 "--micro-batch-size", "2", "--lambda", "0.25", "--out", str(path)]) == 0
    data = json.loads(path.read_text())
    assert data == preset_instance("small-3r", "llama2-7b", batch_size=16, micro_batch_size=2,
                                   lam=0.25)
    assert main(["preset", "small-3r", "--model", "llama2-7b"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "small-3r-llama2-7b-b64-u1"
    assert main(["preset", "nope", "--model", "llama2-7b"]) == 2
    assert "known: a100-40-3r, mixed-4r" in capsys.readouterr().err
    assert main(["preset", "small-3r", "--model", "llama9"]) == 2
    assert "llama2-70b" in capsys.readouterr().err
    assert main(["preset", "small-3r"]) == 2
    assert "--model" in capsys.readouterr().err
    assert main(["preset"]) == 2
    assert "--list" in capsys.readouterr().err
