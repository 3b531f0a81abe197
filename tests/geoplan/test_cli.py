"""The ``geoplan`` command line (formats.md): outputs, exit statuses and bad input."""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from geoplan.cli import main

DATA = Path(__file__).resolve().parent.parent / "data"
ROOT = DATA.parent.parent
HAND3 = str(DATA / "hand3.json")
PLAN_AB = str(DATA / "hand3.plan_ab.json")  # feasible: 62 ms, 14.56 J (test_cost.py)
PLAN_BA = str(DATA / "hand3.plan_ba.json")  # memory: a over by 0.012 GB
PLAN_AC = str(DATA / "hand3.plan_ac.json")  # no a<->c link, both directions
THREE = str(DATA / "three_gpu.json")

EVALUATE_KEYS = {"t_iter_ms", "e_iter_j", "objective", "feasible", "violations", "stages"}
STAGE_KEYS = {"gpu", "layers", "compute_ms", "comm_fwd_ms", "comm_bwd_ms", "tau_ms",
              "memory_gb", "memory_limit_gb"}
SOLVE_KEYS = {"solver", "status", "plan", "objective", "t_iter_ms", "e_iter_j", "lower_bound",
              "gap", "wall_s", "t_ref_ms", "e_ref_j", "trace"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """main(argv) -> (exit status, stdout, stderr); a SystemExit counts as its status."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- evaluate / validate


def test_evaluate_json_feasible(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "evaluate", HAND3, PLAN_AB, "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    assert EVALUATE_KEYS <= d.keys()
    assert all(set(s) == STAGE_KEYS for s in d["stages"])
    # Hand-worked in test_cost.py: T = 13 + 7 * 7 = 62 ms, E = 4.96 + 9.6 = 14.56 J.
    assert d["t_iter_ms"] == pytest.approx(62.0) and d["e_iter_j"] == pytest.approx(14.56)
    assert d["objective"] == pytest.approx(62.0)
    assert d["feasible"] is True and d["violations"] == []
    assert [s["tau_ms"] for s in d["stages"]] == pytest.approx([7.0, 6.0])


def test_evaluate_json_infeasible_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "evaluate", HAND3, PLAN_BA, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["feasible"] is False and len(d["violations"]) == 1
    assert "0.012" in d["violations"][0]
    code, out, _ = run(capsys, "evaluate", HAND3, PLAN_AC, "--json", "--compact")
    assert code == 0 and out.count("\n") == 1  # one line
    d = json.loads(out)
    assert d["t_iter_ms"] is None and len(d["violations"]) == 2  # infinite time -> null


def test_evaluate_lambda_flag(capsys: pytest.CaptureFixture[str]) -> None:
    # --lambda 0: the objective is E_iter = 14.56 J.
    code, out, _ = run(capsys, "evaluate", HAND3, PLAN_AB, "--json", "--lambda", "0")
    assert code == 0 and json.loads(out)["objective"] == pytest.approx(14.56)


def test_evaluate_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "evaluate", HAND3, PLAN_BA)
    assert code == 0
    assert "T_iter    62.000 ms" in out and "E_iter    14.560 J" in out
    assert "feasible  NO" in out and "0.012 GB over" in out


def test_validate_feasible_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", HAND3, PLAN_AB)
    assert code == 0 and out.strip() == "feasible"


def test_validate_lists_violations_one_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", HAND3, PLAN_AC)
    assert code == 1 and err == ""
    lines = out.strip().splitlines()
    assert len(lines) == 2 and all("no link" in line for line in lines)
    code, out, _ = run(capsys, "validate", HAND3, PLAN_BA, "--json")
    assert code == 1
    d = json.loads(out)
    assert d["feasible"] is False and [v["kind"] for v in d["violations"]] == ["memory"]


def test_validate_reports_every_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # a repeated, a <-> c missing, layer sum 7 != 6 and a plan micro-batch 3 not dividing B = 8.
    plan = {"stages": [{"gpu": "a", "layers": 3}, {"gpu": "c", "layers": 2},
                       {"gpu": "a", "layers": 2}], "micro_batch_size": 3}
    f = tmp_path / "p.json"
    f.write_text(json.dumps(plan))
    code, out, _ = run(capsys, "validate", HAND3, str(f))
    lines = out.strip().splitlines()
    assert code == 1 and len(lines) == 1 + 1 + 4 + 1
    code, out, _ = run(capsys, "validate", HAND3, str(f), "--json")
    got = sorted(v["kind"] for v in json.loads(out)["violations"])
    assert got == sorted(["layer_sum", "repeated_gpu", "micro_batch"] + ["missing_link"] * 4)


def test_solve_result_json_accepted_as_plan(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    res = tmp_path / "r.json"
    res.write_text(json.dumps({"solver": "x", "plan": json.loads(Path(PLAN_AB).read_text())}))
    code, out, _ = run(capsys, "evaluate", HAND3, str(res), "--json")
    assert code == 0 and json.loads(out)["t_iter_ms"] == pytest.approx(62.0)


# ----------------------------------------------------------------------------- solve / show / space


def test_solve_metis_default_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_plan, trace, result = tmp_path / "plan.json", tmp_path / "t.csv", tmp_path / "r.json"
    code, out, err = run(capsys, "solve", THREE, "--solver", "metis-default", "--json",
                         "--out", str(out_plan), "--trace-csv", str(trace),
                         "--result", str(result))
    assert code == 0, err
    d = json.loads(out)
    assert SOLVE_KEYS <= d.keys()
    assert d["solver"] == "metis-default" and d["status"] in ("feasible", "optimal")
    assert isinstance(d["plan"]["stages"], list) and d["plan"]["stages"]
    assert sum(s["layers"] for s in d["plan"]["stages"]) == 12
    assert d["objective"] == pytest.approx(d["t_iter_ms"])  # lambda 1
    assert d["e_iter_j"] > 0 and d["wall_s"] >= 0
    assert d["lower_bound"] is None and d["gap"] is None  # a baseline proves no bound
    assert all(len(row) == 3 for row in d["trace"]) and d["trace"]
    assert d["t_ref_ms"] == pytest.approx(d["t_iter_ms"])  # its own plan is the baseline
    assert json.loads(out_plan.read_text()) == d["plan"]
    rows = list(csv.reader(io.StringIO(trace.read_text())))
    assert rows[0] == ["seconds", "incumbent", "bound"] and len(rows) == len(d["trace"]) + 1
    assert json.loads(result.read_text())["plan"] == d["plan"]
    # The written plan evaluates to the reported cost.
    code, out, _ = run(capsys, "evaluate", THREE, str(out_plan), "--json")
    assert json.loads(out)["t_iter_ms"] == pytest.approx(d["t_iter_ms"], rel=1e-12)


def test_solve_summary_and_lambda(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "solve", HAND3, "--solver", "metis-default", "--lambda", "0.5",
                       "--quiet")
    assert code == 0 and "metis-default: feasible" in out and "T_iter" in out
    code, out, _ = run(capsys, "solve", HAND3, "--solver", "metis-default", "--lambda", "0.5",
                       "--json")
    d = json.loads(out)
    # The normalisers of the mixed objective are reported, and they reproduce the objective.
    assert d["objective"] == pytest.approx(
        0.5 * d["t_iter_ms"] / d["t_ref_ms"] + 0.5 * d["e_iter_j"] / d["e_ref_j"], rel=1e-12)
    assert d["objective"] == pytest.approx(1.0)  # the baseline priced against itself


def test_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", PLAN_AB)
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 4  # header, rule, two stages
    assert lines[2].split() == ["1", "a", "4", "1-4"] and lines[3].split() == ["2", "b", "2", "5-6"]
    code, out, _ = run(capsys, "show", PLAN_AB, HAND3)
    assert code == 0 and "T_iter    62.000 ms" in out and "1*" in out  # stage 1 the bottleneck


def test_space(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "space", "12", "12")[:2] == (0, "40864292184\n")
    assert run(capsys, "space", "4", "12")[:2] == (0, "5416\n")


def test_space_of_huge_pools_prints_digits_not_a_traceback(
        capsys: pytest.CaptureFixture[str]) -> None:
    from geoplan.display import format_count
    from geoplan.model.space import plan_space_size

    code, out, err = run(capsys, "space", "2000", "2000")
    assert code == 0 and err == ""
    assert out == "about 5.88434e+5772 (5773 digits)\n"
    # the exact path agrees with the logarithms where both run
    exact = plan_space_size(400, 300)
    assert format_count(exact).endswith(f"({len(str(exact))} digits)")
    assert format_count(exact)[:7] == f"{str(exact)[0]}.{str(exact)[1:6]}"
    assert format_count(10**61 - 1) == "9.99999e+60 (61 digits)"  # never rounded up to 10.0
    assert format_count(10**60) == "1.00000e+60 (61 digits)"
    assert format_count(10**60 - 1) == "9" * 60
    code, out, _ = run(capsys, "space", "100000", "5000")
    assert code == 0 and out.startswith("about ") and "digits" in out


def test_solvers_listing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "solvers")
    names = {line.split()[0] for line in out.strip().splitlines()}
    assert code == 0
    assert {"memetic", "milp", "cpsat", "bruteforce", "bnb", "metis-default", "metis-improved",
            "portfolio"} <= names


def test_solvers_show_their_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "solvers", "bnb", "milp")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["bnb", "exact"]
    line = next(line for line in lines if line.split()[0] == "node_limit")
    assert line.split()[:5] == ["node_limit", "int|none", "none", ">=", "0"]
    assert "nodes" in line
    row = next(line.split() for line in lines if line.split()[0] == "heuristic_share")
    assert row[:4] == ["heuristic_share", "float", "0.05", "[0,"]
    assert any(line.split()[0] == "highs.<key>" for line in lines)
    code, out, _ = run(capsys, "solvers", "--brief")
    assert code == 0 and "node_limit" not in out
    assert run(capsys, "solvers", "nosuch")[0] == 2


def test_solve_help_lists_the_solvers_and_where_parameters_are(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "solve", "--help")
    assert code == 0
    for name in ("memetic", "milp", "cpsat", "bruteforce", "bnb", "metis-default",
                 "metis-improved", "portfolio", "greedy", "random-restart"):
        assert f"\n  {name} " in out, name
    assert "geoplan solvers" in out and "--param KEY=VALUE" in out
    assert "--warm-start-param" in out


# ----------------------------------------------------------------------------- bad input


def hand3_dict() -> dict[str, Any]:
    return json.loads(Path(HAND3).read_text())


def edit(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit of the hand3 dict: set the item at ``path`` (``...`` deletes it)."""

    def apply(d: dict[str, Any]) -> None:
        node: Any = d
        for key in path[:-1]:
            node = node[key]
        if value is ...:
            del node[path[-1]]
        else:
            node[path[-1]] = value

    return apply


def tiny_memory(d: dict[str, Any]) -> None:
    for g in d["gpus"]:
        g["memory_gb"], g["memory_util"] = 0.3, 1.0


# (id, instance edit or raw text, plan dict or raw text, extra argv, field, value text)
# Defaults: the hand3 instance, plan [a:4, b:2], `evaluate INSTANCE PLAN --json`.
Case = tuple[str, Any, Any, list[str], str, str]
BAD: list[Case] = [
    ("instance-malformed-json", "{\"gpus\": [", None, [], "instance", "line 1"),
    ("instance-empty-file", "", None, [], "instance", "invalid JSON"),
    ("plan-malformed-json", None, "{stages: }", [], "plan", "invalid JSON"),
    ("instance-not-object", "[1, 2]", None, [], "instance", "list"),
    ("missing-gpus", edit(["gpus"], ...), None, [], "gpus", "required"),
    ("missing-model", edit(["model"], ...), None, [], "model", "required"),
    ("missing-training", edit(["training"], ...), None, [], "training", "required"),
    ("missing-peak-tflops", edit(["gpus", 0, "peak_tflops"], ...), None, [], "peak_tflops",
     "required"),
    ("missing-layers", edit(["model", "layers"], ...), None, [], "layers", "required"),
    ("missing-micro-batch", edit(["training", "micro_batch_size"], ...), None, [],
     "micro_batch_size", "required"),
    ("missing-latency", edit(["links", 0, "latency_ms"], ...), None, [], "latency_ms",
     "required"),
    ("missing-gpu-id", edit(["gpus", 2, "id"], ...), None, [], "id", "required"),
    ("unknown-gpu-in-link", edit(["links", 1, "src"], "zz"), None, [], "src", "'zz'"),
    ("unknown-gpu-in-plan", None, {"stages": [{"gpu": "a", "layers": 4},
                                              {"gpu": "zz", "layers": 2}]}, [], "gpu", "'zz'"),
    ("zero-flops", edit(["gpus", 0, "peak_tflops"], 0), None, [], "peak_tflops", "0"),
    ("negative-memory", edit(["gpus", 1, "memory_gb"], -1), None, [], "memory_gb", "-1"),
    ("zero-bandwidth", edit(["links", 0, "bandwidth_gbps"], 0), None, [], "bandwidth_gbps",
     "0"),
    ("zero-active-power", edit(["gpus", 1, "active_w"], 0), None, [], "active_w", "0"),
    ("negative-idle-power", edit(["gpus", 1, "idle_w"], -3), None, [], "idle_w", "-3"),
    ("idle-above-active", edit(["gpus", 1, "idle_w"], 131), None, [], "idle_w", "131"),
    ("compute-util-above-1", edit(["gpus", 0, "compute_util"], 1.5), None, [], "compute_util",
     "1.5"),
    ("memory-util-zero", edit(["gpus", 0, "memory_util"], 0), None, [], "memory_util", "0"),
    ("link-util-above-1", edit(["links", 0, "util"], 2), None, [], "util", "2"),
    ("batch-not-divisible", edit(["training", "micro_batch_size"], 3), None, [],
     "micro_batch_size", "3"),
    ("nothing-holds-the-model", tiny_memory, None, [], "gpus", "0.3"),
    ("wrong-type-flops", edit(["gpus", 0, "peak_tflops"], "fast"), None, [], "peak_tflops",
     "'fast'"),
    ("wrong-type-layers", edit(["model", "layers"], 6.5), None, [], "layers", "6.5"),
    ("wrong-type-gpus", edit(["gpus"], {"a": 1}), None, [], "gpus", "'a'"),
    ("wrong-type-gpu-entry", edit(["gpus", 1], "b"), None, [], "gpus[1]", "'b'"),
    ("unknown-gpu-type-missing-fields", edit(["gpus", 1], {"id": "b", "type": "Z80"}), None, [],
     "type", "Z80"),
    ("wrong-type-batch", edit(["training", "batch_size"], "8"), None, [], "batch_size", "'8'"),
    ("nan-flops", edit(["gpus", 0, "peak_tflops"], float("nan")), None, [], "peak_tflops",
     "nan"),
    ("negative-latency", edit(["links", 0, "latency_ms"], -1), None, [], "latency_ms", "-1"),
    ("duplicate-id", edit(["gpus", 1, "id"], "a"), None, [], "id", "'a'"),
    ("duplicate-link", edit(["links", 1], {"src": "a", "dst": "b", "bandwidth_gbps": 1,
                                           "latency_ms": 0}), None, [], "links[1]", "a->b"),
    ("self-link", edit(["links", 0, "dst"], "a"), None, [], "dst", "'a'"),
    ("lambda-in-instance", edit(["objective", "lambda"], 1.5), None, [], "lambda", "1.5"),
    ("lambda-flag", None, None, ["--lambda", "1.5"], "lambda", "1.5"),
    ("lambda-flag-text", None, None, ["--lambda", "half"], "lambda", "half"),
    ("plan-is-a-list", None, [{"gpu": "a", "layers": 6}], [], "plan", "list"),
    ("plan-without-stages", None, {"layers": 6}, [], "plan.stages", "None"),
    ("plan-layers-text", None, {"stages": [{"gpu": "a", "layers": "six"}]}, [], "layers",
     "'six'"),
    ("plan-micro-batch-zero", None, {"stages": [{"gpu": "a", "layers": 6}],
                                     "micro_batch_size": 0}, [], "micro_batch_size", "0"),
    ("mixed-lambda-no-baseline", edit(["links"], []), None, ["--lambda", "0.5"], "t_ref_ms",
     "None"),
]


def _files(tmp_path: Path, inst: Any, plan: Any) -> tuple[str, str]:
    ipath, ppath = tmp_path / "instance.json", tmp_path / "plan.json"
    if isinstance(inst, str):
        ipath.write_text(inst)
    else:
        d = hand3_dict()
        if inst is not None:
            inst(d)
        ipath.write_text(json.dumps(d))
    if isinstance(plan, str):
        ppath.write_text(plan)
    else:
        ppath.write_text(json.dumps(plan if plan is not None else
                                    json.loads(Path(PLAN_AB).read_text())))
    return str(ipath), str(ppath)


def check_one_error_line(code: int, out: str, err: str, field: str, value: str) -> None:
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # one message, no usage block
    assert lines[0].startswith("geoplan: error:"), err
    assert field in lines[0], (field, err)
    assert value in lines[0], (value, err)
    assert out == ""


@pytest.mark.parametrize(("inst", "plan", "extra", "field", "value"), [c[1:] for c in BAD],
                         ids=[c[0] for c in BAD])
def test_bad_input_evaluate(capsys: pytest.CaptureFixture[str], tmp_path: Path, inst: Any,
                            plan: Any, extra: list[str], field: str, value: str) -> None:
    ipath, ppath = _files(tmp_path, inst, plan)
    code, out, err = run(capsys, "evaluate", ipath, ppath, "--json", *extra)
    check_one_error_line(code, out, err, field, value)


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["evaluate", "NOFILE.json", PLAN_AB], "instance", "NOFILE.json"),
        (["evaluate", HAND3, "NOPLAN.json"], "plan", "NOPLAN.json"),
        (["validate", HAND3, "NOPLAN.json"], "plan", "NOPLAN.json"),
        (["evaluate", str(DATA), PLAN_AB], "instance", str(DATA)),  # a directory
        (["solve", HAND3, "--solver", "nosuch"], "solver", "nosuch"),
        (["solve", HAND3, "--solver", "metis-default", "--time-limit", "-1"], "--time-limit",
         "-1"),
        (["solve", HAND3, "--solver", "metis-default", "--time-limit", "0"], "--time-limit",
         "0"),
        (["solve", HAND3, "--solver", "metis-default", "--time-limit", "soon"], "--time-limit",
         "soon"),
        (["solve", HAND3, "--solver", "metis-default", "--threads", "0"], "threads", "0"),
        (["solve", HAND3, "--solver", "metis-default", "--gap", "1.5"], "gap", "1.5"),
        (["solve", HAND3, "--solver", "metis-default", "--seed", "x"], "--seed", "x"),
        (["solve", HAND3, "--solver", "metis-default", "--warm-start", "nosuch.json"],
         "--warm-start", "nosuch.json"),
        (["solve", HAND3], "--solver", "required"),
        (["evaluate", HAND3], "plan", "required"),
        (["space", "0", "12"], "N", "0"),
        (["space", "3", "-2"], "L", "-2"),
        (["space", "three", "12"], "n", "three"),
        (["frobnicate"], "frobnicate", "frobnicate"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_command_lines(capsys: pytest.CaptureFixture[str], argv: list[str], field: str,
                           value: str) -> None:
    code, out, err = run(capsys, *argv)
    check_one_error_line(code, out, err, field, value)


def test_bad_input_counts() -> None:
    # The acceptance asks for at least 25 distinct bad-input cases.
    assert len(BAD) >= 25


def test_debug_shows_the_exception(tmp_path: Path) -> None:
    ipath, ppath = _files(tmp_path, edit(["gpus", 0, "peak_tflops"], 0), None)
    from geoplan.errors import InputError

    with pytest.raises(InputError):
        main(["--debug", "evaluate", ipath, ppath])


# ----------------------------------------------------------------------------- real processes


def _python_m(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "geoplan", *argv], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120, check=False)


def test_console_path_evaluate() -> None:
    p = _python_m("evaluate", HAND3, PLAN_AB, "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["t_iter_ms"] == pytest.approx(62.0) and d["e_iter_j"] == pytest.approx(14.56)


def test_console_path_validate_infeasible() -> None:
    p = _python_m("validate", HAND3, PLAN_AC)
    assert p.returncode == 1 and len(p.stdout.strip().splitlines()) == 2


def test_console_path_bad_input(tmp_path: Path) -> None:
    d = copy.deepcopy(hand3_dict())
    d["gpus"][0]["peak_tflops"] = -5
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(d))
    p = _python_m("evaluate", str(f), PLAN_AB, "--json")
    check_one_error_line(p.returncode, p.stdout, p.stderr, "peak_tflops", "-5")
    p = _python_m("solve", HAND3, "--solver", "metis-default", "--time-limit", "-1")
    check_one_error_line(p.returncode, p.stdout, p.stderr, "--time-limit", "-1")


# ----------------------------------------------------------------------------- parameters


def test_unknown_param_exits_2_with_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "solve", HAND3, "--solver", "milp", "--param", "symetry=false")
    check_one_error_line(code, out, err, "params.symetry", "false")
    assert "did you mean 'symmetry'?" in err


@pytest.mark.parametrize(("solver", "param", "field"), [
    ("bnb", "symmetry=maybe", "params.symmetry"),
    ("milp", "heuristic=maybe", "params.heuristic"),
    ("cpsat", "symmetry=maybe", "params.symmetry"),
    ("bnb", "node_limit=1.5", "params.node_limit"),
    ("bnb", "node_limit=-3", "params.node_limit"),
    ("bruteforce", "max_space=lots", "params.max_space"),
    ("greedy", "split=fast", "params.split"),
    ("memetic", "population=1", "params.population"),
    ("memetic", "P=many", "params.P"),
    ("memetic", "time_limit=3", "params.time_limit"),
    ("portfolio", "ma_fraction=1", "params.ma_fraction"),
    ("portfolio", "memetic.populaton=30", "params.memetic.populaton"),
    ("metis-default", "samples=3", "params.samples"),
    ("metis-improved", "samples=0", "params.samples"),
    ("random-restart", "improvement=worst", "params.improvement"),
])
def test_ill_typed_param_exits_2(capsys: pytest.CaptureFixture[str], solver: str, param: str,
                                 field: str) -> None:
    code, out, err = run(capsys, "solve", HAND3, "--solver", solver, "--param", param,
                         "--time-limit", "5")
    check_one_error_line(code, out, err, field, param.partition("=")[2])


def test_params_are_recorded_typed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "solve", HAND3, "--solver", "bnb", "--json", "--param",
                       "symmetry=no", "--param", "node_limit=100000", "--param", "note=run A")
    assert code == 0
    params = json.loads(out)["params"]
    assert params["symmetry"] is False and params["node_limit"] == 100000
    assert params["note"] == "run A"


def test_warm_start_params(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "solve", HAND3, "--solver", "bnb", "--warm-start", "memetic",
                         "--warm-start-param", "populaton=20")
    check_one_error_line(code, out, err, "warm_start_params.populaton", "20")
    assert "did you mean 'population'?" in err
    code, out, err = run(capsys, "solve", HAND3, "--solver", "bnb", "--warm-start", PLAN_AB,
                         "--warm-start-param", "population=20")
    check_one_error_line(code, out, err, "--warm-start-param", "population=20")
    code, out, err = run(capsys, "solve", HAND3, "--solver", "bnb", "--warm-start", "memetic",
                         "--warm-start-param", "population=20", "--warm-start-param",
                         "max_generations=2", "--json")
    assert code == 0, err
    ws = json.loads(out)["info"]["warm_start"]
    assert ws["source"] == "memetic"
    assert ws["params"]["population"] == 20 and ws["params"]["max_generations"] == 2


# ----------------------------------------------------------------------------- inputs up front


@pytest.mark.parametrize("option", ["--out", "--result", "--trace-csv"])
def test_output_paths_checked_before_any_work(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path, option: str) -> None:
    # The instance does not even exist: the path is checked first, before loading it.
    missing_dir = str(tmp_path / "no" / "such" / "dir" / "x.json")
    code, out, err = run(capsys, "solve", "NOFILE.json", "--solver", "metis-default",
                         option, missing_dir)
    check_one_error_line(code, out, err, option, missing_dir)
    assert "does not exist" in err
    code, out, err = run(capsys, "solve", "NOFILE.json", "--solver", "metis-default",
                         option, str(tmp_path))
    check_one_error_line(code, out, err, option, str(tmp_path))
    assert "directory" in err
    a_file = tmp_path / "f"
    a_file.write_text("")
    code, out, err = run(capsys, "solve", "NOFILE.json", "--solver", "metis-default",
                         option, str(a_file / "x.json"))
    check_one_error_line(code, out, err, option, str(a_file / "x.json"))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root may write anywhere")
def test_unwritable_output_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        code, out, err = run(capsys, "solve", HAND3, "--solver", "metis-default",
                             "--out", str(ro / "p.json"))
        check_one_error_line(code, out, err, "--out", str(ro / "p.json"))
        assert "not writable" in err
    finally:
        ro.chmod(0o700)


def test_generate_out_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = str(tmp_path / "nodir" / "g.json")
    code, out, err = run(capsys, "generate", "geo", "--n", "3", "--layers", "4", "--seed", "0",
                         "--out", bad)
    check_one_error_line(code, out, err, "--out", bad)


@pytest.mark.parametrize(("argv", "field", "value"), [
    (["--seed", "-1"], "--seed", "-1"),
    (["--seed", "1.5"], "--seed", "1.5"),
    (["--threads", "-2"], "--threads", "-2"),
    (["--threads", "two"], "--threads", "two"),
])
def test_bad_solve_numbers_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                                  field: str, value: str) -> None:
    code, out, err = run(capsys, "solve", HAND3, "--solver", "metis-default", *argv)
    check_one_error_line(code, out, err, field, value)


def test_negative_seed_rejected_in_python_too() -> None:
    from geoplan.errors import InputError
    from geoplan.model.instance import load_instance
    from geoplan.solving.core import solve

    with pytest.raises(InputError, match="seed"):
        solve(load_instance(HAND3), "metis-default", seed=-1)


def test_no_plan_keeps_out_unwritten_and_says_so(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    from geoplan.model.generators import by_family

    path = tmp_path / "paper.json"
    path.write_text(json.dumps(by_family("paper", 5, 8, 1)))
    plan = tmp_path / "plan.json"
    code, out, err = run(capsys, "solve", str(path), "--solver", "bnb", "--json",
                         "--param", "node_limit=0", "--param", "baseline_incumbent=false",
                         "--out", str(plan))
    assert code == 0  # a solver that found no plan is a result, not an error
    d = json.loads(out)
    assert d["status"] == "no_solution" and d["plan"] is None and d["objective"] is None
    assert not plan.exists()
    assert "no plan" in err and "--out" in err and str(plan) in err


def test_no_solution_bound_is_null_unless_proven() -> None:
    from geoplan.model.instance import load_instance
    from geoplan.solving.core import finish
    from geoplan.solving.result import Outcome

    inst = load_instance(HAND3)
    for lower, status, expected in ((0.0, "no_solution", None), (None, "no_solution", None),
                                    (float("inf"), "no_solution", None),
                                    (12.5, "no_solution", 12.5), (12.5, "infeasible", None)):
        r = finish(inst, "x", Outcome(None, status, lower_bound=lower), 0.1, 0)
        assert r.lower_bound == expected, (lower, status)
        assert r.to_dict()["lower_bound"] == expected and r.gap is None
