"""Execution: run an experiment's runs, isolated and resumable, into a results file.

- :mod:`bench.execution.env`: version, commit and machine facts recorded in every row
- :mod:`bench.execution.protocol`: one run (:func:`execute`) and the subprocess protocol
- :mod:`bench.execution.pool`: forked local run processes with hard kills
- :mod:`bench.execution.dask`: runs on a Dask cluster
- :mod:`bench.execution.results`: the JSON-lines results file and the manifest
- :mod:`bench.execution.progress`: progress output
- :mod:`bench.execution.sweep`: :func:`run_experiments`, which ties them together
"""

from bench.execution.env import default_workers, environment
from bench.execution.protocol import execute
from bench.execution.results import FAILED, MANIFEST_NAME, RESULTS_NAME, ResultsFile
from bench.execution.sweep import SweepSummary, run_experiments

__all__ = [
    "FAILED",
    "MANIFEST_NAME",
    "RESULTS_NAME",
    "ResultsFile",
    "SweepSummary",
    "default_workers",
    "environment",
    "execute",
    "run_experiments",
]
