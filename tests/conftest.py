"""Shared fixtures: isolation from the person running the tests, the bundled validation data, a CLI runner.

Isolation happens twice:
- at start-up (``pytest_configure``, before any test module is imported or collected): the user config
  folder, XDG folders and the Hugging Face cache point at an empty temporary folder, every ``GPUPLAN_*``
  and ``HF_*`` variable of the caller is dropped, and the Hub is offline. A catalog in the developer's
  home folder can therefore never change what a test module sees at collection time;
- per test (the autouse fixture): a fresh config folder for each test, so one test's planted files do
  not leak into the next.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# variables that steer the test run itself, not gpuplan: kept
_KEEP = {"GPUPLAN_UPDATE_GOLDEN", "GPUPLAN_CI"}

#: Test modules that must run, never skip, in CI: the exact parameter counts against transformers (and the
#: property tests over the same models). Their optional dependencies (torch, transformers) are installed by
#: .ci/run from .ci/requirements-optional.txt; where GPUPLAN_CI or CI is set, a skip of one of them (a missing
#: module, or any pytest.skip inside) is reported as a failure, so a broken install cannot pass silently.
MUST_RUN_IN_CI = frozenset({"test_params_families.py", "test_params_exact.py", "test_properties.py"})

_IN_CI = False


def in_ci() -> bool:
    """True where GPUPLAN_CI or CI was set when pytest started (read before the environment is scrubbed)."""
    return _IN_CI


def _skip_fails_here(path) -> bool:
    return _IN_CI and Path(str(path)).name in MUST_RUN_IN_CI


def _ci_message(where: str, reason: object) -> str:
    return (
        f"{where} skipped in CI ({reason}); GPUPLAN_CI/CI is set, and these tests must run there: "
        "install .ci/requirements-optional.txt (the CPU torch wheel and transformers)"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module of MUST_RUN_IN_CI skipped at collection (pytest.importorskip at module level) fails in CI."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _skip_fails_here(getattr(collector, "path", "")):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = _ci_message(Path(str(collector.path)).name, reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test of a MUST_RUN_IN_CI module that skips fails in CI (an expected failure stays what it is)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and _skip_fails_here(item.path):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = _ci_message(item.nodeid, reason)


def _scrub_environment(root: Path) -> dict[str, str]:
    """The environment a test sees: the caller's, less its GPUPLAN_*/HF_* settings, with private folders."""
    env = {k: v for k, v in os.environ.items() if k in _KEEP or not (k.startswith(("GPUPLAN_", "HF_", "HUGGINGFACE")))}
    for sub in ("config", "xdg-config", "xdg-cache", "hf"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "GPUPLAN_CONFIG_DIR": str(root / "config"),
            "XDG_CONFIG_HOME": str(root / "xdg-config"),
            "XDG_CACHE_HOME": str(root / "xdg-cache"),
            "HF_HOME": str(root / "hf"),
            "HF_HUB_OFFLINE": "1",
        }
    )
    return env


_SESSION_ROOT: Path | None = None


def pytest_configure(config):
    global _SESSION_ROOT, _IN_CI
    _IN_CI = bool(os.environ.get("GPUPLAN_CI") or os.environ.get("CI"))
    _SESSION_ROOT = Path(tempfile.mkdtemp(prefix="gpuplan-tests-"))
    env = _scrub_environment(_SESSION_ROOT)
    os.environ.clear()
    os.environ.update(env)


def pytest_unconfigure(config):
    if _SESSION_ROOT is not None:
        shutil.rmtree(_SESSION_ROOT, ignore_errors=True)


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path_factory, monkeypatch):
    """Each test gets its own empty config folder and Hugging Face cache; the Hub stays offline."""
    root = tmp_path_factory.mktemp("gpuplan-home")
    for key in [k for k in os.environ if (k.startswith(("GPUPLAN_", "HF_"))) and k not in _KEEP]:
        monkeypatch.delenv(key)
    for key, value in _scrub_environment(root).items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)


class Lazy:
    """A catalog loaded on first use (never at import time), then shared by the module's tests."""

    def __init__(self, load):
        self._load = functools.cache(load)

    def __getattr__(self, name):
        return getattr(self._load(), name)

    def __iter__(self):
        return iter(self._load())

    def __len__(self):
        return len(self._load())


def _bundled(loader_name: str):
    """The bundled catalog alone: loaded with an empty config folder whatever the environment says."""

    def load():
        import gpuplan.catalog as catalog

        saved = os.environ.get("GPUPLAN_CONFIG_DIR")
        empty = Path(tempfile.gettempdir() if _SESSION_ROOT is None else _SESSION_ROOT) / "empty-config"
        empty.mkdir(exist_ok=True)
        os.environ["GPUPLAN_CONFIG_DIR"] = str(empty)
        try:
            return getattr(catalog, loader_name)()
        finally:
            if saved is None:
                os.environ.pop("GPUPLAN_CONFIG_DIR", None)
            else:
                os.environ["GPUPLAN_CONFIG_DIR"] = saved

    return load


BUNDLED_ACCELERATORS = Lazy(_bundled("load_accelerators"))
BUNDLED_MODELS = Lazy(_bundled("load_models"))


@pytest.fixture
def validation():
    """Load one bundled validation file by stem: validation('accelerators') -> dict."""
    from gpuplan.catalog.validation import load_validation

    return load_validation


@pytest.fixture
def run(capsys):
    """Run the CLI in-process: run('gpus', 'list') -> (exit_code, stdout, stderr)."""
    from gpuplan.cli.main import main

    def _run(*args: str):
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return _run
