"""The sites shorthand and the network presets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoplan.errors import InputError
from geoplan.model.network import (
    AWS_REGIONS,
    DTFM_AWS_LINKS,
    REVERSE_BANDWIDTH_FACTOR,
    REVERSE_LATENCY_FACTOR,
    THREE_SITE_FACTORS,
    aws_link,
    aws_regions,
    expand_network,
    site_label,
    three_site,
)


def _gpus(counts: dict[str, int]) -> list[dict]:
    return [{"id": f"{s.lower()}{k}", "site": s} for s, c in counts.items() for k in range(c)]


def _by_pair(links: list[dict]) -> dict[tuple[str, str], dict]:
    return {(e["src"], e["dst"]): e for e in links}


@settings(max_examples=80, deadline=None)
@given(
    counts=st.lists(st.integers(0, 5), min_size=1, max_size=4),
    listed=st.lists(st.booleans(), min_size=6, max_size=6),
    with_default=st.booleans(),
    with_intra=st.booleans(),
)
def test_link_counts(
    counts: list[int], listed: list[bool], with_default: bool, with_intra: bool
) -> None:
    sites = {site_label(i): c for i, c in enumerate(counts)}
    labels = list(sites)
    pairs = [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :]]
    chosen = [p for p, keep in zip(pairs, listed, strict=False) if keep]
    spec: dict = {
        "inter": [
            {"a": a, "b": b, "latency_ms": 10, "bandwidth_gbps": 5, "latency_ba_ms": 20}
            for a, b in chosen
        ],
        "default_inter": {"latency_ms": 50, "bandwidth_gbps": 1} if with_default else None,
    }
    if with_intra:
        spec["intra"] = {"latency_ms": 0.1, "bandwidth_gbps": 100}
    gpus = _gpus(sites)
    links = expand_network(gpus, spec)
    expected = sum(c * (c - 1) for c in counts) if with_intra else 0
    for a, b in pairs:
        if with_default or (a, b) in chosen:
            expected += 2 * sites[a] * sites[b]
    assert len(links) == expected
    assert len(_by_pair(links)) == len(links)  # no duplicates
    site_of = {g["id"]: g["site"] for g in gpus}
    for e in links:
        assert e["src"] != e["dst"] and e["util"] == 1.0
        pair = (site_of[e["src"]], site_of[e["dst"]])
        if pair in chosen:
            assert (e["latency_ms"], e["bandwidth_gbps"]) == (10, 5)
        elif pair[::-1] in chosen:
            assert (e["latency_ms"], e["bandwidth_gbps"]) == (20, 5)  # b -> a
        elif pair[0] != pair[1]:
            assert (e["latency_ms"], e["bandwidth_gbps"]) == (50, 1)


def test_every_cross_site_pair_in_both_directions() -> None:
    gpus = _gpus({"A": 2, "B": 3})
    spec = {"inter": [{"a": "A", "b": "B", "latency_ms": 1, "bandwidth_gbps": 2}]}
    pairs = set(_by_pair(expand_network(gpus, spec)))
    for a in ("a0", "a1"):
        for b in ("b0", "b1", "b2"):
            assert (a, b) in pairs and (b, a) in pairs
    assert len(pairs) == 12  # no intra links without "intra"


def test_intra_by_site_and_util() -> None:
    gpus = _gpus({"A": 2, "B": 2})
    spec = {
        "intra": {"latency_ms": 0.1, "bandwidth_gbps": 100},
        "intra_by_site": {"B": {"latency_ms": 0.01, "bandwidth_gbps": 400, "util": 0.5}},
        "inter": [{"a": "B", "b": "A", "latency_ms": 3, "bandwidth_gbps": 4, "util_ba": 0.25}],
    }
    links = _by_pair(expand_network(gpus, spec))
    assert links[("a0", "a1")]["bandwidth_gbps"] == 100
    assert (links[("b1", "b0")]["bandwidth_gbps"], links[("b1", "b0")]["util"]) == (400, 0.5)
    assert links[("b0", "a0")]["util"] == 1.0 and links[("a0", "b0")]["util"] == 0.25


def test_unused_sites_are_ignored() -> None:
    spec = aws_regions()
    gpus = [{"id": "o", "site": "Oregon"}, {"id": "t", "site": "Tokyo"}]
    links = _by_pair(expand_network(gpus, spec))
    assert set(links) == {("o", "t"), ("t", "o")}
    assert links[("o", "t")]["latency_ms"] == 96 and links[("t", "o")]["bandwidth_gbps"] == 0.523


@pytest.mark.parametrize(
    ("gpus", "spec", "field"),
    [
        ([{"id": "x"}], {}, "gpus[0].site"),
        ([{"id": "x", "site": "A"}], {"intra": {"latency_ms": 1}}, "network.intra.bandwidth_gbps"),
        (
            [{"id": "x", "site": "A"}],
            {"intra": {"latency_ms": 1, "bandwidth_gbps": 0}},
            "network.intra.bandwidth_gbps",
        ),
        (
            [{"id": "x", "site": "A"}],
            {"intra": {"latency_ms": -1, "bandwidth_gbps": 1}},
            "network.intra.latency_ms",
        ),
        ([{"id": "x", "site": "A"}], {"intrra": {}}, "network"),
        (
            [{"id": "x", "site": "A"}],
            {"inter": [{"a": "A", "b": "A", "latency_ms": 1, "bandwidth_gbps": 1}]},
            "network.inter[0].b",
        ),
        (
            [{"id": "x", "site": "A"}],
            {
                "inter": [
                    {"a": "A", "b": "B", "latency_ms": 1, "bandwidth_gbps": 1},
                    {"a": "B", "b": "A", "latency_ms": 1, "bandwidth_gbps": 1},
                ]
            },
            "network.inter[1]",
        ),
        (
            [{"id": "x", "site": "A"}],
            {"default_inter": {"latency_ms": 1, "bandwidth_gbps": 1, "util": 1.5}},
            "network.default_inter.util",
        ),
    ],
)
def test_errors_name_the_field(gpus: list, spec: dict, field: str) -> None:
    with pytest.raises(InputError) as exc:
        expand_network(gpus, spec)
    assert exc.value.field == field


def test_site_labels() -> None:
    assert [site_label(i) for i in (0, 1, 25, 26)] == ["A", "B", "Z", "S26"]


# --------------------------------------------------------------------------- three-site preset


@pytest.mark.parametrize(("lat", "bw"), [(10.0, 10.0), (0.1, 0.5), (100.0, 100.0)])
def test_three_site_factors(lat: float, bw: float) -> None:
    spec = three_site(lat, bw, gpus_per_site=(1, 2, 2))
    assert spec["sites"] == {"A": 1, "B": 2, "C": 2}
    assert spec["intra"] == {"latency_ms": 0.1, "bandwidth_gbps": 100.0}
    links = _by_pair(expand_network(_gpus(spec["sites"]), spec))
    assert len(links) == 5 * 4
    assert THREE_SITE_FACTORS == {
        ("A", "B"): (1.0, 1.0),
        ("B", "C"): (0.8, 1.2),
        ("A", "C"): (1.5, 0.6),
    }
    for (a, b), (f_lat, f_bw) in THREE_SITE_FACTORS.items():
        fwd = links[(f"{a.lower()}0", f"{b.lower()}0")]
        back = links[(f"{b.lower()}0", f"{a.lower()}0")]
        assert fwd["latency_ms"] == pytest.approx(lat * f_lat)
        assert fwd["bandwidth_gbps"] == pytest.approx(bw * f_bw)
        assert back["latency_ms"] == pytest.approx(lat * f_lat * REVERSE_LATENCY_FACTOR)
        assert back["bandwidth_gbps"] == pytest.approx(bw * f_bw * REVERSE_BANDWIDTH_FACTOR)
        assert back["latency_ms"] > fwd["latency_ms"]  # asymmetric
    # A-C is the worst pair, B-C the best.
    ac, bc = links[("a0", "c0")], links[("b0", "c0")]
    assert ac["latency_ms"] > bc["latency_ms"] and ac["bandwidth_gbps"] < bc["bandwidth_gbps"]


def test_three_site_rejects_bad_counts() -> None:
    with pytest.raises(InputError):
        three_site(10, 10, gpus_per_site=(1, 2))


# --------------------------------------------------------------------------- DT-FM AWS table


def test_dtfm_table_complete_and_spot_values() -> None:
    assert len(AWS_REGIONS) == 10
    assert len(DTFM_AWS_LINKS) == 45
    for i, a in enumerate(AWS_REGIONS):
        for b in AWS_REGIONS[i + 1 :]:
            assert ((a, b) in DTFM_AWS_LINKS) != ((b, a) in DTFM_AWS_LINKS)
            assert aws_link(a, b) == aws_link(b, a)
    # Transcribed from DS3Lab/DT-FM scheduler/generate_sim_com_matrices.py.
    assert aws_link("Oregon", "Virginia") == (67, 0.79)
    assert aws_link("Virginia", "Ohio") == (11, 1.12)
    assert aws_link("Sydney", "Frankfurt") == (265, 0.328)
    assert aws_link("Ireland", "London") == (12, 1.09)
    assert aws_link("Seoul", "Singapore") == (74, 1.14)
    assert aws_link("Tokyo", "Tokyo") == (10.0, 2.0)
    with pytest.raises(InputError):
        aws_link("Oregon", "Mars")


def test_aws_regions_subset_spec() -> None:
    spec = aws_regions(["London", "Ireland", "Frankfurt"], intra_latency_ms=0.05)
    assert len(spec["inter"]) == 3
    gpus = _gpus({"London": 2, "Ireland": 1, "Frankfurt": 1})
    links = _by_pair(expand_network(gpus, spec))
    assert len(links) == 4 * 3
    assert links[("london0", "london1")]["latency_ms"] == 0.05
    assert links[("ireland0", "frankfurt0")]["latency_ms"] == 24
    with pytest.raises(InputError):
        aws_regions(["London", "London"])
