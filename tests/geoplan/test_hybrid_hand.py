"""The hybrid reference (tests/hybrid_reference.py) against the hand-worked cases.

tests/data/hybrid/README.md derives every number of the ``*.expected.json`` files by
hand from hybrid-model.md; here the reference must reproduce them to 1e-12 relative.
(test_hybrid_agreement.py holds the project's evaluator and CLI to the same files.)
"""

from __future__ import annotations

import math

import hybrid_reference as href
import pytest

HYB = href.HAND_DIR
REL = 1e-12


CASES = href.HAND_CASES


load_case = href.load_hand_case


def close(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=REL, abs_tol=1e-12)


def test_every_case_is_present() -> None:
    assert set(CASES) >= {"tp", "dp", "zero0", "zero1", "zero2", "recompute", "boundary",
                          "geotrain"}


@pytest.mark.parametrize("name", CASES)
def test_reference_reproduces_hand_values(name: str) -> None:
    inst, plan, want = load_case(name)
    r = href.evaluate_hybrid_ref(inst, plan)
    assert close(r.t_iter_ms, want["t_iter_ms"])
    assert close(r.e_iter_j, want["e_iter_j"])
    assert close(r.objective, want["objective"])
    assert close(r.grad_sync_ms, want["grad_sync_ms"])
    assert r.violations == want["violations"]
    assert r.feasible == want["feasible"]
    assert len(r.stages) == len(want["stages"])
    for s, ws in zip(r.stages, want["stages"], strict=True):
        assert (s.layers, s.tp, s.gpus) == (ws["layers"], ws["tp"], ws["gpus"])
        for key in ("compute_ms", "comm_fwd_ms", "comm_bwd_ms", "tau_ms", "grad_sync_ms",
                    "memory_gb"):
            assert close(getattr(s, key), ws[key]), (key, getattr(s, key), ws[key])
        assert len(s.replicas) == len(ws["replicas"])
        for rr, wr in zip(s.replicas, ws["replicas"], strict=True):
            assert (rr.gpus, rr.samples) == (wr["gpus"], wr["samples"])
            for key in ("compute_ms", "tp_comm_ms", "memory_gb"):
                assert close(getattr(rr, key), wr[key]), (key, getattr(rr, key), wr[key])


def test_validate_agrees_with_the_hand_verdicts() -> None:
    for name in CASES:
        inst, plan, want = load_case(name)
        assert href.validate_hybrid_ref(inst, plan) == want["violations"], name


def test_zero_changes_memory_only() -> None:
    """(c): the three zero levels share T, E and A; memory falls with z at d = 2."""
    runs = [href.evaluate_hybrid_ref(*load_case(f"zero{z}")[:2]) for z in (0, 1, 2)]
    assert len({(r.t_iter_ms, r.e_iter_j, r.grad_sync_ms) for r in runs}) == 1
    mems = [r.stages[0].replicas[0].memory_gb for r in runs]
    assert mems[0] > mems[1] > mems[2]


def test_geotrain_case_equals_its_hybrid_spelling() -> None:
    """(f) written as a hybrid plan (tp 1, one replica of u samples) has the same price."""
    inst, plan, want = load_case("geotrain")
    hybrid = {"stages": [{"layers": s["layers"], "tp": 1, "recompute": "none",
                          "replicas": [{"gpus": [s["gpu"]], "samples": 4}]}
                         for s in plan["stages"]]}
    a, b = href.evaluate_hybrid_ref(inst, plan), href.evaluate_hybrid_ref(inst, hybrid)
    assert (a.t_iter_ms, a.e_iter_j, a.objective) == (b.t_iter_ms, b.e_iter_j, b.objective)
    assert close(b.t_iter_ms, want["t_iter_ms"])


def test_lambda_between_needs_normalisers() -> None:
    inst, plan, _ = load_case("boundary")
    inst["objective"] = {"lambda": 0.5}
    with pytest.raises(ValueError, match="t_ref_ms"):
        href.evaluate_hybrid_ref(inst, plan)


def unlabelled(inst: dict, *ids: str) -> dict:
    """The instance with the site labels of ``ids`` removed."""
    return dict(inst, gpus=[{k: v for k, v in g.items() if k != "site" or g["id"] not in ids}
                            for g in inst["gpus"]])


def test_tp_groups_must_share_one_site() -> None:
    """A GPU without a site label is a site of its own: two of them are two sites."""
    inst, plan, _ = load_case("tp")
    assert href.validate_hybrid_ref(unlabelled(inst, "a0", "a1"), plan) == ["tp_site"]
    assert href.validate_hybrid_ref(unlabelled(inst, "a1"), plan) == ["tp_site"]
    across = {"stages": [plan["stages"][0] | {"replicas": [{"gpus": ["a0", "b0"],
                                                            "samples": 4}]}]}
    assert href.validate_hybrid_ref(inst, across) == ["tp_site"]
    # tp 1 on an unlabelled GPU is fine
    assert href.validate_hybrid_ref(unlabelled(inst, "a0"), load_case("dp")[1]) == []


def without_link(inst: dict, src: str, dst: str) -> dict:
    return dict(inst, links=[e for e in inst["links"] if (e["src"], e["dst"]) != (src, dst)])


BOUNDARY_LINKS = href.BOUNDARY_LINKS


@pytest.mark.parametrize(("link", "used"), BOUNDARY_LINKS)
def test_only_links_the_plan_uses_matter(link: tuple[str, str], used: bool) -> None:
    inst, plan, want = load_case("boundary")
    r = href.evaluate_hybrid_ref(without_link(inst, *link), plan)
    if used:
        assert not r.feasible and all(v.startswith("missing_link") for v in r.violations)
        assert r.t_iter_ms == math.inf
    else:
        assert r.feasible and close(r.t_iter_ms, want["t_iter_ms"])
        assert close(r.e_iter_j, want["e_iter_j"])
