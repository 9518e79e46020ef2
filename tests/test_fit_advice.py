"""A valid plan that does not fit exits 3 and names the smallest change that makes it fit; the change works."""

from __future__ import annotations

import json

import pytest

TRAIN_CASES = [
    ("llama-3.1-70b", "h100", ["--gpus", "8"]),
    ("llama-3.1-8b", "h100", ["--gpus", "1", "--seq-len", "8192"]),
    ("llama-3.1-8b", "h100", ["--gpus", "8", "--micro-batch", "16", "--seq-len", "8192"]),
    ("llama-3.1-8b", "rtx-4090", ["--gpus", "1"]),
    ("llama-3.1-405b", "h100", ["--gpus", "8", "--tp", "8"]),
    ("mixtral-8x7b", "a100-sxm-80gb", ["--gpus", "8"]),
    ("qwen2.5-32b", "l40s", ["--gpus", "4", "--tp", "2"]),
]


def _flags(changes: dict) -> list[str]:
    out: list[str] = []
    for k, v in changes.items():
        out += [f"--{k}"] if v is True else [f"--{k}", str(v)]
    return out


def _merge(args: list[str], changes: dict) -> list[str]:
    """The original flags with the advised ones replacing any earlier value of the same flag."""
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a.startswith("--") and a[2:] in changes:
            skip = i + 1 < len(args) and not args[i + 1].startswith("--")
            continue
        out.append(a)
    return out + _flags(changes)


@pytest.mark.parametrize("model,gpu,args", TRAIN_CASES, ids=lambda x: x if isinstance(x, str) else None)
def test_train_advice_makes_it_fit(run, model, gpu, args):
    code, out, err = run("train", model, "--gpu", gpu, *args, "--json")
    assert code == 3, err
    rec = json.loads(out)
    assert rec["memory"]["fits"] is False
    advice = rec["fit_advice"]
    assert advice is not None and advice["total_bytes"] <= advice["capacity_bytes"]
    code2, out2, err2 = run("train", model, "--gpu", gpu, *_merge(args, advice["changes"]), "--json")
    assert code2 == 0, err2
    fixed = json.loads(out2)
    assert fixed["memory"]["fits"] is True
    # the advice reports what the plan then needs, to the byte
    assert fixed["memory"]["total_bytes"] == pytest.approx(advice["total_bytes"], rel=1e-9)


def test_train_advice_is_minimal(run):
    """Each advised change is needed: dropping any one of them (but the GPU count) no longer fits."""
    args = ["--gpus", "8"]
    code, out, _ = run("train", "llama-3.1-70b", "--gpu", "h100", *args, "--json")
    changes = json.loads(out)["fit_advice"]["changes"]
    assert len(changes) >= 2
    for key in [k for k in changes if k != "gpus"]:
        fewer = {k: v for k, v in changes.items() if k != key}
        code, out, err = run("train", "llama-3.1-70b", "--gpu", "h100", *_merge(args, fewer), "--json")
        assert code in (2, 3), (key, err)


def test_train_table_names_the_change_and_exits_3(run):
    code, out, err = run("train", "llama-3.1-70b", "--gpu", "h100", "--gpus", "8")
    assert code == 3 and err == ""
    assert "does not fit" in out and "to fit, add: --" in out


def test_fitting_plan_exits_0_without_advice(run):
    code, out, _ = run("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--json")
    assert code == 0 and "fit_advice" not in json.loads(out)


@pytest.mark.parametrize(
    "model,gpu,args",
    [
        ("llama-3.1-405b", "h100", []),
        ("llama-3.1-70b", "h100", []),
        ("llama-3.1-70b", "rtx-4090", []),
        ("llama-3.1-8b", "t4", ["--prompt-tokens", "4096"]),
    ],
)
def test_serve_advice_makes_it_fit(run, model, gpu, args):
    code, out, err = run("serve", model, "--gpu", gpu, *args, "--json")
    assert code == 3, err
    advice = json.loads(out)["fit_advice"]
    assert advice is not None
    code2, out2, err2 = run("serve", model, "--gpu", gpu, *_merge(args, advice["changes"]), "--json")
    assert code2 == 0, err2
    assert json.loads(out2)["memory"]["fits"] is True


def test_serve_rank_exits_3_only_when_nothing_fits(run):
    code, _, _ = run("serve", "llama-3.1-8b", "--gpu", "h100,rtx-4090", "--rank", "--json")
    assert code == 0
    code, _, err = run("serve", "llama-3.1-405b", "--gpu", "t4", "--rank", "--json")
    assert code == 3, err


def test_micro_batch_advice_is_the_largest_that_fits(run):
    """With recomputation already full, the advice lowers the micro-batch only as far as needed: the largest one
    below the asked that fits, which the plan itself reports as "largest micro-batch that fits" (not 1)."""
    # 24 sequences per rank: micro-batches 8 and 6 divide it, 7 does not (a bisection over validity would land on 6)
    args = ["--gpus", "8", "--fsdp", "--micro-batch", "24", "--global-batch", "192", "--seq-len", "4096"]
    code, out, _ = run("train", "llama-3.2-3b", "--gpu", "h100", *args, "--recompute", "full", "--json")
    assert code == 3
    rec = json.loads(out)
    advised = rec["fit_advice"]["changes"]
    assert set(advised) == {"micro-batch"} and advised["micro-batch"] > 1
    assert advised["micro-batch"] == rec["memory"]["max_micro_batch"]
    assert advised["micro-batch"] == 8
    bigger = args[:3] + ["--micro-batch", "12"] + args[5:]  # the next that divides 24 does not fit
    code2, _, _ = run("train", "llama-3.2-3b", "--gpu", "h100", *bigger, "--recompute", "full", "--json")
    assert code2 == 3
