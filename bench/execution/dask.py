"""Runs handed to a Dask cluster; each worker runs its task in an isolated subprocess."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench.execution.protocol import failure_row, run_subprocess
from geoplan.errors import InputError

__all__ = ["run_dask"]


def run_dask(
    tasks: Sequence[dict[str, Any]],
    address: str,
    on_row: Callable[[dict[str, Any]], None],
    connect_timeout: float = 20.0,
) -> None:
    """Hand tasks to the Dask cluster at ``address``; each runs in an isolated subprocess."""
    try:
        from distributed import Client, as_completed
    except ImportError as exc:
        raise InputError("--dask", address, "needs Dask distributed: pip install "
                         "'geoplan[dist]'") from exc
    try:
        client = Client(address, timeout=f"{connect_timeout}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError("--dask", address, f"cannot connect to the Dask scheduler: {exc}"
                         ) from None
    try:
        keyed: dict[Any, dict[str, Any]] = {}
        futures = []
        for task in tasks:
            fut = client.submit(run_subprocess, task, pure=False)
            keyed[fut.key] = task
            futures.append(fut)
        for fut in as_completed(futures):
            task = keyed[fut.key]
            try:
                row = fut.result()
            except Exception as exc:  # the worker itself failed
                row = failure_row(task, "crashed", f"Dask task failed: {type(exc).__name__}: "
                                   f"{exc}", 0.0)
            row["runner"] = f"dask:{address}"
            on_row(row)
    finally:
        client.close()

