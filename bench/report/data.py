"""The data a report is made from: result rows, the manifest, and the instances they ran on."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.execution.results import MANIFEST_NAME, ResultsFile
from geoplan.errors import InputError

__all__ = ["Ctx", "experiment_info", "load_results"]

Row = dict[str, Any]


def load_results(path: str | Path) -> tuple[list[Row], dict[str, Any], Path]:
    """Rows (one per run key, the last one written wins), the manifest, the results path."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.jsonl"
    if not p.exists():
        raise InputError("results", str(path), "results file not found")
    raw = ResultsFile(p).rows()
    if not raw:
        raise InputError("results", str(p), "no result rows in the file")
    by_key: dict[str, Row] = {}
    for k, r in enumerate(raw):
        if "experiment" not in r or "status" not in r:
            raise InputError("results", str(p), f"line {k + 1} is not a geoplan bench row")
        by_key[r.get("run_key") or f"line-{k}"] = r
    manifest_path = p.parent / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    return list(by_key.values()), manifest, p


def experiment_info(name: str, manifest: Mapping[str, Any], profile: str) -> dict[str, Any]:
    """The experiment's settings as run (from the manifest), else from its shipped file."""
    info = manifest.get("experiments", {}).get(name)
    if info:
        return dict(info)
    try:
        from bench.experiments import load_experiment

        return load_experiment(name, profile).to_manifest()
    except InputError:
        return {"name": name, "title": name, "description": "", "report": {}, "solvers": [],
                "instances": []}


class Ctx:
    """Shared state while writing one report."""

    def __init__(self, rows: list[Row], manifest: Mapping[str, Any], results: Path, out: Path,
                 figures: bool) -> None:
        self.rows = rows
        self.manifest = manifest
        self.results = results
        self.out = out
        self.fig_dir = out / "figures"
        self.figures = figures
        self.made: list[Path] = []
        self.notes: list[str] = []
        self._instances: dict[str, Any] = {}

    def instance(self, r: Row) -> Any:
        """The run's instance (from the results' instances folder, else regenerated)."""
        from geoplan.model.instance import Instance

        key = f"{r['instance']}/{r.get('instance_hash')}"
        if key in self._instances:
            return self._instances[key]
        inst = None
        f = r.get("instance_file")
        path = self.results.parent / "instances" / f if f else None
        if path is not None and path.exists():
            inst = Instance.from_dict(json.loads(path.read_text()))
        else:
            spec = dict(r.get("instance_spec") or {})
            gen = spec.pop("generator", None)
            spec.pop("normalise_by", None)
            from bench.experiments import GENERATORS

            if gen in GENERATORS:
                data = GENERATORS[gen][0](**spec, name=r["instance"])
                if r.get("t_ref_ms") and r.get("e_ref_j"):  # the normalisers the run used
                    data["objective"] = {**(data.get("objective") or {}),
                                         "t_ref_ms": r["t_ref_ms"], "e_ref_j": r["e_ref_j"]}
                inst = Instance.from_dict(data)
                if inst.fingerprint != r.get("instance_hash"):
                    self.notes.append(f"instance {r['instance']} was regenerated from its spec "
                                      "and differs from the one run (normalisers?)")
        self._instances[key] = inst
        return inst

    def figure(self, fn: Callable[..., Path], name: str, *args: Any, **kw: Any) -> str:
        """Draw a figure; return its Markdown (empty when figures are off or drawing failed)."""
        if not self.figures:
            return ""
        path = self.fig_dir / name
        try:
            fn(*args, path=path, **kw)
        except Exception as exc:  # a broken figure must not cost the report
            self.notes.append(f"figure {name} could not be drawn: {type(exc).__name__}: {exc}")
            return ""
        self.made.append(path)
        return f"![{name}](figures/{name})"
