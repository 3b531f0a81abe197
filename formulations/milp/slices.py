"""What the MILP is narrowed to once the bound has run: bottleneck slices and plan classes.

The parametric bound (:mod:`geoplan.cost.parametric`) leaves *open boxes* (stage count x
bottleneck ranges, each with a floor) holding every plan better than the incumbent;
branching on sites (:mod:`geoplan.cost.site_branching`) leaves *classes*
(:class:`~geoplan.cost.parametric.PlanClasses`: the sites a plan may use and must use,
the range of its inter-site sends, for path classes the steps between sites). A
:class:`Slice` is a range of the bottleneck and stage count over some open boxes, with
their least floors and a class; :func:`slice_data` and :func:`add_slice_rows` make the
MILP of :mod:`formulations.milp.model` hold only its plans. The sliced MILP
(:mod:`formulations.sliced`) solves several slices per class; the MILP
(:mod:`formulations.milp.solver`) one slice over every open box, with the hull of the
classes (:meth:`~geoplan.cost.parametric.PlanClasses.hull`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyomo.environ as pyo

from formulations.milp.cuts import cut_groups
from formulations.milp.data import MilpData
from geoplan.cost import kernel
from geoplan.cost.parametric import Box, PlanClasses
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

__all__ = ["Slice", "add_class_rows", "add_slice_rows", "class_slice", "class_slices", "in_slice",
           "make_slices", "restrict_to_class", "slice_data"]


@dataclass(frozen=True)
class Slice:
    """Plans with Q in [qa, qb] and max tau in [za, zb]; objective >= ``bound`` and
    S >= ``s_floor`` for every such plan better than the incumbent."""

    qa: int
    qb: int
    za: float
    zb: float
    bound: float
    s_floor: float
    #: What site branching proved of every better plan (its sites, sends): constraints.
    classes: PlanClasses | None = None

    def summary(self) -> dict[str, object]:
        """Its ranges and bound, for a solver's ``info``."""
        return {"q": [self.qa, self.qb], "z": [round(self.za, 6), round(self.zb, 6)],
                "bound": self.bound}


def make_slices(boxes: Sequence[Box], n_slices: int,
                classes: PlanClasses | None = None) -> list[Slice]:
    """Cut the bottleneck axis into at most ``n_slices`` intervals holding about equal
    numbers of open boxes; a slice takes the Q range and the least floors of every
    box its interval meets (so each box's plans are in some slice, under floors
    valid for them), and ``classes`` (site branching's: what every better plan
    satisfies)."""
    if not boxes:
        return []
    mids = np.sort([0.5 * (b.za + b.zb) for b in boxes])
    k = min(n_slices, len(boxes))
    cuts = [float(np.quantile(mids, f)) for f in np.linspace(0, 1, k + 1)[1:-1]]
    lo_all, hi_all = min(b.za for b in boxes), max(b.zb for b in boxes)
    edges = sorted({lo_all, hi_all, *[c for c in cuts if lo_all < c < hi_all]})
    out = []
    for za, zb in itertools.pairwise(edges):
        grp = [b for b in boxes if b.za <= zb and b.zb >= za]
        if grp:
            out.append(Slice(min(b.qa for b in grp), max(b.qb for b in grp), za, zb,
                             min(b.bound for b in grp), min(b.s_floor for b in grp),
                             classes))
    return sorted(out, key=lambda s: s.bound)


def class_slices(boxes: Sequence[Box], n_slices: int,
                 classes: Sequence[PlanClasses]) -> list[Slice]:
    """The slices of ``boxes`` for each of site branching's ``classes`` (none: the boxes
    alone; a class's own boxes when it has them, :func:`class_slice`): a class of plans
    stepping back is one slice over every box (its MILP is
    strong, see :func:`geoplan.cost.site_branching._classes`), the other class is cut on
    the bottleneck (:func:`make_slices`). Least bound first."""
    if not classes:
        return make_slices(boxes, n_slices)
    out = []
    for c in classes:
        out += class_slice(boxes, c, 1 if c.revisits else n_slices)
    return sorted(out, key=lambda s: s.bound)


#: Slice a class on its own nodes' boxes when it has them (:func:`class_slice`); a switch
#: for bench/class_boxes.py.
_CLASS_BOXES = True


def class_slice(boxes: Sequence[Box], classes: PlanClasses, n_slices: int = 1) -> list[Slice]:
    """The slices of one class (:func:`make_slices`): on its own nodes' boxes when branching
    kept them (:attr:`PlanClasses.boxes`, every better plan of the class lies in one), else
    on ``boxes`` (the search's). The slices' class keeps no boxes (a slice is sent to
    workers)."""
    own = classes.boxes if _CLASS_BOXES else ()
    return make_slices(own or boxes, n_slices, replace(classes, boxes=()))


def slice_data(data: MilpData, sl: Slice) -> MilpData | None:
    """The MILP's data with the bottleneck and stage count restricted to the slice
    (layer bounds and arcs follow the bottleneck cap) and to its class
    (:func:`formulations.milp.classes.restrict`); None if nothing is left."""
    inst = data.instance
    c = inst.coefficients()
    lo, hi = max(data.tmax_lb, sl.za), min(data.tmax_ub, sl.zb * (1 + 1e-9))
    if lo > hi:
        return None
    kmax = min(data.kmax, sl.qb)
    if kmax < sl.qa:
        return None
    n_ub: dict[int, int] = {}
    for i in data.gpus:
        # tau_i >= n c_i + o for every stage, so n <= (zb - o) / c_i.
        by_time = math.floor((hi - float(c.overhead_ms)) / c.comp_ms[i] * (1 + 1e-9))
        ub = min(data.n_ub[i], by_time)
        if ub >= 1:
            n_ub[i] = ub
    if not n_ub:
        return None
    gpus = tuple(sorted(n_ub))
    keep = set(gpus)
    arcs = tuple((i, j) for i, j in data.arcs
                 if i in keep and j in keep and data.arc_weight(i, j) <= hi)
    dom = tuple(p for p in data.dominance if p[0] in keep and p[1] in keep)
    M = float(c.micro_batches)
    out = replace(data, gpus=gpus, arcs=arcs, kmax=kmax, n_ub=n_ub, tmax_lb=lo, tmax_ub=hi,
                  t_lb=max(data.t_lb, M * lo), dominance=dom)
    if sl.classes is not None:
        return restrict_to_class(out, sl.classes)
    return replace(out, groups=cut_groups(inst, gpus, None))


def add_slice_rows(m: pyo.ConcreteModel, instance: Instance, data: MilpData, sl: Slice,
                   cutoff: float | None) -> None:
    """The slice's rows on a model built from ``slice_data(data, sl)``: its least stage
    count, its floor (at lambda = 1 on S, else on the objective), the cutoff (only
    plans at least as good as it) and its class (:func:`add_class_rows`)."""
    for k in range(2, min(sl.qa, data.kmax) + 1):
        m.z[k].fix(1)  # Q >= qa
    M = float(instance.coefficients().micro_batches)
    if data.c_e == 0 and data.c_t > 0:
        # Mirrors geoplan.cost.kernel.iteration_time: T = S + (M - 1) tmax, S >= s_floor.
        m.slice_floor = pyo.Constraint(expr=m.t >= sl.s_floor + (M - 1) * m.tmax)
    elif math.isfinite(sl.bound):
        m.slice_floor = pyo.Constraint(expr=m.obj.expr >= sl.bound)
    if cutoff is not None and math.isfinite(cutoff):
        m.cutoff = pyo.Constraint(expr=m.obj.expr <= cutoff)
    if sl.classes is not None:
        add_class_rows(m, instance, data, sl.classes)


def in_slice(instance: Instance, plan: Plan, sl: Slice) -> bool:
    c = instance.coefficients()
    g = np.asarray(plan.gpu_indices(instance), np.int64)
    n = np.asarray(plan.layer_counts, np.int64)
    q = len(g)
    tmax = max(kernel.stage_terms(k, g, n, q, c.comp_ms, c.comm_ms, c.overhead_ms)[3]
               for k in range(q))
    admitted = sl.classes is None or sl.classes.admits(
        [instance.gpus[int(i)].site for i in g])
    return sl.qa <= q <= sl.qb and sl.za <= tmax <= sl.zb and admitted


def restrict_to_class(data: MilpData, classes: PlanClasses) -> MilpData | None:
    """``data`` with the GPUs of sites outside the class removed and, for a path class,
    only the inter-site arcs of its steps; None if a forced site is left no GPU."""
    inst = data.instance
    site = [g.site for g in inst.gpus]
    allowed = set(classes.sites)
    gpus = tuple(i for i in data.gpus if site[i] in allowed)
    if not gpus or not set(classes.forced) <= {site[i] for i in gpus}:
        return None
    keep = set(gpus)
    arcs = tuple((i, j) for i, j in data.arcs if i in keep and j in keep)
    if classes.orders:
        # Sends between sites only as on one of its paths. With every site forced and
        # one send fewer than sites, each site is visited once.
        steps = classes.steps()
        arcs = tuple((i, j) for i, j in arcs if site[i] == site[j] or (site[i], site[j]) in steps)
    return replace(data, gpus=gpus, arcs=arcs, n_ub={i: data.n_ub[i] for i in gpus},
                   dominance=tuple(p for p in data.dominance if p[0] in keep and p[1] in keep),
                   groups=cut_groups(inst, gpus, None))


def add_class_rows(m: pyo.ConcreteModel, instance: Instance, data: MilpData,
             classes: PlanClasses) -> None:
    """The class as rows on a model built from ``restrict_to_class(data, classes)``: each forced
    site holds a stage; the inter-site arcs taken (a plan's sends between sites) number
    between ``min_sends`` and ``max_sends``. Mirrors
    :meth:`geoplan.cost.parametric.PlanClasses.admits`."""
    site = {i: instance.gpus[i].site for i in data.gpus}
    m.class_forced = pyo.ConstraintList()
    for s in classes.forced:  # restrict_to_class() left each forced site a GPU
        m.class_forced.add(sum(m.y[i] for i in data.gpus if site[i] == s) >= 1)
    inter = [(i, j) for i, j in data.arcs if site[i] != site[j]]
    sends = sum(m.a[i, j] for i, j in inter)
    if classes.min_sends > 0:
        m.class_min_sends = pyo.Constraint(expr=sends >= classes.min_sends)
    if classes.max_sends is not None:
        m.class_max_sends = pyo.Constraint(expr=sends <= classes.max_sends)
