"""The model catalog, and turning what a user typed into a model.

A model argument may be a built-in id or alias (``llama-3.1-8b``, ``meta-llama/Llama-3.1-8B``), a path
to a ``config.json`` or to a folder holding one, a Hub id (read when online), or a bare parameter count
(``7.5B``) for the estimates that need no architecture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from ..errors import CatalogError, GpuplanError, ModelConfigError, QuantityError
from ..spec.accelerator import Source
from ..spec.model import ModelSpec, ParamsOnlyModel
from ..units import parse_params
from .hf_config import spec_from_hf_config
from .hub import HUB_ID_RE, Fetcher, fetch_hub_config
from .paths import DATA_DIR, user_config_dir
from .registry import Registry
from .schema import ModelEntry, ModelFile, entry_label, read_structured, validate

BUNDLED_DIR = DATA_DIR / "models"
LIST_HINT = "'gpuplan model list' shows the built-in ones; a config.json path or a Hub id works too"


def _to_spec(e: ModelEntry, where: str, origin: str) -> ModelSpec:
    notes = [e.notes] if isinstance(e.notes, str) else list(e.notes or [])
    try:
        return spec_from_hf_config(
            e.config, id=e.id, name=e.name, where=where, family=e.family, hf_id=e.hf_id,
            aliases=tuple(e.aliases), source=Source(e.source.title, e.source.url, e.source.date) if e.source else None,
            published_params=(e.published_params - sum((e.published_params_excluded or {}).values())
                              if e.published_params else None),
            published_active_params=e.published_active_params,
            published_params_rounded=e.published_params_rounded, notes=tuple(notes), origin=origin,
        )
    except ModelConfigError as err:
        raise CatalogError(str(err)) from None


def read_model_file(path: Path, origin: str | None = None) -> list[ModelSpec]:
    """Read and validate one model catalog file (schema in docs/catalog-schema.md)."""
    path = Path(path)
    doc = validate(ModelFile, read_structured(path), str(path))
    out: list[ModelSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc.models):
        where = f"{path}: {entry_label(raw, i, 'model')}"
        entry = validate(ModelEntry, raw, where)
        if entry.id in seen:
            raise CatalogError(f"{path}: model '{entry.id}' appears twice; ids must be unique")
        seen.add(entry.id)
        out.append(_to_spec(entry, f"{where} config", origin or str(path)))
    return out


def bundled_configs() -> dict[str, dict]:
    """The bundled models' raw Hugging Face configs by id (for tools that build the models themselves)."""
    out: dict[str, dict] = {}
    for path in sorted(BUNDLED_DIR.glob("*.json")):
        out.update({m["id"]: m["config"] for m in json.loads(path.read_text(encoding="utf-8"))["models"]})
    return out


def user_model_files() -> list[Path]:
    d = user_config_dir()
    files = sorted((d / "models").glob("*.json")) if (d / "models").is_dir() else []
    return files + ([d / "models.json"] if (d / "models.json").is_file() else [])


def load_models(extra_files: Iterable[Path] = ()) -> Registry[ModelSpec]:
    """Bundled models, then the user's directory, then ``extra_files``; later ids override earlier."""
    reg: Registry[ModelSpec] = Registry("model", LIST_HINT)
    ids: dict[str, Path] = {}
    for path in sorted(BUNDLED_DIR.glob("*.json")):
        for spec in read_model_file(path, "built-in"):
            if spec.id in ids:
                raise CatalogError(f"{path}: model '{spec.id}' is also defined in {ids[spec.id].name}")
            ids[spec.id] = path
            reg.add(spec)
    for path in [*user_model_files(), *map(Path, extra_files)]:
        for spec in read_model_file(path):
            reg.add(spec)
    return reg


def read_config_path(path: Path) -> ModelSpec:
    """A model from a local ``config.json`` (or a folder that holds one)."""
    path = Path(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelConfigError(f"{path}: folder has no config.json")
        path = path / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ModelConfigError(f"{path}: can't read the file ({e.strerror or e})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelConfigError(f"{path}: not valid JSON: {e}") from None
    model_id = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return spec_from_hf_config(config, id=model_id, name=model_id, where=str(path), origin=str(path))


def resolve_model(text: str, models: Registry[ModelSpec] | None = None,
                  fetch: Fetcher | None = fetch_hub_config) -> ModelSpec | ParamsOnlyModel:
    """Turn a model argument into a model: catalog id/alias, config path, bare parameter count, or Hub id.

    ``fetch`` is the Hub seam (tests pass a fake; None forbids network access).
    """
    text = text.strip()
    if not text:
        raise ModelConfigError("empty model name; give a built-in id, a config.json path, a Hub id or a count like 7B")
    models = models if models is not None else load_models()
    if models.matches(text):
        return models.get(text)
    path = Path(text).expanduser()
    if path.exists():
        return read_config_path(path)
    try:
        return ParamsOnlyModel(params=int(parse_params(text)))
    except QuantityError:
        pass
    if text.endswith(".json") or text.startswith((".", "/", "~")):
        raise ModelConfigError(f"{text}: no such file")
    if HUB_ID_RE.match(text) and fetch is not None:
        config = fetch(text)
        return spec_from_hf_config(config, id=text, name=text, where=f"{text} (Hub config.json)",
                                   hf_id=text, origin="huggingface-hub")
    try:
        return models.get(text)  # raises UnknownIdError with near matches
    except GpuplanError:
        raise
