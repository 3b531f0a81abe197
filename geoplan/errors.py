"""The error types geoplan raises.

Invalid *input* raises :class:`InputError` (the command line turns it into exit
status 2 and one message). An infeasible *plan* is never an error: the validator
reports it. A solver whose model disagrees with the shared evaluator raises
:class:`FormulationError`, loudly, because that is a bug.
"""

from __future__ import annotations


class GeoplanError(Exception):
    """Base class of every error geoplan raises on purpose."""


class InputError(GeoplanError, ValueError):
    """Malformed or inconsistent input: names the offending field and value."""

    def __init__(self, field: str, value: object, message: str) -> None:
        self.field = field
        self.value = value
        self.message = message
        super().__init__(f"{field}: {message} (got {value!r})")


class FormulationError(GeoplanError, RuntimeError):
    """An exact model's objective or bound disagrees with the shared evaluator."""


class SolverError(GeoplanError, RuntimeError):
    """A solver could not run (missing backend, refused instance size, ...)."""
