"""Exact models of a restricted hybrid space on class-structured pools (issue 11).

``hybrid-milp`` (Pyomo + HiGHS, :mod:`.milp`) and ``hybrid-cpsat`` (OR-Tools CP-SAT,
:mod:`.cpsat`) search the space :data:`~formulations.hybrid.classes.RESTRICTED_SPACE`:
stages of one GPU class each, TP groups inside nodes, whole nodes per stage, equal
shares. :mod:`.classes` detects classes and nodes, checks link uniformity, prices
configurations with the kernel's own functions and decodes plans; :mod:`.common` runs
the cells (u, Q) and reports the result: status ``feasible``, no lower bound for the
whole hybrid space, and the bound on the restricted space in ``info["restricted"]``.
:mod:`.pools` builds class-structured measurement pools. docs/hybrid-exact.md writes
the models out.
"""
