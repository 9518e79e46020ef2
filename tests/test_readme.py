"""The README's example output is what the commands print today (scripts/refresh_readme.py updates it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "refresh_readme.py"


@pytest.mark.slow
def test_readme_examples_are_current():
    spec = importlib.util.spec_from_file_location("refresh_readme", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = mod.README.read_text()
    new, n = mod.refresh(text)
    assert n >= 8
    assert new == text, "README examples are stale: run python scripts/refresh_readme.py and review the diff"
