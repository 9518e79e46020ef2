"""Large catalogs (2,000 entries, above the cache's size floor and the compact-JSON threshold): the catalog
cache (entries built a part at a time, listing rows made once per catalog) and the fast output paths give
exactly what the plain paths give. No timings here: see scripts/bench_catalog_scale.py."""

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
    assert any(e.startswith(("cells-", "json-")) for e in _cache_entries())  # written from the cached rows
    for table, js in (cold, warm):
        assert table == plain_table
        assert js == plain_json  # byte for byte
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


@pytest.mark.parametrize(
    "kinds, args",
    [
        (["accelerators"], ["gpus", "list", "--min-memory", "40GB", "--sort", "memory"]),  # 1,250 of 2,000
        (["accelerators", "offers"], ["offers", "list", "--sort", "provider"]),
        (["offers"], ["offers", "list", "--pricing", "on-demand"]),
        (["models"], ["model", "list", "--family", "fam3"]),  # 100 rows: the plain path
    ],
)
def test_filtered_and_sorted_listings_from_rows_match_plain(run, big, monkeypatch, kinds, args):
    cat = [x for k in kinds for x in ("--catalog", str(big[k]))]
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("GPUPLAN_NO_CACHE", "1")
    plain = run(*cat, *args), run(*cat, *args, "--json")
    monkeypatch.delenv("GPUPLAN_NO_CACHE")
    for _ in range(2):  # making the rows, then from the cache
        assert (run(*cat, *args), run(*cat, *args, "--json")) == plain
    assert plain[0][0] == 0


def test_a_lookup_builds_only_the_part_that_holds_it(big):
    from gpuplan.catalog.cache import PART, PackedEntries
    from gpuplan.catalog.session import Catalogs

    Catalogs([big["accelerators"]]).accelerators()  # fills the cache
    registry = Catalogs([big["accelerators"]]).accelerators()
    packed = {id(v[0]): v[0] for v in registry._by_id.values() if type(v) is tuple}
    assert len(packed) == 1
    (entries,) = packed.values()
    assert isinstance(entries, PackedEntries) and len(entries) == N and N > PART
    acc = registry.get("sg1500")  # an alias, in the second part
    assert acc.id == "scale-gpu-1500" and acc == entries[1500]
    assert [b is not None for b in entries._built] == [False, True]
    assert registry.suggest("scale-gpu-x")[:1] == ("scale-gpu-9",)  # names only: nothing more built
    assert [b is not None for b in entries._built] == [False, True]
    from gpuplan.catalog import read_accelerator_file

    assert list(registry)[-N:] == read_accelerator_file(big["accelerators"])


def test_a_damaged_part_is_never_used(run, big):
    """The parts of a packed entry are checked (BLAKE2b) as the entry is loaded: a changed byte makes the
    whole entry unusable, and the file is read again."""
    import pickle

    cat = ["--catalog", str(big["accelerators"])]
    first = run(*cat, "gpus", "show", "sg1999", "--json")
    d = Path(os.environ["XDG_CACHE_HOME"]) / "gpuplan" / "catalog"
    from gpuplan.catalog.cache import PackedEntries

    loaded = {p: pickle.loads(p.read_bytes()) for p in d.iterdir() if p.name.startswith("accelerators-")}
    ((entry, (marker, (packed, notes))),) = [(p, v) for p, v in loaded.items() if isinstance(v[1][0], PackedEntries)]
    part = bytearray(packed._parts[1])
    part[len(part) // 2] ^= 0x01
    packed._parts[1] = bytes(part)
    entry.write_bytes(pickle.dumps((marker, (packed, notes))))
    with pytest.raises(ValueError, match="damaged"):
        pickle.loads(entry.read_bytes())
    assert run(*cat, "gpus", "show", "sg1999", "--json") == first


def test_an_id_given_again_by_a_later_file_replaces_the_packed_one(run, big, tmp_path, monkeypatch):
    data = json.loads(big["accelerators"].read_text())
    data["accelerator"] = [dict(data["accelerator"][7], name="Override GPU", aliases=["ov7"])]
    override = tmp_path / "override.json"
    override.write_text(json.dumps(data))
    cat = ["--catalog", str(big["accelerators"]), "--catalog", str(override)]
    outputs = []
    for cache_off in ("1", "", ""):  # the files read, then the cache filled, then used
        monkeypatch.setenv("GPUPLAN_NO_CACHE", cache_off)
        outputs.append([run(*cat, *args) for args in (["gpus", "list", "--json"], ["gpus", "show", "sg7", "--json"])])
    assert outputs[0] == outputs[1] == outputs[2]
    code, _, err = outputs[2][1]
    assert code == 2 and "sg7" in err  # the override dropped the alias
    listed = json.loads(outputs[2][0][1])["accelerators"]
    assert [a["name"] for a in listed if a["id"] == "scale-gpu-7"] == ["Override GPU"]


def test_offers_from_the_cache_do_not_load_the_accelerators_but_keep_their_warnings(run, big):
    from gpuplan.catalog.session import Catalogs

    conf = Path(os.environ["GPUPLAN_CONFIG_DIR"])
    (conf / "accelerators.json").write_text('{"accelerator": [{"id": "broken"}]}')
    files = [big["accelerators"], big["offers"]]
    results = [run(*[x for f in files for x in ("--catalog", str(f))], "offers", "list") for _ in range(2)]
    assert results[0] == results[1] and "broken" in results[0][2]
    cat = Catalogs(files)
    assert len(cat.offers()) >= N and "accelerators" not in cat._loaded
    assert any("broken" in w for w in cat.warnings)
    cat.accelerators().get("scale-gpu-3")  # and loaded when asked for
    assert "accelerators" in cat._loaded


def test_rows_follow_the_code_that_makes_them(tmp_path, monkeypatch):
    from gpuplan.catalog import cache

    key = (("f",), ("identity",))
    assert cache.cached_value("test-rows", key, lambda: 41) == 41
    assert cache.cached_value("test-rows", key, lambda: 42) == 41
    monkeypatch.setattr(cache, "_DERIVED_KEY", (*cache.derived_code_key(), "other code"))
    assert cache.cached_value("test-rows", key, lambda: 43) == 43


def test_close_matches_are_difflibs():
    import difflib
    import random

    from gpuplan.catalog.registry import close_matches

    rng = random.Random(11)
    for _ in range(2000):
        pool = ["".join(rng.choice("abcd-1") for _ in range(rng.randint(0, 7))) for _ in range(rng.randint(0, 40))]
        word = "".join(rng.choice("abcd-1") for _ in range(rng.randint(0, 7)))
        n, cutoff = rng.randint(1, 6), rng.choice([0.0, 0.4, 0.6, 0.8, 1.0])
        assert close_matches(word, pool, n, cutoff) == difflib.get_close_matches(word, pool, n, cutoff)
    names = [f"scale-gpu-{i}" for i in range(3000)] + [f"sg{i}" for i in range(3000)]
    for word in ("scale-gpu-x", "sg12x", "h100"):
        assert close_matches(word, names, 6) == difflib.get_close_matches(word, names, 6)


def test_an_entry_added_after_loading_drops_the_fingerprint(big):
    """What was derived from the files (cached offers' checks, a listing's rows) no longer describes a registry
    that holds more than the files: the web UI adds an uploaded config's model, for instance."""
    from dataclasses import replace

    from gpuplan.catalog.session import Catalogs

    registry = Catalogs([big["models"]]).models()
    assert registry.fingerprint is not None
    registry.add(replace(registry.get("sm7"), name="Changed"))
    assert registry.fingerprint is None
