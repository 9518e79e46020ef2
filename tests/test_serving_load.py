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
from gpuplan.estimate.inference import assumptions_for, closed_loop_prefill_wait_s, fleet_for, serving_plan
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


# ------------------------------------------------------------------- closed loop: prompts queue for the prefill


def _simulate_closed_loop(
    users: int, prefill: float, decode: float, cv: float, n: int = 40_000, seed: int = 3
) -> float:
    """Mean prefill wait of a closed loop by discrete events: ``users`` users, each sending its next prompt
    ``decode`` s (gamma, coefficient of variation ``cv``) after its last prefill ends; one FCFS prefill server of
    fixed service ``prefill``. The mean over all but the first 10 % of the requests."""
    rng = np.random.default_rng(seed)
    shape = 1 / cv**2
    back = list(rng.gamma(shape, decode / shape, users))
    heapq.heapify(back)
    free, waits = 0.0, np.empty(n)
    for i in range(n):
        t = heapq.heappop(back)
        start = max(t, free)
        waits[i] = start - t
        free = start + prefill
        heapq.heappush(back, free + rng.gamma(shape, decode / shape))
    return float(waits[n // 10 :].mean())


LOOP_CASES = [
    (5, 0.45, 9.5, 1.0),  # NIM 70B fp8, 5000-token prompts at concurrency 5, 25, 50, 93 (the model's own S, Z)
    (25, 0.45, 15.7, 1.0),
    (50, 0.45, 29.4, 0.3),
    (93, 0.45, 53.0, 0.3),
    (10, 1.0, 5.0, 1.0),  # saturated: 10 users' prompts need more than the cycle
    (4, 1.0, 1.0, 0.3),
]


@pytest.mark.parametrize(("users", "prefill", "decode", "cv"), LOOP_CASES)
def test_closed_loop_prefill_wait_matches_simulation(users, prefill, decode, cv):
    """Mean value analysis (deterministic service, residual S/2, the saturation bound) against the simulated
    loop (40,000 requests, fixed seed). Tolerance: within 10 % of the simulated wait + 0.01 x S. Measured:
    within 7 % (0.364 against 0.391 s at 25 users, exponential returns), exact where saturated."""
    sim = _simulate_closed_loop(users, prefill, decode, cv)
    got = closed_loop_prefill_wait_s(users, prefill, decode)
    assert 0.9 * sim - 0.01 * prefill <= got <= 1.1 * sim + 0.01 * prefill, (got, sim)


def test_closed_loop_prefill_wait_is_below_md1_and_bounded():
    """One user never waits; the wait stays under M/D/1's at the loop's own rate (a few users returning after
    a long decode rarely meet) and never exceeds N - 1 prefills."""
    assert closed_loop_prefill_wait_s(1, 0.5, 10.0) == 0.0
    for users, s, z in ((25, 0.45, 15.7), (50, 0.45, 29.4), (200, 0.1, 5.0)):
        w = closed_loop_prefill_wait_s(users, s, z)
        rho = users / (s + w + z) * s
        assert 0 < w <= (users - 1) * s
        if rho < 1:
            assert w < mean_wait(rho, 1, s, 1.0, 0.0)


def test_concurrency_ttft_includes_the_prefill_queue():
    """NIM's closed loop (Llama 70B fp8 on 2x H100, 5000 in / 500 out): TTFT grows with the users through the
    prefill wait alone (the prefill itself changes < 2 % with the decodes beside it), and the requests per
    second follow the longer cycle (Little's law)."""
    spec, gpu = MODELS.get("llama-3.1-70b"), ACCS.get("h100-sxm-80gb")
    lay = ServingLayout(tp=2)
    job = ServingJob(weights="fp8", prompt_tokens=5000, output_tokens=500, engine="trtllm")
    runs = {c: serving_plan(spec, gpu, lay, replace(job, concurrency=c)) for c in (1, 5, 25, 50)}
    assert runs[1].prefill_wait_s == 0
    base = runs[1].ttft_s
    waits = [runs[c].prefill_wait_s for c in (5, 25, 50)]
    assert 0 < waits[0] < waits[1] < waits[2]
    for c in (5, 25, 50):
        r = runs[c]
        assert r.ttft_s - r.prefill_wait_s == pytest.approx(base, rel=0.02)
        assert r.requests_per_s == pytest.approx(r.running_sequences / r.request_latency_s, rel=1e-9)
        assert r.request_latency_s == pytest.approx(r.ttft_s + 499 * r.tpot_s, rel=1e-9)


def test_poisson_load_queues_long_prompts_for_the_prefill():
    """Under --qps the prompts wait for the prompts ahead (M/D/1 of their prefill work): with long prompts
    and short outputs (8,000 in / 50 out, 70B fp8 on 4x H100) the wait grows with the rate on a fixed fleet and
    is part of TTFT; 200-token prompts riding memory-bound decode steps add almost no work, so their wait
    stays under 20 % of TTFT at 84 % utilization (measured: 13 %)."""
    spec, gpu = MODELS.get("llama-3.1-70b"), ACCS.get("h100-sxm-80gb")
    lay = ServingLayout(tp=4)
    long_job = ServingJob(weights="fp8", prompt_tokens=8000, output_tokens=50, engine="vllm")
    waits = []
    for qps in (5.0, 10.0, 15.0):
        ld = serving_plan(spec, gpu, lay, long_job, qps=qps, replicas=10).load
        assert ld is not None and ld.prefill_wait_s is not None and ld.wait_s is not None and ld.ttft_s is not None
        assert ld.ttft_s > ld.wait_s + ld.prefill_wait_s
        assert ld.ttft_q90_s is not None and ld.ttft_q90_s >= ld.ttft_s - 1e-12
        waits.append(ld.prefill_wait_s)
    assert 0 < waits[0] < waits[1] < waits[2]
    short = serving_plan(spec, gpu, lay, replace(long_job, prompt_tokens=200, output_tokens=100), qps=200.0).load
    assert short is not None and short.ttft_s is not None and short.prefill_wait_s is not None
    assert short.utilization > 0.7
    assert short.prefill_wait_s < 0.2 * short.ttft_s
    static = serving_plan(spec, gpu, lay, replace(long_job, engine="compiled", batch=4), qps=1.0).load
    assert static is not None and static.prefill_wait_s == 0
