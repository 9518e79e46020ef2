"""`gpuplan train --tokens` (time, cost, deadline, rank, plot) and `gpuplan offers list`."""

from __future__ import annotations

import itertools
import json
from html.parser import HTMLParser

import pytest

from test_cli import one_line_error

H100_AWS = "aws-p5.48xlarge-us-east-1-ondemand"


def test_offers_list(run):
    rec = json.loads(run("offers", "list", "--json")[1])
    assert rec["kind"] == "offers.list" and len(rec["offers"]) >= 50
    for o in rec["offers"]:
        assert o["usd_per_hour"] > 0 and o["source"]["url"] and o["price_date"]
        assert o["usd_per_gpu_hour"] == pytest.approx(o["usd_per_hour"] / o["gpu_count"])
    h100 = json.loads(run("offers", "list", "--gpu", "h100", "--json")[1])["offers"]
    assert h100 and {o["gpu"] for o in h100} == {"h100-sxm-80gb"}
    prices = [o["usd_per_gpu_hour"] for o in h100]
    assert prices == sorted(prices)
    assert "providers" in one_line_error(*run("offers", "list", "--provider", "acme"))
    code, out, _ = run("offers", "list", "--gpu", "a100-sxm-80gb")
    assert code == 0 and "$/GPU-h" in out


def test_train_time_and_cost_json(run):
    code, out, err = run(
        "train",
        "llama-3.1-70b",
        "--gpu",
        "h100",
        "--gpus",
        "64",
        "--tp",
        "8",
        "--pp",
        "2",
        "--zero",
        "1",
        "--sequence-parallel",
        "--global-batch",
        "512",
        "--tokens",
        "2T",
        "--offer",
        H100_AWS,
        "--json",
    )
    assert code == 0, err
    rec = json.loads(out)
    assert {"flops_per_token", "total_flops"} <= set(rec["compute"])
    assert {"step_s", "mfu", "seconds", "gpu_hours"} <= set(rec["time"])
    assert {"usd", "offer", "usd_per_gpu_hour"} <= set(rec["cost"])
    assert rec["compute"]["total_flops"] == pytest.approx(rec["compute"]["flops_per_token"] * 2e12)
    t = rec["time"]
    assert t["seconds"] == pytest.approx(rec["compute"]["total_flops"] / (64 * 989.5e12 * t["mfu"]))
    assert t["gpu_hours"] == pytest.approx(t["seconds"] * 64 / 3600)
    assert rec["cost"]["usd"] == pytest.approx(t["gpu_hours"] * 55.04 / 8)
    assert sum(t["step_parts_s"].values()) == pytest.approx(t["step_s"])


def test_mfu_override_and_price(run):
    rec = json.loads(
        run(
            "train",
            "7B",
            "--gpu",
            "a100-sxm-80gb",
            "--gpus",
            "64",
            "--tokens",
            "1T",
            "--mfu",
            "0.4",
            "--usd-per-gpu-hour",
            "$2/h",
            "--json",
        )[1]
    )
    assert rec["time"]["mfu"] == 0.4 and rec["time"]["mfu_source"].startswith("given")
    assert rec["time"]["seconds"] == pytest.approx(6 * 7e9 * 1e12 / (64 * 312e12 * 0.4))
    assert rec["cost"]["usd"] == pytest.approx(rec["time"]["gpu_hours"] * 2)
    assert rec["seed_rule"]["constant"] == pytest.approx(13.35, abs=0.01)


def test_deadline_picks_whole_instances(run):
    rec = json.loads(
        run(
            "train",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--tokens",
            "1T",
            "--deadline",
            "14d",
            "--zero",
            "1",
            "--offer",
            H100_AWS,
            "--json",
        )[1]
    )
    gpus = rec["layout"]["gpus"]
    assert gpus % 8 == 0 and rec["time"]["seconds"] <= 14 * 86400
    fewer = json.loads(
        run(
            "train", "llama-3.1-8b", "--gpu", "h100", "--tokens", "1T", "--zero", "1", "--gpus", str(gpus - 8), "--json"
        )[1]
    )
    assert fewer["time"]["seconds"] > 14 * 86400


def test_rank_and_plot(run, tmp_path):
    out_file = tmp_path / "rank.html"
    code, out, err = run(
        "train",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--gpus",
        "64",
        "--zero",
        "1",
        "--tokens",
        "1T",
        "--global-batch",
        "1024",
        "--rank",
        "--plot",
        str(out_file),
        "--json",
    )
    assert code == 0, err
    rec = json.loads(out)
    costs = [o["usd"] for o in rec["options"]]
    assert costs == sorted(costs) and any(o["pareto"] for o in rec["options"])
    front = sorted((o["seconds"], o["usd"]) for o in rec["options"] if o["pareto"])
    assert all(b[1] < a[1] for a, b in itertools.pairwise(front))  # faster points on the front cost more
    assert any(c["gpu"] in ("t4", "l4") for c in rec["cannot_run"])  # 8B full training does not fit there
    page = out_file.read_text()
    HTMLParser().feed(page)
    assert page.count("<svg") == 2 and "Pareto" in page and "<title>" in page


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("--deadline", "30d"), "need --tokens"),
        (("--tokens", "1T", "--deadline", "30d", "--gpus", "8"), "not both"),
        (("--tokens", "lots"), "token count"),
        (("--tokens", "1T", "--mfu", "1.5"), "--mfu"),
        (("--tokens", "1T", "--offer", "nope"), "unknown offer 'nope'"),
        (("--tokens", "1T", "--offer", "aws-g6.xlarge-us-east-1-ondemand"), "not h100-sxm-80gb"),
        (("--tokens", "1T", "--plot", "x.html"), "add --rank"),
        (("--tokens", "1T", "--deadline", "-3d"), "more than zero"),
        (("--tokens", "1T", "--assume", "model_shape_factor=2"), "model_shape_factor"),
    ],
)
def test_cost_bad_input(run, args, fragment):
    assert fragment in one_line_error(*run("train", "llama-3.1-8b", "--gpu", "h100", *args))


def _offers(*rows: dict) -> str:
    out = ["schema_version = 1"]
    for r in rows:
        row = {
            "id": "me-8x",
            "provider": "me",
            "instance": "box",
            "region": "home",
            "gpu": "h100",
            "gpu_count": 8,
            "usd_per_hour": 16.0,
            "pricing": "on-demand",
            "price_date": "2026-11",
            **r,
        }
        out.append("[[offer]]")
        out += [f"{k} = {json.dumps(v)}" for k, v in row.items()]
        out.append('source = {title = "my quote", url = "https://example.com", date = "2026-11"}')
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    "rows,fragment",
    [
        ([{"usd_per_hour": 0}], "usd_per_hour"),
        ([{"gpu": "h1000"}], "unknown accelerator 'h1000'"),
        ([{}, {"id": "me-8x-spot", "pricing": "spot", "usd_per_hour": 20.0}], "spot $20/h is above on-demand"),
        ([{}, {"id": "me-4x", "gpu_count": 4}], "one instance has one GPU count"),
        ([{}, {}], "appears twice"),
        ([{"pricing": "free"}], "pricing"),
    ],
)
def test_offers_catalog_checks(tmp_path, run, rows, fragment):
    f = tmp_path / "offers.toml"
    f.write_text(_offers(*rows))
    assert fragment in one_line_error(*run("--catalog", str(f), "offers", "list"))


def test_user_quote_is_listed(tmp_path, run):
    f = tmp_path / "offers.toml"
    f.write_text(_offers({}))
    rec = json.loads(run("--catalog", str(f), "offers", "list", "--provider", "me", "--json")[1])
    assert rec["offers"][0]["gpu"] == "h100-sxm-80gb" and rec["offers"][0]["usd_per_gpu_hour"] == 2.0


def test_deadline_respects_the_global_batch(run):
    rec = json.loads(
        run(
            "train",
            "llama-3.1-70b",
            "--gpu",
            "h100",
            "--tp",
            "8",
            "--pp",
            "2",
            "--sequence-parallel",
            "--zero",
            "1",
            "--global-batch",
            "1024",
            "--tokens",
            "15T",
            "--deadline",
            "90d",
            "--offer",
            H100_AWS,
            "--json",
        )[1]
    )
    dp = rec["layout"]["dp"]
    assert 1024 % dp == 0 and rec["layout"]["gpus"] % 8 == 0 and rec["time"]["seconds"] <= 90 * 86400
    line = one_line_error(
        *run(
            "train",
            "llama-3.1-70b",
            "--gpu",
            "h100",
            "--tp",
            "8",
            "--pp",
            "2",
            "--global-batch",
            "64",
            "--tokens",
            "15T",
            "--deadline",
            "10d",
        )
    )
    assert "raise --global-batch" in line


# ------------------------------------------------------------ regressions from the review of the planners


def test_offer_rounds_to_whole_instances(run):
    rec = json.loads(run("train", "llama-3.1-8b", "--gpu", "h100", "--offer", H100_AWS, "--tokens", "1T", "--json")[1])
    assert rec["layout"]["gpus"] == 8 and any("whole p5.48xlarge instances" in n for n in rec["notes"])


def test_more_gpus_never_slower_at_fixed_global_batch(run):
    times = [
        json.loads(
            run(
                "train",
                "llama-3.1-8b",
                "--gpu",
                "h100",
                "--zero",
                "1",
                "--tokens",
                "1T",
                "--gpus",
                str(g),
                "--global-batch",
                "256",
                "--json",
            )[1]
        )["time"]["seconds"]
        for g in (8, 16, 32)
    ]
    assert times == sorted(times, reverse=True)


def test_long_context_mfu_note(run):
    rec = json.loads(
        run(
            "train",
            "llama-3.2-1b",
            "--gpu",
            "h100",
            "--seq-len",
            "131072",
            "--cp",
            "8",
            "--gpus",
            "64",
            "--tokens",
            "10B",
            "--global-batch",
            "64",
            "--json",
        )[1]
    )
    assert any("counting attention as executed" in n for n in rec["notes"])


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("--tokens", "1T", "--assume", "hbm_efficiency=0"), "must be more than 0"),
        (("--tokens", "1T", "--epochs", "nan"), "finite"),
        (("--tokens", "1T", "--usd-per-gpu-hour", "1e308", "--json"), "at most"),
        (("--tokens", "1T", "--deadline", "1ms"), "--deadline must be at least 1"),
        (("--gpus", "8", "--zero", "1", "--tokens", "1T", "--rank", "--plot", "/nonexistent/x.html"), "can't write"),
    ],
)
def test_planner_bad_input(run, args, fragment):
    assert fragment in one_line_error(*run("train", "llama-3.1-8b", "--gpu", "h100", *args))


def test_pareto_keeps_ties():
    from gpuplan.plan.training import pareto_front

    assert pareto_front([(1, 3), (1, 3), (2, 2), (2, 5), (3, 2)]) == [0, 1, 2]
