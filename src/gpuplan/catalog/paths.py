"""Where catalog files live: the bundled data, and the user's own directory."""

from __future__ import annotations

import fnmatch
import os
import stat
from pathlib import Path

from ..errors import CatalogError

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def user_config_dir() -> Path | None:
    """The user's gpuplan directory: $GPUPLAN_CONFIG_DIR, else $XDG_CONFIG_HOME/gpuplan, else ~/.config/gpuplan;
    None when there is no home folder to find it in ($HOME unset and no account entry).

    Files read from it when present: ``accelerators.toml`` (or ``.json``), ``models/*.json`` (and
    ``models.json``), ``offers.toml`` (or ``.json``).
    """
    if os.environ.get("GPUPLAN_CONFIG_DIR"):
        return Path(os.environ["GPUPLAN_CONFIG_DIR"]).expanduser()
    if os.environ.get("XDG_CONFIG_HOME"):
        return Path(os.environ["XDG_CONFIG_HOME"]) / "gpuplan"
    try:
        home = os.path.expanduser("~")
    except (KeyError, OSError, RuntimeError):  # no $HOME and no passwd entry for this user
        return None
    if not home or home.startswith("~"):
        return None
    return Path(home) / ".config" / "gpuplan"


def _where() -> str:
    if os.environ.get("GPUPLAN_CONFIG_DIR"):
        return " ($GPUPLAN_CONFIG_DIR)"
    return " ($XDG_CONFIG_HOME)" if os.environ.get("XDG_CONFIG_HOME") else ""


def user_files(*patterns: str) -> tuple[list[Path], list[CatalogError]]:
    """The files of the user's directory that match ``patterns`` (``"accelerators.toml"``, ``"models/*.json"``),
    in that order (a glob's matches sorted by name), and the problems met finding them.

    Never raises: an unreadable home or config folder, or a config "folder" that is a file, is a problem
    (the CLI prints it as a warning) and the built-in catalogs are used alone. Anything that exists
    under a matching name is returned, even a directory or a FIFO: reading it says what is wrong with it.
    """
    problems: list[CatalogError] = []
    d = user_config_dir()
    if d is None:
        return [], [
            CatalogError(
                "no home folder ($HOME is not set): your gpuplan config folder is not read; "
                "set GPUPLAN_CONFIG_DIR to use one"
            )
        ]
    try:
        st = os.stat(d)
    except FileNotFoundError:
        return [], []
    except (OSError, ValueError) as e:
        return [], [
            CatalogError(
                f"{d}: can't read your gpuplan config folder{_where()} "
                f"({getattr(e, 'strerror', None) or e}); using the built-in catalogs only"
            )
        ]
    if not stat.S_ISDIR(st.st_mode):
        return [], [
            CatalogError(f"{d}: your gpuplan config folder{_where()} is not a folder; using the built-in catalogs only")
        ]
    listings: dict[Path, list[str] | None] = {}

    def listing(folder: Path) -> list[str] | None:
        if folder not in listings:
            try:
                listings[folder] = sorted(os.listdir(folder))
            except FileNotFoundError:
                listings[folder] = None
            except (OSError, ValueError) as e:
                listings[folder] = None
                if isinstance(e, NotADirectoryError):
                    problems.append(CatalogError(f"{folder}: is not a folder; its files are not read"))
                else:
                    problems.append(
                        CatalogError(
                            f"{folder}: can't read the folder ({getattr(e, 'strerror', None) or e});"
                            " its files are not read"
                        )
                    )
        return listings[folder]

    top = listing(d)
    if top is None:  # the folder itself is unreadable: one problem, not one per file
        return [], problems
    out: list[Path] = []
    for pattern in patterns:
        sub, _, name = pattern.rpartition("/")
        if sub and sub not in top:
            continue
        folder = d / sub if sub else d
        names = listing(folder)
        if names is None:
            continue
        out += [folder / n for n in names if fnmatch.fnmatchcase(n, name)]
    return out, problems
