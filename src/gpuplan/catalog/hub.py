"""Reading a model's config.json from the Hugging Face Hub (the network edge; never runs remote code)."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from ..errors import HubError

#: A Hub repository id: "owner/name".
HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")

Fetcher = Callable[[str], dict[str, Any]]


def fetch_hub_config(repo_id: str) -> dict[str, Any]:
    """Download ``config.json`` of ``repo_id`` with huggingface_hub (uses its cache and HF_TOKEN)."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub import errors as hf_errors
    except ImportError:  # pragma: no cover - it is a dependency
        raise HubError("reading from the Hub needs huggingface_hub: pip install huggingface_hub") from None
    try:
        path = hf_hub_download(repo_id, "config.json")
    except hf_errors.GatedRepoError:
        raise HubError(f"'{repo_id}' is gated on the Hugging Face Hub: accept its licence and log in "
                       "('hf auth login'), or pass a local config.json") from None
    except hf_errors.RepositoryNotFoundError:
        raise HubError(f"no repository '{repo_id}' on the Hugging Face Hub (or it is private); "
                       "check the id, or pass a local config.json") from None
    except hf_errors.EntryNotFoundError:
        raise HubError(f"'{repo_id}' on the Hugging Face Hub has no config.json") from None
    except (hf_errors.LocalEntryNotFoundError, hf_errors.OfflineModeIsEnabled, OSError):
        raise HubError(f"can't reach the Hugging Face Hub to read '{repo_id}' (offline?); "
                       "download its config.json and pass the file's path instead") from None
    except Exception as e:  # network stacks raise many types; the user gets one line either way
        raise HubError(f"reading '{repo_id}' from the Hugging Face Hub failed: {type(e).__name__}: {e}") from None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise HubError(f"the config.json downloaded for '{repo_id}' is unreadable: {e}") from None
