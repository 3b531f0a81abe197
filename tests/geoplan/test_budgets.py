"""Hard budgets (issue 9, item 7): the mechanisms, never a wall-clock verdict.

Wall times against ``time_limit + 0.5 s`` are measured by bench/budget_bench.py;
here only what decides them: a budget that is already spent makes the model
builds give up with the documented status, and ``generate`` refuses sizes
above its cap.
"""

from __future__ import annotations

import time

import pytest

from geoplan.cli import GENERATE_MAX_GPUS, GENERATE_MAX_LAYERS, main
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions


def _spent(seconds: float = 1.0) -> SolveOptions:
    """Options whose budget ran out ``seconds`` ago."""
    return SolveOptions(seed=0, time_limit=0.5, start=time.perf_counter() - 0.5 - seconds)


@pytest.mark.parametrize("module", ["formulations.milp", "formulations.cpsat"])
def test_an_expired_budget_abandons_the_model_with_the_best_known_plan(module: str) -> None:
    inst = Instance.from_dict(by_family("geo", 24, 16, 0))
    mod = __import__(module, fromlist=["solve"])
    out = mod.solve(inst, _spent())
    assert out.info["model"] == "abandoned: building exceeded the budget"
    assert out.status == "feasible" and out.plan is not None  # a heuristic or baseline plan


def test_cpsat_build_checks_between_blocks() -> None:
    from formulations.cpsat import build_model
    from formulations.milp import BuildAbandoned, build_checker

    inst = Instance.from_dict(by_family("metro", 16, 12, 0))
    steps: list[str] = []
    build_model(inst, check=steps.append)
    assert steps[0] == "circuit" and {"memory", "bounds"} <= set(steps)
    with pytest.raises(BuildAbandoned):
        build_model(inst, check=build_checker(_spent(), "cpsat model"))


def test_build_progress_reaches_the_callbacks() -> None:
    from formulations.milp import build_checker, build_model, prepare
    from geoplan.solving.core import Callbacks

    seen: list[dict] = []

    class Rec(Callbacks):
        def on_progress(self, info):  # type: ignore[no-untyped-def]
            seen.append(dict(info))

    inst = Instance.from_dict(by_family("metro", 12, 12, 0))
    opts = SolveOptions(seed=0, time_limit=60.0, callbacks=Rec())
    build_model(inst, data=prepare(inst), check=build_checker(opts, "milp model"))
    assert seen and all(s["building"] == "milp model" for s in seen)
    assert "order" in [s["step"] for s in seen]


@pytest.mark.parametrize("argv, field", [
    (["--n", str(GENERATE_MAX_GPUS + 1), "--layers", "8"], "--n"),
    (["--n", "8", "--layers", str(GENERATE_MAX_LAYERS + 1)], "--layers"),
    (["--n", "0", "--layers", "8"], "--n"),
])
def test_generate_refuses_sizes_above_its_cap(argv: list[str], field: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "geo", *argv, "--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert field in err and "must lie in [1," in err and "Traceback" not in err
