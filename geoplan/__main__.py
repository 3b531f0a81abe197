"""``python -m geoplan`` runs the command line."""

from geoplan.cli import entry

entry()
