"""local watch --log-regex: training progress read from the job's own output (tee'd through unchanged), the
live MFU with --model, and the one-line errors for bad flags. Real child processes on the CPU; no GPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import gpuplan
from gpuplan.errors import InputError
from gpuplan.local.progress import LineSplitter, MfuReference, Progress, compile_log_regex, read_number

PY = sys.executable

JOB = (
    "import sys, time\n"
    "for i in range(8):\n"
    "    time.sleep(0.06)\n"
    "    print(f'step {i} | loss 2.1 | {250 + i} ms | tok/s 1,048.5k', flush=False)\n"
    "    print('a warning', file=sys.stderr)\n"
    "print('done', end='')\n"  # a last line with no newline still reaches the terminal
)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_read_number():
    assert read_number("1,234.5") == 1234.5 and read_number("12.3k") == 12300 and read_number("2e-3") == 0.002
    assert read_number(" 7 ") == 7 and read_number("1.5M") == 1.5e6
    for bad in ("abc", "-3", "nan", "1.2.3", ""):
        assert read_number(bad) is None, bad


def test_compile_log_regex_refuses_bad_ones():
    for regex, words in (
        ("(", "not a regular expression"),
        ("step (\\d+)", "name what a group captures"),
        ("(?P<tok_s>\\d+)", "unknown group name 'tok_s'"),
        ("(?P<step_s>\\d+) (?P<step_ms>\\d+)", "once"),
        ("   ", "empty"),
    ):
        with pytest.raises(InputError, match=re.escape(words)):
            compile_log_regex(regex)
    with pytest.raises(InputError, match="--tokens-per-step"):
        compile_log_regex("(?P<tokens_per_s>\\d+)", tokens_per_step=1024)


def test_progress_step_times_tokens_and_mfu():
    ref = MfuReference("m", "h100-sxm-80gb", 8, 4096, "bf16-mixed", flops_per_token=6e9, peak_flops_per_s=4e15)
    p = Progress(compile_log_regex(r"step (?P<step>\d+).*?(?P<step_ms>[\d.]+) ms"), tokens_per_step=1e6, reference=ref)
    assert p.take() is None  # nothing matched yet: no train record (absent, never 0)
    p.feed("step 10 | 500 ms", 1.0)
    p.feed("unrelated line", 1.2)
    p.feed("step 11 | 300 ms", 1.5)
    t = p.take()
    assert t == {"matched_lines": 2, "step": 11, "step_s": 0.4, "tokens_per_s": 2.5e6, "mfu": 0.4688}  # 1.5e16 / 3.2e16
    assert p.take() is None and p.matches == 2


def test_progress_step_number_only_times_the_lines():
    p = Progress(compile_log_regex(r"iter (?P<step>\d+)"), tokens_per_step=4096)
    p.feed("iter 1", 10.0)
    p.feed("iter 3", 11.0)  # two steps in one second
    t = p.take()
    assert t is not None and t["step"] == 3 and t["step_s"] == 0.5 and t["tokens_per_s"] == 8192


def test_progress_per_gpu_throughput():
    ref = MfuReference("m", "g", 4, 2048, "bf16-mixed", flops_per_token=1e9, peak_flops_per_s=1e14)
    p = Progress(compile_log_regex(r"tps: (?P<tokens_per_s_per_gpu>[\d.]+)"), reference=ref)
    p.feed("tps: 5000", 1.0)
    t = p.take()
    assert t is not None and t["tokens_per_s"] == 20000 and t["mfu"] == round(20000 * 1e9 / 4e14, 4)


def test_line_splitter_handles_carriage_returns_partial_lines_and_long_lines():
    s = LineSplitter(limit=10)
    assert s.feed(b"a 1\rb 2\nc") == ["a 1", "b 2"]
    assert s.feed(b" 3\n") == ["c 3"]
    assert s.feed(b"x" * 25) == ["x" * 25]  # no end of line past the limit: cut, not buffered forever
    assert s.feed(b"tail") == [] and s.flush() == ["tail"]


def test_watch_tees_the_output_and_records_progress(tmp_path):
    """Through the CLI as a user runs it: the job's stdout and stderr still reach the terminal, unchanged."""
    out = tmp_path / "run.jsonl"
    p = subprocess.run(
        [PY, "-m", "gpuplan", "local", "watch", "--interval", "100ms", "--out", str(out)]
        + ["--log-regex", r"step (?P<step>\d+) .*?(?P<step_ms>[\d.]+) ms \| tok/s (?P<tokens_per_s>[\d.,]+k)"]
        + ["--", PY, "-c", JOB],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("| loss 2.1 |") == 8 and p.stdout.endswith("done")
    assert p.stderr.count("a warning") == 8
    recs = _lines(out)
    assert recs[0]["train_progress"]["log_regex"].startswith("step")
    trains = [r["train"] for r in recs if r.get("record") == "sample" and "train" in r]
    assert trains and trains[-1]["step"] >= 5 and all(t["tokens_per_s"] == 1048500.0 for t in trains)
    assert all(0.25 <= t["step_s"] <= 0.26 for t in trains)
    assert recs[-1]["train_lines"] == 8


def test_watch_without_log_regex_leaves_the_output_alone(tmp_path):
    out = tmp_path / "run.jsonl"
    p = subprocess.run(
        [PY, "-m", "gpuplan", "local", "watch", "--interval", "50ms", "--out", str(out), "--", PY, "-c", JOB],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and p.stdout.count("loss") == 8
    assert "train_progress" not in _lines(out)[0]


def test_live_mfu_with_model(tmp_path):
    out = tmp_path / "run.jsonl"
    job = "import time\nfor i in range(5):\n    time.sleep(0.05); print('tok/s 65000')\n"
    r = gpuplan.local_watch(
        [PY, "-c", job],
        interval="100ms",
        out=out,
        log_regex=r"tok/s (?P<tokens_per_s>\d+)",
        model="llama-3.1-8b",
        gpu="h100-sxm-80gb",
        gpus=8,
    )
    assert r.exit_code == 0
    recs = _lines(out)
    ref = recs[0]["train_progress"]["mfu_reference"]
    assert ref["gpu"] == "h100-sxm-80gb" and ref["gpus"] == 8 and ref["flops_per_token"] > 6 * 8e9
    mfus = [s["train"]["mfu"] for s in recs if "train" in s]
    expected = 65000 * ref["flops_per_token"] / (8 * ref["peak_flops_per_s_per_gpu"])
    assert mfus and all(abs(m - expected) < 1e-3 for m in mfus) and 0.2 < expected < 0.6
    # the same FLOPs per token gpuplan train uses (no second formula)
    plan = gpuplan.train("llama-3.1-8b", gpu="h100-sxm-80gb", gpus=8, tokens="1B").plan
    assert ref["flops_per_token"] == plan.compute.flops_per_token


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--log-regex", "("], "--log-regex"),
        (["--log-regex", "step (\\d+)"], "--log-regex"),
        (["--log-regex", "(?P<step_s>[\\d.]+)", "--tokens-per-step", "-5"], "--tokens-per-step"),
        (["--log-regex", "(?P<step_s>[\\d.]+)", "--tokens-per-step", "lots"], "--tokens-per-step"),
        (["--tokens-per-step", "1024"], "--tokens-per-step"),
        (["--model", "llama-3.1-8b"], "--model"),
        (["--log-regex", "(?P<step_s>[\\d.]+)", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb"], "--model"),
    ],
)
def test_bad_progress_flags_are_one_line_errors(run, tmp_path, args, flag):
    out = tmp_path / "x.jsonl"
    code, _, err = run("local", "watch", "--out", str(out), *args, "--", PY, "-c", "pass")
    assert code == 2 and flag in err and err.count("\n") == 1, err
    assert not out.exists()  # refused before the job ran


def test_log_regex_needs_the_command_mode(run, tmp_path):
    code, _, err = run("local", "watch", "--pid", "1", "--log-regex", "(?P<step>\\d+)", "--out", str(tmp_path / "x"))
    assert code == 2 and "--log-regex" in err and "-- CMD" in err and err.count("\n") == 1
