"""Size of the plan space (paper section 6.5)."""

from __future__ import annotations

from math import comb, perm


def plan_space_size(n_gpus: int, layers: int) -> int:
    """f(N, L) = sum_{k=1}^{min(N,L)} C(L-1, k-1) * N! / (N-k)!  (exact integer)."""
    if n_gpus < 1 or layers < 1:
        raise ValueError("N and L must be positive")
    return sum(comb(layers - 1, k - 1) * perm(n_gpus, k) for k in range(1, min(n_gpus, layers) + 1))
