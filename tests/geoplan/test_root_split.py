"""The root box search split over forked processes (geoplan.cost.root_split)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from geoplan.cost import bounds, root_split
from geoplan.cost.evaluate import Evaluator
from geoplan.cost.parametric import Box, ParametricBound, parametric_bound
from geoplan.model import generators
from geoplan.model.instance import Instance
from geoplan.solving import forkpool
from geoplan.solving.core import solve

needs_fork = pytest.mark.skipif(not forkpool.available(), reason="no fork on this platform")


def _setup(seed: int, lam: float) -> tuple[tuple[Any, ...], float]:
    inst = Instance.from_dict(generators.by_family("metro", 12, 12, seed, lam=lam))
    ev = Evaluator(inst)
    res = solve(inst, "bnb", seed=1, time_limit=600, threads=1, params={"parametric": False})
    assert res.status == "optimal" and res.objective is not None
    return (inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights), res.objective


class _CountingPool(root_split.ForkPool):
    made = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        type(self).made += 1
        super().__init__(*args, **kwargs)


@needs_fork
@pytest.mark.parametrize(("seed", "lam"), [(5, 0.5), (6, 0.5), (5, 1.0)])
def test_split_search_stays_below_the_optimum_and_reports_rising_bounds(
        monkeypatch: pytest.MonkeyPatch, seed: int, lam: float) -> None:
    """After a few boxes here, two forked parts go on from the open boxes: the bound is
    the least of theirs, never above the optimum, and the search ends (no deadline)."""
    args, opt = _setup(seed, lam)
    monkeypatch.setattr(root_split, "MIN_GPUS", 2)
    monkeypatch.setattr(root_split, "ForkPool", _CountingPool)
    monkeypatch.setattr(root_split, "_POLL_S", 0.01)
    _CountingPool.made = 0
    for inc in (None, opt):
        seen: list[float] = []
        pb = root_split.split_bound(*args, incumbent=inc, deadline=None, workers=2,
                                    serial_boxes=4, progress=seen.append)
        assert pb.value <= opt * (1 + 1e-12)
        assert pb.boxes > 4 and pb.open_boxes == tuple(sorted(pb.open_boxes,
                                                              key=lambda b: b.bound))
        assert all(b < a for a, b in zip(seen[1:], seen[:-1], strict=True))
        assert not seen or seen[-1] <= pb.value
        if inc is not None:
            assert all(b.bound < inc for b in pb.open_boxes)
    assert _CountingPool.made == 2  # both searches were split
    serial = parametric_bound(*args, incumbent=opt)
    assert serial.value <= opt * (1 + 1e-12)


@needs_fork
def test_one_worker_or_a_small_pool_is_the_plain_search(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    args, opt = _setup(5, 0.5)
    plain = parametric_bound(*args, incumbent=opt)
    monkeypatch.setattr(root_split, "ForkPool", None)  # a fork would fail
    one = root_split.split_bound(*args, incumbent=opt, deadline=None, workers=1,
                                 serial_boxes=4)
    small = root_split.split_bound(*args, incumbent=opt, deadline=None, workers=2,
                                   serial_boxes=4)  # 12 GPUs < MIN_GPUS
    for pb in (one, small):
        assert (pb.value, pb.boxes, pb.dp_calls, pb.parts) == (plain.value, plain.boxes,
                                                               plain.dp_calls, 0)


@needs_fork
def test_stop_reaches_the_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the split is under way, ``stop()`` sets the parts' shared flag: they return
    their open boxes at once (far from done: this pool's search takes hundreds of boxes),
    and the bound is still proven."""
    inst = Instance.from_dict(generators.by_family("metro", 64, 48, 3, lam=0.5))
    ev = Evaluator(inst)
    args = (inst.coefficients(), inst.layers, bounds.clusters(inst), ev.weights)
    split = {"on": False}

    class Pool(root_split.ForkPool):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            split["on"] = True

    monkeypatch.setattr(root_split, "ForkPool", Pool)
    monkeypatch.setattr(root_split, "MIN_GPUS", 2)
    pb = root_split.split_bound(*args, incumbent=None, deadline=None, workers=2,
                                serial_boxes=8, stop=lambda: split["on"])
    assert split["on"]
    assert not pb.exhausted and pb.open_boxes
    assert pb.value == pb.open_boxes[0].bound
    full = parametric_bound(*args, max_boxes=8)
    assert pb.value >= full.value  # the parts start from these boxes and only raise them


def _part(value: float, exhausted: bool, sets: tuple[tuple[int, ...], ...],
          bounds_: tuple[float, ...]) -> ParametricBound:
    """A part whose least boxes (``bounds_``) have the minimisers' sites ``sets``."""
    return ParametricBound(value, len(bounds_), 2 * len(bounds_), 1.0, exhausted,
                           tuple(Box(b, 1, 2, 1.0, 2.0, 0.5) for b in bounds_),
                           {"of": value}, sets,
                           hints=tuple(zip(bounds_, sets, strict=False)))


def test_merge_takes_the_least_part_and_every_box() -> None:
    first = _part(1.0, False, ((0,),), (1.0, 1.5))
    low = _part(2.0, True, ((0, 1), (1,), (0,)), (2.0, 4.0, 4.5))
    high = _part(3.0, False, ((1,), (2,), (0, 1)), (3.0, 3.5, 3.7))
    out = root_split.merge(first, [high, low], None, 7.0)
    assert out.value == 2.0 and out.exhausted  # the part holding the bound is final
    assert [b.bound for b in out.open_boxes] == [2.0, 3.0, 3.5, 3.7, 4.0, 4.5]
    # The sites of the four least boxes of all parts, least first, no repeats.
    assert out.site_sets == ((0, 1), (1,), (2,))
    assert out.transitions == {"of": 2.0}  # the least part's
    assert out.parts == 2 and out.summary()["parts"] == 2
    assert (out.boxes, out.dp_calls, out.seconds) == (2 + 3 + 3, 4 + 6 + 6, 7.0)
    # A part at the same least bound that is not final keeps the search open.
    assert not root_split.merge(first, [low, _part(2.0, False, (), (2.0,))], None,
                                 7.0).exhausted
    # Every part at the incumbent: the incumbent is the bound, and it is final.
    capped = root_split.merge(first, [_part(5.0, True, (), ()), _part(5.0, False, (), ())],
                              5.0, 7.0)
    assert capped.value == 5.0 and capped.exhausted


def test_a_final_least_part_ends_the_others() -> None:
    """The one search stops once its least box is final: so does the split, once a
    finished part's final bound is the least of all (the running ones' as last shown)."""
    final = _part(2.0, True, (), (2.0,))
    assert root_split._over([final], [1], [math.inf, 2.5])
    assert not root_split._over([final], [1], [math.inf, 1.5])  # a running part is lower
    assert not root_split._over([_part(2.0, False, (), (2.0,))], [1], [math.inf, 2.5])
    assert not root_split._over([final, _part(1.0, False, (), (1.0,))], [], [])
