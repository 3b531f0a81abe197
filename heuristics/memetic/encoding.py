"""Chromosome encoding of paper 5.1: ``[x_1..x_L]``, x_l the GPU index of layer l.

Scalar helpers (:func:`decode`, :func:`encode`, :func:`is_valid`,
:func:`boundaries`) serve tests and single plans; the search works on whole
batches, so :func:`to_stages` and :func:`from_stages` convert (K, L) arrays to
and from the stage form ``(gpus, counts, q)`` without Python loops over rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "StageForm",
    "boundaries",
    "boundary_mask",
    "decode",
    "encode",
    "from_stages",
    "is_valid",
    "row_keys",
    "to_stages",
]


def decode(x: Sequence[int] | np.ndarray) -> tuple[list[int], list[int]]:
    """GPUs and layer counts of the stages of ``x``, by one linear scan (paper 5.1).

    Does not check distinctness: a GPU that reappears later starts a new group
    (see :func:`is_valid`).
    """
    gpus: list[int] = []
    counts: list[int] = []
    for v in np.asarray(x).tolist():
        if gpus and gpus[-1] == v:
            counts[-1] += 1
        else:
            gpus.append(int(v))
            counts.append(1)
    return gpus, counts


def encode(gpus: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """The chromosome of stages ``(gpus[q], counts[q])`` (zero counts drop a stage)."""
    return np.repeat(np.asarray(gpus, dtype=np.int64), np.asarray(counts, dtype=np.int64))


def is_valid(x: Sequence[int] | np.ndarray, n_gpus: int) -> bool:
    """True when every GPU index is in range and each GPU's layers form one group."""
    gpus, _ = decode(x)
    return len(gpus) > 0 and len(set(gpus)) == len(gpus) and all(0 <= g < n_gpus for g in gpus)


def boundaries(x: Sequence[int] | np.ndarray) -> np.ndarray:
    """Stage-boundary positions ``b`` (0-based, 1..L-1) with ``x[b] != x[b-1]``.

    A cut at ``b`` splits ``x`` into ``x[:b]`` and ``x[b:]``.
    """
    a = np.asarray(x)
    return np.flatnonzero(a[1:] != a[:-1]) + 1


def boundary_mask(X: np.ndarray) -> np.ndarray:
    """(K, L-1) booleans: column ``b-1`` is True when ``b`` is a boundary of the row."""
    return X[:, 1:] != X[:, :-1]


def row_keys(X: np.ndarray) -> list[bytes]:
    """Hashable keys of the rows (duplicate detection)."""
    X = np.ascontiguousarray(X, dtype=np.int64)
    return [r.tobytes() for r in X]


@dataclass(frozen=True)
class StageForm:
    """A batch of plans in stage form.

    ``gpus`` and ``counts`` are (K, Qmax); row r has stages ``0..q[r]-1``; the
    padding columns hold GPU 0 with count 0.
    """

    gpus: np.ndarray
    counts: np.ndarray
    q: np.ndarray

    def copy(self) -> StageForm:
        return StageForm(self.gpus.copy(), self.counts.copy(), self.q.copy())


def to_stages(X: np.ndarray) -> StageForm:
    """Vectorised decode of a (K, L) batch (contiguity is not checked)."""
    X = np.asarray(X, dtype=np.int64)
    K, L = X.shape
    stage = np.zeros((K, L), dtype=np.int64)
    np.cumsum(boundary_mask(X), axis=1, out=stage[:, 1:])
    q = stage[:, -1] + 1
    qmax = int(q.max()) if K else 1
    rows = np.repeat(np.arange(K), L)
    gpus = np.zeros((K, qmax), dtype=np.int64)
    gpus[rows, stage.ravel()] = X.ravel()
    flat = (np.arange(K)[:, None] * qmax + stage).ravel()
    counts = np.bincount(flat, minlength=K * qmax).reshape(K, qmax).astype(np.int64)
    return StageForm(gpus, counts, q)


def from_stages(S: StageForm, layers: int) -> np.ndarray:
    """Vectorised encode to (K, L); stages with count 0 vanish.

    Counts of each row must add up to ``layers``.
    """
    ends = np.cumsum(S.counts, axis=1)
    # Layer l belongs to the first stage whose end exceeds l.
    idx = (ends[:, None, :] <= np.arange(layers)[None, :, None]).sum(axis=2)
    return np.take_along_axis(S.gpus, idx, axis=1)
