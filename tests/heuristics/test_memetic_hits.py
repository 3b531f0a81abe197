"""bench/memetic_hits.py: the stored optima regenerate, and the report reads the stored runs."""

from __future__ import annotations

from pathlib import Path

from bench.memetic_hits import (
    SETS,
    instance_keys,
    load_optima,
    load_runs,
    make_instance,
    report,
    report_large,
    table_row,
)


def test_stored_optima_belong_to_the_regenerated_instances() -> None:
    optima = load_optima(proven_only=False)
    keys = {k for name in SETS for k, *_ in instance_keys(name)}
    assert keys <= set(optima)  # every instance of both sets was attempted
    for k, family, n, layers, lam, seed in (x for name in SETS for x in instance_keys(name)):
        rec = optima[k]
        if rec.get("instance_hash"):
            assert make_instance(family, n, layers, lam, seed).fingerprint == \
                rec["instance_hash"], k
    assert all(r["status"] in ("optimal", "feasible") for r in optima.values())


def test_report_of_the_stored_runs() -> None:
    for name in SETS:
        rows = load_runs(name)
        assert rows and all(r["set"] == name for r in rows)
        text = report(name, rows)
        assert f"set {name}:" in text and "N=16:" in text and "N=32:" in text
        proven = load_optima()
        assert all(r["key"] in proven for r in rows)  # rates only against proofs
        assert all(r["hit"] == (r["objective"] <= r["optimum"] * (1 + 1e-9)) for r in rows)
    assert "within 1 %" in report_large(load_runs("large"))
    assert report("tune", []) == "tune: no stored runs"


def test_the_documented_hit_rates_are_the_stored_ones() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "memetic.md").read_text()
    for name in SETS:
        assert table_row(name, load_runs(name)) in doc, name
