"""``plan train --explain`` against published production layouts (issue #16, "Check it against reality"; the table
in docs/plan.md "Checked against reality").

Each case is a bundled validation record (Narayanan et al. 2021 Table 1, torchtitan, NeMo 24.07): its model (a
catalog model, or one built from the record's architecture as ``gpuplan validate`` builds it), GPU, count, global
batch, sequence length, precision and layout, searched with ``--objective time``. Where a published layout leaves
recomputation unstated, or recomputes fully while gpuplan finds that no recompute fits, the layout is explained
without ``recompute=`` (the lightest recompute that fits), and the full-recompute fact is pinned separately.

Tolerances: a rank counts candidates strictly faster, among hundreds of options often within 1 % of each other, so a
small, legitimate change to one step-time term reorders near-ties. Each rank is pinned to at most twice the rank
observed (2026-11-27) plus 2, and the time lost to option 1 to the observed gap +- 5 points: loose enough for such
reordering, tight enough that a published layout falling to the bottom half, or a gap doubling, fails.

Re-pinned when partial recompute joined the grid (2026-11-27): megatron-t1-1p7b (rank 245 -> 209, gap 40.7 ->
32.4 %) and nemo-2407-h100-gpt3-175b-512gpu-fp8 (79 -> 69, 29.3 -> 13.5 %) are explained with the lightest
recompute that fits, which is now a partial one (18 of 24 layers; one layer of each 2-layer chunk) where it was
full; the other rows are unchanged.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

import gpuplan
from gpuplan.catalog.session import Catalogs
from gpuplan.plan import validate as V

#: fixed reasons a published, run-in-production layout must never get
NEVER = ("does_not_fit_memory", "layout_does_not_divide")
RANK_FACTOR, RANK_SLACK = 2, 2
GAP_POINTS = 5.0


class Run(NamedTuple):
    record: str
    architecture: bool  # build the model from the record's architecture (no catalog model of that shape)
    gpu: str
    gpus: int
    global_batch: int
    seq_len: int
    precision: str
    layout: str
    rank: int  # observed rank among the feasible options (explain's rank)
    gap_pct: float  # observed time lost to option 1, in % of option 1's time (negative: it beats option 1)


RUNS = (
    Run("megatron-t1-1p7b", True, "a100-sxm-80gb", 32, 512, 2048, "bf16-mixed",
        "tp=1,pp=1,dp=32,micro_batch=16", 209, 32.4),
    Run("megatron-t1-39p1b", True, "a100-sxm-80gb", 512, 1536, 2048, "bf16-mixed",
        "tp=8,pp=2,dp=32,micro_batch=4", 71, 10.7),
    Run("megatron-t1-145p6b", True, "a100-sxm-80gb", 1536, 2304, 2048, "bf16-mixed",
        "tp=8,pp=8,dp=24,micro_batch=2,virtual_stages=2", 7, 3.2),
    Run("megatron-t1-1008p0b", True, "a100-sxm-80gb", 3072, 3072, 2048, "bf16-mixed",
        "tp=8,pp=64,dp=6,micro_batch=1", 8, 10.9),
    Run("torchtitan-2408-llama3-8b-64xa100-fsdp-bf16", False, "a100-sxm-80gb", 64, 64, 8192, "bf16-mixed",
        "tp=1,dp=64,fsdp=true,micro_batch=1", 1, 0.0),
    Run("torchtitan-2506-llama31-8b-32xh200-fsdp-compile-fp8", False, "h200", 32, 64, 8192, "fp8-mixed",
        "tp=1,dp=32,fsdp=true,micro_batch=2", 13, 1.5),  # was rank 29, +11.8 % before cuDNN attention priced
    Run("nemo-2407-h100-llama2-70b-64gpu-fp8", False, "h100-sxm-80gb", 64, 128, 4096, "fp8-mixed",
        "tp=4,pp=4,dp=4,virtual_stages=20,micro_batch=1", 11, 6.6),
    Run("nemo-2407-h100-gpt3-175b-512gpu-fp8", True, "h100-sxm-80gb", 512, 2048, 2048, "fp8-mixed",
        "tp=4,pp=8,dp=16,virtual_stages=6,micro_batch=2", 69, 13.5),
    Run("nemo-2407-h100-llama3-70b-64gpu-fp8", False, "h100-sxm-80gb", 64, 128, 8192, "fp8-mixed",
        "tp=4,pp=4,dp=2,cp=2,virtual_stages=5,micro_batch=1", 1, -7.8),
)  # fmt: skip


@pytest.fixture(scope="module")
def world() -> tuple[Catalogs, dict[str, str]]:
    """One catalog with every record's model registered; record id -> model id."""
    cat = Catalogs(())
    records = {r["id"]: r for f in V.load_files().values() for r in f["records"]}
    ids: dict[str, str] = {}
    built: dict[str, Any] = {}
    for run in RUNS:
        got = V.map_model(records[run.record], cat.models(), built, run.seq_len, prefer_architecture=run.architecture)
        assert not isinstance(got, str), got
        ids[run.record] = got[0]
    for spec in built.values():
        cat.models().add(spec)
    return cat, ids


def _explain(world: tuple[Catalogs, dict[str, str]], run: Run, layout: str | None = None) -> dict[str, Any]:
    cat, ids = world
    return gpuplan.plan_train(
        ids[run.record], tokens="100B", gpus=run.gpus, gpu=run.gpu, global_batch=run.global_batch,
        seq_len=run.seq_len, precision=run.precision, objective="time", top=3, explain=layout or run.layout,
        catalog=cat,
    ).to_dict()  # fmt: skip


@pytest.mark.parametrize("run", RUNS, ids=[r.record for r in RUNS])
def test_published_layout_is_feasible_and_ranks_near_the_top(world, run):
    d = _explain(world, run)
    e = d["explain"]
    assert e["pruned"] not in NEVER
    assert e["status"] in ("option", "outside_grid"), (e["status"], e.get("pruned_why"))
    assert e["rank"] is not None and 1 <= e["rank"] <= RANK_FACTOR * run.rank + RANK_SLACK, e["rank"]
    # the rank is among real alternatives: hundreds of feasible candidates, not a handful
    assert e["feasible"] >= 100, e["feasible"]
    gap_pct = (e["estimate"]["time_s"] / d["options"][0]["time_s"] - 1) * 100
    assert abs(gap_pct - run.gap_pct) <= GAP_POINTS, gap_pct


@pytest.mark.parametrize("record", ["megatron-t1-39p1b", "megatron-t1-145p6b", "megatron-t1-1008p0b"])
def test_megatron_full_recompute_is_dominated_not_needed(world, record):
    """Table 1 recomputed every layer (the 2021 code had no sequence parallelism or selective recompute);
    gpuplan, modelling today's Megatron (sequence parallel, fused attention), finds no recompute fits, so the
    published setting is pruned as dominated, not as not fitting."""
    run = next(r for r in RUNS if r.record == record)
    e = _explain(world, run, run.layout + ",recompute=full")["explain"]
    assert (e["status"], e["pruned"]) == ("pruned", "dominated"), e.get("pruned_why")
    assert e["estimate"]["peak_memory_bytes"] < e["estimate"]["capacity_bytes"]


def test_1t_loses_to_interleaving_on_the_bubble(world):
    """The 1T row ran PP64 without interleaving; the best option interleaves, and the bubble is the term lost."""
    run = next(r for r in RUNS if r.record == "megatron-t1-1008p0b")
    d = _explain(world, run)
    assert d["options"][0]["layout"]["virtual_stages"] > 1
    parts = d["explain"]["versus_best"]["time_by_part_s"]
    assert max(parts, key=lambda k: parts[k]["difference"]) == "pp_bubble"


def test_nemo_175b_needs_recompute_in_gpuplans_memory_model(world):
    """gpuplan's estimate of NeMo's GPT-3 175B layout without recompute exceeds an 80 GB H100 (the documented
    gap: either a memory saving gpuplan misses, or NeMo's unstated recompute setting)."""
    run = next(r for r in RUNS if r.record == "nemo-2407-h100-gpt3-175b-512gpu-fp8")
    e = _explain(world, run, run.layout + ",recompute=none")["explain"]
    assert e["pruned"] == "does_not_fit_memory"
    assert 1.0 < e["estimate"]["peak_memory_bytes"] / e["estimate"]["capacity_bytes"] < 1.15
