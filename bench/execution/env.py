"""What every result row records about the code and the machine that ran it."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["default_workers", "environment", "now"]


def default_workers() -> int:
    """1-2 worker processes: two when the machine has at least two cores."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():  # an installed copy, not a checkout: no commit to name
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head


def environment() -> dict[str, Any]:
    """Version, commit and machine facts recorded in every row."""
    import geoplan

    return {
        "version": geoplan.__version__,
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
    }


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")
