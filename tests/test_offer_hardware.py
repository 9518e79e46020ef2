"""The offers' hardware (vCPUs, host RAM, local NVMe, NICs, NVLink) with its sources, and the instance checks of
``train --offer`` (the machine block's ``instance``, ``instance_checks`` and ``warnings``), ``--bytes-per-sample``
and the serving fleet's scale-up time. Worked examples are exact arithmetic on the catalog's figures."""

from __future__ import annotations

import tomllib

import pytest

from conftest import REPO
from gpuplan import api
from gpuplan.catalog.offers import read_offer_file
from gpuplan.errors import CatalogError, InputError
from gpuplan.estimate import machine as mx
from gpuplan.plan.machine import MachineOptions
from gpuplan.spec.offer import HARDWARE_FIELDS, NIC_KINDS
from test_cli import one_line_error

OFFERS = REPO / "src/gpuplan/data/offers.toml"
P5 = "aws-p5.48xlarge-us-east-1-ondemand"


@pytest.fixture(scope="module")
def offers():
    from gpuplan.catalog.session import Catalogs

    return Catalogs().offers()


# ------------------------------------------------------------------------------------------------ formulas


def test_resource_status_never_reads_unknown_as_zero():
    assert mx.resource_status(24, 192) == mx.OK
    assert mx.resource_status(24, 24) == mx.OK
    assert mx.resource_status(24, 16) == mx.SHORT
    assert mx.resource_status(24, None) == mx.UNKNOWN
    assert mx.resource_status(1, 0) == mx.SHORT  # a sourced zero (no local NVMe) is short, not unknown


def test_local_nvme_need_worked_example():
    """Llama 3 70B, tp 8 on 8-GPU nodes: each rank writes 123.47 GB, a node's 8 ranks the whole 987.8 GB
    checkpoint; two kept plus a 50 GB share of the data = 2,025.6 GB."""
    node = mx.node_checkpoint_bytes(123.47e9, 8, 8, 987.8e9)
    assert node == pytest.approx(987.76e9)
    assert mx.node_checkpoint_bytes(30e9, 8, 64, 1e12) == pytest.approx(240e9)  # ZeRO-1: 8 of 64 shards
    assert mx.node_checkpoint_bytes(30e9, 8, 4, 1e12) == pytest.approx(120e9)  # only 4 distinct writers
    assert mx.local_nvme_need_bytes(987.8e9, 2, 50e9) == pytest.approx(2025.6e9)


# ------------------------------------------------------------------------------------------------- catalog


def test_p5_hardware_and_its_source(offers):
    """p5.48xlarge: 8 x 3.84 TB NVMe = 30.72 TB, EFA (v2), 3,200 Gb/s = 400 GB/s per node = 50 GB/s per GPU
    (the figure plan/training.offer_network gives the step-time model), each from the vantage transcription."""
    o = offers.get(P5)
    assert o.local_nvme_bytes == 8 * 3_840_000_000_000
    assert o.nic_kind == "efa"
    assert o.scale_out_bytes_per_s_per_gpu == pytest.approx(3200e9 / 8 / 8)
    src = o.source_for("local_nvme_bytes")
    assert "tsaol/aws-gpu" in src.url and src.url.endswith("p5_instances.js") and src.date == "2026-01-21"
    assert set(o.hardware_sources()) >= {"vcpus", "host_memory_bytes", "local_nvme_bytes", "nic_kind"}


def test_offer_network_uses_the_offers_nic_bandwidth(offers):
    from gpuplan.estimate.steptime import StepAssumptions
    from gpuplan.plan.training import offer_network

    o = offers.get(P5)
    assert offer_network(o, StepAssumptions()).scale_out_bytes_per_s_per_gpu == o.scale_out_bytes_per_s_per_gpu


def test_every_bundled_hardware_figure_is_sourced_and_counted(offers):
    """Every figure an offer gives has a source with a URL and a date; NIC kinds come from the closed list.
    The counts pin what the bundled file holds (update them with the data)."""
    counts = dict.fromkeys(HARDWARE_FIELDS, 0)
    for o in offers:
        if o.origin != "built-in":
            continue
        for name in HARDWARE_FIELDS:
            if getattr(o, name) is not None:
                counts[name] += 1
                src = o.source_for(name)
                assert src.url.startswith("https://") and src.date, (o.id, name)
        assert o.nic_kind is None or o.nic_kind in NIC_KINDS
    assert counts["local_nvme_bytes"] == 20
    assert counts["nic_kind"] == 21


def test_p3_has_no_local_nvme_a_sourced_zero(offers):
    o = offers.get("aws-p3.16xlarge-us-east-1-ondemand")
    assert o.local_nvme_bytes == 0 and o.nic_kind == "ethernet"


def _one_offer(tmp_path, accelerators, extra: str):
    doc = tomllib.loads(OFFERS.read_text())
    row = next(r for r in doc["offer"] if r["id"] == P5)
    lines = [f"{k} = {_toml(v)}" for k, v in row.items() if k not in ("source", "sources", "nic_kind")]
    src = row["source"]
    text = (
        "schema_version = 1\n[[offer]]\n"
        + "\n".join(lines)
        + f'\nsource = {{ title = "t", url = "{src["url"]}", date = "{src["date"]}" }}\n'
        + extra
    )
    path = tmp_path / "offers.toml"
    path.write_text(text)
    return read_offer_file(path, accelerators)


def _toml(v):
    return f'"{v}"' if isinstance(v, str) else repr(v)


@pytest.fixture()
def accelerators():
    from gpuplan.catalog.session import Catalogs

    return Catalogs().accelerators()


def test_user_offer_fields_are_checked(tmp_path, accelerators):
    (o,) = _one_offer(
        tmp_path,
        accelerators,
        'local_nvme_write_bytes_per_s = 2.5e10\nsources = { local_nvme_write_bytes_per_s = { title = "fio", '
        'url = "https://example.com/fio", date = "2026-01" } }\n',
    )
    assert o.source_for("local_nvme_write_bytes_per_s").title == "fio"
    assert o.source_for("vcpus").title == "t"  # no own source: the price's
    with pytest.raises(CatalogError, match="nic_kind"):
        _one_offer(tmp_path, accelerators, 'nic_kind = "carrier-pigeon"\n')
    with pytest.raises(CatalogError, match="does not give"):
        _one_offer(
            tmp_path,
            accelerators,
            'sources = { local_nvme_read_bytes_per_s = { title = "x", url = "u", date = "2026" } }\n',
        )


# ---------------------------------------------------------------------------------------- train --offer


def _machine(**kw):
    args = dict(gpu="h100", gpus=16, tokens="1e10", offer=P5) | kw
    model = args.pop("model", "llama-3-8b")
    return api.train(model, **args).to_dict()["machine"]


def test_instance_checks_on_p5():
    """8 GPUs per p5 node x (1 process + 2 loader workers) = 24 cores vs 192 vCPUs; RAM need 8 x 80 GB floor
    + 8 x 2 x 512 MiB workers vs 2 TiB."""
    m = _machine()
    cpu, ram = m["instance_checks"]["cpu"], m["instance_checks"]["host_ram"]
    assert cpu == {"needed_cores_per_node": 24.0, "vcpus_per_node": 192, "status": "ok"}
    assert ram["needed_bytes_per_node"] == pytest.approx(8 * 80e9 * 1.0 + 8 * 2 * 512 * 2**20, rel=0.02)
    assert ram["status"] == "ok" and m["warnings"] == []
    assert "local_nvme" not in m["instance_checks"]  # only with --storage local-nvme
    assert m["instance"]["nic_kind"] == "efa" and m["nic_bytes_per_s_per_gpu"] == pytest.approx(50e9)
    assert m["nic_source"].startswith(f"offer {P5}: 3,200 Gb/s per node / 8 GPUs")


def test_local_nvme_check_and_short_warning():
    m = _machine(storage="local-nvme")
    nvme = m["instance_checks"]["local_nvme"]
    assert nvme["local_nvme_bytes_per_node"] == 30.72e12 and nvme["status"] == "ok"
    parts = nvme["needed_parts_bytes"]
    assert nvme["needed_bytes_per_node"] == pytest.approx(parts["checkpoints_bytes"] + parts["staged_dataset_bytes"])
    # the dataset (1e10 tokens x 4 B: Llama 3's 128K vocabulary is int32) is staged over 2 nodes
    assert parts["staged_dataset_bytes"] == pytest.approx(1e10 * 4 / 2)
    big = _machine(storage="local-nvme", tokens="2e13")  # 80 TB of tokens, 40 TB per node + checkpoints
    assert big["instance_checks"]["local_nvme"]["status"] == "short"
    assert any(w.startswith("local NVMe: p5.48xlarge") for w in big["warnings"])


def test_host_ram_short_with_cpu_offload():
    """g4dn.xlarge: 16 GiB of RAM; ZeRO-Offload of an 8B model's optimizer states needs far more."""
    m = _machine(
        gpu="t4",
        gpus=1,
        offer="aws-g4dn.xlarge-us-east-1-ondemand",
        offload="optimizer",
        zero=1,
        precision="fp16-mixed",
    )
    assert m["instance_checks"]["host_ram"]["status"] == "short"
    assert m["host_ram_parts_bytes"]["cpu_offload_bytes"] > 16 * 2**30
    assert any(w.startswith("host RAM: g4dn.xlarge") for w in m["warnings"])


def test_unknown_figures_say_unknown_not_zero():
    m = _machine(offer="coreweave-hgx-h100-8x-north-america-ondemand")
    cpu = m["instance_checks"]["cpu"]
    assert cpu["status"] == "unknown" and "vcpus_per_node" not in cpu
    assert "vcpus" not in m["instance"] and m["warnings"] == []


def test_no_local_nvme_warns_with_local_nvme_storage():
    m = _machine(
        gpu="v100-sxm2-16gb",
        gpus=8,
        offer="aws-p3.16xlarge-us-east-1-ondemand",
        storage="local-nvme",
        precision="fp16-mixed",
    )
    assert m["instance_checks"]["local_nvme"]["status"] == "short"
    assert any("no local instance store" in w for w in m["warnings"])


def test_no_instance_block_without_an_offer():
    m = api.train("llama-3-8b", gpu="h100", gpus=16, tokens="1e10").to_dict()["machine"]
    assert not {"instance", "instance_checks", "warnings"} & set(m)


# ----------------------------------------------------------------------------------- --bytes-per-sample


def test_bytes_per_sample_is_per_sequence():
    """8,192 bytes per sample of 4,096 tokens = 2 bytes per token; the dataset follows."""
    m = api.train("llama-3-8b", gpu="h100", gpus=8, tokens="1e9", seq_len=4096, bytes_per_sample=8192).to_dict()[
        "machine"
    ]
    assert m["bytes_per_token"] == 2.0 and m["bytes_per_sample"] == 8192
    assert m["dataset_bytes"] == pytest.approx(2e9)
    assert m["bytes_per_token_source"].startswith("--bytes-per-sample")


def test_bytes_per_sample_and_per_token_exclude_each_other():
    with pytest.raises(InputError, match="--bytes-per-sample"):
        MachineOptions.from_flags(bytes_per_token=2, bytes_per_sample=8192)


def test_cli_bytes_per_sample(run):
    _, out, _ = run("train", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--help")
    assert "--bytes-per-sample" in out
    line = one_line_error(
        *run(
            "train",
            "llama-3-8b",
            "--gpu",
            "h100",
            "--tokens",
            "1B",
            "--bytes-per-token",
            "2",
            "--bytes-per-sample",
            "9",
        )
    )
    assert "--bytes-per-sample" in line


def test_cli_table_shows_the_instance_and_warnings(run):
    _, out, _ = run(
        "train",
        "llama-3-8b",
        "--gpu",
        "h100",
        "--gpus",
        "16",
        "--tokens",
        "20T",
        "--offer",
        P5,
        "--storage",
        "local-nvme",
    )
    assert "instance p5.48xlarge: 192 vCPUs vs 24 cores needed (ok)" in out
    assert "warning: local NVMe: p5.48xlarge" in out


# ------------------------------------------------------------------------------------------ serve scale-up


def test_serve_scale_up_only_for_a_fleet():
    m = api.serve("llama-3-8b", gpu="h100", qps=5).to_dict()["machine"]
    s = m["scale_up"]
    assert s["node_provisioning"] == "unknown"
    assert s["at_least_s"] == s["cold_start_s"] == m["cold_start_s"]
    assert "scale_up" not in api.serve("llama-3-8b", gpu="h100").to_dict()["machine"]
