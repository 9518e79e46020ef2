"""`gpuplan serve`: the --json contract, exit codes, and every error path."""

from __future__ import annotations

import json

import pytest

from test_cli import one_line_error

MEMORY_KEYS = {
    "weights_bytes",
    "kv_cache_bytes",
    "activations_bytes",
    "other_bytes",
    "total_bytes",
    "capacity_bytes",
    "fits",
    "reasons",
    "max_concurrent_sequences",
}


def test_serve_json_contract(run):
    code, out, err = run(
        "serve",
        "llama-3.1-70b",
        "--gpu",
        "h100",
        "--tp",
        "4",
        "--concurrency",
        "32",
        "--prompt-tokens",
        "1000",
        "--output-tokens",
        "300",
        "--qps",
        "5",
        "--usd-per-gpu-hour",
        "$2.5/h",
        "--json",
    )
    assert code == 0, err
    rec = json.loads(out)
    assert rec["kind"] == "serve" and set(rec["memory"]) >= MEMORY_KEYS
    assert {"ttft_s", "tpot_s"} <= set(rec["latency"]) and {"tokens_per_s", "requests_per_s"} <= set(rec["throughput"])
    assert {"gpus", "replicas"} <= set(rec["fleet"]) and rec["fleet"]["gpus"] == 4 * rec["fleet"]["replicas"]
    assert rec["fleet"]["replicas"] * rec["throughput"]["requests_per_s"] >= 5
    assert {"usd_per_hour", "usd_per_million_output_tokens"} <= set(rec["cost"])
    assert rec["cost"]["usd_per_hour"] == pytest.approx(10.0)
    mem = rec["memory"]
    assert mem["total_bytes"] == sum(
        mem[k] for k in ("weights_bytes", "kv_cache_bytes", "activations_bytes", "other_bytes")
    )
    assert all(a["source"] for a in rec["assumptions"])


def test_serve_table_and_slo(run):
    code, out, _ = run("serve", "llama-3.1-8b", "--gpu", "l4", "--weights", "int4-awq", "--max-tpot", "50ms")
    assert code == 0 and "time per output" in out and "room for" in out
    rec = json.loads(
        run("serve", "llama-3.1-8b", "--gpu", "l4", "--weights", "int4-awq", "--max-tpot", "50ms", "--json")[1]
    )
    assert rec["latency"]["tpot_s"] <= 0.05 and rec["job"]["batch"] >= 1


def test_serve_does_not_fit_and_require_fit(run):
    rec = json.loads(run("serve", "llama-3.1-405b", "--gpu", "l4", "--json")[1])
    assert rec["memory"]["fits"] is False and "weights alone" in rec["memory"]["reasons"][0]
    code, _out, _ = run("serve", "llama-3.1-405b", "--gpu", "l4", "--require-fit")
    assert code == 3


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("--weights", "int3"), "'int3' is not one of"),
        (("--batch", "2", "--concurrency", "4"), "not both"),
        (("--context", "10"), "shorter than prompt + output"),
        (("--max-tpot", "soon"), "--max-tpot"),
        (("--qps", "5", "--qpm", "300"), "--qps or --qpm"),
        (("--qps", "-1"), "--qps"),
        (("--usd-per-gpu-hour", "cheap"), "$2.5/h"),
        (("--weights", "fp8", "--gpu", "a100-sxm-80gb"), "no fp8"),
        (("--tp", "0"), "--tp must be"),
        (("--assume", "compute_efficiency=2"), "compute_efficiency"),
        (("--engine", "turbo"), "turbo"),
    ],
)
def test_serve_bad_input(run, args, fragment):
    base = ["serve", "llama-3.1-8b", "--gpu", "h100"]
    assert fragment in one_line_error(*run(*base, *args))


def test_serve_needs_architecture(run):
    assert "need the architecture" in one_line_error(*run("serve", "7B", "--gpu", "h100"))


def test_serve_rank(run):
    rec = json.loads(
        run("serve", "llama-3.1-8b", "--gpu", "h100,l4,a100-sxm-80gb", "--rank", "--max-tpot", "50ms", "--json")[1]
    )
    assert rec["kind"] == "serve.rank" and rec["options"]
    gpus = [o["gpu"] for o in rec["options"]]  # one row per GPU, its best option
    assert len(gpus) == len(set(gpus)) and set(gpus) <= {"h100-sxm-80gb", "l4", "a100-sxm-80gb"}
    assert all(o["tpot_s"] <= 0.05 and o["meets_slo"] for o in rec["options"])
    a100 = next(o for o in rec["options"] if o["gpu"] == "a100-sxm-80gb")
    assert a100["weights"] not in ("fp8", "nvfp4")  # no fp8 or fp4 path on the A100
    prices = [o["usd_per_million_output_tokens"] for o in rec["options"]]
    assert prices == sorted(prices)
    code, out, _ = run("serve", "llama-3.1-8b", "--gpu", "all", "--rank")
    assert code == 0 and "tokens/s/GPU" in out
    assert "unknown accelerator" in one_line_error(*run("serve", "llama-3.1-8b", "--gpu", "h100,nope", "--rank"))
    err = one_line_error(*run("serve", "llama-3.1-8b", "--gpu", "h100", "--rank", "--usd-per-gpu-hour", "2"))
    assert "--rank prices each GPU" in err


def test_serve_rank_is_plan_serve_per_gpu(run):
    """The known failure of the old ranking: 70B on H100 fp8 at TP1 with a batch of 3 ($9.19 per million) while TP2
    costs about $1.10. The rank is plan serve's search, one best option per GPU, with replicas for --qps."""
    import gpuplan

    args = ("serve", "llama-3.1-70b", "--gpu", "h100,a100-sxm-80gb,t4", "--rank", "--max-tpot", "50ms", "--json")
    code, out, _ = run(*args, "--qps", "20")
    rec = json.loads(out)
    assert code == 0 and rec["job"]["qps"] == 20
    plan = gpuplan.plan_serve("llama-3.1-70b", qps=20, max_tpot="50ms", gpu="h100,a100-sxm-80gb", top=200)
    for o in rec["options"]:  # each row is plan serve's first option of its GPU: same layout, fleet and price
        first = next(p for p in plan.to_dict()["options"] if p["gpu"] == o["gpu"])
        for key in ("weights", "kv_cache", "tp", "engine", "replicas", "max_batch", "usd_per_million_output_tokens"):
            assert o[key] == first[key], key
        assert o["batch"] >= 8 and o["replicas"] * o["tokens_per_s"] / 256 >= 20 / 0.99  # the fleet carries the load
    h100 = next(o for o in rec["options"] if o["gpu"] == "h100-sxm-80gb")
    assert h100["usd_per_million_output_tokens"] < 2.0  # not the TP1 batch-3 answer of about $9
    t4 = next(n for n in rec["not_possible"] if n["gpu"] == "t4")
    assert t4["reason"] == "does_not_fit_memory" and sum(t4["pruned"].values()) == rec["grid"]["tp"].__len__() * len(
        rec["grid"]["weights"]) * len(rec["grid"]["kv_cache"]) * len(rec["grid"]["engine"])  # fmt: skip
    # more load, more replicas of the same best option
    more = json.loads(run(*args, "--qps", "80")[1])
    h100_more = next(o for o in more["options"] if o["gpu"] == "h100-sxm-80gb")
    assert h100_more["replicas"] > h100["replicas"]
