"""A review of the MoE step-time flags, --stack megatron-2021 and the catalog's low_power_rating (issue 13): each
finding refused with one line and exit 2, or priced and shown consistently."""

from __future__ import annotations

import gpuplan


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
