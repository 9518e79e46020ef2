"""``plan train``'s output side: P10-P90 bands on every option (equal to ``train``'s for the same layout),
``--explain`` (rank, pruning reason, the loss to option 1 by term) and ``--pricing owned`` (priced as ``tco``)."""

from __future__ import annotations

import json

import pytest

import gpuplan
from gpuplan.catalog.session import Catalogs
from gpuplan.cli.main import main

CAT = Catalogs(())
#: bands are the same multiplication of the same values in plan and train: only float rounding may differ
REL = 1e-9


def _close(a: float, b: float, rel: float = REL) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


@pytest.fixture(scope="module")
def plan8():
    return gpuplan.plan_train("llama-3.1-8b", tokens="100B", gpu="h100", max_gpus=64, top=8, catalog=CAT)


@pytest.fixture(scope="module")
def plan405_explained():
    return gpuplan.plan_train(
        "llama-3.1-405b", tokens="15.6T", gpus=16384, gpu="h100", seq_len=8192, objective="time", top=5,
        explain="tp=8,pp=16,dp=128,micro_batch=1,recompute=full,zero=1", catalog=CAT,
    )  # fmt: skip


def _layout_text(o: dict) -> str:
    lay = o["layout"]
    keys = ("tp", "pp", "dp", "cp", "virtual_stages", "ep", "zero", "fsdp", "micro_batch", "recompute")
    return ",".join(f"{k}={str(lay[k]).lower()}" for k in keys if k in lay) + f",gpu={o['gpu']}"


def test_option_bands_equal_train_on_the_same_layout(plan8):
    record = plan8.to_dict()
    for opt, o in list(zip(plan8.search.options, record["options"], strict=True))[:4]:
        t = gpuplan.train(
            "llama-3.1-8b",
            tokens="100B",
            seq_len=record["grid"]["seq_len"],
            catalog=CAT,
            **opt.candidate.train_kwargs(),
        ).to_dict()
        assert o["band_class"] is not None and o["band_class"] == t["time"]["band_class"]
        for mine, theirs in (
            ("time_s", t["time"]["seconds"]),
            ("cost_usd", t["cost"]["usd"]),
            ("mfu", t["time"]["mfu"]),
        ):
            block = t["time"] if mine != "cost_usd" else t["cost"]
            key = {"time_s": "seconds", "cost_usd": "usd", "mfu": "mfu"}[mine]
            assert _close(o[mine], theirs)
            assert _close(o[f"{mine}_p10"], block[f"{key}_p10"]) and _close(o[f"{mine}_p90"], block[f"{key}_p90"])
            assert o[f"{mine}_p10"] < o[f"{mine}_p90"]


def test_explain_ranks_each_shown_option_at_its_place(plan8):
    record = plan8.to_dict()
    for i, o in enumerate(record["options"][:5], 1):
        r = gpuplan.plan_train(
            "llama-3.1-8b", tokens="100B", gpu="h100", max_gpus=64, top=8, explain=_layout_text(o), catalog=CAT
        ).to_dict()["explain"]
        assert r["status"] == "option" and r["in_grid"] and r["pruned"] is None, r
        # ties (the same layout on an equal price) share the better rank; the best offer of the layout is taken
        assert 1 <= r["rank"] <= i and r["shown"]
        assert r["estimate"]["time_s"] <= o["time_s"] * (1 + REL)


def test_explain_of_a_pruned_layout_names_the_reason_and_the_loss_by_term(plan405_explained):
    e = plan405_explained.to_dict()["explain"]
    # the same layout without recompute fits (gpuplan's estimate), so full recompute is dominated
    assert e["status"] == "pruned" and e["pruned"] == "dominated" and e["rank"] is None
    v = e["versus_best"]
    assert v["time_s"]["difference"] > 0 and v["cost_usd"]["difference"] > 0
    # the time splits into the step-time model's parts: they add up to the time to train, for both layouts
    for who in ("this", "best"):
        parts = sum(p[who] for p in v["time_by_part_s"].values())
        assert _close(parts, v["time_s"][who], 1e-12)
    assert v["time_by_part_s"]["recompute"]["difference"] > 0  # what full recompute costs
    best = plan405_explained.to_dict()["options"][0]
    assert _close(e["best"]["time_s"], best["time_s"]) and _close(e["best"]["mfu"], best["mfu"])


def test_explain_outside_the_grid_is_estimated_and_said(plan8):
    e = gpuplan.plan_train(
        "llama-3.1-8b", tokens="100B", gpu="h100", max_gpus=64, explain="tp=2,dp=4,micro_batch=3", catalog=CAT
    ).to_dict()["explain"]
    assert not e["in_grid"] and any("micro_batch=3" in w for w in e["outside_grid"])
    assert e["status"] in ("outside_grid", "pruned") and e["estimate"] is not None


@pytest.mark.parametrize(
    "args",
    [
        ["--explain", "tp=2,foo=1"],
        ["--explain", "tp=two"],
        ["--explain", "recompute=most"],
        ["--explain", "tp=2"],  # no count
        ["--explain", "tp=2,dp=4,precision=fp9"],
        ["--precision", "any", "--explain", "tp=2,dp=4,precision="],
        ["--gpus", "16", "--explain", "tp=2,dp=4"],  # 8 GPUs against --gpus 16
        ["--utilization", "0.5"],  # only with --pricing owned
        ["--pricing", "owned", "--utilization", "2"],
        ["--pricing", "owned", "--gpu", "a10"],  # no purchase price on file
        ["--pricing", "owned", "--providers", "aws"],
    ],
)
def test_bad_explain_or_owned_input_is_one_error_line(args, capsys):
    code = main(["plan", "train", "llama-3.1-8b", "--tokens", "100B", "--gpu", "h100", *args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("gpuplan: error:") and err.count("\n") == 1 and "Traceback" not in err


def test_owned_pricing_is_tco_per_used_gpu_hour(capsys):
    per_hour = gpuplan.tco(gpu="h100", utilization=0.7, catalog=CAT).to_dict()["owned"]["usd_per_used_gpu_hour"]
    assert main(["plan", "train", "llama-3.1-8b", "--tokens", "100B", "--gpu", "h100", "--max-gpus", "64",
                 "--pricing", "owned", "--top", "3", "--json"]) == 0  # fmt: skip
    record = json.loads(capsys.readouterr().out)
    assert record["ownership"]["h100-sxm-80gb"]["usd_per_used_gpu_hour"] == per_hour
    assert record["ownership"]["h100-sxm-80gb"]["purchase_source"]["source"]["url"].startswith("https://")
    for o in record["options"]:
        assert o["offer"] is None and o["pricing"] == "owned" and o["usd_per_gpu_hour"] == per_hour
        assert _close(o["cost_usd"], o["gpu_hours"] * per_hour)
    # half the utilization spreads the fixed cost over half the hours: dearer per used hour
    half = gpuplan.plan_train(
        "llama-3.1-8b", tokens="100B", gpu="h100", max_gpus=64, pricing="owned", utilization=0.35, top=1, catalog=CAT
    ).to_dict()
    want = gpuplan.tco(gpu="h100", utilization=0.35, catalog=CAT).to_dict()["owned"]["usd_per_used_gpu_hour"]
    assert half["options"][0]["usd_per_gpu_hour"] == want > per_hour


def test_explain_table_renders(capsys):
    code = main(["plan", "train", "llama-3.1-8b", "--tokens", "100B", "--gpu", "h100", "--max-gpus", "64", "--top", "2",
                 "--explain", "tp=2,dp=4,micro_batch=1,recompute=full,zero=1"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "explain:" in out and "against option 1" in out and "pp_bubble" not in out.split("explain:")[0]


def test_explain_agrees_with_the_search_on_random_layouts():
    """Every feasible candidate of a small search listed (top = all): a random layout of the grid is explained as an
    option exactly when the search lists it, at the cost of its cheapest listing, and pruned otherwise."""
    import random

    from gpuplan.plan.search import MICRO_BATCHES, RECOMPUTE_ORDER, TP_CHOICES, sharding_choices

    kwargs = dict(tokens="100B", gpu="h100", max_gpus=16, catalog=CAT)
    full = gpuplan.plan_train("llama-3.1-8b", top=10_000, **kwargs)
    assert len(full.search.options) == full.search.feasible
    cheapest: dict[tuple, float] = {}
    for o in full.search.options:
        c = o.candidate
        key = (c.gpus, c.tp, c.pp, c.virtual_stages, c.sharding.zero, c.sharding.fsdp, c.micro_batch, c.recompute,
               c.recompute_layers)  # fmt: skip
        cheapest[key] = min(cheapest.get(key, float("inf")), c.cost_usd)
    grid = full.search.grid
    rng = random.Random(16)
    seen = {"option": 0, "pruned": 0}
    reasons: dict = {}
    for _ in range(80):
        gpus = rng.choice((1, 8, 16, 16))
        tp = rng.choice(TP_CHOICES)
        pp = rng.choice(grid["pp"])
        vs = rng.choice(grid["virtual_stages"].get(str(pp), [1]))
        sharding = rng.choice(sharding_choices(tp * pp))
        mb, rc = rng.choice(MICRO_BATCHES), rng.choice((*RECOMPUTE_ORDER, None))  # None: the lightest that fits
        text = (
            f"gpus={gpus},tp={tp},pp={pp},virtual_stages={vs},zero={sharding.zero},fsdp={sharding.fsdp},"
            f"micro_batch={mb}" + (f",recompute={rc}" if rc else "")
        )
        e = gpuplan.plan_train("llama-3.1-8b", top=1, explain=text, **kwargs).to_dict()["explain"]
        rc = e["layout"]["recompute"]
        reasons[e["pruned"]] = reasons.get(e["pruned"], 0) + 1
        key = (gpus, tp, pp, vs, sharding.zero, sharding.fsdp, mb, rc, e["layout"]["recompute_layers"])
        assert e["in_grid"], (text, e["outside_grid"])
        if key in cheapest:
            assert e["status"] == "option", (text, e["pruned"], e["pruned_why"])
            assert _close(e["estimate"]["cost_usd"], cheapest[key])
        else:
            assert e["status"] == "pruned" and e["pruned"], (text, e)
        seen[e["status"]] += 1
    assert seen["option"] >= 5 and len(reasons) >= 4, (seen, reasons)  # options and at least three reasons


def test_explain_names_deadline_and_budget_misses(plan8):
    o = plan8.to_dict()["options"][0]
    text = _layout_text(o) + f",gpus={o['gpus']}"
    kwargs = dict(tokens="100B", gpu="h100", max_gpus=64, explain=text, catalog=CAT)
    late = gpuplan.plan_train("llama-3.1-8b", deadline=f"{o['time_s'] * 0.9:.0f}s", **kwargs).to_dict()["explain"]
    assert late["pruned"] == "misses_deadline" and late["rank"] is None
    dear = gpuplan.plan_train("llama-3.1-8b", budget=f"{o['cost_usd'] * 0.9:.0f}", **kwargs).to_dict()["explain"]
    assert dear["pruned"] == "over_budget"
    ok = gpuplan.plan_train("llama-3.1-8b", budget=f"{o['cost_usd'] * 1.1:.0f}", **kwargs).to_dict()["explain"]
    assert ok["status"] == "option" and ok["rank"] == 1


def test_explain_precision_names_the_layouts_precision():
    """With --precision any the layout's precision= picks which half of the search it is ranked in: fp8-mixed on an
    H100 is an option at the search's cost for that layout at fp8, faster than the same layout at bf16-mixed; no key
    means the first precision searched; a precision the search did not take is estimated and said outside the grid,
    and one the GPU lacks is not_supported."""
    kwargs = dict(tokens="100B", gpu="h100", max_gpus=16, catalog=CAT)
    full = gpuplan.plan_train("llama-3.1-8b", precision="any", top=10_000, **kwargs)
    fp8 = [o for o in full.search.options if o.candidate.precision == "fp8-mixed"]
    assert fp8 and len(full.search.options) == full.search.feasible
    c = fp8[0].candidate
    text = (
        f"gpus={c.gpus},tp={c.tp},pp={c.pp},virtual_stages={c.virtual_stages},zero={c.sharding.zero},"
        f"fsdp={c.sharding.fsdp},micro_batch={c.micro_batch},recompute={c.recompute}"
    )

    def key(x):
        return (x.gpus, x.tp, x.pp, x.virtual_stages, x.sharding, x.micro_batch, x.recompute)

    cheapest = min(o.candidate.cost_usd for o in fp8 if key(o.candidate) == key(c))
    run = lambda t, p="any": gpuplan.plan_train(  # noqa: E731
        "llama-3.1-8b", precision=p, top=1, explain=t, **kwargs
    ).to_dict()["explain"]
    e8 = run(text + ",precision=fp8-mixed")
    assert e8["status"] == "option" and e8["in_grid"] and e8["layout"]["precision"] == "fp8-mixed", e8
    assert e8["rank"] is not None and _close(e8["estimate"]["cost_usd"], cheapest)
    e16 = run(text + ",precision=bf16-mixed")
    assert e16["layout"]["precision"] == "bf16-mixed" and e16["estimate"]["step_s"] > e8["estimate"]["step_s"]
    default = run(text)
    assert default["layout"]["precision"] == "bf16-mixed" and _close(default["estimate"]["step_s"],
                                                                       e16["estimate"]["step_s"], 1e-12)  # fmt: skip
    outside = run(text + ",precision=fp8-mixed", "bf16-mixed")
    assert not outside["in_grid"] and any("precision=fp8-mixed" in w for w in outside["outside_grid"])
    assert _close(outside["estimate"]["step_s"], e8["estimate"]["step_s"], 1e-12)
    a100 = gpuplan.plan_train("llama-3.1-8b", tokens="100B", gpu="a100-sxm-80gb", max_gpus=16, precision="any", top=1,
                              explain=text + ",precision=fp8-mixed", catalog=CAT).to_dict()["explain"]  # fmt: skip
    assert a100["pruned"] == "not_supported" and a100["estimate"] is None
