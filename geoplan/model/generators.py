"""Seeded generators of canonical instance dicts (``formats.md``).

Every generator takes a required ``seed``, makes one ``numpy.random.default_rng(seed)``
and hands it down, so the same arguments give the same dict. Every optional field
is written explicitly. The families and their ranges (see ``docs/catalog.md``):

* ``paper``: the GeoTrain simulations (A30 / A100 PCIe 40GB / A100 SXM 80GB mix,
  MIG-like compute fractions), 0.1 ms / 100 Gbps inside a site;
* ``geo``: three or more sites far apart: 5-50 ms, 1-10 Gbps across sites;
* ``metro``: sites in one metro area: 0.5-2 ms, 10-40 Gbps across sites;
* ``cloud``: cloud pools of identical nodes (default 8 GPUs) over 4-8 regions:
  NVLink-class links inside a node, a datacenter network between the nodes of a
  region, 10-250 ms / 0.3-10 Gbps WAN links (asymmetric) between regions;

plus :func:`table7` (GeoTrain 6.7) and :func:`three_site_instance` (GeoTrain 6.6).

Each generated instance is checked to admit a memory-feasible plan (all site pairs
are linked, so any GPU order is connected); where the draw does not fit the model,
the GPU with the least effective memory is upgraded to the largest type of the
mix, deterministically, until it fits (``cloud``: the whole node, so its GPUs stay
identical).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geoplan.errors import InputError
from geoplan.model.catalog import GPU_TYPES, gpu_type
from geoplan.model.network import expand_network, site_label, three_site

__all__ = [
    "CLOUD_MIX",
    "CLOUD_NODE_SIZE",
    "CLOUD_REGIONS",
    "CLOUD_TYPES",
    "FAMILIES",
    "FAMILY_RANGES",
    "PAPER_MIX",
    "PAPER_MIX_WITH_FRIENDS",
    "TABLE7_COUNTS",
    "FamilyRanges",
    "by_family",
    "cloud",
    "cloud_node_of",
    "example_instances",
    "geo",
    "memory_feasible",
    "metro",
    "paper_mix",
    "table7",
    "three_site_instance",
]

Range = tuple[float, float]

#: GeoTrain's simulated heterogeneity mix (types of sections 6.1 and 6.7), by weight.
PAPER_MIX: dict[str, float] = {"A30": 0.4, "A100-PCIe-40GB": 0.35, "A100-SXM-80GB": 0.25}
#: The paper mix plus the A40 and T4 of the paper's real-hardware cluster (6.1).
PAPER_MIX_WITH_FRIENDS: dict[str, float] = {
    "A30": 0.3,
    "A100-PCIe-40GB": 0.25,
    "A100-SXM-80GB": 0.2,
    "A40": 0.15,
    "T4": 0.1,
}
#: A cloud-like mix for the ``geo`` and ``metro`` families.
CLOUD_MIX: dict[str, float] = {
    "H100-SXM-80GB": 0.1,
    "A100-SXM-80GB": 0.25,
    "A100-PCIe-40GB": 0.2,
    "A40": 0.2,
    "A30": 0.15,
    "L4": 0.1,
}
#: ``cloud``: GPUs per node (default), types per instance and regions (both ends included).
CLOUD_NODE_SIZE = 8
CLOUD_TYPES: tuple[int, int] = (2, 4)
CLOUD_REGIONS: tuple[int, int] = (4, 8)
#: GPU counts of :func:`table7` (the paper does not give them): A30, A100 PCIe, A100 SXM.
TABLE7_COUNTS: dict[str, int] = {"A30": 5, "A100-PCIe-40GB": 5, "A100-SXM-80GB": 4}


@dataclass(frozen=True)
class FamilyRanges:
    """The documented ranges a family draws from (uniformly, both ends included).

    The reverse direction of a cross-site pair takes the forward latency and
    bandwidth times independent factors drawn from ``reverse_factor``, clipped to
    the family's range. ``site_homogeneity`` is the probability that a GPU has its
    site's dominant type (0: every GPU drawn from the mix independently).
    ``node_*`` (``cloud`` only) are the links inside a node; there ``intra_*`` are
    the links between the nodes of one site (region) and ``inter_*`` those across
    regions.
    """

    compute_util: Range
    memory_util: Range
    intra_latency_ms: Range
    intra_bandwidth_gbps: Range
    inter_latency_ms: Range
    inter_bandwidth_gbps: Range
    reverse_factor: Range = (0.8, 1.25)
    site_homogeneity: float = 0.0
    min_sites: int = 1
    node_latency_ms: Range | None = None
    node_bandwidth_gbps: Range | None = None


FAMILY_RANGES: dict[str, FamilyRanges] = {
    "paper": FamilyRanges(
        compute_util=(0.3, 0.9),
        memory_util=(0.85, 0.95),
        intra_latency_ms=(0.1, 0.1),
        intra_bandwidth_gbps=(100.0, 100.0),
        inter_latency_ms=(1.0, 10.0),
        inter_bandwidth_gbps=(5.0, 25.0),
    ),
    "geo": FamilyRanges(
        compute_util=(0.5, 1.0),
        memory_util=(0.85, 0.95),
        intra_latency_ms=(0.01, 0.1),
        intra_bandwidth_gbps=(25.0, 100.0),
        inter_latency_ms=(5.0, 50.0),
        inter_bandwidth_gbps=(1.0, 10.0),
        site_homogeneity=0.7,
        min_sites=3,
    ),
    "metro": FamilyRanges(
        compute_util=(0.5, 1.0),
        memory_util=(0.85, 0.95),
        intra_latency_ms=(0.01, 0.1),
        intra_bandwidth_gbps=(25.0, 100.0),
        inter_latency_ms=(0.5, 2.0),
        inter_bandwidth_gbps=(10.0, 40.0),
        site_homogeneity=0.7,
        min_sites=3,
    ),
    # Dedicated cloud GPUs; NVLink 3/4 carry 300-450 GB/s per direction (2400-3600
    # Gbps), PCIe-class nodes less: 1200-3600 Gbps at 1-10 us. The datacenter
    # network is 100-400 Gbps RDMA per GPU at 5-50 us. The WAN between regions:
    # DT-FM's AWS measurements (network.DTFM_AWS_LINKS) span 11-265 ms and 0.33-1.16
    # Gbps per connection; up to 10 Gbps stands for multi-stream or dedicated links.
    "cloud": FamilyRanges(
        compute_util=(0.6, 1.0),
        memory_util=(0.85, 0.95),
        intra_latency_ms=(0.005, 0.05),
        intra_bandwidth_gbps=(100.0, 400.0),
        inter_latency_ms=(10.0, 250.0),
        inter_bandwidth_gbps=(0.3, 10.0),
        node_latency_ms=(0.001, 0.01),
        node_bandwidth_gbps=(1200.0, 3600.0),
    ),
}
FAMILIES: tuple[str, ...] = tuple(FAMILY_RANGES)


# --------------------------------------------------------------------------- helpers


def _rng(seed: int) -> np.random.Generator:
    """The one generator of a call, from a required non-negative integer seed."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError("seed", seed, "expected a non-negative integer")
    return np.random.default_rng(seed)


def _uniform(rng: np.random.Generator, r: Range, digits: int) -> float:
    lo, hi = r
    return round(float(rng.uniform(lo, hi)) if hi > lo else float(lo), digits)


def _clip(x: float, r: Range, digits: int) -> float:
    return round(min(max(x, r[0]), r[1]), digits)


def _gpu(
    gid: str, type_name: str, site: str, compute_util: float, memory_util: float
) -> dict[str, Any]:
    t = gpu_type(type_name)
    return {
        "id": gid,
        "type": t.name,
        "site": site,
        "peak_tflops": t.peak_tflops,
        "compute_util": compute_util,
        "memory_gb": t.memory_gb,
        "memory_util": memory_util,
        "idle_w": float(t.idle_w or 0.0),
        "active_w": t.active_w,
    }


def _model(layers: int, hidden: int, seq_len: int, vocab: int) -> dict[str, int]:
    for name, v in (("layers", layers), ("hidden", hidden), ("seq_len", seq_len), ("vocab", vocab)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise InputError(name, v, "expected a positive integer")
    return {"layers": layers, "hidden": hidden, "seq_len": seq_len, "vocab": vocab}


def _training(batch_size: int, micro_batch_size: int) -> dict[str, Any]:
    if micro_batch_size <= 0 or batch_size <= 0 or batch_size % micro_batch_size:
        raise InputError(
            "micro_batch_size",
            micro_batch_size,
            f"must be a positive divisor of batch_size={batch_size}",
        )
    return {
        "batch_size": batch_size,
        "micro_batch_size": micro_batch_size,
        "bytes_per_value": 2,
        "activation_factor": 17,
        "backward_factor": 2,
    }


def _objective(lam: float) -> dict[str, Any]:
    if not 0.0 <= lam <= 1.0:
        raise InputError("lambda", lam, "must lie in [0, 1]")
    return {"lambda": float(lam), "t_ref_ms": None, "e_ref_j": None}


def _check_mix(mix: Mapping[str, float]) -> tuple[list[str], np.ndarray]:
    names = [gpu_type(n, where="mix").name for n in mix]
    weights = np.array([float(w) for w in mix.values()])
    if not names or np.any(weights < 0) or weights.sum() <= 0:
        raise InputError("mix", dict(mix), "expected GPU types with non-negative weights")
    return names, weights / weights.sum()


def _site_counts(n: int, n_sites: int) -> list[int]:
    """n GPUs over n_sites sites, as evenly as possible (earlier sites get the extra)."""
    return [n // n_sites + (1 if s < n % n_sites else 0) for s in range(n_sites)]


# --------------------------------------------------------------------------- feasibility


def memory_feasible(
    gpus: Sequence[Mapping[str, Any]], model: Mapping[str, Any], training: Mapping[str, Any]
) -> bool:
    """True iff some pipeline satisfies the memory model of ``cost-model.md``.

    Links are ignored (the generators link every pair). For each stage count Q the
    Q GPUs with the most effective memory are best; one of them, tried in turn,
    is the last stage. Exact for complete networks.
    """
    from geoplan.cost.coefficients import memory_admits_pipeline

    h, t, v = model["hidden"], model["seq_len"], model["vocab"]
    kappa = training.get("bytes_per_value", 2)
    alpha = training.get("activation_factor", 17)
    u = training["micro_batch_size"]
    cap = np.array([g["memory_gb"] * g.get("memory_util", 1.0) * 1e9 for g in gpus])
    return memory_admits_pipeline(
        cap,
        mem_w=4.0 * 12.0 * h * h * kappa,
        mem_a=alpha * kappa * u * t * h,
        mem_last=4.0 * v * h * kappa + 2.0 * kappa * u * t * v,
        layers=model["layers"],
    )


def _ensure_fits(
    gpus: list[dict[str, Any]],
    model: Mapping[str, Any],
    training: Mapping[str, Any],
    upgrade_to: str,
) -> None:
    """Upgrade the weakest-memory GPUs to ``upgrade_to`` until the model fits (in place)."""
    target = gpu_type(upgrade_to)
    while not memory_feasible(gpus, model, training):
        k = min(
            (k for k, g in enumerate(gpus) if g["type"] != target.name),
            key=lambda k: gpus[k]["memory_gb"] * gpus[k]["memory_util"],
            default=None,
        )
        if k is None:
            raise InputError(
                "layers",
                model["layers"],
                f"the model does not fit in {len(gpus)} x {target.name} "
                f"(hidden={model['hidden']}, seq_len={model['seq_len']}); "
                "use more GPUs, fewer layers or a smaller model",
            )
        g = gpus[k]
        gpus[k] = _gpu(g["id"], target.name, g["site"], g["compute_util"], g["memory_util"])


def _largest(mix_names: Sequence[str]) -> str:
    return max(mix_names, key=lambda n: (gpu_type(n).memory_gb, gpu_type(n).peak_tflops))


# --------------------------------------------------------------------------- families


def _sited_instance(
    family: str,
    n: int,
    layers: int,
    seed: int,
    *,
    hidden: int,
    seq_len: int,
    vocab: int,
    batch_size: int,
    micro_batch_size: int,
    mix: Mapping[str, float] | None,
    n_sites: int | None,
    lam: float,
    name: str | None,
) -> dict[str, Any]:
    """The shared body of the ``paper``, ``geo`` and ``metro`` families."""
    ranges = FAMILY_RANGES[family]
    if not isinstance(n, int) or n < 1:
        raise InputError("n", n, "expected a positive number of GPUs")
    if n_sites is None:
        if family == "paper":
            n_sites = min(n, 4, math.ceil(n / 4))
        else:
            n_sites = min(n, 8, max(ranges.min_sites, math.ceil(n / 8)))
    if not isinstance(n_sites, int) or not 1 <= n_sites <= n:
        raise InputError("n_sites", n_sites, f"expected 1..{n} sites")
    default_mix = PAPER_MIX if family == "paper" else CLOUD_MIX
    names, weights = _check_mix(default_mix if mix is None else mix)
    model = _model(layers, hidden, seq_len, vocab)
    training = _training(batch_size, micro_batch_size)
    rng = _rng(seed)

    sites = [site_label(s) for s in range(n_sites)]
    gpus: list[dict[str, Any]] = []
    for site, count in zip(sites, _site_counts(n, n_sites), strict=True):
        dominant = names[rng.choice(len(names), p=weights)]
        for k in range(count):
            same = rng.random() < ranges.site_homogeneity
            type_name = dominant if same else names[rng.choice(len(names), p=weights)]
            cu = _uniform(rng, ranges.compute_util, 3)
            mu = _uniform(rng, ranges.memory_util, 3)
            gpus.append(_gpu(f"{site.lower()}{k}", type_name, site, cu, mu))
    _ensure_fits(gpus, model, training, _largest(names))

    spec: dict[str, Any] = {
        "intra_by_site": {
            s: {
                "latency_ms": _uniform(rng, ranges.intra_latency_ms, 4),
                "bandwidth_gbps": _uniform(rng, ranges.intra_bandwidth_gbps, 3),
            }
            for s in sites
        },
        "inter": [],
    }
    for i, a in enumerate(sites):
        for b in sites[i + 1 :]:
            lat = _uniform(rng, ranges.inter_latency_ms, 4)
            bw = _uniform(rng, ranges.inter_bandwidth_gbps, 3)
            f_lat = float(rng.uniform(*ranges.reverse_factor))
            f_bw = float(rng.uniform(*ranges.reverse_factor))
            spec["inter"].append(
                {
                    "a": a,
                    "b": b,
                    "latency_ms": lat,
                    "bandwidth_gbps": bw,
                    "latency_ba_ms": _clip(lat * f_lat, ranges.inter_latency_ms, 4),
                    "bandwidth_ba_gbps": _clip(bw * f_bw, ranges.inter_bandwidth_gbps, 3),
                }
            )
    return {
        "name": name or f"{family}-n{n}-l{layers}-s{seed}",
        "gpus": gpus,
        "links": expand_network(gpus, spec),
        "model": model,
        "training": training,
        "objective": _objective(lam),
    }


def paper_mix(
    n_gpus: int,
    layers: int,
    seed: int,
    hidden: int = 2048,
    seq_len: int = 2048,
    vocab: int = 50257,
    batch_size: int = 32,
    micro_batch_size: int = 1,
    mix: Mapping[str, float] | None = None,
    n_sites: int | None = None,
    lam: float = 1.0,
    name: str | None = None,
) -> dict[str, Any]:
    """GeoTrain's simulated setups (sections 6.4-6.5): a heterogeneous mix over sites.

    Types drawn independently from ``mix`` (default :data:`PAPER_MIX`; pass
    :data:`PAPER_MIX_WITH_FRIENDS` for A40 and T4 too); ranges in
    ``FAMILY_RANGES["paper"]``. Sites default to ``min(n, 4, ceil(n / 4))``.
    """
    return _sited_instance(
        "paper",
        n_gpus,
        layers,
        seed,
        hidden=hidden,
        seq_len=seq_len,
        vocab=vocab,
        batch_size=batch_size,
        micro_batch_size=micro_batch_size,
        mix=mix,
        n_sites=n_sites,
        lam=lam,
        name=name,
    )


def geo(
    n: int,
    layers: int,
    seed: int,
    hidden: int = 2048,
    seq_len: int = 2048,
    vocab: int = 50257,
    batch_size: int = 32,
    micro_batch_size: int = 1,
    mix: Mapping[str, float] | None = None,
    n_sites: int | None = None,
    lam: float = 1.0,
    name: str | None = None,
) -> dict[str, Any]:
    """Geo-distributed sites: 5-50 ms and 1-10 Gbps across sites, asymmetric directions.

    Sites default to ``min(n, 8, max(3, ceil(n / 8)))``; each site has a dominant
    type from ``mix`` (default :data:`CLOUD_MIX`). Ranges in ``FAMILY_RANGES["geo"]``.
    """
    return _sited_instance(
        "geo",
        n,
        layers,
        seed,
        hidden=hidden,
        seq_len=seq_len,
        vocab=vocab,
        batch_size=batch_size,
        micro_batch_size=micro_batch_size,
        mix=mix,
        n_sites=n_sites,
        lam=lam,
        name=name,
    )


def metro(
    n: int,
    layers: int,
    seed: int,
    hidden: int = 2048,
    seq_len: int = 2048,
    vocab: int = 50257,
    batch_size: int = 32,
    micro_batch_size: int = 1,
    mix: Mapping[str, float] | None = None,
    n_sites: int | None = None,
    lam: float = 1.0,
    name: str | None = None,
) -> dict[str, Any]:
    """Metro-area sites: 0.5-2 ms and 10-40 Gbps across sites (optima with many stages).

    Same layout as :func:`geo`; ranges in ``FAMILY_RANGES["metro"]``.
    """
    return _sited_instance(
        "metro",
        n,
        layers,
        seed,
        hidden=hidden,
        seq_len=seq_len,
        vocab=vocab,
        batch_size=batch_size,
        micro_batch_size=micro_batch_size,
        mix=mix,
        n_sites=n_sites,
        lam=lam,
        name=name,
    )


def cloud_node_of(gpu_id: str) -> int:
    """The node index of a ``cloud`` GPU id ``{site}-n{node}-g{k}`` (e.g. ``b-n3-g5`` -> 3)."""
    try:
        return int(gpu_id.split("-")[-2][1:])
    except (IndexError, ValueError):
        raise InputError("gpus.id", gpu_id, "not a cloud GPU id {site}-n{node}-g{k}") from None


def cloud(
    n: int,
    layers: int,
    seed: int,
    hidden: int = 2048,
    seq_len: int = 2048,
    vocab: int = 50257,
    batch_size: int = 32,
    micro_batch_size: int = 1,
    mix: Mapping[str, float] | None = None,
    n_sites: int | None = None,
    node_size: int = CLOUD_NODE_SIZE,
    lam: float = 1.0,
    name: str | None = None,
) -> dict[str, Any]:
    """Cloud pools: identical nodes of ``node_size`` GPUs in 4-8 regions (sites).

    ``ceil(n / node_size)`` nodes; when ``node_size`` does not divide ``n`` the last
    node is partial (``n mod node_size`` GPUs). Nodes are split over the regions as
    evenly as possible (earlier regions get the extra; the partial node is in the
    last region). Regions default to a draw in :data:`CLOUD_REGIONS`, at most one
    per node. The instance offers 2-4 types (:data:`CLOUD_TYPES`) from the catalog:
    one training-class type (>= 80 GB, so large models fit as in the other
    families) and the rest from the other catalog types; each node takes one of
    them uniformly (with ``mix``: drawn from ``mix`` by weight instead).

    A node's GPUs share type, compute and memory fractions, site and power, and
    every GPU of a node has the same links: ``node_*`` inside the node (drawn per
    node, symmetric), ``intra_*`` to the other nodes of its region (per region,
    symmetric), ``inter_*`` to other regions (per ordered region pair; the reverse
    direction as in :class:`FamilyRanges`). So the GPUs of a node are
    interchangeable (identical in :mod:`geoplan.cost.dominance`). GPU ids read
    ``{site}-n{node}-g{k}`` (node: global index, k: position in the node).
    Ranges in ``FAMILY_RANGES["cloud"]``.
    """
    ranges = FAMILY_RANGES["cloud"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError("n", n, "expected a positive number of GPUs")
    if isinstance(node_size, bool) or not isinstance(node_size, int) or node_size < 1:
        raise InputError("node_size", node_size, "expected a positive number of GPUs per node")
    n_nodes = -(-n // node_size)
    if n_sites is not None and (not isinstance(n_sites, int) or not 1 <= n_sites <= n_nodes):
        raise InputError("n_sites", n_sites, f"expected 1..{n_nodes} regions (one node at least)")
    mix_checked = None if mix is None else _check_mix(mix)
    model = _model(layers, hidden, seq_len, vocab)
    training = _training(batch_size, micro_batch_size)
    rng = _rng(seed)

    if mix_checked is None:
        # Catalog order is fixed, so the draw depends on the seed alone.
        big = [t for t, g in GPU_TYPES.items() if g.memory_gb >= 80]
        rest = [t for t in GPU_TYPES if t not in big]
        k = int(rng.integers(CLOUD_TYPES[0], CLOUD_TYPES[1] + 1))
        names = [big[int(rng.integers(len(big)))]]
        names += [rest[int(i)] for i in rng.choice(len(rest), size=k - 1, replace=False)]
        weights = np.full(k, 1.0 / k)
    else:
        names, weights = mix_checked
    if n_sites is None:
        n_sites = min(n_nodes, int(rng.integers(CLOUD_REGIONS[0], CLOUD_REGIONS[1] + 1)))
    sites = [site_label(s) for s in range(n_sites)]
    node_site = np.repeat(np.arange(n_sites), _site_counts(n_nodes, n_sites))
    sizes = [node_size] * (n_nodes - 1) + [n - node_size * (n_nodes - 1)]

    # One row per node: type, fractions, and its NVLink-class link.
    nodes: list[dict[str, Any]] = []
    for s in node_site.tolist():
        nodes.append({
            "site": sites[s],
            "type": names[int(rng.choice(len(names), p=weights))],
            "cu": _uniform(rng, ranges.compute_util, 3),
            "mu": _uniform(rng, ranges.memory_util, 3),
        })
    _ensure_nodes_fit(nodes, sizes, model, training, _largest(names))
    assert ranges.node_latency_ms is not None and ranges.node_bandwidth_gbps is not None  # mypy
    node_lat = [_uniform(rng, ranges.node_latency_ms, 6) for _ in nodes]
    node_bw = [_uniform(rng, ranges.node_bandwidth_gbps, 1) for _ in nodes]
    dc_lat = [_uniform(rng, ranges.intra_latency_ms, 5) for _ in sites]
    dc_bw = [_uniform(rng, ranges.intra_bandwidth_gbps, 2) for _ in sites]
    wan_lat = np.zeros((n_sites, n_sites))
    wan_bw = np.zeros((n_sites, n_sites))
    for a in range(n_sites):
        for b in range(a + 1, n_sites):
            lat = _uniform(rng, ranges.inter_latency_ms, 3)
            bw = _uniform(rng, ranges.inter_bandwidth_gbps, 3)
            f_lat = float(rng.uniform(*ranges.reverse_factor))
            f_bw = float(rng.uniform(*ranges.reverse_factor))
            wan_lat[a, b], wan_bw[a, b] = lat, bw
            wan_lat[b, a] = _clip(lat * f_lat, ranges.inter_latency_ms, 3)
            wan_bw[b, a] = _clip(bw * f_bw, ranges.inter_bandwidth_gbps, 3)

    # Node-by-node link matrices, then one row per GPU pair through each GPU's node.
    same_site = node_site[:, None] == node_site[None, :]
    lat_nn = np.where(same_site, np.array(dc_lat)[node_site][:, None],
                      wan_lat[node_site[:, None], node_site[None, :]])
    bw_nn = np.where(same_site, np.array(dc_bw)[node_site][:, None],
                     wan_bw[node_site[:, None], node_site[None, :]])
    np.fill_diagonal(lat_nn, node_lat)
    np.fill_diagonal(bw_nn, node_bw)

    gpus: list[dict[str, Any]] = []
    for v, (row, size) in enumerate(zip(nodes, sizes, strict=True)):
        for k in range(size):
            gid = f"{row['site'].lower()}-n{v}-g{k}"
            gpus.append(_gpu(gid, row["type"], row["site"], row["cu"], row["mu"]))
    g_node = np.repeat(np.arange(n_nodes), sizes)
    mask = ~np.eye(n, dtype=bool)
    src, dst = np.nonzero(mask)  # for each source, destinations in list order
    ns, nd = g_node[src], g_node[dst]
    ids = [g["id"] for g in gpus]
    links = [
        {"src": ids[i], "dst": ids[j], "bandwidth_gbps": bw, "util": 1.0, "latency_ms": lat}
        for i, j, bw, lat in zip(src.tolist(), dst.tolist(), bw_nn[ns, nd].tolist(),
                                 lat_nn[ns, nd].tolist(), strict=True)
    ]
    return {
        "name": name or f"cloud-n{n}-l{layers}-s{seed}",
        "gpus": gpus,
        "links": links,
        "model": model,
        "training": training,
        "objective": _objective(lam),
    }


def _ensure_nodes_fit(
    nodes: list[dict[str, Any]],
    sizes: Sequence[int],
    model: Mapping[str, Any],
    training: Mapping[str, Any],
    upgrade_to: str,
) -> None:
    """:func:`_ensure_fits` by node: upgrade whole nodes, weakest memory first (in place)."""
    target = gpu_type(upgrade_to).name

    def expanded() -> list[dict[str, Any]]:
        return [
            {"memory_gb": gpu_type(r["type"]).memory_gb, "memory_util": r["mu"]}
            for r, size in zip(nodes, sizes, strict=True)
            for _ in range(size)
        ]

    while not memory_feasible(expanded(), model, training):
        v = min(
            (v for v, r in enumerate(nodes) if r["type"] != target),
            key=lambda v: gpu_type(nodes[v]["type"]).memory_gb * nodes[v]["mu"],
            default=None,
        )
        if v is None:
            raise InputError(
                "layers",
                model["layers"],
                f"the model does not fit in {sum(sizes)} x {target} "
                f"(hidden={model['hidden']}, seq_len={model['seq_len']}); "
                "use more GPUs, fewer layers or a smaller model",
            )
        nodes[v]["type"] = target


_BY_FAMILY: dict[str, Callable[..., dict[str, Any]]] = {
    "paper": paper_mix, "geo": geo, "metro": metro, "cloud": cloud,
}


def by_family(family: str, n: int, layers: int, seed: int, **kw: Any) -> dict[str, Any]:
    """Dispatch to the generator of ``family`` (``paper``, ``geo``, ``metro`` or ``cloud``)."""
    gen = _BY_FAMILY.get(family)
    if gen is None:
        raise InputError(
            "family", family, f"unknown generator family; known: {', '.join(FAMILIES)}"
        )
    return gen(n, layers, seed, **kw)


# --------------------------------------------------------------------------- paper setups


def table7(
    seed: int = 0,
    lam: float = 0.5,
    layers: int = 12,
    hidden: int = 2048,
    seq_len: int = 2048,
    vocab: int = 50257,
    batch_size: int = 32,
    micro_batch_size: int = 1,
    counts: Mapping[str, int] | None = None,
    compute_util: Range = (0.4, 0.6),
    memory_util: float = 0.9,
    name: str | None = None,
) -> dict[str, Any]:
    """The 14-GPU setup of GeoTrain 6.7 (Table 7): A30, A100 PCIe 40GB, A100 SXM 80GB.

    Powers idle/active 25/165, 40/250 and 60/400 W (catalog values). The paper gives
    neither the type counts (default :data:`TABLE7_COUNTS`), the compute fractions
    (drawn from ``compute_util``) nor the network: all GPUs sit on one site "A"
    joined by 0.1 ms / 100 Gbps links (the paper's intra-site values of 6.6).
    ``t_ref_ms``/``e_ref_j`` are left null.
    """
    rng = _rng(seed)
    model = _model(layers, hidden, seq_len, vocab)
    training = _training(batch_size, micro_batch_size)
    gpus: list[dict[str, Any]] = []
    for type_name, count in (TABLE7_COUNTS if counts is None else counts).items():
        prefix = {"A30": "a30", "A100-PCIe-40GB": "pcie", "A100-SXM-80GB": "sxm"}.get(
            type_name, type_name.lower()
        )
        for k in range(count):
            cu = _uniform(rng, compute_util, 3)
            gpus.append(_gpu(f"{prefix}-{k}", type_name, "A", cu, memory_util))
    if not gpus:
        raise InputError("counts", dict(counts or {}), "expected at least one GPU")
    if not memory_feasible(gpus, model, training):
        raise InputError("layers", layers, "the model does not fit in these GPUs")
    spec = {"intra": {"latency_ms": 0.1, "bandwidth_gbps": 100.0}}
    return {
        "name": name or f"table7-n{len(gpus)}-l{layers}-s{seed}",
        "gpus": gpus,
        "links": expand_network(gpus, spec),
        "model": model,
        "training": training,
        "objective": _objective(lam),
    }


def three_site_instance(
    base_latency_ms: float,
    base_bandwidth_gbps: float,
    layers: int = 12,
    seed: int = 0,
    gpus_per_site: Sequence[int] = (2, 3, 3),
    site_types: Sequence[str] = ("A30", "A100-PCIe-40GB", "A100-SXM-80GB"),
    compute_util: Range = (0.2, 0.3),
    memory_util: float = 0.9,
    hidden: int = 2048,
    seq_len: int = 2048,
    vocab: int = 50257,
    batch_size: int = 32,
    micro_batch_size: int = 1,
    lam: float = 1.0,
    name: str | None = None,
) -> dict[str, Any]:
    """The three-site topology of GeoTrain 6.6 (network: :func:`geoplan.model.network.three_site`).

    Site A holds the weakest GPUs (A30), B A100 PCIe, C A100 SXM by default. Compute
    fractions in (0.2, 0.3) stand for MIG-like slices (about 2/7 of a GPU) and keep
    every A30 slower than every A100; at 10 Gbps the time-optimal plan then spans
    sites B and C up to about 10 ms base latency and stays on site C from 50 ms on.
    """
    if len(site_types) != 3:
        raise InputError("site_types", list(site_types), "expected three GPU types (sites A, B, C)")
    spec = three_site(base_latency_ms, base_bandwidth_gbps, gpus_per_site)
    rng = _rng(seed)
    model = _model(layers, hidden, seq_len, vocab)
    training = _training(batch_size, micro_batch_size)
    gpus: list[dict[str, Any]] = []
    for site, count, type_name in zip("ABC", gpus_per_site, site_types, strict=True):
        for k in range(int(count)):
            cu = _uniform(rng, compute_util, 3)
            gpus.append(_gpu(f"{site.lower()}{k}", type_name, site, cu, memory_util))
    if not gpus:
        raise InputError("gpus_per_site", list(gpus_per_site), "expected at least one GPU")
    if not memory_feasible(gpus, model, training):
        raise InputError("layers", layers, "the model does not fit in these GPUs")
    return {
        "name": name
        or f"three-site-lat{base_latency_ms:g}-bw{base_bandwidth_gbps:g}-l{layers}-s{seed}",
        "gpus": gpus,
        "links": expand_network(gpus, spec),
        "model": model,
        "training": training,
        "objective": _objective(lam),
    }


# --------------------------------------------------------------------------- shipped examples


def example_instances() -> dict[str, dict[str, Any]]:
    """The instance files shipped in ``examples/`` (file name -> dict)."""
    return {
        "three-site.json": three_site_instance(10.0, 10.0, layers=12, seed=0, name="three-site"),
        "table7-14gpu.json": table7(seed=0, lam=0.5, name="table7-14gpu"),
        "tiny.json": paper_mix(
            3, 4, seed=0, hidden=512, seq_len=512, batch_size=8, n_sites=2, name="tiny"
        ),
    }
