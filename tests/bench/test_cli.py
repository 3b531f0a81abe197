"""`geoplan bench`: bad input exits 2 with one message before any run; list and dry runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.experiments import PAPER_EXPERIMENTS
from geoplan.cli import main

GOOD = """
name = "cli-mini"
budgets = [2]
grace = 5
[[solvers]]
name = "metis-default"
[[instances]]
generator = "paper"
n = 2
layers = 4
seed = 0
overrides = { hidden = 512, seq_len = 512, batch_size = 8 }
"""


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ('name = "metis-default"', 'name = "simulated-annealing"', "solvers[0].name"),
        ("budgets = [2]", "budgets = [0]", "budgets[0]"),
        ("budgets = [2]", 'budgets = ["fast"]', "budgets[0]"),
        ('generator = "paper"\nn = 2\nlayers = 4\nseed = 0',
         'file = "no/such/instance.json"', "instances[0].file"),
    ],
)
def test_bad_experiment_file_exits_2_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture, old: str, new: str, words: str
) -> None:
    bad = tmp_path / "bad.toml"
    text = GOOD.replace(old, new)
    if "file =" in new:
        text = text.replace("overrides = { hidden = 512, seq_len = 512, batch_size = 8 }\n", "")
    assert text != GOOD
    bad.write_text(text)
    out = tmp_path / "out"
    assert main(["bench", "run", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("geoplan: error: ")
    assert words in err[0] and "bad.toml" in err[0]
    assert not out.exists()  # nothing ran, nothing written


def test_run_then_refuse_to_clobber_then_resume(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    exp = tmp_path / "ok.toml"
    exp.write_text(GOOD)
    out = tmp_path / "out"
    assert main(["bench", "run", str(exp), "--out", str(out), "--no-progress",
                 "--report"]) == 0
    text = capsys.readouterr().out
    assert "1 runs executed" in text and (out / "report" / "report.md").exists()
    assert main(["bench", "run", str(exp), "--out", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["bench", "run", str(exp), "--out", str(out), "--resume", "--no-progress"]) == 0
    assert "0 runs executed, 1 already" in capsys.readouterr().out
    assert main(["bench", "run", str(exp), "--out", str(out), "--resume", "--overwrite"]) == 2


def test_list_and_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["bench", "list", "--quick"]) == 0
    text = capsys.readouterr().out
    for name in PAPER_EXPERIMENTS:
        assert name in text
    assert "worst case" in text
    out = tmp_path / "dry"
    assert main(["bench", "run", "table3", "--quick", "--dry-run", "--out", str(out)]) == 0
    assert "table3" in capsys.readouterr().out and not out.exists()
    assert main(["bench", "run", "table3", "--quick", "--profile", "full", "--dry-run"]) == 2
    assert main(["bench", "run", "no-such-experiment", "--dry-run"]) == 2
    assert "known: table3" in capsys.readouterr().err
