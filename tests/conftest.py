"""Shared fixtures: small hand-checkable instances."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geoplan.instance import Instance

DATA = Path(__file__).parent / "data"


def load_data(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.fixture
def three_gpu() -> Instance:
    """3 GPUs (A100 SXM, A100 PCIe, A30 at 50% compute), a-b-c chain, L=12, lambda 1."""
    return Instance.from_dict(load_data("three_gpu.json"))
