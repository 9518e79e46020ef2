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


def test_readme_python_examples_run():
    """Every ``>>>`` example in the README runs and prints what the README shows (doctest)."""
    import doctest

    text = (SCRIPT.parent.parent / "README.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    examples = "\n".join(b for b in blocks if ">>>" in b)
    assert examples.count(">>>") >= 6
    test = doctest.DocTestParser().get_doctest(examples, {}, "README.md", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} README example(s) failed (see the output above)"
