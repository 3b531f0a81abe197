"""The parametric DPs with their work arrays kept from call to call, against fresh ones.

Site branching's node searches (issue 10) are runs of two compiled DPs,
:func:`geoplan.cost.parametric._walk_dp` (gapped walks: a site visited three times has
2,197 states) and :func:`~geoplan.cost.parametric._relaxation_dp` (kept-apart pairs: 2,916).
This records the calls of some seconds of branching on a generated instance (one
process, so every call is seen), then replays them in this process: once as the code
runs them (work arrays kept, :func:`~geoplan.cost.parametric._work`) and once with fresh
arrays per call, allocated and freed within the compiled call as the DPs did before,
each ``--reps`` times. It prints per DP and number of states the calls, the median
milliseconds per call of each arm, their ratio, and whether both arms return the same
values (value, stage count, mask code) on every call. The machine load (1-minute load
average) is printed before and after.

    python -m bench.dp_work                       # metro N=64 L=48 lambda 1, seed 251
    python -m bench.dp_work --seed 719 --seconds 20 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numba import njit

from geoplan.cost import parametric
from geoplan.cost.parametric import instance_bound, refine_by_sites
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.solving.core import solve

#: The DPs replayed: name, the module attribute, the states of its work arrays per call.
_DPS: tuple[tuple[str, str, Callable[[tuple[Any, ...]], int]], ...] = (
    ("walk", "_walk_dp", lambda a: parametric._walk_states(a[5])),
    ("relaxation", "_relaxation_dp", lambda a: parametric._relaxation_states(a[21])),
)


@njit(cache=True)
def _fresh_work(n_st, L):  # pragma: no cover - compiled
    """New work arrays, as the DPs allocated them before they were kept."""
    V = np.full((n_st, L + 1), np.inf)
    K = np.zeros((n_st, L + 1), np.int64)
    return (V, K, K.copy(), V.copy(), K.copy(), K.copy(), np.empty(L + 1, np.int64),
            np.zeros(n_st, np.bool_), np.zeros(n_st, np.bool_))


@njit(cache=True)
def _walk_fresh(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16,
                a17, a18, n_st):  # pragma: no cover
    """The walk DP on arrays allocated and freed within the call (the old way)."""
    v, k, e, _, _, _, _ = parametric._walk_dp(
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18,
        _fresh_work(n_st, a0))
    return v, k, e


@njit(cache=True)
def _relaxation_fresh(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15,
                      a16, a17, a18, a19, a20, a21, a22, n_st
                      ):  # pragma: no cover
    """The site DP on arrays allocated and freed within the call (the old way)."""
    v, k, e, _, _, _, _ = parametric._relaxation_dp(
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18,
        a19, a20, a21, a22, _fresh_work(n_st, a0))
    return v, k, e


_FRESH = {"walk": _walk_fresh, "relaxation": _relaxation_fresh}


def record(inst: Instance, seconds: float, seed: int) -> dict[str, list[tuple[Any, ...]]]:
    """The untraced DP calls (arguments but the work arrays) of the root search and
    ``seconds`` of site branching on one process, from a 5 s memetic incumbent."""
    inc = solve(inst, "memetic", seed=seed, time_limit=5.0, threads=1).objective
    calls: dict[str, list[tuple[Any, ...]]] = {name: [] for name, _, _ in _DPS}
    saved = {attr: getattr(parametric, attr) for _, attr, _ in _DPS}

    def recorder(name: str, dp: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            if not args[-2]:  # trace: the minimiser's rerun, not a search step
                calls[name].append(tuple(a.copy() if isinstance(a, np.ndarray) else a
                                         for a in args[:-1]))
            return dp(*args)
        return run

    try:
        for name, attr, _ in _DPS:
            setattr(parametric, attr, recorder(name, saved[attr]))
        root = instance_bound(inst, inc, 0.2, seconds)
        refine_by_sites(inst, root, inc, 1.0, seconds, workers=1)
    finally:
        for attr, dp in saved.items():
            setattr(parametric, attr, dp)
    return calls


def replay(calls: Sequence[tuple[Any, ...]], name: str, attr: str,
           states: Callable[[tuple[Any, ...]], int], fresh: bool
           ) -> tuple[float, list[tuple[float, int, int]]]:
    """Seconds for every call once, and each call's (value, stage count, mask code)."""
    dp = getattr(parametric, attr)
    out = []
    t0 = time.perf_counter()
    for args in calls:
        if fresh:
            v, k, e = _FRESH[name](*args, states(args))
        else:
            v, k, e, *_ = dp(*args, parametric._work(states(args), int(args[0])))
        out.append((float(v), int(k), int(e)))
    return time.perf_counter() - t0, out


def run(family: str, n: int, layers: int, seed: int, lam: float, seconds: float,
        reps: int) -> dict[str, Any]:
    inst = Instance.from_dict(by_family(family, n, layers, seed, lam=lam))
    load_before = os.getloadavg()[0]
    calls = record(inst, seconds, seed)
    rows = []
    for name, attr, states in _DPS:
        by_size: dict[int, list[tuple[Any, ...]]] = {}
        for args in calls[name]:
            by_size.setdefault(states(args), []).append(args)
        for size, group in sorted(by_size.items()):
            replay(group[:1], name, attr, states, True)  # compiled already; touch the code
            times: dict[bool, list[float]] = {False: [], True: []}
            values: dict[bool, list[tuple[float, int, int]]] = {}
            for _ in range(reps):
                for fresh in (False, True):  # alternated, so load drifts hit both arms
                    s, values[fresh] = replay(group, name, attr, states, fresh)
                    times[fresh].append(s)
            kept, new = (1000 * statistics.median(times[f]) / len(group) for f in (False, True))
            rows.append({"dp": name, "states": size, "calls": len(group), "kept_ms": kept,
                         "fresh_ms": new, "ratio": new / kept,
                         "same_values": values[False] == values[True]})
    return {"instance": f"{family} N={n} L={layers} seed={seed} lambda={lam:g}",
            "record_s": seconds, "reps": reps, "rows": rows,
            "load_before": load_before, "load_after": os.getloadavg()[0]}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="metro")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--seed", type=int, default=251)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=40.0,
                    help="root search and branching recorded, each at most this long")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    res = run(a.family, a.n, a.layers, a.seed, a.lam, a.seconds, a.reps)
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"{res['instance']}; load {res['load_before']:.2f} -> {res['load_after']:.2f}")
    for r in res["rows"]:
        print(f"  {r['dp']:10s} {r['states']:5d} states {r['calls']:6d} calls  "
              f"kept {r['kept_ms']:.3f} ms/call  "
              f"fresh {r['fresh_ms']:.3f} ms/call  x{r['ratio']:.2f}  "
              f"same values: {r['same_values']}")
    return 0 if all(r["same_values"] for r in res["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
