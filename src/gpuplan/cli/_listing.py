"""Long listings (``gpus list``, ``offers list``, ``model list`` of more than ``_common._LARGE_ROWS`` entries),
written from rows made once per catalog.

A listing's output is, entry by entry, a function of the entry alone: its record (compact JSON, as pydantic-core
encodes the whole record) and its table cells (``render.tables.<kind>_row`` of that record). For a catalog of
100,000 entries making them costs seconds (building 100,000 records, encoding ~150 MB of JSON, formatting
700,000 numbers), so they are made once for every entry of the registry and kept in the catalog cache
(``catalog.cache.cached_value``), keyed by the identities of the catalog's files (``Registry.fingerprint``) and
by the code that makes them. A listing then picks its entries' rows, in its order, and writes them: the JSON
record is the report's record with no entries, with the rows put in its list; the table is drawn by the same
``render.tables`` function from the rows. The output is byte for byte what ``_common.emit`` prints from
``report.to_dict()`` (tests/test_list_output_identity.py).

Whenever that cannot be vouched for, or would cost more, the listing is left to ``emit``: the cache turned off
(``GPUPLAN_NO_CACHE``), no fingerprint (a file not readable as a regular file, or an entry added after loading),
an entry the rows do not hold, or a record holding a number that is not finite (``emit`` then says which, as one
error line). Where the cache folder cannot be written, the rows are made for the call and dropped (about what
``emit`` costs for a whole catalog).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ._common import _has_nonfinite_token, print_table, write_json_bytes


def _json_rows(registry: Any, item: Callable[[Any], dict]) -> dict[str, bytes]:
    """Every entry's record as compact JSON, by entry id; none (an empty dict, kept as such: no entry is then
    found in it) when one may hold a NaN or an infinity (the listing is left to ``emit``, which names it)."""
    from pydantic_core import to_json

    rows: dict[str, bytes] = {}
    for entry in registry:
        encoded = to_json(item(entry))
        if _has_nonfinite_token(encoded):
            return {}
        rows[entry.id] = encoded
    return rows


def _table_rows(
    registry: Any, item: Callable[[Any], dict], row: Callable[[dict], list[str]]
) -> dict[str, tuple[str, ...]]:
    """Every entry's table cells, by entry id; none (an empty dict) when a record may hold a NaN or an
    infinity."""
    from pydantic_core import to_json

    rows: dict[str, tuple[str, ...]] = {}
    for entry in registry:
        record = item(entry)
        if _has_nonfinite_token(to_json(record)):
            return {}
        rows[entry.id] = tuple(row(record))
    return rows


def emit_listing(ctx: click.Context, report: Any, listing: Any, as_json: bool, render: str) -> bool:
    """Write ``report`` (a listing, described by ``listing``: ``plan.reports.Listing``) from its catalog's rows, as
    JSON or as the table ``render.tables.<render>`` draws; False (nothing written) when it must be left to
    ``emit``."""
    from ..catalog import cache

    if not cache.enabled():  # rows made for every entry and then dropped: more than emit's work
        return False
    registry = getattr(ctx.obj.catalogs, listing.catalog)()
    fingerprint = getattr(registry, "fingerprint", None)
    if fingerprint is None:
        return False
    files = cache.fingerprint_files(fingerprint)
    entries = getattr(report, listing.key)
    empty = type(report)(**{f: () if f == listing.key else getattr(report, f) for f in report._fields}).to_dict()
    if as_json:
        from pydantic_core import to_json

        encoded = to_json(empty)
        slot = b'"' + listing.key.encode() + b'":[]'
        if encoded.count(slot) != 1 or _has_nonfinite_token(encoded):
            return False
        json_rows = cache.cached_value(
            f"json-{listing.key}", (files, fingerprint), lambda: _json_rows(registry, listing.items())
        )
        picked = _pick(json_rows, entries)
        if picked is None:
            return False
        head, tail = encoded.split(slot)
        write_json_bytes(head + slot[:-1], b",".join(picked), b"]" + tail)  # ~150 MB: not copied once more
        return True
    from ..render import tables

    row = getattr(tables, render.removesuffix("_table") + "_row")
    cells = cache.cached_value(
        f"cells-{render}", (files, fingerprint), lambda: _table_rows(registry, listing.items(), row)
    )
    picked_cells = _pick(cells, entries)
    if picked_cells is None:
        return False
    print_table(getattr(tables, render)(empty, rows=picked_cells), large=True)
    return True


def _pick(rows: Any, entries: Any) -> list[Any] | None:
    """The rows of ``entries``, in their order; None when one is missing (no rows, or an entry not of the
    registry the rows were made for)."""
    if not isinstance(rows, dict):
        return None
    try:
        return [rows[entry.id] for entry in entries]
    except KeyError:
        return None
