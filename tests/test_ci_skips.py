"""In CI (GPUPLAN_CI or CI set) a skip of the exact parameter-count tests is a failure (conftest.MUST_RUN_IN_CI).

Each case runs pytest in a subprocess on a two-file suite: this repository's own conftest.py and a module named
like one of the exact-count modules that skips, at collection (a missing optional module) or inside a test.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import MUST_RUN_IN_CI, REPO

MODULE_SKIP = 'import pytest\npytest.importorskip("gpuplan_no_such_module")\n\ndef test_x():\n    pass\n'
TEST_SKIP = 'import pytest\n\ndef test_x():\n    pytest.skip("no transformers here")\n'


def _run(tmp_path, name: str, body: str, **env_extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (tmp_path / name).write_text(body)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GPUPLAN_CI")}
    env.update(env_extra, PYTHONPATH=str(REPO / "src"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path / name)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )


def test_the_exact_count_modules_are_listed():
    assert {"test_params_families.py", "test_params_exact.py"} <= MUST_RUN_IN_CI
    for name in MUST_RUN_IN_CI:
        assert (REPO / "tests" / name).is_file(), name


def test_ci_run_sets_the_variable():
    """.ci/run exports GPUPLAN_CI, so the README's test command it runs turns these skips into failures."""
    text = (REPO / ".ci" / "run").read_text()
    assert "export GPUPLAN_CI=1" in text


@pytest.mark.parametrize("body", [MODULE_SKIP, TEST_SKIP], ids=["module-level", "in-test"])
def test_skip_passes_outside_ci(tmp_path, body):
    r = _run(tmp_path, "test_params_families.py", body)
    assert r.returncode in (0, 5), r.stdout + r.stderr  # 5: every test skipped at collection, none ran
    assert "skipped" in r.stdout


@pytest.mark.parametrize("var", ["GPUPLAN_CI", "CI"])
@pytest.mark.parametrize("body", [MODULE_SKIP, TEST_SKIP], ids=["module-level", "in-test"])
def test_skip_fails_in_ci(tmp_path, body, var):
    r = _run(tmp_path, "test_params_families.py", body, **{var: "1"})
    assert r.returncode in (1, 2), r.stdout + r.stderr  # 1: a test failed; 2: a module failed to collect
    assert "skipped in CI" in r.stdout, r.stdout


def test_other_modules_may_still_skip_in_ci(tmp_path):
    """Only the listed modules: a GPU-only test elsewhere still skips on a CPU runner."""
    r = _run(tmp_path, "test_local_something.py", TEST_SKIP, GPUPLAN_CI="1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skipped" in r.stdout
