"""The listing commands over a generated 1,000-entry catalog print exactly what they printed before the
issue #11 speed-ups (fast table writer, memoized figure keys and model figures, chunked finiteness check):
the digests below were taken from the previous code's output (the catalog folder's path replaced by
CATALOG, as JSON records name the file each entry came from). The gpus digests were retaken, on purpose, when
issue 15 added bundled accelerators and fields (sm_count, scale_up_domain_gpus, unified_memory) and stored the
GeForce capacities in GiB; the table code was checked unchanged against the old bundled data first. Retaken again
for the bundled h100-sxm-96gb entry (issue 13): without it the output still gives the previous digests. The
offers JSON digests were retaken when issue 17 added the scale_up, scale_up_bytes_per_s_per_gpu and
scale_up_domain_gpus keys to each offer record (the tables are unchanged). The gpus JSON digests were retaken when
issue #15 added the attention_flops_per_s and fp16_accumulate_factor keys (and their sources on the entries that
give them) to each accelerator record: the new output with those keys dropped gives the previous digests exactly
(5f40d835..., 4afc6b0e...); the tables are unchanged. All six gpus digests were retaken again for issue #15's
remaining gaps (RTX PRO 6000 Blackwell fp16/bf16/fp8 peaks and its TN-only fp8 layout, the Gaudi 2/3 scale-up
link as its 21 in-box ports with an 8-device domain, MI250/MI250X 4-OAM domains, the H20's SM count): the same
code on the previous bundled data still gives the previous digests (9ef84ec3..., 55f2861c..., 27498964...), and
the new output differs from it only in those six entries (JSON) and the gaudi2/gaudi3/rtx-pro-6000-blackwell
table rows. The two gpus JSON digests were retaken once more when issue #13 added tensor_flops_per_clock_per_sm,
exp2_per_clock_per_sm and host_link_bytes_per_s: the new records with those keys (and their sources) dropped equal
the previous code's records exactly; the tables are unchanged."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from bench_catalog_scale import write_catalogs

N = 1000

CASES = {
    "gpus": (["accelerators"], ["gpus", "list"]),
    "gpus-sort-mem": (["accelerators"], ["gpus", "list", "--sort", "memory", "--min-memory", "40GB"]),
    "offers": (["offers"], ["offers", "list"]),
    "offers-gpus": (["accelerators", "offers"], ["offers", "list"]),
    "offers-sort-provider": (["offers"], ["offers", "list", "--sort", "provider"]),
    "models": (["models"], ["model", "list"]),
    "models-fam": (["models"], ["model", "list", "--family", "fam3"]),
}

# sha256 (first 32 hex digits) of stdout; "@d": $COLUMNS unset (140 columns when piped), "@100": COLUMNS=100
DIGESTS = {
    "gpus@d": "d1cecf4db4955ddce2e47f7b3577d03e",
    "gpus@100": "c913dad62fe9dec7e3d725750d926f36",
    "gpus-json@d": "bb9356ac4d35fae7bbc91163a0ff3950",
    "gpus-sort-mem@d": "7edc386dd34e6c0b9067fa0c66a03c78",
    "gpus-sort-mem@100": "3476e7ed1cafd400416874aa0c3abbe8",
    "gpus-sort-mem-json@d": "c61bf163530dda4d138f1d9ed9546778",
    "offers@d": "2d857e2285bb2eea0d1ef0dfa0ad90ff",
    "offers@100": "4f8bc74ba611ce7745d7a6da7a6f2803",
    "offers-json@d": "1d8ac0e233dfe062d6a74913a1cc03ce",
    "offers-gpus@d": "2d857e2285bb2eea0d1ef0dfa0ad90ff",
    "offers-gpus@100": "4f8bc74ba611ce7745d7a6da7a6f2803",
    "offers-gpus-json@d": "1d8ac0e233dfe062d6a74913a1cc03ce",
    "offers-sort-provider@d": "717aea49697001b90d9ebe5701f83767",
    "offers-sort-provider@100": "2426d1c69a899881627cb23b9e5084f2",
    "models@d": "e1256e4055f61f18e2412020df08b9dd",
    "models@100": "398e92e87c58ff9d67a7e4241139af3b",
    "models-json@d": "28b92b80e831d4133b831baedfc10f3e",
    "models-fam@d": "6a6e772389ddb17779bb7921c8bd7d06",
    "models-fam@100": "35a06e57b77836e32e0102a2d62a299f",
    "models-fam-json@d": "25eb803b1acc719ed9406e0452faf288",
}


@pytest.fixture(scope="module")
def catalogs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("catalog1000")
    return folder, write_catalogs(folder, N)


@pytest.mark.parametrize("key", sorted(DIGESTS))
def test_list_output_is_unchanged(run, catalogs, monkeypatch, key):
    folder, files = catalogs
    name, columns = key.split("@")
    as_json = name.endswith("-json")
    kinds, args = CASES[name.removesuffix("-json")]
    if columns == "d":
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    cat = [x for k in kinds for x in ("--catalog", str(files[k]))]
    code, out, err = run(*cat, *args, *(["--json"] if as_json else []))
    assert code == 0, err
    digest = hashlib.sha256(out.encode().replace(str(folder).encode(), b"CATALOG")).hexdigest()[:32]
    assert digest == DIGESTS[key]
