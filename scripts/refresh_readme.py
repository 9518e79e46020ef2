"""Re-run the README's example commands and replace their printed output, so the docs cannot drift.

A block is refreshed when it holds exactly one '$ gpuplan ...' line (no pipe, no '...' elision, not a
machine-specific 'gpuplan local' command); other blocks are left for a person to update.
tests/test_readme.py fails when a refreshable block is stale.

    python scripts/refresh_readme.py            # rewrites README.md in place
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```\n\$ (gpuplan [^\n]*)\n(.*?)```", re.S)


def refresh(text: str) -> tuple[str, int]:
    count = 0

    def run(m: re.Match) -> str:
        nonlocal count
        cmd, body = m.group(1), m.group(2)
        if (
            "|" in cmd
            or "\n$ " in body
            or body.startswith("...")
            or "\n...\n" in body
            or cmd.startswith("gpuplan local")
        ):  # several commands, elided output, or machine-specific
            return m.group(0)
        shown = cmd.split("  #")[0].strip()
        env = {**os.environ, "COLUMNS": "120"}
        out = subprocess.run(
            [sys.executable, "-m", "gpuplan", *shlex.split(shown)[1:]],
            capture_output=True,
            text=True,
            env=env,
            cwd=README.parent,
        )
        count += 1
        return f"```\n$ {cmd}\n{(out.stdout + out.stderr).rstrip()}\n```"

    return BLOCK.sub(run, text), count


if __name__ == "__main__":
    new, n = refresh(README.read_text())
    README.write_text(new)
    print(f"refreshed {n} example blocks")
