"""Bad input FILES: catalogs, offers, calibration profiles and the user's config folder.

Every malformed file gives exit 2 and one ``error:`` line naming the file and the field (never a traceback);
a broken entry in the config folder is a ``warning:`` line and the commands that do not need it go on;
FIFOs, devices, directories and huge files are refused before anything is read; catalog strings are
printed literally (no rich markup); a large catalog still lists and looks up correctly.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from test_cli import GOOD_ACC as CLI_GOOD_ACC_TOML

GOOD_ACC = {
    "id": "acme-x1",
    "name": "Acme X1",
    "vendor": "other",
    "architecture": "Roadrunner",
    "form_factor": "PCIe",
    "year": 2026,
    "aliases": ["x1"],
    "memory_bytes": 64_000_000_000,
    "memory_type": "HBM3",
    "memory_bandwidth_bytes_per_s": 2.0e12,
    "tdp_w": 500,
    "peak_flops_per_s": {"bf16": 5e14},
    "sources": {"default": {"title": "Acme X1 datasheet", "url": "https://example.com/x1.pdf", "date": "2026-01"}},
}
GOOD_ACC_TOML = CLI_GOOD_ACC_TOML  # the same valid entry test_cli uses
LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}
GOOD_MODEL = {"id": "my-model", "name": "My model", "aliases": ["mine"], "config": LLAMA}
GOOD_OFFER = {
    "id": "my-quote",
    "provider": "acme",
    "instance": "box-8",
    "region": "here",
    "gpu": "h100-sxm-80gb",
    "gpu_count": 8,
    "usd_per_hour": 20.0,
    "pricing": "quote",
    "price_date": "2026-01",
    "source": {"title": "our quote", "url": "https://example.com/q", "date": "2026-01"},
}
HUGE_INT = "1" + "0" * 5000


def lines(err: str) -> list[str]:
    return [x for x in err.strip().splitlines() if x.strip()]


def one_error(code, out, err, *fragments):
    assert code == 2, (code, out, err)
    assert "Traceback" not in err
    got = lines(err)
    assert len(got) == 1 and got[0].startswith("gpuplan: error: "), err
    for frag in fragments:
        assert frag in got[0], (frag, got[0])
    return got[0]


def acc_json(**changes) -> str:
    return json.dumps({"schema_version": 1, "accelerator": [{**GOOD_ACC, **changes}]})


def replace_number(text: str, key: str, literal: str) -> str:
    """Swap the number after '"key": ' for a raw JSON literal (NaN, Infinity, 1e400, a 5000-digit integer)."""
    return re.sub(rf'("{key}": )[-0-9.e+]+', lambda m: m.group(1) + literal, text, count=1)


# ------------------------------------------------------------------------------ non-finite numbers

BAD_LITERALS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", HUGE_INT]


@pytest.mark.parametrize("literal", BAD_LITERALS)
@pytest.mark.parametrize("field", ["memory_bytes", "memory_bandwidth_bytes_per_s", "bf16", "year", "tdp_w"])
def test_accelerator_json_non_finite(run, tmp_path, literal, field):
    f = tmp_path / "accs.json"
    f.write_text(replace_number(acc_json(), field, literal))
    one_error(*run("--catalog", str(f), "gpus", "list"), "accs.json", field)


@pytest.mark.parametrize("literal", ["nan", "+nan", "-nan", "inf", "+inf", "-inf", "1e400", "1" + "0" * 400])
@pytest.mark.parametrize(
    "line", ["memory_bandwidth_bytes_per_s = 2.0e12", "bf16 = 500e12", "tdp_w = 500", "memory_bytes = 64_000_000_000"]
)
def test_accelerator_toml_non_finite(run, tmp_path, literal, line):
    f = tmp_path / "accs.toml"
    key = line.split(" = ")[0]
    f.write_text(GOOD_ACC_TOML.replace(line, f"{key} = {literal}"))
    one_error(*run("--catalog", str(f), "gpus", "list"), "accs.toml", key)


@pytest.mark.parametrize("literal", BAD_LITERALS)
@pytest.mark.parametrize("field", ["usd_per_hour", "gpu_count", "vcpus", "scale_out_bytes_per_s"])
def test_offer_non_finite(run, tmp_path, literal, field):
    f = tmp_path / "offers.json"
    f.write_text(
        replace_number(
            json.dumps({"offer": [{**GOOD_OFFER, "vcpus": 1, "scale_out_bytes_per_s": 1e9}]}), field, literal
        )
    )
    one_error(*run("--catalog", str(f), "offers", "list"), "offers.json", field)


@pytest.mark.parametrize("literal", BAD_LITERALS)
@pytest.mark.parametrize("field", ["published_params", "hidden_size", "num_hidden_layers"])
def test_model_non_finite(run, tmp_path, literal, field):
    f = tmp_path / "models.json"
    f.write_text(replace_number(json.dumps({"models": [{**GOOD_MODEL, "published_params": 5}]}), field, literal))
    one_error(*run("--catalog", str(f), "model", "list"), "models.json", field)


@pytest.mark.parametrize(
    "value,field",
    [
        (-1, "memory_bytes"),
        (0, "memory_bandwidth_bytes_per_s"),
        (10**30, "memory_bytes"),
        (1e30, "bf16"),
        (1e300, "memory_bytes"),
        (7, "pcie_gen"),
        (1e9, "tdp_w"),
        ("lots", "memory_bytes"),
        ([1], "memory_bytes"),
        ({"a": 1}, "name"),
        ("h100", "aliases"),
        (None, "vendor"),
        (True, "memory_type"),
        ([], "sources"),
        ({"bf16": "fast"}, "peak_flops_per_s"),
        ({"default": []}, "sources"),
        ([1, 2], "interconnect"),
    ],
)
def test_accelerator_out_of_range_and_wrong_types(run, tmp_path, value, field):
    f = tmp_path / "accs.json"
    if field == "bf16":
        f.write_text(acc_json(peak_flops_per_s={"bf16": value}))
    else:
        f.write_text(acc_json(**{field: value}))
    one_error(*run("--catalog", str(f), "gpus", "list"), "accs.json", field)


@pytest.mark.parametrize(
    "value,field",
    [
        (10**7, "gpu_count"),
        (1e12, "usd_per_hour"),
        (-5, "usd_per_hour"),
        ("8", "gpu"),
        ([], "source"),
        (10**30, "host_memory_bytes"),
        ("x", "pricing"),
    ],
)
def test_offer_out_of_range_and_wrong_types(run, tmp_path, value, field):
    f = tmp_path / "offers.json"
    f.write_text(json.dumps({"offer": [{**GOOD_OFFER, field: value}]}))
    one_error(*run("--catalog", str(f), "offers", "list"), "offers.json", field)


@pytest.mark.parametrize(
    "content,fragment",
    [
        ("[1, 2]", "not a gpuplan catalog"),
        ('"text"', "not a gpuplan catalog"),
        ('{"accelerator": "x"}', "accelerator"),
        ('{"accelerator": [1, 2]}', "accelerator"),
        ('{"accelerator": {"id": "a"}}', "accelerator"),
        ('{"models": {"a": 1}}', "models"),
        ('{"models": [[]]}', "models.0"),
        ('{"offer": [null]}', "offer.0"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"accelerator": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested too deeply"),
        ('{"accelerator": [' + "[" * 300 + "]" * 300 + "]}", "accelerator"),
        ('{"models": [{"id": "d", "name": "D", "config": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}]}", "model 'd'"),
        ("\xff\xfe{}", "not valid JSON"),
        ("", "not valid JSON"),
    ],
)
def test_odd_shapes_are_one_line(run, tmp_path, content, fragment):
    f = tmp_path / "cat.json"
    f.write_text(content, encoding="latin-1" if "\xff" in content else "utf-8")
    command = (
        ("model", "list") if '"models"' in content else ("offers", "list") if '"offer"' in content else ("gpus", "list")
    )
    one_error(*run("--catalog", str(f), *command), "cat.json", fragment)


# -------------------------------------------------------------------------------- calibration files


def _profile(**result) -> dict:
    return {
        "schema_version": 1,
        "kind": "calibration",
        "gpu": None,
        "host": {},
        "versions": {},
        "results": [{"name": "memory copy", "value": 1.0, "unit": "GB/s", **result}],
    }


@pytest.mark.parametrize(
    "text,fragment",
    [
        (json.dumps(_profile()).replace('"value": 1.0', '"value": NaN'), "value"),
        (json.dumps(_profile()).replace('"value": 1.0', '"value": 1e400'), "value"),
        (json.dumps(_profile()).replace('"value": 1.0', '"value": -Infinity'), "value"),
        (json.dumps(_profile(detail={"bytes": 1})).replace('"bytes": 1', f'"bytes": {HUGE_INT}'), "bytes"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("[]", "not a gpuplan calibration profile"),
        (json.dumps({**_profile(), "results": {"a": 1}}), "results"),
    ],
)
def test_bad_calibration_profile(run, tmp_path, text, fragment):
    f = tmp_path / "profile.json"
    f.write_text(text)
    one_error(
        *run(
            "train",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--gpus",
            "8",
            "--zero",
            "3",
            "--tokens",
            "1T",
            "--calibration",
            str(f),
        ),
        "profile.json",
        fragment,
    )


# ------------------------------------------------------------------------- file types and sizes


def _special_files(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(300 * 2**20)  # sparse: no disk used
    return {
        "fifo": (fifo, "FIFO"),
        "dev-zero": ("/dev/zero", "character device"),
        "folder": (folder, "directory"),
        "huge": (huge, "at most"),
    }


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder", "huge"])
@pytest.mark.timeout(30) if hasattr(pytest.mark, "timeout") else (lambda f: f)
def test_special_files_are_refused_without_reading(run, tmp_path, kind):
    path, fragment = _special_files(tmp_path)[kind]
    one_error(*run("--catalog", str(path), "gpus", "list"), str(path), fragment)
    one_error(
        *run("train", "llama-3.1-8b", "--gpu", "h100", "--tokens", "1T", "--calibration", str(path)),
        str(path),
        fragment,
    )
    if kind != "folder":  # a folder is read as the folder holding config.json
        one_error(*run("model", "show", str(path), "--offline"), str(path))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_special_files_in_the_config_folder_are_warnings(run, tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    (conf / "models").mkdir(parents=True)
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(conf))
    os.mkfifo(conf / "accelerators.toml")
    (conf / "offers.json").mkdir()
    (conf / "models" / "a.json").symlink_to("/dev/zero")
    code, out, err = run("offers", "list")
    assert code == 0 and "aws" in out, err
    warned = lines(err)
    assert len(warned) == 2 and all(w.startswith("gpuplan: warning: ") for w in warned), err
    assert any("accelerators.toml" in w and "FIFO" in w for w in warned)
    assert any("offers.json" in w and "directory" in w for w in warned)
    code, out, err = run("model", "list")
    assert code == 0 and any("a.json" in w for w in lines(err)), err


# ---------------------------------------------------------------------------------- config folder


def _plant(conf, kind: str, text: str):
    conf.mkdir(exist_ok=True)
    if kind == "accelerators.toml" or kind == "accelerators.json" or kind.startswith("offers"):
        (conf / kind).write_text(text)
    else:
        (conf / "models").mkdir(exist_ok=True)
        (conf / "models" / "mine.json").write_text(text)


BROKEN_ENTRIES = [
    # (file, contents, the name a command would ask for, a fragment naming the field)
    ("accelerators.toml", GOOD_ACC_TOML.replace("bf16 = 500e12", "bf16 = nan"), "acme-x1", "bf16"),
    ("accelerators.toml", GOOD_ACC_TOML.replace("bf16 = 500e12", "bf16 = inf"), "x1", "bf16"),
    (
        "accelerators.toml",
        GOOD_ACC_TOML.replace("memory_bytes = 64_000_000_000", "memory_bytes = -1"),
        "x1",
        "memory_bytes",
    ),
    ("accelerators.toml", GOOD_ACC_TOML.replace('vendor = "other"', "vendor = 3"), "acme-x1", "vendor"),
    ("accelerators.json", replace_number(acc_json(), "memory_bytes", "NaN"), "acme-x1", "memory_bytes"),
    ("accelerators.json", replace_number(acc_json(), "bf16", "1e400"), "x1", "bf16"),
    ("accelerators.json", replace_number(acc_json(), "year", HUGE_INT), "acme-x1", "year"),
    ("accelerators.json", acc_json(aliases="x1"), "acme-x1", "aliases"),
    (
        "models/*.json",
        json.dumps({"models": [{**GOOD_MODEL, "config": {**LLAMA, "hidden_size": "x"}}]}),
        "my-model",
        "hidden_size",
    ),
    (
        "models/*.json",
        replace_number(json.dumps({"models": [GOOD_MODEL]}), "hidden_size", "Infinity"),
        "mine",
        "hidden_size",
    ),
    ("models/*.json", json.dumps({"models": [{**GOOD_MODEL, "published_params": -3}]}), "my-model", "published_params"),
    ("models/*.json", json.dumps({"models": [{**GOOD_MODEL, "config": {"model_type": "t5"}}]}), "mine", "t5"),
    ("offers.json", json.dumps({"offer": [{**GOOD_OFFER, "usd_per_hour": -1}]}), "my-quote", "usd_per_hour"),
    (
        "offers.json",
        replace_number(json.dumps({"offer": [GOOD_OFFER]}), "usd_per_hour", "NaN"),
        "my-quote",
        "usd_per_hour",
    ),
    ("offers.json", json.dumps({"offer": [{**GOOD_OFFER, "gpu": "no-such-gpu"}]}), "my-quote", "gpu"),
    ("offers.toml", 'schema_version = 1\n[[offer]]\nid = "my-quote"\ngpu_count = inf\n', "my-quote", "gpu_count"),
]


def _command_needing(kind: str, name: str) -> tuple[str, ...]:
    if kind.startswith("accelerators"):
        return ("gpus", "show", name)
    if kind.startswith("models"):
        return ("model", "show", name, "--offline")
    return ("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--tokens", "1T", "--offer", name)


@pytest.mark.parametrize("kind,text,name,field", BROKEN_ENTRIES)
def test_broken_config_entry_warns_and_other_commands_work(run, tmp_path, monkeypatch, kind, text, name, field):
    conf = tmp_path / "conf"
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(conf))
    _plant(conf, kind, text)
    listing = {"accelerators": ("gpus", "list"), "models/*.json": ("model", "list"), "offers": ("offers", "list")}
    for args in [
        listing[next(k for k in listing if kind.startswith(k))],
        ("model", "show", "llama-3.1-8b", "--offline"),
        ("gpus", "show", "h100"),
    ]:
        code, out, err = run(*args)
        assert code == 0 and out, (args, err)
        warned = lines(err)
        if args[:2] in (("gpus", "list"), ("model", "list"), ("offers", "list")):
            assert len(warned) == 1, err
            assert warned[0].startswith("gpuplan: warning: ") and ("mine.json" in warned[0] or kind in warned[0])
            assert field in warned[0], (field, warned[0])
        assert all(w.startswith("gpuplan: warning: ") for w in warned) and len(warned) <= 1, err
    # the command that needs the broken entry: exit 2, one line naming the file and the field
    line = one_error(*run(*_command_needing(kind, name)), field)
    assert "mine.json" in line or kind in line


@pytest.mark.parametrize("kind,text,name,field", BROKEN_ENTRIES[:8])
def test_the_same_file_given_with_catalog_is_an_error(run, tmp_path, kind, text, name, field):
    f = tmp_path / kind.replace("models/*.json", "models.json")
    f.write_text(text)
    one_error(*run("--catalog", str(f), "gpus", "list"), f.name, field)


def test_good_entries_of_a_file_with_a_broken_one_still_load(run, tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(conf))
    text = json.dumps({"accelerator": [{**GOOD_ACC, "id": "good-one", "aliases": []}, GOOD_ACC]})
    (conf / "accelerators.json").write_text(replace_number(text, "memory_bytes", "NaN"))  # the first entry breaks
    code, out, err = run("gpus", "show", "acme-x1", "--json")
    assert code == 0 and json.loads(out)["accelerator"]["id"] == "acme-x1"
    assert len(lines(err)) == 1 and "good-one" in err and "memory_bytes" in err


@pytest.mark.parametrize("text", ["x = ", "[[[", '{"a": ', "\x00\x01", "schema_version = nan\n"])
def test_unreadable_config_file_warns(run, tmp_path, monkeypatch, text):
    conf = tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(conf))
    (conf / "accelerators.toml").write_text(text)
    code, out, err = run("gpus", "list")
    assert code == 0 and "h100-sxm-80gb" in out
    assert len(lines(err)) == 1 and lines(err)[0].startswith("gpuplan: warning: ") and "accelerators.toml" in err


def test_warnings_are_printed_once(run, tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(conf))
    (conf / "accelerators.toml").write_text(GOOD_ACC_TOML.replace("bf16 = 500e12", "bf16 = nan"))
    code, _out, err = run(
        "train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--tokens", "1T", "--rank"
    )
    assert code in (0, 3) and len(lines(err)) == 1 and "warning" in err, err


def test_config_dir_is_a_file(run, tmp_path, monkeypatch):
    f = tmp_path / "conf"
    f.write_text("not a folder")
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(f))
    code, out, err = run("gpus", "list")
    assert code == 0 and "h100-sxm-80gb" in out
    assert len(lines(err)) == 1 and "not a folder" in err and str(f) in err


def test_no_home_folder(run, monkeypatch):
    for var in ("GPUPLAN_CONFIG_DIR", "XDG_CONFIG_HOME", "HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(os.path, "expanduser", lambda p: p)  # no passwd entry either
    code, out, err = run("gpus", "list")
    assert code == 0 and "h100-sxm-80gb" in out
    assert len(lines(err)) == 1 and lines(err)[0].startswith("gpuplan: warning: ") and "HOME" in err


def test_unreadable_config_folder(run, tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(conf))
    real = os.listdir

    def denied(path="."):
        if str(path).startswith(str(conf)):
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(os, "listdir", denied)
    code, _out, err = run("model", "show", "llama-3.1-8b", "--offline")
    assert code == 0 and "Traceback" not in err
    assert len(lines(err)) == 1 and "Permission denied" in err and "warning" in err


# ---------------------------------------------------------------------------------- rich markup

MARKUP = ["My card [/]", "[link=http://x]a", "[bold]", "[/bold] x [red]y", "\\[b]", "tail \\", ":fire: [dim]z[/dim]"]


@pytest.mark.parametrize("text", MARKUP)
def test_catalog_strings_are_printed_literally(run, tmp_path, monkeypatch, text):
    conf = tmp_path / "conf"
    (conf / "models").mkdir(parents=True)
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(conf))
    monkeypatch.setenv("COLUMNS", "400")
    acc = {
        **GOOD_ACC,
        "name": text,
        "architecture": text,
        "memory_type": text,
        "interconnect": {"kind": text, "bandwidth_bytes_per_s": 1e11},
        "sources": {"default": {"title": text, "url": "https://example.com/" + text, "date": "2026-01"}},
    }
    (conf / "accelerators.json").write_text(json.dumps({"accelerator": [acc]}))
    (conf / "offers.json").write_text(
        json.dumps({"offer": [{**GOOD_OFFER, "gpu": "acme-x1", "provider": text, "instance": text, "region": text}]})
    )
    (conf / "models" / "m.json").write_text(json.dumps({"models": [{**GOOD_MODEL, "name": text, "family": text}]}))
    for args in [
        ("gpus", "list"),
        ("gpus", "show", "acme-x1"),
        ("offers", "list"),
        ("model", "show", "my-model"),
        ("model", "list"),
        ("gpus", "compare", "acme-x1", "h100"),
        ("train", "my-model", "--gpu", "acme-x1", "--tokens", "1B", "--rank"),
    ]:
        code, out, err = run(*args)
        assert code in (0, 3) and err == "", (args, err)
        if args[:2] != ("gpus", "compare"):
            assert text in out, (args, text, out)


# ----------------------------------------------------------------------------------- large catalogs


def test_a_2000_entry_catalog_lists_and_looks_up(run, tmp_path):
    n = 2000
    accs = [
        {
            **GOOD_ACC,
            "id": f"scale-{i}",
            "name": f"Scale {i}",
            "aliases": [f"s{i}", "scale-any"],
            "memory_bytes": 1_000_000_000 * (1 + i % 100),
        }
        for i in range(n)
    ]
    accs.append({**GOOD_ACC, "id": "h100-sxm-80gb", "name": "Overridden H100", "aliases": ["h100"]})
    f = tmp_path / "big.json"
    f.write_text(json.dumps({"accelerator": accs}))
    offers = tmp_path / "offers.json"
    offers.write_text(
        json.dumps({"offer": [{**GOOD_OFFER, "id": f"q{i}", "instance": f"box-{i}", "gpu": f"s{i}"} for i in range(n)]})
    )
    code, out, _err = run("--catalog", str(f), "gpus", "list", "--json")
    ids = [a["id"] for a in json.loads(out)["accelerators"]]
    assert code == 0 and len(ids) == len(set(ids)) and {f"scale-{i}" for i in range(n)} <= set(ids)
    code, out, _err = run("--catalog", str(f), "gpus", "list")
    assert code == 0 and out.count("scale-") >= n and "scale-1999" in out and "Overridden H100" in out
    assert (
        json.loads(run("--catalog", str(f), "gpus", "show", "S1234", "--json")[1])["accelerator"]["id"] == "scale-1234"
    )
    assert (
        json.loads(run("--catalog", str(f), "gpus", "show", "h100", "--json")[1])["accelerator"]["name"]
        == "Overridden H100"
    )
    line = one_error(*run("--catalog", str(f), "gpus", "show", "scale-any"), "could be any of")
    assert "scale-0, scale-1, scale-2" in line
    assert "did you mean 'scale-12'" in one_error(*run("--catalog", str(f), "gpus", "show", "scale-12x"))
    code, out, _err = run("--catalog", str(f), "--catalog", str(offers), "offers", "list", "--json")
    rows = json.loads(out)["offers"]
    assert code == 0 and len([o for o in rows if o["id"].startswith("q")]) == n
    assert {o["gpu"] for o in rows if o["id"] in ("q0", "q1999")} == {"scale-0", "scale-1999"}


# ------------------------------------------------------------------ output files (--plot, --save)

import os as _os  # noqa: E402
from pathlib import Path  # noqa: E402


@pytest.mark.parametrize("kind", ["fifo", "dir", "device", "no-folder"])
def test_output_file_must_be_a_regular_file(run, tmp_path, kind):
    """--plot into a FIFO, a directory, a device or a missing folder: one line, before any work, no hang."""
    target = {
        "fifo": tmp_path / "p",
        "dir": tmp_path,
        "device": Path("/dev/null"),
        "no-folder": tmp_path / "nope" / "x.html",
    }[kind]
    if kind == "fifo":
        _os.mkfifo(target)
    code, out, err = run("train", "llama-3.1-8b", "--gpu", "h100", "--tokens", "1T", "--rank", "--plot", str(target))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--plot" in err, err


def test_plot_is_written_whole(run, tmp_path):
    target = tmp_path / "rank.html"
    target.write_text("old")
    code, _, err = run("train", "llama-3.2-1b", "--gpu", "h100", "--tokens", "1T", "--rank", "--plot", str(target))
    assert code == 0, err
    assert target.read_text().lstrip().lower().startswith("<!doctype html")
    assert [p.name for p in tmp_path.iterdir()] == ["rank.html"]  # no temporary file left beside it
