"""The accelerators added for the coverage issue: each resolves, is sourced and dated, has sane dense peaks."""

from __future__ import annotations

import json
import re

import pytest

from conftest import BUNDLED_ACCELERATORS

ACCS = BUNDLED_ACCELERATORS

ADDED = [
    "h20",
    "a800-sxm-80gb",
    "gb300",
    "b300",
    "rtx-pro-6000-blackwell",
    "rtx-6000-ada",
    "l40",
    "l20",
    "rtx-4080",
    "rtx-3080",
    "rx-7900-xtx",
    "trainium2",
    "inferentia2",
    "tpu-v7",
    "h800",
    "rtx-4070-ti",
    "rtx-3060-12gb",
    "m2-ultra-192gb",
    "m3-max-128gb",
    "m4-max-128gb",
]

# consumer GDDR cards: sold as N GB, carrying N GiB
CONSUMER_GIB = {
    "rtx-4080": 16,
    "rtx-3080": 10,
    "rx-7900-xtx": 24,
    "rtx-pro-6000-blackwell": 96,
    "rtx-3090": 24,
    "rtx-4090": 24,
    "rtx-5090": 32,
    "rtx-4070-ti": 12,
    "rtx-3060-12gb": 12,
}

ALIASES = {
    "a800": "a800-sxm-80gb",
    "gb300-nvl72": "gb300",
    "hgx-b300": "b300",
    "rtx-pro-6000": "rtx-pro-6000-blackwell",
    "4080": "rtx-4080",
    "3080": "rtx-3080",
    "7900xtx": "rx-7900-xtx",
    "trn2": "trainium2",
    "inf2": "inferentia2",
    "ironwood": "tpu-v7",
    "tpu7x": "tpu-v7",
    "nvidia-h20": "h20",
    "nvidia-l40": "l40",
    "nvidia-l20": "l20",
    "h800-sxm": "h800",
    "4070ti": "rtx-4070-ti",
    "3060": "rtx-3060-12gb",
    "m2-ultra": "m2-ultra-192gb",
    "m3-max": "m3-max-128gb",
    "m4-max": "m4-max-128gb",
}


@pytest.mark.parametrize("acc_id", ADDED)
def test_added_id_resolves(acc_id):
    assert ACCS.get(acc_id).id == acc_id


@pytest.mark.parametrize("alias,acc_id", sorted(ALIASES.items()))
def test_added_alias_resolves_to_one_entry(alias, acc_id):
    assert ACCS.get(alias).id == acc_id


@pytest.mark.parametrize("acc_id", ADDED)
def test_every_figure_has_http_source_and_date(acc_id):
    acc = ACCS.get(acc_id)
    for key, _ in acc.figures():
        src = acc.source_for(key)
        assert src.url.startswith("http"), (acc_id, key)
        assert re.fullmatch(r"\d{4}(-\d{2}){0,2}", src.date), (acc_id, key)
        assert src.title.strip(), (acc_id, key)


@pytest.mark.parametrize("acc_id", ADDED)
def test_dense_peaks_are_monotone(acc_id):
    acc = ACCS.get(acc_id)
    chain = [d for d in ("fp32", "bf16", "fp8", "fp4") if acc.supports(d)]
    rates = [acc.peak(d) for d in chain]
    assert rates == sorted(rates), dict(zip(chain, rates, strict=True))
    if acc.supports("fp16") and acc.supports("bf16"):
        assert acc.peak("fp16") == acc.peak("bf16")


@pytest.mark.parametrize("acc_id,gib", sorted(CONSUMER_GIB.items()))
def test_consumer_gddr_capacity_is_exact_gib(acc_id, gib):
    acc = ACCS.get(acc_id)
    assert acc.memory_bytes == gib * 2**30
    if acc.memory_reported_bytes:
        assert acc.memory_reported_bytes <= acc.memory_bytes


def test_pci_device_ids_stay_unique_per_vendor_family():
    """No two catalog entries claim the same PCI device id (local detection matches on it)."""
    seen: dict[str, str] = {}
    for acc in ACCS:
        for pid in acc.pci_device_ids:
            assert pid not in seen, f"{pid} on {seen.get(pid)} and {acc.id}"
            seen[pid] = acc.id


def test_gpus_list_json_lists_the_added_entries(run):
    code, out, _ = run("gpus", "list", "--json")
    assert code == 0
    ids = {a["id"] for a in json.loads(out)["accelerators"]}
    assert set(ADDED) <= ids


# ---------------------------------------------------------------------------------------- second part


@pytest.mark.parametrize(
    "acc_id,gib,usable_gib,bandwidth",
    [("m2-ultra-192gb", 192, 144, 800e9), ("m3-max-128gb", 128, 96, 400e9), ("m4-max-128gb", 128, 96, 546e9)],
)
def test_apple_unified_memory_is_the_macs_ram_and_the_gpu_gets_its_default_share(acc_id, gib, usable_gib, bandwidth):
    """The RAM is shared with the CPU and the OS: plans use what Metal lets the GPU wire by default (75 %, the
    recommendedMaxWorkingSetSize llama.cpp logs on 96 and 128 GiB Macs), and that figure says it is derived."""
    acc = ACCS.get(acc_id)
    assert acc.vendor == "apple" and acc.unified_memory is True
    assert acc.memory_bytes == gib * 2**30
    assert acc.usable_memory_bytes == acc.memory_reported_bytes == usable_gib * 2**30
    assert acc.memory_bandwidth_bytes_per_s == bandwidth
    assert acc.source_for("memory_reported_bytes").estimated
    assert acc.peak("fp16") == acc.peak("fp32") and not acc.supports("bf16")


def test_m_series_peaks_apple_does_not_print_are_marked_estimated():
    assert not ACCS.get("m2-ultra-192gb").source_for("peak_flops_per_s.fp32").estimated  # Apple prints 27.2 TFLOPS
    for acc_id in ("m3-max-128gb", "m4-max-128gb"):
        src = ACCS.get(acc_id).source_for("peak_flops_per_s.fp32")
        assert src.estimated and src.title.startswith("estimated, not measured")


def test_h800_is_an_h100_with_nvlink_and_fp64_cut():
    h800, h100 = ACCS.get("h800"), ACCS.get("h100-sxm-80gb")
    for d in ("fp32", "tf32", "bf16", "fp8", "int8"):
        assert h800.peak(d) == h100.peak(d), d
    assert h800.peak("fp64") == 1e12
    assert h800.interconnect.bandwidth_bytes_per_s == 200e9 == h100.interconnect.bandwidth_bytes_per_s * 4 / 9
    assert (h800.sm_count, h800.scale_up_domain_gpus) == (132, 8)
    assert h800.source_for("peak_flops_per_s.bf16").estimated and not h800.source_for("peak_flops_per_s.fp64").estimated


@pytest.mark.parametrize("acc_id,fp32", [("rtx-4080", 48.74e12), ("rtx-4070-ti", 40.09e12)])
def test_ada_geforce_tensor_peaks_follow_the_4090_ratios_and_say_so(acc_id, fp32):
    """1 / 2 / 2 / 4 / 8 x FP32 for TF32 / FP16 / BF16 / FP8 / INT8 (RTX 4090: 82.6, 165.2, 330.3, 660.6 over
    82.58 TFLOPS FP32), to 0.1 %; each derived peak's source is marked estimated."""
    acc, ref = ACCS.get(acc_id), ACCS.get("rtx-4090")
    for d in ("tf32", "fp16", "bf16", "fp8", "int8"):
        assert acc.peak(d) / fp32 == pytest.approx(ref.peak(d) / ref.peak("fp32"), rel=1e-3), d
        assert acc.source_for(f"peak_flops_per_s.{d}").estimated, d


def test_consumer_capacity_raises_the_3090_kv_budget_to_the_4090s(run):
    """The RTX 3090 was planned on 24e9 bytes; it has 24 GiB and nvidia-smi reports all 24576 MiB, so it now
    plans 7.4 % more memory than before and at least as many sequences as the RTX 4090 (24564 MiB)."""
    acc = ACCS.get("rtx-3090")
    assert acc.usable_memory_bytes == 24 * 2**30 == 25_769_803_776
    assert acc.usable_memory_bytes / 24e9 == pytest.approx(1.0737, abs=1e-4)
    seqs = {}
    for gpu in ("rtx-3090", "rtx-4090"):
        code, out, _ = run("serve", "llama-3.1-8b", "--gpu", gpu, "--weights", "int4-awq", "--json")
        assert code == 0
        rec = json.loads(out)
        assert rec["memory"]["capacity_bytes"] == ACCS.get(gpu).usable_memory_bytes
        seqs[gpu] = rec["memory"]["max_concurrent_sequences"]
    assert seqs["rtx-3090"] >= seqs["rtx-4090"] > 0


# every NVIDIA and AMD data-center GPU whose count is sourced (the GB200's enabled count is not published)
SM_COUNTS = {
    "v100-sxm2-32gb": 80,
    "a100-sxm-80gb": 108,
    "a100-pcie-40gb": 108,
    "h100-sxm-80gb": 132,
    "h100-pcie-80gb": 114,
    "h200-sxm-141gb": 132,
    "b200": 148,
    "b300": 160,
    "h20": 78,
    "l4": 58,
    "l40s": 142,
    "mi300x": 304,
    "mi355x": 256,
}


@pytest.mark.parametrize("acc_id,n", sorted(SM_COUNTS.items()))
def test_sm_counts(acc_id, n):
    acc = ACCS.get(acc_id)
    assert acc.sm_count == n
    src = acc.source_for("sm_count")
    assert src is not acc.sources["default"] or acc.vendor == "amd"


def test_derived_sm_counts_say_how():
    assert ACCS.get("l4").source_for("sm_count").derivation.startswith("7,424 CUDA cores / 128")
    assert not ACCS.get("h100-sxm-80gb").source_for("sm_count").estimated


@pytest.mark.parametrize(
    "acc_id,n",
    [
        ("h100-sxm-80gb", 8),
        ("b200", 8),
        ("gb200", 72),
        ("gb300", 72),
        ("h100-nvl-94gb", 2),
        ("tpu-v5p", 8960),
        ("gaudi2", 8),
        ("gaudi3", 8),
        ("mi250", 4),
        ("mi250x", 4),
    ],
)
def test_scale_up_domains(acc_id, n):
    acc = ACCS.get(acc_id)
    assert acc.scale_up_domain_gpus == n and acc.interconnect is not None


def test_estimated_figures_say_so_in_every_output(run):
    """A figure that is not printed nor measured (here the H100 PCIe's MAMF, borrowed from the SXM row) carries
    'estimated, not measured' in the catalog's source, in gpus show, and in train's assumptions."""
    acc = ACCS.get("h100-pcie-80gb")
    src = acc.source_for("matmul_efficiency")
    assert src.estimated and src.title.startswith("estimated, not measured (another device's measurement")
    code, out, _ = run("gpus", "show", "h100-pcie-80gb", "--json")
    assert code == 0
    assert json.loads(out)["accelerator"]["sources"]["matmul_efficiency.bf16"]["derivation"]
    code, out, _ = run("train", "llama-3.1-8b", "--gpu", "h100-pcie-80gb", "--gpus", "8", "--tokens", "1B", "--json")
    assert code in (0, 3)
    used = [a for a in json.loads(out)["assumptions"] if a["name"] == "matmul_efficiency"]
    assert used and "estimated, not measured" in used[0]["source"]


@pytest.mark.parametrize(
    "extra,fragment",
    [
        ("unified_memory = true\n", "unified_memory = true needs memory_reported_bytes"),
        ("scale_up_domain_gpus = 8\n", "scale_up_domain_gpus = 8 but no interconnect"),
        ("sm_count = 0\n", "sm_count"),
    ],
)
def test_schema_checks_the_new_fields(tmp_path, extra, fragment):
    from gpuplan.catalog.accelerators import read_accelerator_file
    from gpuplan.errors import CatalogError

    f = tmp_path / "mine.toml"
    f.write_text(
        'schema_version = 1\n[[accelerator]]\nid = "acme-x1"\nname = "Acme X1"\nvendor = "other"\n'
        'architecture = "X"\nform_factor = "PCIe"\nyear = 2025\nmemory_bytes = 1_000_000_000_0\n'
        f'memory_type = "HBM"\nmemory_bandwidth_bytes_per_s = 1e12\n{extra}'
        "[accelerator.peak_flops_per_s]\nbf16 = 1e14\n"
        '[accelerator.sources.default]\ntitle = "t"\nurl = "https://example.com"\ndate = "2025-01"\n'
    )
    with pytest.raises(CatalogError) as err:
        read_accelerator_file(f)
    assert fragment in str(err.value)


def test_a_derivation_must_not_be_empty(tmp_path):
    from gpuplan.catalog.accelerators import read_accelerator_file
    from gpuplan.errors import CatalogError

    f = tmp_path / "mine.toml"
    f.write_text(
        'schema_version = 1\n[[accelerator]]\nid = "acme-x1"\nname = "Acme X1"\nvendor = "other"\n'
        'architecture = "X"\nform_factor = "PCIe"\nyear = 2025\nmemory_bytes = 10_000_000_000\n'
        'memory_type = "HBM"\nmemory_bandwidth_bytes_per_s = 1e12\n'
        "[accelerator.peak_flops_per_s]\nbf16 = 1e14\n"
        '[accelerator.sources.default]\ntitle = "t"\nurl = "https://example.com"\ndate = "2025-01"\nderivation = ""\n'
    )
    with pytest.raises(CatalogError) as err:
        read_accelerator_file(f)
    assert "derivation" in str(err.value)


def test_gpus_list_shows_the_second_part(run):
    code, out, _ = run("gpus", "list", "--json")
    ids = {a["id"] for a in json.loads(out)["accelerators"]}
    assert {"h800", "rtx-4070-ti", "rtx-3060-12gb", "m2-ultra-192gb", "m3-max-128gb", "m4-max-128gb"} <= ids
    code, out, _ = run("gpus", "list", "--vendor", "apple", "--json")
    assert code == 0 and {a["id"] for a in json.loads(out)["accelerators"]} == {
        "m2-ultra-192gb",
        "m3-max-128gb",
        "m4-max-128gb",
    }


def test_no_lookup_by_id_prefix():
    """'h8' or 'm4' is no accelerator: ids and aliases match whole, never by prefix."""
    from gpuplan.errors import UnknownIdError

    for name in ("h8", "m4", "rtx-40", "m2-ul"):
        with pytest.raises(UnknownIdError):
            ACCS.get(name)


# ---------------------------------------------------------------------------------------- third part (gaps)


def test_rtx_pro_6000_tensor_peaks_come_from_its_fp4_figure_and_say_so():
    """NVIDIA prints only the FP4 figure (4,000 AI TOPS sparse -> 2,000 dense): FP8 is half of it and FP16/BF16
    a quarter (the RTX 5090's whitepaper ratios), within 1 % of a database's clock-based 503.8 / 1,007.6; each
    derived peak names its derivation, the printed FP4 one does not."""
    acc = ACCS.get("rtx-pro-6000-blackwell")
    assert acc.peak("fp4") == 2000e12 and not acc.source_for("peak_flops_per_s.fp4").estimated
    assert acc.peak("fp8") == acc.peak("fp4") / 2
    assert acc.peak("bf16") == acc.peak("fp16") == acc.peak("fp4") / 4
    assert acc.peak("bf16") == pytest.approx(503.8e12, rel=0.01)
    assert acc.peak("fp8") == pytest.approx(1007.6e12, rel=0.01)
    for d in ("fp16", "bf16", "fp8"):
        assert acc.source_for(f"peak_flops_per_s.{d}").estimated, d
    assert acc.fp16_accumulate_factor is None  # an RTX PRO part accumulates in fp32 at the full rate
    ref = ACCS.get("rtx-5090")  # same 4:2:1 ratio on the GeForce sibling, at FP16 accumulate
    assert ref.peak("fp4") / (ref.peak("fp16") * ref.fp16_accumulate_factor) == pytest.approx(4, rel=1e-3)


@pytest.mark.parametrize("acc_id", ["rtx-6000-ada", "l20"])
def test_tensor_peaks_not_found_stay_absent(acc_id):
    """No vendor tensor figure was found for these AD102 cards, and the L40 / L40S pair disagree by 2x on the same
    die (to 0.1 %), so no peak is guessed: the card lists fp32 only."""
    acc = ACCS.get(acc_id)
    assert set(acc.peak_flops_per_s) == {"fp32"}
    assert ACCS.get("l40s").peak("bf16") == pytest.approx(2 * ACCS.get("l40").peak("bf16"), rel=1e-3)


@pytest.mark.parametrize("acc_id,ports,gbps", [("gaudi2", 21, 100), ("gaudi3", 21, 200)])
def test_gaudi_scale_up_is_the_21_all_to_all_ports(acc_id, ports, gbps):
    """An HLS box joins 8 accelerators all-to-all with 21 of each one's 24 on-chip ports (3 per peer); the other 3
    leave the box, so the scale-up link is 21 ports, per direction (Gaudi 3: 525 GB/s, Intel's figure)."""
    acc = ACCS.get(acc_id)
    assert acc.scale_up_domain_gpus == 8 == (ports // 3) + 1
    assert acc.interconnect.links == ports
    assert acc.interconnect.bandwidth_bytes_per_s == ports * gbps * 1e9 / 8
    assert acc.source_for("scale_up_domain_gpus").url.startswith("https://docs.habana.ai/")
    assert acc.source_for("scale_up_domain_gpus").estimated == (acc_id == "gaudi2")


def test_mi250_domain_counts_oams_not_gcds():
    """The entries are per OAM (two GCDs each, 128 GB): a node's 8 GCDs are 4 of these devices."""
    for acc_id in ("mi250", "mi250x"):
        acc = ACCS.get(acc_id)
        assert acc.memory_bytes == 128e9 and acc.scale_up_domain_gpus == 4
        assert "4 OAMs" in acc.source_for("scale_up_domain_gpus").derivation


def test_gb200_has_no_borrowed_sm_count():
    """Kernel code run on GB200 reports 152 SMs, not the B200's 148, and no primary source was found: absent, so
    the SM-contention term is left out rather than computed from a borrowed count."""
    assert ACCS.get("gb200").sm_count is None


@pytest.mark.parametrize(
    "floor,apple",
    [("100GB", {"m2-ultra-192gb", "m3-max-128gb", "m4-max-128gb"}), ("110GB", {"m2-ultra-192gb"}), ("160GB", set())],
)
def test_min_memory_compares_a_macs_gpu_share_not_its_ram(run, floor, apple):
    """A 128 GiB Mac (137.4 GB of RAM) lets the GPU wire 96 GiB (103.1 GB) by default, the M2 Ultra 144 of 192 GiB
    (154.6 of 206.2 GB): --min-memory keeps a Mac only if that share reaches the floor, the memory a model can be
    given. Discrete cards are compared on their marketed memory, as before."""
    code, out, _ = run("gpus", "list", "--min-memory", floor, "--json")
    assert code == 0
    rows = json.loads(out)["accelerators"]
    assert {a["id"] for a in rows if a["vendor"] == "apple"} == apple
    for a in rows:
        kept = a["memory_reported_bytes"] if a.get("unified_memory") else a["memory_bytes"]
        assert kept >= float(floor[:-2]) * 1e9, a["id"]
    code, out, _ = run("gpus", "list", "--min-memory", "80GiB", "--json")
    ids = {a["id"] for a in json.loads(out)["accelerators"]}
    assert "a100-sxm-80gb" not in ids  # 80e9 marketed < 80 GiB, though its driver reports 80 GiB
