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
]

# consumer GDDR cards: sold as N GB, carrying N GiB
CONSUMER_GIB = {"rtx-4080": 16, "rtx-3080": 10, "rx-7900-xtx": 24, "rtx-pro-6000-blackwell": 96}

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
