"""Branching on sites: the parametric bound on parts of the plan space by the sites used.

The relaxation of :mod:`geoplan.cost.parametric` prices every run end's send at its
GPU's cheapest inter-site link and caps the stage by it, whatever sites the rest of
the configuration uses. Its minimiser may lean on a site it does not use: at metro
N=128 L=96 lambda 1 (instance seed 71) the least box's minimiser used three sites,
whose end GPUs' cheapest links lead to two others; the bound was 399.5, and 405.1
with those two sites removed, against a best plan of 407.2.

So the plans are partitioned by sites. A node is (allowed sites A, forced sites F):
the plans whose sites lie in A and include F. Its bound is the parametric search on
the pool restricted to A (prices from A's links only) with F forced (each must be
used); both are exact restrictions of the plans counted, so the bound holds for
every plan of the node, and a child keeps its parent's bound when its own search
finds less. A node whose minimiser leaves sites s_1..s_k of A unused and unforced
(ordered by their cheapest round trip to the minimiser's sites: the likeliest to
lend it a cheap link first) splits into k + 1 parts: the plans using none of them
(A - {s_1..s_k}, F), and for each i those whose first used one is s_i
(A - {s_1..s_(i-1)}, F + s_i). A child's search starts from its parent's open boxes
(they hold every plan of the child better than the incumbent). Nodes are taken
least bound first; the bound is the least over the open nodes.

**Site order.** Within one site set the relaxation still lets each run end take its
cheapest inter-site link, to whichever site it leads, while the walk prices only
charge the cheapest walk through the sites: at metro N=64 L=48 lambda 1 (instance
seed 71) the node of the three sites the best plans use stayed 0.73 % below the
best plan HiGHS found in 150 s on those 24 GPUs. So a node whose minimiser uses all
of A (at most :data:`_ORDER_SITES` sites) is parted by the order its plans visit
the sites: those leaving out an unforced site (by the first one left out, as
above), then for each order of A the plans visiting each site once in that order
(a *path* node; on more than :data:`_PATH_SITES` sites one *once-each* node,
parted by prefixes below), and the plans that visit some site twice (a *revisit*
node). On a
path every send goes to a known site, so the search prices each by its link to
that site (caps included) and needs no transition prices
(``parametric_bound(path=...)``); a revisit node keeps the walk prices, bounded by
walks that revisit a site (``revisits=1``). Both partitions are exact.

**Walks.** On at most :data:`_WALK_SITES` sites the revisit node is parted further:
one node per walk that visits one site twice and the others once (searched with each
visit's run apart and each send priced by the site it goes to, as a path), and the
plans whose walk steps back to a visited site twice or more (walk prices bounded by
such walks, ``revisits=2``). At metro N=64 L=48 lambda 1 (instance seed 73) the revisit
node of three sites stayed 0.45 % below the best plan; its 18 walks and the rest all
reach it (proven in 14 s of branching). On at most :data:`_WALK2_SITES` sites that rest
is parted the same way again (the 42 walks stepping back exactly twice, some visiting a
site three times, and the plans stepping back three times or more), and that rest once
more (90 walks, and four or more steps back): at metro N=64 L=48 lambda 0.5 (instance
seed 149) the rest on three sites was the least node, 0.70 % below the best plan; split
twice, 0.017 % (the least node is then a revisit node of five sites), in 64 s of
branching on one core.

**Plans from path nodes.** On a path the relaxed minimiser is a pipeline (one run
per site, its GPUs and layer counts; ``ParametricBound.configs``), priced here by
the evaluator; the best one better than the incumbent is returned and bounds the
search from then on. On the instance above the path node's minimiser was a plan of
451.424 against HiGHS's 451.974, and its bound proved it.

**Time.** Each part of a split gets an equal slice of the time left, so one slow
part (at N=128 a search on nearly the whole pool) does not starve the rest; a node
cut short, or a path or revisit node searched with a worse incumbent than the
current one (near the incumbent the search splits finer: the last digits decide a
proof), runs again from its open boxes when it comes up; so, once, does a node about
to be final, its start boxes split afresh (a path's bound rises far above its
parent's, whose boxes were split for less: metro N=64 L=48 seed 59, 0.33 % short
without this, proven with it). Search starts from a parent's boxes price each box only
once it comes up, and the nodes on one site set share its pool and box tables.

**Workers.** With ``workers`` > 1 (an exact solver's ``--threads``) the node searches
run in that many forked processes (:class:`~geoplan.solving.forkpool.ForkPool`; a search
takes about 10 ms at N=64, so the workers are forked once and fed through pipes). This
process keeps the heap: it hands the waiting parts of a split to free workers (each its
share of the time left, as many shares running at once as there are workers), takes the
next least node when none wait, and files each result as it comes back. A search started
with an older incumbent is searched again when its node comes up, as above; one still
under way at the deadline keeps its parent's bound and boxes, like a part never
searched, so the bound stays proven. Each worker keeps its own pools and tables (they
start as this process's, by fork).

**Gaps.** A revisit node of five to seven sites (the plans visiting every site, some
twice) is parted into the plans stepping back once and the rest (two or more steps back,
``_REVISITS2``). The first are parted by the site x they visit twice and the site they
visit first, each part a *gapped* node. A gapped node is (prefix, middle, suffix): the
walks starting with the prefix and ending with the suffix, the middle's visits (a
multiset) between them in any order. It is searched by the walk DP
(``parametric_bound(gapped=...)``: each visit's run apart, as on a walk; a send priced by
the cheapest link to a site that may be there; a middle visit may hold the last stage
when there is no suffix), and parted by the walk's last site, then the site after the
prefix, each part kept only if its middle can still be ordered with no site twice in a
row; with two visits or fewer left in the middle, by its walks. The parts are exact, and
most short prefixes are closed by the incumbent: on six sites 1,800 walks per site
visited twice, of which a handful are searched. The kept-apart cover below, which these
nodes replace for one step back, searched a whole six-site pool with a pair DP (1.2-1.9
s a node, against 25-50 ms for a gapped node). At metro N=64 L=48 lambda 1 (instance
seed 149; 15 s root search, one core) branching ends 1.21 % below the best plan after
60 s (1.38 % with the kept-apart cover) and 0.37-0.38 % after 150 s (0.78 %), still
splitting gapped nodes when time is up; at metro N=128 L=96 lambda 0.5 (seeds 107 and
109, 40 s + 40 s) no gapped node comes up and the bounds are unchanged. Gapped nodes for
two steps back too (one site visited three times or two twice) did worse at 60 s (1.46
%): their searches took 69 ms each and crowded out the rest.

**Runs kept apart.** A residual revisit node that is not split by walks or gaps (two or
more steps back on five to seven sites; four sites once it steps back twice; three once
four times) is covered by one part per
site x: the plans visiting x twice or more, searched with two of x's runs kept apart
(``parametric_bound(keep_apart=...)``: each run's ends take their own inter-site sends
and stage caps; any further runs of x and every other site's runs are joined as before).
Every plan of the node visits some site twice, so the least part bounds it (the parts
overlap; a bound needs a cover, not a partition). The joined relaxation let a revisit
node's two extra inter-site ends vanish into intra-site sends, and with them their caps
under the bottleneck Z. On eight sites or more a final node stays final: each part is a
search on nearly the whole pool (metro N=128 L=96 lambda 0.5, instance seed 109:
splitting eight-site nodes left 10 nodes searched in 40 s instead of 93, and a worse
bound). A kept-apart part of the plans stepping back twice or more (on at most
:data:`_GAP_SITES` sites) that its second search leaves below the incumbent is split
once more (:data:`_APART_GAP_BACK`): the plans stepping back exactly twice and visiting
x more than once (gapped nodes, as above) and those stepping back three times or more
(x kept apart again). Only such parts are split: gapped nodes for every plan stepping back
twice took 48 ms each on six sites and left 1.09 % where this leaves none. At metro N=64
L=48 lambda 1 (instance seed 149, 15 s root search, one core, the best plan as
incumbent) the last open node was the part of six sites keeping B apart, 0.195 % below
the best plan; split so, branching proved the plan in 68 s. With ``apart_back=3`` a part
stepping back three times or more is split the same way, into gapped nodes stepping back
exactly three times and the part stepping back four times or more (off by default:
:data:`_APART_GAP_BACK`).

**More runs.** A kept-apart part that is still below the incumbent once it can no
longer be split by its steps back (by default one stepping back three times or more) is
split by the runs its plans hold per site: the plans holding one run more on its last
kept-apart site (in name order), and for each later site the plans holding two or more
runs there too (:func:`_more_runs`), until the runs asked for step back as often as the
part's plans do. Its search counts the runs of a site asked for three or more
(``parametric_bound(apart_runs=...)``: the site's run starts and ends are counted, each
run's inter-site sends priced and capped, further runs joined to them) and keeps two
runs apart on each site asked for two. Each plan of the residual lies in a part reached
from the part of the first site (in name order) it visits twice, raising its sites in
name order, so the parts of all the residual's sites together cover it. A part whose
runs step back as often as its plans do (and whose residual has a next) is split once
more: the plans holding exactly those runs, every other site once (gapped nodes of that
multiset, :func:`_exact_runs`; a site visited four times, a joined node), and those
stepping back once more with the same runs. At metro N=64 L=48 lambda 1 (instance seed
251, site branching alone from the best plan, two workers) the parts keeping D apart
stepping back three times or more stayed 0.23 % below the best plan; D holding three
runs, or D and a later site two each, each reached it, and branching proved the plan in
65 s. HiGHS, given 240 s on the same plans as a class, raised no bound. On seed 179
(110 s, from its best plan) branching ended every node final 0.57 % below the plan with
the first split alone, 0.33 % with both (in 82 s), held by the plans using all eight
sites.

**Four visits.** The walk DP holds at most :data:`~geoplan.cost.parametric.MAX_VISITS`
(three) visits per site; four would take 13^4 DP states per site (about 1 GB of traced
buffers at N=64). The plans stepping back exactly three times that visit the kept-apart
site x four times (every other site once) are instead a *joined* gapped node: its middle
holds x three times. Joining x's second and third visits into one run (x_2's stages,
then x_3's) maps such a plan to a walk of that node that costs no more under the
node's prices: x_2's last send and x_3's first become intra-site sends, which the
joined run (alone) prices by the GPU's cheapest link of any kind, so no higher than the
inter-site sends they were (``parametric_bound(joined=...)``); the visits between x_2 and x_3
keep their GPUs, and each of their sends is priced by the cheapest link to any site of
the middle, which holds both its real neighbour x and its new one. The first and last
visits are untouched, so the node may be parted by its first and last site; not by the
site after a prefix, whose sends a prefix prices by its known neighbours.

**Prefixes.** A once-each node (five to seven sites: the plans visiting each site once,
``once=True``: one run per site, walk prices bounded by paths) is parted by the site its
plans visit first, each such *prefix* node by the site they visit next, and so on until
two sites are left, whose two orders are path nodes. A prefix node's search
(``parametric_bound(prefix=...)``) prices the prefix's sends by the sites they go to and
every other send by the cheapest link to a site it may go to (a site not yet in the
prefix, or the prefix's last one for a send back); only the first site may hold the
first stage. Most prefixes of two or three sites are closed by the incumbent, so a
six-site node's 720 orders become a few dozen searches: at metro N=64 L=48 lambda 1
(instance seed 149; 15 s root search, then 60 s of branching on one core) 111 prefix
searches took 3.4 s where the 1,440 path searches of two six-site nodes had taken
16-17 s, and the bound reached 1.33-1.38 % instead of 1.62-1.70 % (lambda 0.5: 0.14 %
instead of 0.24 %); at metro N=128 L=96 lambda 0.5 (seeds 107 and 109, 40 s + 40 s)
the bounds are unchanged. Five-site nodes were first left to their 120 path searches;
with gapped nodes in place, prefixes there too (15 s + 60 s, one run each): lambda 1,
1.17 % instead of 1.21 %; lambda 0.5, 0.09 % instead of 0.17-0.25 %; metro N=128
lambda 0.5 seed 107 unchanged; metro N=64 lambda 1 seeds 59 and 73 still proven by the
sliced MILP in 12-15 s.

**Time, measured.** At metro N=64 L=48 lambda 1 (instance seed 149) 150 s of branching
ended 0.37 % below the best plan before the box searches stopped at the incumbent after
their first DP (:meth:`geoplan.cost.parametric._Boxes._search_mu`); since, a gapped
search takes 8.5 ms instead of 45, and 60 s of branching end 0.27 % below it.

**What is left open.** When branching stops, its open nodes are summarised as classes
(:class:`~geoplan.cost.parametric.PlanClasses`, ``SiteBranching.classes``): the nodes of
plans stepping back (revisit residuals, kept-apart parts) one class per site set, the
others one class (or, when they are a few path nodes, one class each with its site
order, :data:`_PATH_CLASSES`); a class is the sites its plans may use and must use
and the range of their inter-site sends (:func:`_sends`: a node's visits less one), with
its nodes' open boxes (every better plan of a node lies in one of its own). The
sliced MILP (:mod:`formulations.sliced`) solves each class with those as rows: an exact
model is strong exactly where this branching is weak, on plans with many inter-site sends. At
metro N=64 L=48 lambda 1 (instance seed 179) the whole pool's branching spends most of
its time on six-site nodes stepping back twice (gapped nodes of seven visits, 130-360
ms each) and on six sites alone leaves the plans stepping back three times or more (a
kept-apart cover that is not split) 0.52 % short; the MILP closes that class in 12 s.
"""

from __future__ import annotations

import collections
import functools
import heapq
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from geoplan.cost import bounds, transitions
from geoplan.cost.evaluate import evaluate
from geoplan.cost.parametric import (
    MAX_VISITS,
    START_STALL,
    Box,
    BoxTables,
    ParametricBound,
    PlanClasses,
    box_tables,
    parametric_bound,
    path_plan,
    proves,
)
from geoplan.cost.weights import ObjectiveWeights
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving import forkpool
from geoplan.solving.forkpool import ForkPool

__all__ = ["SiteBranching", "branch_on_sites"]

#: A child search gets at least this many seconds, or it is not started.
_MIN_NODE_S = 0.5


@dataclass(frozen=True)
class SiteBranching:
    """What :func:`branch_on_sites` proved: every plan's objective is >= ``value``."""

    value: float
    nodes: int  #: node searches run (the root's not counted)
    open_nodes: int
    seconds: float
    #: The sites (names) of the least open node's minimiser, for primal searches.
    sites: tuple[str, ...] = ()
    #: The best plan found (GPU id, layers per stage), if better than the incumbent given.
    plan: tuple[tuple[str, int], ...] | None = None
    objective: float | None = None  #: that plan's objective
    #: Classes covering the open nodes' plans (every plan better than the incumbent).
    classes: tuple[PlanClasses, ...] = ()
    #: The site sets (names) of the open nodes whose plans need not step back, least node
    #: first (:func:`_open_sets`): where a better plan may visit each site once, a primal
    #: hint.
    open_sets: tuple[tuple[str, ...], ...] = ()

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {"bound": self.value, "nodes": self.nodes,
                                  "open_nodes": self.open_nodes,
                                  "seconds": round(self.seconds, 3)}
        if self.objective is not None:
            out["plan_objective"] = self.objective
        return out


#: A node is (allowed sites, forced sites, kind): kind () for every such plan, a tuple of
#: site names for the plans visiting those sites once each in that order, or _REVISITS.
_Kind = tuple[str, ...]
_REVISITS: _Kind = ("<revisits>",)
#: The plans whose walk steps back to a visited site at least twice (three, four times).
_REVISITS2: _Kind = ("<revisits2>",)
_REVISITS3: _Kind = ("<revisits3>",)
_REVISITS4: _Kind = ("<revisits4>",)
_RESIDUALS = {_REVISITS: 1, _REVISITS2: 2, _REVISITS3: 3, _REVISITS4: 4}
#: The plans visiting each site once, in any order (nodes of more than _PATH_SITES sites;
#: split by prefixes).
_ONCE: _Kind = ("<once>",)
#: The plans visiting every site once, these sites first and in this order, (_PREFIX,
#: *sites): a node of _ONCE is split by its first site, and each prefix node by its next
#: one, until two sites are left (then its two paths).
_PREFIX = "<prefix>"
#: The plans visiting every site once and one of them twice, whose walk starts with a
#: known prefix and ends with a known suffix, the visits between them (a multiset) in any
#: order: (_GAP, *prefix, _SEP, *middle, _SEP, *suffix); searched by the walk DP with
#: each send priced by the sites that may be there.
_GAP = "<gap>"
_SEP = "<|>"
#: The plans stepping back exactly three times that visit one site x four times and every
#: other site once, as a gapped node whose middle holds x three times: (_JOINED, *prefix,
#: _SEP, *middle, _SEP, *suffix). Each such walk, with x's second and third visits joined
#: into one run, is a walk of that node (module docstring, "Four visits"); parted by its
#: first and last site only.
_JOINED = "<gap-joined>"
#: A residual split again by its walks: (the residual, its walks' steps back, the rest).
_RESIDUAL_SPLITS = {_REVISITS2: (2, _REVISITS3), _REVISITS3: (3, _REVISITS4)}
#: The plans of a residual that visit a given site twice or more, (_APART, site, the
#: residual's marker): searched with two of that site's runs kept apart. With more,
#: (_APART, site, marker, its least runs, *(another site, its least runs)...): the plans
#: holding at least that many runs on each of those sites (:func:`_apart_runs`).
_APART = "<apart>"
#: Final nodes of at most this many sites are split by the order the plans visit them (one
#: path node per order); on more, the plans visiting each site once are one node, split by
#: prefixes (six sites: a few dozen prefix searches instead of 720 path searches; five
#: sites: fewer than 120).
_PATH_SITES = 4
#: Final nodes of more sites, up to this many, are split into the plans visiting each site
#: once and those visiting some site twice (on more, each part is a search on nearly
#: the whole pool and the parts starve the rest).
_ORDER_SITES = 7
#: The plans of more sites, up to this many, visiting some site twice are split into the
#: plans stepping back once (one gapped node per site visited twice, split by the walk's
#: first and last site and then its prefix) and the rest (two or more steps back).
_GAP_SITES = 7
#: The steps back of the residuals split so (the rest: the next residual).
_GAP_BACK = (1,)
_NEXT_RESIDUAL = {_REVISITS: _REVISITS2, _REVISITS2: _REVISITS3, _REVISITS3: _REVISITS4}
#: A kept-apart node of a residual stepping back at least twice and at most this often (on
#: at most _GAP_SITES sites) that stays below the incumbent after its second search is
#: split too: into the plans stepping back exactly that often (gapped nodes; the site kept
#: apart among those visited more than once) and those stepping back more (the next
#: residual's node, the same site kept apart). With three steps back (``apart_back=3``,
#: :func:`branch_on_sites`) the plans visiting the kept-apart site four times, beyond the
#: walk DP's MAX_VISITS, are joined nodes (:data:`_JOINED`). Not by default: at metro
#: N=64 L=48 (milp, two threads, 120 s; bench/milp_three_back.py) it moved no gap beyond
#: noise (instance seed 251: 0.16-0.22 % against 0.23 %), and on seed 661 (lambda 1)
#: branching took 56 s instead of 17 s (the best plan as incumbent) for the same bound,
#: where HiGHS closes the final kept-apart nodes as a class in under a second.
_APART_GAP_BACK = 2
#: On at most this many sites the plans visiting some site twice are split further: one
#: node per walk that visits one site twice and the others once (18 walks on 3 sites,
#: 144 on 4, 1200 on 5), and the rest (two or more steps back).
_WALK_SITES = 4
#: On at most this many sites the plans stepping back twice or more are split again: one
#: node per walk that steps back exactly twice (42 on 3 sites), and the rest (three or
#: more); and these once more: 90 walks stepping back three times, and the rest.
_WALK2_SITES = 3
#: When the open nodes of plans that do not step back are this many path nodes or fewer,
#: each is a class of its own, its site order a constraint of the exact model: at metro
#: N=32 L=32 lambda 0.5 (instance seed 269) two path nodes of four sites stayed 2e-5
#: below the best plan (their relaxation prices intra-site sends by the cheapest link).
_PATH_CLASSES = 4


@dataclass(frozen=True)
class _Pool:
    """The pool restricted to a site set, with what every search on it shares."""

    instance: Instance
    names: list[str]  #: cluster label k is names[k]
    cluster: np.ndarray
    tables: BoxTables


def _pool(instance: Instance, allowed: frozenset[str],
          pools: dict[frozenset[str], _Pool | None]) -> _Pool | None:
    """The pool of ``allowed`` (cached in ``pools``); None when its GPUs cannot hold the
    model (the node has no plans)."""
    if allowed not in pools:
        try:
            sub = instance.subset([g.id for g in instance.gpus if g.site in allowed])
        except InputError:
            pools[allowed] = None
        else:
            cluster = bounds.clusters(sub)
            pools[allowed] = _Pool(sub, bounds.site_names(sub) or [], cluster,
                                   box_tables(sub.coefficients(), sub.layers, cluster))
    return pools[allowed]


def _path_labels(pool: _Pool, kind: _Kind) -> tuple[int, ...] | None:
    """A path or walk node's sites as the pool's cluster labels (None: neither)."""
    if not _is_walk(kind):
        return None
    return tuple(pool.names.index(s) for s in kind)


def _is_walk(kind: _Kind) -> bool:
    """Whether a node's kind is a site walk (its visits' sites in order; a path if none
    repeats)."""
    return bool(kind) and kind not in _RESIDUALS and kind != _ONCE and \
        kind[0] not in (_APART, _PREFIX, _GAP, _JOINED)


def _gap_kind(prefix: tuple[str, ...], middle: tuple[str, ...], suffix: tuple[str, ...],
              marker: str = _GAP) -> _Kind:
    return (marker, *prefix, _SEP, *sorted(middle), _SEP, *suffix)


def _gap_split(kind: _Kind) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """A gapped node's prefix, middle and suffix."""
    i = kind.index(_SEP)
    j = kind.index(_SEP, i + 1)
    return kind[1:i], kind[i + 1:j], kind[j + 1:]


@functools.lru_cache(maxsize=65536)
def _arrangeable(before: str | None, middle: tuple[str, ...], after: str | None) -> bool:
    """Whether the multiset ``middle`` (sorted) has an order with no site twice in a row,
    neither after ``before`` nor before ``after`` the same site."""
    if not middle:
        return before is None or after is None or before != after
    for x in sorted(set(middle)):
        if x != before:
            i = middle.index(x)
            if _arrangeable(x, middle[:i] + middle[i + 1:], after):
                return True
    return False


def _gap_roots(allowed: frozenset[str], back: int, twice: str | None = None
               ) -> list[tuple[frozenset[str], frozenset[str], _Kind]]:
    """The plans visiting every site of ``allowed`` and stepping back exactly ``back``
    times (and visiting ``twice``, if given, more than once), parted by the sites they
    visit more than once and the site they visit first. A site visited once more than
    the walk DP holds (:data:`~geoplan.cost.parametric.MAX_VISITS`), every other once, is
    a joined node (:data:`_JOINED`); no other such plans are counted."""
    return [part for extra in itertools.combinations_with_replacement(sorted(allowed), back)
            if twice is None or twice in extra for part in _visiting(allowed, extra)]


def _visiting(allowed: frozenset[str], extra: tuple[str, ...]
              ) -> list[tuple[frozenset[str], frozenset[str], _Kind]]:
    """:func:`_gap_roots` of one multiset: the plans visiting each site of ``allowed``
    once, and those of ``extra`` once more each (empty where the walk DP cannot hold
    them)."""
    sites = sorted(allowed)
    most = max(extra.count(x) for x in extra)
    if most < MAX_VISITS:
        return _gap_parts(allowed, (), tuple(sorted((*sites, *extra))), ())
    if most == MAX_VISITS == len(extra) and len(sites) > MAX_VISITS:
        # x visited MAX_VISITS + 1 times needs MAX_VISITS other sites between.
        return _gap_parts(allowed, (), tuple(sorted((*sites, *extra[1:]))), (), _JOINED)
    return []


def _gap_parts(allowed: frozenset[str], prefix: tuple[str, ...], middle: tuple[str, ...],
               suffix: tuple[str, ...], marker: str = _GAP
               ) -> list[tuple[frozenset[str], frozenset[str], _Kind]]:
    """A gapped node's plans, parted: by the walk's first site (no prefix yet), else its
    last (no suffix yet), else the site after the prefix; a part with two visits or fewer
    left in the middle by its walks. A joined node (``marker`` :data:`_JOINED`) is parted
    by its first and last site only: its parts stay gapped."""
    kinds: list[_Kind] = []

    def add(p: tuple[str, ...], m: tuple[str, ...], s: tuple[str, ...]) -> None:
        if not _arrangeable(p[-1] if p else None, m, s[0] if s else None):
            return
        if len(m) > 2 or marker == _JOINED:
            kinds.append(_gap_kind(p, m, s, marker))
            return
        for order in sorted(set(itertools.permutations(m))):
            walk = (*p, *order, *s)
            if all(a != b for a, b in itertools.pairwise(walk)):
                kinds.append(walk)

    def without(x: str) -> tuple[str, ...]:
        i = middle.index(x)
        return middle[:i] + middle[i + 1:]

    if marker == _JOINED and prefix and suffix:
        return []
    if len(middle) <= 2:
        add(prefix, middle, suffix)
    else:
        for x in sorted(set(middle)):
            if not prefix:
                add((x,), without(x), suffix)
            elif not suffix:
                add(prefix, without(x), (x,))
            elif x != prefix[-1]:
                add((*prefix, x), without(x), suffix)
    return [(allowed, allowed, k) for k in kinds]


def _sends(allowed: frozenset[str], forced: frozenset[str], kind: _Kind
           ) -> tuple[int, int | None]:
    """The least and the most inter-site sends of a node's plans (None: no most): a plan
    visiting sites V times in all (a visit: a run of consecutive stages on one site) sends
    V - 1 times between sites."""
    if not kind:
        return max(len(forced), 1) - 1, None
    if kind in _RESIDUALS or kind[0] == _APART:
        # Every forced site visited, and at least this many steps back to a visited site.
        return len(forced) + _revisits(kind)[0] - 1, None
    if kind == _ONCE or kind[0] == _PREFIX:
        return len(allowed) - 1, len(allowed) - 1
    if kind[0] in (_GAP, _JOINED):
        # A joined node's plans make one visit more than its walks (two joined in one).
        visits = sum(map(len, _gap_split(kind))) + (kind[0] == _JOINED)
        return visits - 1, visits - 1
    return len(kind) - 1, len(kind) - 1  # a path or a walk: its visits


def _classes(nodes: list[tuple[frozenset[str], frozenset[str], _Kind, tuple[Box, ...]]]
             ) -> tuple[PlanClasses, ...]:
    """Classes covering the plans of ``nodes`` (the open ones): the nodes of plans that
    step back to a visited site (revisit residuals, kept-apart parts) one class per site
    set, the others one class. A class of plans stepping back has many inter-site sends,
    which an exact model's LP prices well: at metro N=64 L=48 lambda 1 (instance seed
    179, its six best sites) the MILP closes the plans stepping back three times or more
    in 12 s (those stepping back twice or more in 37 s) and is 2.4 % short after 60 s on
    all of them. A node's boxes (its search's open boxes, or its parent's when it was not
    searched; empty: none known) go with its class (:attr:`PlanClasses.boxes`)."""
    groups: dict[frozenset[str], list[
        tuple[frozenset[str], frozenset[str], _Kind, tuple[Box, ...]]]] = {}
    for node in nodes:
        key = node[0] if _revisits(node[2])[0] > 0 else frozenset()
        groups.setdefault(key, []).append(node)
    rest = groups.get(frozenset(), [])
    paths = [k for _, _, k, _ in rest if _is_path(k)]
    out = []
    if rest and len(paths) == len(rest) <= _PATH_CLASSES:
        # A few path nodes left: a class each, its order the steps allowed. (One class of
        # a site set's orders is one harder model: at metro N=32 L=32 lambda 0.5, instance
        # seed 269, the slice holding the best plan took 49 s for two mirrored orders,
        # against 7 s for each alone.)
        del groups[frozenset()]
        out += [PlanClasses(tuple(sorted(a)), tuple(sorted(f)), *_sends(a, f, k), orders=(k,),
                            boxes=b) for a, f, k, b in sorted(rest, key=lambda n: n[2])]
    for _, group in sorted(groups.items(), key=lambda kv: (len(kv[0]), sorted(kv[0]))):
        # A group's nodes all step back (revisits > 0) or none does (the key is empty).
        out.append(PlanClasses.hull([
            PlanClasses(tuple(sorted(a)), tuple(sorted(f)), *_sends(a, f, k), _revisits(k)[0],
                        boxes=b) for a, f, k, b in group]))
    return tuple(out)


def _is_path(kind: _Kind) -> bool:
    """Whether a node's kind is a site path (each of its sites once, in this order)."""
    return _is_walk(kind) and len(set(kind)) == len(kind)


def _revisits(kind: _Kind) -> tuple[int, str | None]:
    """The steps back a node's plans take at least (0: not known), and the first site whose
    runs its search keeps apart (None: none)."""
    if kind and kind[0] == _APART:
        return max(_RESIDUALS[(kind[2],)], _runs_back(kind)), kind[1]
    return _RESIDUALS.get(kind, 0), None


def _apart_runs(kind: _Kind) -> dict[str, int]:
    """A kept-apart node's least runs per site it keeps apart (:data:`_APART`)."""
    runs = {kind[1]: int(kind[3]) if len(kind) > 3 else 2}
    runs.update((x, int(r)) for x, r in zip(kind[4::2], kind[5::2], strict=True))
    return runs


def _runs_back(kind: _Kind) -> int:
    """The steps back a kept-apart node's least runs take (each run beyond a site's first;
    0 for other kinds)."""
    if not kind or kind[0] != _APART:
        return 0
    return sum(r - 1 for r in _apart_runs(kind).values())


def _apart_kind(marker: str, runs: dict[str, int]) -> _Kind:
    """The kept-apart kind of ``runs`` (:data:`_APART`; two runs on one site: the short
    form)."""
    first, *rest = sorted(runs)
    if not rest and runs[first] == 2:
        return (_APART, first, marker)
    return (_APART, first, marker, str(runs[first]),
            *itertools.chain.from_iterable((x, str(runs[x])) for x in rest))


def _node_bound(instance: Instance, allowed: frozenset[str], forced: frozenset[str],
                kind: _Kind, incumbent: float | None, deadline: float,
                stop: Callable[[], bool] | None, start: tuple[Box, ...] | None,
                pools: dict[frozenset[str], _Pool | None], deep: bool = False
                ) -> tuple[ParametricBound, list[str]]:
    """The parametric search on the plans of one node; and the subset's site names by label."""
    pool = _pool(instance, allowed, pools)
    if pool is None:
        return ParametricBound(math.inf, 0, 0, 0.0, True), []
    sub, names = pool.instance, pool.names
    path = _path_labels(pool, kind)
    revisits, apart = _revisits(kind)
    runs = _apart_runs(kind) if apart is not None else {}
    gapped = joined = None
    if kind and kind[0] in (_GAP, _JOINED):
        p, m, s = (tuple(names.index(x) for x in part) for part in _gap_split(kind))
        gapped = (p, m, s)
        if kind[0] == _JOINED:  # the site visited most: MAX_VISITS times, once joined
            joined = max(m, key=lambda k: (p + m + s).count(k))
    pb = parametric_bound(sub.coefficients(), sub.layers, pool.cluster,
                          ObjectiveWeights.from_instance(sub), incumbent=incumbent,
                          deadline=deadline, stop=stop,
                          forced=tuple(names.index(s) for s in sorted(forced)), path=path,
                          revisits=revisits, once=kind == _ONCE,
                          prefix=tuple(names.index(s) for s in kind[1:])
                          if kind and kind[0] == _PREFIX else None,
                          keep_apart=tuple(names.index(x) for x in runs) if runs else None,
                          apart_runs=tuple(runs.values()) if runs else None,
                          gapped=gapped, joined=joined,
                          start=start, tables=pool.tables,
                          start_stall=0 if deep else START_STALL)
    return pb, names


def _order_parts(allowed: frozenset[str], forced: frozenset[str]
                 ) -> list[tuple[frozenset[str], frozenset[str], _Kind]]:
    """A final node's plans, parted: those leaving out some unforced site (by the first
    one left out), then those using every site by the order they visit them (once
    each; on more than :data:`_PATH_SITES` sites, as one part), and those visiting some
    site twice."""
    rest = sorted(allowed - forced)
    none: _Kind = ()
    parts = [(allowed - {x}, forced | set(rest[:i]), none) for i, x in enumerate(rest)]
    if len(allowed) > _PATH_SITES:
        return [*parts, (allowed, allowed, _ONCE), (allowed, allowed, _REVISITS)]
    parts += [(allowed, allowed, p) for p in itertools.permutations(sorted(allowed))]
    if len(allowed) > _WALK_SITES:
        parts.append((allowed, allowed, _REVISITS))
        return parts
    parts += [(allowed, allowed, w) for w in walks_stepping_back(sorted(allowed), 1)]
    parts.append((allowed, allowed, _REVISITS2))
    return parts


def _prefix_parts(allowed: frozenset[str], prefix: tuple[str, ...]
                  ) -> list[tuple[frozenset[str], frozenset[str], _Kind]]:
    """The plans visiting every site of ``allowed`` once, ``prefix`` first: parted by the
    site after the prefix (with two sites left, by the two paths)."""
    rest = sorted(allowed - set(prefix))
    if len(rest) == 2:
        kinds = [(*prefix, *rest), (*prefix, *reversed(rest))]
    else:
        kinds = [(_PREFIX, *prefix, x) for x in rest]
    return [(allowed, allowed, k) for k in kinds]


def walks_stepping_back(sites: list[str], back: int) -> list[tuple[str, ...]]:
    """The walks through every site of ``sites`` (never one twice in a row) that step
    back to a visited site exactly ``back`` times (``len(sites) + back`` visits), sorted
    (``sites`` sorted); ``back=1``: one site visited twice, every other once."""
    k = len(sites)
    out = []
    for walk in itertools.product(sites, repeat=k + back):
        if len(set(walk)) == k and all(a != b for a, b in itertools.pairwise(walk)):
            out.append(walk)
    return out


def _path_plans(instance: Instance, pb: ParametricBound, kind: _Kind, pool: _Pool | None
                ) -> list[tuple[tuple[tuple[str, int], ...], float]]:
    """The plans a path node's relaxed minimisers form, priced on ``instance``."""
    path = None if pool is None else _path_labels(pool, kind)
    if path is None or pool is None or not pb.configs:
        return []
    sub, cluster = pool.instance, pool.cluster
    out = []
    for config in pb.configs:
        pairs = path_plan(config, cluster, path)
        if pairs is None:
            continue
        plan = Plan.from_indices(sub, [g for g, _ in pairs], [n for _, n in pairs])
        ev = evaluate(instance, plan)
        if ev.feasible:
            out.append((tuple((st.gpu, st.layers) for st in plan.stages), float(ev.objective)))
    return out


def branch_on_sites(instance: Instance, root: ParametricBound, incumbent: float | None,
                    deadline: float, stop: Callable[[], bool] | None = None,
                    workers: int = 1, apart_back: int = _APART_GAP_BACK) -> SiteBranching:
    """Refine ``root`` (the search on the whole instance) by branching on sites until
    ``deadline`` (``time.perf_counter()``) or ``stop()``; the value is proven, and at
    least ``root.value`` (or the objective of the plan found, if that is less).

    Path nodes' relaxed minimisers are plans: the best one better than ``incumbent``
    is returned, and bounds the search from then on; a path or revisit node whose
    search ran with a worse incumbent runs again from its open boxes (closer to the
    new incumbent its boxes are split finer: the last digits decide a proof).

    ``workers`` > 1: node searches run in that many forked processes at once
    (:mod:`geoplan.solving.forkpool`), least bound first as on one; a search started
    with an older incumbent runs again when its node comes up, as above.

    ``apart_back`` (2 or 3): how many steps back a kept-apart node may take and still be
    split by them (:data:`_APART_GAP_BACK`)."""
    if apart_back not in (2, 3):
        raise ValueError(f"apart_back is 2 or 3 (the walk DP's visits), not {apart_back}")
    t0 = time.perf_counter()
    root_names = bounds.site_names(instance)  # cluster label k is root_names[k]
    if root_names is None or len(root_names) < 3 or not root.site_sets:
        return SiteBranching(root.value, 0, 1, 0.0)
    all_sites = frozenset(root_names)
    ub = math.inf if incumbent is None else float(incumbent)
    plan: tuple[tuple[str, int], ...] | None = None
    # Round trips between sites (least over their GPUs), for the choice of the split site.
    trip, _, _ = transitions.site_links(np.asarray(instance.coefficients().comm_ms),
                                        bounds.clusters(instance))

    def used_sites(pb: ParametricBound, names: list[str]) -> frozenset[str]:
        return frozenset(names[k] for k in pb.site_sets[0]) if pb.site_sets else frozenset()

    # Heap entries: (bound, tie, allowed, forced, kind, the minimiser's sites).
    heap: list[tuple[float, int, frozenset[str], frozenset[str], _Kind, frozenset[str]]] = []
    counter = 0
    heapq.heappush(heap, (root.value, counter, all_sites, frozenset(), (),
                          used_sites(root, root_names)))
    nodes = 0
    # Nodes that cannot be split: (bound, the minimiser's sites, allowed, forced, kind,
    # its open boxes).
    final: list[tuple[float, frozenset[str], frozenset[str], frozenset[str], _Kind,
                      tuple[Box, ...]]] = []
    # Per heap tie: the open boxes of the node's search, the incumbent it ran with,
    # whether it ended exhausted, and whether its start boxes were split afresh.
    boxes: dict[int, tuple[tuple[Box, ...], float, bool, bool]] = {
        0: (root.open_boxes, ub, root.exhausted, True)}
    idx = {s: k for k, s in enumerate(root_names)}
    pools: dict[frozenset[str], _Pool | None] = {}

    def node_search(task: _Task) -> tuple[ParametricBound, list[str], list[
            tuple[tuple[tuple[str, int], ...], float]]]:
        """One node's search and the plans of its path minimisers (here or in a worker)."""
        allowed, forced, kind, inc, until, start, deep = task
        pb, names = _node_bound(instance, allowed, forced, kind, inc, until,
                                stop if workers <= 1 else None, start, pools, deep)
        return pb, names, _path_plans(instance, pb, kind, pools.get(allowed))

    # Parts waiting for a search: (allowed, forced, kind, the parent's bound, its boxes,
    # its sites, deep, the share of the time left: None for an equal slice).
    pending: collections.deque[_Part] = collections.deque()
    # Searches under way in the workers, by tie: (the part, the incumbent it runs with).
    running: dict[int, tuple[_Part, float]] = {}
    pool = ForkPool(workers, node_search) if workers > 1 and forkpool.available() else None
    slots = 1 if pool is None else workers

    def absorb(tie: int, part: _Part, ran_with: float, out: tuple[
            ParametricBound, list[str], list[tuple[tuple[tuple[str, int], ...], float]]]
               ) -> None:
        nonlocal nodes, ub, plan
        pb, names, found = out
        nodes += 1
        for pairs, obj in found:
            if obj < ub:
                ub, plan = obj, pairs
        allowed, forced, kind, floor, _, _, deep, _ = part
        v = max(pb.value, floor)
        if v < ub:
            heapq.heappush(heap, (v, tie, allowed, forced, kind, used_sites(pb, names)))
            boxes[tie] = (pb.open_boxes, ran_with, pb.exhausted, deep)

    def shelve(part: _Part) -> None:
        """A part not searched keeps its parent's bound and boxes."""
        nonlocal counter
        allowed, forced, kind, floor, start, used, _, _ = part
        counter += 1
        heapq.heappush(heap, (floor, counter, allowed, forced, kind, used))
        if start is not None:
            boxes[counter] = (start, ub, False, False)

    def launch(part: _Part) -> None:
        """Search ``part`` now (one slot) or in a free worker."""
        nonlocal counter
        allowed, forced, kind, _, start, _, deep, share = part
        now = time.perf_counter()
        if deadline - now < _MIN_NODE_S:
            shelve(part)  # no time for this child
            return
        # Each part of a split gets an equal slice of the time left (with several workers,
        # as many slices run at once), so that one slow part does not starve the rest (a
        # part cut short runs again when it comes up).
        share = share if share is not None else min(1.0, slots / (len(pending) + 1))
        until = min(now + share * (deadline - now), deadline)
        counter += 1
        task = (allowed, forced, kind, None if not math.isfinite(ub) else ub, until, start,
                deep)
        if pool is None:
            absorb(counter, part, ub, node_search(task))
        else:
            pool.submit(counter, task)
            running[counter] = (part, ub)

    closing = False
    try:
        while True:
            if pool is not None and running:
                for tie, out in pool.results(0.0):
                    part, ran_with = running.pop(tie)
                    absorb(tie, part, ran_with, out)
            while not closing and (pool is None or pool.idle) and (pending or heap):
                if pending:
                    launch(pending.popleft())
                    continue
                value, tie, allowed, forced, kind, used = heap[0]
                if value >= ub or proves(value, ub):
                    break
                free = sorted(allowed - used - forced, key=lambda x: (
                    min((trip[idx[u], idx[x]] for u in used), default=0.0), x))
                parts = _split(allowed, forced, kind, used, free, boxes.get(tie), apart_back)
                start, ran_with, done, deep = boxes.get(tie, (None, math.inf, True, True))
                splittable = parts is not None
                # A node searched with a worse incumbent (a path node's proof may need the
                # finer boxes near the new one), or cut by its time slice, runs again from
                # its boxes; so does one that would be final, once, splitting its start
                # boxes afresh (a path's bound rises far above its parent's, whose boxes
                # were split for less).
                again = start is not None and ((bool(kind) and ub < ran_with) or not done or (
                    not deep and not splittable))
                if not splittable and not again:
                    heapq.heappop(heap)
                    final.append((value, used, allowed, forced, kind, start or ()))
                    continue
                now = time.perf_counter()
                if (stop is not None and stop()) or deadline - now < 2 * _MIN_NODE_S:
                    closing = True
                    break
                heapq.heappop(heap)
                boxes.pop(tie, None)
                if parts is None:
                    pending.append((allowed, forced, kind, value, start, used, deep or done,
                                    0.5))
                else:
                    pending.extend((a, f, k, value, start, used, False, None)
                                   for a, f, k in parts)
            # Nothing under way: the loop above stopped on a proof, the clock or an empty
            # heap (it launches every waiting part while a slot is free).
            if pool is None or not running:
                break
            if (stop is not None and stop()) or time.perf_counter() > deadline + 1.0:
                break  # the searches under way keep their parents' bounds (below)
            for tie, out in pool.results(0.05):
                part, ran_with = running.pop(tie)
                absorb(tie, part, ran_with, out)
    finally:
        if pool is not None:
            pool.close()
    for part, _ in running.values():  # cut off: they keep their parents' bounds
        shelve(part)
    for part in pending:
        shelve(part)
    # Every node left, as final's rows: (bound, the minimiser's sites, allowed, forced, kind,
    # its open boxes).
    left = [(v, u, a, f, k, boxes[t][0] if t in boxes else ()) for v, t, a, f, k, u in heap]
    left += final
    leaves = [v for v, *_ in left if v < ub]
    value = min(leaves, default=ub)
    least_sites = min(left, key=lambda t: t[0])[1] if left else frozenset()
    # The classes (and open sets) leave out the nodes whose bound proves ``ub``
    # (PROOF_TOLERANCE): their plans are no better than ub (1 - 1e-9). At metro N=64 L=48
    # lambda 1 (instance seed 239) such path nodes were a class whose slices stayed open
    # for 60 s.
    open_left = [row for row in left if row[0] < ub and not proves(row[0], ub)]
    return SiteBranching(float(max(value, min(root.value, ub))), nodes, len(leaves),
                         time.perf_counter() - t0, tuple(sorted(least_sites)), plan,
                         ub if plan is not None else None,
                         _classes([(a, f, k, b) for _, _, a, f, k, b in open_left]),
                         _open_sets([(v, u, a, f, k) for v, u, a, f, k, _ in open_left]))


def _open_sets(nodes: list[tuple[float, frozenset[str], frozenset[str], frozenset[str], _Kind]]
               ) -> tuple[tuple[str, ...], ...]:
    """The distinct site sets of ``nodes`` (bound, minimiser's sites, allowed, forced,
    kind) whose plans need not step back, least bound first: a node's own sites where it
    fixes them (allowed = forced), else its minimiser's; two sites or more.

    Why: a better plan lies in an open node, and one that visits each site once is what
    the site-path search (:mod:`formulations.site_paths`) reads off the root's boxes. At
    metro N=64 L=48 lambda 1 (instance seed 179) the best plan known (511.37) uses site
    B, which no root minimiser does; the MILP ended at 512.44 in some runs, where the
    least such set after 60 s of branching, A B C F G H, held 511.37 in 3.3 s."""
    out: list[tuple[str, ...]] = []
    for _, used, allowed, forced, kind in sorted(nodes, key=lambda n: n[0]):
        if _revisits(kind)[0] > 0:
            continue
        sites = tuple(sorted(forced if allowed == forced else used))
        if len(sites) >= 2 and sites not in out:
            out.append(sites)
    return tuple(out)


#: A node search's arguments: allowed, forced, kind, incumbent, deadline, start boxes, deep.
_Task = tuple[frozenset[str], frozenset[str], _Kind, float | None, float,
              tuple[Box, ...] | None, bool]
#: A part waiting for its search: allowed, forced, kind, its parent's bound, the parent's
#: open boxes, the parent minimiser's sites, deep, and its share of the time left (None:
#: an equal slice with the other parts waiting).
_Part = tuple[frozenset[str], frozenset[str], _Kind, float, tuple[Box, ...] | None,
              frozenset[str], bool, float | None]


def _more_runs(allowed: frozenset[str], kind: _Kind
               ) -> list[tuple[frozenset[str], frozenset[str], _Kind]]:
    """The parts of a kept-apart node whose plans step back more often than its least runs
    say (each site's runs beyond its first are steps back): its last site (in name order)
    holding one run more, or a later site two or more.

    A cover of the plans a kept-apart cover counts here: a plan of the residual whose
    sites holding two or more runs are R reaches, from the node keeping R's first site
    apart, a part counting it by raising sites in name order (a site's runs up to the
    plan's, then the next site of R); plans this node counts through a site of R before
    its own first are counted by the nodes of that site."""
    runs = _apart_runs(kind)
    last = max(runs)
    parts = [(allowed, allowed, _apart_kind(kind[2], {**runs, last: runs[last] + 1}))]
    parts += [(allowed, allowed, _apart_kind(kind[2], {**runs, z: 2}))
              for z in sorted(allowed) if z > last]
    return parts


def _exact_runs(allowed: frozenset[str], kind: _Kind
                ) -> list[tuple[frozenset[str], frozenset[str], _Kind]]:
    """The plans of a kept-apart node holding exactly its runs (each other site visited
    once), as gapped nodes (:func:`_visiting`; empty where the walk DP cannot hold them)."""
    extra = tuple(sorted(x for x, r in _apart_runs(kind).items() for _ in range(r - 1)))
    return _visiting(allowed, extra)


def _split(allowed: frozenset[str], forced: frozenset[str], kind: _Kind, used: frozenset[str],
           free: list[str], state: tuple[tuple[Box, ...], float, bool, bool] | None,
           max_back: int = _APART_GAP_BACK
           ) -> list[tuple[frozenset[str], frozenset[str], _Kind]] | None:
    """The parts a node is split into (module docstring), None if it cannot be split.

    ``free``: the allowed sites its minimiser leaves unused and unforced, likeliest to
    lend it a cheap link first; ``state``: its search's (boxes, incumbent, exhausted,
    deep), if it ran; ``max_back``: kept-apart nodes stepping back at least twice and at
    most this often are split by their steps back (:data:`_APART_GAP_BACK`)."""
    ordered = not free and not kind and bool(used) and 2 <= len(allowed) <= _ORDER_SITES
    # The plans on a few sites stepping back twice or more: by their walk, once more.
    walks2 = not free and kind in _RESIDUAL_SPLITS and bool(used) and \
        len(allowed) <= _WALK2_SITES
    # The plans on a few sites stepping back once or more: those stepping back once by
    # the site they visit twice (gapped nodes), and the rest.
    once_back = not free and _RESIDUALS.get(kind, 0) in _GAP_BACK and bool(used) and \
        len(allowed) <= _GAP_SITES
    # A joined node is split by its first and last site only (module docstring).
    gapped = not free and bool(kind) and (kind[0] == _GAP or (kind[0] == _JOINED and not (
        all(_gap_split(kind)[::2]))))
    # The other residuals: by a site they visit twice or more (a cover of the plans).
    apart = not free and kind in _RESIDUALS and not walks2 and not once_back and bool(used)
    deep = True if state is None else state[3]
    # A kept-apart node its second search leaves below the incumbent: by its steps back.
    kept = not free and bool(kind) and kind[0] == _APART and deep \
        and len(allowed) <= _GAP_SITES
    apart_back = kept and len(kind) == 3 and 2 <= _revisits(kind)[0] <= max_back
    # A kept-apart node left below the incumbent otherwise: by the runs its plans hold;
    # once those say how often its plans step back at least, by their steps back.
    more_runs = kept and not apart_back and _RESIDUALS[(kind[2],)] > _runs_back(kind)
    exact = _exact_runs(allowed, kind) if kept and len(kind) > 3 and (
        kind[2],) in _NEXT_RESIDUAL and _RESIDUALS[(kind[2],)] == _runs_back(kind) else []
    runs_back = bool(exact)
    # The plans visiting each site once: by the order of their first sites.
    prefixed = not free and bool(kind) and (kind == _ONCE or kind[0] == _PREFIX)
    if not (bool(used) and bool(free or ordered or walks2 or apart or prefixed
                                or once_back or gapped or apart_back or more_runs
                                or runs_back)):
        return None
    if ordered:
        return _order_parts(allowed, forced)
    if walks2:
        back, rest = _RESIDUAL_SPLITS[kind]
        parts = [(allowed, allowed, w) for w in walks_stepping_back(sorted(allowed), back)]
        parts.append((allowed, allowed, rest))
        return parts
    if once_back:
        parts = _gap_roots(allowed, _RESIDUALS[kind])
        parts.append((allowed, allowed, _NEXT_RESIDUAL[kind]))
        return parts
    if gapped:
        return _gap_parts(allowed, *_gap_split(kind), kind[0])
    if apart:
        return [(allowed, allowed, (_APART, x, kind[0])) for x in sorted(allowed)]
    if apart_back:
        parts = _gap_roots(allowed, _revisits(kind)[0], kind[1])
        parts.append((allowed, allowed, (_APART, kind[1], _NEXT_RESIDUAL[(kind[2],)][0])))
        return parts
    if more_runs:
        return _more_runs(allowed, kind)
    if runs_back:
        return [*exact, (allowed, allowed, _apart_kind(
            _NEXT_RESIDUAL[(kind[2],)][0], _apart_runs(kind)))]
    if prefixed:
        return _prefix_parts(allowed, () if kind == _ONCE else kind[1:])
    parts = [(allowed - set(free), forced, kind)]
    parts += [(allowed - set(free[:i]), forced | {x}, kind) for i, x in enumerate(free)]
    return parts
