"""The solver registry: solvers come from the ``geoplan.solvers`` entry points.

A package declares its solvers in ``pyproject.toml``::

    [project.entry-points."geoplan.solvers"]
    milp = "formulations.milp:SPEC"

The entry point names a :class:`SolverSpec` (name, function, kind, one-line
description, whether it takes warm starts, and its parameter dataclass), or a
plain function ``solve(instance, options) -> Outcome`` (then described by its
docstring, kind ``"external"``, parameters from its ``params`` attribute if any).

Looking a solver up (:func:`get_solver`) imports nothing; loading it
(:meth:`SolverEntry.load`) imports its module. A *missing optional backend*
(the module or a package it imports is not installed, and that package is a
declared dependency, such as ``ortools`` or ``highspy``) raises
:class:`SolverUnavailable`, which says how to install it. Any other failure
while importing (a broken module: ImportError, SyntaxError, NameError, ...)
propagates unchanged, with a note naming the solver: it is a bug and must never
be mistaken for an unavailable solver.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any

from geoplan.errors import InputError, SolverError
from geoplan.solving.params import NoParams, SolverParams, describe_params, normalise_params

if TYPE_CHECKING:
    from geoplan.model.instance import Instance
    from geoplan.solving.core import SolveOptions
    from geoplan.solving.result import Outcome

__all__ = [
    "COMMAND_GROUP",
    "SOLVER_GROUP",
    "SPACES",
    "Solver",
    "SolverEntry",
    "SolverSpec",
    "SolverUnavailable",
    "available_solvers",
    "get_solver",
    "load_entry_point",
    "register",
    "solver_for_space",
    "solver_names",
]

SOLVER_GROUP = "geoplan.solvers"
COMMAND_GROUP = "geoplan.commands"

SolverFn = Callable[["Instance", "SolveOptions"], "Outcome"]


class SolverUnavailable(SolverError):
    """A solver's optional backend is not installed (the message says how to install it)."""

    def __init__(self, what: str, package: str) -> None:
        self.package = package
        super().__init__(
            f"{what} is not available: the package {package!r} is not installed "
            f"(pip install {package})"
        )


@dataclass(frozen=True)
class SolverSpec:
    """A solver: its name, function, kind, description, warm starts and parameters.

    ``target`` is the function or ``"module:function"`` (imported by :meth:`load`);
    ``params`` its :class:`~geoplan.solving.params.SolverParams` dataclass (None:
    the solver takes no parameters).
    """

    name: str
    target: str | SolverFn
    kind: str  # "exact", "heuristic", "baseline" (or "external")
    description: str
    warm_start: bool = False
    params: type[SolverParams] | None = None
    space: str = "pipeline"  # "pipeline" (GeoTrain's one-GPU stages) or "hybrid"
    #: Whether the solver runs a warm-start solver only when it asks for it
    #: (:meth:`SolveOptions.deferred_plans`), after its own quick proof attempt.
    defers_warm_start: bool = False
    #: Parameters this solver takes when it serves as another's warm start (those the
    #: caller gives win): a warm start is a good plan soon, not the last tenth of a percent.
    as_warm_start: tuple[tuple[str, Any], ...] = ()

    def spec(self) -> SolverSpec:
        return self

    def load(self) -> SolverFn:
        if callable(self.target):
            return self.target
        module, _, attr = self.target.partition(":")
        obj = _import(f"solver {self.name!r}", module, attr)
        return obj.load() if isinstance(obj, SolverSpec) else obj

    @property
    def params_class(self) -> type[SolverParams]:
        return self.params or NoParams

    def parse_params(self, raw: Mapping[str, Any] | SolverParams | None, *,
                     where: str = "params") -> tuple[SolverParams, dict[str, Any]]:
        """The typed parameters and the record of the given ones (canonical keys)."""
        cls = self.params_class
        if isinstance(raw, SolverParams):
            return cls.parse(raw, where=where), {}
        record = normalise_params(cls, raw, where=where)
        return cls.parse(raw, where=where), record

    def describe(self) -> list[Any]:
        return describe_params(self.params)


class SolverEntry:
    """A registered solver from an entry point; its module is imported on first use."""

    def __init__(self, entry_point: metadata.EntryPoint) -> None:
        self.name = entry_point.name
        self.entry_point = entry_point
        self._spec: SolverSpec | None = None

    def __repr__(self) -> str:
        return f"SolverEntry({self.name!r}, {self.entry_point.value!r})"

    def spec(self) -> SolverSpec:
        """Import the module and return its :class:`SolverSpec`."""
        if self._spec is None:
            what = f"solver {self.name!r}"
            obj = load_entry_point(self.entry_point, what)
            if isinstance(obj, SolverSpec):
                if obj.name != self.name:
                    raise SolverError(
                        f"{what}: the entry point {self.entry_point.value!r} names the spec of "
                        f"{obj.name!r}"
                    )
                spec = obj
            elif callable(obj):
                doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
                spec = SolverSpec(self.name, obj, "external", doc[0] if doc else "",
                                  params=getattr(obj, "params", None))
            else:
                raise SolverError(f"{what}: {self.entry_point.value!r} is neither a SolverSpec "
                                  "nor a function")
            self._spec = spec
        return self._spec

    def load(self) -> SolverFn:
        return self.spec().load()

    # What a SolverSpec offers, loaded on demand.
    @property
    def kind(self) -> str:
        return self.spec().kind

    @property
    def description(self) -> str:
        return self.spec().description

    @property
    def warm_start(self) -> bool:
        return self.spec().warm_start

    @property
    def params(self) -> type[SolverParams] | None:
        return self.spec().params

    @property
    def defers_warm_start(self) -> bool:
        return self.spec().defers_warm_start

    @property
    def as_warm_start(self) -> tuple[tuple[str, Any], ...]:
        return self.spec().as_warm_start

    @property
    def space(self) -> str:
        return self.spec().space

    @property
    def params_class(self) -> type[SolverParams]:
        return self.spec().params_class

    def parse_params(self, raw: Mapping[str, Any] | SolverParams | None, *,
                     where: str = "params") -> tuple[SolverParams, dict[str, Any]]:
        return self.spec().parse_params(raw, where=where)

    def describe(self) -> list[Any]:
        return self.spec().describe()


Solver = SolverSpec | SolverEntry

#: name -> solver; filled from the entry points at import, :func:`register` adds more.
_REGISTRY: dict[str, Solver] = {}


def register(spec: SolverSpec) -> None:
    """Register (or replace) a solver in this process (tests, notebooks, plug-ins)."""
    _REGISTRY[spec.name] = spec


def _load_entry_points() -> None:
    for ep in metadata.entry_points(group=SOLVER_GROUP):
        _REGISTRY.setdefault(ep.name, SolverEntry(ep))


def solver_names() -> list[str]:
    """Registered solver names, sorted (imports no solver)."""
    return sorted(_REGISTRY)


def available_solvers() -> list[Solver]:
    """Every registered solver, by name (imports none of them)."""
    return [_REGISTRY[n] for n in solver_names()]


def get_solver(name: str) -> Solver:
    """The registered solver ``name`` (not imported yet), or InputError with a hint."""
    try:
        return _REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        known = ", ".join(solver_names())
        raise InputError("solver", name, f"unknown solver; {hint}known: {known}") from None


SPACES = ("pipeline", "hybrid")


def solver_for_space(name: str, space: str) -> Solver:
    """The solver that runs ``name`` in ``space``: ``name`` itself when it searches that
    space, else its ``hybrid-NAME`` variant; InputError (listing the choices) otherwise."""
    if space not in SPACES:
        raise InputError("space", space, f"expected one of {list(SPACES)}")
    variant = _REGISTRY.get(f"hybrid-{name}") if space == "hybrid" else None
    if variant is not None and name not in _REGISTRY:
        return variant  # e.g. grid: only its hybrid variant exists
    solver = get_solver(name)
    if space == "pipeline" or solver.space == "hybrid":
        return solver
    if variant is not None:
        return variant
    hybrid = [n for n in solver_names() if _REGISTRY[n].space == "hybrid"]
    raise InputError("solver", name, "has no hybrid-space variant; solvers of the hybrid "
                     f"space: {', '.join(hybrid) or 'none installed'}")


# --------------------------------------------------------------------------- importing


def load_entry_point(ep: metadata.EntryPoint, what: str) -> Any:
    """``ep.load()``; a missing declared dependency becomes :class:`SolverUnavailable`."""
    return _import(what, ep.module, ep.attr, dist=getattr(ep, "dist", None))


def _import(what: str, module: str, attr: str | None, dist: Any = None) -> Any:
    try:
        obj: Any = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = _missing_backend(exc, module, dist)
        if missing is not None:
            raise SolverUnavailable(what, missing) from exc
        exc.add_note(f"(raised while importing {what} from {module!r}: a broken module, "
                     "not a missing backend)")
        raise
    except Exception as exc:
        exc.add_note(f"(raised while importing {what} from {module!r})")
        raise
    for part in (attr or "").split("."):
        if not part:
            continue
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            exc.add_note(f"(while loading {what} from {module}:{attr})")
            raise
    return obj


def _missing_backend(exc: ModuleNotFoundError, module: str, dist: Any) -> str | None:
    """The package to install when ``exc`` is a missing backend, else None (a bug)."""
    name = exc.name or ""
    if not name:
        return None
    if module == name or module.startswith(name + "."):
        return name.split(".")[0]  # the solver's own module is not installed
    root = name.split(".")[0]
    if root in _declared_dependencies(dist):
        return root
    return None


def _declared_dependencies(dist: Any) -> set[str]:
    """Import names of the requirements of geoplan (and of the entry point's package)."""
    reqs: list[str] = []
    with contextlib.suppress(metadata.PackageNotFoundError):
        reqs += metadata.requires("geoplan") or []
    if dist is not None:
        reqs += getattr(dist, "requires", None) or []
    out = set()
    for r in reqs:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", r)
        if m:
            out.add(m.group(1).lower().replace("-", "_"))
    return out


_load_entry_points()
