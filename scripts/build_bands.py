"""Write src/gpuplan/data/bands.json: the error-band table (gpuplan/plan/bands.py) from gpuplan validate.

Run after any change to the estimates or the validation data (tests/test_bands.py fails while it is stale):

    python scripts/build_bands.py          # rewrite the file
    python scripts/build_bands.py --check  # exit 1 if the file is not current
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PATH = Path(__file__).resolve().parent.parent / "src" / "gpuplan" / "data" / "bands.json"


def build() -> dict[str, Any]:
    """The table from a fresh validate run (training and inference)."""
    from gpuplan import api
    from gpuplan.plan.bands import build_table

    report = api.validate(catalog=())
    return build_table(report.rows)


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    text = render(build())
    if "--check" in argv:
        current = PATH.read_text(encoding="utf-8") if PATH.is_file() else ""
        if current != text:
            print(f"{PATH} is stale: run python scripts/build_bands.py", file=sys.stderr)
            return 1
        return 0
    PATH.write_text(text, encoding="utf-8")
    cov = json.loads(text)["coverage"]
    for category, block in cov.items():
        print(
            f"{category}: in sample {block['in_sample']['coverage']:.1%}, "
            f"leave-one-source-out {block['loso']['coverage']:.1%} ({block['loso']['count']} values)"
        )
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
