"""The model catalog, and turning what a user typed into a model.

A model argument may be a built-in id or alias (``llama-3.1-8b``, ``meta-llama/Llama-3.1-8B``), a path
to a ``config.json`` or to a folder holding one, a Hub id (read when online), or a bare parameter count
(``7.5B``) for the estimates that need no architecture.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CatalogError, GpuplanError, HubError, ModelConfigError, QuantityError
from ..spec.accelerator import Source
from ..spec.model import ModelSpec, ParamsOnlyModel
from ..units import LazyPattern, parse_params
from . import cache
from .hub import HUB_ID_RE, MAX_CONFIG_BYTES, Fetcher, fetch_hub_config
from .paths import DATA_DIR, user_files
from .registry import Registry
from .schema import Skipped, entry_label, read_entries, read_file_bytes, read_structured, skip_or_raise, without_gc

if TYPE_CHECKING:
    from .entries import ModelEntry

# hf_config (the config.json readers), entries (pydantic) and difflib are imported where they are used: a model
# from the catalog cache needs none of them

BUNDLED_DIR = DATA_DIR / "models"
LIST_HINT = "'gpuplan model list' shows the built-in ones; a config.json path or a Hub id works too"


def _to_spec(e: ModelEntry, where: str, origin: str) -> ModelSpec:
    from .hf_config import spec_from_hf_config

    notes = [e.notes] if isinstance(e.notes, str) else list(e.notes or [])
    try:
        return spec_from_hf_config(
            e.config,
            id=e.id,
            name=e.name,
            where=where,
            family=e.family,
            hf_id=e.hf_id,
            aliases=tuple(e.aliases),
            source=Source(e.source.title, e.source.url, e.source.date) if e.source else None,
            published_params=(
                e.published_params - sum((e.published_params_excluded or {}).values()) if e.published_params else None
            ),
            published_active_params=e.published_active_params,
            published_params_rounded=e.published_params_rounded,
            notes=tuple(notes),
            origin=origin,
        )
    except ModelConfigError as err:
        raise CatalogError(str(err)) from None


def read_model_file(path: Path, origin: str | None = None, *, skipped: list[Skipped] | None = None) -> list[ModelSpec]:
    """Read and validate one model catalog file (schema in docs/catalog-schema.md).

    Strict by default; with a ``skipped`` list a broken entry is noted there and left out (see
    ``read_accelerator_file``).
    """
    return list(_cached_file(path, origin, skipped=skipped))


def _cached_file(path: Path, origin: str | None = None, *, skipped: list[Skipped] | None = None) -> Sequence[ModelSpec]:
    """``read_model_file`` as the registry takes it: a large file's entries built when first used."""
    return cache.cached_entries("models", Path(path), _read_model_file, origin, skipped)


def _read_model_file(path: Path, origin: str | None, skipped: list[Skipped] | None) -> list[ModelSpec]:
    from .entries import ModelEntry, ModelFile, validate

    data, left_out = read_entries(path, ("models",), skipped)
    if not isinstance(data, dict):
        raise CatalogError(
            f"{path}: expected an object with a 'models' list at the top level, "
            f"got {type(data).__name__}; see docs/catalog-schema.md"
        )
    doc = validate(ModelFile, data, str(path))
    out: list[ModelSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc.models):
        if i in left_out:
            continue
        where = f"{path}: {entry_label(raw, i, 'model')}"
        try:
            entry = validate(ModelEntry, raw, where)
            if entry.id in seen:
                raise CatalogError(f"{path}: model '{entry.id}' appears twice; ids must be unique")
            spec = _to_spec(entry, f"{where} config", origin or str(path))
        except CatalogError as e:
            skip_or_raise(e, raw, skipped)
            continue
        seen.add(entry.id)
        out.append(spec)
    return out


def bundled_configs() -> dict[str, dict[str, Any]]:
    """The bundled models' raw Hugging Face configs by id (for tools that build the models themselves)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(BUNDLED_DIR.glob("*.json")):
        out.update({m["id"]: m["config"] for m in read_structured(path)["models"]})
    return out


def _read_bundled(paths: list[Path]) -> list[ModelSpec]:
    """The built-in models of every bundled file, in file order; an id defined in two files is an error."""
    out: list[ModelSpec] = []
    ids: dict[str, Path] = {}
    for path in paths:
        for spec in read_model_file(path, "built-in"):
            if spec.id in ids:
                raise CatalogError(f"{path}: model '{spec.id}' is also defined in {ids[spec.id].name}")
            ids[spec.id] = path
            out.append(spec)
    return out


@without_gc
def load_models(extra_files: Iterable[Path] = ()) -> Registry[ModelSpec]:
    """Bundled models, then the user's directory, then ``extra_files``; later ids override earlier.

    A broken file or entry in the user's directory is left out and noted in the registry's ``problems``
    (looking its id up raises its error); a broken ``extra_files`` file raises CatalogError.
    """
    reg: Registry[ModelSpec] = Registry("model", LIST_HINT)
    paths = sorted(BUNDLED_DIR.glob("*.json"))
    reg.add_all(cache.cached_group("bundled-models", paths, lambda: _read_bundled(paths)))
    files, problems = user_files("models/*.json", "models.json")
    extra_files = [Path(p) for p in extra_files]
    reg.add_files(_cached_file, files, problems, extra_files)
    idents = [cache.file_identity(p) for p in (*paths, *files, *extra_files)]
    if None not in idents:
        reg.fingerprint = (tuple(idents), tuple(str(p) for p in problems), len(paths), len(files), len(extra_files))
    return reg


def read_config_path(path: Path, like: str | None = None) -> ModelSpec:
    """A model from a local ``config.json`` (or a folder that holds one)."""
    from .hf_config import load_config_json, spec_from_hf_config

    path = Path(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelConfigError(f"{path}: folder has no config.json")
        path = path / "config.json"
    # the project's one file reader: regular files only (no FIFO or device), bounded
    data = read_file_bytes(path, error=ModelConfigError, max_bytes=MAX_CONFIG_BYTES)
    config = load_config_json(data, str(path))
    model_id = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return spec_from_hf_config(config, id=model_id, name=model_id, where=str(path), origin=str(path), like=like)


#: What a bare parameter count looks like (``7B``, ``1.5e9``, ``0.5``, ``70``); anything else is a name.
_COUNT_LIKE = LazyPattern(r"^\s*[+-]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*[kmbgtp]?\s*$", re.IGNORECASE)

#: The smallest bare count taken for a model: below it the number is a slip ("7" for "7B"), and a
#: model that small would be planned as costing nothing.
MIN_BARE_PARAMS = 1_000


def bare_count_model(text: str) -> ParamsOnlyModel:
    """A model known by its parameter count alone (``7B``), between MIN_BARE_PARAMS and MAX_PARAMS."""
    from .hf_config import MAX_PARAMS

    text = text.strip()
    value = parse_params(text)  # QuantityError for zero, negative and non-finite counts
    if value < MIN_BARE_PARAMS:
        hint = f"did you mean {text}B?" if text[-1].isdigit() else "write it like 7B"
        unit = "parameter" if value == 1 else "parameters"
        raise QuantityError(
            f"parameter count '{text}' is {value:g} {unit}; a model needs at least {MIN_BARE_PARAMS:,} ({hint})"
        )
    if value > MAX_PARAMS:
        raise QuantityError(
            f"parameter count '{text}' is {value:.3g} parameters, more than the 1e15 (1,000,000B) "
            "gpuplan plans for; write it like 7B or 405B"
        )
    return ParamsOnlyModel(params=round(value))


def _near_catalog_names(text: str, models: Registry[ModelSpec], n: int = 2) -> list[str]:
    """Catalog names (ids, aliases, Hub ids, as spelled in the catalog) that ``text`` is a near miss of."""
    import difflib

    spelled: dict[str, str] = {}
    for m in models:
        for name in (m.id, m.hf_id, *m.aliases):
            if name:
                spelled.setdefault(name.lower(), name)
    close = difflib.get_close_matches(text.strip().lower(), list(spelled), n=n, cutoff=0.85)
    return [spelled[c] for c in close]


def resolve_model(
    text: str,
    models: Registry[ModelSpec] | None = None,
    fetch: Fetcher | None = fetch_hub_config,
    like: str | None = None,
) -> ModelSpec | ParamsOnlyModel:
    """Turn a model argument into a model: catalog id/alias, config path, bare parameter count, or Hub id.

    In that order: a built-in id or alias (case-insensitive); an existing path; a bare count such as
    ``7B`` (see :func:`bare_count_model`); then a Hub id. Only ``owner/name`` is ever a Hub id: a bare name
    without '/' that is none of the above is an unknown model with near matches and never touches the
    network. For ``owner/name`` the near matches among the catalog's names are worked out first, without
    the network; the Hub is asked only then (``fetch``), and if it fails for any reason its one-line error
    ends with "did you mean" those names. Offline (``--offline``, HF_HUB_OFFLINE=1) the fetcher reads only
    the local Hugging Face cache, so a typo gets the suggestion at once.

    ``fetch`` is the Hub seam (tests pass a fake; None forbids the Hub, cache included). ``like`` reads a
    config (file or Hub) whose model_type gpuplan does not know as that model_type (``--like llama``).
    """
    text = text.strip()
    if not text:
        raise ModelConfigError("empty model name; give a built-in id, a config.json path, a Hub id or a count like 7B")
    if like is not None:  # checked whatever the model is, so a typo is never silently ignored
        from .hf_config import SUPPORTED_MODEL_TYPES

        if like not in SUPPORTED_MODEL_TYPES:
            raise ModelConfigError(
                f"--like '{like}' is not a model_type gpuplan reads; use one of: {', '.join(SUPPORTED_MODEL_TYPES)}"
            )
    models = models if models is not None else load_models()
    if models.matches(text):
        return models.get(text)
    problem = models.problem_for(text)
    if problem is not None:  # the user's own entry for this name is broken: say why, not "unknown model"
        raise problem
    path = Path(text).expanduser()
    if path.exists():
        return read_config_path(path, like=like)
    if _COUNT_LIKE.match(text):
        return bare_count_model(text)
    if text.endswith(".json") or text.startswith((".", "/", "~")):
        raise ModelConfigError(f"{text}: no such file")
    if HUB_ID_RE.match(text) and fetch is not None:
        near = _near_catalog_names(text, models)  # worked out before any network call
        try:
            config = fetch(text)
        except HubError as e:
            if not near:
                raise
            raise HubError(f"{e}; or did you mean the built-in {' or '.join(repr(n) for n in near)}?") from None
        from .hf_config import spec_from_hf_config

        return spec_from_hf_config(
            config,
            id=text,
            name=text,
            where=f"{text} (Hub config.json)",
            hf_id=text,
            origin="huggingface-hub",
            like=like,
        )
    try:
        return models.get(text)  # raises UnknownIdError with near matches
    except GpuplanError:
        raise
