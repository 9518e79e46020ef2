"""``local diagnose --from dcgm``: a ``dcgmi dmon`` text log read as a watch trace (dcgm_import.py).

The logs here are written by hand in dmon's documented layout (DCGM's dcgmi/DeviceMonitor.cpp: a ``#Entity``
line of short names and an ``ID`` line of units, repeated every 14 rounds; ``GPU n`` then one left-aligned
value per column, each column the field's width + 6, plus 2 blanks; ``N/A`` for a blank value). They are
made up for the tests, not recorded on a GPU."""

from __future__ import annotations

import json

import pytest

from gpuplan.errors import GpuplanError
from gpuplan.local.dcgm_import import FIELDS, SUGGESTED_FIELDS, parse_dcgm_dmon
from gpuplan.local.diagnose import diagnose

#: short name -> (display width from dcgm_fields.cpp, unit) for the columns the tests use
WIDTH = {
    "GPUTL": (10, ""),
    "GRACT": (5, ""),
    "SMACT": (5, ""),
    "SMOCC": (5, ""),
    "TENSO": (5, ""),
    "DRAMA": (5, ""),
    "PCITX": (20, ""),
    "PCIRX": (20, ""),
    "NVLTX": (20, ""),
    "NVLRX": (20, ""),
    "POWER": (10, " W"),
    "EPLMT": (10, " W"),
    "TMPTR": (5, " C"),
    "SMCLK": (5, ""),
    "SMMAX": (5, ""),
    "FBUSD": (10, ""),
    "FBFRE": (10, ""),
    "DVCCTR": (20, ""),
    "XIDER": (5, ""),
    "PCILG": (5, ""),
    "PCILW": (5, ""),
    "PCIMG": (5, ""),
    "PCIMW": (5, ""),
    "DVNAM": (20, ""),
}


def _line(first: str, cells: list[str], cols: list[str]) -> str:
    out = f"{first:<10}"
    for c, v in zip(cols, cells, strict=True):
        w = WIDTH[c][0] + 6
        out += f"{v[:w]:<{w + 2}}"
    return out.rstrip()


def dmon_log(rows: list[list[dict[str, str]]], cols: list[str]) -> str:
    """A dmon log: ``rows[k][i]`` is GPU i's values in round k (missing columns print N/A)."""
    header = [_line("#Entity", cols, cols), _line("ID", [WIDTH[c][1] for c in cols], cols)]
    lines = list(header)
    for k, round_ in enumerate(rows):
        if k and k % 14 == 0:
            lines += header
        for i, vals in enumerate(round_):
            lines.append(_line(f"GPU {i}", [vals.get(c, "N/A") for c in cols], cols))
    return "\n".join(lines) + "\n"


TRAIN_COLS = ["GPUTL", "SMACT", "SMOCC", "TENSO", "DRAMA", "PCITX", "PCIRX", "NVLTX", "NVLRX", "POWER", "EPLMT"]
TRAIN_COLS += ["TMPTR", "SMCLK", "SMMAX", "FBUSD", "FBFRE", "DVCCTR", "XIDER", "PCILG", "PCILW", "PCIMG", "PCIMW"]


def busy(**over: str) -> dict[str, str]:
    """One H100's line while a dense training step runs (plausible values, made up)."""
    vals = {
        "GPUTL": "99",
        "SMACT": "0.871",
        "SMOCC": "0.312",
        "TENSO": "0.552",
        "DRAMA": "0.381",
        "PCITX": "48211911",
        "PCIRX": "61001233",
        "NVLTX": "9312004101",
        "NVLRX": "9288112773",
        "POWER": "633.412",
        "EPLMT": "700.000",
        "TMPTR": "61",
        "SMCLK": "1980",
        "SMMAX": "1980",
        "FBUSD": "61234",
        "FBFRE": "18001",
        "DVCCTR": "0",
        "XIDER": "0",
        "PCILG": "5",
        "PCILW": "16",
        "PCIMG": "5",
        "PCIMW": "16",
    }
    vals.update(over)
    return vals


def log_of(n: int = 20, gpus: int = 2, **over: str) -> str:
    return dmon_log([[busy(**over) for _ in range(gpus)] for _ in range(n)], TRAIN_COLS)


def ids(text: str) -> list[str]:
    return [v.id for v in diagnose(parse_dcgm_dmon(text)[0]).verdicts]


def test_a_dmon_log_reads_as_a_trace():
    text = log_of(20).replace("633.412", "N/A", 1)
    recs, warnings = parse_dcgm_dmon(text, interval_s=0.5)
    head, samples, summary = recs[0], recs[1:-1], recs[-1]
    assert head["source"] == "dcgm" and head["interval_s"] == 0.5 and head["started_at"] is None
    assert [g["index"] for g in head["gpus"]] == [0, 1] and head["gpus"][0]["counters"]["gpm"] == "ok"
    assert head["dcgm_fields"]["TENSO"] == {"field_id": 1004, "symbol": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}
    assert len(samples) == 20 and samples[3]["t_s"] == 1.5 and summary["t_s"] == 9.5  # header repeated at 14
    g0, g1 = samples[0]["gpus"]
    assert "power_w" not in g0 and g1["power_w"] == 633.412  # N/A: absent, never 0
    assert g0["sm_active"] == 0.871 and g0["tensor_active"] == 0.552 and g0["util_percent"] == 99
    assert g0["nvlink_tx_bytes_per_s"] == 9312004101 and g0["pcie_rx_bytes_per_s"] == 61001233
    assert g0["mem_used_bytes"] == 61234 * 2**20 and g0["mem_total_bytes"] == (61234 + 18001) * 2**20
    assert g0["throttle_mask"] == 0 and g0["throttle_reasons"] == [] and g0["xid_errors"] == []
    assert "mem_free_bytes" not in g0 and "xid_last" not in g0  # working values stay out of the trace
    assert warnings == []
    assert ids(log_of(20)) == ["healthy"]


def test_memory_bound_from_dram_and_tensor_activity():
    assert ids(log_of(20, DRAMA="0.781", TENSO="0.042", SMACT="0.912"))[0] == "memory-bound"
    assert "memory-bound" not in ids(log_of(20, DRAMA="0.781"))  # tensor cores busy: not memory-bound


def test_power_throttle_from_the_clock_event_bits():
    got = ids(log_of(20, DVCCTR="4", SMCLK="1605"))
    assert got[0] == "throttled-power"
    assert "throttled-power" not in ids(log_of(20, DVCCTR="1"))  # 0x1: GPU idle, not a cap


def test_communication_bound_over_pcie_against_the_link_rate():
    # gen 4 x16 moves ~31.5 GB/s per direction (PCI-SIG): 20 GB/s is past half of it while tensor cores wait
    hot = {"PCILG": "4", "PCIMG": "4", "PCITX": "20000000000", "TENSO": "0.031", "SMACT": "0.301"}
    got = parse_dcgm_dmon(log_of(20, **hot))[0]
    d = diagnose(got)
    assert d.verdicts[0].id == "communication-bound"
    assert "communication-bound" not in ids(log_of(20, **{**hot, "PCITX": "2000000000"}))


def test_xid_is_an_event_when_the_last_xid_changes():
    rounds = [[busy(), busy()] for _ in range(10)]
    for k in range(4, 10):
        rounds[k][1] = busy(XIDER="79")  # the field keeps the latest code: one event, seen at round 4
    recs, _ = parse_dcgm_dmon(dmon_log(rounds, TRAIN_COLS))
    events = [(s["t_s"], g["xid_errors"]) for s in recs[1:-1] for g in s["gpus"] if g["xid_errors"]]
    assert events == [(4.0, [79])]
    v = diagnose(recs).verdicts[0]
    assert v.id == "hardware-errors" and "79" in v.evidence[0]["note"]
    assert "hardware-errors" not in ids(log_of(10))


def test_pcie_downtrained_from_the_link_fields():
    assert "pcie-downtrained" in ids(log_of(20, PCILG="3"))


def test_utilization_from_gract_when_gputl_is_not_logged():
    cols = ["GRACT", "SMACT", "TENSO", "DRAMA", "POWER"]
    rows = [[{"GRACT": "0.412", "SMACT": "0.401", "TENSO": "0.2", "DRAMA": "0.2", "POWER": "300.0"}]] * 12
    recs, _ = parse_dcgm_dmon(dmon_log(rows, cols))
    g = recs[1]["gpus"][0]
    assert g["util_percent"] == 41.2 and g["gr_engine_active"] == 0.412 and "GRACT" in recs[0]["util_source"]
    assert "input-bound" in [c["id"] for c in diagnose(recs).checks]
    assert recs[0]["gpus"][0]["counters"]["xid"].startswith("not in the dcgmi dmon log (fields 230)")


def test_columns_with_blanks_are_read_by_position_and_mig_lines_skipped():
    cols = ["DVNAM", "GPUTL", "POWER"]
    text = dmon_log([[{"DVNAM": "NVIDIA H100 80GB HBM3", "GPUTL": "97", "POWER": "650.0"}]] * 3, cols)
    text = text.replace("GPU 0     NVIDIA", "GPU-I 1   NVIDIA H100 80GB HBM3   97  650.0\nGPU 0     NVIDIA", 1)
    recs, warnings = parse_dcgm_dmon(text)
    g = recs[1]["gpus"][0]
    assert g["util_percent"] == 97 and g["power_w"] == 650.0 and len(recs) == 5
    assert any("DVNAM" in w for w in warnings) and any("GPU-I" in w for w in warnings)


def test_time_stamps_from_ts_align_two_nodes(tmp_path):
    from gpuplan import api

    paths = []
    for node, (start, over) in {"a": (0, {}), "b": (3, {"SMCLK": "1410"})}.items():
        lines = log_of(30, gpus=2, **over).splitlines()
        stamped, k = [], start * 2
        for line in lines:
            sec = k // 2
            stamped.append(f"2024-05-01T10:00:{sec:02d}.{250 * (k % 2):03d} {line}")
            k += line.startswith("GPU")
        p = tmp_path / f"{node}.log"
        p.write_text("\n".join(stamped) + "\n")
        paths.append(p)
    recs, _ = parse_dcgm_dmon(paths[0].read_text())
    assert recs[0]["started_at"] == "2024-05-01T10:00:00.000" and recs[0]["interval_s"] == 1.0
    report = api.local_diagnose(paths, from_="dcgm").to_dict()
    assert any("aligned" in n for n in report["notes"])
    top = report["verdicts"][0]
    assert top["id"] == "straggler" and "b.log" in top["evidence"][0]["note"]


def test_bad_logs_are_one_error():
    with pytest.raises(GpuplanError, match="#Entity"):
        parse_dcgm_dmon("GPU 0   97  650.0\n")
    with pytest.raises(GpuplanError, match="none of the columns"):
        parse_dcgm_dmon("#Entity   ABCDE\nID\nGPU 0     1\n")
    with pytest.raises(GpuplanError, match="can't read SMACT"):
        parse_dcgm_dmon(log_of(3, SMACT="87.1"))  # a percent where DCGM prints a ratio
    with pytest.raises(GpuplanError, match="values for"):
        parse_dcgm_dmon(log_of(3).replace("\nGPU 1", "\nGPU 1 1 2", 1))
    recs, warnings = parse_dcgm_dmon(log_of(3) + "GPU 0     99          0.8")  # cut off by Ctrl-C
    assert len(recs) == 5 and any("cut off" in w for w in warnings)


def test_dcgm_through_the_cli(run, tmp_path):
    path = tmp_path / "dmon.log"
    path.write_text(log_of(20, DVCCTR="4", SMCLK="1605") + "\n\ndmon was stopped do to receiving a signal\n")
    code, out, err = run("local", "diagnose", str(path), "--from", "dcgm", "--interval", "500ms", "--json")
    rec = json.loads(out)
    assert code == 0 and rec["verdicts"][0]["id"] == "throttled-power" and rec["trace"]["duration_s"] == 9.5
    assert "not read" in err  # the "dmon was stopped" line
    code, _, err = run("local", "diagnose", str(path), "--interval", "1s")
    assert code == 2 and "error:" in err and "--from dcgm" in err and err.count("\n") == 1
    code, _, err = run("local", "diagnose", str(path), "--from", "dcgm", "--interval", "soon")
    assert code == 2 and err.count("\n") == 1
    code, _, err = run("local", "diagnose", str(path))  # a dmon log read as a watch trace
    assert code == 2 and err.count("\n") == 1


@pytest.mark.parametrize("field_id", [int(f) for f in SUGGESTED_FIELDS.split(",")])
def test_every_suggested_field_is_read(field_id):
    assert field_id in {f.field_id for f in FIELDS.values()}


# ----------------------------------------------------------------------------- DCGM exporter scrapes

#: exporter metric name, HELP text, value in busy() (the exporter's default counters; made up for the test)
EXPORTED = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "SMCLK"),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "TMPTR"),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "POWER"),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "GPUTL"),
    ("DCGM_FI_DEV_FB_FREE", "Frame buffer memory free (in MB).", "FBFRE"),
    ("DCGM_FI_DEV_FB_USED", "Frame buffer memory used (in MB).", "FBUSD"),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "XIDER"),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons.", "DVCCTR"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", "TENSO"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active.", "DRAMA"),
    ("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.", "SMACT"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", None),
)


def scrape(gpus: list[dict[str, str]], host: str = "node-a", ts_ms: int | None = None) -> str:
    lines = []
    for metric, help_, short in EXPORTED:
        lines += [f"# HELP {metric} {help_}", f"# TYPE {metric} gauge"]
        for i, vals in enumerate(gpus):
            labels = (
                f'gpu="{i}",UUID="GPU-{i:08d}-aaaa",pci_bus_id="00000000:{0x18 + i:02X}:00.0",device="nvidia{i}",'
                f'modelName="NVIDIA H100 80GB HBM3",Hostname="{host}",DCGM_FI_DRIVER_VERSION="550.54.15"'
            )
            value = vals.get(short, "0") if short else "12"
            lines.append(f"{metric}{{{labels}}} {value}" + (f" {ts_ms}" if ts_ms is not None else ""))
    return "\n".join(lines) + "\n"


def test_exporter_scrapes_read_as_a_trace():
    text = "".join(scrape([busy(DVCCTR="4", SMCLK="1605")] * 2) for _ in range(12))
    text = text.replace('DCGM_FI_DEV_GPU_UTIL{gpu="0"', 'DCGM_FI_DEV_GPU_UTIL{gpu="0",GPU_I_ID="1"', 1)  # MIG
    from gpuplan.local.dcgm_import import parse_dcgm

    recs, warnings = parse_dcgm(text, interval_s=2.0)
    head, samples = recs[0], recs[1:-1]
    assert head["host"] == {"hostname": "node-a"} and head["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert head["gpus"][1]["uuid"] == "GPU-00000001-aaaa" and head["interval_s"] == 2.0
    assert len(samples) == 12 and samples[5]["t_s"] == 10.0
    g0 = samples[1]["gpus"][0]
    assert g0["sm_clock_mhz"] == 1605 and g0["throttle_reasons"] == ["software power cap"]
    assert g0["mem_total_bytes"] == (61234 + 18001) * 2**20 and g0["tensor_active"] == 0.552
    assert "util_percent" in g0 and "util_percent" not in samples[0]["gpus"][0]  # the MIG value was skipped
    assert any("DCGM_FI_DEV_MEM_COPY_UTIL" in w for w in warnings) and any("MIG" in w for w in warnings)
    assert diagnose(recs).verdicts[0].id == "throttled-power"
    assert [v.id for v in diagnose(parse_dcgm(scrape([busy()]) * 12)[0]).verdicts] == ["healthy"]


def test_exporter_time_stamps_align_two_nodes(tmp_path):
    from gpuplan import api

    paths = []
    for host, start_ms, clock in (("node-a", 1_714_557_600_000, "1980"), ("node-b", 1_714_557_603_000, "1410")):
        text = "".join(scrape([busy(SMCLK=clock)] * 2, host, start_ms + 1000 * k) for k in range(30))
        paths.append(tmp_path / f"{host}.prom")
        paths[-1].write_text(text)
    report = api.local_diagnose(paths, from_="dcgm").to_dict()
    assert any("aligned on the 26 s" in n for n in report["notes"])
    top = report["verdicts"][0]
    assert top["id"] == "straggler" and "node-b" in top["evidence"][0]["note"]


def test_exporter_log_without_gpu_metrics_is_one_error(run, tmp_path):
    path = tmp_path / "x.prom"
    path.write_text('DCGM_FI_DEV_COUNT{Hostname="a"} 8\n')
    code, _, err = run("local", "diagnose", str(path), "--from", "dcgm")
    assert code == 2 and err.count("\n") == 1 and "gpu label" in err
