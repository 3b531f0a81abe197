"""Heuristics of the hybrid space (hybrid-model.md): device groups, the split-and-share DP,
the grid baseline (and the hybrid memetic algorithm's modules)."""
