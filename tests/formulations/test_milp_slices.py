"""The MILP narrowed to slices (:mod:`formulations.milp.slices`): slices cover every open
box, restrict the bottleneck, and hold exactly the plans their class admits."""

from __future__ import annotations

import math
import random

import pyomo.environ as pyo
import pytest
import reference_model as ref

from formulations.milp.data import prepare
from formulations.milp.model import build_model
from formulations.milp.slices import (
    Slice,
    add_slice_rows,
    class_slice,
    class_slices,
    make_slices,
    slice_data,
)
from formulations.milp.values import start_values
from geoplan.cost.parametric import Box, PlanClasses
from geoplan.model import generators
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan


def test_slices_cover_every_box_with_valid_floors() -> None:
    rng = random.Random(5)
    boxes = []
    for _ in range(40):
        za = rng.uniform(1, 20)
        qa = rng.randint(1, 10)
        boxes.append(Box(rng.uniform(100, 200), qa, qa + rng.randint(0, 3), za,
                         za + rng.uniform(0, 3), rng.uniform(10, 50)))
    for k in (1, 3, 7, 100):
        slices = make_slices(boxes, k)
        assert 1 <= len(slices) <= k
        for b in boxes:
            holders = [s for s in slices if s.za <= b.zb and s.zb >= b.za]
            assert holders
            for s in holders:
                assert s.qa <= b.qa and b.qb <= s.qb
                assert s.bound <= b.bound and s.s_floor <= b.s_floor
        # The slices' Z intervals together cover every box's interval.
        for b in boxes:
            covered = sorted((max(s.za, b.za), min(s.zb, b.zb)) for s in slices
                             if s.za <= b.zb and s.zb >= b.za)
            reach = b.za
            for lo, hi in covered:
                assert lo <= reach
                reach = max(reach, hi)
            assert reach >= b.zb


def test_a_class_is_sliced_on_its_own_boxes_when_it_has_them() -> None:
    """A class that kept its nodes' boxes is sliced on them (narrower than the search's),
    a class without on the search's; the hull of classes keeps boxes only when each has
    some; the slices' class carries no boxes."""
    root = [Box(1.0, 8, 18, 10.9, 23.3, 100.0)]
    own = (Box(1.2, 12, 12, 13.0038, 13.0039, 137.8), Box(1.3, 12, 12, 13.0039, 13.0046, 137.8))
    narrow = PlanClasses(("B", "C", "D"), ("B", "C", "D"), 2, 2, orders=(("D", "B", "C"),),
                         boxes=own)
    (sl,) = class_slice(root, narrow)
    assert (sl.qa, sl.qb, sl.za, sl.zb, sl.bound) == (12, 12, 13.0038, 13.0046, 1.2)
    assert sl.classes == narrow and sl.classes is not None and sl.classes.boxes == ()
    plain = PlanClasses(("A", "B"))
    (wide,) = class_slice(root, plain)
    assert (wide.qa, wide.qb, wide.za, wide.zb) == (8, 18, 10.9, 23.3)
    # Least bound first; the class of no revisits cut on its own boxes' bottlenecks.
    assert [(s.qa, s.za, s.bound) for s in class_slices(root, 4, [narrow, plain])] == [
        (8, 10.9, 1.0), (12, 13.0038, 1.2), (12, 13.00405, 1.3)]
    assert PlanClasses.hull([narrow, narrow]).boxes == own + own
    assert PlanClasses.hull([narrow, plain]).boxes == ()


def test_slice_data_restricts_layers_and_arcs_to_the_bottleneck() -> None:
    inst = Instance.from_dict(generators.by_family("metro", 8, 8, 2))
    data = prepare(inst)
    c = inst.coefficients()
    z = 0.5 * (data.tmax_lb + data.tmax_ub)
    sd = slice_data(data, Slice(1, data.kmax, data.tmax_lb, z, 0.0, 0.0))
    assert sd is not None and sd.tmax_ub <= z * (1 + 1e-9)
    for i in sd.gpus:
        assert sd.n_ub[i] * c.comp_ms[i] + c.overhead_ms <= z * (1 + 1e-9)
    assert all(sd.arc_weight(i, j) <= sd.tmax_ub for i, j in sd.arcs)
    assert set(sd.arcs) <= set(data.arcs)


@pytest.mark.parametrize(("sites", "classes"), [
    ("ABCABCA", PlanClasses(("A", "B", "C"), ("A", "C"), 2, None)),
    ("ABCABCA", PlanClasses(("A", "B"), (), 0, 1)),
    ("AABBCCD", PlanClasses(("A", "B", "C", "D"), ("B",), 1, 2)),
    ("AABBCCA", PlanClasses(("A", "B", "C"), ("A", "B", "C"), 2, 2, orders=(("B", "A", "C"),))),
    ("AABBCCD", PlanClasses(("A", "B", "C", "D"), ("A", "B", "C", "D"), 3, 3,
                            orders=(("A", "B", "C", "D"), ("B", "A", "D", "C")))),
])
def test_class_rows_hold_exactly_the_plans_a_class_admits(sites: str,
                                                          classes: PlanClasses) -> None:
    """N=7, L=5 (sites relabelled): a plan on the class's sites, set into the slice's
    model (every variable from the plan), satisfies the class rows iff the class
    admits it (``PlanClasses.admits``, which the rows mirror); a site outside the class
    is not in the model. A path class's model has no inter-site arcs off its order: the
    plans off it cannot be set into the model at all."""
    d = generators.by_family("metro", 7, 5, 3)
    for g, s in zip(d["gpus"], sites, strict=True):
        g["site"] = s
    inst = Instance.from_dict(d)
    data = prepare(inst)
    sl = Slice(1, data.kmax, data.tmax_lb, data.tmax_ub, -math.inf, 0.0, classes)
    sd = slice_data(data, sl)
    assert sd is not None
    assert {inst.gpus[i].site for i in sd.gpus} <= set(classes.sites)
    m = build_model(inst, data=sd, symmetry=True, cuts=True)
    add_slice_rows(m, inst, sd, sl, None)
    rows = [c for c in m.component_data_objects(pyo.Constraint)
            if c.parent_component().name.startswith("class_")]
    space = ref.price_space(d)
    seen = {True: 0, False: 0}
    for k in range(len(space.orders)):
        walk = [inst.gpus[inst.gpu_ids.index(g)].site for g in space.orders[k]]
        if not space.feasible[k] or not set(walk) <= set(classes.sites):
            continue
        vals = start_values(m, Plan.from_dict(space.plan(k)))
        if vals is None and not classes.orders:
            continue
        for var, v in (vals or {}).items():
            var.set_value(v, skip_validation=True)
        ok = vals is not None and all(
            (c.lower is None or pyo.value(c.body) >= pyo.value(c.lower) - 1e-9)
            and (c.upper is None or pyo.value(c.body) <= pyo.value(c.upper) + 1e-9)
            for c in rows)
        assert ok == classes.admits(walk), (walk, ok)
        seen[ok] += 1
    assert seen[True] > 10 and seen[False] > 10
