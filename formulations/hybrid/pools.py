"""Class-structured pools for measuring the exact hybrid models (docs/hybrid-exact.md).

:func:`class_pool_instance` builds the instance dict of a cluster of real node
products (:data:`geoplan.model.presets.NODE_CLASSES`) over AWS regions, with the
links of :mod:`geoplan.model.presets` (in-node link, per-GPU NIC share inside a
region, the DT-FM table between regions): regions x node products x nodes per
group, e.g. 4 x 2 x 1 = 64 GPUs of 8-GPU nodes. Every (region, product) is one
class of identical nodes, so the exact models apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from geoplan.model import presets
from geoplan.model.catalog import model_shape

__all__ = ["DEFAULT_PRODUCTS", "DEFAULT_REGIONS", "class_pool_instance"]

DEFAULT_REGIONS = ("us-east-1", "us-east-2", "us-west-2", "eu-west-1")
DEFAULT_PRODUCTS = ("aws-p4de.24xlarge", "aws-p5.48xlarge")


def class_pool_instance(
    nodes_per_group: int,
    *,
    regions: Sequence[str] = DEFAULT_REGIONS,
    products: Sequence[str] = DEFAULT_PRODUCTS,
    model: str = "gpt3-6.7b",
    batch_size: int = 64,
    micro_batch_choices: Sequence[int] = (1, 2, 4, 8),
    lam: float = 1.0,
    **training: Any,
) -> dict[str, Any]:
    """The instance dict: ``len(regions) x len(products) x nodes_per_group`` nodes."""
    groups = tuple(presets.NodeGroup(r, presets.NODE_CLASSES[p], nodes_per_group)
                   for r in regions for p in products)
    c = presets.ClusterPreset(f"pool-{len(regions)}r{len(products)}p{nodes_per_group}n",
                              "class-structured measurement pool", groups)
    # The presets' own GPU and link builders (the same numbers as every preset).
    gpus, group_of = presets._gpus(c)
    shape = model_shape(model)
    return {
        "name": f"{c.name}-{shape.name}-b{batch_size}",
        "gpus": gpus,
        "links": presets._links(c, [g["id"] for g in gpus], group_of),
        "model": shape.model_fields(),
        "training": {
            "batch_size": batch_size,
            "micro_batch_size": min(micro_batch_choices),
            "bytes_per_value": 2,
            "activation_factor": 17,
            "backward_factor": 2,
            "zero": 0,
            "zero_choices": [0, 1, 2],
            "max_tp": 8,
            "micro_batch_choices": list(micro_batch_choices),
            "recompute_choices": ["none", "full"],
            **training,
        },
        "objective": {"lambda": float(lam), "t_ref_ms": None, "e_ref_j": None},
    }
