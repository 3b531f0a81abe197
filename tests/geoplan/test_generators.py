"""Seeded instance generators: determinism, ranges, validity and the shipped examples."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geoplan.errors import InputError
from geoplan.model import generators as gen
from geoplan.model.catalog import GPU_TYPES
from geoplan.model.instance import Instance

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

GPU_KEYS = (
    "id",
    "type",
    "site",
    "peak_tflops",
    "compute_util",
    "memory_gb",
    "memory_util",
    "idle_w",
    "active_w",
)
LINK_KEYS = ("src", "dst", "bandwidth_gbps", "util", "latency_ms")


def _within(x: float, r: tuple[float, float]) -> bool:
    return r[0] - 1e-9 <= x <= r[1] + 1e-9


def check_canonical(d: dict[str, Any]) -> None:
    """Structural invariants every generated instance satisfies."""
    assert set(d) == {"name", "gpus", "links", "model", "training", "objective"}
    ids = [g["id"] for g in d["gpus"]]
    assert len(ids) == len(set(ids))
    for g in d["gpus"]:
        assert tuple(g) == GPU_KEYS
        assert g["type"] in GPU_TYPES
        assert 0 < g["compute_util"] <= 1 and 0 < g["memory_util"] <= 1
        assert 0 <= g["idle_w"] <= g["active_w"]
    known = set(ids)
    pairs = set()
    for e in d["links"]:
        assert tuple(e) == LINK_KEYS
        assert e["src"] in known and e["dst"] in known and e["src"] != e["dst"]
        assert e["bandwidth_gbps"] > 0 and e["latency_ms"] >= 0 and e["util"] == 1.0
        pairs.add((e["src"], e["dst"]))
    assert len(pairs) == len(d["links"])
    assert set(d["model"]) == {"layers", "hidden", "seq_len", "vocab"}
    t = d["training"]
    assert set(t) == {
        "batch_size",
        "micro_batch_size",
        "bytes_per_value",
        "activation_factor",
        "backward_factor",
    }
    assert t["batch_size"] % t["micro_batch_size"] == 0
    assert set(d["objective"]) == {"lambda", "t_ref_ms", "e_ref_j"}
    assert gen.memory_feasible(d["gpus"], d["model"], t)
    json.dumps(d)  # plain JSON types only


def check_family_ranges(d: dict[str, Any], family: str) -> None:
    r = gen.FAMILY_RANGES[family]
    site = {g["id"]: g["site"] for g in d["gpus"]}
    for g in d["gpus"]:
        assert _within(g["compute_util"], r.compute_util)
        assert _within(g["memory_util"], r.memory_util)
    n = len(d["gpus"])
    assert len(d["links"]) == n * (n - 1)  # every pair linked, both directions
    for e in d["links"]:
        if family == "cloud" and gen.cloud_node_of(e["src"]) == gen.cloud_node_of(e["dst"]):
            assert r.node_latency_ms is not None and r.node_bandwidth_gbps is not None
            assert _within(e["latency_ms"], r.node_latency_ms)
            assert _within(e["bandwidth_gbps"], r.node_bandwidth_gbps)
        elif site[e["src"]] == site[e["dst"]]:
            assert _within(e["latency_ms"], r.intra_latency_ms)
            assert _within(e["bandwidth_gbps"], r.intra_bandwidth_gbps)
        else:
            assert _within(e["latency_ms"], r.inter_latency_ms)
            assert _within(e["bandwidth_gbps"], r.inter_bandwidth_gbps)


# --------------------------------------------------------------------------- families


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(gen.FAMILIES),
    n=st.integers(1, 40),
    layers=st.integers(8, 96),
    seed=st.integers(0, 2**32 - 1),
)
def test_family_invariants(family: str, n: int, layers: int, seed: int) -> None:
    d = gen.by_family(family, n, layers, seed)
    check_canonical(d)
    check_family_ranges(d, family)
    assert d["name"] == f"{family}-n{n}-l{layers}-s{seed}"
    assert len(d["gpus"]) == n and d["model"]["layers"] == layers
    assert d["model"] == {"layers": layers, "hidden": 2048, "seq_len": 2048, "vocab": 50257}
    assert (d["training"]["batch_size"], d["training"]["micro_batch_size"]) == (32, 1)
    sites = {g["site"] for g in d["gpus"]}
    if family in ("geo", "metro") and n >= 3:
        assert len(sites) >= 3
    if family == "cloud":
        nodes = -(-n // gen.CLOUD_NODE_SIZE)
        assert min(nodes, gen.CLOUD_REGIONS[0]) <= len(sites) <= min(nodes, gen.CLOUD_REGIONS[1])
        assert len({g["type"] for g in d["gpus"]}) <= gen.CLOUD_TYPES[1]
        check_cloud_nodes(d)


def check_cloud_nodes(d: dict[str, Any]) -> None:
    """A cloud node's GPUs agree on every GPU field but the id, and on every link row."""
    by_node: dict[int, list[dict[str, Any]]] = {}
    for g in d["gpus"]:
        by_node.setdefault(gen.cloud_node_of(g["id"]), []).append(g)
    for members in by_node.values():
        fields = {tuple((k, v) for k, v in g.items() if k != "id") for g in members}
        assert len(fields) == 1
    # (src node, dst node, same GPU?) -> the one (latency, bandwidth) of all such links
    seen: dict[tuple[int, int], set[tuple[float, float]]] = {}
    for e in d["links"]:
        key = (gen.cloud_node_of(e["src"]), gen.cloud_node_of(e["dst"]))
        seen.setdefault(key, set()).add((e["latency_ms"], e["bandwidth_gbps"]))
    assert all(len(v) == 1 for v in seen.values())


@pytest.mark.parametrize("family", gen.FAMILIES)
def test_deterministic(family: str) -> None:
    a = gen.by_family(family, 24, 32, seed=7)
    b = gen.by_family(family, 24, 32, seed=7)
    assert a == b
    assert json.dumps(a) == json.dumps(b)
    assert gen.by_family(family, 24, 32, seed=8) != a


def test_paper_setups_deterministic() -> None:
    assert gen.table7(seed=3) == gen.table7(seed=3)
    assert gen.table7(seed=3) != gen.table7(seed=4)
    assert gen.three_site_instance(10, 10, seed=2) == gen.three_site_instance(10, 10, seed=2)


@pytest.mark.parametrize("family", gen.FAMILIES)
def test_n128_is_fast(family: str) -> None:
    gen.by_family(family, 8, 8, seed=0)  # warm up imports
    start = time.perf_counter()
    d = gen.by_family(family, 128, 96, seed=1)
    assert time.perf_counter() - start < 1.0
    assert len(d["links"]) == 128 * 127


@pytest.mark.parametrize("family", ["geo", "metro", "cloud"])
def test_cross_site_directions_asymmetric(family: str) -> None:
    d = gen.by_family(family, 16, 12, seed=5, **({"node_size": 2} if family == "cloud" else {}))
    site = {g["id"]: g["site"] for g in d["gpus"]}
    links = {(e["src"], e["dst"]): e for e in d["links"]}
    cross = [(s, t) for (s, t) in links if site[s] != site[t]]
    assert cross
    differs = [
        p
        for p in cross
        if links[p]["latency_ms"] != links[p[::-1]]["latency_ms"]
        or links[p]["bandwidth_gbps"] != links[p[::-1]]["bandwidth_gbps"]
    ]
    assert len(differs) == len(cross)


def test_options_respected() -> None:
    d = gen.geo(
        12, 16, seed=1, hidden=1024, seq_len=1024, batch_size=64, micro_batch_size=4, lam=0.3
    )
    check_canonical(d)
    assert d["model"]["hidden"] == 1024 and d["training"]["micro_batch_size"] == 4
    assert d["objective"]["lambda"] == 0.3
    d = gen.paper_mix(20, 12, seed=2, mix=gen.PAPER_MIX_WITH_FRIENDS, n_sites=5, name="x")
    assert d["name"] == "x" and len({g["site"] for g in d["gpus"]}) == 5
    assert {g["type"] for g in d["gpus"]} <= set(gen.PAPER_MIX_WITH_FRIENDS)
    d = gen.paper_mix(30, 12, seed=2)
    assert {g["type"] for g in d["gpus"]} <= set(gen.PAPER_MIX)


def test_upgrade_makes_the_model_fit() -> None:
    # Two A30s (20-23 GB usable) hold about 2 x 24 layers of H=2048 in a 2-stage pipeline
    # (0.83 GB a layer), short of 96; one 80 GB GPU (86 layers) is enough.
    two_a30 = gen.paper_mix(2, 40, seed=0, mix={"A30": 1.0, "A100-SXM-80GB": 0.0})
    assert [g["type"] for g in two_a30["gpus"]] == ["A30", "A30"]
    d = gen.paper_mix(2, 96, seed=0, mix={"A30": 1.0, "A100-SXM-80GB": 0.0})
    assert sorted(g["type"] for g in d["gpus"]) == ["A100-SXM-80GB", "A30"]
    check_canonical(d)
    with pytest.raises(InputError) as exc:
        gen.paper_mix(1, 96, seed=0, mix={"A30": 1.0})
    assert exc.value.field == "layers"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: gen.by_family("lan", 4, 8, seed=0), "family"),
        (lambda: gen.geo(0, 8, seed=0), "n"),
        (lambda: gen.geo(4, 8, seed=0, n_sites=5), "n_sites"),
        (lambda: gen.geo(4, 8, seed=0, batch_size=30, micro_batch_size=4), "micro_batch_size"),
        (lambda: gen.geo(4, 0, seed=0), "layers"),
        (lambda: gen.geo(4, 8, seed=0, mix={"B300": 1.0}), "mix"),
        (lambda: gen.geo(4, 8, seed=0, lam=1.5), "lambda"),
        (lambda: gen.geo(4, 8, seed=-1), "seed"),
        (lambda: gen.table7(seed=1.5), "seed"),  # type: ignore[arg-type]
        (lambda: gen.cloud(8, 8, seed=0, node_size=0), "node_size"),
        (lambda: gen.cloud(17, 8, seed=0, n_sites=4), "n_sites"),  # 3 nodes
        (lambda: gen.cloud(0, 8, seed=0), "n"),
        (lambda: gen.cloud(8, 8, seed=0, mix={"B300": 1.0}), "mix"),
        (lambda: gen.cloud(1, 200, seed=0), "layers"),
    ],
)
def test_bad_arguments(call: Any, field: str) -> None:
    with pytest.raises(InputError) as exc:
        call()
    assert exc.value.field == field


def test_unknown_family_named() -> None:
    with pytest.raises(InputError) as exc:
        gen.by_family("lan", 4, 8, seed=0)
    assert exc.value.value == "lan" and "paper" in exc.value.message


@pytest.mark.parametrize("family", gen.FAMILIES)
@pytest.mark.parametrize(("n", "layers"), [(2, 8), (8, 12), (33, 48), (128, 96)])
def test_loads_as_instance(family: str, n: int, layers: int) -> None:
    inst = Instance.from_dict(gen.by_family(family, n, layers, seed=11))
    assert inst.n == n and inst.layers == layers


# --------------------------------------------------------------------------- cloud


def test_cloud_nodes_and_partial_node() -> None:
    d = gen.cloud(21, 16, seed=4)
    check_canonical(d)
    check_family_ranges(d, "cloud")
    check_cloud_nodes(d)
    sizes = Counter(gen.cloud_node_of(g["id"]) for g in d["gpus"])
    assert sizes == {0: 8, 1: 8, 2: 5}  # the last node is partial
    assert d["gpus"][-1]["id"] == "c-n2-g4"  # 3 nodes: 3 regions, the partial one last
    d = gen.cloud(14, 12, seed=4, node_size=4, n_sites=2)
    sizes = Counter(gen.cloud_node_of(g["id"]) for g in d["gpus"])
    assert sizes == {0: 4, 1: 4, 2: 4, 3: 2}
    assert [g["site"] for g in d["gpus"]] == ["A"] * 8 + ["B"] * 6
    check_cloud_nodes(d)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(8, 12))
def test_cloud_regions_and_types(seed: int, nodes: int) -> None:
    d = gen.cloud(2 * nodes, 8, seed=seed, node_size=2)
    sites = {g["site"] for g in d["gpus"]}
    assert gen.CLOUD_REGIONS[0] <= len(sites) <= gen.CLOUD_REGIONS[1]
    types = {g["type"] for g in d["gpus"]}
    assert 1 <= len(types) <= gen.CLOUD_TYPES[1]
    check_cloud_nodes(d)


def test_cloud_options_and_node_upgrade() -> None:
    a = gen.cloud(24, 8, seed=3, node_size=4, lam=0.5, name="pool")
    assert a == gen.cloud(24, 8, seed=3, node_size=4, lam=0.5, name="pool")
    assert a != gen.cloud(24, 8, seed=3, node_size=8, lam=0.5, name="pool")
    assert a["name"] == "pool" and a["objective"]["lambda"] == 0.5
    # Four T4s (13.6-15.2 GB usable each) hold 40 layers, not 64: one whole node turns A100.
    mix = {"T4": 1.0, "A100-SXM-80GB": 0.0}
    assert {g["type"] for g in gen.cloud(4, 40, seed=1, node_size=2, mix=mix)["gpus"]} == {"T4"}
    d = gen.cloud(4, 64, seed=1, node_size=2, mix=mix)
    check_canonical(d)
    check_cloud_nodes(d)
    assert [g["type"] for g in d["gpus"]] == ["T4", "T4", "A100-SXM-80GB", "A100-SXM-80GB"]


@pytest.mark.parametrize(("n", "node_size", "lam"), [(20, 8, 1.0), (14, 4, 0.5), (9, 3, 0.0)])
def test_cloud_nodes_are_dominance_classes(n: int, node_size: int, lam: float) -> None:
    """Each node is one class of interchangeable GPUs for geoplan.cost.dominance."""
    from geoplan.cost.dominance import dominance_of

    d = gen.cloud(n, 12, seed=2, node_size=node_size, lam=lam)
    inst = Instance.from_dict(d)
    rule = dominance_of(inst.coefficients(), inst.layers, energy=lam < 1.0)
    cls = rule.classes().tolist()
    node = [gen.cloud_node_of(g) for g in inst.gpu_ids]
    # same node <=> same class (GPUs of different nodes differ in their intra-node links)
    assert all((cls[i] == cls[j]) == (node[i] == node[j]) for i in range(n) for j in range(n))
    ident = {(min(p), max(p)) for p in rule.identical}
    assert all((i, j) in ident for i in range(n) for j in range(i + 1, n) if node[i] == node[j])


# --------------------------------------------------------------------------- paper setups


def test_table7() -> None:
    d = gen.table7()
    check_canonical(d)
    assert len(d["gpus"]) == 14
    assert Counter(g["type"] for g in d["gpus"]) == gen.TABLE7_COUNTS
    powers = {(g["type"], g["idle_w"], g["active_w"]) for g in d["gpus"]}
    assert powers == {
        ("A30", 25, 165),
        ("A100-PCIe-40GB", 40, 250),
        ("A100-SXM-80GB", 60, 400),
    }
    assert d["model"] == {"layers": 12, "hidden": 2048, "seq_len": 2048, "vocab": 50257}
    assert d["objective"] == {"lambda": 0.5, "t_ref_ms": None, "e_ref_j": None}
    assert len(d["links"]) == 14 * 13
    assert gen.table7(lam=0.0)["objective"]["lambda"] == 0.0
    Instance.from_dict(d)


@pytest.mark.parametrize(("lat", "bw"), [(0.1, 10.0), (10.0, 10.0), (100.0, 0.5)])
def test_three_site_instance(lat: float, bw: float) -> None:
    d = gen.three_site_instance(lat, bw, seed=1)
    check_canonical(d)
    assert [g["site"] for g in d["gpus"]] == list("AABBBCCC")
    eff = {
        s: [g["peak_tflops"] * g["compute_util"] for g in d["gpus"] if g["site"] == s]
        for s in "ABC"
    }
    assert max(eff["A"]) < min(eff["B"] + eff["C"])  # site A is the weakest
    links = {(e["src"], e["dst"]): e for e in d["links"]}
    assert len(links) == 8 * 7
    assert links[("a0", "b0")]["latency_ms"] == pytest.approx(lat)
    assert links[("b0", "c0")]["bandwidth_gbps"] == pytest.approx(1.2 * bw)
    assert links[("c0", "a0")]["latency_ms"] == pytest.approx(1.5 * lat * 1.1)
    assert links[("b0", "b1")]["latency_ms"] == 0.1
    Instance.from_dict(d)


# --------------------------------------------------------------------------- memory check


@settings(max_examples=150, deadline=None)
@given(
    mems=st.lists(st.sampled_from([8.0, 16.0, 24.0, 40.0, 80.0]), min_size=1, max_size=7),
    layers=st.integers(1, 64),
    hidden=st.sampled_from([1024, 2048, 4096]),
    u=st.sampled_from([1, 2, 4]),
)
def test_memory_feasible_agrees_with_instance(
    mems: list[float], layers: int, hidden: int, u: int
) -> None:
    gpus = [
        {
            "id": f"g{k}",
            "peak_tflops": 100.0,
            "memory_gb": m,
            "memory_util": 0.9,
            "idle_w": 10.0,
            "active_w": 100.0,
        }
        for k, m in enumerate(mems)
    ]
    model = {"layers": layers, "hidden": hidden, "seq_len": 2048, "vocab": 50257}
    training = {
        "batch_size": 32,
        "micro_batch_size": u,
        "bytes_per_value": 2,
        "activation_factor": 17,
        "backward_factor": 2,
    }
    ours = gen.memory_feasible(gpus, model, training)
    try:
        Instance.from_dict({"gpus": gpus, "links": [], "model": model, "training": training})
        theirs = True
    except InputError as exc:
        assert exc.field == "gpus"
        theirs = False
    assert ours == theirs


# --------------------------------------------------------------------------- shipped examples


@pytest.mark.parametrize("name", sorted(gen.example_instances()))
def test_examples_match_generators(name: str) -> None:
    on_disk = json.loads((EXAMPLES / name).read_text())
    assert on_disk == gen.example_instances()[name]
    check_canonical(on_disk)
    Instance.from_dict(on_disk)


def test_example_shapes() -> None:
    ex = gen.example_instances()
    three, t7, tiny = ex["three-site.json"], ex["table7-14gpu.json"], ex["tiny.json"]
    assert len(three["gpus"]) == 8 and len({g["site"] for g in three["gpus"]}) == 3
    assert three["model"]["layers"] == 12 and three["model"]["hidden"] == 2048
    assert three["objective"]["lambda"] == 1.0
    assert len(t7["gpus"]) == 14 and t7["objective"]["lambda"] == 0.5
    assert t7["objective"]["t_ref_ms"] is None
    assert len(tiny["gpus"]) == 3 and tiny["model"]["layers"] == 4


def test_example_plan_is_feasible_and_beats_metis_default() -> None:
    from geoplan.cost import evaluate
    from geoplan.cost.baseline import metis_default_plan
    from geoplan.model.plan import load_plan

    inst = Instance.from_dict(json.loads((EXAMPLES / "three-site.json").read_text()))
    plan = load_plan(EXAMPLES / "three-site.plan.json")
    ev = evaluate(inst, plan)
    assert ev.feasible, ev.violations
    assert {s.gpu[0] for s in plan.stages} == {"b", "c"}  # spans sites B and C, skips A
    assert ev.t_iter_ms == pytest.approx(940.049, abs=1e-3)
    base = metis_default_plan(inst)
    assert base is not None
    assert ev.t_iter_ms < evaluate(inst, base).t_iter_ms
