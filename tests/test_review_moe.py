"""A review of the MoE step-time flags, --stack megatron-2021 and the catalog's low_power_rating (issue 13): each
finding refused with one line and exit 2, or priced and shown consistently."""

from __future__ import annotations


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
