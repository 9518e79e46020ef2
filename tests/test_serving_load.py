"""Latency under load (issue #14, item 4): queueing formulas against a simulation, the fleet's utilization cap,
the loaded figures in the SLO check, the q90/q99 percentiles and the closed loop of a benchmark client."""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
from gpuplan.estimate.inference import assumptions_for, fleet_for, serving_plan
from gpuplan.estimate.queueing import (
    closed_loop_wait,
    mean_wait,
    poisson_quantile,
    wait_probability,
    wait_quantile,
)
from gpuplan.spec.serving import ServingJob, ServingLayout

# ------------------------------------------------------------------------------ formulas vs a simulation


def _simulate_wait(rho: float, slots: int, cs2: float, n: int = 120_000, seed: int = 7) -> np.ndarray:
    """FCFS G/G/c by discrete events: Poisson arrivals, service of mean 1 (exponential for cs2 = 1, fixed for
    cs2 = 0); each request takes the slot that frees first. The waits of all but the first 10 % (warm-up)."""
    rng = np.random.default_rng(seed)
    lam = rho * slots
    arrivals = np.cumsum(rng.exponential(1 / lam, n))
    service = rng.exponential(1.0, n) if cs2 == 1 else np.ones(n)
    free = [0.0] * slots
    waits = np.empty(n)
    for i in range(n):
        t = arrivals[i]
        start = max(t, heapq.heappop(free))
        waits[i] = start - t
        heapq.heappush(free, start + service[i])
    return waits[n // 10 :]


CASES = [(c, rho, cs2) for c in (1, 4, 16) for rho in (0.5, 0.7, 0.85) for cs2 in (1.0, 0.0)]


@pytest.mark.parametrize(("slots", "rho", "cs2"), CASES)
def test_queue_wait_matches_simulation(slots, rho, cs2):
    """Allen-Cunneen with Sakasegawa's M/M/c term against the simulated queue (120,000 requests, fixed seed).

    Tolerance, in service times: the mean wait between 0.95 x and 1.15 x the simulated one + 0.03; the q90/q99
    waits between 0.9 x - 0.1 and 1.2 x + 0.2. Measured: within 3 % for one slot (exact for M/M/1 and M/D/1,
    Pollaczek-Khinchine) and within 11 % at rho = 0.85 for 4 and 16 slots; at lower loads with several slots
    the formula overstates a small wait (M/M/4 at 0.5: 0.112 against 0.087), the safe side for planning."""
    sim = _simulate_wait(rho, slots, cs2)
    w = mean_wait(rho, slots, 1.0, 1.0, cs2)
    assert 0.95 * sim.mean() <= w <= 1.15 * sim.mean() + 0.03
    for q in (0.90, 0.99):
        got, want = wait_quantile(q, rho, slots, 1.0, 1.0, cs2), float(np.quantile(sim, q))
        assert 0.9 * want - 0.1 <= got <= 1.2 * want + 0.2, (q, got, want)


def test_queue_formulas_are_exact_for_one_server():
    assert mean_wait(0.8, 1, 2.0, 1.0, 1.0) == pytest.approx(0.8 / 0.2 * 2.0)  # M/M/1: rho / (1 - rho) S
    assert mean_wait(0.8, 1, 2.0, 1.0, 0.0) == pytest.approx(0.8 / 0.2 * 2.0 / 2)  # M/D/1: half of that
    assert wait_probability(0.8, 1) == pytest.approx(0.8)
    assert mean_wait(1.0, 4, 1.0) == math.inf and wait_quantile(0.9, 1.2, 4, 1.0) == math.inf


def test_queue_formulas_take_arrays():
    """A search evaluates a grid of rates at once: the array results equal the float ones."""
    rho = np.array([0.1, 0.5, 0.85, 0.99, 1.0, 1.5])
    slots = np.array([1, 8, 64, 256, 4, 4])
    got = mean_wait(rho, slots, 3.0)
    q = wait_quantile(0.99, rho, slots, 3.0)
    for i in range(len(rho)):
        assert got[i] == pytest.approx(mean_wait(float(rho[i]), int(slots[i]), 3.0))
        assert q[i] == pytest.approx(wait_quantile(0.99, float(rho[i]), int(slots[i]), 3.0))
    assert np.all(poisson_quantile(np.array([4.0, 9.0]), "q90") > [4.0, 9.0])
    assert list(closed_loop_wait(np.array([50, 100, 250]), 50, 2.0)) == [0.0, 2.0, 8.0]


# --------------------------------------------------------------------------------------- serving plans

MODELS, ACCS = BUNDLED_MODELS, BUNDLED_ACCELERATORS
#: The issue's example: llama-3.1-70b on 4 x H100 at 20 requests/s, 2k-token prompts, 50 ms TPOT target.
EXAMPLE = dict(prompt_tokens=2048, output_tokens=256, max_tpot_s=0.05)


def _example(qps=20.0, replicas=None, assumptions=None, **job):
    spec, gpu = MODELS.get("llama-3.1-70b"), ACCS.get("h100-sxm-80gb")
    j = ServingJob(**{**EXAMPLE, **job})
    return serving_plan(spec, gpu, ServingLayout(tp=4), j, assumptions, qps=qps, replicas=replicas), j


def test_the_issue_example_fails_at_one_replica_and_the_fleet_meets_it_under_load():
    one, _ = _example(replicas=1)
    assert one.load.utilization > 1
    assert one.tpot_s > 0.05 and any("--max-tpot" in r for r in one.reasons)
    assert one.ttft_s == math.inf
    r, job = _example()
    fleet = fleet_for(r, ServingLayout(tp=4), job, 20.0)
    assert fleet.replicas == r.load.replicas >= 6  # 5 before packing (issue), 6 at 94 % of a batch's rate
    assert not r.reasons and r.tpot_s <= 0.05 and r.load.utilization <= 0.85
    # one replica fewer is over a target or over the utilization cap
    fewer, _ = _example(replicas=fleet.replicas - 1)
    assert fewer.reasons or fewer.load.utilization > 0.85


@pytest.mark.parametrize("cap", [0.85, 0.6, 0.95])
def test_fleet_respects_the_utilization_cap(cap):
    job = ServingJob(prompt_tokens=1000, output_tokens=300)
    a = replace(assumptions_for(job), max_utilization=cap)
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("h100-sxm-80gb")
    r = serving_plan(spec, gpu, ServingLayout(), job, a, qps=50.0)
    assert r.load.utilization <= cap + 1e-9 and r.load.limited_by == "max_utilization"
    fewer = serving_plan(spec, gpu, ServingLayout(), job, a, qps=50.0, replicas=r.load.replicas - 1)
    assert r.load.replicas == 1 or fewer.load.utilization > cap
    # the default is 0.85, and a higher cap never needs more replicas
    assert assumptions_for(job).max_utilization == 0.85


def test_percentiles_are_reported_and_ordered(run):
    code, out, err = run(
        "serve",
        "llama-3.1-70b",
        "--gpu",
        "h100",
        "--tp",
        "4",
        "--qps",
        "20",
        "--prompt-tokens",
        "2048",
        "--output-tokens",
        "256",
        "--max-tpot",
        "50ms",
        "--json",
    )
    assert code == 0, err
    lat = json.loads(out)["latency"]
    assert lat["under_load"] and 0 < lat["utilization"] <= 0.85
    for key in ("ttft", "tpot"):
        assert {f"{key}_s", f"{key}_q90_s", f"{key}_q99_s", f"{key}_unloaded_s"} <= set(lat)
        assert lat[f"{key}_q90_s"] <= lat[f"{key}_q99_s"]
    assert lat["tpot_s"] <= lat["tpot_q90_s"] <= lat["tpot_q99_s"]
    # TTFT: with 225 slots fewer than 1 % of requests wait at all, so the mean (which carries their wait)
    # may sit above q90; where a tenth or more wait the order holds (below)
    assert lat["ttft_s"] >= lat["ttft_unloaded_s"] * 0.95


def test_ttft_percentiles_ordered_where_requests_wait():
    """One slot (llama.cpp's --parallel 1) at 85 % utilization: 85 % of requests wait, mean <= q90 <= q99."""
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("h100-sxm-80gb")
    job = ServingJob(prompt_tokens=512, output_tokens=128, engine="llama.cpp")
    r = serving_plan(spec, gpu, ServingLayout(), job, qps=5.0)
    ld = r.load
    assert ld.slots == 1 and ld.utilization <= 0.85
    assert ld.ttft_s <= ld.ttft_q90_s <= ld.ttft_q99_s
    assert ld.tpot_s <= ld.tpot_q90_s <= ld.tpot_q99_s
    assert ld.wait_s == pytest.approx(mean_wait(ld.utilization, 1, ld.slots / ld.capacity_requests_per_s))


def test_loaded_figures_grow_with_the_load():
    spec, gpu = MODELS.get("llama-3-8b"), ACCS.get("h100-sxm-80gb")
    job = ServingJob(prompt_tokens=1000, output_tokens=300)
    cap = serving_plan(spec, gpu, ServingLayout(), job, qps=1.0, replicas=1).load.capacity_requests_per_s
    loads = [serving_plan(spec, gpu, ServingLayout(), job, qps=cap * u, replicas=1) for u in (0.2, 0.5, 0.8, 0.95)]
    assert [x.load.utilization for x in loads] == pytest.approx([0.2, 0.5, 0.8, 0.95])
    tpots = [x.tpot_s for x in loads]
    waits = [x.queue_wait_s for x in loads]
    assert tpots == sorted(tpots) and waits == sorted(waits)
    assert all(x.tpot_unloaded_s == loads[0].tpot_unloaded_s for x in loads)


def test_closed_loop_waits_for_a_slot():
    """A benchmark client with more requests in flight than the server runs: each waits S (N / slots - 1)."""
    spec, gpu = MODELS.get("llama-3.1-70b"), ACCS.get("h100-sxm-80gb")
    lay = ServingLayout(tp=2)
    job = ServingJob(weights="fp8", prompt_tokens=5000, output_tokens=500, engine="trtllm", concurrency=250)
    r = serving_plan(spec, gpu, lay, job)
    slots = r.running_sequences
    assert slots < 250 and r.load is None
    assert r.queue_wait_s == pytest.approx(r.request_latency_unloaded_s * (250 / slots - 1))
    assert r.ttft_s == r.ttft_unloaded_s  # the wait is beside TTFT (serving_plan's docstring says why)
    few = serving_plan(spec, gpu, lay, ServingJob(weights="fp8", prompt_tokens=5000, output_tokens=500, concurrency=5))
    assert few.queue_wait_s == 0 and few.ttft_s == few.ttft_unloaded_s
