"""Large catalogs (2,000 entries, above the cache's size floor and the compact-JSON threshold): the catalog
cache and the fast output paths give exactly what the plain paths give. No timings here: see
scripts/bench_catalog_scale.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from bench_catalog_scale import write_catalogs

N = 2000


@pytest.fixture
def big(tmp_path):
    return write_catalogs(tmp_path, N)


def _cache_entries() -> list[str]:
    d = Path(os.environ["XDG_CACHE_HOME"]) / "gpuplan" / "catalog"
    return sorted(os.listdir(d)) if d.is_dir() else []


@pytest.mark.parametrize(
    "kind, args", [("accelerators", ["gpus", "list"]), ("offers", ["offers", "list"]), ("models", ["model", "list"])]
)
def test_cache_and_fast_paths_match_plain(run, big, monkeypatch, kind, args):
    cat = ["--catalog", str(big[kind])]
    monkeypatch.setenv("GPUPLAN_NO_CACHE", "1")
    plain_table = run(*cat, *args)
    plain_json = run(*cat, *args, "--json")
    assert plain_table[0] == 0 and not _cache_entries()
    monkeypatch.delenv("GPUPLAN_NO_CACHE")
    cold = run(*cat, *args), run(*cat, *args, "--json")
    assert any(e.startswith(kind) for e in _cache_entries()) and any(e.startswith("kind") for e in _cache_entries())
    warm = run(*cat, *args), run(*cat, *args, "--json")
    for table, js in (cold, warm):
        assert table == plain_table
        assert json.loads(js[1]) == json.loads(plain_json[1])
    # more than 1,000 rows: compact JSON on one line, the same content as the indented form
    assert warm[1][1].count("\n") == 1
    from gpuplan.cli import _common

    assert _common._LARGE_ROWS < N


def test_damaged_or_changed_cache_falls_back(run, big):
    cat = ["--catalog", str(big["accelerators"])]
    first = run(*cat, "gpus", "show", "sg7", "--json")
    d = Path(os.environ["XDG_CACHE_HOME"]) / "gpuplan" / "catalog"
    for entry in d.iterdir():
        entry.write_bytes(b"not a pickle")
    assert run(*cat, "gpus", "show", "sg7", "--json") == first
    # an edited file is read again, never served from the cache
    data = json.loads(big["accelerators"].read_text())
    data["accelerator"][7]["name"] = "Renamed GPU"
    big["accelerators"].write_text(json.dumps(data))
    code, out, _ = run(*cat, "gpus", "show", "sg7", "--json")
    assert code == 0 and json.loads(out)["accelerator"]["name"] == "Renamed GPU"


def test_config_folder_skipped_entries_replayed_from_cache(run, big):
    conf = Path(os.environ["GPUPLAN_CONFIG_DIR"])
    data = json.loads(big["accelerators"].read_text())
    data["accelerator"][5]["memory_bytes"] = -1
    (conf / "accelerators.json").write_text(json.dumps(data))
    results = [run("gpus", "show", "scale-gpu-5") for _ in range(2)]
    assert any(e.startswith("accelerators") for e in _cache_entries())
    for code, _, err in results:
        assert code == 2 and "scale-gpu-5" in err and "memory_bytes" in err
    assert results[0] == results[1]
    assert run("gpus", "show", "scale-gpu-6")[0] == 0


def test_rank_reuses_plans_per_gpu_count_and_network():
    from gpuplan.catalog import load_accelerators, load_models
    from gpuplan.plan.training import plan_training, rank_offers
    from gpuplan.spec.accelerator import Source
    from gpuplan.spec.offer import Offer
    from gpuplan.spec.training import Parallelism, TrainingJob

    accs, model = load_accelerators(), load_models().get("llama-3.1-8b")
    src = Source("t", "https://example.com", "2026-01")
    offers = [
        Offer(
            id=f"o{i}",
            provider="p",
            instance=f"i{i}",
            region="r",
            gpu=g,
            gpu_count=c,
            usd_per_hour=10 + i,
            pricing="on-demand",
            price_date="2026-01",
            source=src,
            scale_out_bytes_per_s=net,
        )
        for i, (g, c, net) in enumerate(
            [
                ("h100-sxm-80gb", 8, None),
                ("h100-sxm-80gb", 8, None),
                ("h100-sxm-80gb", 4, None),
                ("h100-sxm-80gb", 8, 400e9),
                ("a100-sxm-80gb", 8, None),
                ("h100-sxm-80gb", 8, None),
            ]
        )
    ]
    layout, job = Parallelism(gpus=8, zero=3), TrainingJob(seq_len=4096)
    ranked = rank_offers(model, offers, accs, layout, job, 1e12)
    assert len(ranked) == len(offers)
    for r in ranked:
        alone = rank_offers(model, [r.offer], accs, layout, job, 1e12)[0]
        assert r.fits == alone.fits and r.reason == alone.reason
        if r.fits:
            assert r.plan == alone.plan and r.plan.offer is r.offer
            assert r.plan.usd_per_gpu_hour == r.offer.usd_per_gpu_hour
    fits = [r for r in ranked if r.fits]
    assert [r.plan.usd for r in fits] == sorted(r.plan.usd for r in fits)
    direct = plan_training(model, accs.get("h100-sxm-80gb"), layout, job, 1e12, offer=offers[5])
    assert next(r for r in ranked if r.offer.id == "o5").plan == direct
