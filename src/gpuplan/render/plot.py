"""Charts as one self-contained HTML file: inline SVG with hover tooltips, no script and no network.

``ranking_html`` draws the ``train --rank`` record: time vs cost of every offer (the Pareto front
joined and marked), and cost per GPU-hour vs throughput per GPU across GPU tiers (the cheapest offer
of each GPU), where diminishing returns show as points that cost more per unit of work.
"""

from __future__ import annotations

import html
import math

W, H, PAD = 720, 420, 64
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def _scale(values: list[float], lo_px: float, hi_px: float, log: bool):
    vals = [math.log10(v) if log else v for v in values]
    lo, hi = min(vals), max(vals)
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    span = hi - lo
    lo, hi = lo - 0.05 * span, hi + 0.05 * span

    def f(v: float) -> float:
        x = math.log10(v) if log else v
        return lo_px + (x - lo) / (hi - lo) * (hi_px - lo_px)

    def ticks() -> list[float]:
        """'Nice' ticks: 1-2-5 steps; on a log axis, 1, 2 and 5 times each power of ten in range."""
        if log:
            out = [m * 10**e for e in range(math.floor(lo) - 1, math.ceil(hi) + 1) for m in (1, 2, 5)]
            out = [t for t in out if lo <= math.log10(t) <= hi]
            return out if len(out) >= 2 else [10**lo, 10**hi]
        raw = (hi - lo) / 5
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
        first = math.ceil(lo / step) * step
        return [first + i * step for i in range(int((hi - first) / step) + 1)]

    return f, ticks


def _axes(xlabel: str, ylabel: str, fx, fy, xt, yt, xfmt, yfmt) -> str:
    out = [
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 16}" y2="{H - PAD}" stroke="#333"/>',
        f'<line x1="{PAD}" y1="16" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>',
        f'<text x="{(W + PAD) / 2}" y="{H - 16}" text-anchor="middle">{html.escape(xlabel)}</text>',
        f'<text x="16" y="{H / 2}" text-anchor="middle" transform="rotate(-90 16 {H / 2})">'
        f"{html.escape(ylabel)}</text>",
    ]
    for t in xt():
        x = fx(t)
        if PAD <= x <= W - 16:
            out.append(
                f'<line x1="{x:.1f}" y1="{H - PAD}" x2="{x:.1f}" y2="{H - PAD + 5}" stroke="#333"/>'
                f'<text x="{x:.1f}" y="{H - PAD + 20}" text-anchor="middle" font-size="11">{xfmt(t)}</text>'
            )
    for t in yt():
        y = fy(t)
        if 16 <= y <= H - PAD:
            out.append(
                f'<line x1="{PAD - 5}" y1="{y:.1f}" x2="{PAD}" y2="{y:.1f}" stroke="#333"/>'
                f'<text x="{PAD - 8}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{yfmt(t)}</text>'
            )
    return "".join(out)


def _money(v: float) -> str:
    return f"${v / 1e6:.3g}M" if v >= 1e6 else f"${v / 1e3:.3g}k" if v >= 1e3 else f"${v:.3g}"


def _days(s: float) -> str:
    return f"{s / 86400:.3g} d"


def _time_cost_svg(options: list[dict]) -> str:
    xs = [o["seconds"] / 86400 for o in options]  # days, so the ticks fall on round numbers of days
    ys = [o["usd"] for o in options]
    fx, xt = _scale(xs, PAD, W - 16, log=True)
    fy, yt = _scale(ys, H - PAD, 16, log=True)
    gpus = sorted({o["gpu"] for o in options})
    color = {g: COLORS[i % len(COLORS)] for i, g in enumerate(gpus)}
    parts = [_axes("time to train (days, log)", "cost in USD (log)", fx, fy, xt, yt, lambda d: f"{d:g} d", _money)]
    front = sorted((o for o in options if o["pareto"]), key=lambda o: o["seconds"])
    if len(front) > 1:
        pts = " ".join(f"{fx(o['seconds'] / 86400):.1f},{fy(o['usd']):.1f}" for o in front)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#000" stroke-dasharray="4 3"/>')
    for o in options:
        tip = (
            f"{o['offer']['provider']} {o['offer']['instance']} ({o['offer']['pricing']}), {o['gpus']} x {o['gpu']}: "
            f"{_days(o['seconds'])}, {_money(o['usd'])}, MFU {o['mfu']:.0%}" + (" - Pareto" if o["pareto"] else "")
        )
        r = 6 if o["pareto"] else 4
        stroke = ' stroke="#000" stroke-width="1.5"' if o["pareto"] else ""
        parts.append(
            f'<circle cx="{fx(o["seconds"] / 86400):.1f}" cy="{fy(o["usd"]):.1f}" r="{r}" fill="{color[o["gpu"]]}"'
            f"{stroke}><title>{html.escape(tip)}</title></circle>"
        )
    legend = "".join(f'<tspan fill="{color[g]}">&#9679; {html.escape(g)}  </tspan>' for g in gpus)
    parts.append(f'<text x="{PAD + 8}" y="28" font-size="12">{legend}</text>')
    return f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">{"".join(parts)}</svg>'


def _tiers_svg(options: list[dict], tokens: float) -> str:
    best: dict[str, dict] = {}
    for o in options:
        g = o["gpu"]
        if g not in best or o["offer"]["usd_per_gpu_hour"] < best[g]["offer"]["usd_per_gpu_hour"]:
            best[g] = o
    rows = sorted(best.values(), key=lambda o: o["offer"]["usd_per_gpu_hour"])
    xs = [o["offer"]["usd_per_gpu_hour"] for o in rows]
    ys = [tokens / o["seconds"] / o["gpus"] for o in rows]  # tokens (x epochs) per second per GPU
    fx, xt = _scale(xs, PAD, W - 16, log=False)
    fy, yt = _scale(ys, H - PAD, 16, log=False)
    parts = [
        _axes(
            "price per GPU-hour (USD, cheapest offer)",
            "training tokens/s per GPU",
            fx,
            fy,
            xt,
            yt,
            lambda v: f"${v:.3g}",
            lambda v: f"{v:,.0f}",
        )
    ]
    pts = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in zip(xs, ys, strict=True))
    parts.append(f'<polyline points="{pts}" fill="none" stroke="#888"/>')
    for o, x, y in zip(rows, xs, ys, strict=True):
        per_dollar = y * 3600 / x
        tip = (
            f"{o['gpu']} at ${x:.2f}/GPU-hour ({o['offer']['provider']}): {y:,.0f} tokens/s/GPU, "
            f"{per_dollar:,.0f} tokens per $"
        )
        parts.append(
            f'<circle cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="5" fill="#1f77b4"><title>{html.escape(tip)}</title>'
            f'</circle><text x="{fx(x) + 7:.1f}" y="{fy(y) - 7:.1f}" font-size="11">{html.escape(o["gpu"])}</text>'
        )
    return f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">{"".join(parts)}</svg>'


def ranking_html(record: dict) -> str:
    """The ``train --rank`` record as an HTML page with two charts (hover a point for its details)."""
    options = [o for o in record["options"] if o["usd"] is not None]
    from ..units import format_count

    title = f"gpuplan: {record['model']['id']}, {format_count(record['tokens'])} training tokens"
    if not options:
        body = "<p>No offer can run this job as laid out.</p>"
    else:
        body = (
            f"<h2>Time vs cost of each offer</h2><p>Each point is one offer (hover for details); the dashed "
            f"line joins the Pareto front: no other offer is both faster and cheaper.</p>{_time_cost_svg(options)}"
            f"<h2>Cost vs performance across GPU tiers</h2><p>The cheapest offer of each GPU: price per "
            f"GPU-hour against training throughput per GPU. Where the curve flattens, paying more per hour "
            f"buys less extra speed.</p>{_tiers_svg(options, record['tokens'] * record['epochs'])}"
        )
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>body{{font-family:sans-serif;max-width:760px;margin:2em auto}}svg{{background:#fafafa}}</style>"
        f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
