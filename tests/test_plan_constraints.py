"""plan train's deadline and budget hold for the run with failures, its checkpoint flags are train's, and when
nothing meets a deadline or a budget the answer names the smallest one that does."""

from __future__ import annotations

import re

import pytest

from gpuplan import api

pytest.importorskip("numpy")


def _plan(**kw):
    base = dict(tokens="100B", gpu="h100", top=50)
    return api.plan_train("llama-3.1-8b", **{**base, **kw}).to_dict()


def test_every_option_meets_the_deadline_with_failures():
    record = _plan(deadline="5d", storage="nfs")
    assert record["options"]
    for o in record["options"]:
        assert o["time_s"] <= o["wall_time_with_failures_s"] <= 5 * 86400


def test_every_option_meets_the_budget_with_failures():
    loose = _plan(objective="cost")
    cheapest = min(o["cost_with_failures_usd"] for o in loose["options"])
    record = _plan(budget=cheapest * 1.02, objective="time")
    assert record["options"]
    assert all(o["cost_with_failures_usd"] <= cheapest * 1.02 for o in record["options"])


def test_slower_checkpoints_lower_the_goodput():
    """Same flags as train: NFS writes checkpoints slower than Lustre, so more of the run is lost to failures."""
    lustre = _plan(storage="lustre", gpus=64)["options"][0]
    nfs = _plan(storage="nfs", gpus=64)["options"][0]
    assert nfs["goodput"] < lustre["goodput"] <= 1


def test_an_impossible_deadline_names_the_one_that_has_an_answer():
    record = _plan(tokens="2T", deadline="1d", max_gpus=64)
    assert record["options"] == []
    note = next(n for n in record["notes"] if "fastest plan" in n)
    days = int(re.search(r"--deadline (\d+)d", note).group(1))
    again = _plan(tokens="2T", deadline=f"{days}d", max_gpus=64, objective="time")
    assert again["options"], note
    assert again["options"][0]["wall_time_with_failures_s"] <= days * 86400


def test_an_impossible_budget_names_the_one_that_has_an_answer():
    record = _plan(budget=10)
    assert record["options"] == []
    note = next(n for n in record["notes"] if "cheapest plan" in n)
    usd = int(re.search(r"--budget (\d+)", note).group(1))
    assert _plan(budget=usd)["options"], note


def test_the_cli_takes_trains_checkpoint_flags(run):
    code, _, err = run(
        "plan", "train", "llama-3.1-8b", "--tokens", "100B", "--gpu", "h100", "--storage", "nfs",
        "--storage-write", "2GB/s", "--async-checkpoint", "--mtbf-per-gpu-hours", "20000", "--top", "2", "--json",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run("plan", "train", "llama-3.1-8b", "--tokens", "100B", "--storage", "floppy")
    assert code == 2 and "--storage" in err
