"""The suite is isolated from the person running it (issue: a plain clone passes its tests)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO

TESTS = REPO / "tests"


def test_environment_is_scrubbed():
    """Inside a test: a private config folder, the Hub offline, none of the caller's HF_* settings."""
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert "gpuplan" in os.environ["GPUPLAN_CONFIG_DIR"]
    assert not any(k in os.environ for k in ("HF_TOKEN", "HF_ENDPOINT", "GPUPLAN_CATALOG"))


def test_no_test_module_loads_a_catalog_at_import():
    """Importing every test module reads no catalog file (reading happens inside tests, after isolation)."""
    probe = f"""
import importlib, sys
sys.path[:0] = [{str(TESTS)!r}, {str(REPO / "src")!r}]
import gpuplan.catalog.accelerators as a, gpuplan.catalog.models as m, gpuplan.catalog.offers as o
def refuse(*args, **kw):
    raise SystemExit('a catalog was read at import time: ' + repr(args[:1]))
a.read_accelerator_file = m.read_model_file = o.read_offer_file = refuse
import pathlib
for p in sorted(pathlib.Path({str(TESTS)!r}).glob('test_*.py')):
    try:
        importlib.import_module(p.stem)
    except ImportError as e:      # optional dependencies (torch) missing: the module skips anyway
        if 'torch' not in str(e) and 'transformers' not in str(e):
            raise
    except BaseException as e:
        if type(e).__name__ == 'Skipped':   # pytest.importorskip at module level
            continue
        raise
print('ok')
"""
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_a_user_catalog_does_not_change_test_results(tmp_path):
    """A broken catalog and Hub settings in the caller's environment change no test result."""
    home = tmp_path / "home"
    conf = home / ".config" / "gpuplan"
    (conf / "models").mkdir(parents=True)
    (conf / "accelerators.toml").write_text('schema_version = 1\n[[accelerator]]\nid = "h100-sxm-80gb"\n')
    (conf / "models" / "bad.json").write_text("{not json")
    env = {
        **os.environ,
        "HOME": str(home),
        "GPUPLAN_CONFIG_DIR": str(conf),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "HF_HUB_OFFLINE": "0",
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "PYTHONPATH": str(REPO / "src"),
    }
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-x",
            str(TESTS / "test_accelerators.py"),
            str(TESTS / "test_catalog.py"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
