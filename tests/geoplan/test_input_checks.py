"""Issue 9 input checks owned by the instance: sanity ranges, counts, unknown keys,
text encodings, the optional training fields, and the big-file links reader."""

from __future__ import annotations

import contextlib
import copy
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference_model as ref

import geoplan.model.instance as instance_mod
from geoplan.cli import main
from geoplan.errors import InputError
from geoplan.model.instance import Instance, load_instance, read_json

DATA = Path(__file__).resolve().parent.parent / "data"
HAND3 = DATA / "hand3.json"
PLAN_AB = str(DATA / "hand3.plan_ab.json")


def hand3() -> dict[str, Any]:
    return json.loads(HAND3.read_text())


def edit(path: list[Any], value: Any) -> dict[str, Any]:
    d = hand3()
    node: Any = d
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return d


def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, data: Any, *, raw: bytes | None = None,
        command: str = "evaluate") -> tuple[int, str, str]:
    f = tmp_path / "inst.json"
    if raw is None:
        f.write_text(json.dumps(data))
    else:
        f.write_bytes(raw)
    if command == "show":  # geoplan show PLAN [INSTANCE]
        argv = ["show", PLAN_AB, str(f)]
    else:
        argv = [command, str(f), PLAN_AB] + (["--json"] if command == "evaluate" else [])
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2, (code, out, err)
    assert out == "" and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geoplan: error:"), err
    for needle in needles:
        assert needle in lines[0], (needle, err)


# ----------------------------------------------------------------------------- sanity ranges

RANGE_CASES: list[tuple[str, list[Any], Any, str]] = [
    # issue 9 item 4: each of these used to crash or mislead a solver
    ("peak-1e308", ["gpus", 0, "peak_tflops"], 1e308, "gpus[0] (a).peak_tflops"),
    ("memory-1e308", ["gpus", 1, "memory_gb"], 1e308, "gpus[1] (b).memory_gb"),
    ("bandwidth-1e308", ["links", 0, "bandwidth_gbps"], 1e308, "links[0] (a->b).bandwidth_gbps"),
    ("seq-len-1e308", ["model", "seq_len"], 1e308, "model.seq_len"),
    # the other upper bounds
    ("peak-over", ["gpus", 0, "peak_tflops"], 1.5e5, "peak_tflops"),
    ("active-over", ["gpus", 0, "active_w"], 2e5, "active_w"),
    ("latency-over", ["links", 2, "latency_ms"], 2e6, "links[2] (b->c).latency_ms"),
    ("bandwidth-over", ["links", 1, "bandwidth_gbps"], 2e7, "bandwidth_gbps"),
    ("hidden-over", ["model", "hidden"], 2_000_000, "model.hidden"),
    ("vocab-over", ["model", "vocab"], 10**9, "model.vocab"),
    ("layers-over", ["model", "layers"], 10**6, "model.layers"),
    ("batch-over", ["training", "batch_size"], 2 * 10**9, "training.batch_size"),
    ("bytes-over", ["training", "bytes_per_value"], 1000, "training.bytes_per_value"),
    ("t-ref-inf", ["objective", "t_ref_ms"], float("inf"), "objective.t_ref_ms"),
    # counts must be integers, numbers must be numbers
    ("frac-seq-len", ["model", "seq_len"], 1000.5, "model.seq_len"),
    ("bool-layers", ["model", "layers"], True, "model.layers"),
    ("bool-micro", ["training", "micro_batch_size"], False, "training.micro_batch_size"),
    ("str-latency", ["links", 0, "latency_ms"], "2", "links[0] (a->b).latency_ms"),
    ("list-util", ["gpus", 0, "memory_util"], [0.5], "memory_util"),
    ("inf-latency", ["links", 0, "latency_ms"], float("inf"), "latency_ms"),
    ("nan-bandwidth", ["links", 0, "bandwidth_gbps"], float("nan"), "bandwidth_gbps"),
    ("huge-int-bandwidth", ["links", 0, "bandwidth_gbps"], 10**400, "bandwidth_gbps"),
    ("neg-overhead", ["training", "stage_overhead_ms"], -1, "training.stage_overhead_ms"),
    ("str-overhead", ["training", "stage_overhead_ms"], "1ms", "training.stage_overhead_ms"),
    # hybrid-model.md optional fields are checked too
    ("zero-3", ["training", "zero"], 3, "training.zero"),
    ("max-tp-3", ["training", "max_tp"], 3, "training.max_tp"),
    ("mb-choice", ["training", "micro_batch_choices"], [1, 3], "training.micro_batch_choices[1]"),
    ("recompute", ["training", "recompute_choices"], ["some"], "recompute_choices[0]"),
    ("zero-choices", ["training", "zero_choices"], "0,1", "training.zero_choices"),
]


@pytest.mark.parametrize(("path", "value", "field"), [c[1:] for c in RANGE_CASES],
                         ids=[c[0] for c in RANGE_CASES])
def test_out_of_range_values_name_the_field(path: list[Any], value: Any, field: str) -> None:
    with pytest.raises(InputError) as exc:
        Instance.from_dict(edit(path, value))
    assert field in exc.value.field, exc.value


@pytest.mark.parametrize("case", RANGE_CASES[:4], ids=[c[0] for c in RANGE_CASES[:4]])
def test_issue9_item4_cases_exit_2_on_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: tuple[str, list[Any], Any, str]
) -> None:
    _, path, value, field = case
    one_error(*cli(capsys, tmp_path, edit(path, value)), field, "1e+308")


def test_range_bounds_are_inclusive_where_documented() -> None:
    d = hand3()
    d["gpus"][1]["idle_w"] = 0  # [0, ...]
    d["links"][2]["latency_ms"] = 0
    d["gpus"][0]["compute_util"] = 1  # (0, 1]
    d["model"]["seq_len"] = 1000.0  # an integral float is a count
    inst = Instance.from_dict(d)
    assert inst.model.seq_len == 1000 and isinstance(inst.model.seq_len, int)


# ----------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    ("path", "key", "field", "hint"),
    [
        (["gpus", 0], "compute_utl", "gpus[0].compute_utl", "compute_util"),
        (["links", 1], "latency", "links[1].latency", "latency_ms"),
        (["model"], "seqlen", "model.seqlen", "seq_len"),
        (["training"], "stage_overhead", "training.stage_overhead", "stage_overhead_ms"),
        (["training"], "microbatch_size", "training.microbatch_size", "micro_batch_size"),
        (["objective"], "lamda", "objective.lamda", "lambda"),
        ([], "netwrok", "netwrok", "network"),
    ],
)
def test_unknown_keys_are_rejected_with_a_hint(path: list[Any], key: str, field: str,
                                               hint: str) -> None:
    d = hand3()
    node: Any = d
    for p in path:
        node = node[p]
    node[key] = 0.5
    with pytest.raises(InputError) as exc:
        Instance.from_dict(d)
    assert exc.value.field == field
    assert f"unknown field {field} (did you mean {hint}?)" in exc.value.message


def test_unknown_key_on_the_command_line(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    d = edit(["gpus", 0, "compute_utl"], 0.5)
    one_error(*cli(capsys, tmp_path, d),
              "unknown field gpus[0].compute_utl (did you mean compute_util?)")


def test_far_off_key_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match="known: id, type, site"):
        Instance.from_dict(edit(["gpus", 0, "zzz"], 1))


def test_optional_keys_of_the_contracts_are_accepted() -> None:
    d = hand3()
    d["gpus"][0].update(type="custom", site="A")
    d["model"]["flops_per_token_per_layer"] = 1e9
    d["training"].update(stage_overhead_ms=0.25, zero=1, zero_choices=[0, 1, 2], max_tp=4,
                         micro_batch_choices=[1, 2, 4, 8], recompute_choices=["none", "full"])
    inst = Instance.from_dict(d)
    t = inst.training
    assert t.stage_overhead_ms == 0.25 and t.zero == 1 and t.max_tp == 4
    assert t.zero_choices == (0, 1, 2) and t.micro_batch_choices == (1, 2, 4, 8)
    assert t.recompute_choices == ("none", "full")
    out = inst.to_dict()["training"]
    assert out["stage_overhead_ms"] == 0.25 and out["micro_batch_choices"] == [1, 2, 4, 8]
    assert Instance.from_dict(inst.to_dict()).to_dict() == inst.to_dict()


def test_defaults_of_the_optional_training_fields_are_not_written() -> None:
    inst = Instance.from_dict(hand3())
    t = inst.training
    assert (t.stage_overhead_ms, t.zero, t.max_tp, t.zero_choices) == (0.0, 0, 8, None)
    assert set(inst.to_dict()["training"]) == {"batch_size", "micro_batch_size",
                                               "bytes_per_value", "activation_factor",
                                               "backward_factor"}
    d = edit(["training", "stage_overhead_ms"], 0)
    assert Instance.from_dict(d).fingerprint == inst.fingerprint  # 0 is the default


# ----------------------------------------------------------------------------- text encodings

LATIN1 = '{"name": "café", "gpus": []}'.encode("latin-1")


@pytest.mark.parametrize(
    ("blob", "needle"),
    [
        (bytes(range(256)) * 4, "not UTF-8 text"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not UTF-8 text"),
        (LATIN1, "not UTF-8 text (byte 0xe9"),
        (json.dumps(hand3()).encode("utf-16"), "UTF-16"),
        (b'{"name": "x\x00"}', "NUL"),
        (b"", "invalid JSON"),
        (b"[" * 100_000, "invalid JSON"),
        (b'{"gpus": ' + b"1" * 5000 + b"}", "invalid JSON"),
    ],
    ids=["binary", "png", "latin-1", "utf-16", "nul", "empty", "deep", "long-int"],
)
def test_bad_text_is_an_input_error(tmp_path: Path, blob: bytes, needle: str) -> None:
    f = tmp_path / "x.json"
    f.write_bytes(blob)
    with pytest.raises(InputError) as exc:
        read_json(f, "instance")
    assert exc.value.field == "instance" and needle in exc.value.message
    with pytest.raises(InputError):
        load_instance(f)


@pytest.mark.parametrize("command", ["evaluate", "show"])
def test_bad_text_exits_2_on_the_command_line(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path, command: str) -> None:
    one_error(*cli(capsys, tmp_path, None, raw=LATIN1, command=command), "instance",
              "not UTF-8")
    one_error(*cli(capsys, tmp_path, None, raw=bytes(range(256)), command=command),
              "not UTF-8")


def test_utf8_bom_and_non_ascii_labels_are_fine(tmp_path: Path) -> None:
    d = hand3()
    d["name"] = "café ⚡"
    f = tmp_path / "bom.json"
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps(d, ensure_ascii=False).encode())
    assert load_instance(f).name == "café ⚡"


# ----------------------------------------------------------------------------- big-file reader


@pytest.fixture
def scanner_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send every file through the big-file links reader (a tiny file is enough)."""
    monkeypatch.setattr(instance_mod, "FAST_LINKS_MIN_BYTES", 0)


def both_ways(tmp_path: Path, text: str | bytes) -> tuple[Any, Any]:
    """(result of the plain JSON path, result of load_instance), each an Instance or error."""
    f = tmp_path / "i.json"
    if isinstance(text, str):
        f.write_text(text)
    else:
        f.write_bytes(text)
    out: list[Any] = []
    for loader in (lambda: Instance.from_dict(json.loads(f.read_bytes())),
                   lambda: load_instance(f)):
        try:
            out.append(loader())
        except InputError as exc:
            out.append(str(exc))
    return out[0], out[1]


def test_scanner_reads_links_into_columns(scanner_on: None, tmp_path: Path) -> None:
    d = hand3()
    f = tmp_path / "i.json"
    f.write_text(json.dumps(d))
    found = instance_mod.split_links(f.read_bytes())
    assert found is not None
    rest, arrays = found
    assert rest["links"] == [] and rest["gpus"] == d["gpus"]
    assert arrays.src.tolist() == [0, 1, 1, 2] and arrays.dst.tolist() == [1, 0, 2, 1]
    assert arrays.util.tolist() == [1.0, 0.5, 1.0, 1.0]  # util omitted -> 1
    plain, fast = both_ways(tmp_path, json.dumps(d))
    assert fast.to_dict() == plain.to_dict() and fast.fingerprint == plain.fingerprint


TRICKY_NUMBERS = ["0.30000000000000004", "1e-300", "12345678901234567890", "-0", "1E+2",
                  "5e22", "1.5e-23", "123456789012345.6", "0.1", "7", "2.5E-3", "1e0",
                  "99999999999999999999e-20", "0.000001", "1.7976931348623157e308", "1e999"]


@pytest.mark.parametrize("number", TRICKY_NUMBERS)
def test_scanner_numbers_equal_the_json_parser(scanner_on: None, tmp_path: Path,
                                               number: str) -> None:
    text = json.dumps(hand3()).replace('"latency_ms": 4', f'"latency_ms": {number}')
    text = text.replace('"bandwidth_gbps": 32', f'"bandwidth_gbps": {number}')
    plain, fast = both_ways(tmp_path, text)
    assert instance_mod.split_links(text.encode()) is not None  # the scanner read it
    if isinstance(plain, str):
        assert plain == fast  # the same message
    else:
        assert fast.to_dict() == plain.to_dict()
        assert np.array_equal(fast.link_table.latency_ms, plain.link_table.latency_ms)


def test_scanner_agrees_on_random_instances_and_layouts(scanner_on: None,
                                                        tmp_path: Path) -> None:
    rng = random.Random(5)
    for k in range(25):
        d = ref.random_instance(rng)
        for e in d["links"]:
            e["bandwidth_gbps"] = rng.choice([rng.uniform(0.1, 400), rng.randint(1, 400)])
            e["latency_ms"] = rng.choice([rng.uniform(0, 50) ** 3, 0, 1e-7 * rng.random()])
            if rng.random() < 0.5:
                e["util"] = rng.uniform(0.01, 1)
        d["links"] = [  # any key order
            dict(reversed(list(e.items()))) if rng.random() < 0.3 else e for e in d["links"]
        ]
        layout = [{}, {"indent": 2}, {"separators": (",", ":")}, {"indent": "\t"}][k % 4]
        plain, fast = both_ways(tmp_path, json.dumps(d, **layout))
        assert fast.to_dict() == plain.to_dict()
        assert instance_mod.split_links((tmp_path / "i.json").read_bytes()) is not None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"latency_ms": 2}', '"latency_ms": 2, "latncy": 1}'),  # unknown key: hint
        ('"latency_ms": 2}', '"latency_ms": NaN}'),  # JSON extension
        ('"latency_ms": 2}', '"latency_ms": true}'),  # a boolean
        ('"latency_ms": 2}', '"latency_ms": "2"}'),  # a string
        ('"latency_ms": 2}', '"latency_ms": null}'),  # null
        ('"src": "a"', '"src": "\\u0061"'),  # an escape: still "a"
        ('"src": "a"', '"src": "zz"'),  # unknown GPU
        ('"dst": "b"', '"dst": "a"'),  # self-link
        ('"latency_ms": 2}', '"latency_ms": 2, "latency_ms": 3}'),  # repeated key
        ('"latency_ms": 2}', '"latency_ms": 2}, 5'),  # not an object
        ('"latency_ms": 2}', '"latency_ms": 02}'),  # invalid JSON number
        ('"latency_ms": 2}', '"latency_ms": -1}'),  # out of range
        ('"latency_ms": 2}', '"latency_ms": 2,}'),  # trailing comma: invalid JSON
    ],
)
def test_scanner_steps_aside_and_messages_stay_the_same(scanner_on: None, tmp_path: Path,
                                                         old: str, new: str) -> None:
    text = json.dumps(hand3())
    assert old in text
    plain_text = text.replace(old, new, 1)
    f = tmp_path / "i.json"
    f.write_text(plain_text)
    try:
        expected: Any = Instance.from_dict(json.loads(plain_text)).to_dict()
    except InputError:
        expected = InputError
    except ValueError:  # invalid JSON
        expected = ValueError
    try:
        got: Any = load_instance(f).to_dict()
    except InputError as exc:
        got = ValueError if "invalid JSON" in exc.message else InputError
        if expected is InputError:
            with pytest.raises(InputError) as again:
                Instance.from_dict(json.loads(plain_text))
            assert str(again.value) == str(exc)
    assert got == expected


def test_progress_line_for_many_links(monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(instance_mod, "PROGRESS_LINKS", 3)
    code = main(["evaluate", str(HAND3), PLAN_AB, "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["feasible"] is True  # stdout stays clean JSON
    assert err == "loading 4 links...\n"


def test_network_shorthand_is_expanded_as_columns() -> None:
    gpus = [{"id": f"g{i}", "site": "AB"[i % 2], "type": "A30"} for i in range(6)]
    spec = {"intra": {"latency_ms": 0.1, "bandwidth_gbps": 100},
            "inter": [{"a": "A", "b": "B", "latency_ms": 10, "bandwidth_gbps": 10,
                       "bandwidth_ba_gbps": 9, "util_ba": 0.5}]}
    base = {"gpus": gpus, "model": {"preset": "gpt3-125m"},
            "training": {"batch_size": 8, "micro_batch_size": 1}}
    explicit = [{"src": "g0", "dst": "g1", "bandwidth_gbps": 1, "latency_ms": 1}]
    from geoplan.model.network import expand_network

    for links in ([], explicit):
        inst = Instance.from_dict({**copy.deepcopy(base), "network": spec, "links": links})
        given = {(e["src"], e["dst"]) for e in links}
        dicts = [e for e in expand_network(gpus, spec) if (e["src"], e["dst"]) not in given]
        canonical = Instance.from_dict({**copy.deepcopy(base), "links": dicts + links})
        assert inst.to_dict() == canonical.to_dict()
        assert len(inst.links) == 30


def test_scanner_and_json_agree_on_repeated_and_odd_links_keys(scanner_on: None,
                                                                tmp_path: Path) -> None:
    text = json.dumps(hand3())
    cases = [
        text[:-1] + ', "links": []}',  # a repeated key: JSON keeps the last one
        text.replace('"id": "a"', '"id": "links"').replace('"src": "a"', '"src": "links"')
        .replace('"dst": "a"', '"dst": "links"'),  # a GPU called "links"
        text.replace('"name": "hand3"', '"name": "\\"links\\": ["'),  # in a string
    ]
    for case in cases:
        plain, fast = both_ways(tmp_path, case)
        if isinstance(plain, str):
            assert fast == plain
        else:
            assert fast.to_dict() == plain.to_dict()


JUNK: list[Any] = [None, [], {}, "x", "", -1, 0, 1e308, float("nan"), True, [1], {"a": 1},
                   10**30, 0.5, 3, "A30", [["a"]]]


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _leaves(v, (*path, k))
    elif isinstance(node, list):
        for k, v in enumerate(node):
            out += _leaves(v, (*path, k))
    return out


@pytest.mark.parametrize("scanner", [False, True])
def test_mutated_instances_load_or_raise_input_error(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path, scanner: bool) -> None:
    """Every junk value at every place: an Instance or an InputError, never another error."""
    if scanner:
        monkeypatch.setattr(instance_mod, "FAST_LINKS_MIN_BYTES", 0)
    rng = random.Random(13)
    base = hand3()
    base["network"] = None
    paths = _leaves(base)
    f = tmp_path / "m.json"
    for _ in range(400):
        d = copy.deepcopy(base)
        for _ in range(rng.randint(1, 2)):
            path = rng.choice(paths)
            node: Any = d
            try:
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = copy.deepcopy(rng.choice(JUNK))
            except (KeyError, IndexError, TypeError):
                pass
        f.write_text(json.dumps(d))
        with contextlib.suppress(InputError):
            load_instance(f)


@pytest.mark.parametrize("where", ["name", "link"])
def test_scanner_path_still_refuses_latin1(scanner_on: None, tmp_path: Path, where: str) -> None:
    text = json.dumps(hand3())
    if where == "name":
        text = text.replace('"hand3"', '"h\u00e9"')
    else:
        text = text.replace('"src": "a"', '"src": "\u00e9"', 1)
    f = tmp_path / "l1.json"
    f.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8 text"):
        load_instance(f)
