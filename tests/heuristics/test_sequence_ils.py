"""Sequence search (iterated polish): valid kicks, exact prices, determinism, optima."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import reference_optimum

from geoplan.cost import evaluate
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.split import Splitter
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import Callbacks
from heuristics.memetic.algorithm import MemeticParams, run_memetic
from heuristics.sequence_ils import iterated_polish, kick
from heuristics.site_order import polish_sequence, site_groups


def _setup(family: str, n: int, layers: int, seed: int, lam: float = 1.0
           ) -> tuple[Instance, Splitter, list[list[int]]]:
    inst = resolve_normalisers(Instance.from_dict(by_family(family, n, layers, seed, lam=lam)))
    sp = Splitter(inst)
    return inst, sp, site_groups(inst, sp.comp, sp.mem_cap)[1]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), q=st.integers(1, 12))
def test_kicks_keep_a_sequence_of_distinct_gpus_within_qmax(seed: int, q: int) -> None:
    groups = [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 10, 11]]
    rng = np.random.default_rng(seed)
    seq = [int(g) for g in rng.permutation(12)[:q]]
    for qmax in (q, 12):
        t = kick(rng, seq, groups, qmax)
        assert 1 <= len(t) <= qmax
        assert len(set(t)) == len(t) and set(t) <= set(range(12))


def test_result_is_the_exact_split_of_its_sequence_and_never_worse_than_the_polish() -> None:
    _, sp, groups = _setup("metro", 12, 16, 3)
    start = [g[0] for g in groups]
    _, polished, _ = polish_sequence(sp, start, groups=groups)
    out = iterated_polish(sp, start, groups, np.random.default_rng(0), 30)
    split = sp.split(out.sequence)
    assert split is not None
    assert out.objective == pytest.approx(split.objective, rel=1e-12)
    assert out.objective <= polished
    assert out.iterations == 30


def test_same_generator_same_search() -> None:
    _, sp, groups = _setup("geo", 12, 16, 4, lam=0.5)
    start = [groups[0][0]]
    a = iterated_polish(sp, start, groups, np.random.default_rng(7), 20)
    b = iterated_polish(sp, start, groups, np.random.default_rng(7), 20)
    assert (a.sequence, a.objective, a.splits) == (b.sequence, b.objective, b.splits)


@pytest.mark.parametrize(("family", "seed", "lam"), [("metro", 1, 1.0), ("metro", 2, 0.5),
                                                     ("geo", 3, 1.0)])
def test_reaches_the_enumerated_optimum_on_small_pools(family: str, seed: int, lam: float
                                                       ) -> None:
    inst, sp, groups = _setup(family, 6, 8, seed, lam)
    opt, _, _ = reference_optimum(inst)
    out = iterated_polish(sp, [groups[0][0]], groups, np.random.default_rng(0), 100)
    assert out.objective == pytest.approx(opt, rel=1e-9)


def test_memetic_offers_what_the_search_finds_at_the_shared_price() -> None:
    inst = Instance.from_dict(by_family("metro", 6, 8, 5))
    opt, _, _ = reference_optimum(inst)
    ga_only = MemeticParams(population=20, max_generations=1, site_order=False, ils=0)
    with_ils = MemeticParams(population=20, max_generations=1, site_order=False, ils=100)
    a = run_memetic(inst, 3, ga_only)
    b = run_memetic(inst, 3, with_ils)
    assert b.ils["phases"] == 1 and b.ils["iterations"] == 100 and a.ils == {}
    assert b.plan is not None
    assert evaluate(inst, b.plan).objective == pytest.approx(b.objective, rel=1e-12)
    assert b.objective == pytest.approx(opt, rel=1e-9)
    assert a.objective > opt * (1 + 1e-9)  # one generation of the GA alone does not get there
    assert [t.incumbent for t in b.trace] == sorted({t.incumbent for t in b.trace},
                                                    reverse=True)
    assert b.info()["ils"] == b.ils


def test_the_search_reports_progress_after_every_kick() -> None:
    class Recorder(Callbacks):
        def __init__(self) -> None:
            self.progress: list[dict[str, Any]] = []

        def on_progress(self, info: Mapping[str, Any]) -> None:
            self.progress.append(dict(info))

    rec = Recorder()
    inst = Instance.from_dict(by_family("metro", 6, 8, 5))
    r = run_memetic(inst, 3, MemeticParams(population=20, max_generations=1,
                                           site_order=False, ils=15), callbacks=rec)
    kicks = [p["sequence_search"] for p in rec.progress if "sequence_search" in p]
    assert kicks == list(range(1, 16)) == list(range(1, r.ils["iterations"] + 1))
    assert all(p["best"] >= r.objective for p in rec.progress)


def test_patience_ends_the_search_after_kicks_without_a_new_best() -> None:
    _, sp, groups = _setup("metro", 12, 16, 3)
    out = iterated_polish(sp, [g[0] for g in groups], groups, np.random.default_rng(0), 10_000,
                          patience=7)
    # every improvement resets the count, so at most 7 kicks follow the last one
    assert out.iterations < 10_000
    full = iterated_polish(sp, [g[0] for g in groups], groups, np.random.default_rng(0),
                           out.iterations)
    assert (full.sequence, full.objective) == (out.sequence, out.objective)
