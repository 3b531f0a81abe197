"""The README's Results section is what the stored results say.

The section is generated (``python -m bench.report.readme``); the first test fails
when README.md and the stored results disagree. The others recompute the section's
main figures from the raw rows, without the report code, so that a wrong generator
cannot agree with itself.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from bench.report import readme

RESULTS = readme.RESULTS / "results.jsonl"
OK = ("optimal", "feasible")


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    by_key = {}
    for line in RESULTS.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            by_key[r["run_key"]] = r
    return list(by_key.values())


@pytest.fixture(scope="module")
def section() -> str:
    return readme.current()


@pytest.fixture(scope="module")
def facts() -> readme.Facts:
    return readme.facts()


def _plain(text: str) -> str:
    return " ".join(text.split())


def test_readme_results_section_is_the_generated_one(section: str) -> None:
    assert section == readme.results_section(), (
        "README.md's Results section disagrees with bench/results/; regenerate it with "
        "`python -m bench.report.readme`")


def test_every_number_in_the_section_comes_from_the_facts(section: str,
                                                         facts: readme.Facts) -> None:
    """No number is typed into the template: each one appears among the computed facts
    (or in the file names and instance names the section quotes)."""
    body = re.sub(r"\[[^\]]*\]\([^)]*\)|`[^`]*`|\b(geo|metro)-n\d+-l\d+-s\d+", " ", section)
    quoted = set(re.findall(r"\d+(?:\.\d+)?", body))
    rendered = _plain(json.dumps(dict(facts), default=str))
    computed = set(re.findall(r"\d+(?:\.\d+)?", rendered))
    computed |= {f"{float(x):.{d}f}" for x in computed for d in (1, 2)} | {
        f"{float(x):g}" for x in computed}
    computed |= {"5", "6"}  # the table numbers "Table 5/6" and "Table 3"/"Table 4"
    computed |= {"3", "4", "0", "1"}  # Table 3, Table 4, "lambda from 0 to 1"
    assert quoted <= computed, sorted(quoted - computed)


def test_portfolio_against_the_best_exact_method(rows: list[dict], section: str) -> None:
    rerun = readme.PORTFOLIO / "results.jsonl"
    if rerun.exists():  # the section quotes the portfolio's re-run of the sweep
        by_key = {}
        for line in rerun.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                by_key[r["run_key"]] = r
        rows = list(by_key.values())
    cells: dict[tuple[str, float], dict[str, float | None]] = defaultdict(dict)
    for r in rows:
        if r["experiment"] != "anytime":
            continue
        key = (r["instance"], r["budget_s"])
        val = r["objective"] if r["status"] in OK else None
        if r["solver"] in ("milp", "cpsat", "bnb"):
            if val is not None:
                old = cells[key].get("exact")
                cells[key]["exact"] = val if old is None else min(old, val)
        elif r["solver"] == "portfolio" and r.get("label") in (None, "portfolio"):
            cells[key]["portfolio"] = val  # not portfolio-2t, quoted on its own
    judged = {k: v for k, v in cells.items() if v.get("exact") is not None}
    worse = [k for k, v in judged.items()
             if v.get("portfolio") is None or v["portfolio"] > v["exact"] * (1 + 1e-6)]
    text = _plain(section)
    assert f"in {len(judged) - len(worse)} of {len(judged)} instance-by-budget cells" in text
    assert (f"worse in {len(worse)}" if worse else "never worse") in text
    if not rerun.exists():
        assert len(judged) == 48 and len(worse) == 17  # the count, from the data
        assert "metro-n64-l32-s0 at 1 s, 353.9 vs B&B 332.5 ms" in text
    assert "at every budget" not in text


def test_memetic_match_counts_on_tables_5_and_6(rows: list[dict], section: str) -> None:
    t56 = [r for r in rows if r["experiment"] == "table5-6"]
    star = {}
    for r in t56:
        if r["status"] == "optimal":
            star[r["n"]] = min(star.get(r["n"], r["objective"]), r["objective"])
    matches: dict[int, list[bool]] = defaultdict(list)
    for r in t56:
        if r["label"] == "MA":
            matches[r["n"]].append(r["status"] in OK
                                   and abs(r["objective"] - star[r["n"]]) <= 1e-6 * star[r["n"]])
    by_count = defaultdict(list)
    for n in sorted(matches):
        by_count[f"{sum(matches[n])}/{len(matches[n])}"].append(n)
    text = _plain(section)
    for count, ns in by_count.items():
        words = ns[0] if len(ns) == 1 else ", ".join(map(str, ns[:-1])) + f" and {ns[-1]}"
        assert f"{count} seeds at N = {words}" in text


def test_gains_against_improved_metis(rows: list[dict], section: str) -> None:
    text = _plain(section)
    for table in ("table3", "table4"):
        gains = []
        tr = [r for r in rows if r["experiment"] == table]
        for inst in dict.fromkeys(r["instance"] for r in tr):
            ma = [r["objective"] for r in tr if r["instance"] == inst and r["label"] == "MA"]
            base = [r["objective"] for r in tr
                    if r["instance"] == inst and r["label"] == "impr. Metis"]
            gains.append(100 * (statistics.fmean(base) - min(ma)) / statistics.fmean(base))
        quoted = f"{min(gains):.1f}-{max(gains):.1f} %"
        assert quoted in text, (table, quoted)


def test_memetic_distance_to_best_known_at_5_s(rows: list[dict], section: str) -> None:
    at = [r for r in rows if r["experiment"] == "anytime"]
    known: dict[str, float] = {}
    for r in at:
        if r["status"] in OK:
            known[r["instance"]] = min(known.get(r["instance"], r["objective"]), r["objective"])
    ex = [100 * (r["objective"] - known[r["instance"]]) / known[r["instance"]]
          for r in at if r["label"] == "MA" and r["budget_s"] == 5 and r["status"] in OK]
    text = _plain(section)
    assert (f"a median {statistics.median(ex):.2f} % above the best known plan "
            f"(at most {max(ex):.2f} %)") in text


def test_pareto_energy_saving(rows: list[dict], section: str) -> None:
    t7 = [r for r in rows if r["experiment"] == "table7" and r["label"] == "MA"
          and r["status"] in OK]
    best: dict[float, dict] = {}
    for r in t7:
        if r["lambda"] not in best or r["objective"] < best[r["lambda"]]["objective"]:
            best[r["lambda"]] = r
    e1 = best[1.0]["e_iter_j"]
    saving = max(100 * (e1 - r["e_iter_j"]) / e1 for lam, r in best.items() if lam < 1)
    assert f"up to {saving:.1f} % less energy" in _plain(section)
    assert f"on {len(best[1.0]['plan']['stages'])} GPUs" in _plain(section)


def test_check_command(capsys: pytest.CaptureFixture, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert readme.main(["--check"]) == 0
    stale = tmp_path / "README.md"
    text = readme.README.read_text()
    stale.write_text(text.replace(readme.END, "- a claim typed in by hand\n" + readme.END))
    monkeypatch.setattr(readme, "README", stale)
    assert readme.main(["--check"]) == 1
    assert readme.update(stale) and readme.main(["--check"]) == 0


def test_warm_start_counts(section: str) -> None:
    """The warm-start bullet, recomputed from the stored warm-start run's raw rows."""
    path = readme.WARMSTART / "results.jsonl"
    if not path.exists():
        pytest.skip("no re-run of the warm-start experiment is stored")
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    times: dict[tuple[str, str, bool], float] = {}
    for r in rows:
        if r["status"] == "optimal":
            key = (r["instance"], r["solver"], bool(r.get("warm_start")))
            times[key] = min(times.get(key, r["wall_s"]), r["wall_s"])
    # (solver, cold time, warm time) per instance proven both ways
    pairs = [(s, times[(i, s, False)], t) for (i, s, w), t in times.items()
             if w and (i, s, False) in times]
    hit = {k: c_w[1] <= c_w[0] + max(0.1, 0.1 * c_w[0])
           for k, c_w in enumerate((c, w) for _, c, w in pairs)}
    ran = sum(bool(((r.get("info") or {}).get("warm_start") or {}).get("ran"))
              for r in rows if r.get("warm_start"))
    warm_runs = sum(bool(r.get("warm_start")) for r in rows)
    text = _plain(section)
    assert (f"of the {len(pairs)} instance-and-solver pairs proven optimal both cold and "
            f"warm-started from the MA, the warm-started proof came no later than the cold "
            f"one in {sum(hit.values())} (") in text
    assert f"the MA ran in {ran} of the {warm_runs} warm-started runs" in text
    for solver, label in (("milp", "MILP"), ("cpsat", "CP-SAT"), ("bnb", "B&B")):
        mine = [k for k, (s, _, _) in enumerate(pairs) if s == solver]
        assert f"{label} {sum(hit[k] for k in mine)} of {len(mine)}" in text


def test_portfolio_against_its_components(section: str) -> None:
    """The portfolio against the MA and the MILP run alone, recomputed from raw rows."""
    path = readme.PORTFOLIO / "results.jsonl"
    if not path.exists():
        pytest.skip("no re-run of the portfolio's sweep is stored")
    cells: dict[tuple[str, float], dict[str, dict]] = defaultdict(dict)
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            # The portfolio's rows by label: the sweep runs it on one thread and on two.
            key = r["label"] if r["solver"] == "portfolio" else r["solver"]
            cells[(r["instance"], r["budget_s"])][key] = r
    text = _plain(section)
    for label, plan_words, bound_words in (
            ("portfolio", "as good as the MA's in", "its bound at least the MILP's in"),
            ("portfolio-2t", "its plan was at least the MA's in",
             "its bound at least the MILP's in")):
        if not any(label in c for c in cells.values()):
            continue
        plan = [(c[label], c["memetic"]) for c in cells.values()
                if c["memetic"]["status"] in OK]
        plan_held = sum(p["status"] in OK and p["objective"] <= m["objective"] * (1 + 1e-6)
                        for p, m in plan)
        bound = [(c[label], c["milp"]) for c in cells.values()
                 if c["milp"].get("lower_bound") is not None]
        bound_held = sum(p.get("lower_bound") is not None
                         and p["lower_bound"] >= m["lower_bound"] * (1 - 1e-6)
                         for p, m in bound)
        assert f"{plan_words} {plan_held} of {len(plan)} cells" in text, label
        assert f"{bound_words} {bound_held} of {len(bound)}" in text, label


def test_the_portfolio_sweeps_bounds_against_the_milp_as_results_readme_says() -> None:
    """bench/results/README.md's counts of cells where each portfolio's bound is below or
    above the MILP's alone, in the sweep before the runner counted threads and after,
    recomputed from the two stored runs (tolerance of ``portfolio_vs_components``)."""
    from bench.report.text import REL_TOL

    parts = []
    for run in ("anytime-portfolio-ce85a4b", "anytime-portfolio"):
        cells: dict[tuple[str, float], dict[str, dict]] = defaultdict(dict)
        for line in (readme.RESULTS.parent / run / "results.jsonl").read_text(
                ).splitlines():
            if line.strip():
                r = json.loads(line)
                cells[(r["instance"], r["budget_s"])][r["label"]] = r
        for label in ("portfolio", "portfolio-2t"):
            below = above = n = 0
            for c in cells.values():
                ex = c["MILP"].get("lower_bound")
                if ex is None:
                    continue
                n += 1
                mine = c[label].get("lower_bound")
                below += mine is None or mine < ex * (1 - REL_TOL)
                above += mine is not None and mine > ex * (1 + REL_TOL)
            parts.append((below, n, above))
    text = " ".join((readme.RESULTS.parent / "README.md").read_text().split())
    (b1, n1, a1), (b2, n2, a2), (b3, n3, a3), (b4, n4, a4) = parts
    assert (f"below the MILP's in {b1} of {n1} cells and above in {a1} (one thread), below "
            f"in {b2} of {n2} and above in {a2} (two threads); with the threads counted, "
            f"below in {b3} of {n3} and above in {a3}, below in {b4} of {n4} and above in "
            f"{a4}.") in text
