"""Shared fixtures: isolation from the user's real config, the validation data, a CLI runner."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _find_validation_dir() -> Path | None:
    """../shared/validation beside the project root (where CI clones it), or $GPUPLAN_VALIDATION_DIR."""
    env = os.environ.get("GPUPLAN_VALIDATION_DIR")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared" / "validation", REPO / "shared" / "validation"]:
        if (cand / "accelerators.json").is_file():
            return cand
    return None


VALIDATION_DIR = _find_validation_dir()


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path_factory, monkeypatch):
    """Tests never read the developer's ~/.config/gpuplan or reach the Hub."""
    monkeypatch.setenv("GPUPLAN_CONFIG_DIR", str(tmp_path_factory.mktemp("gpuplan-config")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def validation():
    """Load one validation file by stem: validation('accelerators') -> dict."""
    if VALIDATION_DIR is None:
        pytest.fail("../shared/validation not found beside the project (set GPUPLAN_VALIDATION_DIR)")

    def load(stem: str) -> dict:
        return json.loads((VALIDATION_DIR / f"{stem}.json").read_text())

    return load


@pytest.fixture
def run(capsys):
    """Run the CLI in-process: run('gpus', 'list') -> (exit_code, stdout, stderr)."""
    from gpuplan.cli.main import main

    def _run(*args: str):
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return _run
