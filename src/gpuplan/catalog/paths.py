"""Where catalog files live: the bundled data, and the user's own directory."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def user_config_dir() -> Path:
    """The user's gpuplan directory: $GPUPLAN_CONFIG_DIR, else $XDG_CONFIG_HOME/gpuplan, else ~/.config/gpuplan.

    Files read from it when present: ``accelerators.toml`` (or ``.json``) and ``models/*.json``.
    """
    if os.environ.get("GPUPLAN_CONFIG_DIR"):
        return Path(os.environ["GPUPLAN_CONFIG_DIR"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "gpuplan"
