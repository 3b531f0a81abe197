"""Fuzzing the command line with mutated instance and plan files (issue 9).

Hypothesis mutates the shipped instances and plans (tests/data, examples): keys
deleted, values of another type, huge, tiny, negative, NaN/Infinity and numeric
strings, unknown keys, whole documents replaced, bytes truncated, binary garbage,
Latin-1 and UTF-16 text. Every input goes through ``geoplan.cli.main`` (evaluate,
validate, show, and solve with the cheap metis-default and greedy) with warnings
raised as errors: each must end with exit 0, 1 or 2, never an exception (a
traceback) or a numpy warning. A handful of fixed cases run in a subprocess with
``python -W error -m geoplan`` as a user would.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from geoplan.cli import main

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
EXAMPLES = ROOT / "examples"

# (instance, plan) pairs from the shipped files.
PAIRS = [
    (DATA / "hand3.json", DATA / "hand3.plan_ab.json"),
    (DATA / "hand3.json", DATA / "hand3.plan_abc.json"),
    (DATA / "hand3.json", DATA / "hand3.plan_ac.json"),
    (DATA / "hand_u2.json", DATA / "hand_u2.plan_xy.json"),
    (EXAMPLES / "three-site.json", EXAMPLES / "three-site.plan.json"),
    (EXAMPLES / "tiny.json", None),
    (DATA / "three_gpu.json", None),
]
DOCS = {p: json.loads(p.read_text()) for pair in PAIRS for p in pair if p is not None}

JUNK: list[Any] = [
    None, True, False, 0, 1, -1, -0.0, 0.5, 1e308, -1e308, 5e-324, 1e-300,
    2**63, -(2**63), 10**30, float("nan"), float("inf"), float("-inf"),
    "", "x", "12", "1e308", "NaN", "-1", "\u00e9\u4e2d", [], {}, [1, 2], {"k": 1}, [[]],
]
UNKNOWN_KEYS = ["compute_utl", "zz_unknown", "layers ", "", "gpu", "\u00e9"]
COMMANDS = ["evaluate", "validate", "show", "metis-default", "greedy"]


def paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document: the root, each key and each list element."""
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*path, k))
    elif isinstance(node, list):
        for k, v in enumerate(node):
            out += paths(v, (*path, k))
    return out


def mutate(data: st.DataObject, doc: Any) -> Any:
    """One structural mutation of ``doc`` (a deep copy is changed and returned)."""
    doc = copy.deepcopy(doc)
    where = data.draw(st.sampled_from(paths(doc)), label="path")
    op = data.draw(st.sampled_from(["replace", "delete", "unknown", "retype", "wrap"]),
                   label="op")
    if not where:  # the root itself
        return copy.deepcopy(data.draw(st.sampled_from(JUNK))) if op != "wrap" else [doc]
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    key = where[-1]
    value = parent[key]
    if op == "delete":
        del parent[key]
    elif op == "unknown" and isinstance(value, dict):
        value[data.draw(st.sampled_from(UNKNOWN_KEYS))] = data.draw(st.sampled_from(JUNK))
    elif op == "retype":
        parent[key] = json.dumps(value) if not isinstance(value, str) else [value]
    elif op == "wrap":
        parent[key] = [value]
    else:
        parent[key] = copy.deepcopy(data.draw(st.sampled_from(JUNK), label="junk"))
    return doc


def to_bytes(data: st.DataObject, doc: Any) -> bytes:
    """The document as text, sometimes damaged at the byte level."""
    raw = json.dumps(doc).encode()
    how = data.draw(st.sampled_from(["as-is"] * 12 + ["truncate", "garbage", "binary",
                                                     "latin-1", "utf-16", "empty"]),
                    label="bytes")
    if how == "truncate":
        return raw[: data.draw(st.integers(0, max(0, len(raw) - 1)))]
    if how == "garbage":
        at = data.draw(st.integers(0, len(raw)))
        return raw[:at] + data.draw(st.binary(min_size=1, max_size=8)) + raw[at:]
    if how == "binary":
        return data.draw(st.binary(max_size=64))
    if how == "latin-1":
        return json.dumps(doc, ensure_ascii=False).replace('"', '"\u00e9', 1).encode("latin-1",
                                                                                    "replace")
    if how == "utf-16":
        return json.dumps(doc).encode("utf-16")
    if how == "empty":
        return b""
    return raw


def run_main(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning fails the test
        code = main(argv)
    _, err = capsys.readouterr()
    return code, err


def argv_for(command: str, inst: Path, plan: Path) -> list[str]:
    if command in ("evaluate", "validate"):
        return [command, str(inst), str(plan), *(["--json"] if command == "evaluate" else [])]
    if command == "show":
        return ["show", str(plan), str(inst)]
    return ["solve", str(inst), "--solver", command, "--time-limit", "60", "--json",
            "--quiet"]


@settings(max_examples=800, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_files_end_in_0_1_or_2(data: st.DataObject, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    inst_src, plan_src = data.draw(st.sampled_from(PAIRS), label="pair")
    if plan_src is None:
        plan_doc: Any = {"stages": [{"gpu": g["id"], "layers": 1} for g in
                                    DOCS[inst_src]["gpus"][:1]]}
    else:
        plan_doc = DOCS[plan_src]
    inst_doc = DOCS[inst_src]
    target = data.draw(st.sampled_from(["instance", "plan", "both"]), label="target")
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        if target in ("instance", "both"):
            inst_doc = mutate(data, inst_doc)
        if target in ("plan", "both"):
            plan_doc = mutate(data, plan_doc)
    inst = tmp_path / "instance.json"
    plan = tmp_path / "plan.json"
    inst.write_bytes(to_bytes(data, inst_doc) if target != "plan" else
                     json.dumps(inst_doc).encode())
    plan.write_bytes(to_bytes(data, plan_doc) if target != "instance" else
                     json.dumps(plan_doc).encode())
    command = data.draw(st.sampled_from(COMMANDS), label="command")
    code, err = run_main(capsys, argv_for(command, inst, plan))
    event(f"{command}: exit {code}")
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err
    if code == 2:
        assert err.startswith("geoplan: error: ") and err.count("\n") == 1, err


# A few fixed cases as a user runs them: a fresh interpreter, warnings as errors.
SUBPROCESS_CASES = {
    "binary-instance": ("validate", b"\x00\xff\xfe garbage \x80", None),
    "truncated-instance": ("evaluate", (DATA / "hand3.json").read_bytes()[:57], None),
    "nan-tflops": ("metis-default", json.dumps({**DOCS[DATA / "hand3.json"], "gpus": [
        {**g, "peak_tflops": float("nan")} for g in DOCS[DATA / "hand3.json"]["gpus"]]}).encode(),
        None),
    "huge-bandwidth": ("greedy", json.dumps({**DOCS[DATA / "hand3.json"], "links": [
        {**lk, "bandwidth_gbps": 1e308} for lk in DOCS[DATA / "hand3.json"]["links"]]}).encode(),
        None),
    "latin-1-plan": ("show", None, '{"stages": [{"gpu": "\u00e9", "layers": 6}]}'.encode(
        "latin-1")),
}


@pytest.mark.parametrize("case", sorted(SUBPROCESS_CASES))
def test_fixed_cases_in_a_fresh_interpreter(tmp_path: Path, case: str) -> None:
    command, inst_bytes, plan_bytes = SUBPROCESS_CASES[case]
    inst = tmp_path / "instance.json"
    plan = tmp_path / "plan.json"
    inst.write_bytes(inst_bytes if inst_bytes is not None else (DATA / "hand3.json").read_bytes())
    plan.write_bytes(plan_bytes if plan_bytes is not None else
                     (DATA / "hand3.plan_ab.json").read_bytes())
    done = subprocess.run([sys.executable, "-W", "error", "-m", "geoplan",
                           *argv_for(command, inst, plan)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode in (0, 1, 2), done.stderr
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr, done.stderr
