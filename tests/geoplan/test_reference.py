"""`geoplan evaluate` / `validate` against the independent model (tests/reference_model.py).

Random instances (asymmetric and missing links, tight memory, optional fields left
out, every lambda) and random plans, feasible and not, are written to files and
driven through the command line; every number must agree to 1e-6 relative.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
import reference_model as ref

from geoplan.cli import main

REL = 1e-6
DATA = Path(__file__).resolve().parent.parent / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def agree(got: float | None, want: float) -> bool:
    """JSON null stands for a non-finite number (a missing link's infinite time)."""
    if got is None:
        return not math.isfinite(want)
    return math.isclose(got, want, rel_tol=REL, abs_tol=1e-12)


def write(tmp: Path, name: str, obj: Any) -> str:
    p = tmp / name
    p.write_text(json.dumps(obj))
    return str(p)


def check_case(capsys: pytest.CaptureFixture[str], tmp: Path, d: dict, p: dict) -> dict:
    ipath, ppath = write(tmp, "i.json", d), write(tmp, "p.json", p)
    code, out, err = run(capsys, "evaluate", ipath, ppath, "--json")
    assert code == 0, err
    got = json.loads(out)
    o = d.get("objective") or {}
    # Mixed lambda without normalisers: the core reports the pair it used (from its
    # baseline); the objective must follow eq. 16 with that pair.
    r = ref.evaluate_ref(d, p, t_ref_ms=got.get("t_ref_ms") if o.get("t_ref_ms") is None
                         else None,
                         e_ref_j=got.get("e_ref_j") if o.get("e_ref_j") is None else None)
    assert agree(got["t_iter_ms"], r.t_iter_ms), (got["t_iter_ms"], r.t_iter_ms)
    assert agree(got["e_iter_j"], r.e_iter_j), (got["e_iter_j"], r.e_iter_j)
    assert r.objective is not None
    assert agree(got["objective"], r.objective), (got["objective"], r.objective)
    assert got["feasible"] == r.feasible
    assert len(got["violations"]) == len(r.violations)
    assert len(got["stages"]) == len(r.stages)
    for s, t in zip(got["stages"], r.stages, strict=True):
        assert (s["gpu"], s["layers"]) == (t.gpu, t.layers)
        assert agree(s["compute_ms"], t.compute_s * 1e3)
        assert agree(s["comm_fwd_ms"], t.fwd_s * 1e3)
        assert agree(s["comm_bwd_ms"], t.bwd_s * 1e3)
        assert agree(s["tau_ms"], t.tau_s * 1e3)
        assert agree(s["memory_gb"], t.mem_bytes / 1e9)
        assert agree(s["memory_limit_gb"], t.cap_bytes / 1e9)

    code, out, _ = run(capsys, "validate", ipath, ppath)
    lines = out.strip().splitlines()
    if r.feasible:
        assert code == 0 and lines == ["feasible"]
    else:
        assert code == 1 and len(lines) == len(r.violations)
    code, out, _ = run(capsys, "validate", ipath, ppath, "--json")
    kinds = sorted(v["kind"] for v in json.loads(out)["violations"])
    assert kinds == sorted(r.violations)
    return got


def test_cli_agrees_with_reference_on_random_cases(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    rng = random.Random(20260)
    feasible = infeasible = no_link = 0
    for k in range(120):
        d = ref.random_instance(rng)
        if k % 5 == 0 and 0 < d["objective"]["lambda"] < 1:
            # No normalisers: the core derives them (check_case uses the reported pair).
            d["objective"] = {"lambda": d["objective"]["lambda"]}
        p = ref.random_plan(rng, d, valid_shape=k % 4 != 0)
        if k % 7 == 0:
            # The plan's own micro-batch size: a divisor of B (M changes, u changes).
            B = d["training"]["batch_size"]
            p["micro_batch_size"] = rng.choice([u for u in range(1, B + 1) if B % u == 0])
        try:
            got = check_case(capsys, tmp_path, d, p)
        except AssertionError:
            print(json.dumps(d), json.dumps(p))
            raise
        feasible += got["feasible"]
        infeasible += not got["feasible"]
        no_link += got["t_iter_ms"] is None
    assert feasible >= 20 and infeasible >= 20 and no_link >= 5


@pytest.mark.parametrize(
    ("instance", "plan"),
    [
        ("hand3.json", "hand3.plan_ab.json"),
        ("hand3.json", "hand3.plan_abc.json"),
        ("hand3.json", "hand3.plan_ba.json"),
        ("hand3.json", "hand3.plan_ac.json"),
        ("hand_u2.json", "hand_u2.plan_xy.json"),
        ("three_gpu.json", "hand3.plan_abc.json"),  # same GPU ids, the shared fixture
    ],
)
def test_cli_agrees_with_reference_on_hand_cases(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path, instance: str,
                                                 plan: str) -> None:
    d = json.loads((DATA / instance).read_text())
    p = json.loads((DATA / plan).read_text())
    check_case(capsys, tmp_path, d, p)


def test_reference_reproduces_the_hand_arithmetic() -> None:
    # The reference model itself on the numbers worked by hand in test_cost.py.
    d = json.loads((DATA / "hand3.json").read_text())
    r = ref.evaluate_ref(d, json.loads((DATA / "hand3.plan_abc.json").read_text()))
    assert r.t_iter_ms == pytest.approx(86.0) and r.e_iter_j == pytest.approx(19.16)
    d["objective"] = {"lambda": 0.5, "t_ref_ms": 100.0, "e_ref_j": 20.0}
    r = ref.evaluate_ref(d, json.loads((DATA / "hand3.plan_ab.json").read_text()))
    assert r.objective == pytest.approx(0.674)
    u2 = json.loads((DATA / "hand_u2.json").read_text())
    r = ref.evaluate_ref(u2, json.loads((DATA / "hand_u2.plan_xy.json").read_text()))
    assert r.t_iter_ms == pytest.approx(41.5) and r.objective == pytest.approx(3.525)


def test_default_normalisers_are_the_baseline_plan_priced(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    """With 0 < lambda < 1 and no normalisers, T_ref / E_ref are T / E of the Metis-default
    plan: price that plan (from `solve --solver metis-default`) with the reference model."""
    rng = random.Random(77)
    checked = 0
    for _ in range(8):
        d = ref.random_instance(rng, lam=0.5, tight_memory=False)
        d["objective"] = {"lambda": 0.5}
        ipath = write(tmp_path, "i.json", d)
        code, out, err = run(capsys, "solve", ipath, "--solver", "metis-default", "--json")
        if code != 0:
            # The baseline found no plan (missing links): the mixed objective cannot be
            # normalised, which is invalid input naming the normaliser.
            assert code == 2 and "t_ref_ms" in err
            continue
        res = json.loads(out)
        r = ref.evaluate_ref(d, res["plan"])
        assert r.feasible
        assert agree(res["t_ref_ms"], r.t_iter_ms) and agree(res["e_ref_j"], r.e_iter_j)
        # ...and then every evaluation of that instance reports and uses the same pair.
        p = ref.random_plan(rng, d)
        got = check_case(capsys, tmp_path, d, p)
        assert (got["t_ref_ms"], got["e_ref_j"]) == (res["t_ref_ms"], res["e_ref_j"])
        checked += 1
    assert checked >= 4
