"""Catalog of GPU types and model shapes, and the shorthand expander for instances.

Every figure carries the public source it was taken from (see ``docs/catalog.md``).
GPU ``peak_tflops`` is the *dense* (no structured sparsity) BF16 tensor throughput,
or FP16 where the part has no BF16 (V100, T4). ``idle_w`` defaults to 15 % of the
TDP, the rule GeoTrain uses in section 6.7; the three GPUs of the paper's Table 7
carry the paper's rounded idle powers (25, 40 and 60 W) instead.

:func:`expand_instance_dict` turns the catalog and sites shorthands into the
canonical instance dict of ``formats.md``; canonical dicts pass through unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from geoplan.errors import InputError
from geoplan.model.network import LinkArrays, expand_network, expand_network_arrays

__all__ = [
    "GPU_TYPES",
    "IDLE_FRACTION_OF_TDP",
    "MODEL_SHAPES",
    "GPUType",
    "ModelShape",
    "expand_instance_dict",
    "gpu_type",
    "model_shape",
]

#: Idle power as a fraction of TDP when a datasheet gives none (GeoTrain 6.7).
IDLE_FRACTION_OF_TDP = 0.15


@dataclass(frozen=True)
class GPUType:
    """A GPU model: dense BF16/FP16 tensor TFLOPS, memory (GB), TDP and idle power (W)."""

    name: str
    peak_tflops: float
    memory_gb: float
    tdp_w: float
    idle_w: float | None = None  # None: IDLE_FRACTION_OF_TDP * tdp_w
    source: str = ""

    def __post_init__(self) -> None:
        if self.idle_w is None:
            object.__setattr__(self, "idle_w", round(IDLE_FRACTION_OF_TDP * self.tdp_w, 2))

    @property
    def active_w(self) -> float:
        """Active power used by the cost model: the rated TDP (GeoTrain 6.7)."""
        return self.tdp_w

    def gpu_fields(self) -> dict[str, float]:
        """The instance fields this type supplies: peak_tflops, memory_gb, idle_w, active_w."""
        return {
            "peak_tflops": self.peak_tflops,
            "memory_gb": self.memory_gb,
            "idle_w": float(self.idle_w or 0.0),
            "active_w": self.active_w,
        }


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only Transformer shape: layers, hidden size, sequence length, vocabulary."""

    name: str
    layers: int
    hidden: int
    seq_len: int
    vocab: int
    source: str = ""

    def model_fields(self) -> dict[str, int]:
        """The ``model`` fields of an instance."""
        return {
            "layers": self.layers,
            "hidden": self.hidden,
            "seq_len": self.seq_len,
            "vocab": self.vocab,
        }


# --------------------------------------------------------------------------- GPU catalog

_A100_DS = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_A100_40_DS = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet.pdf"
)
_GEOTRAIN_67 = "; idle power as in GeoTrain section 6.7 (Table 7)"

GPU_TYPES: dict[str, GPUType] = {
    g.name: g
    for g in (
        GPUType("A100-SXM-80GB", 312.0, 80.0, 400.0, 60.0, _A100_DS + _GEOTRAIN_67),
        GPUType("A100-PCIe-40GB", 312.0, 40.0, 250.0, 40.0, _A100_40_DS + _GEOTRAIN_67),
        GPUType(
            "A30",
            165.0,
            24.0,
            165.0,
            25.0,
            "https://www.nvidia.com/en-us/data-center/products/a30-gpu/" + _GEOTRAIN_67,
        ),
        GPUType(
            "H100-SXM-80GB",
            989.0,
            80.0,
            700.0,
            source="https://www.nvidia.com/en-us/data-center/h100/",
        ),
        GPUType(
            "A40",
            149.7,
            48.0,
            300.0,
            source="https://images.nvidia.com/content/Solutions/data-center/a40/"
            "nvidia-a40-datasheet.pdf",
        ),
        GPUType("L4", 121.0, 24.0, 72.0, source="https://www.nvidia.com/en-us/data-center/l4/"),
        GPUType(
            "V100-SXM2-32GB",
            125.0,
            32.0,
            300.0,
            source="https://images.nvidia.com/content/technologies/volta/pdf/"
            "volta-v100-datasheet-update-us-1165301-r5.pdf",
        ),
        GPUType(
            "T4", 65.0, 16.0, 70.0, source="https://www.nvidia.com/en-us/data-center/tesla-t4/"
        ),
        GPUType(
            "MI250X",
            383.0,
            128.0,
            560.0,
            source="https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html",
        ),
        GPUType(
            "MI300X",
            1307.4,
            192.0,
            750.0,
            source="https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
        ),
    )
}


# --------------------------------------------------------------------------- model catalog

_GPT3 = "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1 (arXiv:2005.14165)"
_LLAMA2 = "Touvron et al. 2023, Llama 2 (arXiv:2307.09288); https://huggingface.co/meta-llama/"
_LLAMA3 = "Llama 3 model card and config, https://huggingface.co/meta-llama/"

MODEL_SHAPES: dict[str, ModelShape] = {
    m.name: m
    for m in (
        ModelShape(
            "geotrain-h2048",
            12,
            2048,
            2048,
            50257,
            "GeoTrain Tables 3-7 (L=12, H=2048); T and V chosen by geoplan (GPT-2/3 values)",
        ),
        ModelShape("gpt3-125m", 12, 768, 2048, 50257, _GPT3),
        ModelShape("gpt3-350m", 24, 1024, 2048, 50257, _GPT3),
        ModelShape("gpt3-760m", 24, 1536, 2048, 50257, _GPT3),
        ModelShape("gpt3-1.3b", 24, 2048, 2048, 50257, _GPT3),
        ModelShape("gpt3-2.7b", 32, 2560, 2048, 50257, _GPT3),
        ModelShape("gpt3-6.7b", 32, 4096, 2048, 50257, _GPT3),
        # Table 2.1 prints d_model = 5140; its own n_heads * d_head = 40 * 128 = 5120.
        ModelShape("gpt3-13b", 40, 5120, 2048, 50257, _GPT3 + "; d_model 5120, see docs"),
        ModelShape("gpt3-175b", 96, 12288, 2048, 50257, _GPT3),
        ModelShape("llama2-7b", 32, 4096, 4096, 32000, _LLAMA2 + "Llama-2-7b-hf"),
        ModelShape("llama2-13b", 40, 5120, 4096, 32000, _LLAMA2 + "Llama-2-13b-hf"),
        ModelShape("llama2-70b", 80, 8192, 4096, 32000, _LLAMA2 + "Llama-2-70b-hf"),
        ModelShape("llama3-8b", 32, 4096, 8192, 128256, _LLAMA3 + "Meta-Llama-3-8B"),
        ModelShape("llama3-70b", 80, 8192, 8192, 128256, _LLAMA3 + "Meta-Llama-3-70B"),
    )
}


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


_GPU_BY_KEY = {_norm(k): v for k, v in GPU_TYPES.items()}
_MODEL_BY_KEY = {_norm(k): v for k, v in MODEL_SHAPES.items()}


def gpu_type(name: str, where: str = "gpu type") -> GPUType:
    """Look up a GPU type (case-, space- and underscore-insensitive).

    Raises :class:`~geoplan.errors.InputError` naming the known types.
    """
    found = _GPU_BY_KEY.get(_norm(name)) if isinstance(name, str) else None
    if found is None:
        raise InputError(where, name, f"unknown GPU type; known: {', '.join(GPU_TYPES)}")
    return found


def model_shape(name: str, where: str = "model preset") -> ModelShape:
    """Look up a model shape (case-, space- and underscore-insensitive).

    Raises :class:`~geoplan.errors.InputError` naming the known presets.
    """
    found = _MODEL_BY_KEY.get(_norm(name)) if isinstance(name, str) else None
    if found is None:
        raise InputError(where, name, f"unknown model preset; known: {', '.join(MODEL_SHAPES)}")
    return found


# --------------------------------------------------------------------------- shorthand expansion

_GPU_FILLED = ("peak_tflops", "memory_gb", "idle_w", "active_w")


def expand_instance_dict(d: Mapping[str, Any], *, columnar: bool = False) -> dict[str, Any]:
    """Return a new instance dict with the catalog and sites shorthands expanded.

    * a GPU whose ``type`` names a catalog GPU gets its missing ``peak_tflops``,
      ``memory_gb``, ``idle_w`` and ``active_w`` (= TDP) from the catalog; a GPU
      missing them whose type is unknown raises an ``InputError``;
    * ``"model": {"preset": NAME, ...}`` takes layers, hidden, seq_len and vocab from
      the catalog, explicit keys overriding them;
    * a ``"network"`` key (the sites shorthand of :mod:`geoplan.model.network`) becomes
      directed ``links``; explicit ``links`` are kept and win over generated ones
      for the same ``(src, dst)``.

    The input is not modified; a canonical dict comes back equal to itself.
    Non-dict parts are left for :meth:`Instance.from_dict` to report. With
    ``columnar=True`` generated links come back as one
    :class:`~geoplan.model.network.LinkArrays` (explicit links in its ``explicit``),
    which :meth:`Instance.from_dict` reads without building a dict per link. The
    (possibly huge) ``links`` list is shared with the input, not copied.
    """
    out = {k: (v if k == "links" else copy.deepcopy(v)) for k, v in dict(d).items()}

    gpus = out.get("gpus")
    if isinstance(gpus, list):
        for k, g in enumerate(gpus):
            if not isinstance(g, dict) or all(f in g for f in _GPU_FILLED):
                continue
            t = g.get("type")
            if t is None:
                continue  # the loader reports the missing fields
            spec = gpu_type(t, where=f"gpus[{k}].type")
            for key, value in spec.gpu_fields().items():
                g.setdefault(key, value)

    model = out.get("model")
    if isinstance(model, dict) and "preset" in model:
        preset = model.pop("preset")
        filled = model_shape(preset, where="model.preset").model_fields()
        filled.update(model)
        out["model"] = filled

    if "network" in out:
        spec = out.pop("network")
        if spec is not None:
            gpu_list = gpus if isinstance(gpus, list) else []
            explicit = out.get("links") or []
            if columnar and isinstance(explicit, list):
                out["links"] = _merge_columnar(gpu_list, expand_network_arrays(gpu_list, spec),
                                               explicit)
                return out
            generated = expand_network(gpu_list, spec)
            if not isinstance(explicit, list):
                out["links"] = explicit  # not a list: leave it for the loader to reject
            else:
                given = {(e.get("src"), e.get("dst")) for e in explicit if isinstance(e, Mapping)}
                out["links"] = [
                    e for e in generated if (e["src"], e["dst"]) not in given
                ] + explicit
    return out


def _merge_columnar(gpus: list[Any], generated: LinkArrays, explicit: list[Any]) -> LinkArrays:
    """Generated links minus the pairs that explicit links give, then the explicit ones."""
    if explicit:
        index = {str(g["id"]): k for k, g in enumerate(gpus)}
        n = len(gpus)
        given = [
            index[e["src"]] * n + index[e["dst"]]
            for e in explicit
            if isinstance(e, Mapping)
            and isinstance(e.get("src"), str)
            and isinstance(e.get("dst"), str)
            and e["src"] in index
            and e["dst"] in index
        ]
        if given:
            keep = ~np.isin(generated.src * n + generated.dst, np.array(given, dtype=np.int64))
            g = generated
            generated = LinkArrays(g.src[keep], g.dst[keep], g.bandwidth_gbps[keep],
                                   g.latency_ms[keep], g.util[keep])
    return generated._replace(explicit=list(explicit))
