"""The sites shorthand for networks, and named network presets.

A *network spec* describes links by site instead of by GPU pair::

    {"intra": {"latency_ms": 0.1, "bandwidth_gbps": 100},
     "intra_by_site": {"C": {"latency_ms": 0.05, "bandwidth_gbps": 200}},
     "inter": [{"a": "A", "b": "B", "latency_ms": 10, "bandwidth_gbps": 10,
                "latency_ba_ms": 11, "bandwidth_ba_gbps": 9}],
     "default_inter": null}

:func:`expand_network` turns it into directed links between every ordered pair of
GPUs, using each GPU's ``site`` label. ``a -> b`` uses ``latency_ms`` and
``bandwidth_gbps``; ``b -> a`` uses the ``*_ba_*`` values where given, else the same.
Each link spec may carry ``util`` (``util_ba`` for the reverse direction), default 1.
Pairs of sites not listed get no links unless ``default_inter`` is given; GPUs of
one site get ``intra_by_site[site]`` or else ``intra`` (no links if neither).
``sites`` (label -> GPU count) and ``name``/``source`` are informational.

Presets: :func:`three_site` (GeoTrain section 6.6) and :func:`aws_regions`, the
10-region AWS measurements published with DT-FM (Yuan et al. 2022).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from geoplan.errors import InputError

__all__ = [
    "AWS_REGIONS",
    "DTFM_AWS_LINKS",
    "DTFM_SAME_REGION",
    "DTFM_SOURCE",
    "REVERSE_BANDWIDTH_FACTOR",
    "REVERSE_LATENCY_FACTOR",
    "THREE_SITE_FACTORS",
    "LinkArrays",
    "aws_link",
    "aws_regions",
    "expand_network",
    "expand_network_arrays",
    "site_label",
    "three_site",
]

_SPEC_KEYS = frozenset(
    {"intra", "intra_by_site", "inter", "default_inter", "sites", "name", "source"}
)
_REVERSE_KEYS = (
    ("latency_ms", "latency_ba_ms"),
    ("bandwidth_gbps", "bandwidth_ba_gbps"),
    ("util", "util_ba"),
)


def _number(value: Any, where: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(where, value, "expected a finite number")
    if value < 0 or (positive and value == 0):
        raise InputError(where, value, "must be positive" if positive else "must be non-negative")
    return float(value)


def _link_params(spec: Any, where: str) -> tuple[float, float, float]:
    """(latency_ms, bandwidth_gbps, util) of one link spec, checked."""
    if not isinstance(spec, Mapping):
        raise InputError(where, spec, "expected an object with latency_ms and bandwidth_gbps")
    for key in ("latency_ms", "bandwidth_gbps"):
        if spec.get(key) is None:
            raise InputError(f"{where}.{key}", None, "required field is missing")
    u = spec.get("util")
    u = 1.0 if u is None else _number(u, f"{where}.util", positive=True)
    if u > 1:
        raise InputError(f"{where}.util", u, "must lie in (0, 1]")
    return (
        _number(spec["latency_ms"], f"{where}.latency_ms", positive=False),
        _number(spec["bandwidth_gbps"], f"{where}.bandwidth_gbps", positive=True),
        u,
    )


def _link(src: str, dst: str, params: tuple[float, float, float]) -> dict[str, Any]:
    lat, bw, util = params
    return {"src": src, "dst": dst, "bandwidth_gbps": bw, "util": util, "latency_ms": lat}


class LinkArrays(NamedTuple):
    """Directed links as columns: GPU indices (positions in the GPU list) and values.

    ``explicit`` holds canonical link dicts that follow the generated ones (the
    explicit ``links`` of an instance that also has a ``network``).
    """

    src: np.ndarray
    dst: np.ndarray
    bandwidth_gbps: np.ndarray
    latency_ms: np.ndarray
    util: np.ndarray
    explicit: list[Any] | None = None


def expand_network(
    gpus: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Directed links (canonical dicts) for ``gpus`` from the sites shorthand ``spec``.

    Links come in GPU order: for each source GPU, every destination in list order.
    Raises ``InputError`` for a GPU without a site, an unknown spec key, a site
    pair listed twice or a malformed link spec. Inter-site entries naming sites no
    GPU uses are ignored, so one spec (e.g. all AWS regions) serves many instances.
    """
    a = expand_network_arrays(gpus, spec)
    ids = [str(g["id"]) for g in gpus]
    return [
        _link(ids[s], ids[d], (lat, bw, u))
        for s, d, bw, lat, u in zip(
            a.src.tolist(),
            a.dst.tolist(),
            a.bandwidth_gbps.tolist(),
            a.latency_ms.tolist(),
            a.util.tolist(),
            strict=True,
        )
    ]


def expand_network_arrays(
    gpus: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]
) -> LinkArrays:
    """:func:`expand_network` as columns (vectorised over the GPU pairs), same order."""
    if not isinstance(spec, Mapping):
        raise InputError("network", spec, "expected an object (the sites shorthand)")
    unknown = sorted(set(spec) - _SPEC_KEYS)
    if unknown:
        raise InputError(
            "network", unknown[0], f"unknown key; known: {', '.join(sorted(_SPEC_KEYS))}"
        )

    site_of: list[str] = []
    for k, g in enumerate(gpus):
        if not isinstance(g, Mapping) or g.get("site") is None or g.get("id") is None:
            value = g.get("site") if isinstance(g, Mapping) else g
            raise InputError(f"gpus[{k}].site", value, "the network shorthand needs id and site")
        site_of.append(str(g["site"]))

    intra = spec.get("intra")
    intra_default = None if intra is None else _link_params(intra, "network.intra")
    by_site_raw = spec.get("intra_by_site") or {}
    if not isinstance(by_site_raw, Mapping):
        raise InputError("network.intra_by_site", by_site_raw, "expected an object site -> link")
    intra_by_site = {
        str(s): _link_params(v, f"network.intra_by_site.{s}") for s, v in by_site_raw.items()
    }
    default = spec.get("default_inter")
    default_params = None if default is None else _link_params(default, "network.default_inter")

    inter_raw = spec.get("inter") or []
    if not isinstance(inter_raw, list):
        raise InputError("network.inter", inter_raw, "expected a list of site pairs")
    table: dict[tuple[str, str], tuple[float, float, float]] = {}
    for k, e in enumerate(inter_raw):
        where = f"network.inter[{k}]"
        if not isinstance(e, Mapping) or e.get("a") is None or e.get("b") is None:
            raise InputError(where, e, "expected an object with sites a and b")
        a, b = str(e["a"]), str(e["b"])
        if a == b:
            raise InputError(f"{where}.b", b, "an inter-site entry needs two different sites")
        if (a, b) in table:
            raise InputError(where, f"{a}-{b}", "site pair listed twice")
        table[(a, b)] = _link_params(e, where)
        back = {**e}
        for fwd_key, back_key in _REVERSE_KEYS:
            if e.get(back_key) is not None:
                back[fwd_key] = e[back_key]
        table[(b, a)] = _link_params(back, f"{where} (b->a)")

    # Per ordered pair of sites: present?, latency, bandwidth, util.
    sites = list(dict.fromkeys(site_of))
    s_index = {s: k for k, s in enumerate(sites)}
    S = len(sites)
    present = np.zeros((S, S), dtype=bool)
    values = np.zeros((3, S, S))
    for i, si in enumerate(sites):
        for j, sj in enumerate(sites):
            if i == j:
                params = intra_by_site.get(si, intra_default)
            else:
                params = table.get((si, sj), default_params)
            if params is not None:
                present[i, j] = True
                values[:, i, j] = params
    g_site = np.array([s_index[s] for s in site_of], dtype=np.int64)
    n = len(g_site)
    mask = present[g_site[:, None], g_site[None, :]]
    mask[np.arange(n), np.arange(n)] = False
    src, dst = np.nonzero(mask)  # row-major: for each source, destinations in list order
    ss, ds = g_site[src], g_site[dst]
    return LinkArrays(
        src=src.astype(np.int64),
        dst=dst.astype(np.int64),
        bandwidth_gbps=values[1][ss, ds],
        latency_ms=values[0][ss, ds],
        util=values[2][ss, ds],
    )


def site_label(index: int) -> str:
    """Site label of the ``index``-th site: A, B, ..., Z, then S26, S27, ..."""
    return chr(ord("A") + index) if 0 <= index < 26 else f"S{index}"


# --------------------------------------------------------------------------- three-site preset

#: GeoTrain 6.6 cross-site factors (latency, bandwidth) relative to the base values,
#: for the forward direction (alphabetical order of the sites).
THREE_SITE_FACTORS: dict[tuple[str, str], tuple[float, float]] = {
    ("A", "B"): (1.0, 1.0),
    ("B", "C"): (0.8, 1.2),
    ("A", "C"): (1.5, 0.6),
}
#: geoplan's choice (the paper gives none): the reverse direction of each site pair
#: has 10 % more latency and 10 % less bandwidth than the forward one.
REVERSE_LATENCY_FACTOR = 1.1
REVERSE_BANDWIDTH_FACTOR = 0.9


def three_site(
    base_latency_ms: float = 10.0,
    base_bandwidth_gbps: float = 10.0,
    gpus_per_site: Sequence[int] = (2, 3, 3),
    intra_latency_ms: float = 0.1,
    intra_bandwidth_gbps: float = 100.0,
) -> dict[str, Any]:
    """The three-site topology of GeoTrain 6.6 as a network spec.

    Intra-site links 0.1 ms / 100 Gbps; cross-site A-B at 1.0x the base latency and
    bandwidth, B-C at 0.8x latency / 1.2x bandwidth, A-C at 1.5x latency / 0.6x
    bandwidth, each in the alphabetical direction; the reverse direction adds
    :data:`REVERSE_LATENCY_FACTOR` and :data:`REVERSE_BANDWIDTH_FACTOR`. Site A is
    meant for the weakest GPUs (paper narrative); ``gpus_per_site`` is recorded in
    the spec's ``sites`` entry for generators.
    """
    if len(gpus_per_site) != 3 or any(int(c) < 0 for c in gpus_per_site):
        raise InputError(
            "gpus_per_site", tuple(gpus_per_site), "expected three non-negative counts"
        )
    inter = []
    for (a, b), (f_lat, f_bw) in THREE_SITE_FACTORS.items():
        lat = base_latency_ms * f_lat
        bw = base_bandwidth_gbps * f_bw
        inter.append(
            {
                "a": a,
                "b": b,
                "latency_ms": round(lat, 6),
                "bandwidth_gbps": round(bw, 6),
                "latency_ba_ms": round(lat * REVERSE_LATENCY_FACTOR, 6),
                "bandwidth_ba_gbps": round(bw * REVERSE_BANDWIDTH_FACTOR, 6),
            }
        )
    return {
        "name": f"three-site-lat{base_latency_ms:g}-bw{base_bandwidth_gbps:g}",
        "source": "GeoTrain section 6.6 (reverse-direction factors chosen by geoplan)",
        "sites": {s: int(c) for s, c in zip("ABC", gpus_per_site, strict=True)},
        "intra": {"latency_ms": intra_latency_ms, "bandwidth_gbps": intra_bandwidth_gbps},
        "inter": inter,
        "default_inter": None,
    }


# --------------------------------------------------------------------------- DT-FM AWS preset

DTFM_SOURCE = (
    "DS3Lab/DT-FM, scheduler/generate_sim_com_matrices.py, delay_bandwidth_dict "
    "(commit 69f05e50f475d509ebe4267c8f834f70e412c149); Yuan et al. 2022, "
    "Decentralized Training of Foundation Models in Heterogeneous Environments"
)

#: The ten AWS regions of the DT-FM table, in the table's order.
AWS_REGIONS: tuple[str, ...] = (
    "Oregon",
    "Virginia",
    "Ohio",
    "Tokyo",
    "Seoul",
    "Singapore",
    "Sydney",
    "London",
    "Frankfurt",
    "Ireland",
)

#: (delay ms, bandwidth Gbps) per region pair, transcribed from DT-FM; symmetric there.
DTFM_AWS_LINKS: dict[tuple[str, str], tuple[float, float]] = {
    ("Oregon", "Virginia"): (67, 0.79),
    ("Oregon", "Ohio"): (49, 1.10),
    ("Oregon", "Tokyo"): (96, 0.523),
    ("Oregon", "Seoul"): (124, 0.46),
    ("Oregon", "Singapore"): (163, 0.341),
    ("Oregon", "Sydney"): (139, 0.36),
    ("Oregon", "London"): (136, 0.42),
    ("Oregon", "Frankfurt"): (143, 0.404),
    ("Oregon", "Ireland"): (124, 0.482),
    ("Virginia", "Ohio"): (11, 1.12),
    ("Virginia", "Tokyo"): (143, 0.524),
    ("Virginia", "Seoul"): (172, 0.500),
    ("Virginia", "Singapore"): (230, 0.364),
    ("Virginia", "Sydney"): (197, 0.383),
    ("Virginia", "London"): (76, 1.16),
    ("Virginia", "Frankfurt"): (90, 1.02),
    ("Virginia", "Ireland"): (67, 1.05),
    ("Ohio", "Tokyo"): (130, 0.694),
    ("Ohio", "Seoul"): (159, 0.529),
    ("Ohio", "Singapore"): (197, 0.452),
    ("Ohio", "Sydney"): (185, 0.484),
    ("Ohio", "London"): (86, 1.05),
    ("Ohio", "Frankfurt"): (99, 0.799),
    ("Ohio", "Ireland"): (77, 1.14),
    ("Tokyo", "Seoul"): (34, 1.10),
    ("Tokyo", "Singapore"): (73, 1.01),
    ("Tokyo", "Sydney"): (100, 0.761),
    ("Tokyo", "London"): (210, 0.366),
    ("Tokyo", "Frankfurt"): (223, 0.36),
    ("Tokyo", "Ireland"): (199, 0.465),
    ("Seoul", "Singapore"): (74, 1.14),
    ("Seoul", "Sydney"): (148, 0.58),
    ("Seoul", "London"): (238, 0.342),
    ("Seoul", "Frankfurt"): (235, 0.358),
    ("Seoul", "Ireland"): (228, 0.335),
    ("Singapore", "Sydney"): (92, 0.816),
    ("Singapore", "London"): (169, 0.500),
    ("Singapore", "Frankfurt"): (155, 0.535),
    ("Singapore", "Ireland"): (179, 0.492),
    ("Sydney", "London"): (262, 0.326),
    ("Sydney", "Frankfurt"): (265, 0.328),
    ("Sydney", "Ireland"): (254, 0.344),
    ("London", "Frankfurt"): (14, 1.14),
    ("London", "Ireland"): (12, 1.09),
    ("Frankfurt", "Ireland"): (24, 1.08),
}

#: DT-FM's simulation value between two machines of the same region (10 ms, 2 Gbps).
DTFM_SAME_REGION: tuple[float, float] = (10.0, 2.0)


def aws_link(a: str, b: str) -> tuple[float, float]:
    """(delay ms, bandwidth Gbps) between two AWS regions of the DT-FM table."""
    for r in (a, b):
        if r not in AWS_REGIONS:
            raise InputError("region", r, f"unknown AWS region; known: {', '.join(AWS_REGIONS)}")
    if a == b:
        return DTFM_SAME_REGION
    return DTFM_AWS_LINKS.get((a, b)) or DTFM_AWS_LINKS[(b, a)]


def aws_regions(
    regions: Sequence[str] | None = None,
    intra_latency_ms: float = DTFM_SAME_REGION[0],
    intra_bandwidth_gbps: float = DTFM_SAME_REGION[1],
) -> dict[str, Any]:
    """Network spec over AWS regions (GPU sites named like ``"Oregon"``), from DT-FM.

    Inter-region links are symmetric, as published. Same-region links default to
    DT-FM's simulation assumption (10 ms, 2 Gbps); pass faster values for GPUs in
    one cluster.
    """
    chosen = tuple(AWS_REGIONS if regions is None else regions)
    if len(set(chosen)) != len(chosen):
        raise InputError("regions", list(chosen), "regions must be distinct")
    inter = []
    for i, a in enumerate(chosen):
        for b in chosen[i + 1 :]:
            lat, bw = aws_link(a, b)
            inter.append({"a": a, "b": b, "latency_ms": float(lat), "bandwidth_gbps": float(bw)})
    return {
        "name": "aws-dtfm",
        "source": DTFM_SOURCE,
        "intra": {"latency_ms": intra_latency_ms, "bandwidth_gbps": intra_bandwidth_gbps},
        "inter": inter,
        "default_inter": None,
    }
