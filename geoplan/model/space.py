"""Size of the plan space (paper section 6.5)."""

from __future__ import annotations

from math import comb, perm

from geoplan.errors import InputError


def plan_space_size(n_gpus: int, layers: int) -> int:
    """f(N, L) = sum_{k=1}^{min(N,L)} C(L-1, k-1) * N! / (N-k)!  (exact integer)."""
    # InputError (a ValueError) so that `geoplan space 0 12` exits 2 with one line, no traceback.
    if n_gpus < 1:
        raise InputError("N", n_gpus, "the number of GPUs must be positive")
    if layers < 1:
        raise InputError("L", layers, "the number of layers must be positive")
    return sum(comb(layers - 1, k - 1) * perm(n_gpus, k) for k in range(1, min(n_gpus, layers) + 1))
