"""The README's proofs tables: generated from bench/results/proofs once a run is stored there,
and left out (the rest of the section unchanged) while nothing is."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench.report import readme


def _run(label: str, lam: float, status: str, objective: float, bound: float | None,
         trace: list, wall: float) -> dict:
    name = f"geo-n32-l32-s31-lam{lam:g}"
    return {"experiment": "proofs", "profile": "full", "run_key": f"{label}-{name}",
            "label": label, "solver": {"MILP": "milp", "sliced MILP": "sliced"}[label],
            "instance": name, "seed": 0, "budget_s": 120.0, "status": status,
            "objective": objective, "lower_bound": bound, "wall_s": wall, "n": 32,
            "layers": 32, "lambda": lam, "trace": trace,
            "instance_spec": {"generator": "geo", "seed": 31, "n": 32, "layers": 32, "lam": lam}}


def _store(tmp_path: Path) -> Path:
    out = tmp_path / "proofs"
    out.mkdir()
    rows = [_run("MILP", 1.0, "optimal", 105.0, 105.0,
                 [[1.0, 110.0, None], [12.0, 105.0, 105.0]], 12.0),
            _run("sliced MILP", 1.0, "feasible", 100.0, 99.5,
                 [[25.0, 100.0, 98.0], [60.0, 100.0, 99.5]], 120.1)]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the settings as the sweep records them, so the test does not depend on the shipped file
    info = {"name": "proofs", "title": "Proofs at scale", "profile": "full",
            "report": {"kind": "proofs"}, "budgets": [120],
            "solvers": [{"name": "milp", "label": "MILP"},
                        {"name": "sliced", "label": "sliced MILP"}],
            "instances": [{"name": "geo-n32-l32-s31-lam1"}]}
    (out / "manifest.json").write_text(json.dumps({"order": ["proofs"],
                                                   "experiments": {"proofs": info}}))
    return out


def test_no_stored_proofs_run_means_no_proofs_part(tmp_path: Path) -> None:
    assert readme.proofs_facts(tmp_path / "absent") == []
    assert readme.proofs_lines([]) == []


def test_a_stored_proofs_run_gives_its_table_and_summary(tmp_path: Path) -> None:
    items = readme.proofs_facts(_store(tmp_path))
    assert [it["experiment"] for it in items] == ["proofs"]
    text = "\n".join(readme.proofs_lines(items))
    assert "`bench/experiments/proofs.toml`" in text
    assert "| geo | 32 | 32 | 1 | optimal | 12.0 | 0.00 | 0.00 | 105 | 105 | feasible | — | " \
           "2.00 | 0.50 | 100 | 99.5 |" in text
    assert "- N = 32, L = 32: MILP proved 1 of 1 (slowest proof 12.0 s); sliced MILP proved " \
           "0 of 1, largest gap at 120 s 0.50 % (geo, λ = 1)." in text
    # every number quoted comes from the computed facts (as the section's own test checks)
    body = re.sub(r"\[[^\]]*\]\([^)]*\)|`[^`]*`", " ", text)
    computed = set(re.findall(r"\d+(?:\.\d+)?", json.dumps(items, ensure_ascii=False)))
    assert set(re.findall(r"\d+(?:\.\d+)?", body)) <= computed


def test_the_section_appends_the_proofs_tables_to_the_stored_one(tmp_path: Path) -> None:
    f = {**readme.facts(proofs=_store(tmp_path)), "hybrid": []}  # the hybrid part comes after
    section = readme.results_section(f=f)
    without = readme.results_section(f={**f, "proofs": []})
    assert section.startswith(without + "\n\n**Proofs at scale")
    assert "| family | N | L | λ | MILP status |" in section
