"""Print one of the README's two opening commands (the first two ```bash blocks): ``readme_commands.py 1|2``.

`.ci/run` runs exactly these, so the README and CI cannot drift apart.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def readme_commands(text: str) -> list[str]:
    """The first two fenced bash blocks of the README, each as one command line."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    if len(blocks) < 2:
        raise SystemExit("README.md must start with two ```bash blocks: the main job, then the tests")
    return [b.strip() for b in blocks[:2]]


if __name__ == "__main__":
    which = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    readme = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parent.parent / "README.md"
    print(readme_commands(readme.read_text(encoding="utf-8"))[which - 1])
