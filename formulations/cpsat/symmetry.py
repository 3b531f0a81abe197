"""Symmetry breaking: the dominance rule of :mod:`geoplan.cost.dominance` in CP-SAT terms.

:func:`_symmetry` splits the one rule into the pairs the model constrains
(``x_j => x_i`` for dominance pairs, ``n_i >= n_j`` for identical ones);
:func:`_canonical` applies the rule's moves to a plan so that it satisfies
those constraints (warm starts become valid hints).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from geoplan.cost.dominance import Dominance, dominance_of
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan


def _symmetry(
    instance: Instance, energy: bool
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Dominance pairs (i, j): x_j <= x_i; identical pairs (i, j): n_i >= n_j.

    The one rule of :mod:`geoplan.cost.dominance` (proof there), split into its
    non-identical pairs and its identical ones (n_i >= n_j implies x_j <= x_i).
    Tested on the float coefficients: the model's integers are rounded with
    one scale per kind, and rounding is monotone, so the conditions carry over.
    """
    rule = dominance_of(instance.coefficients(), instance.layers, energy)
    ident = list(rule.identical)
    same = set(ident)
    return [p for p in rule.pairs if p not in same], ident


def _canonical(instance: Instance, dominance: Sequence[tuple[int, int]],
               identical: Sequence[tuple[int, int]], plan: Plan) -> Plan:
    """An equally good or better plan that satisfies the symmetry breaking.

    Replaces a used GPU by an unused one that dominates it, and swaps the
    layer counts of identical GPUs into order, until neither applies (the
    moves that justify the symmetry-breaking constraints; they terminate).
    """
    # Moves R and S of the one rule (identical pairs are dominance pairs too).
    rule = Dominance(instance.n, (*dominance, *identical), tuple(identical),
                     np.arange(instance.n))
    idx, counts = rule.canonical(plan.gpu_indices(instance), plan.layer_counts)
    return Plan.from_indices(instance, idx, counts, plan.micro_batch_size)
