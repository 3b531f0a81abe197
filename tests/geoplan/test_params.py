"""Typed solver parameters (geoplan/solving/params.py) and each solver's dataclass."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import pytest

from geoplan.errors import InputError
from geoplan.solving.core import available_solvers, get_solver
from geoplan.solving.params import (
    NoParams,
    SolverParams,
    describe_params,
    normalise_params,
    param,
    parse_bool,
    parse_params,
)


@dataclass(frozen=True)
class Toy(SolverParams):
    LABEL: ClassVar[str] = "toy"
    ALIASES: ClassVar[dict[str, str]] = {"n": "count"}
    REFUSED: ClassVar[dict[str, str]] = {"budget": "set it elsewhere"}

    flag: bool = param(True, "a switch")
    count: int = param(3, "a count", at_least=1)
    limit: int | None = param(None, "an optional limit", at_least=0)
    share: float = param(0.5, "a share", above=0.0, below=1.0)
    mode: Literal["fast", "slow"] = param("fast", "a choice")
    budget: float = param(1.0, "not settable by KEY=VALUE", above=0.0)
    extra: Mapping[str, Any] = param(None, "pass-through", prefix="x.")


# ----------------------------------------------------------------------------- the parser


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("True", True), ("YES", True), ("1", True), (" yes ", True),
    ("false", False), ("No", False), ("0", False), (True, True), (False, False), (1, True),
    (0, False),
])
def test_one_boolean_reading(text: Any, value: bool) -> None:
    assert parse_bool(text, "params.flag") is value
    assert Toy.parse({"flag": text}).flag is value


@pytest.mark.parametrize("bad", ["maybe", "on", "off", "", "2", 2, -1, 0.5, None, "t"])
def test_anything_else_is_not_a_boolean(bad: Any) -> None:
    with pytest.raises(InputError) as e:
        Toy.parse({"flag": bad})
    assert e.value.field == "params.flag"
    assert e.value.value == bad


def test_numbers_choices_and_none() -> None:
    p = Toy.parse({"count": "7", "limit": "none", "share": "0.25", "mode": "slow"})
    assert (p.count, p.limit, p.share, p.mode) == (7, None, 0.25, "slow")
    assert Toy.parse({"count": 7.0}).count == 7  # integral floats (TOML, JSON) are ints
    assert Toy.parse({"count": "8.0"}).count == 8
    assert Toy.parse({"limit": "null"}).limit is None
    assert Toy.parse({"limit": 0}).limit == 0
    assert isinstance(Toy.parse({"share": "1e-1"}).share, float)
    assert Toy.parse({"n": "4"}).count == 4  # an alias


@pytest.mark.parametrize(("key", "value", "says"), [
    ("count", "1.5", "integer"),
    ("count", "three", "integer"),
    ("count", True, "integer"),
    ("count", 0, ">= 1"),
    ("count", "none", "integer"),
    ("count", None, "not null"),
    ("limit", -1, ">= 0"),
    ("share", "nan", "finite"),
    ("share", "inf", "finite"),
    ("share", 1, "(0, 1)"),
    ("share", "0", "(0, 1)"),
    ("share", False, "number"),
    ("mode", "medium", "'fast', 'slow'"),
])
def test_bad_values_name_key_and_value(key: str, value: Any, says: str) -> None:
    with pytest.raises(InputError) as e:
        Toy.parse({key: value})
    assert e.value.field == f"params.{key}"
    assert e.value.value == value  # as the user gave it
    assert says in e.value.message


def test_unknown_key_with_did_you_mean() -> None:
    with pytest.raises(InputError) as e:
        Toy.parse({"cuont": "2"})
    assert e.value.field == "params.cuont"
    assert "unknown toy parameter" in e.value.message
    assert "did you mean 'count'?" in e.value.message
    with pytest.raises(InputError) as e:
        Toy.parse({"zzzzzz": 1})
    assert "did you mean" not in e.value.message and "known:" in e.value.message
    assert "budget" not in e.value.message  # refused keys are not offered


def test_refused_keys_and_where() -> None:
    with pytest.raises(InputError, match="set it elsewhere"):
        Toy.parse({"budget": 3})
    assert Toy(budget=3.0).budget == 3.0  # still settable in Python
    with pytest.raises(InputError) as e:
        Toy.parse({"count": 0}, where="warm_start_params")
    assert e.value.field == "warm_start_params.count"


def test_pass_through_prefix_and_note() -> None:
    p = Toy.parse({"x.level": "2", "x.flag": "true", "x.name": "abc", "note": "run A"})
    assert p.extra == {"level": 2, "flag": True, "name": "abc"}
    rec = normalise_params(Toy, {"n": "5", "x.level": "2", "note": "run A"})
    assert rec == {"count": 5, "x.level": 2, "note": "run A"}
    assert p.as_dict()["x.level"] == 2
    with pytest.raises(InputError):
        Toy.parse({"x.": 1})  # a prefix without a key is unknown


def test_dataclasses_check_themselves_when_built_directly() -> None:
    with pytest.raises(InputError, match=r"params\.flag"):
        Toy(flag="yes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"params\.count"):
        Toy(count=0)
    with pytest.raises(InputError, match=r"params\.mode"):
        Toy(mode="medium")  # type: ignore[arg-type]
    assert isinstance(Toy(budget=3).budget, float)  # an int where a number is meant


def test_base_and_instances() -> None:
    base = Toy(count=9)
    assert parse_params(Toy, {"flag": "no"}, base=base) == Toy(count=9, flag=False)
    assert Toy.parse(base) is base
    with pytest.raises(InputError):
        Toy.parse(NoParams())  # type: ignore[arg-type]
    with pytest.raises(InputError):
        Toy.parse(["count", 2])  # type: ignore[arg-type]


def test_no_params_accepts_only_note() -> None:
    assert NoParams.parse({"note": "x"}) == NoParams()
    with pytest.raises(InputError, match="unknown parameter"):
        NoParams.parse({"samples": 3})


def test_describe() -> None:
    rows = {r.name: r for r in describe_params(Toy)}
    assert rows["limit"].type == "int|none" and rows["limit"].default == "none"
    assert rows["limit"].range == ">= 0"
    assert rows["share"].range == "(0, 1)"
    assert rows["mode"].type == "fast|slow"
    assert rows["x.<key>"].help == "pass-through"
    assert all(r.help for r in rows.values())


# ----------------------------------------------------------------------------- every solver


def _solvers() -> list[Any]:
    return [s.spec() for s in available_solvers()]


@pytest.mark.parametrize("spec", _solvers(), ids=lambda s: s.name)
def test_each_solver_round_trips_its_defaults(spec: Any) -> None:
    cls = spec.params_class
    assert issubclass(cls, SolverParams) and dataclasses.is_dataclass(cls)
    default = cls()
    assert cls.parse({}) == default
    # The defaults as `geoplan solvers` prints them parse back to the defaults.
    texts = {r.name: r.default for r in describe_params(cls) if not r.name.endswith("<key>")}
    given = {k: v for k, v in texts.items() if k not in cls.REFUSED}
    assert cls.parse(given) == default
    # ... and so do the Python values, and as_dict() of the defaults.
    values = {k: v for k, v in default.as_dict().items() if k not in cls.REFUSED}
    assert cls.parse(values) == default
    # Every field has one line of help.
    assert all(r.help and "\n" not in r.help for r in describe_params(cls))


@pytest.mark.parametrize("spec", _solvers(), ids=lambda s: s.name)
def test_each_solver_rejects_a_misspelt_key(spec: Any) -> None:
    cls = spec.params_class
    fields = [f.name for f in dataclasses.fields(cls)
              if not f.metadata.get("prefix") and f.name not in cls.REFUSED]
    key = (fields[0][:-1] + fields[0][-1] * 2) if fields else "frobnicate"
    with pytest.raises(InputError) as e:
        get_solver(spec.name).parse_params({key: "1"})
    assert e.value.field == f"params.{key}"
    if fields:
        assert f"did you mean {fields[0]!r}?" in e.value.message


def test_defaults_are_the_ones_results_were_recorded_with() -> None:
    from formulations.bnb import BnbParams
    from formulations.bruteforce import BruteforceParams
    from formulations.cpsat import CpsatParams
    from formulations.milp import MilpParams
    from formulations.portfolio import PortfolioParams
    from heuristics.greedy import GreedyParams
    from heuristics.memetic import MemeticParams
    from heuristics.metis import MetisImprovedParams
    from heuristics.rrls import RRLSParams

    m = MilpParams()
    assert (m.heuristic, m.heuristic_share, m.symmetry, m.cuts, m.site_unions, m.tighten,
            m.tighten_share, m.highs_log, dict(m.highs)) == (
        True, 0.05, True, True, None, True, 0.25, False, {})
    c = CpsatParams()
    assert (c.precision, c.symmetry, c.bounds, c.baseline_cutoff, c.log) == (
        None, True, True, True, False)
    b = BnbParams()
    assert (b.symmetry, b.dominance, b.baseline_incumbent, b.node_limit, b.parallel_after) == (
        True, True, True, None, 0.1)
    assert BruteforceParams().max_space == 5e7
    assert (PortfolioParams().exact, PortfolioParams().ma_fraction) == (None, 0.2)
    assert (GreedyParams().split, GreedyParams().starts) == ("exact", None)
    assert (MetisImprovedParams().exhaustive_max, MetisImprovedParams().samples) == (7, 10_000)
    r = RRLSParams()
    assert (r.max_restarts, r.improvement, r.stall_restarts, r.start_tries) == (
        None, "best", None, 4096)
    p = MemeticParams()
    assert (p.population, p.tournament, p.elite, p.ls_rate, p.restarts) == (200, 4, 2, 0.5, 0)


def test_the_old_parsers_disagreements_are_gone() -> None:
    # cpsat rejected "maybe"; milp and bnb read it as true. Now all three reject it.
    for name, key in (("cpsat", "symmetry"), ("milp", "symmetry"), ("bnb", "symmetry")):
        with pytest.raises(InputError, match=f"params.{key}"):
            get_solver(name).parse_params({key: "maybe"})
        typed, _ = get_solver(name).parse_params({key: "no"})
        assert typed.symmetry is False  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="did you mean 'symmetry'"):
        get_solver("milp").parse_params({"symetry": "False"})


def test_portfolio_inner_parameters() -> None:
    from formulations.portfolio import PortfolioParams

    p = PortfolioParams.parse({"exact": "milp", "memetic.P": "30", "exact.heuristic": "no"})
    assert p.memetic == {"P": "30"} and p.exact_params == {"heuristic": "no"}
    with pytest.raises(InputError, match=r"params\.exact"):
        PortfolioParams.parse({"exact": "foo"})


def test_experiment_files_use_known_parameters() -> None:
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "bench" / "experiments"
    for path in sorted(root.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        for entry in data.get("solvers", []):
            tables = [entry.get("params", {})]
            tables += [v.get("params", {}) for v in entry.values()
                       if isinstance(v, dict) and "params" in v]
            for table in tables:
                if table:
                    get_solver(entry["name"]).parse_params(table)
    # (today's files set no parameters; any that they set must parse)
