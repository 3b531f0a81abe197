"""Result rows of a small hybrid experiment, shared by the report and README tests."""

from __future__ import annotations

INFO = {"name": "hybrid", "report": {"kind": "hybrid", "pipeline": "pipeline MA",
                                     "hybrid": "hybrid MA", "baseline": "grid"},
        "solvers": [{"name": "memetic", "label": "pipeline MA"},
                    {"name": "hybrid-grid", "label": "grid"},
                    {"name": "hybrid-memetic", "label": "hybrid MA"}],
        "instances": [{"name": "i1"}, {"name": "i2"}]}

PIPE = {"stages": [{"gpu": "a0", "layers": 2}, {"gpu": "a1", "layers": 2}]}
HYB = {"stages": [{"layers": 4, "tp": 2, "recompute": "none",
                   "replicas": [{"gpus": ["a0", "a1"], "samples": 1},
                                {"gpus": ["a2", "a3"], "samples": 1}]}],
       "micro_batch_size": 2, "zero": 1}


def _row(label: str, instance: str, status: str, objective: float | None,
         plan: dict | None) -> dict:
    solver = {"pipeline MA": "memetic", "grid": "hybrid-grid", "hybrid MA": "hybrid-memetic"}
    return {"experiment": "hybrid", "profile": "full", "run_key": f"{label}-{instance}",
            "label": label, "solver": solver[label], "instance": instance, "seed": 0,
            "budget_s": 60.0, "status": status, "objective": objective,
            "t_iter_ms": objective, "e_iter_j": None if objective is None else 2 * objective,
            "lower_bound": None, "gap": None, "wall_s": 60.0, "n": 4, "layers": 4,
            "lambda": 1.0, "plan": plan, "trace": [],
            "instance_spec": {"generator": "preset", "cluster": "small-3r",
                              "model": "llama2-7b"}}


def _rows() -> list[dict]:
    return [
        _row("pipeline MA", "i1", "feasible", 200.0, PIPE),
        _row("grid", "i1", "feasible", 180.0, HYB),
        _row("hybrid MA", "i1", "feasible", 150.0, HYB),
        # only the hybrid space holds the model on i2
        _row("pipeline MA", "i2", "no_solution", None, None),
        _row("grid", "i2", "feasible", 120.0, HYB),
        _row("hybrid MA", "i2", "feasible", 100.0, HYB),
    ]
