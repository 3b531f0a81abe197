"""Typed solver parameters: one frozen dataclass per solver, one parser for all.

Each solver declares its parameters as a frozen dataclass deriving from
:class:`SolverParams`, one field per parameter, declared with :func:`param`
(default, one-line help, optional range)::

    @dataclass(frozen=True)
    class BnbParams(SolverParams):
        symmetry: bool = param(True, "merge interchangeable GPUs")
        node_limit: int | None = param(None, "stop after this many nodes", at_least=0)

:func:`parse_params` turns ``{str: str | value}`` (``--param KEY=VALUE`` strings,
TOML or JSON values, Python values) into that dataclass, the same way for every
solver:

* ``bool``: ``true``/``false``/``1``/``0``/``yes``/``no`` (any case), or a Python
  bool (or the integers 0 and 1); anything else is an error;
* ``int``: an integer (or a float with an integral value, or its text);
* ``float``: a finite number or its text;
* ``Literal[...]``: one of the choices; ``X | None``: also ``none``/``null``;
* ranges (``at_least``, ``above``, ``at_most``, ``below``) are checked, and so
  are the field types when a dataclass is built directly in Python;
* ``prefix`` fields collect every ``PREFIX.key`` (the solver's expert
  pass-through, such as ``sat.<SatParameters field>`` for CP-SAT);
* every solver also accepts ``note``: free text recorded with the result and read
  by no solver (experiment files use it to label runs).

An unknown key raises :class:`~geoplan.errors.InputError` naming it, with a
"did you mean" hint; a bad value raises one naming the key and the value. The
command line turns both into exit status 2.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, get_args, get_origin

from geoplan.errors import InputError

__all__ = [
    "NOTE_KEY",
    "NoParams",
    "ParamInfo",
    "SolverParams",
    "describe_params",
    "normalise_params",
    "param",
    "parse_bool",
    "parse_params",
]

P = TypeVar("P", bound="SolverParams")

#: The one key every solver accepts: free text recorded with the result.
NOTE_KEY = "note"

_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")
_NONE = ("none", "null")


def param(
    default: Any,
    help: str,
    *,
    at_least: float | None = None,
    above: float | None = None,
    at_most: float | None = None,
    below: float | None = None,
    prefix: str | None = None,
    decode: bool = True,
) -> Any:
    """A parameter field: its default, one line of help and an optional range.

    ``prefix`` makes a pass-through field (type ``Mapping[str, Any]``, default
    empty) that collects every ``PREFIX.key=value``; ``decode`` says whether their
    text values are read as JSON (``true``, ``2``, ``[1, 2]``) or kept as text
    (for parameters handed to another solver's parser).
    """
    meta = {"help": help, "at_least": at_least, "above": above, "at_most": at_most,
            "below": below, "prefix": prefix, "decode": decode}
    if prefix is not None:
        if default is not None:
            raise TypeError("a prefix field's default is always an empty mapping")
        return dataclasses.field(default_factory=dict, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class SolverParams:
    """Base of the solvers' parameter dataclasses: they check themselves when built."""

    #: The solver's name in messages ("unknown milp parameter").
    LABEL: ClassVar[str] = ""
    #: Accepted alternative keys (such as the paper's symbols) -> field names.
    ALIASES: ClassVar[dict[str, str]] = {}
    #: Fields a KEY=VALUE mapping may not set -> why (they come from elsewhere).
    REFUSED: ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        _check_all(self, "params")

    @classmethod
    def parse(cls: type[P], raw: Mapping[str, Any] | SolverParams | None = None, *,
              where: str = "params", base: P | None = None) -> P:
        """:func:`parse_params` for this class."""
        return parse_params(cls, raw, where=where, base=base)

    def runs_solvers(self) -> tuple[str, ...]:
        """Other registered solvers these parameters make the solver run (their kernels are
        warmed up with its own, before the budget)."""
        return ()

    def as_dict(self) -> dict[str, Any]:
        """Every field and its value (pass-through fields flattened to ``PREFIX.key``)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.metadata.get("prefix"):
                out.update({f"{f.metadata['prefix']}{k}": x for k, x in v.items()})
            else:
                out[f.name] = v
        return out


@dataclass(frozen=True)
class NoParams(SolverParams):
    """A solver without parameters (only the common ``note`` is accepted)."""


@dataclass(frozen=True)
class ParamInfo:
    """One parameter as ``geoplan solvers`` shows it."""

    name: str
    type: str
    default: str
    range: str
    help: str


# --------------------------------------------------------------------------- parsing


def parse_bool(value: Any, where: str) -> bool:
    """The one boolean reading: true/false/1/0/yes/no (any case), a bool, or 0/1."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise InputError(where, value, "expected true or false (or yes/no, 1/0)")


def normalise_params(cls: type[SolverParams], raw: Mapping[str, Any] | None, *,
                     where: str = "params") -> dict[str, Any]:
    """The given keys under their canonical names with typed, checked values.

    Pass-through keys keep their ``PREFIX.key`` form; ``note`` is kept as text.
    This is what a result records as its parameters.
    """
    if raw is None:
        return {}
    if isinstance(raw, SolverParams):
        raise TypeError("normalise_params takes a mapping; the dataclass is already parsed")
    if not isinstance(raw, Mapping):
        raise InputError(where, raw, "expected a table of KEY = VALUE solver parameters")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = _hints(cls)
    prefixes = {f.metadata["prefix"]: f for f in fields.values() if f.metadata.get("prefix")}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key:
            raise InputError(where, key, "parameter names are non-empty text")
        name = cls.ALIASES.get(key, key)
        if name in cls.REFUSED:
            raise InputError(_at(where, key), value, cls.REFUSED[name])
        f = fields.get(name)
        if f is not None and not f.metadata.get("prefix"):
            out[name] = _coerce(value, hints[name], _at(where, key), f.metadata)
            continue
        pf = next((pf for p, pf in prefixes.items() if key.startswith(p) and len(key) > len(p)),
                  None)
        if pf is not None:
            out[key] = _decode(value) if pf.metadata.get("decode", True) else value
            continue
        if key == NOTE_KEY:
            out[key] = value if isinstance(value, str) else json.dumps(value)
            continue
        raise InputError(_at(where, key), value, _unknown(cls, key))
    return out


def parse_params(cls: type[P], raw: Mapping[str, Any] | SolverParams | None = None, *,
                 where: str = "params", base: P | None = None) -> P:
    """Build ``cls`` from ``raw`` (see the module docstring); ``base`` supplies defaults.

    A ``cls`` instance is returned as it is; another solver's parameters are an error.
    """
    if isinstance(raw, cls):
        return raw
    if isinstance(raw, SolverParams):
        raise InputError(where, type(raw).__name__, f"expected {cls.__name__} parameters")
    values = normalise_params(cls, raw, where=where)
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        prefix = f.metadata.get("prefix")
        if prefix:
            given = {k[len(prefix):]: v for k, v in values.items() if k.startswith(prefix)}
            if given:
                changes[f.name] = {**(getattr(base, f.name) if base else {}), **given}
        elif f.name in values:
            changes[f.name] = values[f.name]
    try:
        return dataclasses.replace(base, **changes) if base is not None else cls(**changes)
    except InputError as exc:
        if where == "params" or not exc.field.startswith("params."):
            raise
        raise InputError(_at(where, exc.field[len("params."):]), exc.value, exc.message) \
            from None


def describe_params(cls: type[SolverParams] | None) -> list[ParamInfo]:
    """Name, type, default, range and help of each parameter of ``cls``."""
    if cls is None:
        return []
    hints = _hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        prefix = f.metadata.get("prefix")
        if prefix:
            out.append(ParamInfo(f"{prefix}<key>", "any", "-", "-", f.metadata.get("help", "")))
            continue
        default = f.default
        out.append(ParamInfo(
            name=f.name,
            type=_type_text(hints[f.name]),
            default=_value_text(default),
            range=_range_text(f.metadata) or "-",
            help=f.metadata.get("help", ""),
        ))
    return out


# --------------------------------------------------------------------------- helpers


def _at(where: str, key: str) -> str:
    """``params.key``, or ``--param key`` for a command-line option."""
    return f"{where} {key}" if where.startswith("-") else f"{where}.{key}"


def _hints(cls: type) -> dict[str, Any]:
    cache = cls.__dict__.get("_param_hints")
    if cache is None:
        cache = typing.get_type_hints(cls)
        type.__setattr__(cls, "_param_hints", cache)
    return cache


def _decode(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _unknown(cls: type[SolverParams], key: str) -> str:
    known = sorted(
        [f.name for f in dataclasses.fields(cls)
         if not f.metadata.get("prefix") and f.name not in cls.REFUSED]
        + [a for a, name in cls.ALIASES.items() if name not in cls.REFUSED]
    )
    prefixes = [f.metadata["prefix"] + "<key>" for f in dataclasses.fields(cls)
                if f.metadata.get("prefix")]
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listing = ", ".join(known + prefixes) or "none"
    what = f"unknown {cls.LABEL} parameter" if cls.LABEL else "unknown parameter"
    return f"{what}{hint} (known: {listing}, and {NOTE_KEY})"


def _split_optional(tp: Any) -> tuple[Any, bool]:
    origin = get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return args[0], True
        raise TypeError(f"unsupported parameter type {tp!r}")
    return tp, False


def _coerce(value: Any, tp: Any, where: str, meta: Mapping[str, Any]) -> Any:
    """``value`` (text or a Python value) as type ``tp``, range-checked."""
    inner, optional = _split_optional(tp)
    if value is None or (optional and isinstance(value, str)
                         and value.strip().lower() in _NONE):
        if optional:
            return None
        raise InputError(where, value, f"expected {_type_text(inner)}, not null")
    if inner is bool:
        out: Any = parse_bool(value, where)
    elif inner is int:
        out = _to_int(value, where)
    elif inner is float:
        out = _to_float(value, where)
    elif inner is str:
        if not isinstance(value, str):
            raise InputError(where, value, "expected text")
        out = value
    elif get_origin(inner) is Literal:
        choices = get_args(inner)
        if value not in choices:
            text = ", ".join(repr(c) for c in choices)
            raise InputError(where, value, f"expected one of {text}")
        out = value
    else:  # pragma: no cover - a declaration error, not an input error
        raise TypeError(f"{where}: unsupported parameter type {tp!r}")
    _check_range(out, where, meta, shown=value)
    return out


def _to_int(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise InputError(where, value, "expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            x = float(text)
        except ValueError:
            x = math.nan
        if math.isfinite(x) and x.is_integer():
            return int(x)
    raise InputError(where, value, "expected an integer")


def _to_float(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise InputError(where, value, "expected a number")
    x: float | None = None
    if isinstance(value, int | float):
        x = float(value)
    elif isinstance(value, str):
        try:
            x = float(value.strip())
        except ValueError:
            x = None
    if x is None or not math.isfinite(x):
        raise InputError(where, value, "expected a finite number")
    return x


def _check_range(x: Any, where: str, meta: Mapping[str, Any], shown: Any = None) -> None:
    if x is None or isinstance(x, bool) or not isinstance(x, int | float):
        return
    lo, gt, hi, lt = meta.get("at_least"), meta.get("above"), meta.get("at_most"), \
        meta.get("below")
    ok = ((lo is None or x >= lo) and (gt is None or x > gt)
          and (hi is None or x <= hi) and (lt is None or x < lt))
    if not ok:
        text = _range_text(meta)
        raise InputError(where, x if shown is None else shown,
                         f"must be {text}" if text[0] in "<>" else f"must lie in {text}")


def _check_all(obj: SolverParams, where: str) -> None:
    """Types and ranges of a dataclass built directly (no text conversion here)."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        at = f"{where}.{f.name}"
        if f.metadata.get("prefix"):
            if not isinstance(v, Mapping):
                raise InputError(at, v, "expected a mapping")
            continue
        inner, optional = _split_optional(hints[f.name])
        if v is None:
            if not optional:
                raise InputError(at, v, f"expected {_type_text(inner)}, not null")
            continue
        if inner is bool:
            ok = isinstance(v, bool)
        elif inner is int:
            ok = isinstance(v, int) and not isinstance(v, bool)
        elif inner is float:
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            if ok and isinstance(v, int):
                object.__setattr__(obj, f.name, float(v))
        elif inner is str:
            ok = isinstance(v, str)
        elif get_origin(inner) is Literal:
            ok = v in get_args(inner)
        else:  # pragma: no cover - a declaration error
            raise TypeError(f"{at}: unsupported parameter type {inner!r}")
        if not ok:
            raise InputError(at, v, f"expected {_type_text(hints[f.name])}")
        _check_range(v, at, f.metadata)


def _type_text(tp: Any) -> str:
    inner, optional = _split_optional(tp)
    if get_origin(inner) is Literal:
        text = "|".join(str(c) for c in get_args(inner))
    else:
        text = getattr(inner, "__name__", str(inner))
    return f"{text}|none" if optional else text


def _value_text(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _range_text(meta: Mapping[str, Any]) -> str:
    lo, gt, hi, lt = meta.get("at_least"), meta.get("above"), meta.get("at_most"), \
        meta.get("below")
    if lo is None and gt is None and hi is None and lt is None:
        return ""
    if hi is None and lt is None:
        return f">= {_value_text(lo)}" if lo is not None else f"> {_value_text(gt)}"
    if lo is None and gt is None:
        return f"<= {_value_text(hi)}" if hi is not None else f"< {_value_text(lt)}"
    left = f"[{_value_text(lo)}" if lo is not None else (
        f"({_value_text(gt)}" if gt is not None else "(-inf")
    right = f"{_value_text(hi)}]" if hi is not None else (
        f"{_value_text(lt)})" if lt is not None else "inf)")
    return f"{left}, {right}"
