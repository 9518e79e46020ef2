"""The catalogs one call works with: the built-in files, the user's config folder and extra files.

A :class:`Catalogs` sorts the extra files by kind, loads each catalog the first time it is asked for (once per
object), and keeps the warnings met while loading (a broken entry in the user's config folder is skipped with
a warning, never fatal). The CLI makes one per command and prints the warnings; the Python API makes one per
call unless it is given one to share.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import CatalogError


class Catalogs:
    """Accelerators, models and offers from the built-in data, ``~/.config/gpuplan`` and ``files``."""

    def __init__(self, files: Iterable[str | os.PathLike[str]] = ()):
        self.files = tuple(Path(f) for f in files)
        self.warnings: list[str] = []
        self._split: tuple[list[Path], list[Path], list[Path]] | None = None
        self._loaded: dict[str, Any] = {}

    def _sorted_files(self) -> tuple[list[Path], list[Path], list[Path]]:
        if self._split is None:
            from . import cache
            from .schema import read_structured

            split: dict[str, list[Path]] = {"accelerators": [], "models": [], "offers": []}
            for path in self.files:
                kind = cache.load("kind", path)  # a large file seen before: no need to parse it to sort it
                if kind not in split:
                    data = read_structured(path, keep=True)  # the loader takes the parsed document from here
                    if isinstance(data, dict) and ("accelerator" in data or "accelerators" in data):
                        kind = "accelerators"
                    elif isinstance(data, dict) and "models" in data:
                        kind = "models"
                    elif isinstance(data, dict) and "offer" in data:
                        kind = "offers"
                    else:
                        raise CatalogError(
                            f"{path}: not a gpuplan catalog: expected an 'accelerator' list "
                            "(accelerators), a 'models' list or an 'offer' list; see "
                            "docs/catalog-schema.md"
                        )
                    cache.store("kind", path, kind)
                split[kind].append(path)
            self._split = (split["accelerators"], split["models"], split["offers"])
        return self._split

    def _once(self, kind: str, load: Callable[[], Any]) -> Any:
        if kind not in self._loaded:
            registry = load()
            self._loaded[kind] = registry
            if len(getattr(registry, "_by_id", ())) > 10_000:
                import gc

                gc.freeze()  # a huge catalog lives as long as the call: later collections need not walk it
            for problem in getattr(registry, "problems", ()):
                if str(problem) not in self.warnings:
                    self.warnings.append(str(problem))
        return self._loaded[kind]

    def accelerators(self) -> Any:
        from . import load_accelerators

        return self._once("accelerators", lambda: load_accelerators(self._sorted_files()[0]))

    def models(self) -> Any:
        from . import load_models

        return self._once("models", lambda: load_models(self._sorted_files()[1]))

    def offers(self) -> Any:
        from .offers import load_offers

        if "offers" in self._loaded:
            return self._loaded["offers"]
        gpus = self._accelerators_for_offers()
        return self._once("offers", lambda: load_offers(gpus, self._sorted_files()[2]))

    def _accelerators_for_offers(self) -> Any:
        """The accelerators the offers are checked against, loaded only if an offers file must be read again:
        cached offers need only know which accelerator files they were checked against. Their warnings are
        taken either way, before the offers' (from the cache when the accelerators are not loaded)."""
        if "accelerators" in self._loaded:
            return self._loaded["accelerators"]
        from . import cache
        from .accelerators import accelerators_fingerprint
        from .registry import DeferredRegistry

        fingerprint = accelerators_fingerprint(self._sorted_files()[0])
        if fingerprint is None:
            return self.accelerators()
        warnings = cache.cached_value(
            "accelerator-warnings",
            (cache.fingerprint_files(fingerprint), fingerprint),
            lambda: [str(p) for p in self.accelerators().problems],
        )
        for warning in warnings:
            if warning not in self.warnings:
                self.warnings.append(warning)
        if "accelerators" in self._loaded:
            return self._loaded["accelerators"]
        return DeferredRegistry(self.accelerators, fingerprint)
