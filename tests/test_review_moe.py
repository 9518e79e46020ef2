"""A review of the MoE step-time flags, --stack megatron-2021 and the catalog's low_power_rating (issue 13): each
finding refused with one line and exit 2, or priced and shown consistently."""

from __future__ import annotations

import json

import pytest

import gpuplan
from test_cli import one_line_error


def test_dense_layout_line_has_no_etp(run):
    # layout.etp is null for a dense model; the text layout shows etp only where it differs from tp
    code, out, err = run("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3")
    assert code == 0, err
    layout = next(line for line in out.splitlines() if line.startswith("layout "))
    assert "etp" not in layout and layout.startswith("layout dp=8 tp=1 pp=1 zero-3;")
    code, out, err = run("train", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "16", "--ep", "8", "--tp", "2",
                         "--etp", "1", "--zero", "3")  # fmt: skip
    assert code in (0, 3), err
    assert "ep=8 etp=1" in next(line for line in out.splitlines() if line.startswith("layout "))


def _moe_step(m, **kw):
    return gpuplan.train(
        "mixtral-8x7b", gpu="h100", gpus=64, pp=4, tp=2, ep=8, zero=1, micro_batch=1, global_batch=8 * m,
        seq_len=4096, tokens="1B", recompute="selective", offline=True, **kw,
    ).plan.step  # fmt: skip


def test_ep_comm_overlap_does_not_shrink_the_pipeline_bubble():
    # pp = 4: with m <= pp micro-batches none has a partner, so --ep-comm-overlap hides nothing and the step is
    # the plain one; the bubble (warm-up and cool-down, unpaired) keeps the whole exchange whatever m is
    for m in (1, 4, 16):
        plain, over = _moe_step(m), _moe_step(m, ep_comm_overlap=True)
        assert over.parts["pp_bubble"] == plain.parts["pp_bubble"]
        if m <= 4:
            assert over.iteration_s == plain.iteration_s
        else:
            assert over.iteration_s < plain.iteration_s
            assert over.parts["moe_all_to_all"] < plain.parts["moe_all_to_all"]


_A100 = ("--gpu", "a100-sxm-80gb", "--gpus", "8")


@pytest.mark.parametrize(
    "args, words",
    [
        (("--fsdp",), "--fsdp asks for fully sharded"),
        (("--zero", "3"), "--stack deepspeed-2021"),
        (("--zero", "2"), "--zero 2 asks for ZeRO-2/3"),
        (("--compile",), "torch.compile"),
        (("--cross-entropy-fusion",), "--cross-entropy-loss-fusion"),
        (("--cp", "2", "--tp", "4"), "context parallelism"),
        (("--tp", "2", "--tp-comm-overlap"), "Transformer Engine"),
    ],
)  # fmt: skip
def test_megatron_2021_refuses_what_it_did_not_have(run, args, words):
    line = one_line_error(*run("train", "llama-2-7b", *_A100, "--stack", "megatron-2021", *args))
    assert words in line and "Megatron-LM of 2021" in line and "--stack megatron" in line


@pytest.mark.parametrize(
    "flag, words",
    [
        (("--ep", "8"), "expert parallelism"),
        (("--ep-comm-overlap",), "--overlap-moe-expert-parallel-comm"),
        (("--moe-dispatch-dtype", "fp8"), "fp8 dispatch"),
    ],
)
def test_megatron_2021_refuses_the_moe_flags(run, flag, words):
    args = ("train", "qwen3-30b-a3b", "--gpu", "a100-sxm-80gb", "--gpus", "16", "--zero", "1")
    line = one_line_error(*run(*args, "--stack", "megatron-2021", *flag))
    assert "Megatron-LM of 2021" in line and words in line
    code, _out, err = run(*args, "--stack", "megatron", "--ep", "8", *flag)
    assert code in (0, 3) and "Traceback" not in err


def test_megatron_2021_still_runs_its_own_layouts(run):
    for extra in (("--tp", "8", "--no-cross-entropy-fusion"), ("--tp", "2", "--pp", "2", "--zero", "1")):
        code, out, err = run("train", "llama-2-7b", *_A100, "--stack", "megatron-2021", "--tokens", "1B", *extra)
        assert code == 0, err
        assert "stack: megatron-2021" in out


@pytest.mark.parametrize(
    "layout, words",
    [
        ("precision=fp8-mixed", "Transformer Engine"),
        ("fsdp=true", "--fsdp"),
        ("zero=3", "ZeRO-2/3"),
        ("tp=4,cp=2", "context parallelism"),
        ("tp=2,ep=2", "expert parallelism"),
    ],
)
def test_plan_explain_megatron_2021_refuses_as_train_does(run, layout, words):
    line = one_line_error(*run("plan", "train", "llama-2-7b", "--gpu", "h100", "--gpus", "8", "--tokens", "1B",
                               "--explain", f"stack=megatron-2021,{layout}"))  # fmt: skip
    assert "stack=megatron-2021" in line and words in line


def test_web_train_form_refuses_megatron_2021_with_fsdp():
    pytest.importorskip("fastapi")
    from gpuplan import api
    from gpuplan.web import app

    train = next(e for e in app.ENDPOINTS if e.fn is api.train)
    query = {"model": "llama-2-7b", "gpu": "a100-sxm-80gb", "gpus": "8", "stack": "megatron-2021"}
    bad = app.call(train, {**query, "fsdp": "true"})
    assert bad.status_code == 400 and "Megatron-LM of 2021" in json.loads(bad.body)["error"]
    assert app.call(train, {**query, "tp": "8"}).status_code == 200


def _acme(rating: str | None, tdp: str | None = "tdp_w = 500\n", source: bool = True) -> str:
    from test_cli import GOOD_ACC

    text = GOOD_ACC.replace("tdp_w = 500\n", (tdp or "") + (f"low_power_rating = {rating}\n" if rating else ""))
    if source:
        text += '[accelerator.sources."low_power_rating"]\ntitle = "X1 at 300 W"\n'
        text += 'url = "https://e.com/x"\ndate = "2026-01"\n'
    return text


@pytest.mark.parametrize(
    "rating, tdp, source, words",
    [
        ("{ power_w = 600, peak_fraction = 0.7 }", "tdp_w = 500\n", True, "is not below tdp_w = 500 W"),
        ("{ power_w = 500, peak_fraction = 0.7 }", "tdp_w = 500\n", True, "is not below tdp_w = 500 W"),
        ("{ power_w = 300, peak_fraction = 0.7 }", None, True, "no tdp_w"),
        ("{ power_w = 0, peak_fraction = 0.7 }", "tdp_w = 500\n", True, "greater than 0"),
        ("{ power_w = -300, peak_fraction = 0.7 }", "tdp_w = 500\n", True, "greater than 0"),
        ("{ power_w = 300, peak_fraction = 1.2 }", "tdp_w = 500\n", True, "less than or equal to 1"),
        ("{ power_w = 300, peak_fraction = nan }", "tdp_w = 500\n", True, "finite"),
        ("{ power_w = 300, peak_fraction = 0.7 }", "tdp_w = 500\n", False, "its own source"),
    ],
)  # fmt: skip
def test_catalog_low_power_rating_refused_with_one_line(run, tmp_path, rating, tdp, source, words):
    f = tmp_path / "mine.toml"
    f.write_text(_acme(rating, tdp, source))
    line = one_line_error(*run("--catalog", str(f), "gpus", "show", "acme-x1"))
    assert words in line and "low_power_rating" in line


def test_catalog_low_power_rating_accepted_and_shown(run, tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(_acme("{ power_w = 300, peak_fraction = 0.7 }"))
    code, out, err = run("--catalog", str(f), "gpus", "show", "acme-x1", "--json")
    assert code == 0, err
    assert json.loads(out)["accelerator"]["low_power_rating"] == {"power_w": 300.0, "peak_fraction": 0.7}


def _b200(run, cap: str | None):
    args = ["train", "llama-3.1-8b", "--gpu", "b200", "--gpus", "8", "--zero", "3", "--tokens", "1B", "--json"]
    code, out, err = run(*args, *(("--assume", f"power_limit_w={cap}") if cap else ()))
    assert code == 0, err
    return json.loads(out)


def test_power_cap_bounds_the_energy_as_it_slows_the_step(run):
    free, capped, above = _b200(run, None), _b200(run, "700"), _b200(run, "1500")
    # energy = wall time x GPUs x the GPU's draw (x host factor x PUE): at 700 W the draw is 0.7 of the TDP's
    ratio = capped["machine"]["energy_kwh"] / free["machine"]["energy_kwh"]
    wall = capped["time"]["seconds"] / free["time"]["seconds"]
    assert wall > 1.15
    assert ratio == pytest.approx(0.7 * wall, rel=0.01)
    # a cap above the TDP caps nothing, and says so
    assert above["time"]["step_s"] == free["time"]["step_s"]
    assert above["machine"]["energy_kwh"] == free["machine"]["energy_kwh"]
    assert any("above b200's 1000 W TDP: no cap" in n for n in above["notes"])


@pytest.mark.parametrize(
    "gpu, cap, words",
    [
        ("b200", "1", "below 10% of b200's 1000 W TDP"),
        ("h100", "0.001", "between 70 and 700 W"),
        ("h100", "0", "must be more than 0"),
        ("h100", "-5", "must be a finite number more than 0"),
        ("b200", "nan", "finite number"),
    ],
)
def test_power_cap_far_below_the_tdp_refused(run, gpu, cap, words):
    line = one_line_error(*run("train", "llama-3.1-8b", "--gpu", gpu, "--gpus", "8", "--zero", "3", "--tokens", "1B",
                               "--assume", f"power_limit_w={cap}"))  # fmt: skip
    assert words in line and "power_limit_w" in line


def test_each_assumption_listed_once(run):
    # fp4_bf16_tail_fraction is read by the memory and the step-time estimates (--assume sets both): one entry
    code, out, err = run("train", "llama-3.1-8b", "--gpu", "b200", "--gpus", "8", "--zero", "3", "--precision",
                         "fp4-mixed", "--tokens", "1B", "--assume", "fp4_bf16_tail_fraction=0.5", "--json")  # fmt: skip
    assert code == 0, err
    names = [a["name"] for a in json.loads(out)["assumptions"]]
    assert len(names) == len(set(names))
    assert [a["value"] for a in json.loads(out)["assumptions"] if a["name"] == "fp4_bf16_tail_fraction"] == [0.5]
    code, out, err = run("train", "llama-3.1-8b", "--gpu", "b200", "--gpus", "8", "--zero", "3", "--tokens", "1B")
    assert out.count("fp4_bf16_tail_fraction=") == 1


def test_ep_comm_overlap_refused_with_partial_recompute(run):
    # --recompute partial is Megatron's --recompute-granularity full --recompute-method block, which Megatron-Core
    # refuses beside --overlap-moe-expert-parallel-comm as it refuses full recompute
    args = ("train", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "16", "--ep", "8", "--tp", "2", "--zero", "1",
            "--tokens", "1B", "--ep-comm-overlap")  # fmt: skip
    line = one_line_error(*run(*args, "--recompute", "partial", "--recompute-layers", "4"))
    assert "--recompute partial" in line and "selective or per-op" in line
    assert run(*args, "--recompute", "selective")[0] == 0


def test_fp8_dispatch_needs_expert_parallelism(run):
    # without --ep there is no all-to-all to send in fp8 (it was silently a no-op), as --ep-comm-overlap needs --ep
    line = one_line_error(*run("train", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "8", "--zero", "3",
                               "--moe-dispatch-dtype", "fp8"))  # fmt: skip
    assert "--ep > 1" in line and "--moe-dispatch-dtype fp8" in line
    code, _out, err = run("train", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "8", "--zero", "3",
                          "--moe-dispatch-dtype", "bf16")  # fmt: skip
    assert code in (0, 3), err


def test_plan_train_refuses_the_power_cap_train_refuses(run):
    line = one_line_error(*run("plan", "train", "llama-3.1-8b", "--gpu", "b200", "--tokens", "1T", "--assume",
                               "power_limit_w=1"))  # fmt: skip
    assert "below 10% of b200's 1000 W TDP" in line
    code, _out, err = run("plan", "train", "llama-3.1-8b", "--gpu", "b200", "--tokens", "1T", "--top", "1",
                          "--assume", "power_limit_w=700")  # fmt: skip
    assert code == 0, err


@pytest.mark.parametrize(
    "command",
    [
        ("train", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "16", "--ep", "8"),
        ("plan", "train", "qwen3-30b-a3b", "--gpu", "h100", "--tokens", "1B"),
    ],
)
def test_one_assumption_given_two_values_refused(run, command):
    line = one_line_error(*run(*command, "--assume", "moe_load_imbalance=2", "--assume", "moe_load_imbalance=3"))
    assert "moe_load_imbalance given twice (2 and 3)" in line


def test_a_huge_ranged_assumption_names_its_range(run):
    line = one_line_error(*run("train", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "16", "--ep", "8", "--assume",
                               "moe_load_imbalance=1e308"))  # fmt: skip
    assert "between 1 and 64" in line


@pytest.mark.parametrize(
    "layout, train_args",
    [
        ("stack=deepspeed,fsdp=true", ("--stack", "deepspeed", "--fsdp")),
        ("stack=deepspeed-2021,fsdp=true", ("--stack", "deepspeed-2021", "--fsdp")),
        ("stack=jax,zero=3,offload=optimizer", ("--stack", "jax", "--zero", "3", "--offload", "optimizer")),
    ],
)
def test_plan_explain_refuses_the_stack_pairs_train_refuses(run, layout, train_args):
    base = ("llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--tokens", "1B")
    by_train = one_line_error(*run("train", *base, *train_args))
    by_explain = one_line_error(*run("plan", "train", *base, "--explain", layout))
    why = by_train.split(": ", 3)[-1].split(" (see ")[0]  # the message after "Invalid value for --flag: "
    assert why in by_explain


def test_catalog_validator_message_without_pydantic_prefix(run, tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(_acme("{ power_w = 600, peak_fraction = 0.7 }"))
    line = one_line_error(*run("--catalog", str(f), "gpus", "show", "acme-x1"))
    assert "Value error" not in line and "accelerator 'acme-x1': low_power_rating.power_w = 600 W" in line
