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
    assert counts == {
        "vcpus": 60,
        "host_memory_bytes": 60,
        "local_nvme_bytes": 27,  # AWS 20, Azure 3, Lambda 4
        "local_nvme_read_bytes_per_s": 0,
        "local_nvme_write_bytes_per_s": 0,
        "nic_kind": 45,  # AWS 14, Azure 3, GCP 24, CoreWeave 4
        "scale_out_bytes_per_s": 22,  # AWS 17, Azure 3, GCP 2
        "scale_up": 76,
        "scale_up_bytes_per_s_per_gpu": 0,  # no bundled instance's link differs from its accelerator's
        "scale_up_domain_gpus": 0,
    }


#: (offer, field, value, a piece of its source's URL): the non-AWS figures, each from the provider's own pages
#: (Microsoft Learn's sources on GitHub, Google Cloud's docs) or a dated verbatim transcription (Lambda).
PROVIDER_FIGURES = [
    ("azure-standard_nc24ads_a100_v4-eastus-ondemand", "local_nvme_bytes", 960e9, "MicrosoftDocs/azure-docs"),
    ("azure-standard_nc24ads_a100_v4-eastus-ondemand", "nic_kind", "ethernet", "MicrosoftDocs/azure-docs"),
    ("azure-standard_nc24ads_a100_v4-eastus-ondemand", "scale_out_bytes_per_s", 20e9 / 8, "azure-compute-docs"),
    ("azure-standard_nd96asr_v4-eastus-ondemand", "local_nvme_bytes", 6000 * 2**30, "nda100-v4-series.md"),
    ("azure-standard_nd96asr_v4-eastus-ondemand", "nic_kind", "infiniband", "nda100-v4-series.md"),
    ("azure-standard_nd96asr_v4-eastus-ondemand", "scale_out_bytes_per_s", 8 * 200e9 / 8, "nda100-v4-series.md"),
    ("azure-standard_nd96isr_h100_v5-eastus-ondemand", "local_nvme_bytes", 28 * 2**40, "ndh100v5-series.md"),
    ("gcp-a3-ultragpu-8g-us-central1-ondemand", "scale_out_bytes_per_s", 3200e9 / 8, "gpu-network-bandwidth"),
    ("gcp-a3-highgpu-8g-us-central1-spot", "nic_kind", "gpudirect-tcpx", "gpu-network-bandwidth"),
    ("gcp-a2-ultragpu-8g-us-central1-ondemand", "nic_kind", "ethernet", "gpu-network-bandwidth"),
    ("gcp-g2-standard-96-us-central1-reserved-3y", "nic_kind", "ethernet", "gpu-network-bandwidth"),
    ("lambda-gpu_8x_h100_sxm5-us-east-1-ondemand", "local_nvme_bytes", 22 * 2**40, "api-evangelist/lambda-labs"),
    ("lambda-gpu_8x_a100_80gb_sxm4-us-east-1-ondemand", "local_nvme_bytes", 19.5 * 2**40, "lambda-labs"),
    ("lambda-gpu_8x_b200_sxm6-us-east-1-ondemand", "local_nvme_bytes", 22 * 2**40, "lambda-labs"),
    ("lambda-gpu_1x_h100_sxm5-us-east-1-ondemand", "local_nvme_bytes", 2.75 * 2**40, "lambda-labs"),
]


@pytest.mark.parametrize(("offer_id", "name", "value", "url_part"), PROVIDER_FIGURES)
def test_provider_figures_and_their_sources(offers, offer_id, name, value, url_part):
    o = offers.get(offer_id)
    assert getattr(o, name) == value
    src = o.source_for(name)
    assert url_part in src.url and src.url.startswith("https://") and src.date
    assert src is not o.source  # the hardware figure cites its own page, not the price's


def test_figures_no_source_gives_stay_absent(offers):
    """What no source read states is absent (None), never 0: GCP's bundled Local SSD and A3 High/A2/G2 NIC
    bandwidth, Lambda's NICs and its 1x A100's disk, CoreWeave's H100/H200/A100 host and disks, RunPod's host."""
    absent = [
        ("gcp-a3-highgpu-8g-us-central1-ondemand", ("local_nvme_bytes", "scale_out_bytes_per_s")),
        ("gcp-a2-ultragpu-8g-us-central1-ondemand", ("local_nvme_bytes", "scale_out_bytes_per_s")),
        ("lambda-gpu_8x_h100_sxm5-us-east-1-ondemand", ("nic_kind", "scale_out_bytes_per_s")),
        ("lambda-gpu_1x_a100_sxm4-us-east-1-ondemand", ("local_nvme_bytes",)),
        ("coreweave-hgx-h100-8x-north-america-ondemand", ("vcpus", "host_memory_bytes", "local_nvme_bytes")),
        ("runpod-1x-h100-sxm-secure-global-ondemand", ("vcpus", "host_memory_bytes", "nic_kind")),
    ]
    for offer_id, names in absent:
        o = offers.get(offer_id)
        for name in names:
            assert getattr(o, name) is None, (offer_id, name)
            assert name not in o.hardware_sources()
        if o.scale_out_bytes_per_s is None:
            assert o.scale_out_bytes_per_s_per_gpu is None  # a derived figure of an absent one is absent too


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


def test_scale_up_fields_are_checked(tmp_path, accelerators):
    (o,) = _one_offer(
        tmp_path,
        accelerators,
        "scale_up_bytes_per_s_per_gpu = 300e9\nscale_up_domain_gpus = 2\nsources = { scale_up_domain_gpus = "
        '{ title = "NVLink bridge pairs", url = "https://example.com/pairs", date = "2026-05" } }\n',
    )
    assert o.scale_up_bytes_per_s_per_gpu == 300e9 and o.scale_up_domain_gpus == 2
    assert o.source_for("scale_up_domain_gpus").title == "NVLink bridge pairs"
    assert o.to_dict()["scale_up_domain_gpus"] == 2
    bad = [
        ("scale_up_bytes_per_s_per_gpu = 0\n", "scale_up_bytes_per_s_per_gpu"),  # absent is left out, never 0
        ("scale_up_bytes_per_s_per_gpu = -1e9\n", "scale_up_bytes_per_s_per_gpu"),
        ("scale_up_domain_gpus = 0\n", "scale_up_domain_gpus"),
        ("scale_up_domain_gpus = 2.5\n", "scale_up_domain_gpus"),
        ("scale_up_domain_gpus = 1\nscale_up_bytes_per_s_per_gpu = 450e9\n", "no GPU-to-GPU link"),
        (
            'sources = { scale_up_domain_gpus = { title = "x", url = "https://x", date = "2026" } }\n',
            "does not give",
        ),
    ]
    for extra, match in bad:
        with pytest.raises(CatalogError, match=match):
            _one_offer(tmp_path, accelerators, extra)


def test_offer_accelerator_link(offers, accelerators):
    """The offer's link replaces the accelerator's; a domain of 1, or a tensor-parallel group wider than the
    domain, falls back to the card's PCIe (H100 SXM: Gen 5 x16 = 63 GB/s); no figure leaves the GPU as it is."""
    from dataclasses import replace

    from gpuplan.plan.training import offer_accelerator

    h100 = accelerators.get("h100-sxm-80gb")
    p5 = offers.get(P5)
    assert offer_accelerator(p5, h100, 8) is h100
    slow = replace(p5, scale_up_bytes_per_s_per_gpu=100e9)
    assert offer_accelerator(slow, h100, 8).scale_up_bytes_per_s == 100e9
    pcie = replace(h100, interconnect=None).scale_up_bytes_per_s
    assert pcie == pytest.approx(63e9, rel=0.01)
    assert offer_accelerator(replace(p5, scale_up_domain_gpus=1), h100, 1).scale_up_bytes_per_s == pcie
    pairs = replace(p5, scale_up_domain_gpus=2, scale_up_bytes_per_s_per_gpu=300e9)
    assert offer_accelerator(pairs, h100, 2).scale_up_bytes_per_s == 300e9
    assert offer_accelerator(pairs, h100, 4).scale_up_bytes_per_s == pcie
    assert offer_accelerator(replace(p5, scale_up_domain_gpus=8), h100, 8) is h100  # no bandwidth: the GPU's


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


def _user_offer(tmp_path, **fields):
    """A copy of the p5 row under a new id with ``fields`` added: a user's offers file."""
    doc = tomllib.loads(OFFERS.read_text())
    row = next(r for r in doc["offer"] if r["id"] == P5)
    lines = [f"{k} = {_toml(v)}" for k, v in row.items() if k not in ("id", "source", "sources")]
    lines += [f"{k} = {_toml(v)}" for k, v in fields.items()]
    src = row["source"]
    path = tmp_path / "my-offers.toml"
    path.write_text(
        'schema_version = 1\n[[offer]]\nid = "my-p5"\n'
        + "\n".join(lines)
        + f'\nsource = {{ title = "t", url = "{src["url"]}", date = "{src["date"]}" }}\n'
    )
    return path


def test_instance_scale_up_check_and_step_time(tmp_path):
    """NVLink pairs (domain 2) under tensor parallelism 8: a warning, and the all-reduces over PCIe make the
    step's tensor-parallel communication slower than on the stock p5; a slower NVLink figure slows it too. No
    domain given: no check."""
    args = dict(gpu="h100", gpus=16, tokens="1e10", tp=8, model="llama-3-70b", zero=1)

    def run(offer, catalog=None):
        m = dict(args)
        model = m.pop("model")
        r = api.train(model, offer=offer, catalog=catalog, **m).to_dict()
        return r["machine"], r["time"]["step_parts_s"]["tp_comm"]

    stock, stock_s = run(P5)
    assert "scale_up" not in stock["instance_checks"]
    pairs, pairs_s = run("my-p5", _user_offer(tmp_path, scale_up_domain_gpus=2, scale_up_bytes_per_s_per_gpu=300e9))
    check = pairs["instance_checks"]["scale_up"]
    assert check == {
        "tensor_parallel_gpus": 8,
        "scale_up_domain_gpus": 2,
        "scale_up_bytes_per_s_per_gpu": 300e9,
        "status": "short",
    }
    assert any(w.startswith("NVLink: p5.48xlarge (my-p5) joins 2 GPUs") for w in pairs["warnings"])
    assert pairs["instance"]["scale_up_domain_gpus"] == 2 and pairs_s > stock_s
    slow, slow_s = run("my-p5", _user_offer(tmp_path, scale_up_bytes_per_s_per_gpu=100e9))
    assert "scale_up" not in slow["instance_checks"] and slow_s > stock_s
    assert "scale_up_domain_gpus" not in slow["instance"]  # absent stays absent in --json, never 0


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
    """Per added replica: node boot (unknown: no offer publishes it, so absent and the sum a lower bound) + the
    weights' cold start + the engine warm-up (vLLM's 34 s, sourced in the assumptions list)."""
    r = api.serve("llama-3-8b", gpu="h100", qps=5)
    m = r.to_dict()["machine"]
    s = m["scale_up"]
    assert s["node_provisioning"] == "unknown"
    assert "per_replica_s" not in s and "instance_boot_s" not in s  # unknown: absent, never 0
    assert s["cold_start_s"] == m["cold_start_s"]
    assert s["engine_warmup_s"] == 34.0
    assert s["at_least_s"] == pytest.approx(m["cold_start_s"] + 34.0, rel=1e-12)
    names = {a.name for a in r.machine.assumptions}
    assert "engine_warmup_s" in names and "instance_boot_s" not in names  # unknown: no value to list
    no_fleet = api.serve("llama-3-8b", gpu="h100")
    assert "scale_up" not in no_fleet.to_dict()["machine"]
    assert "engine_warmup_s" not in {a.name for a in no_fleet.machine.assumptions}


def test_serve_scale_up_with_a_known_boot_time():
    """With a boot time (here 240 s) the per-replica time is complete: boot + cold start + warm-up."""
    from gpuplan.catalog.session import Catalogs
    from gpuplan.estimate.machine import MachineAssumptions
    from gpuplan.plan.machine import serve_machine

    r = api.serve("llama-3-8b", gpu="h100", qps=5)
    gpu = Catalogs(()).accelerators().get("h100")
    m = serve_machine(gpu, r.layout, r.serving, assumptions=MachineAssumptions(instance_boot_s=240.0), qps=5.0)
    s = m.to_dict()["scale_up"]
    assert s["node_provisioning"] == "known"
    assert s["per_replica_s"] == pytest.approx(240.0 + s["cold_start_s"] + 34.0, rel=1e-12) == s["at_least_s"]
    assert mx.replica_start_s(10.0, 34.0) == (44.0, False)
    assert mx.replica_start_s(10.0, 34.0, 0.0) == (44.0, True)


# ----------------------------------------------------------------------------------------- serve --offer


def _serve(model="llama-3.1-8b", **kw):
    return api.serve(model, **kw).to_dict()["machine"]


def test_serve_instance_checks_ok_on_p5():
    """Llama 3.1 70B at tp 4 on a p5 node: RAM need = max(4 x 80 GB floor, the weights of 4 GPUs) = 320 GB vs
    2 TiB; the replica's weight files vs 30.72 TB of NVMe."""
    m = _serve("llama-3.1-70b", gpu="h100", tp=4, offer=P5)
    ram, disk = m["instance_checks"]["host_ram"], m["instance_checks"]["local_disk"]
    assert ram == {"needed_bytes_per_node": 320e9, "host_memory_bytes_per_node": 2**41, "status": "ok"}
    assert disk["needed_bytes_per_node"] == m["disk_bytes_per_node"] and disk["status"] == "ok"
    assert disk["local_nvme_bytes_per_node"] == 30.72e12 and m["warnings"] == []
    assert m["instance"]["offer"] == P5 and m["instance"]["gpus_per_node"] == 8


def test_serve_host_ram_short_warns():
    """g5.xlarge: 16 GiB of RAM under one 24 GB A10G (the 1 x GPU memory floor): short, with a warning."""
    m = _serve(gpu="a10g", offer="aws-g5.xlarge-us-east-1-ondemand")
    ram = m["instance_checks"]["host_ram"]
    assert ram["status"] == "short" and ram["host_memory_bytes_per_node"] == 16 * 2**30
    assert ram["needed_bytes_per_node"] == 24e9
    name = "g5.xlarge (aws-g5.xlarge-us-east-1-ondemand)"
    assert [w for w in m["warnings"] if w.startswith(f"host RAM: {name} has 17 GB; one replica needs 24 GB")]


def test_serve_no_local_store_warns():
    """p3.2xlarge is EBS only (a sourced 0): the disk check is short and says the weights load from network
    storage."""
    m = _serve("llama-3.2-3b", gpu="v100-sxm2-16gb", weights="fp16", offer="aws-p3.2xlarge-us-east-1-ondemand")
    assert m["instance_checks"]["local_disk"]["status"] == "short"
    assert m["instance_checks"]["local_disk"]["local_nvme_bytes_per_node"] == 0
    assert any("has no local instance store" in w for w in m["warnings"])


def test_serve_unknown_figures_say_unknown_not_zero():
    m = _serve(gpu="h100", offer="coreweave-hgx-h100-8x-north-america-ondemand")
    for check in m["instance_checks"].values():
        assert check["status"] == "unknown"
    assert "host_memory_bytes_per_node" not in m["instance_checks"]["host_ram"]
    assert "local_nvme_bytes_per_node" not in m["instance_checks"]["local_disk"]
    assert not {"vcpus", "host_memory_bytes", "local_nvme_bytes"} & set(m["instance"]) and m["warnings"] == []


def test_serve_without_offer_has_no_instance():
    assert not {"instance", "instance_checks", "warnings"} & set(_serve(gpu="h100"))


def test_cli_serve_table_shows_the_instance_and_warning(run):
    _, out, _ = run("serve", "llama-3.1-8b", "--gpu", "a10g", "--offer", "aws-g5.xlarge-us-east-1-ondemand")
    assert "instance g5.xlarge: 17 GB RAM vs 24 GB needed (short); local NVMe 250 GB vs 16.1 GB of weights (ok)" in out
    assert "warning: host RAM: g5.xlarge" in out
