"""Rich tables drawn from the JSON records (so a table never says something the JSON does not).

Sizes are shown in GB (1e9 bytes) as vendors print them, with GiB (2**30) where a process plans
with the driver-reported capacity; every header names its unit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..spec.accelerator import DTYPES, pcie_bytes_per_s
from ..units import GB, GiB, format_bytes, format_count, format_flops

_DASH = "-"


def _num(value: float | None, scale: float, digits: int = 4) -> str:
    if value is None:
        return _DASH
    v = value / scale
    return format(v, _G[digits]) if -_LIMIT[digits] < v < _LIMIT[digits] else format(v, ",.0f")


#: _num's format and bound by digits (a 100,000-row listing formats 700,000 numbers).
_G = {d: f".{d}g" for d in range(1, 10)}
_LIMIT = {d: 10**d for d in range(1, 10)}


def _link(ic: dict | None) -> str:
    """Short form for a table cell: the link kind without its parenthetical, and GB/s per direction."""
    if not ic:
        return _DASH
    kind = ic["kind"].split(" (")[0]
    return f"{kind} {_num(ic['bandwidth_bytes_per_s'], GB)}"


class _ListTable(Table):
    """A listing table. Up to ``_FAST_ROWS`` rows rich lays it out; beyond, the rows are drawn as plain
    lines in the same shape (rich's per-cell layout costs ~20 us a cell: minutes for a 100,000-entry
    catalog), and :meth:`plain_text` gives the whole table as text for a console that is not a terminal
    (what rich would print, without a segment per line). Cells are text, never markup, either way."""

    _FAST_ROWS = 500

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.long_rows: list[list[str]] | None = None
        self.long_flexible = ""

    def _long_lines(self, max_width: int) -> tuple[list[str], int, int]:
        """The drawn lines (no newlines), the number of header lines and the table's width."""
        cols = self.columns
        rows = self.long_rows or []
        n = len(cols)
        cells = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in cols]
        heads = [str(c.header).split("\n") for c in cols]
        widest = [max(map(len, column), default=0) for column in cells]
        widths = [max(widest[i], *map(len, heads[i])) for i in range(n)]
        flex = next((i for i, c in enumerate(cols) if str(c.header) == self.long_flexible), n - 1)
        over = sum(widths) + 3 * n + 1 - max_width
        if over > 0:
            widths[flex] = max(12, widths[flex] - over)

        def cut(cell: str, w: int) -> str:
            return cell[: w - 1] + "\u2026" if len(cell) > w else cell

        for i in range(n):  # only a shrunk column has cells wider than itself
            if widest[i] > widths[i]:
                cells[i] = [cut(c, widths[i]) for c in cells[i]]
        aligns = [">" if c.justify == "right" else "<" for c in cols]
        form = "  " + "   ".join(f"{{:{a}{w}}}" for a, w in zip(aligns, widths, strict=True)) + "  "
        total = sum(widths) + 3 * n + 1
        depth = max(len(h) for h in heads)
        head = [[""] * (depth - len(h)) + h for h in heads]  # headers sit on the rule, as rich draws them
        lines = [" " * total]
        lines += [form.format(*(cut(h[k], widths[i]) for i, h in enumerate(head))) for k in range(depth)]
        lines.append(" " + "\u2500" * (total - 2) + " ")
        lines += map(form.format, *cells) if rows else ()
        lines.append(" " * total)
        if self.caption:
            lines.append(str(self.caption).center(total).rstrip())
        return lines, depth, total

    def plain_text(self, width: int) -> str | None:
        """The table as rich prints it on a ``width``-column console that is not a terminal (no styles, each
        line cropped to the width), without the final newline; None when rich must lay it out (few rows) or
        a cell holds a character that is not one column wide (only ASCII is taken as such)."""
        lines = self.plain_lines(width)
        return None if lines is None else "\n".join(lines)

    def plain_lines(self, width: int) -> list[str] | None:
        """:meth:`plain_text`'s lines."""
        if self.long_rows is None:
            return None
        if not "".join(chain.from_iterable(self.long_rows)).isascii():
            return None
        if not all(str(c.header).isascii() for c in self.columns) or not str(self.caption or "").isascii():
            return None
        lines, _, total = self._long_lines(width)
        if total > width or len(lines[-1]) > width:
            lines = [line[:width] for line in lines]
        return lines

    def __rich_console__(self, console, options):
        if self.long_rows is None:
            yield from super().__rich_console__(console, options)
            return
        from rich.segment import Segment

        lines, depth, _ = self._long_lines(options.max_width)
        bold = console.get_style(self.header_style or "", default="bold")
        caption = console.get_style("table.caption", default="")
        new_line = Segment.line()
        for k, line in enumerate(lines):
            if 1 <= k <= depth:
                yield Segment(line, bold)
            elif self.caption and k == len(lines) - 1:
                yield Segment(line, caption)
            else:
                yield Segment(line)
            yield new_line


def _fixed_columns(t: Table, rows: Sequence[Sequence[str]], headers: list[tuple[str, str]], flexible: str) -> None:
    """Columns as wide as their longest cell, except ``flexible``, which shrinks (ellipsis) on narrow screens."""
    long = isinstance(t, _ListTable) and len(rows) > t._FAST_ROWS  # drawn by _ListTable, which sizes its columns
    for i, (header, just) in enumerate(headers):
        if header == flexible:
            t.add_column(header, justify=just, no_wrap=True, overflow="ellipsis", min_width=12)  # type: ignore[arg-type]
        else:
            widest = 0 if long else max([len(r[i]) for r in rows] + [len(line) for line in header.split("\n")])
            t.add_column(header, justify=just, no_wrap=True, min_width=widest)  # type: ignore[arg-type]
    if long:
        t.long_rows, t.long_flexible = rows, flexible  # type: ignore[attr-defined]
        return
    for r in rows:
        t.add_row(*(Text(c) for c in r))  # catalog strings: text, never markup


def gpus_row(a: dict) -> list[str]:
    """The cells of one accelerator record in ``gpus list``."""
    p = a["peak_flops_per_s"]
    return [
        a["id"],
        _num(a["memory_bytes"], GB),
        _num(a["memory_bandwidth_bytes_per_s"], 1e12, 3),
        _num(p.get("bf16"), 1e12),
        _num(p.get("fp8"), 1e12),
        _num(p.get("fp4"), 1e12),
        _link(a["interconnect"]),
        _num(a["tdp_w"], 1),
        str(a["year"]),
        a["name"],
    ]


def gpus_table(record: dict, rows: list[list[str]] | None = None) -> Table:
    """``gpus list``; ``rows``: the cells of the listed accelerators, when made beforehand (``gpus_row``)."""
    t = _ListTable(box=box.SIMPLE_HEAD, header_style="bold")
    headers = [
        ("id", "left"),
        ("memory\nGB", "right"),
        ("bandwidth\nTB/s", "right"),
        ("bf16\nTFLOP/s", "right"),
        ("fp8\nTFLOP/s", "right"),
        ("fp4\nTFLOP/s", "right"),
        ("scale-up link\nGB/s/dir", "left"),
        ("TDP\nW", "right"),
        ("year", "right"),
        ("name", "left"),
    ]
    if rows is None:
        rows = [gpus_row(a) for a in record["accelerators"]]
    _fixed_columns(t, rows, headers, flexible="name")
    t.caption = "Dense peaks (no sparsity). GB = 1e9 bytes. Sources: gpuplan gpus show ID"
    return t


def _figure_rows(a: dict) -> list[tuple[str, str, str]]:
    """(label, value, field key) for every figure of one accelerator record, in display order."""
    mem = a["memory_bytes"]
    # a vendor's "24 GB" of GDDR (or an Apple Mac's "128GB") is that many GiB: shown as such, not as 25.77 GB
    marketed = f"{mem // GiB:,} GiB" if mem % GiB == 0 else f"{_num(mem, GB)} GB"
    unified = a.get("unified_memory")
    rows = [
        ("vendor / architecture", f"{a['vendor']} / {a['architecture']}", "default"),
        ("form factor", a["form_factor"], "default"),
        (
            "memory (unified, shared with the CPU and OS)" if unified else "memory (marketed)",
            f"{marketed} ({a['memory_type']})",
            "memory_bytes",
        ),
    ]
    if a["memory_reported_bytes"]:
        rows.append(
            (
                "memory the GPU may use (OS default)" if unified else "memory (driver reports)",
                f"{a['memory_reported_bytes'] / GiB:.2f} GiB ({a['memory_reported_bytes']:,} bytes)",
                "memory_reported_bytes",
            )
        )
    rows.append(
        ("memory bandwidth", f"{_num(a['memory_bandwidth_bytes_per_s'], 1e12, 3)} TB/s", "memory_bandwidth_bytes_per_s")
    )
    if a.get("sm_count"):
        rows.append(("SMs / compute units / GPU cores", f"{a['sm_count']:,}", "sm_count"))
    for d in DTYPES:
        v = a["peak_flops_per_s"].get(d)
        if v is not None:
            unit = "TOPS" if d == "int8" else "TFLOP/s"
            rows.append((f"{d} dense peak", f"{_num(v, 1e12)} {unit}", f"peak_flops_per_s.{d}"))
    if a["interconnect"]:
        ic = a["interconnect"]
        links = f", {ic['links']} links" if ic.get("links") else ""
        rows.append(
            (
                "scale-up link",
                f"{ic['kind']}: {_num(ic['bandwidth_bytes_per_s'], GB)} GB/s per direction{links}",
                "interconnect",
            )
        )
    if not a.get("matmul_efficiency") and a["peak_flops_per_s"].get("bf16"):
        rows.append(("bf16 matmul ceiling (MAMF)", "not measured: estimates assume 75 % of the peak", "-"))
    for d, frac in (a.get("matmul_efficiency") or {}).items():
        peak = a["peak_flops_per_s"].get(d)
        shown = f"{frac:.1%} of the {d} peak" + (f" ({_num(frac * peak, 1e12)} TFLOP/s)" if peak else "")
        rows.append((f"{d} matmul ceiling (MAMF)", shown, f"matmul_efficiency.{d}"))
    factor, fp16 = a.get("fp16_accumulate_factor"), a["peak_flops_per_s"].get("fp16")
    if factor is not None and fp16:
        shown = f"{factor:g}x the fp16 peak ({_num(factor * fp16, 1e12)} TFLOP/s)"
        rows.append(("fp16 tensor, FP16 accumulate", shown, "fp16_accumulate_factor"))
    if a.get("attention_flops_per_s"):
        shown = f"{_num(a['attention_flops_per_s'], 1e12)} TFLOP/s (caps training attention)"
        rows.append(("flash attention fwd + bwd", shown, "attention_flops_per_s"))
    if a.get("host_link_bytes_per_s"):
        shown = f"{_num(a['host_link_bytes_per_s'], 1e9)} GB/s per direction (offload, checkpoints)"
        rows.append(("host link", shown, "host_link_bytes_per_s"))
    tensor, exp2 = a.get("tensor_flops_per_clock_per_sm"), a.get("exp2_per_clock_per_sm")
    if tensor:
        rows.append(("tensor FLOPs per SM clock", f"{tensor:g} (dense 16-bit)", "tensor_flops_per_clock_per_sm"))
    if exp2:
        rows.append(
            ("exponentials per SM clock", f"{exp2:g} (softmax's special-function unit)", "exp2_per_clock_per_sm")
        )
    rating = a.get("low_power_rating")
    if rating:
        shown = f"{rating['peak_fraction']:.1%} of the peak at {rating['power_w']:g} W (power caps interpolate)"
        rows.append(("rated at lower power", shown, "low_power_rating"))
    if a.get("scale_up_domain_gpus"):
        rows.append(("scale-up domain", f"{a['scale_up_domain_gpus']:,} devices", "scale_up_domain_gpus"))
    if a.get("scale_out_bytes_per_s_per_gpu"):
        rows.append(
            (
                "scale-out per GPU",
                f"{_num(a['scale_out_bytes_per_s_per_gpu'], GB)} GB/s per direction (typical NIC)",
                "scale_out_bytes_per_s_per_gpu",
            )
        )
    if a["pcie_gen"]:
        x16 = pcie_bytes_per_s(a["pcie_gen"])
        rows.append(("PCIe", f"Gen {a['pcie_gen']} x16: {_num(x16, GB)} GB/s per direction", "pcie_gen"))
    if a.get("cublas_workspace_bytes"):
        rows.append(
            ("cuBLAS workspace", format_bytes(a["cublas_workspace_bytes"], binary=True), "cublas_workspace_bytes")
        )
    if a.get("fp8_gemm_any_layout") is not None:
        layouts = "any layout" if a["fp8_gemm_any_layout"] else "TN only (a transposed fp8 weight copy is kept)"
        rows.append(("fp8 GEMM operands", layouts, "fp8_gemm_any_layout"))
    rows.append(("TDP", f"{_num(a['tdp_w'], 1)} W" if a["tdp_w"] else "not published", "tdp_w"))
    rows.append(("year", str(a["year"]), "year"))
    return rows


def gpu_show(record: dict) -> Group:
    a = record["accelerator"]
    title = Text(f"{a['name']}  ({a['id']})", style="bold")
    t = Table(box=box.SIMPLE_HEAD, header_style="bold")
    t.add_column("figure")
    t.add_column("value")
    t.add_column("source")
    sources = a["sources"]
    for label, value, key in _figure_rows(a):
        if key == "-":  # a figure the catalog does not have: gpuplan's documented default stands in
            t.add_row(label, value, "gpuplan's default (estimate/mamf.py DEFAULT_MATMUL_EFFICIENCY)")
            continue
        s = sources.get(key) or sources.get(key.split(".")[0]) or next(iter(sources.values()), None)
        t.add_row(label, value, f"{s['title']} ({s['date']})" if s else _DASH)
    parts: list = [title, t]
    if a["aliases"]:
        parts.append(Text("aliases: " + ", ".join(a["aliases"]), style="dim"))
    urls = sorted({s["url"] for s in sources.values()})
    parts.append(Text("sources: " + "  ".join(urls), style="dim"))
    if a["origin"] != "built-in":
        parts.append(Text(f"from {a['origin']}", style="dim"))
    return Group(*parts)


def _ceiling_cell(c: dict | None) -> str:
    """A matmul ceiling beside its peak: measured (MAMF) as is, anything else marked 'est.'."""
    if c is None:
        return _DASH
    text = f"{_num(c['flops_per_s'], 1e12)} ({c['fraction']:.1%})"
    return text if c["measured"] else f"est. {text}"


def gpus_compare(record: dict) -> Table:
    accs = record["accelerators"]
    t = Table(box=box.SIMPLE_HEAD, header_style="bold")
    t.add_column("figure", no_wrap=True)
    for a in accs:
        t.add_column(a["id"], justify="right")
    labels: list[str] = []
    values: dict[str, dict[str, str]] = {}

    def put(label: str, acc_id: str, value: str, after: str | None) -> str:
        """A row's value; a label first seen goes right after this accelerator's previous row (so an fp4
        row that only the second GPU has sits after int8, not at the bottom)."""
        if label not in values:
            labels.insert(labels.index(after) + 1 if after in values else len(labels), label)
            values[label] = {}
        values[label][acc_id] = value
        return label

    for a in accs:
        ceilings = a.get("matmul_ceilings") or {}
        prev: str | None = None
        for label, value, key in _figure_rows(a):
            if key.startswith("matmul_efficiency") or label.endswith("(MAMF)"):
                continue  # shown beside the peak below
            prev = put(label, a["id"], value, prev)
            dtype = key.removeprefix("peak_flops_per_s.") if key.startswith("peak_flops_per_s.") else None
            if dtype in ceilings:
                unit = "TOPS" if dtype == "int8" else "TFLOP/s"
                prev = put(f"{dtype} matmul ceiling, {unit}", a["id"], _ceiling_cell(ceilings[dtype]), prev)
    for label in labels:
        t.add_row(label, *(values[label].get(a["id"], _DASH) for a in accs))
    t.caption = (
        "Peaks are dense (no sparsity). Matmul ceiling: the best-shape GEMM rate the estimates use, measured "
        "(MAMF) unless marked est. (estimated, not measured: another dtype's measurement or the 75 % default). "
        "GB = 1e9 bytes, GiB = 2**30 bytes."
    )
    return t


def models_row(m: dict) -> list[str]:
    """The cells of one model record in ``model list``."""
    experts = f"{m['experts_per_token']}/{m['experts']}" if m.get("experts") else _DASH
    return [
        m["id"],
        format_count(m["params"]),
        format_count(m["active_params"]),
        str(m["layers"]),
        str(m["hidden_size"]),
        f"{m['attention_heads']}/{m['kv_heads']}",
        experts,
        f"{m['context_length']:,}",
        m["attention"],
        m["family"],
    ]


def models_table(record: dict, rows: list[list[str]] | None = None) -> Table:
    """``model list``; ``rows``: the cells of the listed models, when made beforehand (``models_row``)."""
    t = _ListTable(box=box.SIMPLE_HEAD, header_style="bold")
    headers = [
        ("id", "left"),
        ("params", "right"),
        ("active", "right"),
        ("layers", "right"),
        ("hidden", "right"),
        ("heads/kv", "right"),
        ("experts", "right"),
        ("context", "right"),
        ("attention", "left"),
        ("family", "left"),
    ]
    if rows is None:
        rows = [models_row(m) for m in record["models"]]
    _fixed_columns(t, rows, headers, flexible="family")
    t.caption = "params: exact counts (as transformers builds them); active: per token, embeddings included."
    return t


def _flop(value: float) -> str:
    return f"{format_flops(value)}FLOP"


def model_show(record: dict) -> Group:
    m = record["model"]
    fl = m["flops_per_token"]
    parts: list = [Text(f"{m['name']}  ({m['id']})", style="bold")]
    if not m["architecture_known"]:
        parts.append(Text(f"parameters: {m['params']:,} ({format_count(m['params'])})"))
        parts.append(
            Text(f"training FLOPs per token: {_flop(fl['training'])} (6N; no attention term without an architecture)")
        )
        parts.append(Text("needs an architecture for: " + ", ".join(m["cannot_estimate"]), style="dim"))
        return Group(*parts)
    facts = Table(box=None, show_header=False, padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    experts = (
        f"{m['experts']} routed ({m['experts_per_token']} per token), expert FFN {m['expert_ffn_size']}"
        f"{', shared FFN ' + str(m['shared_expert_ffn_size']) if m['shared_expert_ffn_size'] else ''}"
        f", {m['moe_layers']} of {m['layers']} layers"
        if m["experts"]
        else _DASH
    )
    rows = [
        ("parameters", f"{m['params']:,} ({format_count(m['params'])})"),
        ("active per token", f"{m['active_params']:,} ({format_count(m['active_params'])})"),
        ("layers", str(m["layers"])),
        ("hidden size", str(m["hidden_size"])),
        (
            "attention",
            f"{m['attention'].upper()}: {m['attention_heads']} heads, {m['kv_heads']} KV heads, "
            f"head dim {m['head_dim']}",
        ),
        ("FFN size", f"{m['ffn_size']} ({m['mlp']})" if m["ffn_size"] else f"({m['mlp']})"),
        ("experts", experts),
        ("vocabulary", f"{m['vocab_size']:,}"),
        (
            "context length",
            f"{m['context_length']:,}"
            + (
                f" (sliding window {m['sliding_window']:,} on {m['sliding_window_layers']} layers)"
                if m["sliding_window"]
                else ""
            ),
        ),
        ("embeddings tied", "yes" if m["tie_embeddings"] else "no"),
    ]
    if m["mla"]:
        x = m["mla"]
        rows.append(
            (
                "MLA",
                f"q rank {x['q_lora_rank']}, kv rank {x['kv_lora_rank']}, qk {x['qk_nope_head_dim']}+"
                f"{x['qk_rope_head_dim']} (rope), v {x['v_head_dim']}",
            )
        )
    for k, v in rows:
        facts.add_row(k, v)
    parts.append(facts)
    bd = Table(box=box.SIMPLE_HEAD, header_style="bold", title="parameters by component", title_justify="left")
    bd.add_column("component")
    bd.add_column("params", justify="right")
    bd.add_column("share", justify="right")
    for k, v in m["breakdown"].items():
        bd.add_row(k, f"{v:,}", f"{100 * v / m['params']:.1f}%")
    bd.add_row(Text("total", style="bold"), Text(f"{m['params']:,}", style="bold"), "100%")
    parts.append(bd)
    ft = Table(
        box=box.SIMPLE_HEAD,
        header_style="bold",
        title=f"FLOPs per token at sequence length {fl['seq_len']:,}",
        title_justify="left",
    )
    ft.add_column("")
    ft.add_column("total", justify="right")
    ft.add_column("matmuls (2N/6N)", justify="right")
    ft.add_column("attention", justify="right")
    ft.add_row("training", _flop(fl["training"]), _flop(fl["training_matmul"]), _flop(fl["training_attention"]))
    ft.add_row(
        "inference", _flop(fl["inference"]), _flop(fl["training_matmul"] / 3), _flop(fl["training_attention"] / 3)
    )
    parts.append(ft)
    parts.append(Text(f"N = {fl['matmul_params']:,} matmul params. {fl['convention']}.", style="dim"))
    if m["published_params"]:
        approx = "~" if m["published_params_rounded"] else ""
        parts.append(Text(f"published count: {approx}{m['published_params']:,}", style="dim"))
    if m["source"]:
        parts.append(Text(f"source: {m['source']['title']} ({m['source']['date']}) {m['source']['url']}", style="dim"))
    for n in m["notes"]:
        parts.append(Text(f"note: {n}", style="dim"))
    return Group(*parts)


def _fit_advice(record: dict) -> list[Text]:
    """The smallest change that makes a plan fit (plan/advice.py), as one line; nothing when it fits."""
    if "fit_advice" not in record:
        return []
    advice = record["fit_advice"]
    if advice is None:
        return [
            Text(
                "no single change found that fits (searched recompute, ZeRO, TP/PP, offload, formats and "
                "more GPUs): see 'gpuplan gpus list' for larger GPUs",
                style="red",
            )
        ]
    return [
        Text(
            f"to fit, add: {advice['flags']} (then {advice['total_bytes'] / GiB:.1f} GiB of "
            f"{advice['capacity_bytes'] / GiB:.1f} GiB)",
            style="bold",
        )
    ]


def train_report(record: dict) -> Group:
    """``gpuplan train``: the memory of the busiest GPU by part, the verdict, and the rule of thumb."""
    m, lay, job, mem, rule = record["model"], record["layout"], record["job"], record["memory"], record["rule_of_thumb"]
    gpu, recipe = record["gpu"], record["recipe"]
    layout = (
        f"dp={lay['dp']} tp={lay['tp']} pp={lay['pp']}"
        + (f" cp={lay['cp']}" if lay["cp"] > 1 else "")
        + (f" ep={lay['ep']}" if lay["ep"] > 1 else "")
        + (f" etp={lay['etp']}" if lay.get("etp") is not None and lay["etp"] != lay["tp"] else "")
        + (" +sp" if lay["sequence_parallel"] else "")
        + (f" zero-{lay['zero']}" if lay["zero"] else "")
        + (f" offload {lay['offload']}" if lay["offload"] != "none" else "")
    )
    method = (
        job["method"]
        + (f" r={job['lora_rank']} on {','.join(job['lora_targets'])}" if job["lora_rank"] else "")
        + (f" ({job['quant']} base)" if job["quant"] else "")
    )
    batch = f"micro-batch {job['micro_batch']}" + (
        f" x {job['grad_accumulation']} accumulation x dp {lay['dp']} = {job['global_batch']}"
        if job["global_batch"]
        else ""
    )
    head = [
        Text(
            f"{m['id']} ({format_count(m['params'])} params, {format_count(m['trainable_params'])} trained) on "
            f"{lay['gpus']} x {gpu['id']}",
            style="bold",
        ),
        Text(
            f"layout {layout}; {batch}; seq {job['seq_len']:,}; {job['precision']}; {job['optimizer']}; {method}; "
            f"recompute {_recompute_text(job)}; flash attention {_attention_text(record)}"
        ),
        Text(f"recipe: {recipe['title']} [{recipe['why']}]", style="dim"),
    ]
    if job.get("stack"):
        head.append(Text(f"stack: {job['stack']} [{job['stack_why']}]", style="dim"))
    stage = f", pipeline stage {mem['pipeline_stage']}" if mem["pipeline_stage"] != "only" else ""
    t = Table(box=box.SIMPLE_HEAD, header_style="bold")
    head.append(Text(f"memory per GPU (the busiest{stage})", style="bold"))
    t.add_column("part")
    t.add_column("GiB", justify="right")
    t.add_column("GB", justify="right")
    for group in ("weights", "gradients", "optimizer", "activations", "other"):
        total = mem[f"{group}_bytes"]
        members = [p for p in mem["parts"] if p["group"] == group]
        if not members:
            continue
        t.add_row(
            Text(group, style="bold"), Text(f"{total / GiB:.2f}", style="bold"), Text(f"{total / GB:.2f}", style="bold")
        )
        if len(members) > 1 or members[0]["name"] != group:
            for p in members:
                t.add_row(f"  {p['name']}", f"{p['bytes'] / GiB:.2f}", f"{p['bytes'] / GB:.2f}")
    t.add_row(
        Text("total", style="bold"),
        Text(f"{mem['total_bytes'] / GiB:.2f}", style="bold"),
        Text(f"{mem['total_bytes'] / GB:.2f}", style="bold"),
    )
    share = 100 * mem["total_bytes"] / mem["capacity_bytes"]
    verdict = (
        Text(
            f"fits: {mem['total_bytes'] / GiB:.1f} GiB of {mem['capacity_bytes'] / GiB:.1f} GiB usable ({share:.0f}%)",
            style="bold green",
        )
        if mem["fits"]
        else Text("does not fit: " + "; ".join(mem["reasons"]), style="bold red")
    )
    parts: list = [*head, t, verdict, *_fit_advice(record)]
    mb = mem["max_micro_batch"]
    if mb is None:
        parts.append(Text("largest micro-batch: not estimated (activations need the architecture)"))
    else:
        parts.append(
            Text(
                f"largest micro-batch that fits: {mb}"
                if mb
                else "no micro-batch fits with this layout: add GPUs, shard more (--zero, --tp, --pp), recompute "
                "(--recompute full), or use LoRA/QLoRA"
            )
        )
    if mem["cpu_offload_bytes"]:
        parts.append(Text(f"offloaded to CPU memory: {mem['cpu_offload_bytes'] / GiB:.1f} GiB per GPU"))
    parts.append(
        Text(
            f"rule of thumb ({rule['formula']}): {rule['total_bytes'] / GB:,.0f} GB for the job, "
            f"{rule['per_gpu_bytes'] / GB:,.1f} GB per GPU over {lay['gpus']}; at least {rule['min_gpus']} "
            f"x {gpu['id']}. {rule['explanation']}",
            style="dim",
        )
    )
    if "time" in record:
        parts += _time_and_cost(record)
    parts += _machine_lines(record)
    parts += _calibration_lines(record)
    for n in record["notes"]:
        parts.append(Text(f"note: {n}", style="dim"))
    parts.append(_assumptions_line(record))
    return Group(*parts)


def serve_report(record: dict) -> Group:
    """``gpuplan serve``: memory, latency, throughput, fleet and cost."""
    m, lay, job, mem = record["model"], record["layout"], record["job"], record["memory"]
    lat, thr, fleet, cost, gpu = record["latency"], record["throughput"], record["fleet"], record["cost"], record["gpu"]
    parts: list = [
        Text(
            f"{m['id']} ({format_count(m['params'])} params) on {gpu['id']}, tp={lay['tp']} pp={lay['pp']} "
            f"({lay['gpus_per_replica']} GPU{'s' if lay['gpus_per_replica'] > 1 else ''} per replica)",
            style="bold",
        ),
        Text(
            f"weights {job['weights']}, KV cache {job['kv_cache']}; {job['prompt_tokens']:,} prompt + "
            f"{job['output_tokens']:,} output tokens; {job['batching']} batch {job['batch']}; engine {job['engine']}"
            + (f" ({job['engine_profile']} profile)" if job.get("engine_profile") not in (None, job["engine"]) else "")
        ),
        Text("memory per GPU", style="bold"),
    ]
    t = Table(box=box.SIMPLE_HEAD, header_style="bold")
    t.add_column("part")
    t.add_column("GiB", justify="right")
    t.add_column("GB", justify="right")
    for p in mem["parts"]:
        t.add_row(p["name"], f"{p['bytes'] / GiB:.2f}", f"{p['bytes'] / GB:.2f}")
    t.add_row(
        Text("total", style="bold"),
        Text(f"{mem['total_bytes'] / GiB:.2f}", style="bold"),
        Text(f"{mem['total_bytes'] / GB:.2f}", style="bold"),
    )
    parts.append(t)
    if mem["fits"]:
        parts.append(
            Text(
                f"fits: {mem['total_bytes'] / GiB:.1f} GiB of {mem['planning_bytes'] / GiB:.1f} GiB planned "
                f"({mem['capacity_bytes'] / GiB:.1f} GiB usable); room for {mem['max_concurrent_sequences']:,} "
                f"sequences of {job['sequence_tokens']:,} tokens",
                style="bold green",
            )
        )
    else:
        parts.append(Text("does not fit: " + "; ".join(mem["reasons"]), style="bold red"))
        parts.extend(_fit_advice(record))
    lt = Table(box=box.SIMPLE_HEAD, header_style="bold")
    for col in (
        "time to first token",
        "time per output token",
        "request latency",
        "tokens/s per replica",
        "tokens/s per GPU",
        "requests/s per replica",
    ):
        lt.add_column(col, justify="right")
    lt.add_row(
        f"{lat['ttft_s'] * 1e3:,.1f} ms{_band(lat, 'ttft_s', lambda x: f'{x * 1e3:,.1f}')}",
        f"{lat['tpot_s'] * 1e3:,.2f} ms{_band(lat, 'tpot_s', lambda x: f'{x * 1e3:,.2f}')} "
        f"({lat['decode_bound']}-bound)",
        f"{lat['request_latency_s']:,.2f} s{_band(lat, 'request_latency_s', lambda x: f'{x:,.2f}')}",
        f"{thr['tokens_per_s']:,.1f}{_band(thr, 'tokens_per_s', lambda x: f'{x:,.1f}')}",
        f"{thr['tokens_per_s_per_gpu']:,.1f}{_band(thr, 'tokens_per_s_per_gpu', lambda x: f'{x:,.1f}')}",
        f"{thr['requests_per_s']:,.3g}{_band(thr, 'requests_per_s', lambda x: f'{x:,.3g}')}",
    )
    parts.append(lt)
    note = _band_note(record)
    if note is not None:
        parts.append(note)
    if job["batching"] == "continuous":
        parts.append(
            Text(
                f"continuous batching: {job['running_sequences']:,.0f} sequences decode per step with "
                f"{job['prefill_tokens_per_step']:,.0f} prompt tokens of arriving requests packed beside them "
                f"(chunked prefill); prompts take {thr['prefill_share']:.0%} of the replica's time; KV planned "
                f"at {job['kv_tokens_per_sequence']:,} tokens per sequence"
            )
        )
    if lat.get("under_load"):

        def ms(x: float | None) -> str:
            return "unbounded" if x is None else f"{x * 1e3:,.1f} ms"

        parts.append(
            Text(
                f"under load (Poisson arrivals): {lat['requests_per_s_per_replica']:.3g} requests/s per replica, "
                f"utilization {lat['utilization']:.0%} of {lat['capacity_requests_per_s_per_replica']:.3g} "
                f"(cap {lat['max_utilization']:.0%}), {lat['running_sequences']:,.1f} sequences running; "
                f"TTFT mean {ms(lat['ttft_s'])}, q90 {ms(lat['ttft_q90_s'])}, q99 {ms(lat['ttft_q99_s'])} "
                f"(queue {ms(lat['queue_wait_s'])}); TPOT mean {ms(lat['tpot_s'])}, q90 {ms(lat['tpot_q90_s'])}, "
                f"q99 {ms(lat['tpot_q99_s'])}; unloaded TTFT {ms(lat['ttft_unloaded_s'])}, TPOT "
                f"{ms(lat['tpot_unloaded_s'])}; fleet sized by {lat['fleet_limited_by']}"
            )
        )
    elif lat.get("queue_wait_s"):
        parts.append(
            Text(
                f"closed loop: each request also waits {lat['queue_wait_s']:,.2f} s for a slot before the TTFT "
                f"above (Little's law; {lat['ttft_with_queue_s']:,.2f} s with it)"
            )
        )
    if fleet["qps"] and fleet["rule_of_thumb_gpus"] is not None:
        rule = fleet["rule_of_thumb_gpus"]
        parts.append(
            Text(
                f"fleet for {fleet['qps']:g} requests/s: {fleet['replicas']} replicas = {fleet['gpus']} GPUs "
                f"(seed rule output_tokens / throughput x qpm / 60: {rule:.1f} GPUs)"
            )
        )
    parts += _calibration_lines(record)
    parts += _machine_lines(record)
    if cost:
        parts.append(
            Text(
                f"cost at ${cost['usd_per_gpu_hour']:g}/GPU-hour: ${cost['usd_per_hour']:,.2f}/h per replica; "
                f"${cost['usd_per_million_output_tokens']:,.2f}"
                f"{_band(cost, 'usd_per_million_output_tokens', lambda x: f'${x:,.2f}')} per million output tokens, "
                f"${cost['usd_per_million_input_tokens']:,.2f}"
                f"{_band(cost, 'usd_per_million_input_tokens', lambda x: f'${x:,.2f}')} per million input tokens"
            )
        )
    for n in record["notes"]:
        parts.append(Text(f"note: {n}", style="dim"))
    parts.append(_assumptions_line(record))
    return Group(*parts)


def _machine_lines(record: dict) -> list[Text]:
    """The compact "machine" section: storage and checkpoints, failures and goodput, host, network, energy."""
    m = record.get("machine")
    if not m:
        return []
    if "cold_start_s" in m:  # serve
        lines = [
            Text(
                f"machine: cold start {m['cold_start_s']:,.1f} s ({m['weights_bytes_per_node'] / GB:,.1f} GB of "
                f"weights from {m['storage']['class']}, then host to GPU); "
                f"host RAM {m['host_ram_bytes_per_node'] / GB:,.0f} "
                f"GB per node; disk {m['disk_bytes_per_node'] / GB:,.1f} GB for the weights",
                style="bold",
            )
        ]
        if "scale_up" in m:
            up = m["scale_up"]
            boot = "node provisioning unknown"
            if "instance_boot_s" in up:
                boot = f"instance boot {up['instance_boot_s']:,.0f} s"
            total = f"{up['per_replica_s']:,.1f} s" if "per_replica_s" in up else f"at least {up['at_least_s']:,.1f} s"
            lines.append(
                Text(
                    f"  scale-up after a traffic step: {boot} + cold start {up['cold_start_s']:,.1f} s + engine "
                    f"warm-up {up['engine_warmup_s']:,.0f} s = {total} per added replica (replicas start in parallel)"
                )
            )
        if "instance" in m:
            lines.append(Text("  " + _serve_instance_line(m)))
        for w in m.get("warnings", ()):
            lines.append(Text(f"  warning: {w}", style="yellow"))
        return lines
    p = m["checkpoint_parts_bytes"]
    out = [
        Text("machine", style="bold"),
        Text(
            f"  checkpoint {m['checkpoint_bytes'] / GB:,.1f} GB (weights {p['weights_bytes'] / GB:,.1f} + master "
            f"{p['master_weights_bytes'] / GB:,.1f} + optimizer {p['optimizer_bytes'] / GB:,.1f}; "
            f"{m['checkpoint_bytes_per_rank'] / GB:,.2f} GB per rank), written in {m['checkpoint_write_s']:,.1f} s to "
            f"{m['storage']['class']} at {m['storage']['write_bytes_per_s'] / GB:,.1f} GB/s; training blocks "
            f"{m['checkpoint_blocking_s']:,.1f} s ({'asynchronous' if m['async_checkpoint'] else 'synchronous'})"
        ),
    ]
    every = f"every {_duration(m['checkpoint_interval_s'])}" + (
        f" ({m['checkpoint_interval_steps']:,} steps)" if "checkpoint_interval_steps" in m else ""
    )
    line = (
        f"  failures {m['failures_per_gpu_hour']:.3g} per GPU-hour: cluster MTBF {_duration(m['cluster_mtbf_s'])}; "
        f"checkpoint {every}"
    )
    if "goodput" in m:
        line += (
            f"; {m['expected_interruptions']:,.1f} interruptions, goodput {m['goodput']:.1%}: "
            f"{_duration(m['wall_time_with_failures_s'])} instead of {_duration(m['wall_time_s'])}"
        )
        if "cost_with_failures_usd" in m:
            line += f", ${m['cost_with_failures_usd']:,.0f} instead of ${m['cost_usd']:,.0f}"
    out.append(Text(line))
    host = (
        f"  host {m['cpu_cores_per_gpu']:g} CPU cores per GPU, {m['host_ram_bytes_per_node'] / GB:,.0f} GB RAM per node"
    )
    if "dataset_bytes" in m:
        host += (
            f"; data {m['dataset_bytes'] / GB:,.1f} GB, read at {m['storage_read_bytes_per_s'] / 1e6:,.3g} MB/s "
            f"({m['storage_read_bytes_per_s_per_node'] / 1e6:,.3g} MB/s per node)"
        )
    out.append(Text(host))
    tail = []
    if "network_bytes_per_s_per_gpu" in m:
        exposed = m["network_exposed_s_per_step"]
        tail.append(
            f"network {m['network_bytes_per_s_per_gpu'] / GB:,.1f} GB/s per GPU to hide the traffic vs "
            f"{m['nic_bytes_per_s_per_gpu'] / GB:,.0f} GB/s NIC"
            + (f" ({exposed:,.3f} s exposed per step)" if exposed else "")
        )
    if "energy_kwh" in m:
        tail.append(
            f"energy {m['energy_kwh'] / 1000:,.1f} MWh, {m['co2eq_kg'] / 1000:,.1f} t CO2eq at "
            f"{m['grid_gco2_per_kwh']:g} g/kWh"
        )
    if tail:
        out.append(Text("  " + "; ".join(tail)))
    if "instance" in m:
        out.append(Text("  " + _instance_line(m)))
    for w in m.get("warnings", ()):
        out.append(Text(f"  warning: {w}", style="yellow"))
    return out


def _instance_line(m: dict) -> str:
    """--offer: the instance's vCPUs, RAM and local NVMe against the plan's needs ("unknown" where the offer
    publishes no figure), and its NICs."""
    inst, checks = m["instance"], m["instance_checks"]
    cpu, ram = checks["cpu"], checks["host_ram"]
    have_cpu = f"{cpu['vcpus_per_node']:,} vCPUs" if "vcpus_per_node" in cpu else "vCPUs unknown"
    have_ram = (
        f"{ram['host_memory_bytes_per_node'] / GB:,.0f} GB RAM"
        if "host_memory_bytes_per_node" in ram
        else "RAM unknown"
    )
    parts = [
        f"{have_cpu} vs {cpu['needed_cores_per_node']:g} cores needed ({cpu['status']})",
        f"{have_ram} vs {ram['needed_bytes_per_node'] / GB:,.0f} GB needed ({ram['status']})",
    ]
    nvme = checks.get("local_nvme")
    if nvme is not None:
        have = (
            f"{nvme['local_nvme_bytes_per_node'] / 1e12:,.2f} TB" if "local_nvme_bytes_per_node" in nvme else "unknown"
        )
        parts.append(f"local NVMe {have} vs {nvme['needed_bytes_per_node'] / 1e12:,.2f} TB needed ({nvme['status']})")
    else:
        nv = inst.get("local_nvme_bytes")
        parts.append(f"local NVMe {nv / 1e12:,.2f} TB" if nv is not None else "local NVMe unknown")
    nic = inst.get("nic_kind", "NIC kind unknown")
    bw = inst.get("nic_bytes_per_s_per_gpu")
    parts.append(f"{nic} {bw / GB:,.1f} GB/s per GPU" if bw is not None else f"{nic}, bandwidth unknown")
    link = checks.get("scale_up")
    if link is not None:
        parts.append(
            f"NVLink domain {link['scale_up_domain_gpus']} GPU(s) vs tensor parallel {link['tensor_parallel_gpus']} "
            f"({link['status']})"
        )
    return f"instance {inst['instance']}: " + "; ".join(parts)


def _serve_instance_line(m: dict) -> str:
    """serve --offer: the instance's host RAM and local disk against one replica's needs ("unknown" where the
    offer publishes no figure)."""
    inst, checks = m["instance"], m["instance_checks"]
    ram, disk = checks["host_ram"], checks["local_disk"]
    have_ram = (
        f"{ram['host_memory_bytes_per_node'] / GB:,.0f} GB RAM"
        if "host_memory_bytes_per_node" in ram
        else "RAM unknown"
    )
    have_disk = (
        f"local NVMe {disk['local_nvme_bytes_per_node'] / GB:,.0f} GB"
        if "local_nvme_bytes_per_node" in disk
        else "local NVMe unknown"
    )
    return (
        f"instance {inst['instance']}: {have_ram} vs {ram['needed_bytes_per_node'] / GB:,.0f} GB needed "
        f"({ram['status']}); {have_disk} vs {disk['needed_bytes_per_node'] / GB:,.1f} GB of weights ({disk['status']})"
    )


def _calibration_lines(record: dict) -> list[Text]:
    """--calibration: what the profile replaced (each figure with its measurement), what --assume kept, and
    the results not used, grouped by the reason."""
    c = record.get("calibration")
    if not c:
        return []
    head = f"calibration {c['file']}"
    if c["nothing_applicable"]:
        out = [Text(f"{head}: nothing applicable ({c['nothing_applicable']})", style="cyan")]
    else:
        out = (
            [
                Text(
                    f"{head} (measured on {c['measured_on']}, {c['created']}): " + "; ".join(c["replaced"]),
                    style="cyan",
                )
            ]
            if c["replaced"]
            else []
        )
    out += [Text(f"{head}: {o}", style="cyan") for o in c["overridden"]]
    groups: dict[str, list[str]] = {}
    for x in c["not_applied"]:
        groups.setdefault(x["why"], []).append(x["result"])
    if groups and list(groups) != [c["nothing_applicable"]]:
        out.append(
            Text(
                f"{head}: not used: " + "; ".join(f"{', '.join(names)} ({why})" for why, names in groups.items()),
                style="dim",
            )
        )
    return out


def _assumptions_line(record: dict) -> Text:
    """One dim line naming every assumption and its value (sizes with their unit)."""

    def shown(x: dict) -> str:
        value = format_bytes(x["value"], binary=True) if x["unit"] == "bytes" else f"{x['value']:g}"
        return f"{x['name']}={value}"

    return Text(
        "assumptions: "
        + ", ".join(shown(x) for x in record["assumptions"])
        + " (sources: --json; change with --assume NAME=VALUE)",
        style="dim",
    )


def serve_rank(record: dict) -> Group:
    """``gpuplan serve --rank``: each GPU's best option of the ``plan serve`` search, cheapest first."""
    job = record["job"]
    t = Table(box=box.SIMPLE_HEAD, header_style="bold")
    for col, just in (
        ("#", "right"),
        ("gpu", "left"),
        ("weights", "left"),
        ("kv", "left"),
        ("tp", "right"),
        ("engine", "left"),
        ("replicas", "right"),
        ("batch", "right"),
        ("TTFT ms", "right"),
        ("TPOT ms", "right"),
        ("tokens/s/GPU", "right"),
        ("$/GPU-h", "right"),
        ("$/M out", "right"),
    ):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for i, o in enumerate(record["options"], 1):
        t.add_row(
            str(i), o["gpu"], o["weights"], o["kv_cache"], str(o["tp"]), o["engine"], str(o["replicas"]),
            str(o["batch"]), f"{o['ttft_s'] * 1e3:,.0f}", f"{o['tpot_s'] * 1e3:,.1f}",
            f"{o['tokens_per_s_per_gpu']:,.0f}", f"{o['usd_per_gpu_hour']:.2f}",
            f"{o['usd_per_million_output_tokens']:.3f}",
        )  # fmt: skip
    targets = ", ".join(
        x
        for x in (
            f"TPOT <= {job['max_tpot_s'] * 1e3:g} ms" if job["max_tpot_s"] else "",
            f"TTFT <= {job['max_ttft_s'] * 1e3:g} ms" if job["max_ttft_s"] else "",
        )
        if x
    )
    load = f"{job['qps']:g} requests/s" if job["qps"] is not None else "one replica at its full batch"
    head = Text(
        f"{record['model']['id']}: {job['prompt_tokens']:,} + {job['output_tokens']:,} tokens, {load}"
        + (f", {targets}" if targets else "")
        + "; each GPU's best option of plan serve",
        style="bold",
    )
    parts: list = [head, t]
    by_reason: dict[str, list[str]] = {}
    for n in record["not_possible"]:
        by_reason.setdefault(n["reason"] or "none searched", []).append(n["gpu"])
    if by_reason:
        parts.append(
            Text(
                "no option (the furthest check reached; counts under --json not_possible): "
                + "; ".join(f"{why.replace('_', ' ')}: {', '.join(gpus)}" for why, gpus in by_reason.items()),
                style="dim",
            )
        )
    parts.append(
        Text(
            "Each GPU's cheapest option by $ per million output tokens (gpuplan plan serve's search: weights, KV "
            "cache, TP, engine, at the GPU's cheapest on-demand offer; latencies"
            + (" at the load, replicas sized for it)" if job["qps"] is not None else " at the full batch)")
            + ". P10-P90 error bands of TTFT, TPOT, throughput and $ per million under --json.",
            style="dim",
        )
    )
    return Group(*parts)


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:,.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds:,.1f} s"


def _band(block: dict, key: str, fmt: Callable[[float], str]) -> str:
    """`` (P10-P90)`` after a value that carries an error band (``KEY_p10`` / ``KEY_p90``), else ``""``:
    ``14.2 days (11.8-17.5)``."""
    lo, hi = block.get(f"{key}_p10"), block.get(f"{key}_p90")
    if lo is None or hi is None:
        return ""
    return f" ({fmt(lo)}-{fmt(hi)})"


def _duration_band(block: dict, key: str) -> str:
    """A duration in the unit its value picks, with its band in the same unit: ``14.2 days (11.8-17.5)``."""
    seconds = block[key]
    scale = 86400 if seconds >= 86400 else 3600 if seconds >= 3600 else 1
    return _duration(seconds) + _band(block, key, lambda x: f"{x / scale:,.1f}")


def _band_note(record: dict) -> Text | None:
    """Where the bands come from, in one dim line (None when the record has no band)."""
    fams = [f for f in (record.get("bands") or {}).get("families", {}).values() if f]
    if not fams:
        note = (record.get("bands") or {}).get("note")
        return Text(f"error bands: {note}", style="dim") if note else None
    classes = "; ".join(
        f"{f['family']} {f['band_class']} ({f['residuals']} values, {f['sources']} sources)" for f in fams
    )
    return Text(
        "(P10-P90) error bands from gpuplan validate's residuals (published / predicted) of the class: " + classes,
        style="dim",
    )


def _time_and_cost(record: dict) -> list:
    """The --tokens part of ``train``: FLOPs, step time by part, MFU, time, GPU-hours, cost, seed rule."""
    c, t, cost, seed = record["compute"], record["time"], record["cost"], record["seed_rule"]
    out: list = [
        Text(
            f"compute: {c['tokens']:.3g} tokens x {c['epochs']:g} epochs x {c['flops_per_token']:.4g} "
            f"FLOPs/token = {c['total_flops']:.4g} FLOPs ({c['convention']})",
            style="bold",
        )
    ]
    if t["step_parts_s"]:
        out.append(
            Text(
                f"one step: {t['step_s']:,.2f} s{_band(t, 'step_s', lambda x: f'{x:,.2f}')}, "
                f"{t['tokens_per_s']:,.0f} tokens/s{_band(t, 'tokens_per_s', lambda x: f'{x:,.0f}')}",
                style="bold",
            )
        )
        st = Table(box=box.SIMPLE_HEAD, header_style="bold")
        st.add_column("part")
        st.add_column("seconds", justify="right")
        st.add_column("share", justify="right")
        for k, v in t["step_parts_s"].items():
            st.add_row(k, f"{v:,.3f}", f"{100 * v / t['step_s']:.1f}%")
        out.append(st)
        out.append(
            Text(f"matmul efficiency {t['matmul_efficiency']:.1%}: {t['matmul_efficiency_source']}", style="dim")
        )
    out.append(
        Text(
            f"MFU {t['mfu']:.1%}{_band(t, 'mfu', lambda x: f'{x:.1%}')} ({t['mfu_source']}); time to train "
            f"{_duration_band(t, 'seconds')} on {t['gpus']:,} GPUs = {t['gpu_hours']:,.0f} GPU-hours"
            f"{_band(t, 'gpu_hours', lambda x: f'{x:,.0f}')}",
            style="bold green",
        )
    )
    if cost["usd"] is not None:
        o = cost["offer"]
        where = f" ({o['provider']} {o['instance']}, {o['pricing']}, {o['price_date']})" if o else ""
        out.append(
            Text(
                f"cost ${cost['usd']:,.0f}{_band(cost, 'usd', lambda x: f'${x:,.0f}')} at "
                f"${cost['usd_per_gpu_hour']:.2f}/GPU-hour{where}",
                style="bold",
            )
        )
    note = _band_note(record)
    if note is not None:
        out.append(note)
    rule = f"; for this deadline the rule says {seed['gpus']:.1f} GPUs" if seed["gpus"] else ""
    out.append(
        Text(
            f"seed rule constant for this GPU and MFU: {seed['constant']:.2f} (13.3 for A100 at 40 %){rule}",
            style="dim",
        )
    )
    return out


def offers_row(o: dict) -> list[str]:
    """The cells of one offer record in ``offers list``."""
    return [
        o["provider"],
        o["instance"],
        o["gpu"],
        str(o["gpu_count"]),
        f"{o['usd_per_hour']:,.2f}",
        f"{o['usd_per_gpu_hour']:,.2f}",
        o["pricing"],
        o["price_date"],
        o["region"],
    ]


def offers_table(record: dict, rows: list[list[str]] | None = None) -> Table:
    """``offers list``; ``rows``: the cells of the listed offers, when made beforehand (``offers_row``)."""
    t = _ListTable(box=box.SIMPLE_HEAD, header_style="bold")
    headers = [
        ("provider", "left"),
        ("instance", "left"),
        ("gpu", "left"),
        ("n", "right"),
        ("$/h", "right"),
        ("$/GPU-h", "right"),
        ("pricing", "left"),
        ("date", "left"),
        ("region", "left"),
    ]
    if rows is None:
        rows = [offers_row(o) for o in record["offers"]]
    _fixed_columns(t, rows, headers, flexible="region")
    t.caption = "Prices change: each row carries its date and source (--json)."
    return t


def offer_ranking(record: dict) -> Group:
    t = _ListTable(box=box.SIMPLE_HEAD, header_style="bold")
    headers = [
        ("#", "right"),
        ("provider", "left"),
        ("instance", "left"),
        ("gpu", "left"),
        ("GPUs", "right"),
        ("MFU", "right"),
        ("time", "right"),
        ("GPU-hours", "right"),
        ("cost $", "right"),
        ("pareto", "left"),
    ]
    rows = [
        [
            str(i),
            o["offer"]["provider"],
            o["offer"]["instance"] + ("" if o["offer"]["pricing"] == "on-demand" else f" ({o['offer']['pricing']})"),
            o["gpu"],
            str(o["gpus"]),
            f"{o['mfu']:.0%}",
            _duration(o["seconds"]),
            f"{o['gpu_hours']:,.0f}",
            f"{o['usd']:,.0f}",
            "*" if o["pareto"] else "",
        ]
        for i, o in enumerate(record["options"], 1)
    ]
    _fixed_columns(t, rows, headers, flexible="instance")
    parts: list = [
        Text(
            f"{record['model']['id']}: {record['tokens']:.3g} tokens; cheapest first; * = on the "
            "time/cost Pareto front; P10-P90 error bands of MFU, time and cost under --json",
            style="bold",
        ),
        t,
    ]
    if record["cannot_run"]:
        parts.append(
            Text(
                f"{len(record['cannot_run'])} offers cannot run it as laid out (reasons in --json under cannot_run)",
                style="dim",
            )
        )
    return Group(*parts)


def tco_report(record: dict) -> Group:
    """``gpuplan tco``: the owned cost per GPU and the comparison with every rental offer."""
    inp, own, gpu = record["inputs"], record["owned"], record["gpu"]
    head = Text(
        f"{record['gpus']} x {gpu['id']} over {record['period_years']:g} years at {inp['utilization']:.0%} "
        f"utilization ({own['used_gpu_hours']:,.0f} used GPU-hours); purchase paid off over {inp['years']:g} "
        "years",
        style="bold",
    )
    t = Table(box=box.SIMPLE_HEAD, header_style="bold")
    t.add_column("owning, per GPU")
    t.add_column("USD", justify="right")
    t.add_row("purchase (GPU + server share)", f"{inp['purchase_usd'] + inp['server_usd']:,.0f}")
    t.add_row(
        f"capital per year ({inp['cost_of_capital']:.1%} over {inp['years']:g} years)",
        f"{own['capital_usd_per_gpu_year']:,.0f}",
    )
    t.add_row(
        f"colocation per year (${inp['hosting_usd_per_kw_month']:g}/kW-month)",
        f"{own['hosting_usd_per_gpu_year']:,.0f}",
    )
    t.add_row("staff per year", f"{own['staff_usd_per_gpu_year']:,.0f}")
    t.add_row(
        f"energy per used hour (PUE {inp['pue']:g}, ${inp['usd_per_kwh']:g}/kWh)",
        f"{own['energy_usd_per_used_gpu_hour']:,.3f}",
    )
    t.add_row(Text("cost per used GPU-hour", style="bold"), Text(f"{own['usd_per_used_gpu_hour']:,.2f}", style="bold"))
    t.add_row(Text(f"total for {record['gpus']} GPUs", style="bold"), Text(f"{own['total_usd']:,.0f}", style="bold"))
    r = Table(box=box.SIMPLE_HEAD, header_style="bold", title="renting instead", title_justify="left")
    for col, just in (
        ("provider", "left"),
        ("instance", "left"),
        ("pricing", "left"),
        ("$/GPU-h", "right"),
        ("rent total $", "right"),
        ("owning saves $", "right"),
        ("break-even use", "right"),
    ):
        r.add_column(col, justify=just)  # type: ignore[arg-type]
    for x in record["rentals"]:
        be = f"{x['break_even_utilization']:.0%}" if x["break_even_utilization"] is not None else "never"
        r.add_row(
            x["provider"],
            x["instance"],
            x["pricing"],
            f"{x['usd_per_gpu_hour']:.2f}",
            f"{x['rent_usd']:,.0f}",
            f"{x['owning_saves_usd']:,.0f}",
            be,
        )
    src = record["purchase_source"]
    note = f"purchase price: {src.get('kind', 'given')}" + (
        f", {src['source']['title']} ({src['date']})" if src.get("source") else ""
    )
    parts: list = [head, t]
    parts.append(r if record["rentals"] else Text("no rental offers on file for this GPU", style="dim"))
    parts += [
        Text(note, style="dim"),
        Text("method: " + record["method"], style="dim"),
        Text(
            "staff: no sourced default, 0 unless --staff-usd-per-gpu-year is given; colocation may already "
            "include power in some contracts (then pass --usd-per-kwh 0)",
            style="dim",
        ),
    ]
    return Group(*parts)


def _detect_unknown(value) -> str:
    """``local detect``'s cells: "?" where NVML (or torch) could not tell."""
    return "?" if value is None else str(value)


def _detect_pcie(g: dict) -> str:
    keys = ("pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max")
    if all(g.get(k) is None for k in keys):
        return "?"
    gen, gen_max, width, width_max = (_detect_unknown(g.get(k)) for k in keys)
    return f"Gen{gen}/{gen_max} x{width}/{width_max}"


def _detect_yes_no(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


def detect_report(record: dict) -> Group:
    """``gpuplan local detect``: the host, then each GPU with its catalog match, BF16/FP8 support and warnings,
    and topology (rows and columns labelled with NVML indices)."""
    h = record["host"]
    facts = Table(box=None, show_header=False, padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("host", f"{h['hostname']} ({h['os']}, Python {h['python']})")
    facts.add_row(
        "CPU",
        f"{h['cpu_model']}: {h['cores_physical']} cores, {h['cores_logical']} threads, "
        f"{h['numa_nodes']} NUMA node{'s' if h['numa_nodes'] > 1 else ''}",
    )
    facts.add_row("memory", f"{h['memory_bytes'] / GiB:.1f} GiB")
    for d in h["disks"]:
        facts.add_row(
            "disk",
            f"{d['mount']} ({d['fstype']}): {d['free_bytes'] / GB:,.0f} GB free of {d['total_bytes'] / GB:,.0f} GB",
        )
    facts.add_row(
        "GPUs",
        record["gpu_status"]
        + (
            f"; driver {record['driver_version']}, CUDA {_detect_unknown(record['cuda_version'])}"
            if record["driver_version"]
            else ""
        ),
    )
    parts: list = [facts]
    if record["gpus"]:
        t = Table(box=box.SIMPLE_HEAD, header_style="bold")
        for col in (
            "#",
            "name",
            "catalog id",
            "memory GiB",
            "free GiB",
            "CC",
            "bf16",
            "fp8",
            "SM MHz",
            "power W",
            "PCIe",
            "NVLink",
        ):
            t.add_column(col)
        for g in record["gpus"]:
            cc = ".".join(map(str, g["compute_capability"])) if g["compute_capability"] else "?"
            clocks = (
                f"{_detect_unknown(g['sm_clock_mhz'])}/{_detect_unknown(g['sm_clock_max_mhz'])}"
                if g["sm_clock_mhz"] is not None or g["sm_clock_max_mhz"] is not None
                else "?"
            )
            free = g.get("memory_free_bytes")
            t.add_row(
                str(g["index"]),
                g["name"],
                g["catalog_id"] or "unknown",
                f"{g['memory_total_bytes'] / GiB:.1f}",
                f"{free / GiB:.1f}" if free is not None else "?",
                cc,
                _detect_yes_no(g.get("supports_bf16")),
                _detect_yes_no(g.get("supports_fp8")),
                clocks,
                f"{g['power_limit_w']:.0f}" if g["power_limit_w"] else "?",
                _detect_pcie(g),
                _detect_unknown(g["nvlink_active_links"]),
            )
        parts.append(t)
        for g in record["gpus"]:
            parts.append(Text(f"GPU {g['index']}: {g['match']}", style="dim"))
            for n in g.get("gpu_notes", ()):
                parts.append(Text(f"GPU {g['index']}: {n}", style="dim"))
            for w in g["warnings"]:
                parts.append(Text(f"GPU {g['index']}: {w}", style="yellow"))
    if len(record["topology"]) > 1:
        labels = record.get("topology_gpus") or [g["index"] for g in record["gpus"]]
        topo = Table(
            box=box.SIMPLE_HEAD,
            header_style="bold",
            title="topology (like nvidia-smi topo -m; NVML indices)",
            title_justify="left",
        )
        topo.add_column("")
        for i in labels:
            topo.add_column(f"GPU{i}")
        for i, row in zip(labels, record["topology"], strict=False):
            topo.add_row(f"GPU{i}", *row)
        parts.append(topo)
    for n in record["notes"]:
        parts.append(Text(f"note: {n}", style="dim"))
    return Group(*parts)


def _sig3(x: float) -> str:
    """Three significant figures, thousands separated (0.153, 12.4, 794)."""
    if x == 0:
        return "0"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def bench_report(record: dict) -> Group:
    """``gpuplan local bench``: each result (best and median run) beside the datasheet, and how long it took."""
    t = Table(box=box.SIMPLE_HEAD, header_style="bold")
    for col, just in (
        ("benchmark", "left"),
        ("best", "right"),
        ("median", "right"),
        ("unit", "left"),
        ("datasheet", "right"),
        ("achieved", "right"),
        ("took", "right"),
        ("detail", "left"),
    ):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in record["results"]:
        d = r["detail"]
        detail = ", ".join(
            f"{k}={v}"
            for k, v in d.items()
            if v is not None
            and k in ("best_shape_mnk", "shapes_tried", "model", "ranks", "nodes", "writers", "read_mode", "path")
        )
        if d.get("dtype_run") and d.get("dtype_run") != d.get("dtype"):
            detail = f"runs as {d['dtype_run']}, " + detail
        median = r.get("median")
        t.add_row(
            r["name"],
            _sig3(r["value"]),
            _sig3(median) if median is not None else _DASH,
            r["unit"],
            _sig3(r["datasheet"]) if r["datasheet"] else _DASH,
            f"{r['fraction_of_datasheet']:.1%}" if r["fraction_of_datasheet"] else _DASH,
            f"{r['seconds']:.2f} s",
            detail,
        )
    gpu = record["gpu"]
    cpu_rows = any(r["detail"].get("device") == "cpu" for r in record["results"])
    head = Text(
        f"{gpu['name']} ({gpu['catalog_id'] or 'not in the catalog'})"
        if gpu
        else "no GPU" + (": the (cpu) rows test the harness, not a GPU" if cpu_rows else ""),
        style="bold",
    )
    took = f"; {record['seconds']:.0f} s in all" if isinstance(record.get("seconds"), (int, float)) else ""
    parts: list = [
        head,
        t,
        Text(
            "GB/s = 1e9 bytes per second; achieved = best / datasheet; copy bandwidth counts "
            f"bytes read + written{took}",
            style="dim",
        ),
    ]
    for r in record["results"]:
        c = r["detail"].get("clocks")
        if c and c["throttled"]:
            parts.append(
                Text(
                    f"{r['name']}: throttled ({', '.join(c['throttled_by'])}); SM clock "
                    f"{c['sm_clock_min_mhz']}-{c['sm_clock_max_mhz']} MHz, up to {c['power_max_w']:.0f} W",
                    style="yellow",
                )
            )
    for line in record.get("skipped") or []:
        parts.append(Text(f"skipped {line}", style="yellow"))
    return Group(*parts)


# ------------------------------------------------------------------------------------------- validate


def _pct(value: float | None) -> str:
    return _DASH if value is None else f"{100 * value:+.1f}%"


def _mae(value: float | None) -> str:
    return _DASH if value is None else f"{100 * value:.1f}%"


def validate_report(record: dict) -> Group:
    """``gpuplan validate``: predicted vs published per value, the summary by category and group, the
    leave-one-source-out figures of the fitted constants, and the skipped records by reason."""
    counts = record["counts"]
    parts: list = [
        Text(
            f"validate{': ' + record['category'] if record['category'] else ''}: {counts['values_scored']} values "
            f"from {counts['records_scored']} records scored; {counts['records_skipped']} records skipped; "
            f"{counts['measured_runs_does_not_fit']} of {counts['measured_runs']} measured runs gpuplan says do "
            "not fit",
            style="bold",
        ),
        Text(record["error_definition"], style="dim"),
    ]
    for category in ("training", "inference", "memory"):
        rows = [r for r in record["rows"] if r["category"] == category]
        if not rows:
            continue
        t = Table(
            box=box.SIMPLE_HEAD, header_style="bold", title=f"{category}: predicted vs published", title_justify="left"
        )
        t.add_column("record", overflow="fold")
        t.add_column("metric", overflow="fold")
        for name in ("unit", "published", "predicted", "error"):
            t.add_column(name, justify="right", no_wrap=True)
        t.add_column("fits", no_wrap=True)
        t.add_column("GPU", no_wrap=True)
        for r in rows:
            unit = {"bytes": "GiB", "s": "ms"}.get(r["unit"], r["unit"])
            scale = {"bytes": GiB, "s": 1e-3}.get(r["unit"], 1.0)
            t.add_row(
                r["id"],
                r["metric"],
                unit,
                _num(r["published"], scale),
                _num(r["predicted"], scale),
                _pct(r["error"]),
                "yes" if r["fits"] else ("NO" if r["measured"] else "no (table)"),
                r["arguments"].get("gpu", _DASH),
            )
        parts.append(t)
    s = Table(
        box=box.SIMPLE_HEAD,
        header_style="bold",
        title="summary (MAE: mean |error|; median of the signed "
        "error; does not fit: measured runs gpuplan says do not fit)",
        title_justify="left",
    )
    for name, justify in (
        ("category", "left"),
        ("group", "left"),
        ("value", "left"),
        ("count", "right"),
        ("MAE", "right"),
        ("median error", "right"),
        ("does not fit", "right"),
    ):
        s.add_column(name, justify=justify)  # type: ignore[arg-type]
    for category, block in record["summary"].items():
        a = block["all"]
        s.add_row(
            Text(category, style="bold"),
            "all",
            "",
            str(a["count"]),
            _mae(a["mae"]),
            _pct(a["median_signed_error"]),
            f"{a['does_not_fit']} of {a['measured_runs']}",
        )
        for dim in ("quantity", "gpu_generation", "precision", "stack", "architecture"):
            for value, g in block[dim].items():
                s.add_row(
                    "",
                    dim.replace("_", " "),
                    value,
                    str(g["count"]),
                    _mae(g["mae"]),
                    _pct(g["median_signed_error"]),
                    f"{g['does_not_fit']} of {g['measured_runs']}",
                )
    parts.append(s)
    loso = record["loso"]
    if loso["constants"]:
        parts.append(Text("fitted constants, leave one source out (the tool's defaults are unchanged)", style="bold"))
        for c in loso["constants"]:
            parts.append(
                Text(
                    f"  {c['name']}: default {c['default']:g}, fitted on every source "
                    f"{c['fitted_in_sample']:.4g} ({c['category']}, {c['quantity']})"
                )
            )
        for category, f in loso["categories"].items():
            parts.append(
                Text(
                    f"  {category} MAE: {_mae(f['default']['mae'])} at the defaults, "
                    f"{_mae(f['in_sample']['mae'])} in sample, {_mae(f['loso']['mae'])} leave-one-source-out "
                    f"(median error {_pct(f['loso']['median_signed_error'])}, {f['loso']['count']} values)"
                )
            )
        folds = Table(box=box.SIMPLE_HEAD, header_style="bold")
        for name, justify in (
            ("held-out source", "left"),
            ("values", "right"),
            ("refitted", "left"),
            ("held-out MAE", "right"),
        ):
            folds.add_column(name, justify=justify)  # type: ignore[arg-type]
        for fold in loso["folds"]:
            folds.add_row(
                fold["source"],
                str(fold["held_out"]),
                ", ".join(f"{k}={v:.4g}" for k, v in fold["constants"].items()),
                _mae(fold["held_out_mae"]),
            )
        parts.append(folds)
    cov = (record.get("bands") or {}).get("coverage") or {}
    if cov:
        parts.append(Text("error bands (P10-P90): share of values inside their own band", style="bold"))
        for category, block in cov.items():
            i, lo_ = block["in_sample"], block["loso"]
            parts.append(
                Text(
                    f"  {category}: {_mae(i['coverage'])} in sample, {_mae(lo_['coverage'])} leave-one-source-out "
                    f"({lo_['covered']} of {lo_['count']} values; target 75-85 %)"
                )
            )
        parts.append(Text(f"  method: {record['bands']['method']}", style="dim"))
    if record["skipped"]:
        k = Table(
            box=box.SIMPLE_HEAD, header_style="bold", title="skipped (not mapped yet), by reason", title_justify="left"
        )
        k.add_column("count", justify="right")
        k.add_column("reason")
        k.add_column("records")
        by_reason: dict[str, list[str]] = {}
        for sk in record["skipped"]:
            by_reason.setdefault(sk["reason"], []).append(sk["record"])
        for reason, count in record["skipped_by_reason"].items():
            k.add_row(str(count), reason, ", ".join(dict.fromkeys(by_reason.get(reason, []))))
        parts.append(k)
    for stem, why in record["not_scored_files"].items():
        parts.append(Text(f"not scored: {stem}.json: {why}", style="dim"))
    return Group(*parts)


# -------------------------------------------------------------------------------------------------- plan


def _pruned_line(record: dict) -> Text:
    counts = ", ".join(f"{k} {v:,}" for k, v in record["pruned"].items() if v)
    return Text(
        f"searched {record['searched']:,} candidates ({record['evaluated']:,} timed), {record['feasible']:,} meet the "
        f"constraints, {record['pareto_size']:,} on the Pareto front; pruned: {counts or 'none'}"
    )


def _usd_short(usd: float) -> str:
    return f"${usd / 1e6:,.2f}M" if usd >= 1e6 else f"${usd:,.0f}"


def plan_train_report(record: dict) -> Group:
    """``plan train``: the options, best first (* on the Pareto front), the pruned counts and the best launch."""
    t = Table(box=box.SIMPLE_HEAD, title=f"plan train {record['model']['id']} (by {record['objective']})")
    right = ("gpus", "mb", "gbs", "mfu", "cost", "mem")
    # rows are in rank order; "P" marks the Pareto front
    heads = ("gpu", "gpus", "provider", "layout", "recomp", "mb", "gbs", "mfu", "time", "cost", "goodput")
    for h in (*heads, "w/ failures", "mem", "P"):
        t.add_column(h, justify="right" if h in right else "left", no_wrap=True)
    several = len({o.get("precision") for o in record["options"]}) > 1  # --precision any: name each option's
    for o in record["options"]:
        cost = _compact_band(o, "cost_usd", *((1e6, "$", "M") if o["cost_usd"] >= 1e6 else (1e3, "$", "k")))
        days = o["time_s"] >= 86400
        time = _compact_band(o, "time_s", *((86400, "", " d") if days else (3600, "", " h")))
        layout = _layout_name(o["layout"])
        if several:
            layout += f" {o['precision']}"
        if o.get("method") not in (None, "full"):
            layout += f" {o['method']}"
        lay = o["layout"]
        t.add_row(
            o["gpu"], f"{o['gpus']:,}", o["offer"]["provider"] if o["offer"] else o.get("pricing", "-"), layout,
            _recompute_text(lay), str(lay["micro_batch"]), f"{lay['global_batch']:,}", f"{o['mfu']:.1%}", time, cost,
            *_with_failures_cells(o), f"{o['peak_memory_bytes'] / GiB:.0f} GiB", "*" if o["pareto"] else "",
        )  # fmt: skip
    lines: list = [t, _pruned_line(record)]
    if record["options"] and record["options"][0].get("goodput") is not None:
        lines.append(
            Text(
                "ranked by time and cost with failures (w/ failures: expected wall time and cost with checkpoints, "
                "restarts and rework, as train's machine block; goodput = ideal / wall time)",
                style="dim",
            )
        )
    classes = sorted({o["band_class"] for o in record["options"] if o.get("band_class")})
    if classes:
        lines.append(
            Text(
                "(P10-P90) error bands of gpuplan validate's training-throughput residuals, class "
                + ", ".join(classes),
                style="dim",
            )
        )
    shown = {o["gpu"] for o in record["options"]}
    for gid, own in (record.get("ownership") or {}).items():
        if gid not in shown:
            continue
        lines.append(
            Text(
                f"owned {gid}: ${own['usd_per_used_gpu_hour']:,.2f} per used GPU-hour at {own['utilization']:.0%} "
                f"utilization (capital ${own['capital_usd_per_gpu_year']:,.0f} + hosting "
                f"${own['hosting_usd_per_gpu_year']:,.0f} per GPU-year, energy "
                f"${own['energy_usd_per_used_gpu_hour']:,.2f}/h; as gpuplan tco, data/ownership.toml)",
                style="dim",
            )
        )
    for note in record.get("notes") or ():
        lines.append(Text(f"note: {note}", style="dim"))
    if record.get("explain"):
        lines.extend(_explain_lines(record["explain"]))
    if record["options"]:
        first = record["options"][0]
        best = first["launch"]
        if first["offer"]:
            lines.append(Text(f"offer (option 1): {first['offer']['id']}"))
        lines.append(Text("launch (option 1):"))
        for k in ("torchtitan", "megatron", "deepspeed", "torchtune", "peft"):
            if best.get(k):
                lines.append(Text(f"  {k}: {best[k]}"))
    else:
        lines.append(Text("nothing meets the constraints: see the pruned counts"))
    return Group(*lines)


def _with_failures_cells(o: dict) -> tuple[str, str]:
    """An option's goodput and its wall time and cost with failures, or "-" where the record has none."""
    if o.get("goodput") is None:
        return "-", "-"
    w, c = o["wall_time_with_failures_s"], o["cost_with_failures_usd"]
    when = f"{w / 86400:,.3g} d" if w >= 86400 else f"{w / 3600:,.3g} h"
    cost = f"${c / 1e6:,.3g}M" if c >= 1e6 else f"${c / 1e3:,.3g}k"
    return f"{o['goodput']:.1%}", f"{when} {cost}"


def _compact_band(block: dict, key: str, scale: float, prefix: str, unit: str) -> str:
    """A value and its P10-P90 band in three significant figures, one unit: ``104 d (85.4-129)``, ``$281M (231-348)``
    (the band left out where the record has none)."""
    v, lo, hi = block[key], block.get(f"{key}_p10"), block.get(f"{key}_p90")
    text = f"{prefix}{v / scale:,.3g}{unit}"
    return text if lo is None or hi is None else f"{text} ({lo / scale:,.3g}-{hi / scale:,.3g})"


def _layout_name(lay: dict) -> str:
    """A plan layout in one short cell: "tp8 pp16 vp8 dp128 zero-1", with cp, ep and offload where used, and etp where
    it differs from tp."""
    name = f"tp{lay['tp']} pp{lay['pp']}" + (f" vp{lay['virtual_stages']}" if lay.get("virtual_stages", 1) > 1 else "")
    name += f" dp{lay['dp']}" + "".join(f" {k}{lay[k]}" for k in ("cp", "ep") if lay.get(k, 1) > 1)
    if lay.get("etp") is not None and lay["etp"] != lay["tp"]:
        name += f" etp{lay['etp']}"
    name += " fsdp" if lay["fsdp"] else f" zero-{lay['zero']}"
    if lay.get("offload", "none") != "none":
        name += f" offload-{lay['offload']}"
    return name


def _explain_lines(e: dict) -> list:
    """``plan train --explain``: the layout's standing, and its losses to option 1 by term."""
    lay = e["layout"]
    name = _layout_name(lay)
    name += f" mb{lay['micro_batch']} gbs{lay['global_batch'] or '?'} recompute {_recompute_text(lay)}"
    if lay.get("precision"):
        name += f" {lay['precision']}"
    out: list = [Text(f"explain: {e['gpus']:,} x {e['gpu']} {name}", style="bold")]
    if e["pruned"]:
        out.append(Text(f"  pruned: {e['pruned']} ({e['pruned_why']})"))
    elif e["rank"] is not None:
        where = "ranks" if e["in_grid"] else "would rank"
        out.append(Text(f"  {where} {e['rank']:,} of {e['feasible']:,} feasible" + (" (shown)" if e["shown"] else "")))
    for why in e["outside_grid"]:
        out.append(Text(f"  outside the grid: {why}"))
    v = e.get("versus_best")
    if not v:
        if e.get("estimate") is None:
            out.append(Text("  no estimate: the step-time model or the memory model refused the layout"))
        return out
    t = Table(box=box.SIMPLE_HEAD, title="against option 1 (difference = this - best)")
    for h in ("term", "this", "best", "difference"):
        t.add_column(h, justify="left" if h == "term" else "right", no_wrap=True)

    def days(x: float) -> str:
        return f"{x / 86400:,.2f} d"

    def signed(x: float, fmt: Callable[[float], str]) -> str:
        return ("+" if x > 0 else "-" if x < 0 else "") + fmt(abs(x))

    t.add_row(
        "time to train", days(v["time_s"]["this"]), days(v["time_s"]["best"]), signed(v["time_s"]["difference"], days)
    )
    for part, p in v["time_by_part_s"].items():
        if p["this"] or p["best"]:
            t.add_row(f"  {part}", days(p["this"]), days(p["best"]), signed(p["difference"], days))
    t.add_row(
        "MFU",
        f"{v['mfu']['this']:.1%}",
        f"{v['mfu']['best']:.1%}",
        signed(v["mfu"]["difference"] * 100, lambda x: f"{x:.1f} pt"),
    )
    gib = lambda x: f"{x / GiB:,.1f} GiB"  # noqa: E731
    t.add_row("peak memory", gib(v["peak_memory_bytes"]["this"]), gib(v["peak_memory_bytes"]["best"]),
              signed(v["peak_memory_bytes"]["difference"], gib))  # fmt: skip
    for group, p in v["memory_bytes"].items():
        t.add_row(f"  {group}", gib(p["this"]), gib(p["best"]), signed(p["difference"], gib))
    usd = lambda x: f"${x:,.0f}"  # noqa: E731
    t.add_row(
        "GPUs",
        f"{v['gpus']['this']:,}",
        f"{v['gpus']['best']:,}",
        signed(v["gpus"]["difference"], lambda x: f"{x:,.0f}"),
    )
    t.add_row("GPU-hours", f"{v['gpu_hours']['this']:,.0f}", f"{v['gpu_hours']['best']:,.0f}",
              signed(v["gpu_hours"]["difference"], lambda x: f"{x:,.0f}"))  # fmt: skip
    t.add_row("$ per GPU-hour", f"${v['usd_per_gpu_hour']['this']:,.2f}", f"${v['usd_per_gpu_hour']['best']:,.2f}",
              signed(v["usd_per_gpu_hour"]["difference"], lambda x: f"${x:,.2f}"))  # fmt: skip
    t.add_row("cost", usd(v["cost_usd"]["this"]), usd(v["cost_usd"]["best"]), signed(v["cost_usd"]["difference"], usd))
    out.append(t)
    return out


def plan_serve_report(record: dict) -> Group:
    """``plan serve``: the options, cheapest $ per million output tokens first, and the pruned counts."""
    t = Table(box=box.SIMPLE_HEAD, title=f"plan serve {record['model']['id']} at {record['qps']:g} req/s")
    for h in (
        "#",
        "gpu",
        "weights",
        "kv",
        "tp",
        "engine",
        "replicas",
        "gpus",
        "batch",
        "ttft",
        "tpot",
        "$/M out",
        "front",
    ):
        t.add_column(h)
    for i, o in enumerate(record["options"], 1):
        t.add_row(
            str(i), o["gpu"], o["weights"], o["kv_cache"], str(o["tp"]), o["engine"], str(o["replicas"]),
            str(o["gpus"]),
            str(o["max_batch"]), f"{o['ttft_s'] * 1e3:.0f} ms", f"{o['tpot_s'] * 1e3:.1f} ms",
            f"${o['usd_per_million_output_tokens']:.3f}", "*" if o["pareto"] else "",
        )  # fmt: skip
    lines: list = [t, _pruned_line(record)]
    if record["options"]:
        lines.append(Text(f"launch (option 1): {record['options'][0]['launch']['vllm']}"))
    else:
        lines.append(Text("nothing meets the constraints: see the pruned counts"))
    return Group(*lines)


def _attention_text(record: dict) -> str:
    """``on (cudnn)``: flash attention and the kernels priced (the time block's, else as asked), or ``off``."""
    job = record["job"]
    if not job["flash_attention"]:
        return "off"
    kernel = (record.get("time") or {}).get("attention_kernel") or job.get("attention_kernel")
    return f"on ({kernel})" if kernel and kernel != "auto" else "on"


def _recompute_text(record: dict) -> str:
    """The recompute mode of a layout or job record, with its layer count when partial ("partial 20")."""
    n = record.get("recompute_layers")
    if record.get("recompute") == "partial" and n:
        return f"{record['recompute']} {n}"
    mods = record.get("recompute_modules")
    if record.get("recompute") == "selective" and mods and list(mods) != ["core_attn"]:
        return f"selective ({','.join(mods)})"
    return str(record["recompute"])
