"""The catalog cache (catalog/cache.py) on ordinary, small catalogs: the built-in files, the user's config folder
and --catalog files all go through it (issue #12, start-up time). It must give exactly what reading the files
gives, see every edit, ignore anything damaged or foreign, keep its folder private and never follow a symbolic
link. The large-catalog side is in test_catalog_scale.py."""

from __future__ import annotations

import json
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from test_cli import GOOD_ACC

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")


def _cache() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "gpuplan" / "catalog"


def _entries(prefix: str = "") -> list[Path]:
    d = _cache()
    return sorted(p for p in d.iterdir() if p.name.startswith(prefix)) if d.is_dir() else []


def _catalogs():
    from gpuplan.catalog import load_accelerators, load_models
    from gpuplan.catalog.offers import load_offers

    accs = load_accelerators()
    return list(accs), list(load_models()), list(load_offers(accs))


def _origins(items):
    return [getattr(x, "origin", None) for x in items]


def test_cached_catalogs_equal_the_files(monkeypatch):
    monkeypatch.setenv("GPUPLAN_NO_CACHE", "1")
    plain = _catalogs()
    assert not _cache().exists()
    monkeypatch.delenv("GPUPLAN_NO_CACHE")
    cold = _catalogs()
    assert _entries("accelerators") and _entries("models") and _entries("offers")
    warm = _catalogs()
    for got in (cold, warm):
        assert got == plain
        assert [_origins(x) for x in got] == [_origins(x) for x in plain]  # origin is not compared by ==


def test_warm_plain_estimate_imports_no_heavy_module():
    """With the cache filled, a plain estimate never validates a file: no pydantic, rich, numpy or Hub client."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    heavy = {"pydantic", "rich", "numpy", "huggingface_hub", "torch"}
    for args in (
        ["serve", "llama-2-7b", "--gpu", "h100", "--json"],
        ["train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--json"],
        ["gpus", "list", "--json"],
    ):
        code = (
            f"import sys; from gpuplan.cli.main import main; rc = main({args!r}); "
            f"print('HEAVY', sorted({{m.split('.')[0] for m in sys.modules}} & {heavy!r}), rc, file=sys.stderr)"
        )
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True)  # fills the cache
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert "HEAVY [] 0" in r.stderr, (args, r.stderr[-2000:])


def _show(run, *args):
    code, out, err = run(*args, "gpus", "show", "x1", "--json")
    assert code == 0, err
    return json.loads(out)["accelerator"]


def _rewrite_keeping_size_and_mtime(path: Path, text: str) -> None:
    st = path.stat()
    assert len(text.encode()) == st.st_size
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("where", ["config", "catalog"])
def test_an_edit_is_seen_even_with_the_same_size_and_mtime(run, tmp_path, where):
    path = Path(os.environ["GPUPLAN_CONFIG_DIR"]) / "accelerators.toml" if where == "config" else tmp_path / "mine.toml"
    args = () if where == "config" else ("--catalog", str(path))
    path.write_text(GOOD_ACC)
    assert _show(run, *args)["name"] == "Acme X1"
    assert _show(run, *args)["name"] == "Acme X1"  # from the cache
    _rewrite_keeping_size_and_mtime(path, GOOD_ACC.replace('name = "Acme X1"', 'name = "Acme Z9"'))
    assert _show(run, *args)["name"] == "Acme Z9"
    _rewrite_keeping_size_and_mtime(path, GOOD_ACC.replace("bf16 = 500e12", "bf16 = 900e12"))
    assert _show(run, *args)["peak_flops_per_s"]["bf16"] == 900e12


def test_damaged_entries_are_ignored_silently(run):
    first = run("serve", "llama-2-7b", "--gpu", "h100", "--json")
    assert first[0] == 0 and _entries()
    for i, entry in enumerate(_entries()):
        good = entry.read_bytes()
        entry.write_bytes([b"", b"not a pickle", good[: len(good) // 2], pickle.dumps(("other", 1))][i % 4])
    assert run("serve", "llama-2-7b", "--gpu", "h100", "--json") == first
    assert run("serve", "llama-2-7b", "--gpu", "h100", "--json") == first  # and rewritten


def test_cache_folders_are_private(run):
    base = Path(os.environ["XDG_CACHE_HOME"])
    (base / "gpuplan" / "catalog").mkdir(parents=True, mode=0o755)
    os.chmod(base / "gpuplan", 0o755)
    os.chmod(base / "gpuplan" / "catalog", 0o755)
    assert run("gpus", "list", "--json")[0] == 0
    for d in (base / "gpuplan", base / "gpuplan" / "catalog"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert _entries() and all(stat.S_IMODE(e.stat().st_mode) == 0o600 for e in _entries())


@pytest.mark.parametrize("level", ["gpuplan", "catalog"])
def test_a_symlinked_cache_folder_is_not_followed(run, tmp_path, level):
    base = Path(os.environ["XDG_CACHE_HOME"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if level == "gpuplan":
        (base / "gpuplan").symlink_to(elsewhere, target_is_directory=True)
    else:
        (base / "gpuplan").mkdir(mode=0o700)
        (base / "gpuplan" / "catalog").symlink_to(elsewhere, target_is_directory=True)
    first = run("serve", "llama-2-7b", "--gpu", "h100", "--json")
    assert first[0] == 0 and run("serve", "llama-2-7b", "--gpu", "h100", "--json") == first
    assert list(elsewhere.iterdir()) == []


def _emptied(entry: Path) -> bytes:
    """The entry's pickle with the same key but no accelerators in it: served, it would hide every GPU."""
    marker, (_entries_read, notes) = pickle.loads(entry.read_bytes())
    return pickle.dumps((marker, ([], notes)))


def test_an_entry_that_is_a_symlink_or_writable_by_others_is_not_read(run, tmp_path):
    assert run("gpus", "show", "h100", "--json")[0] == 0
    (entry,) = _entries("accelerators")
    assert run("gpus", "show", "h100", "--json")[0] == 0  # the entry is read back as it is
    planted = tmp_path / "planted.pickle"
    planted.write_bytes(_emptied(entry))
    os.chmod(planted, 0o600)
    entry.unlink()
    entry.symlink_to(planted)
    assert run("gpus", "show", "h100", "--json")[0] == 0
    for e in _entries("accelerators"):
        e.unlink()
    entry.write_bytes(planted.read_bytes())
    os.chmod(entry, 0o666)
    assert run("gpus", "show", "h100", "--json")[0] == 0
    entry.write_bytes(planted.read_bytes())  # (the run above replaced the refused entry with a good one)
    os.chmod(entry, 0o600)  # the same bytes, private: the cache trusts them, which shows the two refusals above
    assert run("gpus", "show", "h100", "--json")[0] == 2


def test_no_cache_variable_writes_nothing(run, monkeypatch):
    monkeypatch.setenv("GPUPLAN_NO_CACHE", "1")
    assert run("serve", "llama-2-7b", "--gpu", "h100", "--json")[0] == 0
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "gpuplan").exists()


def test_the_code_and_version_are_part_of_the_key(tmp_path, monkeypatch):
    from gpuplan.catalog import cache

    f = tmp_path / "a.json"
    f.write_text("{}")
    cache.store("test", f, 41)
    assert cache.load("test", f) == 41
    monkeypatch.setattr(cache, "_CODE_KEY", (*cache._code_key(), "another version"))
    assert cache.load("test", f) is None


def test_a_file_changed_while_it_is_read_is_not_kept(tmp_path):
    from gpuplan.catalog import cache

    f = tmp_path / "a.json"
    f.write_text("{}")

    def build():
        f.write_text('{"changed": 1}')
        return "value of a file that no longer exists as read"

    assert cache.cached("test", f, build) == "value of a file that no longer exists as read"
    assert cache.load("test", f) is None and not _entries("test")


def test_a_group_entry_follows_each_of_its_files(tmp_path):
    from gpuplan.catalog import cache

    files = [tmp_path / f"{i}.json" for i in range(3)]
    for f in files:
        f.write_text("{}")
    calls = []

    def build():
        calls.append(1)
        return [f.read_text() for f in files]

    assert cache.cached_group("test-group", files, build) == ["{}"] * 3
    assert cache.cached_group("test-group", files, build) == ["{}"] * 3 and len(calls) == 1
    _rewrite_keeping_size_and_mtime(files[1], "[]")
    assert cache.cached_group("test-group", files, build) == ["{}", "[]", "{}"] and len(calls) == 2
    assert cache.cached_group("test-group", files[:2], build) and len(calls) == 3  # another set of files
