"""``python -m bench.execution.child``: one run in a fresh interpreter (internal).

Reads a task as JSON on stdin and writes protocol lines on stdout
(:mod:`bench.execution.protocol`). A module of its own, imported by nothing, so that
``-m`` does not run a second copy of a module the package has already imported.
"""

from __future__ import annotations

import sys

from bench.execution.protocol import subprocess_child
from geoplan.solving.stop import exit_status

if __name__ == "__main__":
    if sys.argv[1:] != ["--child"]:
        print("usage: python -m bench.execution.child --child  (internal; use `geoplan bench`)",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(exit_status(subprocess_child()))
