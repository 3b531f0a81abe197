"""The solver registry: entry points, missing backends and broken modules."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from geoplan.errors import InputError
from geoplan.solving import core, registry
from geoplan.solving.params import SolverParams
from geoplan.solving.registry import SolverEntry, SolverSpec, SolverUnavailable

# formats.md's solver names, and the ones the project registers besides.
CONTRACT = {"memetic", "milp", "cpsat", "bruteforce", "bnb", "metis-default", "metis-improved",
            "portfolio"}
EXTRA = {"greedy", "random-restart"}


def _ep(name: str, value: str, group: str = registry.SOLVER_GROUP) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=group)


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_entry_points_list_every_solver() -> None:
    eps = {ep.name: ep for ep in metadata.entry_points(group="geoplan.solvers")}
    assert CONTRACT | EXTRA <= set(eps)
    assert set(eps) <= set(core.solver_names())
    for name in CONTRACT | EXTRA:
        spec = core.get_solver(name).spec()
        assert isinstance(spec, SolverSpec) and spec.name == name
        assert spec.kind in ("exact", "heuristic", "baseline")
        assert spec.description and issubclass(spec.params_class, SolverParams)
        assert callable(spec.load())


def test_the_same_from_a_fresh_interpreter() -> None:
    code = ("from importlib.metadata import entry_points as e; "
            "print(' '.join(sorted(x.name for x in e(group='geoplan.solvers'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert CONTRACT | EXTRA <= set(out)


def test_looking_up_imports_nothing_and_unknown_names_hint() -> None:
    entry = core.get_solver("cpsat")
    assert isinstance(entry, SolverEntry | SolverSpec)
    with pytest.raises(InputError, match="did you mean 'cpsat'"):
        core.get_solver("cpsta")


def test_missing_backend_says_how_to_install(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path, monkeypatch, "gp_fake_highs_solver", """
        import highspy  # a declared dependency of geoplan

        def solve(instance, options):
            raise AssertionError
    """)
    monkeypatch.setitem(sys.modules, "highspy", None)  # "not installed"
    entry = SolverEntry(_ep("fake-highs", "gp_fake_highs_solver:solve"))
    with pytest.raises(SolverUnavailable) as e:
        entry.load()
    assert "pip install highspy" in str(e.value) and e.value.package == "highspy"
    # The solver's own module not being installed is the same case.
    gone = SolverEntry(_ep("gone", "gp_no_such_module_xyz:SPEC"))
    with pytest.raises(SolverUnavailable, match="pip install gp_no_such_module_xyz"):
        gone.load()


@pytest.mark.parametrize(("body", "error"), [
    ("def solve(instance, options:\n    pass\n", SyntaxError),
    ("x = undefined_name + 1\n", NameError),
    ("import highspyy  # a typo, not a declared backend\n", ModuleNotFoundError),
    ("from geoplan.solving.core import no_such_name\n", ImportError),
    ("from geoplan.no_such_module import x\n", ModuleNotFoundError),
    ("raise RuntimeError('boom at import')\n", RuntimeError),
])
def test_a_broken_module_raises_and_is_never_unavailable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, error: type) -> None:
    _module(tmp_path, monkeypatch, "gp_broken_solver", body)
    entry = SolverEntry(_ep("broken", "gp_broken_solver:SPEC"))
    with pytest.raises(error) as e:
        entry.load()
    assert not isinstance(e.value, SolverUnavailable)
    assert any("broken" in n for n in getattr(e.value, "__notes__", []))


def test_bench_records_only_missing_backends_as_unavailable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.execution.sweep import availability

    _module(tmp_path, monkeypatch, "gp_broken_solver2", "x = undefined_name\n")
    monkeypatch.setitem(core._REGISTRY, "gone", SolverEntry(_ep("gone", "gp_nothing_xyz:SPEC")))
    monkeypatch.setitem(core._REGISTRY, "broken",
                        SolverEntry(_ep("broken", "gp_broken_solver2:SPEC")))
    assert availability(["gone", "metis-default"]).keys() == {"gone"}
    with pytest.raises(NameError):
        availability(["gone", "broken"])


def test_entry_point_may_name_a_plain_function(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path, monkeypatch, "gp_plain_solver", '''
        def solve(instance, options):
            """A plug-in solver without a spec.

            More text.
            """
    ''')
    spec = SolverEntry(_ep("plain", "gp_plain_solver:solve")).spec()
    assert (spec.kind, spec.description) == ("external", "A plug-in solver without a spec.")
    with pytest.raises(InputError, match="unknown parameter"):
        spec.parse_params({"x": 1})


def test_a_spec_under_the_wrong_name_is_an_error(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from geoplan.errors import SolverError

    with pytest.raises(SolverError, match="names the spec of 'bnb'"):
        SolverEntry(_ep("not-bnb", "formulations.bnb:SPEC")).spec()


def test_solvers_command_lists_an_unavailable_solver(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from geoplan.cli import main

    monkeypatch.setitem(core._REGISTRY, "gone", SolverEntry(_ep("gone", "gp_nothing_xyz:SPEC")))
    assert main(["solvers", "gone", "bnb"]) == 0
    out = capsys.readouterr().out
    assert "gone" in out and "pip install gp_nothing_xyz" in out
    assert "node_limit" in out
    # solving with it is exit 1 with the same message (a solver that cannot run)
    data = Path(__file__).resolve().parents[1] / "data" / "hand3.json"
    assert main(["solve", str(data), "--solver", "gone"]) == 1
    assert "pip install gp_nothing_xyz" in capsys.readouterr().err


def _commands(monkeypatch: pytest.MonkeyPatch, *eps: metadata.EntryPoint) -> None:
    real = metadata.entry_points

    def fake(**kw: str) -> object:
        if kw.get("group") == registry.COMMAND_GROUP:
            return list(eps)
        return real(**kw)

    monkeypatch.setattr(metadata, "entry_points", fake)


def test_commands_from_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    from geoplan.cli import main

    _module(tmp_path, monkeypatch, "gp_cmd_ok", """
        def add(sub):
            p = sub.add_parser("hello", help="say hello")
            p.set_defaults(func=lambda args: print("hello") or 0)
            return p
    """)
    _module(tmp_path, monkeypatch, "gp_cmd_missing", "import matplotlib\n")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    _commands(monkeypatch, _ep("hello", "gp_cmd_ok:add", registry.COMMAND_GROUP),
              _ep("plots", "gp_cmd_missing:add", registry.COMMAND_GROUP))
    assert main(["hello"]) == 0 and capsys.readouterr().out == "hello\n"
    assert main(["plots", "x"]) == 1
    assert "pip install matplotlib" in capsys.readouterr().err


def test_a_broken_command_module_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from geoplan.cli import build_parser

    _module(tmp_path, monkeypatch, "gp_cmd_broken", "def add(sub:\n")
    _commands(monkeypatch, _ep("broken", "gp_cmd_broken:add", registry.COMMAND_GROUP))
    with pytest.raises(SyntaxError):
        build_parser()


def test_bench_is_a_registered_command() -> None:
    names = {ep.name for ep in metadata.entry_points(group="geoplan.commands")}
    assert "bench" in names
