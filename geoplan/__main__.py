"""``python -m geoplan`` runs the command line."""

from geoplan.cli import main

raise SystemExit(main())
