"""Experiment files: the shipped ones expand as the paper's section 6 asks; bad ones fail early."""

from __future__ import annotations

import itertools
import json
import tomllib
from pathlib import Path

import pytest

from bench.experiments import (
    EXPERIMENT_DIR,
    PAPER_EXPERIMENTS,
    builtin_experiments,
    load_experiment,
    parse_experiment,
    worst_case_seconds,
)
from geoplan.errors import InputError
from geoplan.model.space import plan_space_size

GOOD = """
name = "mini"
seeds = [0, 1]
budgets = [0.5]
grace = 1
[quick]
seeds = [0]
[[solvers]]
name = "metis-default"
[[instances]]
generator = "paper"
layers = 4
seed = 0
overrides = { hidden = 512, seq_len = 512, batch_size = 8 }
grid = { n = [2, 3] }
quick = { grid = { n = [2] } }
"""


def _raw(text: str = GOOD, **changes: object) -> dict:
    raw = tomllib.loads(text)
    raw.update(changes)
    return raw


def test_every_shipped_experiment_loads_in_every_profile() -> None:
    assert builtin_experiments()[: len(PAPER_EXPERIMENTS)] == list(PAPER_EXPERIMENTS)
    for name in builtin_experiments():
        for profile in ("full", "quick", "tiny"):
            exp = load_experiment(name, profile)
            runs = exp.runs()
            assert runs, (name, profile)
            keys = [r.key for r in runs]
            assert len(set(keys)) == len(keys), f"{name}/{profile}: duplicate run keys"
            names = [i.name for i in exp.instances]
            assert len(set(names)) == len(names)


def test_quick_profile_fits_ten_minutes_on_two_cores_even_if_every_run_is_killed() -> None:
    exps = [load_experiment(n, "quick") for n in PAPER_EXPERIMENTS]
    # Every warm-up and every run killed at its limit, packed onto 2 processes: leaves
    # more than a minute for the report and instance generation.
    assert worst_case_seconds(exps, 2) <= 510
    assert worst_case_seconds(exps, 2) - worst_case_seconds(exps, 2, warm_up=0) == 4 * 15
    tiny = [load_experiment(n, "tiny") for n in PAPER_EXPERIMENTS]
    assert worst_case_seconds(tiny, 2, warm_up=0) <= 40


def test_a_run_of_two_threads_takes_both_workers_in_the_worst_case() -> None:
    """Two one-thread runs of 1.5 s (budget 0.5 + grace 1) share two workers; a
    two-thread one takes both (each run counts 0.5 s of start-up)."""
    one = parse_experiment(_raw(seeds=[0]), "full")
    two = parse_experiment(_raw(seeds=[0], threads=2), "full")
    assert worst_case_seconds([one], 2, warm_up=0) == pytest.approx(2.0)
    assert worst_case_seconds([two], 2, warm_up=0) == pytest.approx(4.0)
    assert worst_case_seconds([two], 1, warm_up=0) == pytest.approx(4.0)


def test_tables_3_and_4_grids_seeds_and_solvers() -> None:
    t3 = load_experiment("table3")
    assert sorted(i.n for i in t3.instances) == [4, 6, 8, 10, 12]
    assert {i.layers for i in t3.instances} == {12}
    assert t3.seeds == (0, 1, 2, 3, 4)
    assert {s.name for s in t3.solvers} == {"memetic", "metis-improved"}
    t4 = load_experiment("table4")
    assert sorted(i.layers for i in t4.instances) == [8, 12, 24, 32, 48]
    assert {i.n for i in t4.instances} == {12}
    # 5 instances x (5 MA seeds + 1 Metis seed)
    assert len(t3.runs()) == len(t4.runs()) == 30


def test_tables_5_6_cover_the_paper_range_and_beyond() -> None:
    exp = load_experiment("table5-6")
    assert sorted(i.n for i in exp.instances) == [2, 3, 4, 5, 6, 8, 10, 12, 16, 32]
    assert {s.name for s in exp.solvers} == {"bruteforce", "bnb", "milp", "cpsat", "memetic"}
    skipped = {(r.solver.name, r.instance.n) for r in exp.runs() if r.skip_reason}
    # brute force is not started beyond N = 12 (f(16, 12) ~ 1.7e14 plans), and says so
    assert skipped == {("bruteforce", 16), ("bruteforce", 32)}
    reason = next(r.skip_reason for r in exp.runs() if r.skip_reason)
    assert "max_n=12" in reason and f"{plan_space_size(16, 12):.3g}" in reason


def test_network_sweeps_and_table7_lambdas() -> None:
    net = load_experiment("network")
    lat = sorted(i.kwargs["base_latency_ms"] for i in net.instances if i.tag == "latency")
    bw = sorted(i.kwargs["base_bandwidth_gbps"] for i in net.instances if i.tag == "bandwidth")
    assert lat[0] == 0.1 and lat[-1] == 100.0
    assert bw[0] == 0.5 and bw[-1] == 100.0
    assert {i.kwargs["base_bandwidth_gbps"] for i in net.instances if i.tag == "latency"} == {10}
    assert {i.kwargs["base_latency_ms"] for i in net.instances if i.tag == "bandwidth"} == {10}
    assert len(net.seeds) == 10
    t7 = load_experiment("table7")
    assert sorted(i.kwargs["lam"] for i in t7.instances) == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    assert {i.normalise_by for i in t7.instances} == {"metis-improved"}
    assert {i.n for i in t7.instances} == {14}
    types = {g["type"] for g in t7.instances[0].data["gpus"]}
    assert types == {"A30", "A100-PCIe-40GB", "A100-SXM-80GB"}


def test_anytime_and_warmstart_designs() -> None:
    any_ = load_experiment("anytime")
    got = {(i.generator, i.n, i.layers) for i in any_.instances}
    assert got == set(itertools.product(("geo", "metro"), (16, 32, 64, 128), (32, 48, 96)))
    assert any_.budgets == (1.0, 5.0, 30.0, 120.0)
    assert {s.name for s in any_.solvers} == {
        "memetic", "milp", "cpsat", "bnb", "portfolio", "metis-improved", "random-restart"}
    warm = load_experiment("warmstart")
    pairs = {(s.name, s.warm_start) for s in warm.solvers}
    for exact in ("milp", "cpsat", "bnb"):
        assert {(exact, None), (exact, "memetic")} <= pairs


def test_profiles_override_blocks_and_top_level() -> None:
    full = parse_experiment(_raw())
    quick = parse_experiment(_raw(), "quick")
    assert [i.n for i in full.instances] == [2, 3]
    assert [i.n for i in quick.instances] == [2]
    assert full.seeds == (0, 1) and quick.seeds == (0,)
    assert len(full.runs()) == 4 and len(quick.runs()) == 1
    assert full.instances[0].name == "paper-n2-l4-s0"


def test_run_keys_are_stable_and_distinguish_runs() -> None:
    a = parse_experiment(_raw()).runs()
    b = parse_experiment(_raw()).runs()
    assert [r.key for r in a] == [r.key for r in b]
    other_budget = parse_experiment(_raw(budgets=[0.7])).runs()
    assert not {r.key for r in a} & {r.key for r in other_budget}


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"solvers": [{"name": "no-such-solver"}]}, "solvers[0].name", "unknown solver"),
        ({"solvers": [{"name": "milp", "warm_start": "nope"}]}, "solvers[0].warm_start",
         "unknown solver"),
        ({"budgets": [0]}, "budgets[0]", "positive number of seconds"),
        ({"budgets": [-5]}, "budgets[0]", "positive number of seconds"),
        ({"budgets": ["5"]}, "budgets[0]", "positive number of seconds"),
        ({"budgets": []}, "budgets", "non-empty list"),
        ({"seeds": [1.5]}, "seeds[0]", "integer seed"),
        ({"grace": -1}, "grace", "non-negative"),
        ({"instances": [{"file": "missing.json"}]}, "instances[0].file", "not found"),
        ({"instances": [{"generator": "nope", "n": 2, "layers": 4, "seed": 0}]},
         "instances[0].generator", "unknown generator"),
        ({"instances": [{"generator": "geo", "n": 2, "layers": 4, "seed": 0,
                         "overrides": {"colour": 1}}]}, "instances[0].colour", "not a parameter"),
        ({"instances": [{"generator": "geo", "layers": 4, "seed": 0}]}, "instances[0].n",
         "required"),
        ({"instances": []}, "instances", "at least one"),
        ({"sedes": [0]}, "sedes", "unknown key"),
        ({"quick": {"solvers": []}}, "quick.solvers", "unknown key"),
        ({"report": {"ours": "MA"}}, "report.ours", "not a solver label"),
    ],
)
def test_bad_experiment_files_raise_input_error_naming_the_field(
    change: dict, field: str, words: str
) -> None:
    with pytest.raises(InputError) as info:
        parse_experiment(_raw(**change), source="bad.toml")
    assert info.value.field == f"bad.toml: {field}"
    assert words in info.value.message


def test_generator_errors_and_file_instances(tmp_path: Path) -> None:
    bad = {"instances": [{"generator": "paper", "n": 2, "layers": 4, "seed": 0,
                          "overrides": {"micro_batch_size": 3}}]}
    with pytest.raises(InputError, match="micro_batch_size"):
        parse_experiment(_raw(**bad), source="bad.toml")
    inst = json.loads((Path(__file__).parents[1] / "data" / "three_gpu.json").read_text())
    (tmp_path / "x.json").write_text(json.dumps(inst))
    (tmp_path / "e.toml").write_text(GOOD.replace(
        '[[instances]]\ngenerator = "paper"',
        '[[instances]]\nfile = "x.json"\noverrides = { lam = 0.5 }\n[[instances]]\n'
        'generator = "paper"'))
    exp = load_experiment(tmp_path / "e.toml")
    first = exp.instances[0]
    assert first.generator == "file" and first.data["objective"]["lambda"] == 0.5
    assert first.name.endswith("-lam0.5")
    with pytest.raises(InputError, match="no such experiment"):
        load_experiment("not-an-experiment")
    (tmp_path / "broken.toml").write_text("name = \n")
    with pytest.raises(InputError, match="invalid TOML"):
        load_experiment(tmp_path / "broken.toml")


def test_shipped_files_are_in_the_package_data_folder() -> None:
    assert {p.stem for p in EXPERIMENT_DIR.glob("*.toml")} >= set(PAPER_EXPERIMENTS)
