"""The three contiguity-preserving mutations (paper 5.4, Alg. 3; Fig. 5).

- boundary shift: at a stage boundary ``b`` (``x[b] != x[b-1]``) set
  ``x[b-1] = x[b]``: the left stage's last layer moves to the right stage (a
  one-layer left stage disappears);
- stage swap: two stages (GPU and its layers) exchange pipeline positions;
- GPU reassignment: one stage moves to a uniformly drawn inactive GPU
  (no-op when all N GPUs are active).

One operator is drawn uniformly per offspring; one that cannot act (one stage
for shift and swap, N stages for reassignment) leaves it unchanged, as in the
paper. A mutant the evaluator finds infeasible reverts to its parent.
The scalar functions state each move on one chromosome; the search uses
:func:`draw_mutations` and :func:`apply_mutations` on whole batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geoplan.cost.batch import FEASIBLE, BatchEvaluator
from heuristics.memetic.encoding import StageForm, decode, encode, from_stages, to_stages

__all__ = [
    "OPERATORS",
    "REASSIGN",
    "SHIFT",
    "SWAP",
    "Mutations",
    "apply_mutations",
    "boundary_shift",
    "draw_mutations",
    "gpu_reassign",
    "mutate",
    "stage_swap",
]

SHIFT, SWAP, REASSIGN = 0, 1, 2
OPERATORS = ("boundary_shift", "stage_swap", "gpu_reassign")


# --------------------------------------------------------------------------- scalar forms


def boundary_shift(x: np.ndarray, b: int) -> np.ndarray:
    """``x[b-1] = x[b]`` at a stage boundary ``b`` (0-based position, 1..L-1)."""
    x = np.asarray(x, dtype=np.int64)
    if not 1 <= b < x.shape[0] or x[b] == x[b - 1]:
        raise ValueError(f"position {b} is not a stage boundary of {x.tolist()}")
    y = x.copy()
    y[b - 1] = y[b]
    return y


def stage_swap(x: np.ndarray, q1: int, q2: int) -> np.ndarray:
    """Exchange the pipeline positions of stages ``q1`` and ``q2`` (0-based)."""
    gpus, counts = decode(x)
    gpus[q1], gpus[q2] = gpus[q2], gpus[q1]
    counts[q1], counts[q2] = counts[q2], counts[q1]
    return encode(gpus, counts)


def gpu_reassign(x: np.ndarray, q: int, gpu: int) -> np.ndarray:
    """Run stage ``q`` (0-based) on ``gpu``, which must be inactive in ``x``."""
    gpus, counts = decode(x)
    if gpu in gpus:
        raise ValueError(f"GPU {gpu} is already active in {np.asarray(x).tolist()}")
    gpus[q] = gpu
    return encode(gpus, counts)


# --------------------------------------------------------------------------- batch forms


@dataclass(frozen=True)
class Mutations:
    """Drawn moves, one per row: operator, stage ``a``, and ``b`` (second stage or new GPU).

    ``active`` is False where the drawn operator cannot act on the row.
    """

    op: np.ndarray
    a: np.ndarray
    b: np.ndarray
    active: np.ndarray


def draw_mutations(rng: np.random.Generator, S: StageForm, n_gpus: int) -> Mutations:
    """Draw one uniformly chosen operator and its random choices per row.

    Every row consumes the same random numbers whatever its operator, so the
    stream depends only on the batch size and N.
    """
    K = int(S.q.shape[0])
    q = S.q
    op = rng.integers(0, 3, size=K)
    u1 = rng.random(K)
    u2 = rng.random(K)
    keys = rng.random((K, n_gpus))
    a = np.zeros(K, np.int64)
    b = np.zeros(K, np.int64)

    shift = op == SHIFT
    # Boundary between stages j and j+1, uniform over the q-1 boundaries.
    a[shift] = np.floor(u1[shift] * (q[shift] - 1)).astype(np.int64)

    swap = op == SWAP
    j1 = np.floor(u1 * q).astype(np.int64)
    j2 = np.floor(u2 * (q - 1)).astype(np.int64)
    j2 = j2 + (j2 >= j1)  # two distinct stages, uniformly
    a[swap], b[swap] = j1[swap], j2[swap]

    reas = op == REASSIGN
    a[reas] = j1[reas]
    # A uniformly drawn inactive GPU: the largest key among GPUs not in the row.
    active_gpu = np.zeros((K, n_gpus), dtype=bool)
    cols = np.arange(S.gpus.shape[1])[None, :] < q[:, None]
    rows = np.broadcast_to(np.arange(K)[:, None], S.gpus.shape)
    active_gpu[rows[cols], S.gpus[cols]] = True
    keys = np.where(active_gpu, -1.0, keys)
    b[reas] = np.argmax(keys[reas], axis=1)

    active = np.where(op == REASSIGN, q < n_gpus, q >= 2)
    return Mutations(op, a, b, active)


def apply_mutations(S: StageForm, m: Mutations, layers: int) -> np.ndarray:
    """The mutants of stage-form rows ``S`` under moves ``m``, as (K, L) chromosomes."""
    T = S.copy()
    g, c = T.gpus, T.counts
    r = np.flatnonzero(m.active & (m.op == SHIFT))
    c[r, m.a[r]] -= 1
    c[r, m.a[r] + 1] += 1
    r = np.flatnonzero(m.active & (m.op == SWAP))
    j1, j2 = m.a[r], m.b[r]
    g[r, j1], g[r, j2] = g[r, j2], g[r, j1]
    c[r, j1], c[r, j2] = c[r, j2], c[r, j1]
    r = np.flatnonzero(m.active & (m.op == REASSIGN))
    g[r, m.a[r]] = m.b[r]
    return from_stages(T, layers)


def mutate(
    rng: np.random.Generator,
    X: np.ndarray,
    objective: np.ndarray,
    evaluator: BatchEvaluator,
) -> tuple[np.ndarray, np.ndarray, Mutations, np.ndarray]:
    """Mutate every row of ``X`` once; infeasible mutants revert to their parent.

    Returns ``(X', objective', moves, reverted)``; rows whose move could not
    act keep their parent's objective without being priced again.
    """
    n_gpus = evaluator.instance.n
    S = to_stages(X)
    m = draw_mutations(rng, S, n_gpus)
    Y = apply_mutations(S, m, X.shape[1])
    obj = objective.copy()
    reverted = np.zeros(X.shape[0], dtype=bool)
    act = np.flatnonzero(m.active)
    if act.size:
        res = evaluator.evaluate(Y[act])
        ok = res.status == FEASIBLE
        obj[act[ok]] = res.objective[ok]
        reverted[act[~ok]] = True
        Y[act[~ok]] = X[act[~ok]]
    return Y, obj, m, reverted
