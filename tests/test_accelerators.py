"""The accelerator catalog against the datasheet figures in src/gpuplan/data/validation/accelerators.json."""

from __future__ import annotations

import re

import pytest

from conftest import BUNDLED_ACCELERATORS
from gpuplan.catalog import load_accelerators
from gpuplan.spec.accelerator import DTYPES

ACCS = BUNDLED_ACCELERATORS


def pytest_generate_tests(metafunc):
    """Every catalog entry as a parameter, read at collection (after conftest isolated the environment)."""
    if "acc" in metafunc.fixturenames:
        metafunc.parametrize("acc", list(ACCS), ids=lambda a: a.id)


REQUIRED_IDS = [
    "v100-sxm2-32gb",
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "a100-pcie-80gb",
    "h100-sxm-80gb",
    "h100-pcie-80gb",
    "h100-nvl-94gb",
    "h200-sxm-141gb",
    "b200",
    "l4",
    "l40s",
    "a10g",
    "t4",
    "rtx-4090",
    "mi300x",
    "mi325x",
    "gaudi3",
    "tpu-v5p",
    "tpu-v6e",
]
# named by the seeds (K80, P100, M60, A10) and current parts the issue lists: these names must resolve
# (to one entry, or ambiguously to their variants)
ALSO_NAMED = ["k80", "p100", "m60", "a10", "gb200", "h200 nvl", "rtx 5090", "mi355x", "tpu v6e", "gaudi 3"]


def _binary_figure(memory_bytes: int, printed_gb: float) -> bool:
    """True where the catalog holds a whole number of GiB that the record prints as that number."""
    return memory_bytes % 2**30 == 0 and memory_bytes // 2**30 == printed_gb


def _summary_checks(summary: dict):
    """(validation key, catalog getter, scale) for every summary figure the catalog also holds."""
    for key, value in summary.items():
        if key == "memory_gb":
            # the vendor's "24 GB": 24e9 bytes of HBM, or 24 GiB of GDDR on a GeForce card (the bytes it means);
            # a record that prints the bytes in decimal GB (TPU v4's 34.36 for 32 GiB) compares as printed
            yield (
                key,
                value,
                (lambda v: lambda a: a.memory_bytes / (2**30 if _binary_figure(a.memory_bytes, v) else 1e9))(value),
                1,
            )
        elif key == "memory_bandwidth_gbps":
            yield key, value, lambda a: a.memory_bandwidth_bytes_per_s, 1e9
        elif key == "tdp_w":
            yield key, value, lambda a: a.tdp_w, 1
        elif m := re.fullmatch(r"(\w+?)_(?:dense_)?(tflops|tops)", key):
            dtype = m.group(1)
            assert dtype in DTYPES, key
            yield key, value, (lambda d: lambda a: a.peak(d))(dtype), 1e12
        else:
            raise AssertionError(f"unmapped validation key {key}")


def test_every_validation_figure_matches(validation):
    """Each figure that both hold is equal, to the 4 significant digits datasheets print (rel 5e-4)."""
    records = validation("accelerators")["records"]
    assert len(records) == 29
    checked = 0
    for rec in records:
        acc = ACCS.get(rec["id"])  # validation ids are aliases of the catalog entries
        for key, expected, get, scale in _summary_checks(rec["summary"]):
            got = get(acc)
            assert got is not None, f"{acc.id}: no {key}"
            assert got / scale == pytest.approx(expected, rel=5e-4), f"{acc.id}.{key}"
            checked += 1
    assert checked >= 150


@pytest.mark.parametrize("acc_id", REQUIRED_IDS)
def test_required_ids(acc_id):
    assert ACCS.get(acc_id).id == acc_id


@pytest.mark.parametrize("name", ALSO_NAMED)
def test_named_parts_resolve(name):
    assert ACCS.matches(name) or ACCS.matches(name.replace(" ", "-")), name


def test_catalog_size_and_vendors():
    assert len(ACCS) >= 40
    assert {a.vendor for a in ACCS} == {"nvidia", "amd", "intel", "google", "apple", "other"}


def test_entry_is_sourced_and_sane(acc):
    for key, _ in acc.figures():
        src = acc.source_for(key)
        assert src.url.startswith("http") and re.fullmatch(r"\d{4}(-\d{2}){0,2}", src.date), key
    assert acc.peak_flops_per_s, "no peak at all"
    # dense figures: reduced precision is never slower than higher precision on the same device
    chain = [d for d in ("fp32", "bf16", "fp8", "fp4") if acc.supports(d)]
    rates = [acc.peak(d) for d in chain]
    assert rates == sorted(rates), dict(zip(chain, rates, strict=True))
    if acc.memory_reported_bytes and acc.unified_memory:
        # shared with the CPU and the OS: the GPU's default share (macOS: 75 % above 36 GB)
        assert 0.5 <= acc.memory_reported_bytes / acc.memory_bytes <= 0.9
    elif acc.memory_reported_bytes:
        assert 0.85 < acc.memory_reported_bytes / acc.memory_bytes < 1.15
    if acc.interconnect:
        assert acc.interconnect.bandwidth_bytes_per_s > 0
    assert 1e9 < acc.memory_bytes < 1e12 and 1e10 < acc.memory_bandwidth_bytes_per_s < 1e14


def test_ambiguous_short_name_lists_choices():
    from gpuplan.errors import AmbiguousIdError

    with pytest.raises(AmbiguousIdError) as e:
        ACCS.get("a100")
    assert {"a100-sxm-40gb", "a100-sxm-80gb"} <= set(e.value.choices)


def test_h100_alias_is_the_sxm_part():
    assert ACCS.get("H100").id == "h100-sxm-80gb"


@pytest.mark.parametrize(
    "acc_id,expected_bytes_per_s",
    [
        ("h100-sxm-80gb", 450e9),  # NVLink 4: the catalog's scale-up link
        ("h100-pcie-80gb", 63e9),  # no NVLink in the catalog: PCIe Gen 5 x16, one direction
        ("a100-pcie-80gb", 31.5e9),  # PCIe Gen 4 x16
        ("t4", 15.75e9),  # PCIe Gen 3 x16
    ],
)
def test_scale_up_bandwidth_falls_back_to_pcie_by_generation(acc_id, expected_bytes_per_s):
    """Tensor-parallel and all-reduce times use the scale-up link, else PCIe x16 of the card's generation."""
    assert load_accelerators().get(acc_id).scale_up_bytes_per_s == pytest.approx(expected_bytes_per_s, rel=1e-9)
