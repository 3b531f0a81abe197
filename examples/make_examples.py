"""Rewrite the example instance files from :func:`geoplan.model.generators.example_instances`.

Run from the repository root: ``python examples/make_examples.py``. The plan
``three-site.plan.json`` is not regenerated: it is the best plan of an exhaustive
search over site-contiguous GPU orders (see docs/catalog.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from geoplan.model.generators import example_instances


def main() -> None:
    here = Path(__file__).parent
    for name, data in example_instances().items():
        (here / name).write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
