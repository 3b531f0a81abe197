"""End to end: `geoplan bench paper --profile tiny`, then the report's tables against the rows."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from bench.execution import FAILED
from bench.experiments.paper import PAPER
from bench.report import ci95, knee_index, load_results, write_report
from geoplan.cli import main

OK = ("optimal", "feasible")


# --------------------------------------------------------------------------- helpers


def _section(md: str, title_start: str) -> str:
    parts = re.split(r"^## ", md, flags=re.M)
    hits = [p for p in parts if p.startswith(title_start)]
    assert len(hits) == 1, f"section {title_start!r} not found once"
    return hits[0]


def _tables(text: str) -> list[list[dict[str, str]]]:
    """Every Markdown table in ``text`` as a list of {header: cell} rows."""
    out: list[list[dict[str, str]]] = []
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if len(block) >= 2:
            cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row.strip()[1:-1])]
                     for row in block]
            out.append([dict(zip(cells[0], r, strict=True)) for r in cells[2:]])
        block = []
    return out


def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] in OK and r.get("objective") is not None]


def _quality(r: dict) -> str:
    v = f"{r['objective']:.1f}"
    if r["status"] == "optimal":
        return f"{v} (opt)"
    return f"{v} (gap {100 * r['gap']:.2f}%)" if r.get("gap") is not None else f"{v} (no bound)"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[dict]]:
    out = tmp_path_factory.mktemp("paper-tiny")
    assert main(["bench", "paper", "--profile", "tiny", "--out", str(out), "--no-progress"]) == 0
    md = (out / "report" / "report.md").read_text()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return out, md, rows


# --------------------------------------------------------------------------- unit checks


def test_knee_of_the_papers_table_7_is_lambda_0_1() -> None:
    p = PAPER["table7"]
    pts = [(r[1] / 870.4, r[2] / 737.8) for r in p["rows"]]
    k = knee_index(pts)
    assert k is not None and p["rows"][k][0] == 0.1  # the paper's starred row
    assert knee_index([(1.0, 2.0), (2.0, 1.0)]) is None  # two points have no knee
    assert knee_index([(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)]) is None  # collinear: none


def test_confidence_interval_by_hand() -> None:
    # mean 2, sd 1, n 3: t(0.975, 2) = 4.303 -> 4.303 / sqrt(3) = 2.4843
    assert ci95([1.0, 2.0, 3.0]) == pytest.approx(2.4843, abs=1e-4)
    assert ci95([5.0]) == 0.0


# --------------------------------------------------------------------------- end to end


def test_paper_tiny_writes_results_report_and_figures(tiny: tuple[Path, str, list[dict]]
                                                      ) -> None:
    out, md, rows = tiny
    experiments = {r["experiment"] for r in rows}
    assert experiments == {"table3", "table4", "table5-6", "network", "table7", "anytime",
                           "warmstart"}
    for title in ("Table 3", "Table 4", "Tables 5 and 6", "Section 6.6", "Table 7",
                  "Quality against time budget", "Warm start", "Runs that failed"):
        _section(md, title)
    links = re.findall(r"!\[[^\]]*\]\((figures/[^)]+)\)", md)
    assert links, "the report embeds figures"
    for link in links:
        data = (out / "report" / link).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", link
    # the caveat about the paper's unpublished configurations is in the report
    assert "Table A.1" in md and "not public" in md


def test_versus_tables_match_the_results(tiny: tuple[Path, str, list[dict]]) -> None:
    _, md, rows = tiny
    for exp, title in (("table3", "Table 3"), ("table4", "Table 4")):
        (table,) = _tables(_section(md, title))
        er = [r for r in rows if r["experiment"] == exp]
        assert len(table) == len({r["instance"] for r in er})
        for line in table:
            ir = [r for r in er if r["n"] == int(line["GPUs"])
                  and r["layers"] == int(line["L"])]
            ma = [r["objective"] for r in _ok([r for r in ir if r["label"] == "MA"])]
            metis = [r["objective"] for r in _ok([r for r in ir if r["label"] == "impr. Metis"])]
            if ma:
                assert line["ours: MA best (ms)"] == f"{min(ma):.1f}"
                assert line["MA mean (ms)"] == f"{statistics.fmean(ma):.1f}"
            else:
                assert not re.fullmatch(r"[\d.]+", line["ours: MA best (ms)"])
            if metis:
                assert line["ours: impr. Metis (ms)"] == f"{statistics.fmean(metis):.1f}"
            if ma and metis:
                gain = 100 * (statistics.fmean(metis) - min(ma)) / statistics.fmean(metis)
                assert line["gain %"] == f"{gain:+.1f}"
            paper = {(r[0], r[1]): r for r in PAPER[exp]["rows"]}.get(
                (int(line["GPUs"]), int(line["L"])))
            if paper:
                assert line["paper: impr. Metis (ms)"] == f"{paper[2]:.1f}"


def test_exact_energy_and_anytime_tables_match_the_results(
    tiny: tuple[Path, str, list[dict]]
) -> None:
    _, md, rows = tiny
    # Tables 5 and 6: T* is a proven optimum where one exists, else flagged best known.
    opt_table = _tables(_section(md, "Tables 5 and 6"))[0]
    er = [r for r in rows if r["experiment"] == "table5-6"]
    for line in opt_table:
        ir = [r for r in er if r["n"] == int(line["N"])]
        proven = [r["objective"] for r in ir if r["status"] == "optimal"]
        if proven:
            assert line["T* (ms)"] == f"{min(proven):.3f}"
            assert "unproven" not in line["T* proven by"]
        elif _ok(ir):
            assert line["T* (ms)"] == f"{min(r['objective'] for r in _ok(ir)):.3f}"
            assert line["T* proven by"].startswith("best known, unproven")
    # Table 7: the best MA plan per lambda.
    t7 = _tables(_section(md, "Table 7"))[0]
    er = [r for r in rows if r["experiment"] == "table7"]
    for line in t7:
        lam_text = line["λ"].replace(" ⋆", "")
        if "reference" in lam_text:
            ref = next(r for r in er if r.get("t_ref_ms"))
            assert line["T_iter (ms)"] == f"{ref['t_ref_ms']:.1f}"
            continue
        lr = _ok([r for r in er if r["lambda"] == float(lam_text)])
        if lr:
            best = min(lr, key=lambda r: r["objective"])
            assert line["T_iter (ms)"] == f"{best['t_iter_ms']:.1f}"
            assert line["E_iter (J)"] == f"{best['e_iter_j']:.1f}"
    # Quality against budget: each cell is the best run's value with its proof status.
    fam = next(t for t in _tables(_section(md, "Quality against time budget"))
               if t and "solver" in t[0] and "N" in t[0])
    er = [r for r in rows if r["experiment"] == "anytime"]
    budgets = sorted({r["budget_s"] for r in er})
    checked = 0
    for line in fam:
        lr = [r for r in er if r["label"] == line["solver"] and r["n"] == int(line["N"])]
        for b in budgets:
            br = _ok([r for r in lr if r["budget_s"] == b])
            if br:
                assert line[f"{b:g} s"] == _quality(min(br, key=lambda r: r["objective"]))
                checked += 1
    assert checked == len({(r["label"], r["budget_s"]) for r in _ok(er)})


def test_failed_and_skipped_runs_are_all_listed(tiny: tuple[Path, str, list[dict]]) -> None:
    _, md, rows = tiny
    bad = [r for r in rows if r["status"] in (*FAILED, "skipped")]
    sec = _section(md, "Runs that failed")
    if bad:
        (table,) = _tables(sec)
        assert len(table) == len(bad)
        assert sorted(t["status"] for t in table) == sorted(r["status"] for r in bad)
    else:
        assert "none crashed" in sec


def test_report_command_rewrites_from_the_results_file(
    tiny: tuple[Path, str, list[dict]], tmp_path: Path
) -> None:
    out, md, rows = tiny
    assert main(["bench", "report", str(out / "results.jsonl"), "--out", str(tmp_path),
                 "--no-figures"]) == 0
    again = (tmp_path / "report.md").read_text()
    assert not (tmp_path / "figures").exists()
    strip = re.compile(r"generated \S+|!\[.*\n|\n\n(?=\n)")
    assert _tables(strip.sub("", again)) == _tables(strip.sub("", md))
    got, _, _ = load_results(out)
    assert len(got) == len(rows)


def test_report_of_a_missing_or_foreign_file_is_an_input_error(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture
                                                               ) -> None:
    assert main(["bench", "report", str(tmp_path / "none.jsonl")]) == 2
    (tmp_path / "x.jsonl").write_text('{"a": 1}\n')
    assert main(["bench", "report", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("geoplan: error: results") for e in err)
    with pytest.raises(Exception, match="not found"):
        write_report(tmp_path / "none.jsonl")
