"""Error bands (issue 13): the bundled table is current, calibrated under leave-one-source-out, and every
predicted time, throughput, GPU-hours and cost of ``train`` / ``serve`` carries ``*_p10`` / ``*_p90``."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest

from gpuplan import api
from gpuplan.plan import bands

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "build_bands.py"

TRAIN = dict(model="llama-3.1-8b", gpu="h100-sxm-80gb", gpus=64, tokens="1T", usd_per_gpu_hour=2.0)
SERVE = dict(model="llama-3.1-8b", gpu="h100-sxm-80gb", usd_per_gpu_hour=2.0)


def _builder():
    spec = importlib.util.spec_from_file_location("build_bands", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def validated():
    """One validate run (a few seconds) shared by the calibration tests."""
    return api.validate()


def _close(a, b, path="") -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), path
        assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-9), f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def test_bundled_table_is_current(validated):
    """Re-running scripts/build_bands.py gives the bundled file (within float tolerance): a model change that
    forgets to rebuild fails here. Fix: python scripts/build_bands.py."""
    bundled = json.loads(_builder().PATH.read_text(encoding="utf-8"))
    fresh = json.loads(json.dumps(bands.build_table(validated.rows)))
    _close(fresh, bundled, "bands.json")


@pytest.mark.parametrize("category", ["training", "inference"])
def test_bands_are_calibrated_leave_one_source_out(validated, category):
    """75-85 % of the bundled values fall inside their own band when the band is built from the other
    sources only; validate reports it (training and inference separately)."""
    cov = validated.to_dict()["bands"]["coverage"][category]
    loso, inside = cov["loso"], cov["in_sample"]
    assert loso["count"] >= 50
    assert 0.75 <= loso["coverage"] <= 0.85, loso
    assert inside["coverage"] >= loso["coverage"]


def test_every_band_is_ordered_and_traced():
    table = json.loads(_builder().PATH.read_text(encoding="utf-8"))
    assert table["families"].keys() == set(bands.FAMILIES)
    for family, entries in table["families"].items():
        assert "*/*/*/*" in entries, family  # the last pooling level always exists
        for key, e in entries.items():
            assert 0 < e["ratio_p10"] <= e["ratio_p50"] <= e["ratio_p90"], (family, key)
            assert key == "*/*/*/*" or (e["residuals"] >= bands.MIN_RESIDUALS and e["sources"] >= bands.MIN_SOURCES)
    assert {r["family"] for r in table["residuals"]} == set(bands.FAMILIES)


def test_pooling_falls_back_to_a_coarser_class():
    cls = {"gpu_generation": "hopper", "precision": "bf16", "stack": "megatron", "architecture": "dense"}
    few = [bands.Residual(f"a{i}", f"s{i % 3}", "training", "training_throughput", 1.0, cls) for i in range(3)]
    other = dict(cls, stack="fsdp2", gpu_generation="ampere")
    many = [
        bands.Residual(f"b{i}", f"s{i % 4}", "training", "training_throughput", 0.5 + i / 20, other) for i in range(12)
    ]
    key, band = bands.pick(few + many, "training_throughput", cls)
    assert key == "*/*/*/dense" and band["residuals"] == 15  # 3 in the class: too few
    key, band = bands.pick(few + many, "training_throughput", other)
    assert key == "ampere/bf16/fsdp2/dense" and band["residuals"] == 12
    assert band["ratio_p10"] < band["ratio_p50"] < band["ratio_p90"]


def test_coverage_is_out_of_sample():
    """A source that disagrees with every other one is outside its leave-one-source-out band."""
    cls = {"gpu_generation": "hopper", "precision": "bf16", "stack": "megatron", "architecture": "dense"}
    res = [bands.Residual(f"r{i}", f"s{i % 5}", "training", "training_throughput", 1 + i / 100, cls) for i in range(20)]
    res += [bands.Residual(f"x{i}", "outlier", "training", "training_throughput", 3.0, cls) for i in range(2)]
    cov = bands.coverage(res)["training"]
    assert cov["loso"]["covered"] <= 20 and cov["loso"]["count"] == 22


def _assert_banded(block: dict, keys: tuple[str, ...]) -> None:
    order = list(block)
    for k in keys:
        lo, hi = block[f"{k}_p10"], block[f"{k}_p90"]
        assert order.index(f"{k}_p10") == order.index(k) + 1 and order.index(f"{k}_p90") == order.index(k) + 2
        assert lo is not None and hi is not None and 0 < lo <= hi, (k, lo, hi)
    assert isinstance(block["band_class"], str) and block["band_class"].count("/") == 3


def _suffix_keys_have_a_value(record) -> None:
    """``_p10`` / ``_p90`` mean error bands only: each sits beside its value, in pairs."""
    if isinstance(record, dict):
        for k in record:
            if k.endswith(("_p10", "_p90")):
                base = k[:-4]
                assert base in record and f"{base}_p10" in record and f"{base}_p90" in record, k
            _suffix_keys_have_a_value(record[k])
    elif isinstance(record, list):
        for x in record:
            _suffix_keys_have_a_value(x)


def test_train_record_carries_bands():
    d = api.train(**TRAIN).to_dict()
    _assert_banded(d["time"], ("step_s", "seconds", "gpu_hours", "tokens_per_s", "mfu"))
    _assert_banded(d["cost"], ("usd",))
    t = d["time"]
    # time moves against throughput: the slow end of time is the low end of throughput
    assert math.isclose(t["seconds_p90"] / t["seconds"], t["tokens_per_s"] / t["tokens_per_s_p10"], rel_tol=1e-9)
    assert t["mfu_p90"] <= 1
    fam = d["bands"]["families"]["training_throughput"]
    assert fam["band_class"] == t["band_class"] and fam["residuals"] >= bands.MIN_RESIDUALS
    _suffix_keys_have_a_value(d)


def test_serve_record_carries_bands():
    d = api.serve(**SERVE).to_dict()
    lat = d["latency"]
    for k in ("ttft_s", "tpot_s", "request_latency_s"):
        assert 0 < lat[f"{k}_p10"] <= lat[f"{k}_p90"]
    assert lat["ttft_band_class"] and lat["tpot_band_class"]
    _assert_banded(d["throughput"], ("tokens_per_s", "requests_per_s", "tokens_per_s_per_gpu"))
    _assert_banded(d["cost"], ("usd_per_million_output_tokens", "usd_per_million_input_tokens"))
    assert set(d["bands"]["families"]) == {"ttft", "tpot", "serving_throughput"}
    _suffix_keys_have_a_value(d)


def test_a_given_mfu_gets_no_band():
    d = api.train(**TRAIN, mfu=0.4).to_dict()
    assert d["time"]["seconds_p10"] is None and d["time"]["seconds_p90"] is None and d["cost"]["usd_p10"] is None
    assert "--mfu" in d["bands"]["note"]


def test_band_class_follows_the_estimate():
    d = api.train(**{**TRAIN, "gpu": "a100-sxm-80gb"}, fsdp=True).to_dict()
    cls = d["time"]["band_class"]
    # the class pooled for an FSDP2 run on A100 keeps its stack or pools to dense/MoE, never another stack
    assert cls.split("/")[2] in ("fsdp2", "*") and cls.endswith("/dense")


def test_tables_show_value_and_band(run):
    code, out, err = run(
        "train",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--gpus",
        "64",
        "--zero",
        "1",
        "--tokens",
        "1T",
        "--usd-per-gpu-hour",
        "2",
    )
    assert code == 0, err
    flat = " ".join(out.split())
    assert re.search(r"time to train \d+\.\d days \(\d+\.\d-\d+\.\d\)", flat), flat
    assert re.search(r"cost \$[\d,]+ \(\$[\d,]+-\$[\d,]+\)", flat)
    assert "error bands" in flat
    code, out, err = run("serve", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--usd-per-gpu-hour", "2")
    assert code == 0, err
    assert re.search(r"[\d.]+ ms \([\d.]+-[\d.]+\)", out)


def test_validate_table_reports_coverage(validated):
    from rich.console import Console

    from gpuplan.render.tables import validate_report

    console = Console(width=200, record=True)
    console.print(validate_report(validated.to_dict()))
    text = console.export_text()
    assert re.search(r"training: [\d.]+% in sample, [\d.]+% leave-one-source-out", text)
    assert re.search(r"inference: [\d.]+% in sample, [\d.]+% leave-one-source-out", text)
