"""The ``geoplan`` command line (formats.md is its contract).

Exit status: 0 success (for ``solve``: the solver ran, whatever its status; with
no plan, ``--out`` is not written and stderr says so; SIGINT or SIGTERM during a
solve ends it as a time-out: best plan and bound reported and written, exit 0,
``no_solution`` if it came before the solver started); 1 ``validate`` found
violations, or a solver could not run (such as a missing backend: the message
says what to install); 2 invalid input (one message naming the field, no
traceback), among them unknown or ill-typed ``--param`` keys and output paths
that cannot be written, checked before any work; 3 a formulation error (an exact
model disagreeing with the evaluator: a bug).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from geoplan.errors import FormulationError, InputError, SolverError

__all__ = ["entry", "main"]


def _instance(args: argparse.Namespace) -> Any:
    from geoplan.model.instance import load_instance

    inst = load_instance(args.instance)
    if getattr(args, "lam", None) is not None:
        inst = inst.with_objective(lam=args.lam)
    return inst


def _lambda(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"lambda must be a number, got {text!r}") from None
    if not 0 <= x <= 1:
        raise argparse.ArgumentTypeError(f"lambda must lie in [0, 1], got {x}")
    return x


def _positive(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not x > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {x}")
    return x


def int_at_least(minimum: int, what: str) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``, errors saying "expected ``what``"."""

    def parse(text: str) -> int:
        try:
            x = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if x < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {x}")
        return x

    return parse


_seed = int_at_least(0, "a non-negative integer")
_count = int_at_least(1, "a positive integer")


def _param(text: str) -> tuple[str, str]:
    """``KEY=VALUE``: the value stays text; the solver's parameter dataclass reads it."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _params(pairs: list[tuple[str, str]] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in pairs or []:
        if key in out and out[key] != value:
            raise InputError(option, f"{key}={value}", f"{key} is given twice")
        out[key] = value
    return out


def _check_output(option: str, path: str | None) -> None:
    """Fail before any work if ``path`` cannot be written (exit 2 naming the option)."""
    if path is None:
        return
    p = Path(path)
    if path == "" or p.is_dir():
        raise InputError(option, path, "is a directory, not a file path")
    parent = p.parent
    if not parent.exists():
        raise InputError(option, path, f"the directory {str(parent)!r} does not exist")
    if not parent.is_dir():
        raise InputError(option, path, f"{str(parent)!r} is not a directory")
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(option, path, "the file is not writable")
    if not p.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(option, path, f"the directory {str(parent)!r} is not writable")


def _write(option: str, path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise InputError(option, path, f"cannot write: {exc.strerror or exc}") from None


def _evaluate_any(inst: Any, plan: Any) -> tuple[Any, str]:
    """(evaluation, text) of a plan of either space."""
    from geoplan.cost.hybrid_evaluate import HybridEvaluation, evaluate_any
    from geoplan.display import format_evaluation, format_hybrid_evaluation

    ev = evaluate_any(inst, plan)
    if isinstance(ev, HybridEvaluation):
        return ev, format_hybrid_evaluation(ev)
    return ev, format_evaluation(ev)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from geoplan.model.hybrid import load_any_plan

    ev, text = _evaluate_any(_instance(args), load_any_plan(args.plan))
    if args.json:
        print(json.dumps(ev.to_dict(), indent=None if args.compact else 2))
    else:
        print(text)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from geoplan.model.hybrid import HybridPlan, load_any_plan
    from geoplan.model.hybrid_validation import validate_hybrid
    from geoplan.model.validation import validate

    plan = load_any_plan(args.plan)
    inst = _instance(args)
    violations = (validate_hybrid(inst, plan) if isinstance(plan, HybridPlan)
                  else validate(inst, plan))
    if args.json:
        print(json.dumps({"feasible": not violations,
                          "violations": [v.to_dict() for v in violations]}))
    elif not violations:
        print("feasible")
    for v in violations if not args.json else ():
        print(v.message)
    return 1 if violations else 0


def _warm_start(value: str | None) -> Any:
    if value is None:
        return None
    from geoplan.model.hybrid import load_any_plan
    from geoplan.solving.core import get_solver

    if Path(value).exists():
        return load_any_plan(value)
    try:
        get_solver(value)
    except InputError:
        raise InputError(
            "--warm-start", value, "neither a plan file nor a registered solver name"
        ) from None
    return value


def cmd_solve(args: argparse.Namespace) -> int:
    """``geoplan solve``: SIGINT/SIGTERM end the solve as a time-out does (exit 0, outputs
    written); the handlers stay until the outputs are written."""
    from geoplan.solving.stop import stop_scope

    with stop_scope():
        return _cmd_solve(args)


def _cmd_solve(args: argparse.Namespace) -> int:
    from geoplan.display import ProgressPrinter
    from geoplan.solving.core import Callbacks, solve
    from geoplan.solving.registry import solver_for_space

    # Everything that can be checked is checked before any work (formats.md: exit 2).
    for option, path in (("--out", args.out), ("--result", args.result),
                         ("--trace-csv", args.trace_csv)):
        _check_output(option, path)
    params = _params(args.param, "--param")
    ws_params = _params(args.warm_start_param, "--warm-start-param")
    spec = solver_for_space(args.solver, args.space)
    spec.load()
    spec.parse_params(params)  # errors name params.KEY
    warm_start = _warm_start(args.warm_start)
    if ws_params:
        if not isinstance(warm_start, str):
            raise InputError("--warm-start-param", " ".join(f"{k}={v}" for k, v in
                                                           ws_params.items()),
                             "needs --warm-start SOLVER (a solver name, not a plan file)")
        ws_spec = solver_for_space(warm_start, spec.space)
        ws_spec.load()
        ws_spec.parse_params(ws_params, where="warm_start_params")
    inst = _instance(args)
    progress = args.progress or (not args.quiet and sys.stderr.isatty())
    result = solve(
        inst,
        args.solver,
        seed=args.seed,
        time_limit=args.time_limit,
        threads=args.threads,
        gap=args.gap,
        warm_start=warm_start,
        params=params,
        warm_start_params=ws_params or None,
        callbacks=ProgressPrinter() if progress else Callbacks(),
        space=args.space,
    )
    ws_note = (result.info.get("warm_start") or {}).get("note")
    if ws_note:  # one line: what of the warm start could not be used, and what was returned
        print(f"geoplan: warm start: {ws_note}", file=sys.stderr)
    if args.out:
        if result.plan is not None:
            _write("--out", args.out, result.plan.to_json(indent=2) + "\n")
        else:
            print(f"geoplan: {result.solver} found no plan (status {result.status}); "
                  f"--out {args.out} was not written", file=sys.stderr)
    if args.result:
        _write("--result", args.result, result.to_json(indent=2) + "\n")
    if args.trace_csv:
        _write("--trace-csv", args.trace_csv, result.trace_csv())
    if args.json:
        print(result.to_json())
    else:
        print(result.summary())
        if result.plan is not None:
            print(_evaluate_any(inst, result.plan)[1])
        elif result.message:
            print(result.message)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from geoplan.display import format_hybrid_plan, format_plan
    from geoplan.model.hybrid import HybridPlan, load_any_plan

    plan = load_any_plan(args.plan)
    if args.instance:
        print(_evaluate_any(_instance(args), plan)[1])
    elif isinstance(plan, HybridPlan):
        print(format_hybrid_plan(plan))
    else:
        print(format_plan(plan))
    return 0


def cmd_solvers(args: argparse.Namespace) -> int:
    from geoplan.display import format_solvers
    from geoplan.solving.core import available_solvers, get_solver

    solvers = [get_solver(n) for n in args.names] if args.names else available_solvers()
    print(format_solvers(solvers, params=not args.brief))
    return 0


def cmd_space(args: argparse.Namespace) -> int:
    from geoplan.display import space_size_text

    print(space_size_text(args.n, args.layers))
    return 0


#: Largest sizes ``geoplan generate`` writes: an instance is fully linked, so N GPUs
#: make N (N - 1) links (4096 GPUs: 16.8 M links, several GB of JSON).
GENERATE_MAX_GPUS = 4096
GENERATE_MAX_LAYERS = 1024
_GENERATE_SLOW_GPUS = 512  # from here on, generate reports its progress on stderr


def cmd_generate(args: argparse.Namespace) -> int:
    import time

    from geoplan.model.generators import by_family
    from geoplan.model.instance import Instance

    if not 1 <= args.n <= GENERATE_MAX_GPUS:
        raise InputError("--n", args.n, f"must lie in [1, {GENERATE_MAX_GPUS}] (the cap of "
                         "geoplan generate: instances are fully linked)")
    if not 1 <= args.layers <= GENERATE_MAX_LAYERS:
        raise InputError("--layers", args.layers,
                         f"must lie in [1, {GENERATE_MAX_LAYERS}] (the cap of geoplan generate)")
    if args.seed < 0:
        raise InputError("--seed", args.seed, "expected a non-negative integer seed")
    _check_output("--out", args.out)
    slow = args.n >= _GENERATE_SLOW_GPUS
    t0 = time.perf_counter()

    def step(what: str) -> None:
        if slow:
            print(f"geoplan generate: [{time.perf_counter() - t0:7.1f} s] {what}",
                  file=sys.stderr, flush=True)

    step(f"generating {args.n} GPUs and {args.n * (args.n - 1):,} links")
    data = by_family(args.family, args.n, args.layers, args.seed)
    if args.lam is not None:
        data.setdefault("objective", {})["lambda"] = args.lam
    step("checking the instance")
    Instance.from_dict(data)  # generated instances must load
    step("writing JSON")
    text = _instance_json(data)
    if args.out:
        _write("--out", args.out, text + "\n")
    else:
        print(text)
    step("done")
    return 0


def cmd_preset(args: argparse.Namespace) -> int:
    from geoplan.model.instance import Instance
    from geoplan.model.presets import CLUSTER_PRESETS, preset_instance, preset_table

    if args.list:
        print(preset_table())
        return 0
    if args.cluster is None:
        raise InputError("CLUSTER", None, f"name a cluster preset ({', '.join(CLUSTER_PRESETS)}) "
                         "or pass --list")
    if args.model is None:
        raise InputError("--model", None, "required: a model preset such as llama2-70b")
    _check_output("--out", args.out)
    data = preset_instance(args.cluster, args.model, batch_size=args.batch_size,
                           micro_batch_size=args.micro_batch_size, lam=args.lam)
    Instance.from_dict(data)  # preset instances must load
    text = _instance_json(data)
    if args.out:
        _write("--out", args.out, text + "\n")
    else:
        print(text)
    return 0


def _instance_json(data: dict[str, Any]) -> str:
    """Indented JSON with one compact line per GPU and per link: readable, and fast to write
    (``json.dumps(indent=...)`` falls back to the slow pure-Python encoder: 4 s at N=512)."""
    parts = []
    for key, value in data.items():
        if key in ("gpus", "links") and isinstance(value, list):
            rows = ",\n".join("    " + json.dumps(v) for v in value)
            parts.append(f"  {json.dumps(key)}: [\n{rows}\n  ]" if value else f'  "{key}": []')
        else:
            body = json.dumps(value, indent=2).replace("\n", "\n  ")
            parts.append(f"  {json.dumps(key)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}"


class _Parser(argparse.ArgumentParser):
    """Usage errors in the one-line form of input errors (exit 2), without a usage dump.

    argparse would print the usage block and prefix the sub-command's prog
    (``geoplan solve: error:``); formats.md wants one message naming the field.
    Sub-parsers inherit this class (``add_subparsers`` uses the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"geoplan: error: {message} (see '{self.prog} --help')\n")

    def format_help(self) -> str:
        # An epilog computed only when help is shown (it imports every solver).
        hook = getattr(self, "help_epilog", None)
        if hook is not None:
            self.epilog = hook()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="geoplan",
        description="Plan pipeline-parallel training over heterogeneous, geo-distributed GPUs.",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    e = sub.add_parser("evaluate", help="price and explain a plan")
    e.add_argument("instance")
    e.add_argument("plan", help="plan JSON (or a solve result JSON)")
    e.add_argument("--lambda", dest="lam", type=_lambda)
    e.add_argument("--json", action="store_true")
    e.add_argument("--compact", action="store_true", help="one-line JSON")
    e.set_defaults(func=cmd_evaluate)

    v = sub.add_parser("validate", help="check a plan; exit 1 with its violations")
    v.add_argument("instance")
    v.add_argument("plan")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_validate)

    s = sub.add_parser(
        "solve", help="run a solver",
        description="Run a solver on an instance and print (or write) its result.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.help_epilog = _solve_epilog  # type: ignore[attr-defined]
    s.add_argument("instance")
    s.add_argument("--solver", required=True, metavar="NAME",
                   help="the solver (listed below; `geoplan solvers` describes them)")
    s.add_argument("--time-limit", type=_positive, default=60.0, help="seconds (default 60)")
    s.add_argument("--seed", type=_seed, default=0, help="random seed, >= 0 (default 0)")
    s.add_argument("--threads", type=_count, default=None,
                   help="solver threads (default: cores)")
    s.add_argument("--gap", type=float, default=0.0, help="relative gap target (default 0)")
    s.add_argument("--warm-start", help="a solver name or a plan file; solvers marked (warm "
                   "start) below start from it, the others return the better of their plan "
                   "and it (stderr says which)")
    s.add_argument("--warm-start-param", action="append", type=_param, metavar="KEY=VALUE",
                   help="a parameter of the --warm-start solver (repeatable)")
    s.add_argument("--lambda", dest="lam", type=_lambda)
    s.add_argument("--space", choices=("pipeline", "hybrid"), default="pipeline",
                   help="pipeline: GeoTrain's one-GPU stages (default); hybrid: stages of "
                   "GPU groups with tensor and data parallelism (hybrid-model.md), solved by "
                   "the solver's hybrid-NAME variant")
    s.add_argument("--param", action="append", type=_param, metavar="KEY=VALUE",
                   help="a parameter of the solver (repeatable; `geoplan solvers NAME` "
                   "lists them)")
    s.add_argument("--out", help="write the plan JSON here")
    s.add_argument("--result", help="write the full result JSON here")
    s.add_argument("--trace-csv", help="write the trace as CSV here")
    s.add_argument("--json", action="store_true", help="print the result JSON")
    s.add_argument("--progress", action="store_true", help="show progress even when piped")
    s.add_argument("--quiet", action="store_true", help="no progress output")
    s.set_defaults(func=cmd_solve)

    sh = sub.add_parser("show", help="print a plan's stage table")
    sh.add_argument("plan")
    sh.add_argument("instance", nargs="?", help="with an instance: costs per stage")
    sh.add_argument("--lambda", dest="lam", type=_lambda)
    sh.set_defaults(func=cmd_show)

    sl = sub.add_parser("solvers", help="list the solvers and their parameters")
    sl.add_argument("names", nargs="*", metavar="NAME", help="only these solvers")
    sl.add_argument("--brief", action="store_true", help="one line per solver")
    sl.set_defaults(func=cmd_solvers)

    sp = sub.add_parser("space", help="size f(N, L) of the plan space")
    sp.add_argument("n", type=int, help="GPUs N")
    sp.add_argument("layers", type=int, help="layers L")
    sp.set_defaults(func=cmd_space)

    g = sub.add_parser("generate", help="write a generated instance")
    g.add_argument("family", help="paper, geo, metro or cloud (docs/catalog.md)")
    g.add_argument("--n", type=int, required=True,
                   help="number of GPUs (at most 4096: instances are fully linked)")
    g.add_argument("--layers", type=int, required=True, help="layers (at most 1024)")
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--lambda", dest="lam", type=_lambda)
    g.add_argument("--out")
    g.set_defaults(func=cmd_generate)

    pr = sub.add_parser("preset", help="write a real-workload instance (docs/presets.md)")
    pr.add_argument("cluster", nargs="?", help="cluster preset (see --list)")
    pr.add_argument("--list", action="store_true", help="list the cluster presets")
    pr.add_argument("--model", help="model preset of the catalog (e.g. llama2-70b)")
    pr.add_argument("--batch-size", type=_count, default=64, help="samples B (default 64)")
    pr.add_argument("--micro-batch-size", type=_count, default=1, help="u (default 1)")
    pr.add_argument("--lambda", dest="lam", type=_lambda, default=1.0)
    pr.add_argument("--out")
    pr.set_defaults(func=cmd_preset)

    _add_plugin_commands(sub)
    return p


def _add_plugin_commands(sub: Any) -> None:
    """Sub-commands from the ``geoplan.commands`` entry points (``bench`` among them).

    Each names ``function(subparsers)``, which adds its parser. A command whose
    optional dependency is missing is still listed and says how to install it; a
    broken module raises (it is a bug, never hidden).
    """
    from importlib.metadata import entry_points

    from geoplan.solving.registry import COMMAND_GROUP, SolverUnavailable, load_entry_point

    for ep in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        if ep.name in sub.choices:
            raise RuntimeError(f"entry point {ep.value!r} redefines geoplan {ep.name}")
        try:
            add = load_entry_point(ep, f"command {ep.name!r}")
        except SolverUnavailable as exc:
            stub = sub.add_parser(ep.name, help=f"(unavailable: {exc.package} is not installed)")
            stub.add_argument("rest", nargs=argparse.REMAINDER)
            stub.set_defaults(func=_unavailable(str(exc)))
            continue
        add(sub)


def _unavailable(message: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        raise SolverError(message)

    return run


def _solve_epilog() -> str:
    from geoplan.display import format_solvers
    from geoplan.solving.core import available_solvers

    return (
        "solvers:\n"
        + "\n".join("  " + line for line in
                    format_solvers(available_solvers(), params=False).splitlines())
        + "\n\nEach solver's parameters (name, type, default, range, help) are listed by\n"
        "`geoplan solvers [NAME]` and set with --param KEY=VALUE (the warm-start\n"
        "solver's with --warm-start-param KEY=VALUE). Booleans are true/false/1/0/yes/no;\n"
        "`none` clears an optional value. An unknown key or a bad value exits with\n"
        "status 2 (docs/solvers.md; each solver in docs/milp.md, cpsat.md, memetic.md, ...)."
    )


def entry() -> None:
    """The ``geoplan`` console script: :func:`main`, its status as the exit status."""
    code = main()
    from geoplan.solving.stop import exit_status

    raise SystemExit(exit_status(code))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors (2) and --help (0): return the status like the rest
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        if args.debug:
            raise
        print(f"geoplan: error: {exc}", file=sys.stderr)
        return 2
    except FormulationError as exc:
        if args.debug:
            raise
        print(f"geoplan: formulation error (this is a bug, please report it): {exc}",
              file=sys.stderr)
        return 3
    except SolverError as exc:
        if args.debug:
            raise
        print(f"geoplan: solver error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("geoplan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
