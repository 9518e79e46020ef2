"""The CLI: every command, its --json contract, and every error path (one line, exit 2, no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FIXTURES

ACC_KEYS = {
    "id",
    "name",
    "memory_bytes",
    "memory_bandwidth_bytes_per_s",
    "peak_flops_per_s",
    "interconnect",
    "tdp_w",
    "sources",
}
MODEL_KEYS = {
    "id",
    "params",
    "active_params",
    "layers",
    "hidden_size",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "ffn_size",
    "vocab_size",
    "experts",
    "experts_per_token",
    "breakdown",
    "flops_per_token",
}


def one_line_error(code, out, err):
    assert code == 2, (code, out, err)
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuplan: error: "), err
    return lines[0]


# ------------------------------------------------------------------------------------------ start-up


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys; from gpuplan.cli.main import main; rc = main(['--help']); "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'numpy', 'torch', 'rich', 'pydantic', 'huggingface_hub', 'fastapi', 'transformers'}); "
        "print('HEAVY', heavy, rc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY [] 0" in out, out


def test_python_dash_m_and_version():
    out = subprocess.run([sys.executable, "-m", "gpuplan", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "gpuplan" in out.stdout


# --------------------------------------------------------------------------------------------- gpus


def test_gpus_list_table(run):
    code, out, err = run("gpus", "list")
    assert code == 0, err
    assert "h100-sxm-80gb" in out and "TFLOP/s" in out and "GB = 1e9 bytes" in out and "Dense peaks" in out


def test_gpus_list_json_contract(run):
    _code, out, _ = run("gpus", "list", "--json")
    rec = json.loads(out)
    assert rec["schema_version"] == 1 and rec["kind"] == "gpus.list"
    assert len(rec["accelerators"]) >= 40
    for a in rec["accelerators"]:
        assert set(a) >= ACC_KEYS, a["id"]
        assert set(a["peak_flops_per_s"]) >= {"fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"}
        assert isinstance(a["memory_bytes"], int)


def test_gpus_list_filters_and_sort(run):
    rec = json.loads(run("gpus", "list", "--vendor", "AMD", "--json")[1])
    assert rec["accelerators"] and {a["vendor"] for a in rec["accelerators"]} == {"amd"}
    rec = json.loads(run("gpus", "list", "--min-memory", "141GB", "--json")[1])
    assert rec["accelerators"] and all(a["memory_bytes"] >= 141e9 for a in rec["accelerators"])
    assert "h100-sxm-80gb" not in {a["id"] for a in rec["accelerators"]}
    rec = json.loads(run("gpus", "list", "--dtype", "fp8", "--json")[1])
    ids = {a["id"] for a in rec["accelerators"]}
    assert "h100-sxm-80gb" in ids and "a100-sxm-80gb" not in ids
    rec = json.loads(run("gpus", "list", "--sort", "memory", "--json")[1])
    mem = [a["memory_bytes"] for a in rec["accelerators"]]
    assert mem == sorted(mem, reverse=True)
    rec = json.loads(run("gpus", "list", "--min-memory", "80GiB", "--json")[1])
    assert all(a["memory_bytes"] >= 80 * 2**30 for a in rec["accelerators"])
    assert "a100-sxm-80gb" not in {a["id"] for a in rec["accelerators"]}  # 80 GB < 80 GiB


def test_gpus_show_has_a_source_for_every_figure(run):
    code, out, _ = run("gpus", "show", "h100-sxm-80gb", "--json")
    a = json.loads(out)["accelerator"]
    assert a["peak_flops_per_s"]["bf16"] == 989.5e12
    for key in ("memory_bytes", "memory_bandwidth_bytes_per_s", "peak_flops_per_s.bf16", "tdp_w"):
        assert a["sources"][key]["url"].startswith("http") and a["sources"][key]["date"]
    code, out, _ = run("gpus", "show", "h100-sxm-80gb")
    assert code == 0 and "bf16 dense peak" in out and "989.5" in out and "source" in out


def test_alias_resolves_and_ambiguous_alias_lists_choices(run):
    assert json.loads(run("gpus", "show", "H100", "--json")[1])["accelerator"]["id"] == "h100-sxm-80gb"
    line = one_line_error(*run("gpus", "show", "a100"))
    assert "a100-sxm-40gb" in line and "a100-sxm-80gb" in line


def test_unknown_gpu_suggests(run):
    line = one_line_error(*run("gpus", "show", "h100-sxm-8gb"))
    assert "unknown accelerator 'h100-sxm-8gb'" in line and "h100-sxm-80gb" in line and "gpus list" in line


def test_gpus_compare(run):
    code, out, _ = run("gpus", "compare", "a100-sxm-80gb", "h100-sxm-80gb", "--json")
    rec = json.loads(out)
    assert [a["id"] for a in rec["accelerators"]] == ["a100-sxm-80gb", "h100-sxm-80gb"]
    code, out, _ = run("gpus", "compare", "a100-sxm-80gb", "h100-sxm-80gb")
    assert code == 0 and "a100-sxm-80gb" in out and "bf16 dense peak" in out


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("gpus", "list", "--min-memory", "-5GB"), "zero or more"),
        (("gpus", "list", "--min-memory", "lots"), "80GiB"),
        (("gpus", "list", "--dtype", "fp12"), "fp8"),
        (("gpus", "list", "--vendor", "acme"), "nvidia"),
        (("gpus", "list", "--sort", "speed"), "speed"),
        (("gpus", "list", "--bogus"), "--bogus"),
        (("gpus", "compare"), "GPUS"),
        (("gpus", "frobnicate"), "frobnicate"),
    ],
)
def test_gpus_bad_input(run, args, fragment):
    assert fragment in one_line_error(*run(*args))


# -------------------------------------------------------------------------------------- user catalogs

GOOD_ACC = """
schema_version = 1
[[accelerator]]
id = "acme-x1"
name = "Acme X1"
vendor = "other"
architecture = "Roadrunner"
form_factor = "PCIe"
year = 2026
aliases = ["x1"]
memory_bytes = 64_000_000_000
memory_type = "HBM3"
memory_bandwidth_bytes_per_s = 2.0e12
tdp_w = 500
[accelerator.peak_flops_per_s]
bf16 = 500e12
[accelerator.sources.default]
title = "Acme X1 datasheet"
url = "https://example.com/x1.pdf"
date = "2026-01"
"""


def test_catalog_file_adds_an_accelerator(run, tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(GOOD_ACC)
    rec = json.loads(run("--catalog", str(f), "gpus", "show", "x1", "--json")[1])
    assert rec["accelerator"]["id"] == "acme-x1" and rec["accelerator"]["origin"] == str(f)


def test_catalog_file_overrides_a_builtin(run, tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(GOOD_ACC.replace('id = "acme-x1"', 'id = "h100-sxm-80gb"').replace('aliases = ["x1"]', ""))
    rec = json.loads(run("--catalog", str(f), "gpus", "show", "h100-sxm-80gb", "--json")[1])
    assert rec["accelerator"]["name"] == "Acme X1"


def test_user_config_dir_is_read(run, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(tmp_path))
    (tmp_path / "accelerators.toml").write_text(GOOD_ACC)
    assert json.loads(run("gpus", "show", "acme-x1", "--json")[1])["accelerator"]["name"] == "Acme X1"


@pytest.mark.parametrize(
    "mutate,fragments",
    [
        (
            lambda s: s.replace("memory_bytes = 64_000_000_000", "memory_bytes = -1"),
            ["mine.toml", "accelerator 'acme-x1'", "memory_bytes", "greater than 0"],
        ),
        (lambda s: s.replace('vendor = "other"', 'vendor = "acme"'), ["accelerator 'acme-x1'", "vendor"]),
        (lambda s: s.replace("tdp_w = 500", "tdpw = 500"), ["accelerator 'acme-x1'", "tdpw", "unknown field"]),
        (lambda s: s.replace('memory_type = "HBM3"\n', ""), ["accelerator 'acme-x1'", "memory_type", "missing"]),
        (lambda s: s.replace("[accelerator.sources.default]", "[accelerator.sources.other]"), ["default"]),
        (lambda s: s.replace("bf16 = 500e12", "bf17 = 500e12"), ["peak_flops_per_s"]),
        (lambda s: s.replace('id = "acme-x1"', 'id = "Acme X1"'), ["field 'id'"]),
        (lambda s: s + "\n[[accelerator]\n", ["not valid TOML"]),
        (lambda s: s + s.replace("schema_version = 1", ""), ["appears twice"]),
    ],
)
def test_bad_catalog_file_names_file_entry_field(run, tmp_path, mutate, fragments):
    f = tmp_path / "mine.toml"
    f.write_text(mutate(GOOD_ACC))
    line = one_line_error(*run("--catalog", str(f), "gpus", "list"))
    for frag in fragments:
        assert frag in line, (frag, line)


def test_catalog_file_errors(run, tmp_path):
    assert "can't read" in one_line_error(*run("--catalog", str(tmp_path / "missing.toml"), "gpus", "list"))
    f = tmp_path / "x.json"
    f.write_text('{"hello": 1}')
    assert "not a gpuplan catalog" in one_line_error(*run("--catalog", str(f), "gpus", "list"))


def test_catalog_file_adds_a_model(run, tmp_path):
    cfg = json.loads((FIXTURES / "configs" / "llama-gqa.json").read_text())
    f = tmp_path / "models.json"
    f.write_text(json.dumps({"schema_version": 1, "models": [{"id": "tiny-llama", "name": "Tiny", "config": cfg}]}))
    rec = json.loads(run("--catalog", str(f), "model", "show", "tiny-llama", "--json")[1])
    assert rec["model"]["params"] == 220608  # transformers' count for this config (test_params_exact)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": [{"id": "t", "name": "T", "config": {"model_type": "llama"}}]}))
    line = one_line_error(*run("--catalog", str(bad), "model", "list"))
    assert "model 't'" in line and "hidden_size" in line


# -------------------------------------------------------------------------------------------- model


def test_model_list(run):
    code, out, _err = run("model", "list")
    assert code == 0 and "llama-3.1-405b" in out and "deepseek-v3" in out
    rec = json.loads(run("model", "list", "--json")[1])
    assert len(rec["models"]) >= 30
    rec = json.loads(run("model", "list", "--family", "qwen", "--json")[1])
    assert rec["models"] and all(m["family"] == "qwen" for m in rec["models"])
    assert "llama" in one_line_error(*run("model", "list", "--family", "nope"))


def test_model_show_json_contract(run):
    rec = json.loads(run("model", "show", "mixtral-8x7b", "--json")[1])
    m = rec["model"]
    assert rec["kind"] == "model.show" and set(m) >= MODEL_KEYS
    assert m["params"] == 46_702_792_704 and m["experts"] == 8 and m["experts_per_token"] == 2
    assert sum(m["breakdown"].values()) == m["params"]
    assert 12.8e9 < m["active_params"] < 13.0e9  # "12.9B active" (Mistral AI)
    assert m["flops_per_token"]["training"] == pytest.approx(3 * m["flops_per_token"]["inference"])


def test_model_show_table(run):
    code, out, _ = run("model", "show", "deepseek-v3")
    assert code == 0
    for frag in (
        "671,026,404,352",
        "MLA",
        "256 routed (8 per token)",
        "parameters by component",
        "shared_experts",
        "FLOPs per token at sequence length 4,096",
    ):
        assert frag in out, frag


def test_model_show_by_hub_alias_and_seq_len(run):
    rec = json.loads(run("model", "show", "meta-llama/Llama-3.1-8B", "--seq-len", "8192", "--json")[1])
    assert rec["model"]["id"] == "llama-3.1-8b" and rec["model"]["flops_per_token"]["seq_len"] == 8192


def test_model_show_config_file_and_folder(run, tmp_path):
    src = FIXTURES / "configs" / "qwen3-moe.json"
    rec = json.loads(run("model", "show", str(src), "--json")[1])
    assert rec["model"]["params"] == 234016 and rec["model"]["experts"] == 8
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(src.read_text())
    rec = json.loads(run("model", "show", str(folder), "--json")[1])
    assert rec["model"]["id"] == "my-model" and rec["model"]["params"] == 234016


def test_model_show_bare_count(run):
    rec = json.loads(run("model", "show", "7.5B", "--json")[1])
    m = rec["model"]
    assert m["params"] == 7_500_000_000 and m["architecture_known"] is False
    assert m["flops_per_token"]["training"] == 6 * 7.5e9
    code, out, _ = run("model", "show", "7.5B")
    assert code == 0 and "needs an architecture" in out


def test_model_bad_input(run, tmp_path):
    line = one_line_error(*run("model", "show", "llama-3.1-8"))
    assert "unknown model" in line and "llama-3.1-8b" in line
    assert "no such file" in one_line_error(*run("model", "show", str(tmp_path / "nope.json")))
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    assert "not valid JSON" in one_line_error(*run("model", "show", str(bad)))
    bad.write_text(json.dumps({"model_type": "t5", "d_model": 512}))
    assert "model_type 't5' is not supported" in one_line_error(*run("model", "show", str(bad)))
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    assert "missing field 'num_attention_heads'" in one_line_error(*run("model", "show", str(bad)))
    (tmp_path / "empty").mkdir()
    assert "folder has no config.json" in one_line_error(*run("model", "show", str(tmp_path / "empty")))
    assert "--seq-len" in one_line_error(*run("model", "show", "gpt2", "--seq-len", "0"))


def test_model_hub_offline_is_one_line(run):
    line = one_line_error(*run("model", "show", "some-org/some-model"))
    assert "Hugging Face Hub" in line and "config.json" in line
    line = one_line_error(*run("model", "show", "some-org/some-model", "--offline"))
    assert "unknown model 'some-org/some-model'" in line


def test_lazy_command_table_matches_the_commands():
    """--help lists the commands from a static table (no command module imported); each line there must say
    what the command's own docstring says, and every command in the table must load."""
    import click

    from gpuplan.cli.main import COMMANDS, cli, short_help

    ctx = click.Context(cli)
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        assert cmd is not None and cmd.name == name
        for limit in (45, 80, 200):
            assert short_help(name, limit) == cmd.get_short_help_str(limit), name


def test_help_imports_no_command_module():
    import subprocess
    import sys

    code = (
        "import sys; from gpuplan.cli.main import main; rc = main(['--help']); "
        "print(sorted(m for m in sys.modules if m.startswith('gpuplan.cli.') and m not in "
        "('gpuplan.cli.main', 'gpuplan.cli._common')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip().splitlines()[-1] == "[]"
