"""Real-workload presets for the hybrid space: named cloud clusters and model instances.

A *cluster preset* (:data:`CLUSTER_PRESETS`) is a set of identical 8-GPU nodes of
real cloud products (AWS p4d / p4de / p5 / g6, Azure ND MI300X v5) in AWS regions.
:func:`preset_instance` turns (cluster, model preset of the catalog, training
settings) into the canonical instance dict of ``formats.md`` with the optional
hybrid fields of ``hybrid-model.md``. Links (all directed GPU pairs):

* inside a node: the node's NVLink / Infinity Fabric / PCIe class link;
* between nodes of one region: the datacenter network, the instance's NIC
  bandwidth divided by its GPUs (the DP rings of the 8 TP positions run in
  parallel and share the NICs); between two node products, the slower of the two;
* between regions: the DT-FM AWS table (:func:`geoplan.model.network.aws_link`).

GPU ids read ``{region}/n{k}/g{j}`` (node ``k`` of its region, GPU ``j`` of the
node); the ``site`` is the region, so a TP group may span the nodes of a region
(hybrid-model.md), and :func:`node_of` names the node so planners can keep TP
groups inside one. Every number's source is in the records and in docs/presets.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from geoplan.cost import hybrid_kernel, kernel
from geoplan.cost.coefficients import memory_admits_pipeline
from geoplan.errors import InputError
from geoplan.model.catalog import GPU_TYPES, GPUType, ModelShape, model_shape
from geoplan.model.hybrid import RECOMPUTE
from geoplan.model.network import aws_link

__all__ = [
    "A100_SXM_40GB",
    "AWS_REGION_NAMES",
    "CLUSTER_PRESETS",
    "MEMORY_CASES",
    "NODE_CLASSES",
    "ClusterPreset",
    "LinkSpec",
    "MemoryCase",
    "NodeClass",
    "NodeGroup",
    "cluster_preset",
    "gpu_memory_gb",
    "memory_cases",
    "memory_table_markdown",
    "node_of",
    "one_gpu_stage_floor_gb",
    "preset_instance",
    "preset_table",
]

# --------------------------------------------------------------------------- sources

_A100_DS = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
_L4 = "https://www.nvidia.com/en-us/data-center/l4/"
_MI300X = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"
_P4 = "https://aws.amazon.com/ec2/instance-types/p4/"
_P5 = "https://aws.amazon.com/ec2/instance-types/p5/"
_G6 = "https://aws.amazon.com/ec2/instance-types/g6/"
_ND_MI300X = (
    "https://learn.microsoft.com/en-us/azure/virtual-machines/sizes/gpu-accelerated/"
    "ndmi300xv5-series"
)
_MEGATRON = (
    "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU Clusters "
    "Using Megatron-LM (arXiv:2104.04473): 52 % of peak on A100"
)
_LLAMA3 = (
    "Llama Team 2024, The Llama 3 Herd of Models (arXiv:2407.21783), Table 4: 38-43 % BF16 "
    "MFU on H100"
)

#: The A100 SXM4 40 GB of AWS p4d. Kept out of :data:`GPU_TYPES` on purpose: the
#: ``cloud`` generator draws from the catalog in its order, so a new catalog type
#: would change every seeded ``cloud`` instance (and the stored benchmarks).
A100_SXM_40GB = GPUType(
    "A100-SXM-40GB", 312.0, 40.0, 400.0,
    source=_A100_DS + " (A100 40GB SXM: 312 TFLOPS BF16, 400 W; idle 15 % of TDP)",
)

#: AWS region code -> the region's name in the DT-FM table of network.py.
AWS_REGION_NAMES: dict[str, str] = {
    "us-west-2": "Oregon",
    "us-east-1": "Virginia",
    "us-east-2": "Ohio",
    "ap-northeast-1": "Tokyo",
    "ap-northeast-2": "Seoul",
    "ap-southeast-1": "Singapore",
    "ap-southeast-2": "Sydney",
    "eu-west-2": "London",
    "eu-central-1": "Frankfurt",
    "eu-west-1": "Ireland",
}


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class LinkSpec:
    """One class of directed link: latency (ms), bandwidth (Gbps) and its source."""

    latency_ms: float
    bandwidth_gbps: float
    source: str = ""


@dataclass(frozen=True)
class NodeClass:
    """A cloud node product: its GPU type and count, in-node and datacenter links.

    ``network`` is the per-GPU share of the node's NICs (NIC total / GPUs).
    ``compute_util`` is the achievable fraction of peak (model FLOPs utilisation),
    ``memory_util`` the fraction of memory left to the model (CUDA/ROCm context,
    allocator fragmentation and communication buffers take the rest).
    """

    product: str
    gpu: GPUType
    gpus_per_node: int
    in_node: LinkSpec
    network: LinkSpec
    compute_util: float
    memory_util: float = 0.9
    util_source: str = ""


@dataclass(frozen=True)
class NodeGroup:
    """``count`` nodes of one product in one AWS region (a region code)."""

    region: str
    node: NodeClass
    count: int


@dataclass(frozen=True)
class ClusterPreset:
    """A named cluster: node groups over AWS regions (links: see the module docstring)."""

    name: str
    description: str
    groups: tuple[NodeGroup, ...]

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g.region for g in self.groups))

    @property
    def n_nodes(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def n_gpus(self) -> int:
        return sum(g.count * g.node.gpus_per_node for g in self.groups)

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g.node.gpu.name for g in self.groups))

    @property
    def sources(self) -> tuple[str, ...]:
        """Every source behind the preset's numbers."""
        out: list[str] = []
        for g in self.groups:
            n = g.node
            out += [n.gpu.source, n.in_node.source, n.network.source, n.util_source]
        out.append("inter-region links: DT-FM AWS table (geoplan.model.network.DTFM_SOURCE)")
        return tuple(dict.fromkeys(s for s in out if s))


# --------------------------------------------------------------------------- node products

_MEM_UTIL_NOTE = "; memory_util 0.9: geoplan's choice (context, fragmentation, NCCL buffers)"
_NVLINK3 = LinkSpec(
    0.002, 2400.0, _A100_DS + ": NVLink 600 GB/s (both directions) = 300 GB/s = 2400 Gbps "
    "per direction through NVSwitch; latency 2 us (geoplan's choice)"
)
_EFA_400 = LinkSpec(
    0.02, 50.0, _P4 + ": 400 Gbps EFA per instance / 8 GPUs = 50 Gbps per GPU; "
    "latency 20 us (EFA SRD class, geoplan's choice)"
)

NODE_CLASSES: dict[str, NodeClass] = {
    n.product: n
    for n in (
        NodeClass("aws-p4d.24xlarge", A100_SXM_40GB, 8, _NVLINK3, _EFA_400, 0.5,
                  util_source=_MEGATRON + _MEM_UTIL_NOTE),
        NodeClass("aws-p4de.24xlarge", GPU_TYPES["A100-SXM-80GB"], 8, _NVLINK3, _EFA_400, 0.5,
                  util_source=_MEGATRON + _MEM_UTIL_NOTE),
        NodeClass(
            "aws-p5.48xlarge", GPU_TYPES["H100-SXM-80GB"], 8,
            LinkSpec(0.002, 3600.0, _H100 + ": NVLink 900 GB/s (both directions) = 450 GB/s = "
                     "3600 Gbps per direction through NVSwitch; latency 2 us (geoplan's choice)"),
            LinkSpec(0.015, 400.0, _P5 + ": 3200 Gbps EFA per instance / 8 GPUs = 400 Gbps per "
                     "GPU; latency 15 us (geoplan's choice)"),
            0.4, util_source=_LLAMA3 + _MEM_UTIL_NOTE,
        ),
        NodeClass(
            "aws-g6.48xlarge", GPU_TYPES["L4"], 8,
            LinkSpec(0.005, 256.0, _L4 + ": no NVLink; PCIe Gen4 x16 64 GB/s (both directions) = "
                     "32 GB/s = 256 Gbps per direction; latency 5 us (geoplan's choice)"),
            LinkSpec(0.03, 12.5, _G6 + ": 100 Gbps per instance / 8 GPUs = 12.5 Gbps per GPU; "
                     "latency 30 us (ENA, geoplan's choice)"),
            0.4, util_source="compute_util 0.4: geoplan's assumption for an inference-class part "
            "(no published training MFU)" + _MEM_UTIL_NOTE,
        ),
        NodeClass(
            "azure-nd-mi300x-v5", GPU_TYPES["MI300X"], 8,
            LinkSpec(0.002, 3584.0, _MI300X + ": 7 Infinity Fabric links of 128 GB/s (both "
                     "directions) per GPU, fully connected; collectives use all 7 (RCCL rings), "
                     "7 x 64 GB/s = 448 GB/s = 3584 Gbps per direction; a pair's own link is "
                     "64 GB/s; latency 2 us (geoplan's choice)"),
            LinkSpec(0.01, 400.0, _ND_MI300X + ": 8 x 400 Gb/s InfiniBand per VM = 400 Gbps per "
                     "GPU; latency 10 us (geoplan's choice)"),
            0.35, util_source="compute_util 0.35: geoplan's assumption (achieved BF16 training "
            "throughput well below the 1307 TFLOPS dense peak)" + _MEM_UTIL_NOTE,
        ),
    )
}


def _cluster(name: str, description: str, *groups: tuple[str, str, int]) -> ClusterPreset:
    return ClusterPreset(
        name, description, tuple(NodeGroup(r, NODE_CLASSES[p], c) for r, p, c in groups)
    )


CLUSTER_PRESETS: dict[str, ClusterPreset] = {
    c.name: c
    for c in (
        _cluster(
            "a100-40-3r",
            "homogeneous A100 SXM 40 GB (AWS p4d) in three US regions; Llama-2-70B needs "
            "tensor parallelism or recomputation here (docs/presets.md)",
            ("us-east-1", "aws-p4d.24xlarge", 4),
            ("us-east-2", "aws-p4d.24xlarge", 4),
            ("us-west-2", "aws-p4d.24xlarge", 4),
        ),
        _cluster(
            "mixed-4r",
            "H100 / A100 80 GB / L4 over four regions on three continents, one region with "
            "two node products",
            ("us-east-1", "aws-p5.48xlarge", 2),
            ("us-west-2", "aws-p4de.24xlarge", 2),
            ("eu-west-1", "aws-p4de.24xlarge", 1),
            ("eu-west-1", "aws-g6.48xlarge", 1),
            ("ap-northeast-1", "aws-g6.48xlarge", 2),
        ),
        _cluster(
            "mi300x-h100",
            "MI300X (Azure ND MI300X v5 class) and H100 (AWS p5) in three regions; the WAN "
            "is the DT-FM AWS table",
            ("us-east-1", "azure-nd-mi300x-v5", 2),
            ("us-east-2", "aws-p5.48xlarge", 2),
            ("eu-central-1", "azure-nd-mi300x-v5", 2),
        ),
        _cluster(
            "small-3r",
            "32 GPUs for quick tests: two A100 80 GB nodes, one H100 node, one L4 node in "
            "three regions",
            ("us-east-1", "aws-p4de.24xlarge", 2),
            ("us-east-2", "aws-p5.48xlarge", 1),
            ("eu-west-2", "aws-g6.48xlarge", 1),
        ),
    )
}


def cluster_preset(name: str) -> ClusterPreset:
    """The preset called ``name``; ``InputError`` naming the known presets otherwise."""
    found = CLUSTER_PRESETS.get(name.strip().lower()) if isinstance(name, str) else None
    if found is None:
        raise InputError(
            "cluster preset", name, f"unknown cluster preset; known: {', '.join(CLUSTER_PRESETS)}"
        )
    return found


def node_of(gpu_id: str) -> str:
    """The node of a preset GPU id: ``"us-east-1/n0/g3"`` -> ``"us-east-1/n0"``."""
    parts = gpu_id.split("/") if isinstance(gpu_id, str) else []
    if len(parts) != 3 or not parts[0] or not parts[1][1:].isdigit() or not parts[2][1:].isdigit():
        raise InputError("gpus.id", gpu_id, "not a preset GPU id {region}/n{node}/g{gpu}")
    return f"{parts[0]}/{parts[1]}"


# --------------------------------------------------------------------------- instances


def _micro_batch_choices(batch_size: int, micro_batch_size: int) -> list[int]:
    """Powers of two up to 8 dividing B, plus u itself: the micro-batch sizes to search."""
    return sorted({u for u in (1, 2, 4, 8) if batch_size % u == 0} | {micro_batch_size})


def preset_instance(
    cluster: str,
    model: str,
    *,
    batch_size: int = 64,
    micro_batch_size: int = 1,
    lam: float = 1.0,
    **training: Any,
) -> dict[str, Any]:
    """The canonical instance dict (formats.md, hybrid fields of hybrid-model.md).

    ``training`` overrides or adds training fields (``zero``, ``zero_choices``,
    ``max_tp``, ``micro_batch_choices``, ``recompute_choices``, ``stage_overhead_ms``,
    ...); the defaults search ZeRO 0-2, TP up to the node size, the micro-batch sizes
    1, 2, 4, 8 that divide B, and both recompute kinds. Values are checked when the
    dict is loaded (:meth:`Instance.from_dict`); bad preset names raise ``InputError``.
    """
    c = cluster_preset(cluster)
    shape = model_shape(model)
    for key, v in (("batch_size", batch_size), ("micro_batch_size", micro_batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(key, v, "expected a positive integer")
    if batch_size % micro_batch_size:
        raise InputError("micro_batch_size", micro_batch_size,
                         f"must divide batch_size={batch_size}")
    gpus, group_of = _gpus(c)
    return {
        "name": f"{c.name}-{shape.name}-b{batch_size}-u{micro_batch_size}",
        "gpus": gpus,
        "links": _links(c, [g["id"] for g in gpus], group_of),
        "model": shape.model_fields(),
        "training": {
            "batch_size": batch_size,
            "micro_batch_size": micro_batch_size,
            "bytes_per_value": 2,
            "activation_factor": 17,
            "backward_factor": 2,
            "zero": 0,
            "zero_choices": [0, 1, 2],
            "max_tp": max(g.node.gpus_per_node for g in c.groups),
            "micro_batch_choices": _micro_batch_choices(batch_size, micro_batch_size),
            "recompute_choices": ["none", "full"],
            **training,
        },
        "objective": {"lambda": float(lam), "t_ref_ms": None, "e_ref_j": None},
    }


def _gpus(c: ClusterPreset) -> tuple[list[dict[str, Any]], list[NodeGroup]]:
    """GPU dicts in group order, and each GPU's node group (nodes numbered per region)."""
    next_node: dict[str, int] = {}
    gpus: list[dict[str, Any]] = []
    groups: list[NodeGroup] = []
    for grp in c.groups:
        n = grp.node
        for _ in range(grp.count):
            k = next_node.get(grp.region, 0)
            next_node[grp.region] = k + 1
            for j in range(n.gpus_per_node):
                gpus.append({
                    "id": f"{grp.region}/n{k}/g{j}",
                    "type": n.gpu.name,
                    "site": grp.region,
                    **n.gpu.gpu_fields(),
                    "compute_util": n.compute_util,
                    "memory_util": n.memory_util,
                })
                groups.append(grp)
    return gpus, groups


def _links(c: ClusterPreset, ids: list[str], groups: list[NodeGroup]) -> list[dict[str, Any]]:
    """Every directed GPU pair: in-node, datacenter (same region) or DT-FM WAN link."""
    n = len(ids)
    lat = np.empty((n, n))
    bw = np.empty((n, n))
    member = {id(g): np.array([h is g for h in groups]) for g in c.groups}
    for ga in c.groups:
        for gb in c.groups:
            block = np.ix_(member[id(ga)], member[id(gb)])
            if ga.region == gb.region:
                # Two node products of one region: the slower NIC, the longer latency.
                lat[block] = max(ga.node.network.latency_ms, gb.node.network.latency_ms)
                bw[block] = min(ga.node.network.bandwidth_gbps, gb.node.network.bandwidth_gbps)
            else:
                lat[block], bw[block] = aws_link(AWS_REGION_NAMES[ga.region],
                                                 AWS_REGION_NAMES[gb.region])
    node_label = [node_of(i) for i in ids]
    for label in dict.fromkeys(node_label):
        members = np.array([k for k, v in enumerate(node_label) if v == label])
        spec = groups[int(members[0])].node.in_node
        block = np.ix_(members, members)
        lat[block], bw[block] = spec.latency_ms, spec.bandwidth_gbps
    src, dst = np.nonzero(~np.eye(n, dtype=bool))  # for each source, destinations in list order
    return [
        {"src": ids[i], "dst": ids[j], "bandwidth_gbps": b, "util": 1.0, "latency_ms": t}
        for i, j, b, t in zip(src.tolist(), dst.tolist(), bw[src, dst].tolist(),
                              lat[src, dst].tolist(), strict=True)
    ]


def preset_table() -> str:
    """One line per cluster preset: name, GPUs, nodes, regions, GPU types."""
    rows = [("preset", "GPUs", "nodes", "regions", "types")]
    for c in CLUSTER_PRESETS.values():
        rows.append((c.name, str(c.n_gpus), str(c.n_nodes), ", ".join(c.regions),
                     ", ".join(c.gpu_types)))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in rows
    )


# --------------------------------------------------------------------------- memory checks


def gpu_memory_gb(
    shape: ModelShape,
    *,
    layers: int,
    stages: int,
    tp: int = 1,
    replicas: int = 1,
    zero: int = 0,
    samples: int = 1,
    recompute: str = "none",
    last: bool = True,
    bytes_per_value: float = 2.0,
    activation_factor: float = 17.0,
) -> float:
    """Memory (GB) of one GPU of a hybrid stage (hybrid-model.md "Memory").

    ``hybrid_kernel.replica_bytes`` with one replica's ``samples`` of a micro-batch;
    ``last``: the stage holds the LM head and logits.
    """
    if recompute not in RECOMPUTE:
        raise InputError("recompute", recompute, f"expected one of {list(RECOMPUTE)}")
    kappa = bytes_per_value
    T, H, V = shape.seq_len, shape.hidden, shape.vocab
    mem = hybrid_kernel.replica_bytes(
        layers, tp, replicas, zero, RECOMPUTE.index(recompute), samples, stages, last,
        12.0 * H * H * kappa, float(V * H) * kappa, activation_factor, kappa * T * H,
        kappa * T * V,
    )
    return float(mem) / 1e9


def one_gpu_stage_floor_gb(shape: ModelShape, micro_batch_size: int = 1) -> tuple[int, float]:
    """(Q, GB): the least memory any one-GPU-per-stage pipeline needs on its fullest GPU.

    In GeoTrain's model (tp 1, recompute none; kappa 2, alpha 17) some stage of a
    Q-stage pipeline holds at least ceil(L / Q) layers at the per-layer bytes of Q
    stages; the minimum over Q (the LM head ignored, so a lower bound) is returned
    with its Q.
    """
    m = shape
    mem_w = 4.0 * 12 * m.hidden**2 * 2.0
    mem_a = 17.0 * 2.0 * micro_batch_size * m.seq_len * m.hidden
    best = min(
        (kernel.stage_bytes(math.ceil(m.layers / q), kernel.per_layer_bytes(mem_w, mem_a, q),
                            False, 0.0), q)
        for q in range(1, m.layers + 1)
    )
    return best[1], best[0] / 1e9


@dataclass(frozen=True)
class MemoryCase:
    """One stage layout of the memory table in docs/presets.md (the last stage's GPU)."""

    label: str
    stages: int
    tp: int = 1
    replicas: int = 1
    zero: int = 0
    recompute: str = "none"

    def gpus(self) -> int:
        return self.stages * self.tp * self.replicas


#: The layouts of docs/presets.md for Llama-2-70B on A100 40 GB (u = replicas: one
#: sample per replica).
MEMORY_CASES: tuple[MemoryCase, ...] = (
    MemoryCase("one GPU per stage, 80 x 1 layer (GeoTrain)", 80),
    MemoryCase("one GPU per stage, 80 x 1 layer, recompute full", 80, recompute="full"),
    MemoryCase("TP 8, 2 stages x 40 layers", 2, tp=8),
    MemoryCase("TP 8, 2 stages x 40 layers, 4 replicas, ZeRO 2", 2, tp=8, replicas=4, zero=2),
    MemoryCase("TP 8, 4 stages x 20 layers", 4, tp=8),
)


def memory_cases(
    cluster: str = "a100-40-3r", model: str = "llama2-70b"
) -> list[tuple[MemoryCase, float, float, bool]]:
    """Each of :data:`MEMORY_CASES`: (case, GB on the last stage's GPU, capacity GB, fits)."""
    c = cluster_preset(cluster)
    shape = model_shape(model)
    cap = min(g.node.gpu.memory_gb * g.node.memory_util for g in c.groups)
    out = []
    for case in MEMORY_CASES:
        gb = gpu_memory_gb(shape, layers=shape.layers // case.stages, stages=case.stages,
                           tp=case.tp, replicas=case.replicas, zero=case.zero, samples=1,
                           recompute=case.recompute)
        out.append((case, gb, cap, gb <= cap))
    return out


def memory_table_markdown(cluster: str = "a100-40-3r", model: str = "llama2-70b") -> str:
    """The memory table of docs/presets.md (a test checks the page holds this text)."""
    c = cluster_preset(cluster)
    shape = model_shape(model)
    caps = np.array([
        g.node.gpu.memory_gb * g.node.memory_util * 1e9
        for g in c.groups for _ in range(g.count * g.node.gpus_per_node)
    ])
    mem_w = 4.0 * 12 * shape.hidden**2 * 2.0
    mem_a = 17.0 * 2.0 * shape.seq_len * shape.hidden
    mem_last = 4.0 * shape.vocab * shape.hidden * 2.0 + 2.0 * 2.0 * shape.seq_len * shape.vocab
    admits = memory_admits_pipeline(caps, mem_w, mem_a, mem_last, shape.layers)
    q, floor = one_gpu_stage_floor_gb(shape)
    lines = [
        f"{shape.name} on `{c.name}` ({c.n_gpus} GPUs, {caps.max() / 1e9:.1f} GB usable each), "
        "u = 1 sample per replica, bytes_per_value 2, activation_factor 17:",
        "",
        f"- one GPU per stage (GeoTrain's model): the fullest GPU needs at least "
        f"{floor:.1f} GB whatever the stage count (least at Q = {q}); "
        f"`memory_admits_pipeline`: {admits}",
        "",
        "| layout (last stage's GPU) | GPUs | GB | fits |",
        "| --- | ---: | ---: | --- |",
    ]
    for case, gb, _cap, fits in memory_cases(cluster, model):
        lines.append(f"| {case.label} | {case.gpus()} | {gb:.1f} | {'yes' if fits else 'no'} |")
    return "\n".join(lines)


def _check_presets(presets: Mapping[str, ClusterPreset]) -> None:
    """Import-time sanity: regions known to the DT-FM table, positive counts."""
    for c in presets.values():
        for g in c.groups:
            assert g.region in AWS_REGION_NAMES, g.region
            assert g.count >= 1 and g.node.gpus_per_node >= 1


_check_presets(CLUSTER_PRESETS)
