"""The stored benchmark results still price to the same numbers under today's code.

Every stored row with a plan is re-priced: its instance regenerated from the
recorded spec (seeded generators), its recorded lambda and normalisers applied,
and the plan evaluated. T_iter, E_iter and the objective must match what the
row recorded, and the Metis-default normalisers recomputed from scratch must
match the recorded ones. A change to the cost model that moves any stored
price fails here.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from geoplan.cost import evaluate
from geoplan.cost.normalise import baseline_normalisers
from geoplan.model import generators as gen
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "session-full"


def _rows() -> list[dict[str, Any]]:
    path = RESULTS / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _build(spec: dict[str, Any]) -> dict[str, Any]:
    kw = {k: v for k, v in spec.items() if k not in ("generator", "normalise_by")}
    g = spec["generator"]
    if g in ("paper", "geo", "metro", "cloud"):
        return gen.by_family(g, kw.pop("n"), kw.pop("layers"), kw.pop("seed"), **kw)
    if g == "table7":
        return gen.table7(**kw)
    if g == "three_site":
        return gen.three_site_instance(kw.pop("base_latency_ms"), kw.pop("base_bandwidth_gbps"),
                                       **kw)
    raise AssertionError(f"unknown generator {g}")


@cache
def _instance(spec_json: str) -> Instance:
    return Instance.from_dict(_build(json.loads(spec_json)))


ROWS = [r for r in _rows() if r.get("plan")]


def test_there_are_stored_plans() -> None:
    assert len(ROWS) > 500


@pytest.mark.parametrize("chunk", range(4))
def test_stored_plans_price_the_same(chunk: int) -> None:
    for r in ROWS[chunk::4]:
        inst = _instance(json.dumps(r["instance_spec"], sort_keys=True))
        inst = inst.with_objective(lam=r["lambda"], t_ref_ms=r["t_ref_ms"], e_ref_j=r["e_ref_j"])
        ev = evaluate(inst, Plan.from_dict(r["plan"]))
        where = f"{r['experiment']} {r['instance']} {r['label']} seed {r['seed']}"
        assert ev.t_iter_ms == pytest.approx(r["t_iter_ms"], rel=1e-12), where
        assert ev.e_iter_j == pytest.approx(r["e_iter_j"], rel=1e-12), where
        assert ev.objective == pytest.approx(r["objective"], rel=1e-12), where


def test_metis_default_normalisers_are_unchanged() -> None:
    seen: set[str] = set()
    for r in _rows():
        if r["normalised_by"] != "metis-default" or r.get("t_ref_ms") is None:
            continue
        key = json.dumps(r["instance_spec"], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        t_ref, e_ref = baseline_normalisers(_instance(key))
        assert t_ref == pytest.approx(r["t_ref_ms"], rel=1e-12), r["instance"]
        assert e_ref == pytest.approx(r["e_ref_j"], rel=1e-12), r["instance"]
    assert len(seen) > 20
