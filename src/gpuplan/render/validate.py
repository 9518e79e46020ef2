"""``gpuplan validate --html``: the validation record as one static HTML page (tables only; no script, no
network), in the style of :mod:`gpuplan.render.plot`. Drawn from the ``--json`` record, so the page never
says something the JSON does not."""

from __future__ import annotations

import html

_STYLE = (
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:collapse;"
    "margin:1em 0;font-size:13px}th,td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}.over{color:#b00}.under{color:#05a}"
    ".nofit{color:#b00;font-weight:bold}caption{text-align:left;font-weight:bold;padding:4px 0}"
)


def _e(value: object) -> str:
    return html.escape(str(value))


def _value(value: float, unit: str) -> str:
    if unit == "bytes":
        return f"{value / 2**30:,.1f} GiB"
    if unit == "s":
        return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"
    return f"{value:,.4g} {_e(unit)}"


def _pct(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f}%" if signed else f"{100 * value:.1f}%"


def _table(caption: str, headers: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><caption>{_e(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def validate_html(record: dict) -> str:
    """The ``validate`` record as an HTML page: summary, LOSO, every scored value, the skipped records."""
    counts = record["counts"]
    title = "gpuplan validate" + (f": {record['category']}" if record["category"] else "")
    out = [
        f"<h1>{_e(title)}</h1>",
        f"<p>{counts['values_scored']} values from {counts['records_scored']} records scored, "
        f"{counts['records_skipped']} records skipped; {counts['measured_runs_does_not_fit']} of "
        f"{counts['measured_runs']} measured runs gpuplan says do not fit. {_e(record['error_definition'])}.</p>",
    ]
    rows = []
    for category, block in record["summary"].items():
        a = block["all"]
        rows.append(
            [
                f"<b>{_e(category)}</b>",
                "all",
                "",
                str(a["count"]),
                _pct(a["mae"], False),
                _pct(a["median_signed_error"]),
                f"{a['does_not_fit']} of {a['measured_runs']}",
            ]
        )
        for dim in ("quantity", "gpu_generation", "precision", "stack", "architecture"):
            for value, g in block[dim].items():
                rows.append(
                    [
                        "",
                        _e(dim.replace("_", " ")),
                        _e(value),
                        str(g["count"]),
                        _pct(g["mae"], False),
                        _pct(g["median_signed_error"]),
                        f"{g['does_not_fit']} of {g['measured_runs']}",
                    ]
                )
    out.append(
        _table(
            "Summary",
            ["category", "group", "value", "count", "MAE", "median error", "does not fit"],
            rows,
            frozenset({3, 4, 5, 6}),
        )
    )
    loso = record["loso"]
    if loso["constants"]:
        items = "".join(
            f"<li>{_e(c['name'])}: default {c['default']:g}, fitted on every source "
            f"{c['fitted_in_sample']:.4g}. {_e(c['description'])}</li>"
            for c in loso["constants"]
        )
        items += "".join(
            f"<li>{_e(cat)} MAE: {_pct(f['default']['mae'], False)} at the defaults, "
            f"{_pct(f['in_sample']['mae'], False)} in sample, {_pct(f['loso']['mae'], False)} "
            "leave-one-source-out</li>"
            for cat, f in loso["categories"].items()
        )
        out.append(f"<h2>Fitted constants, leave one source out</h2><ul>{items}</ul>")
        out.append(
            _table(
                "Folds",
                ["held-out source", "values", "refitted", "held-out MAE"],
                [
                    [
                        _e(f["source"]),
                        str(f["held_out"]),
                        _e(", ".join(f"{k}={v:.4g}" for k, v in f["constants"].items())),
                        _pct(f["held_out_mae"], False),
                    ]
                    for f in loso["folds"]
                ],
                frozenset({1, 3}),
            )
        )
    cov = (record.get("bands") or {}).get("coverage") or {}
    if cov:
        items = "".join(
            f"<li>{_e(cat)}: {_pct(b['in_sample']['coverage'], False)} in sample, "
            f"{_pct(b['loso']['coverage'], False)} leave-one-source-out ({b['loso']['covered']} of "
            f"{b['loso']['count']} values)</li>"
            for cat, b in cov.items()
        )
        out.append(
            "<h2>Error bands (P10-P90)</h2><p>Share of values inside their own band; target 75-85 % "
            f"leave-one-source-out. {_e(record['bands']['method'])}</p><ul>{items}</ul>"
        )
    scored = []
    for r in record["rows"]:
        cls = "over" if r["error"] > 0 else "under"
        fits = "yes" if r["fits"] else ('<span class="nofit">NO</span>' if r["measured"] else "no (table)")
        scored.append(
            [
                _e(r["id"]),
                _e(r["category"]),
                _e(r["metric"]),
                _value(r["published"], r["unit"]),
                _value(r["predicted"], r["unit"]),
                f'<span class="{cls}">{_pct(r["error"])}</span>',
                fits,
                _e(r["arguments"].get("gpu", "-")),
                _e(r["precision"]),
                _e(r["stack"]),
                _e(r["source"]),
                _e("; ".join(r["notes"])),
            ]
        )
    out.append(
        _table(
            "Predicted vs published",
            [
                "record",
                "category",
                "metric",
                "published",
                "predicted",
                "error",
                "fits",
                "GPU",
                "precision",
                "stack",
                "source",
                "mapping notes",
            ],
            scored,
            frozenset({3, 4, 5}),
        )
    )
    out.append(
        _table(
            "Skipped (not mapped yet)",
            ["record", "file", "category", "reason"],
            [[_e(s["record"]), _e(s["file"]), _e(s["category"]), _e(s["reason"])] for s in record["skipped"]],
        )
    )
    out += [f"<p>Not scored: {_e(stem)}.json: {_e(why)}</p>" for stem, why in record["not_scored_files"].items()]
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{_e(title)}</title><style>{_STYLE}</style>'
        f"</head><body>{''.join(out)}</body></html>"
    )
