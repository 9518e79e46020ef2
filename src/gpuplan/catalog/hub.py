"""Reading a model's config.json from the Hugging Face Hub (the network edge; never runs remote code).

How a Hub id ``owner/name`` is read, and how it fails:

- Online: one GET of ``<HF_ENDPOINT>/<owner>/<name>/resolve/main/config.json`` through huggingface_hub's
  session and headers (so HF_TOKEN, ``huggingface-cli login``, HF_ENDPOINT and proxies apply), with no
  retries, a timeout of HUB_TIMEOUT_S on each connect and read and HUB_DEADLINE_S for the whole request.
  huggingface_hub's own loggers are kept quiet meanwhile: the user sees one line, not retry chatter.
- Offline (``offline=True``, the CLI's ``--offline``, or HF_HUB_OFFLINE=1): the network is never used;
  the local Hugging Face cache is read, and an id that is not cached is an error that says so.
- Online but the Hub can't be reached: a copy in the local cache is used if there is one.

Each failure is a HubError whose one line says which case it is and what to do, and always offers the
way around the Hub, a local config.json path:

- can't reach the Hub (DNS, refused connection, proxy, timeout): check the connection;
- no such repository (404, or 401 on a private one): check the id, or log in if it is private;
- gated repository (GatedRepoError, or 401/403 asking for a token): accept the licence and log in with
  ``huggingface-cli login`` or set HF_TOKEN;
- the repository has no config.json (EntryNotFound): not a transformers model repository;
- the Hub answered something else (rate limit, 5xx): try again later.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import HubError
from ..units import LazyPattern

# logging, threading and hf_config are imported by the functions that use them: the CLI imports this module
# for every command that takes a model, and most never reach the Hub

#: A Hub repository id: "owner/name".
HUB_ID_RE = LazyPattern(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")

#: Seconds allowed for each connect and each read of the request, and for the request as a whole.
HUB_TIMEOUT_S = 4.0
HUB_DEADLINE_S = 8.0

#: Largest config.json read, from the Hub or from disk (real ones are a few kilobytes).
MAX_CONFIG_BYTES = 16 * 2**20

Fetcher = Callable[[str], dict[str, Any]]

_LOCAL = "or pass the path of a local config.json instead"
_LOGIN = "log in with `huggingface-cli login` or set HF_TOKEN"


def hub_offline(offline: bool | None = None) -> bool:
    """Whether the Hub must not be contacted: ``offline`` if given and true, else HF_HUB_OFFLINE (as
    huggingface_hub reads it, TRANSFORMERS_OFFLINE too), read when called."""
    if offline:
        return True
    return any(
        os.environ.get(k, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
        for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_fetcher(offline: bool = False) -> Fetcher:
    """The fetcher the CLI passes to ``resolve_model``: cache only when ``offline``."""
    return cache_only_fetch if offline else fetch_hub_config


def cache_only_fetch(repo_id: str) -> dict[str, Any]:
    """``fetch_hub_config`` that never uses the network (the ``--offline`` flag)."""
    return fetch_hub_config(repo_id, offline=True)


def fetch_hub_config(
    repo_id: str, *, offline: bool | None = None, timeout: float = HUB_TIMEOUT_S, deadline: float | None = None
) -> dict[str, Any]:
    """``config.json`` of the Hub repository ``repo_id`` as a dict; a HubError (one line) when it can't be had.

    ``offline`` (or HF_HUB_OFFLINE=1) reads only the local Hugging Face cache. Online, ``timeout`` bounds
    each connect and read and ``deadline`` (HUB_DEADLINE_S) the whole request; nothing is retried.
    """
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:  # pragma: no cover - it is a dependency
        raise HubError("reading from the Hub needs huggingface_hub: pip install huggingface_hub; " + _LOCAL) from None
    _check_repo_id(repo_id)
    cached = _cached_config_path(repo_id)
    if hub_offline(offline):
        if cached is None:
            why = "--offline" if offline else "HF_HUB_OFFLINE is set"
            raise HubError(
                f"unknown model '{repo_id}': it is not built in, and it is not in the local Hugging Face "
                f"Hub cache ({why}, so the Hub is not asked); go online once to read it, {_LOCAL}"
            )
        return _read_cached(repo_id, cached)
    try:
        return _download(repo_id, timeout, HUB_DEADLINE_S if deadline is None else deadline)
    except _Unreachable as e:
        if cached is not None:  # what huggingface_hub does too: the cached copy when the Hub is away
            return _read_cached(repo_id, cached)
        raise HubError(str(e)) from None


class _Unreachable(Exception):
    """The Hub could not be reached (the message is the user's line); a cached copy may stand in."""


def _one_line(text: object, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _check_repo_id(repo_id: str) -> None:
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except ValueError as e:  # HFValidationError: '--' or '..', a name over 96 characters...
        raise HubError(
            f"'{repo_id}' is not a valid Hugging Face Hub repository id ({_one_line(e, 120)}); check it, {_LOCAL}"
        ) from None


def _cached_config_path(repo_id: str) -> str | None:
    from huggingface_hub import try_to_load_from_cache

    try:
        path = try_to_load_from_cache(repo_id, "config.json")
    except (OSError, ValueError):  # an unreadable cache folder is the same as no cache
        return None
    return path if isinstance(path, str) else None  # None, or a marker for "known to be missing"


def _read_cached(repo_id: str, path: str) -> dict[str, Any]:
    try:
        if os.path.getsize(path) > MAX_CONFIG_BYTES:
            raise HubError(f"the cached config.json of '{repo_id}' ({path}) is too large to be one; {_LOCAL}")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise HubError(
            f"can't read the cached config.json of '{repo_id}' ({path}: {e.strerror or e}); {_LOCAL}"
        ) from None
    from .hf_config import load_config_json

    return load_config_json(data, f"{repo_id} (cached Hub config.json {path})")


@contextlib.contextmanager
def _quiet_hub_logs() -> Iterator[None]:
    """huggingface_hub logs retries and warnings; the CLI's contract is one line, so hold them back."""
    import logging

    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _network_errors() -> tuple[type[BaseException], ...]:
    """Exception classes that mean "no answer from the Hub", whichever HTTP stack huggingface_hub uses:
    requests' errors and socket errors are OSErrors; httpx (and its fork httpx2) have RequestError."""
    import importlib

    classes: list[type[BaseException]] = [OSError]
    for name in ("httpx2", "httpx"):
        with contextlib.suppress(ImportError, AttributeError):
            classes.append(importlib.import_module(name).RequestError)
    return tuple(classes)


def _get(repo_id: str, timeout: float) -> Any:
    """The GET, raising huggingface_hub's typed HTTP errors (RepositoryNotFoundError, GatedRepoError...)."""
    from huggingface_hub import __version__ as hf_version, hf_hub_url, utils as hf_utils

    from .. import __version__

    url = hf_hub_url(repo_id, "config.json")
    headers = hf_utils.build_hf_headers(
        library_name="gpuplan", library_version=__version__, user_agent={"huggingface_hub": hf_version}
    )
    response = hf_utils.get_session().get(url, headers=headers, timeout=timeout)
    hf_utils.hf_raise_for_status(response)
    return response


def _download(repo_id: str, timeout: float, deadline: float) -> dict[str, Any]:
    import threading

    from huggingface_hub import errors as hf_errors

    from .hf_config import load_config_json

    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["response"] = _get(repo_id, timeout)
        except BaseException as e:  # handed to the caller's thread, which decides
            result["error"] = e

    with _quiet_hub_logs():
        # A daemon thread, so that a Hub that never answers (a DNS lookup that hangs, a server that
        # trickles bytes) costs the deadline and not the process's life.
        worker = threading.Thread(target=work, name="gpuplan-hub-config", daemon=True)
        worker.start()
        worker.join(deadline)
    if worker.is_alive():
        raise _Unreachable(
            f"the Hugging Face Hub did not answer within {deadline:g} s for '{repo_id}'; check your "
            f"connection (or set HF_HUB_OFFLINE=1 to use the local cache), {_LOCAL}"
        )
    error = result.get("error")
    local_miss = getattr(hf_errors, "LocalEntryNotFoundError", ())
    if isinstance(error, (hf_errors.HfHubHTTPError, hf_errors.EntryNotFoundError)) and not isinstance(
        error, local_miss
    ):  # an answer, a refusal: tested before OSError, their base
        raise HubError(_refusal(repo_id, error)) from None
    if isinstance(error, _network_errors()):
        kind = "timed out" if isinstance(error, TimeoutError) or "Timeout" in type(error).__name__ else "failed"
        raise _Unreachable(
            f"can't reach the Hugging Face Hub to read '{repo_id}' (the request {kind}: "
            f"{type(error).__name__}: {_one_line(error, 100)}); check your connection, "
            f"{_LOCAL}"
        ) from None
    if error is not None:
        raise error  # not a network or HTTP failure: a bug to see, not a line to hide
    response = result["response"]
    if response.status_code // 100 != 2:
        raise HubError(
            f"the Hugging Face Hub answered HTTP {response.status_code} for the config.json of "
            f"'{repo_id}'; try again later, {_LOCAL}"
        )
    data = response.content
    if len(data) > MAX_CONFIG_BYTES:
        raise HubError(
            f"the config.json of '{repo_id}' on the Hub is {len(data):,} bytes, too large to be one; {_LOCAL}"
        )
    return load_config_json(data, f"{repo_id} (Hub config.json)")


def _refusal(repo_id: str, error: Any) -> str:
    """The user's line for an HTTP error the Hub answered with, by huggingface_hub's error class."""
    from huggingface_hub import errors as hf_errors

    status = getattr(getattr(error, "response", None), "status_code", None)
    page = f"https://huggingface.co/{repo_id}"
    if isinstance(error, hf_errors.GatedRepoError):
        return f"'{repo_id}' is gated on the Hugging Face Hub: accept its licence at {page}, then {_LOGIN}; {_LOCAL}"
    if isinstance(error, hf_errors.RepositoryNotFoundError):
        return (
            f"no model repository '{repo_id}' on the Hugging Face Hub (or it is private: {_LOGIN}); "
            f"check the id, {_LOCAL}"
        )
    if isinstance(error, hf_errors.RevisionNotFoundError):
        return f"'{repo_id}' on the Hugging Face Hub has no 'main' branch to read config.json from; {_LOCAL}"
    if isinstance(error, hf_errors.EntryNotFoundError):
        return (
            f"'{repo_id}' on the Hugging Face Hub has no config.json (not a transformers model repository?); {_LOCAL}"
        )
    disabled = getattr(hf_errors, "DisabledRepoError", None)
    if disabled is not None and isinstance(error, disabled):
        return f"'{repo_id}' has been disabled on the Hugging Face Hub; {_LOCAL}"
    if status == 401:
        return (
            f"the Hugging Face Hub rejected your token when reading '{repo_id}' (HTTP 401): {_LOGIN} "
            f"with a valid one, or unset it; {_LOCAL}"
        )
    if status == 403:
        return (
            f"the Hugging Face Hub denied access to '{repo_id}' (HTTP 403): if it is gated, accept its licence "
            f"at {page}, then {_LOGIN}; {_LOCAL}"
        )
    if status == 429:
        return f"the Hugging Face Hub is rate-limiting requests (HTTP 429); try again later, {_LOCAL}"
    return f"the Hugging Face Hub answered HTTP {status} for the config.json of '{repo_id}'; try again later, {_LOCAL}"
