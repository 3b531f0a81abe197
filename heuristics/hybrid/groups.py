"""Device groups of a pool: classes of interchangeable GPUs, nodes inside them, TP groups.

* A **class** is the set of GPUs with the same ``(type, compute_util, memory_util,
  site)``: they have the same effective TFLOPS and memory and may share a TP group.
* A **node** is read from the GPU ids when every id has the ``cloud`` form
  ``{site}-n{node}-g{k}`` (:func:`geoplan.model.generators.cloud_node_of`); otherwise
  it is detected from the links, site by site: with ``b_max`` the fastest effective
  bandwidth between two GPUs of the site, a link is *fast* when it is at least
  ``b_max / 2`` in both directions, and GPUs are put, in index order, into the
  first node all of whose members they are fast with (a greedy partition into
  cliques of the fast graph; in the generated and preset pools the fast links are
  exactly the in-node ones, NVLink against a NIC share). A site whose links are all
  within a factor 2 of each other has no tier structure and is one node.
* A **device group** is the GPUs of one class on one node, in index order.

TP groups (:func:`tp_groups`) are cut from a list of GPUs node by node, so a TP group
stays inside a node when the node has t GPUs left, and never leaves a site.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from geoplan.cost.hybrid_coefficients import HybridCoefficients
from geoplan.errors import InputError
from geoplan.model.generators import cloud_node_of
from geoplan.model.instance import Instance

__all__ = ["DeviceGroup", "device_classes", "device_groups", "node_labels", "tp_groups"]

#: Links at least this fraction of the site's fastest link are the in-node tier.
FAST_TIER = 0.5


@dataclass(frozen=True)
class DeviceGroup:
    """The GPUs (indices, ascending) of one class on one node."""

    cls: int  # class number (first appearance order)
    site: int  # HybridCoefficients.site number
    node: int  # node label (unique over the pool)
    gpus: tuple[int, ...]
    tflops: float  # effective TFLOPS of each GPU
    memory_gb: float  # effective memory of each GPU


def _class_keys(instance: Instance) -> list[tuple[object, ...]]:
    site = HybridCoefficients.of(instance).site
    # Peak TFLOPS and memory join the type so that GPUs without a type label group right.
    return [(g.type, g.peak_tflops, g.memory_gb, g.compute_util, g.memory_util, int(site[i]))
            for i, g in enumerate(instance.gpus)]


def device_classes(instance: Instance) -> list[tuple[int, ...]]:
    """GPU indices grouped by (type, compute_util, memory_util, site), classes in order of
    their first GPU."""
    by: dict[tuple[object, ...], list[int]] = {}
    for i, k in enumerate(_class_keys(instance)):
        by.setdefault(k, []).append(i)
    return [tuple(v) for v in by.values()]


def node_labels(instance: Instance) -> np.ndarray:
    """A node label per GPU (see the module docstring for the rule); labels are unique
    over the pool and numbered in order of first appearance."""
    c = HybridCoefficients.of(instance)
    n = instance.n
    raw: list[tuple[int, int]] = []
    try:
        raw = [(int(c.site[i]), cloud_node_of(g.id)) for i, g in enumerate(instance.gpus)]
    except InputError:
        raw = _detected(c, n)
    labels = np.empty(n, dtype=np.int64)
    seen: dict[tuple[int, int], int] = {}
    for i, key in enumerate(raw):
        labels[i] = seen.setdefault(key, len(seen))
    return labels


def _detected(c: HybridCoefficients, n: int) -> list[tuple[int, int]]:
    bw = c.bw_gbps
    out: list[tuple[int, int]] = [(0, 0)] * n
    for s in sorted(set(c.site.tolist())):
        members = [i for i in range(n) if c.site[i] == s]
        vals = [min(bw[i, j], bw[j, i]) for i in members for j in members if i != j]
        b_max = max(vals, default=0.0)
        b_min = min(vals, default=0.0)
        if b_max <= 0.0 or b_min >= FAST_TIER * b_max:
            for i in members:
                out[i] = (s, 0)
            continue
        nodes: list[list[int]] = []
        for i in members:
            for node in nodes:
                if all(min(bw[i, j], bw[j, i]) >= FAST_TIER * b_max for j in node):
                    node.append(i)
                    break
            else:
                nodes.append([i])
        for k, node in enumerate(nodes):
            for i in node:
                out[i] = (s, k)
    return out


def device_groups(instance: Instance) -> list[DeviceGroup]:
    """Every (class, node) group of GPUs, ordered by class then node label."""
    c = HybridCoefficients.of(instance)
    nodes = node_labels(instance)
    groups: list[DeviceGroup] = []
    for k, members in enumerate(device_classes(instance)):
        by_node: dict[int, list[int]] = {}
        for i in members:
            by_node.setdefault(int(nodes[i]), []).append(i)
        for node in sorted(by_node):
            g = tuple(by_node[node])
            groups.append(DeviceGroup(k, int(c.site[g[0]]), node, g, float(c.tflops[g[0]]),
                                      float(c.mem_cap[g[0]]) / 1e9))
    return groups


def tp_groups(groups: Sequence[DeviceGroup], t: int) -> list[tuple[int, ...]]:
    """TP groups of ``t`` GPUs cut from ``groups`` (all of one class, hence one site):
    whole groups of t inside each node first, then the nodes' leftovers pooled (so a TP
    group spans nodes only when no node has t GPUs left). GPUs that do not fill a group
    are left out."""
    if t < 1:
        raise ValueError("t must be positive")
    if len({g.site for g in groups}) > 1:
        raise ValueError("TP groups never cross sites")
    out: list[tuple[int, ...]] = []
    rest: list[int] = []
    for g in groups:
        k = len(g.gpus) // t * t
        out += [g.gpus[a:a + t] for a in range(0, k, t)]
        rest += g.gpus[k:]
    out += [tuple(rest[a:a + t]) for a in range(0, len(rest) // t * t, t)]
    return out
