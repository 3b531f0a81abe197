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


def test_solvers_listing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "solvers")
    names = {line.split()[0] for line in out.strip().splitlines()}
    assert code == 0
    assert {"memetic", "milp", "cpsat", "bruteforce", "bnb", "metis-default", "metis-improved",
            "portfolio"} <= names


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
