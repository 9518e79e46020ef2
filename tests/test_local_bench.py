"""`gpuplan local bench`: the harness and arithmetic on the CPU (torch CPU), calibration profiles and
their use by the planner. GPU-only paths are marked and skip cleanly without one."""

from __future__ import annotations

import json
import sys

import pytest

torch = pytest.importorskip("torch")

from gpuplan.local import bench  # noqa: E402
from gpuplan.local.calibration import make_profile, read_profile  # noqa: E402
from gpuplan.errors import CatalogError  # noqa: E402
from test_cli import one_line_error  # noqa: E402


def test_time_fn_counts_iterations():
    calls = []
    times = bench.time_fn(lambda: calls.append(1), "cpu", warmup=2, iters=4)
    assert len(times) == 4 and len(calls) == 6 and all(t >= 0 for t in times)


def test_matmul_arithmetic_and_search():
    r = bench.bench_matmul("bf16", quick=True)
    assert r.name == "matmul fp32 (cpu)" and r.unit == "TFLOP/s" and r.value > 0
    assert r.datasheet is None and r.fraction is None  # a CPU fp32 figure is not compared with a GPU's bf16 peak
    assert r.detail["shapes_tried"] >= 2 and len(r.detail["best_shape_mnk"]) == 3
    tflops = bench.matmul_tflops(torch, "cpu", "fp32", 64, 64, 64, 3, None)
    assert 0 < tflops < 100  # 2mnk / time, a CPU does not reach 100 TFLOP/s


def test_memory_counts_read_and_write():
    r = bench.bench_memory(quick=True)
    assert r.unit == "GB/s (read + write)" and r.value > r.detail["median_gbps"] * 0.5 and r.detail["bytes"] > 0


def test_allreduce_single_process_gloo():
    with pytest.raises(bench.BenchUnavailable, match="2 or more ranks"):
        bench.bench_allreduce(quick=True)
    rs = bench.bench_allreduce(quick=True, sizes=[2**16], allow_single=True)
    assert rs[0].detail["ranks"] == 1 and rs[0].value == 0.0  # busbw = algbw x 2(n-1)/n is 0 for one rank
    assert rs[0].detail["algbw_gbps"] > 0


def test_disk(tmp_path):
    w, r = bench.bench_disk(tmp_path, writers=2, file_bytes=8 * 2**20, quick=True)
    assert w.value > 0 and r.value > 0 and w.detail["bytes"] == 16 * 2**20
    assert not list(tmp_path.iterdir())  # cleaned up
    with pytest.raises(Exception, match="not a directory"):
        bench.bench_disk(tmp_path / "missing")


@pytest.mark.gpu
def test_pcie_needs_a_gpu():
    if not torch.cuda.is_available():
        with pytest.raises(bench.BenchUnavailable):
            bench.bench_pcie()
        pytest.skip("no GPU: only the refusal was checked")
    assert all(r.value > 0 for r in bench.bench_pcie())


def test_without_torch_it_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(bench.BenchUnavailable, match='pip install "gpuplan\\[bench\\]"'):
        bench.bench_memory()


def _profile(tmp_path, gpu="h100-sxm-80gb"):
    # synthetic profile (a GPU run would write one with real figures): 794.5 of 989 TFLOP/s, 2.9 of 3.35 TB/s
    results = [{"name": "matmul bf16", "value": 794.5, "unit": "TFLOP/s", "datasheet": 989.5,
                "fraction_of_datasheet": 794.5 / 989.5, "detail": {}, "seconds": 60},
               {"name": "memory copy", "value": 2900, "unit": "GB/s (read + write)", "datasheet": 3350,
                "fraction_of_datasheet": 2900 / 3350, "detail": {}, "seconds": 5}]
    f = tmp_path / "cal.json"
    f.write_text(json.dumps(make_profile(results, {"name": "NVIDIA H100 80GB HBM3", "catalog_id": gpu}, {}, {})))
    return f


def test_calibration_changes_the_plan(tmp_path, run):
    f = _profile(tmp_path)
    base = ["train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "1", "--tokens", "1T", "--json"]
    plain = json.loads(run(*base)[1])
    cal = json.loads(run(*base, "--calibration", str(f))[1])
    assert cal["calibration"]["replaced"] and cal["time"]["mfu"] != plain["time"]["mfu"]
    assert cal["time"]["matmul_efficiency"] == pytest.approx(794.5 / 989.5 * 0.85)
    s = json.loads(run("serve", "llama-3.1-8b", "--gpu", "h100", "--calibration", str(f), "--json")[1])
    assert any("memory bandwidth" in x for x in s["calibration"]["replaced"])


def test_calibration_errors(tmp_path, run):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "something"}')
    with pytest.raises(CatalogError, match="not a gpuplan calibration profile"):
        read_profile(bad)
    other = _profile(tmp_path, gpu="a100-sxm-80gb")
    line = one_line_error(*run("train", "llama-3.1-8b", "--gpu", "h100", "--tokens", "1T", "--calibration", str(other)))
    assert "measured on a100-sxm-80gb, not h100-sxm-80gb" in line
    assert "can't read" in one_line_error(*run("serve", "llama-3.1-8b", "--gpu", "h100", "--calibration",
                                               str(tmp_path / "none.json")))


def test_bench_cli_on_cpu(tmp_path, run):
    out_file = tmp_path / "cal.json"
    code, out, err = run("local", "bench", "disk", "--path", str(tmp_path), "--save", str(out_file), "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["kind"] == "calibration" and {r["name"] for r in rec["results"]} == {"disk write (fsync)",
                                                                                      "disk read (uncached)"}
    assert read_profile(out_file)["results"]
    assert "not a directory" in one_line_error(*run("local", "bench", "disk", "--path", str(tmp_path / "nope")))


def test_sampler_names_throttling_and_ignores_benign_reasons():
    from gpuplan.local.sampler import Sampler, decode_reasons

    assert decode_reasons(0x4 | 0x40) == ["software power cap", "hardware thermal slowdown"]
    readings = iter([(1980, 690.0, 0x0), (1755, 700.0, 0x4), (1650, 700.0, 0x4 | 0x20)])

    def read(index):
        try:
            return next(readings)
        except StopIteration:
            raise RuntimeError("done")

    import time

    with Sampler(read, interval_s=0.001) as s:
        time.sleep(0.05)
    summary = s.summary()
    assert summary["sm_clock_min_mhz"] == 1650 and summary["sm_clock_max_mhz"] == 1980
    assert summary["throttled"] and "software power cap" in summary["throttled_by"]
    idle = Sampler(lambda i: (1980, 100.0, 0x1), interval_s=0.001)
    with idle:
        time.sleep(0.02)
    assert idle.summary()["throttled"] is False  # 'gpu idle' is not a problem
    assert Sampler(read=None).summary() is None  # no NVML: nothing sampled


def test_bench_uses_the_models_shapes(run):
    rec = json.loads(run("local", "bench", "matmul", "--model", "llama-3.2-1b", "--json")[1])
    assert rec["results"][0]["detail"]["shapes_tried"] >= 3
    assert "needs an architecture" in one_line_error(*run("local", "bench", "matmul", "--model", "7B"))



def test_model_shapes_are_measured_not_climbed_away_from():
    shapes = [(4096, 2048, 2048), (4096, 8192, 2048)]
    r = bench.bench_matmul("bf16", quick=True, shapes=shapes)
    assert r.detail["model_shapes"] == [[256, 128, 128], [256, 512, 128]]  # scaled down 16x on a CPU
    assert r.detail["shapes_tried"] == 2


@pytest.mark.parametrize("bad,fragment", [({"results": [1]}, "objects"), ({"gpu": "h100"}, "'gpu'"),
                                          ({"results": [{"name": "matmul bf16", "fraction_of_datasheet": 2.0}]},
                                           "fraction_of_datasheet")])
def test_calibration_profile_is_checked(tmp_path, bad, fragment):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({**make_profile([], None, {}, {}), **bad}))
    with pytest.raises(CatalogError, match=fragment):
        read_profile(f)


def test_calibration_and_rank_do_not_mix(tmp_path, run):
    f = _profile(tmp_path)
    assert "--rank compares many" in one_line_error(*run("serve", "llama-3.1-8b", "--gpu", "h100,l4", "--rank",
                                                         "--calibration", str(f)))
    assert "--rank compares many" in one_line_error(*run("train", "llama-3.1-8b", "--gpu", "h100", "--tokens", "1T",
                                                         "--rank", "--calibration", str(f)))


def test_save_folder_is_checked_first(tmp_path, run):
    line = one_line_error(*run("local", "bench", "disk", "--path", str(tmp_path), "--save",
                               str(tmp_path / "no" / "such" / "p.json")))
    assert "no folder" in line
