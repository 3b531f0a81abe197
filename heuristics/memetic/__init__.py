"""GeoTrain's memetic algorithm (paper section 5): geoplan's fast planner.

``solve`` is the registered solver ``memetic``; :func:`run_memetic` runs the
algorithm directly with :class:`MemeticParams`. See docs/memetic.md.
"""

from heuristics.memetic.algorithm import (
    GenerationStats,
    MemeticParams,
    MemeticResult,
    default_stop,
    run_memetic,
    solve,
)

__all__ = [
    "GenerationStats",
    "MemeticParams",
    "MemeticResult",
    "default_stop",
    "run_memetic",
    "solve",
]
