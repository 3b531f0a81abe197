"""Shared fixtures: small hand-checkable instances."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from geoplan.model.instance import Instance

DATA = Path(__file__).parent / "data"

# Hypothesis runs deterministically in CI and locally: the examples derive from each
# test's name, not from a random seed, and no example database carries failures from
# one run into the next. Tests that set their own @settings inherit these defaults.
settings.register_profile("geoplan", derandomize=True, database=None, deadline=None)
settings.load_profile("geoplan")

# Importlib mode puts no test directory on sys.path, and putting tests/ there
# would let tests/geoplan shadow the geoplan package as a namespace package. So
# the test helpers (the independent reference model, the Hypothesis strategies
# and the bridge from geoplan Instances to the reference) are loaded by file and
# registered by name, in dependency order; the test modules then simply
# ``import reference_model`` (``strategies``, ``oracle``).
for _name in ("reference_model", "strategies", "oracle", "hybrid_reference", "hybrid_bench_rows",
              "ab_bench_rows"):
    if _name not in sys.modules:
        _spec = importlib.util.spec_from_file_location(_name, DATA.parent / f"{_name}.py")
        assert _spec is not None and _spec.loader is not None
        _module = importlib.util.module_from_spec(_spec)
        sys.modules[_name] = _module
        _spec.loader.exec_module(_module)


def load_data(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.fixture
def three_gpu() -> Instance:
    """3 GPUs (A100 SXM, A100 PCIe, A30 at 50% compute), a-b-c chain, L=12, lambda 1."""
    return Instance.from_dict(load_data("three_gpu.json"))


@pytest.fixture
def hand3_dict() -> dict:
    """The raw dict of tests/data/hand3.json (round numbers; see tests/geoplan/test_cost.py)."""
    return load_data("hand3.json")


@pytest.fixture
def hand3(hand3_dict: dict) -> Instance:
    """3 GPUs a, b, c with 1, 2, 4 ms per layer; links a<->b, b<->c only; L=6, M=8."""
    return Instance.from_dict(hand3_dict)


@pytest.fixture
def hand_u2() -> Instance:
    """2 GPUs x, y; u=2, kappa=4, alpha=10, gamma=1, C_l overridden; L=4, M=6, lambda 0."""
    return Instance.from_dict(load_data("hand_u2.json"))
