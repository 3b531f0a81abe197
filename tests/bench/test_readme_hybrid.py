"""The README's hybrid part: generated from bench/results/hybrid once a run is stored there,
and left out (the rest of the section unchanged) while nothing is."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hybrid_bench_rows import INFO, _rows

from bench.report import readme


def _store(tmp_path: Path) -> Path:
    out = tmp_path / "hybrid"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    info = {**INFO, "title": "Hybrid stages", "profile": "full", "budgets": [60]}
    (out / "manifest.json").write_text(json.dumps({"order": ["hybrid"],
                                                   "experiments": {"hybrid": info}}))
    return out


def test_no_stored_hybrid_run_means_no_hybrid_part(tmp_path: Path) -> None:
    assert readme.hybrid_facts(tmp_path / "absent") == []
    assert readme.hybrid_lines([]) == []


def test_a_stored_hybrid_run_gives_its_summary(tmp_path: Path) -> None:
    items = readme.hybrid_facts(_store(tmp_path))
    assert [it["experiment"] for it in items] == ["hybrid"]
    text = "\n".join(readme.hybrid_lines(items))
    assert "**Hybrid stages** (`bench/experiments/hybrid.toml`, 2 instances, 60 s per run" in text
    assert "Only hybrid plans hold the model on: i2" in text
    # every number quoted comes from the computed facts
    body = re.sub(r"\[[^\]]*\]\([^)]*\)|`[^`]*`", " ", text)
    computed = set(re.findall(r"\d+(?:\.\d+)?", json.dumps(items, ensure_ascii=False)))
    assert set(re.findall(r"\d+(?:\.\d+)?", body)) <= computed
