"""The root box search (:func:`~geoplan.cost.parametric.parametric_bound`) on several cores.

The exact solvers' bound comes first from one best-first box search over the whole
pool. At metro N=128 L=96 lambda 0.5 it takes 38-55 s of a 120 s budget (about 0.1 s a
box, 530-575 boxes), on one core while the other waits. :func:`split_bound` runs the
first :data:`SERIAL_BOXES` boxes here, then deals the open boxes out, alternately, to
``workers`` forked processes (:class:`~geoplan.solving.forkpool.ForkPool`), each going
on from its share as a search started from boxes (``parametric_bound(start=...)``, as
site branching's nodes do). Every plan better than the incumbent lies in one open box,
so the least of the parts' bounds is proven.

The parts report their bounds through shared memory as they rise, so the caller's
progress (the trace's bound column) moves during the split, and this process's
``stop()`` reaches them through a shared flag: each returns its open boxes when asked.
"""

from __future__ import annotations

import heapq
import math
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from geoplan.cost import parametric
from geoplan.cost.coefficients import Coefficients
from geoplan.cost.parametric import Box, ParametricBound
from geoplan.cost.weights import ObjectiveWeights
from geoplan.solving import forkpool
from geoplan.solving.forkpool import ForkPool

__all__ = ["SERIAL_BOXES", "split_bound"]

#: Boxes searched in this process before the split: enough to leave one open box per
#: region of the (stage count, bottleneck) plane the search will refine, few enough
#: that the split comes early (about 4 s at metro N=128 L=96).
SERIAL_BOXES = 40
#: Pools of fewer GPUs search in one process. At N=64 L=48 the root search took 2-13 s of
#: 120 s and splitting it gained at most 3 s; it also changed which of the near-equal least
#: boxes the primal searches start from (their site sets), and on the two N=64 instances of
#: bench/root_split.py (seeds 401 and 179) the plans found were worse. At N=128 L=96 lambda
#: 0.5 it took 21-52 s, and split up to 12 s less.
MIN_GPUS = 96
#: Whether :func:`split_bound` splits at all (a switch for benches: False, one process).
SPLIT = True
#: Seconds between two looks at the parts' bounds and at ``stop()``.
_POLL_S = 0.1


def split_bound(c: Coefficients, layers: int, cluster: np.ndarray, weights: ObjectiveWeights,
                *, incumbent: float | None, deadline: float | None, workers: int,
                stop: Callable[[], bool] | None = None,
                progress: Callable[[float], None] | None = None,
                serial_boxes: int = SERIAL_BOXES) -> ParametricBound:
    """:func:`~geoplan.cost.parametric.parametric_bound` of the whole pool (arguments as
    there), its search split over ``workers`` processes after ``serial_boxes`` boxes.

    In one process (``workers`` < 2, fewer than :data:`MIN_GPUS` GPUs, no fork, or a search
    over by then) it is that search.
    """
    t0 = time.perf_counter()
    tables = parametric.box_tables(c, layers, cluster)
    whole = not SPLIT or workers < 2 or c.n < MIN_GPUS or not forkpool.available()
    first = parametric.parametric_bound(
        c, layers, cluster, weights, incumbent=incumbent, deadline=deadline, stop=stop,
        progress=progress, tables=tables, max_boxes=None if whole else serial_boxes)
    if whole or first.exhausted or len(first.open_boxes) < 2 \
            or (stop is not None and stop()) \
            or (deadline is not None and time.perf_counter() >= deadline):
        return first
    groups = [first.open_boxes[k::workers] for k in range(workers)]
    # Shared before the fork, per part: its bound so far and its stop flag.
    shown = multiprocessing.RawArray("d", [min(b.bound for b in g) for g in groups])
    halt = multiprocessing.RawArray("b", workers)

    def part(k: int) -> ParametricBound:
        def report(bound: float) -> None:
            shown[k] = bound

        return parametric.parametric_bound(
            c, layers, cluster, weights, incumbent=incumbent, deadline=deadline,
            stop=lambda: bool(halt[k]), progress=report, tables=tables, start=groups[k])

    ub = math.inf if incumbent is None else float(incumbent)
    done: dict[int, ParametricBound] = {}
    stopping, reported = False, -math.inf
    with ForkPool(workers, part) as pool:
        for k in range(workers):
            pool.submit(k, k)
        while len(done) < workers:
            for k, pb in pool.results(_POLL_S):
                done[k] = pb
                shown[k] = pb.value
            running = [k for k in range(workers) if k not in done]
            if not stopping and ((stop is not None and stop())
                                 or _over(list(done.values()), running, shown)):
                stopping = True
                for k in running:
                    halt[k] = 1
            if progress is not None:
                low = min(min(shown), ub)
                if low > reported:
                    reported = low
                    progress(low)
    return merge(first, [done[k] for k in range(workers)], incumbent,
                 time.perf_counter() - t0)


def _over(done: list[ParametricBound], running: list[int], shown: Sequence[float]) -> bool:
    """Whether a finished part holds the least bound with its least box final: the bound
    cannot rise any more, whatever the running parts do (the one search stops there)."""
    final = [pb.value for pb in done if pb.exhausted]
    return bool(final) and min(final) <= min((shown[k] for k in running), default=math.inf) \
        and min(final) <= min(pb.value for pb in done)


def merge(first: ParametricBound, parts: list[ParametricBound],
          incumbent: float | None, seconds: float) -> ParametricBound:
    """One search's outcome, taking ``seconds`` in all, of the ``parts`` that went on from
    ``first``'s open boxes: the least bound, every part's open boxes, the least part's
    transition prices, and the site sets of the least boxes the parts read
    (:attr:`ParametricBound.hints`)."""
    ordered = sorted(parts, key=lambda pb: pb.value)
    value = ordered[0].value
    # The bound cannot rise any more once every part holding it is final; the others
    # (whose own bound is higher) do not hold it down.
    exhausted = all(pb.exhausted for pb in parts if pb.value <= value)
    if incumbent is not None and value >= incumbent:
        value, exhausted = float(incumbent), True
    # The sites of the least boxes any part read, as the one search reads its least boxes.
    read = sorted((h for pb in parts for h in pb.hints), key=lambda h: h[0])
    boxes: list[Box] = list(heapq.merge(*(pb.open_boxes for pb in parts),
                                        key=lambda b: b.bound))
    return replace(
        first, value=float(value), boxes=first.boxes + sum(pb.boxes for pb in parts),
        dp_calls=first.dp_calls + sum(pb.dp_calls for pb in parts),
        seconds=seconds, exhausted=exhausted,
        open_boxes=tuple(boxes), transitions=ordered[0].transitions,
        site_sets=parametric.hint_sets(read[:parametric.HINT_BOXES]),
        parts=len(parts))
