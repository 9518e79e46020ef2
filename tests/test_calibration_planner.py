"""What `train`/`serve --calibration FILE` take from a profile, and how they say so (JSON and table).

Profiles are written by hand following the `local bench --save` contract: matmul results named "matmul
<dtype>" with detail {device, dtype, median_tflops, best_shape_mnk | model_shapes (+ model)}, "memory copy",
collectives "<op> <size>" with detail {op, ranks, nodes, bytes, algbw_bytes_per_s, busbw_bytes_per_s}.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpuplan.errors import CatalogError
from gpuplan.local.calibration import apply_to_step, cite, read_profile
from test_cli import one_line_error

GPU = {"name": "NVIDIA H100 80GB HBM3", "catalog_id": "h100-sxm-80gb", "index": 0}
CREATED = "2025-06-01T12:00:00+0000"
MODEL = "llama-3.1-8b"
TRAIN = ["train", MODEL, "--gpu", "h100", "--gpus", "8", "--zero", "1", "--tokens", "1T"]
SERVE = ["serve", MODEL, "--gpu", "h100", "--tp", "2"]


def matmul(dtype: str, value: float, datasheet: float, *, model: str | None = None, cpu: bool = False) -> dict:
    detail = {"device": "cpu" if cpu else "cuda", "dtype": dtype, "median_tflops": value * 0.98}
    if model:
        detail.update(model=model, model_shapes=[[4096, 4096, 4096, 2], [4096, 14336, 4096, 3]])
    else:
        detail["best_shape_mnk"] = [8192, 8192, 8192]
    return {
        "name": f"matmul {dtype}" + (" (cpu)" if cpu else ""),
        "value": value,
        "unit": "TFLOP/s",
        "datasheet": None if cpu else datasheet,
        "detail": detail,
        "seconds": 30.0,
        "fraction_of_datasheet": None if cpu else value / datasheet,
    }


def memory(value: float = 2900.0, cpu: bool = False) -> dict:
    return {
        "name": "memory copy" + (" (cpu)" if cpu else ""),
        "value": value,
        "unit": "GB/s (read + write)",
        "datasheet": None if cpu else 3350.0,
        "detail": {"device": "cpu" if cpu else "cuda", "bytes": 2**30},
        "seconds": 5.0,
        "fraction_of_datasheet": None if cpu else value / 3350.0,
    }


def collective(op: str, mib: int, busbw_gbps: float, ranks: int = 8, nodes: int = 1) -> dict:
    size = mib * 2**20
    frac = busbw_gbps / 450.0 if nodes == 1 and ranks >= 2 else None
    return {
        "name": f"{op} {mib} MiB",
        "value": busbw_gbps,
        "unit": "GB/s bus bandwidth",
        "datasheet": 450.0 if frac else None,
        "seconds": 2.0,
        "fraction_of_datasheet": frac,
        "detail": {
            "op": op,
            "ranks": ranks,
            "nodes": nodes,
            "bytes": size,
            "device": "cuda",
            "algbw_bytes_per_s": busbw_gbps * 1e9 * ranks / (2 * (ranks - 1)) if ranks > 1 else 0.0,
            "busbw_bytes_per_s": busbw_gbps * 1e9,
        },
    }


def write(tmp_path, results, gpu=GPU, name="cal.json"):
    f = tmp_path / name
    f.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "kind": "calibration",
                "created": CREATED,
                "host": {},
                "gpu": gpu,
                "versions": {},
                "python": "3.11",
                "results": results,
            }
        )
    )
    return f


def run_both(run, args, f):
    """(JSON record, text table) of one command with --calibration f."""
    code, out, err = run(*args, "--calibration", str(f), "--json")
    rec = json.loads(out)
    expected = 0 if rec["memory"]["fits"] else 3  # a plan that does not fit still reports, with exit 3
    assert code == expected, err
    code, text, err = run(*args, "--calibration", str(f))
    assert code == expected, err
    return rec, " ".join(text.split())  # the table wraps lines: compare on words


def source(record, name):
    return next(a["source"] for a in record["assumptions"] if a["name"] == name)


def value(record, name):
    return next(a["value"] for a in record["assumptions"] if a["name"] == name)


def cited(f, measured: str, fraction: float) -> str:
    return f"calibration {f}: measured {measured} = {fraction:.1%} of datasheet on NVIDIA H100 80GB HBM3 ({CREATED})"


# ------------------------------------------------------------------------- 1. --assume wins; sources cite the profile


def test_explicit_assume_wins_over_the_profile(tmp_path, run):
    f = write(tmp_path, [matmul("bf16", 700.0, 989.5), memory()])
    rec, text = run_both(run, [*TRAIN, "--assume", "matmul_efficiency=0.3"], f)
    assert rec["time"]["matmul_efficiency"] == 0.3
    assert rec["time"]["matmul_efficiency_source"].startswith("--assume matmul_efficiency=0.3 (overrides calibration")
    assert source(rec, "matmul_efficiency").startswith("--assume matmul_efficiency=0.3")
    assert any(
        o.startswith("--assume overrides the calibration for matmul_efficiency")
        for o in rec["calibration"]["overridden"]
    )
    assert not any("matmul_efficiency" in r for r in rec["calibration"]["replaced"])
    assert f"calibration {f}: --assume overrides the calibration for matmul_efficiency" in text
    # what was not overridden is still taken, and cites the profile, not the literature
    assert value(rec, "hbm_efficiency") == pytest.approx(2900 / 3350)
    assert source(rec, "hbm_efficiency").startswith(cited(f, "2,900 GB/s (read + write)", 2900 / 3350))
    assert "gpt-fast" not in source(rec, "hbm_efficiency")


def test_every_figure_from_the_profile_cites_it(tmp_path, run):
    f = write(tmp_path, [matmul("bf16", 700.0, 989.5), memory(), collective("all_reduce", 256, 360.0)])
    rec, text = run_both(run, TRAIN, f)
    for name in ("matmul_efficiency", "hbm_efficiency", "link_efficiency"):
        assert source(rec, name).startswith(f"calibration {f}: measured "), name
    assert rec["time"]["matmul_efficiency_source"] == source(rec, "matmul_efficiency")
    assert source(rec, "matmul_efficiency").startswith(cited(f, "700 TFLOP/s", 700 / 989.5))
    assert "--assume" not in rec["time"]["matmul_efficiency_source"]
    assert f"matmul efficiency {rec['time']['matmul_efficiency']:.1%}: calibration {f}: measured 700 TFLOP/s" in text
    assert f"calibration {f} (measured on NVIDIA H100 80GB HBM3, {CREATED}):" in text
    srv, stext = run_both(run, SERVE, f)
    assert value(srv, "memory_bandwidth_efficiency") == pytest.approx(2900 / 3350)
    assert source(srv, "memory_bandwidth_efficiency").startswith(cited(f, "2,900 GB/s (read + write)", 2900 / 3350))
    assert "memory_bandwidth_efficiency = 0.866" in stext
    assert any("memory bandwidth" in r for r in srv["calibration"]["replaced"])


def test_serve_assume_overrides_the_memory_figure(tmp_path, run):
    f = write(tmp_path, [memory()])
    rec, text = run_both(run, [*SERVE, "--assume", "memory_bandwidth_efficiency=0.7"], f)
    assert value(rec, "memory_bandwidth_efficiency") == 0.7
    assert source(rec, "memory_bandwidth_efficiency").startswith("--assume memory_bandwidth_efficiency=0.7")
    assert "--assume overrides the calibration for memory_bandwidth_efficiency" in text
    assert rec["calibration"]["replaced"] == [] and rec["calibration"]["nothing_applicable"] is None


def test_sources_survive_the_offer_network_replacement(tmp_path, run):
    f = write(tmp_path, [matmul("bf16", 700.0, 989.5), memory()])
    rec, _ = run_both(run, [*TRAIN, "--offer", "lambda-gpu_8x_h100_sxm5-us-east-1-ondemand"], f)
    assert source(rec, "hbm_efficiency").startswith(f"calibration {f}: measured ")


def test_cite_keeps_its_sources_through_replace():
    from gpuplan.estimate.steptime import StepAssumptions

    a = cite(replace(StepAssumptions(), hbm_efficiency=0.9), {"hbm_efficiency": "measured here"})
    b = replace(a, gpus_per_node=4)
    assert isinstance(b, StepAssumptions) and b.hbm_efficiency == 0.9 and b.gpus_per_node == 4
    items = {x.name: x for x in b.items()}
    assert items["hbm_efficiency"].source == "measured here"
    assert items["hbm_efficiency"].unit == StepAssumptions.SOURCES["hbm_efficiency"][0]
    assert items["link_efficiency"].source == StepAssumptions.SOURCES["link_efficiency"][1]
    assert StepAssumptions.SOURCES["hbm_efficiency"][1] != "measured here"  # the class itself is untouched


# ------------------------------------------------------------------------- 2. the dtype of the plan's matmuls


def test_bf16_measurement_is_not_applied_to_fp8_or_fp32(tmp_path, run):
    f = write(tmp_path, [matmul("bf16", 700.0, 989.5)])
    for precision, dtype in (("fp8-mixed", "fp8"), ("fp32", "tf32")):
        args = [*TRAIN, "--precision", precision]
        plain = json.loads(run(*args, "--json")[1])
        rec, text = run_both(run, args, f)
        assert rec["time"]["matmul_efficiency"] == plain["time"]["matmul_efficiency"]
        assert rec["time"]["matmul_efficiency_source"] == plain["time"]["matmul_efficiency_source"]
        note = f"calibration has no {dtype} matmul measurement"
        assert any(n.startswith(note) for n in rec["notes"]) and note in text
        assert {"result": "matmul bf16", "why": f"measured in bf16; the plan's matmuls run in {dtype}"} in rec[
            "calibration"
        ]["not_applied"]
        assert f"matmul bf16 (measured in bf16; the plan's matmuls run in {dtype})" in text
        assert rec["calibration"]["nothing_applicable"] == "no result measures what the plan assumes"
        assert f"calibration {f}: nothing applicable (no result measures what the plan assumes)" in text


def test_the_matmul_of_the_plans_dtype_is_used(tmp_path, run):
    f = write(tmp_path, [matmul("bf16", 700.0, 989.5), matmul("fp8", 1300.0, 1979.0), matmul("tf32", 370.0, 494.5)])
    rec, text = run_both(run, [*TRAIN, "--precision", "fp8-mixed"], f)
    assert rec["time"]["matmul_efficiency"] == pytest.approx(1300 / 1979 * 0.77)
    assert (
        "matmul fp8 on the best GEMM shape found, x model_shape_factor 0.77" in rec["time"]["matmul_efficiency_source"]
    )
    assert [x["result"] for x in rec["calibration"]["not_applied"]] == ["matmul bf16", "matmul tf32"]
    rec, _ = run_both(run, [*TRAIN, "--precision", "fp32"], f)
    assert rec["time"]["matmul_efficiency"] == pytest.approx(370 / 494.5 * 0.77)
    rec, text = run_both(run, [*SERVE, "--weights", "fp8"], f)  # serving fp8 weights: fp8 matmuls
    assert value(rec, "compute_efficiency") == pytest.approx(1300 / 1979 * 0.77)
    assert "compute_efficiency = 0.506: matmul fp8 on the best GEMM shape found" in text
    rec, _ = run_both(run, [*SERVE, "--weights", "int4-awq"], f)  # dequantized into bf16 matmuls
    assert value(rec, "compute_efficiency") == pytest.approx(700 / 989.5 * 0.77)


# ------------------------------------------------------------------------- 3. the model's own GEMM shapes


def test_model_shapes_are_used_as_is_only_for_the_same_model(tmp_path, run):
    own = write(tmp_path, [matmul("bf16", 650.0, 989.5, model=MODEL)], name="own.json")
    rec, text = run_both(run, TRAIN, own)
    assert rec["time"]["matmul_efficiency"] == pytest.approx(650 / 989.5)
    assert (
        f"matmul bf16 on {MODEL}'s own GEMM shapes, used as is (no model_shape_factor)"
        in rec["time"]["matmul_efficiency_source"]
    )
    assert f"matmul_efficiency = 0.657: matmul bf16 on {MODEL}'s own GEMM shapes" in text

    other = write(tmp_path, [matmul("bf16", 650.0, 989.5, model="llama-3.2-1b")], name="other.json")
    rec, text = run_both(run, TRAIN, other)
    assert rec["time"]["matmul_efficiency"] == pytest.approx(650 / 989.5 * 0.77)
    assert f"on llama-3.2-1b's GEMM shapes, not {MODEL}'s, x model_shape_factor 0.77" in source(
        rec, "matmul_efficiency"
    )
    assert f"not {MODEL}'s, x model_shape_factor 0.77" in text

    old = matmul("bf16", 650.0, 989.5, model=MODEL)
    del old["detail"]["model"]  # an older profile: the shapes, but not whose
    rec, _ = run_both(run, TRAIN, write(tmp_path, [old], name="old.json"))
    assert rec["time"]["matmul_efficiency"] == pytest.approx(650 / 989.5 * 0.77)
    assert "unnamed model" in source(rec, "matmul_efficiency")


def test_own_shapes_preferred_over_the_best_shape(tmp_path, run):
    f = write(tmp_path, [matmul("bf16", 780.0, 989.5), matmul("bf16", 650.0, 989.5, model=MODEL)])
    rec, _ = run_both(run, TRAIN, f)
    assert rec["time"]["matmul_efficiency"] == pytest.approx(650 / 989.5)
    assert rec["calibration"]["not_applied"][0]["why"].startswith(
        f"measured on the best GEMM shape found; the bf16 result on {MODEL}'s GEMM shapes is used"
    )


def test_older_profile_names_still_work(tmp_path, run):
    """Profiles written before the detail fields: 'matmul bf16' and 'memory copy' with empty details."""
    f = write(
        tmp_path,
        [
            {
                "name": "matmul bf16",
                "value": 794.5,
                "unit": "TFLOP/s",
                "datasheet": 989.5,
                "fraction_of_datasheet": 794.5 / 989.5,
                "detail": {},
                "seconds": 60,
            },
            {
                "name": "memory copy",
                "value": 2900,
                "unit": "GB/s (read + write)",
                "datasheet": 3350,
                "fraction_of_datasheet": 2900 / 3350,
                "seconds": 5,
            },
        ],
    )
    rec, _ = run_both(run, TRAIN, f)
    assert rec["time"]["matmul_efficiency"] == pytest.approx(794.5 / 989.5 * 0.77)
    assert value(rec, "hbm_efficiency") == pytest.approx(2900 / 3350)


# ------------------------------------------------------------------------- 4. collectives, serve's compute efficiency


def test_all_reduce_sets_link_efficiency_at_the_largest_payload(tmp_path, run):
    f = write(
        tmp_path,
        [
            collective("all_reduce", 16, 300.0),
            collective("all_reduce", 256, 360.0),
            collective("all_reduce", 1, 100.0),
            collective("all_gather", 256, 350.0),
            collective("reduce_scatter", 256, 340.0),
            collective("all_reduce", 1024, 200.0, nodes=2),
        ],
    )
    for args, default in ((TRAIN, 0.77), (SERVE, 0.75)):
        plain = json.loads(run(*args, "--json")[1])
        assert value(plain, "link_efficiency") == default
        rec, text = run_both(run, args, f)
        assert value(rec, "link_efficiency") == pytest.approx(360 / 450)
        assert source(rec, "link_efficiency").startswith(
            cited(f, "360 GB/s bus bandwidth", 0.8) + "; all_reduce 256 MiB"
        )
        assert "link_efficiency = 0.8: all_reduce 256 MiB" in text
        why = {x["result"]: x["why"] for x in rec["calibration"]["not_applied"]}
        assert (
            why["all_reduce 16 MiB"]
            == why["all_reduce 1 MiB"]
            == "a smaller payload than all_reduce 256 MiB, which is used"
        )
        assert (
            why["all_gather 256 MiB"]
            == why["reduce_scatter 256 MiB"]
            == "the planner times its collectives as all-reduces"
        )
        assert why["all_reduce 1024 MiB"] == "no fraction of a datasheet figure"  # two nodes: the bench sets none
        assert "all_gather 256 MiB, reduce_scatter 256 MiB (the planner times its collectives as all-reduces)" in text


def test_all_reduce_on_one_rank_or_across_nodes_is_not_applied(tmp_path, run):
    one = collective("all_reduce", 256, 100.0, ranks=1)
    one["fraction_of_datasheet"] = 0.5  # even if a profile claims a fraction
    across = collective("all_reduce", 256, 200.0, nodes=2)
    across["fraction_of_datasheet"] = 0.5
    rec, text = run_both(run, TRAIN, write(tmp_path, [one, across]))
    assert value(rec, "link_efficiency") == 0.77
    why = [x["why"] for x in rec["calibration"]["not_applied"]]
    assert why == ["fewer than 2 ranks", "measured across nodes (the fraction is of the intra-node link)"]
    assert "nothing applicable (no result measures what the plan assumes)" in text


def test_serve_prefill_efficiency_from_the_matmul(tmp_path, run):
    f = write(tmp_path, [matmul("bf16", 700.0, 989.5)])
    plain = json.loads(run(*SERVE, "--json")[1])
    rec, text = run_both(run, SERVE, f)
    assert value(plain, "compute_efficiency") == 0.45
    assert value(rec, "compute_efficiency") == pytest.approx(700 / 989.5 * 0.77)
    src = source(rec, "compute_efficiency")
    assert src.startswith(cited(f, "700 TFLOP/s", 700 / 989.5))
    assert "x model_shape_factor 0.77" in src and "replaces the default 0.45" in src
    assert rec["latency"]["ttft_s"] < plain["latency"]["ttft_s"]  # prefill is compute-bound: faster at 0.54 than 0.45
    assert "compute_efficiency = 0.545: matmul bf16 on the best GEMM shape found, x model_shape_factor 0.77" in text
    own = write(tmp_path, [matmul("bf16", 650.0, 989.5, model=MODEL)], name="own.json")
    rec, _ = run_both(run, SERVE, own)
    assert value(rec, "compute_efficiency") == pytest.approx(650 / 989.5)


def test_results_the_planner_does_not_use_are_listed(tmp_path, run):
    disk = {
        "name": "disk write (fsync)",
        "value": 2.1,
        "unit": "GB/s",
        "datasheet": None,
        "seconds": 3,
        "fraction_of_datasheet": None,
        "detail": {"path": "/tmp", "bytes": 2**30},
    }
    pcie = {
        "name": "pcie h2d pinned",
        "value": 50.0,
        "unit": "GB/s",
        "datasheet": 63.0,
        "seconds": 1,
        "fraction_of_datasheet": 50 / 63,
        "detail": {"gpu": 0, "bytes": 2**28, "pinned": True},
    }
    rec, text = run_both(run, TRAIN, write(tmp_path, [memory(), disk, pcie]))
    assert rec["calibration"]["not_applied"] == [
        {"result": "disk write (fsync)", "why": "no fraction of a datasheet figure"},
        {"result": "pcie h2d pinned", "why": "not an input of the training step-time model"},
    ]
    assert "not used: disk write (fsync) (no fraction of a datasheet figure); pcie h2d pinned (not an input" in text


# ------------------------------------------------------------------------- 5. a profile measured on a CPU


def test_cpu_profile_says_nothing_applicable(tmp_path, run):
    f = write(tmp_path, [matmul("bf16", 0.5, 0, cpu=True), memory(20.0, cpu=True)], gpu=None)
    for args in (TRAIN, SERVE):
        plain = json.loads(run(*args, "--json")[1])
        rec, text = run_both(run, args, f)
        assert rec["calibration"]["nothing_applicable"] == "measured on a CPU"
        assert rec["calibration"]["replaced"] == [] and rec["calibration"]["notes"] == []
        assert {x["why"] for x in rec["calibration"]["not_applied"]} == {"measured on a CPU"}
        assert f"calibration {f}: nothing applicable (measured on a CPU)" in text
        assert rec["assumptions"] == plain["assumptions"]


# ------------------------------------------------------------------------- 6. checks


def test_gpu_mismatch_is_one_line(tmp_path, run):
    f = write(tmp_path, [memory()], gpu={"name": "NVIDIA A100-SXM4-80GB", "catalog_id": "a100-sxm-80gb"})
    for args in (TRAIN, SERVE):
        line = one_line_error(*run(*args, "--calibration", str(f)))
        assert "measured on a100-sxm-80gb, not h100-sxm-80gb" in line


@pytest.mark.parametrize(
    "mutate,fragment",
    [
        (lambda r: r.update(detail=[1]), "results[0].detail must be an object"),
        (lambda r: r["detail"].update(ranks="8"), "results[0].detail.ranks must be an integer >= 1, got '8'"),
        (lambda r: r["detail"].update(ranks=True), "results[0].detail.ranks must be an integer"),
        (lambda r: r["detail"].update(bytes=-1), "results[0].detail.bytes must be an integer >= 1, got -1"),
        (lambda r: r["detail"].update(nodes=1.5), "results[0].detail.nodes must be an integer"),
        (lambda r: r["detail"].update(op=3), "results[0].detail.op must be a string"),
        (lambda r: r["detail"].update(model=7), "results[0].detail.model must be a string"),
        (lambda r: r["detail"].update(dtype=["bf16"]), "results[0].detail.dtype must be a string"),
        (lambda r: r["detail"].update(device=0), "results[0].detail.device must be a string"),
        (lambda r: r["detail"].update(model_shapes="4096x4096"), "results[0].detail.model_shapes must be a list"),
        (lambda r: r["detail"].update(busbw_bytes_per_s=-1.0), "results[0].detail.busbw_bytes_per_s must be a number"),
        (lambda r: r.update(value="fast"), "results[0].value must be a number"),
        (lambda r: r.pop("name"), "results[0].name must be a non-empty string"),
        (lambda r: r.update(fraction_of_datasheet=True), "results[0].fraction_of_datasheet must be a number"),
    ],
)
def test_profile_fields_are_checked(tmp_path, run, mutate, fragment):
    r = collective("all_reduce", 256, 360.0)
    mutate(r)
    f = write(tmp_path, [r])
    with pytest.raises(CatalogError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        read_profile(f)
    line = one_line_error(*run(*SERVE, "--calibration", str(f)))
    assert fragment in line and str(f) in line


@pytest.mark.parametrize(
    "gpu,fragment",
    [({"name": 5}, "'gpu.name' must be a string"), ({"catalog_id": ["h100"]}, "'gpu.catalog_id' must be a string")],
)
def test_profile_gpu_fields_are_checked(tmp_path, gpu, fragment):
    with pytest.raises(CatalogError, match=fragment):
        read_profile(write(tmp_path, [], gpu=gpu))


def test_apply_to_step_library_call(tmp_path):
    """The library call the CLI makes: the Calibration names every replacement and cites the file."""
    from gpuplan.catalog import load_accelerators
    from gpuplan.estimate.steptime import StepAssumptions

    f = write(tmp_path, [matmul("bf16", 700.0, 989.5), memory()])
    gpu = load_accelerators().get("h100")
    c = apply_to_step(
        read_profile(f),
        StepAssumptions(),
        gpu,
        file="cal.json",
        precision="bf16-mixed",
        model_id=MODEL,
        explicit={"hbm_efficiency"},
    )
    assert c.assumptions.matmul_efficiency == pytest.approx(700 / 989.5 * 0.77)
    assert c.assumptions.hbm_efficiency == StepAssumptions().hbm_efficiency  # explicit: kept
    assert [r.split(" = ")[0] for r in c.replaced] == ["matmul_efficiency"]
    assert c.overridden[0].startswith("--assume overrides the calibration for hbm_efficiency")
    assert c.to_dict()["file"] == "cal.json" and c.measured_on == "NVIDIA H100 80GB HBM3" and c.created == CREATED
