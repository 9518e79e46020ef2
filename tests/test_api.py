"""The Python API is the CLI's library: each command's ``--json`` equals ``report.to_dict()`` of the API call
with the same options (keyword = flag with underscores), the exit code equals ``report.exit_code``, and bad
input raises the same one-line error the CLI prints."""

from __future__ import annotations

import json

import click
import pytest

import gpuplan
from gpuplan.errors import GpuplanError, InputError, JobError, QuantityError

OFFER = "aws-p5.48xlarge-us-east-1-ondemand"

# (CLI arguments, API function, positional args, keywords): the same question asked both ways
CASES = [
    (["gpus", "list", "--vendor", "amd", "--sort", "memory"], "gpus", (), {"vendor": "amd", "sort": "memory"}),
    (["gpus", "list", "--min-memory", "80GB", "--dtype", "fp8"], "gpus", (), {"min_memory": "80GB", "dtype": "fp8"}),
    (["gpus", "show", "h100"], "gpu", ("h100",), {}),
    (["gpus", "compare", "a100-sxm-80gb", "h100"], "compare_gpus", (["a100-sxm-80gb", "h100"],), {}),
    (
        ["offers", "list", "--gpu", "h100", "--pricing", "on-demand", "--sort", "provider"],
        "offers",
        (),
        {"gpu": "h100", "pricing": "on-demand", "sort": "provider"},
    ),
    (["model", "list", "--family", "qwen"], "models", (), {"family": "qwen"}),
    (["model", "show", "llama-3.1-70b", "--seq-len", "8192"], "model", ("llama-3.1-70b",), {"seq_len": 8192}),
    (["model", "show", "7B"], "model", ("7B",), {}),
    (
        [
            "train",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--gpus",
            "8",
            "--zero",
            "3",
            "--recompute",
            "full",
            "--tokens",
            "1T",
            "--offer",
            OFFER,
        ],
        "train",
        ("llama-3.1-8b",),
        {"gpu": "h100", "gpus": 8, "zero": 3, "recompute": "full", "tokens": "1T", "offer": OFFER},
    ),
    (
        ["train", "llama-3.1-70b", "--gpu", "h100", "--gpus", "8"],
        "train",
        ("llama-3.1-70b",),
        {"gpu": "h100", "gpus": 8},
    ),  # does not fit: exit 3 and fit advice
    (
        [
            "train",
            "llama-3.1-8b",
            "--gpu",
            "a100-sxm-80gb",
            "--method",
            "qlora",
            "--lora-rank",
            "64",
            "--assume",
            "cuda_context_bytes=1GiB",
            "--tokens",
            "2B",
            "--usd-per-gpu-hour",
            "$1.8/h",
        ],
        "train",
        ("llama-3.1-8b",),
        {
            "gpu": "a100-sxm-80gb",
            "method": "qlora",
            "lora_rank": 64,
            "assume": {"cuda_context_bytes": "1GiB"},
            "tokens": 2e9,
            "usd_per_gpu_hour": 1.8,
        },
    ),
    (
        [
            "train",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--tp",
            "2",
            "--tokens",
            "100B",
            "--deadline",
            "7d",
            "--storage",
            "local-nvme",
            "--async-checkpoint",
            "--mtbf-per-gpu-hours",
            "50000",
        ],
        "train",
        ("llama-3.1-8b",),
        {
            "gpu": "h100",
            "tp": 2,
            "tokens": "100B",
            "deadline": "7d",
            "storage": "local-nvme",
            "async_checkpoint": True,
            "mtbf_per_gpu_hours": 50000,
        },
    ),
    (
        ["train", "llama-3.1-8b", "--gpu", "h100", "--tokens", "1T", "--rank"],
        "train",
        ("llama-3.1-8b",),
        {"gpu": "h100", "tokens": "1T", "rank": True},
    ),
    (["serve", "llama-2-7b", "--gpu", "h100"], "serve", ("llama-2-7b",), {"gpu": "h100"}),
    (
        [
            "serve",
            "llama-3.1-70b",
            "--gpu",
            "h100",
            "--tp",
            "4",
            "--weights",
            "fp8",
            "--kv-cache",
            "fp8",
            "--qps",
            "20",
            "--max-tpot",
            "50ms",
            "--offer",
            OFFER,
            "--assume",
            "compute_efficiency=0.5",
        ],
        "serve",
        ("llama-3.1-70b",),
        {
            "gpu": "h100",
            "tp": 4,
            "weights": "fp8",
            "kv_cache": "fp8",
            "qps": 20,
            "max_tpot": "50ms",
            "offer": OFFER,
            "assume": {"compute_efficiency": 0.5},
        },
    ),
    (
        ["serve", "llama-3.1-70b", "--gpu", "l4", "--qpm", "60", "--usd-per-gpu-hour", "0.8"],
        "serve",
        ("llama-3.1-70b",),
        {"gpu": "l4", "qpm": 60, "usd_per_gpu_hour": 0.8},
    ),  # does not fit
    (
        ["serve", "llama-3.1-8b", "--gpu", "h100,a100-sxm-80gb", "--rank"],
        "serve",
        ("llama-3.1-8b",),
        {"gpu": "h100,a100-sxm-80gb", "rank": True},
    ),
    (
        ["tco", "--gpu", "h100", "--gpus", "16", "--utilization", "0.5", "--years", "3"],
        "tco",
        (),
        {"gpu": "h100", "gpus": 16, "utilization": 0.5, "years": 3},
    ),
    (["local", "detect"], "local_detect", (), {}),
]


@pytest.mark.parametrize("args,fn,pos,kw", CASES, ids=[" ".join(c[0][:3]) for c in CASES])
def test_cli_json_is_the_api_report(run, args, fn, pos, kw):
    code, out, err = run(*args, "--json")
    report = getattr(gpuplan, fn)(*pos, **kw)
    assert code == report.exit_code, err
    cli_record = json.loads(out)
    api_record = report.to_dict()
    if fn == "local_detect":  # readings taken twice differ (free disk, load): compare the shape and the GPUs
        assert cli_record.keys() == api_record.keys() and cli_record["gpus"] == api_record["gpus"]
        return
    assert cli_record == json.loads(json.dumps(api_record))


def test_does_not_fit_is_a_result_with_advice():
    r = gpuplan.train("llama-3.1-70b", gpu="h100", gpus=8)
    assert not r.fits and r.exit_code == 3
    assert r.memory.total_bytes > r.memory.capacity_bytes
    assert r.fit_advice is not None and r.to_dict()["fit_advice"]["changes"]


def test_report_attributes_are_the_itemized_parts():
    r = gpuplan.train("llama-3.1-8b", gpu="h100", gpus=8, zero=3, tokens="1T", offer=OFFER)
    d = r.to_dict()
    assert r.fits and r.exit_code == 0
    assert r.memory.total_bytes == d["memory"]["total_bytes"]
    assert sum(r.memory.parts.values()) == pytest.approx(d["memory"]["total_bytes"], rel=1e-9)
    assert r.plan.time.seconds == d["time"]["seconds"] and r.plan.usd == d["cost"]["usd"]
    assert r.layout.dp == d["layout"]["dp"] == 8
    s = gpuplan.serve("llama-2-7b", gpu="h100", qps=10, usd_per_gpu_hour=2)
    assert s.serving.tpot_s == s.to_dict()["latency"]["tpot_s"] and s.fleet.replicas >= 1


def test_numbers_and_text_are_the_same_input():
    a = gpuplan.train("llama-3.1-8b", gpu="h100", tokens="1T", deadline="30d", usd_per_gpu_hour="$2/h")
    b = gpuplan.train("llama-3.1-8b", gpu="h100", tokens=1e12, deadline=30 * 86400, usd_per_gpu_hour=2)
    assert a.to_dict() == b.to_dict()


def test_a_shared_catalogs_object_loads_once():
    cat = gpuplan.Catalogs()
    gpuplan.gpus(catalog=cat)
    registry = cat.accelerators()
    gpuplan.train("llama-3.1-8b", gpu="h100", catalog=cat)
    assert cat.accelerators() is registry


@pytest.mark.parametrize(
    "call,error,fragment",
    [
        (lambda: gpuplan.train("llama-3.1-8b", gpu="h100", tp=0), QuantityError, "--tp must be a whole number"),
        (lambda: gpuplan.train("llama-3.1-8b", gpu="h100", micro_batch=float("nan")), QuantityError, "not a finite"),
        (lambda: gpuplan.train("llama-3.1-8b", gpu="h100", mfu=0.5), InputError, "need --tokens"),
        (lambda: gpuplan.train("llama-3.1-8b", gpu="h100", precision="fp7"), JobError, "--precision must be one of"),
        (lambda: gpuplan.train("llama-3.1-8b", gpu="h100", storage="tape"), JobError, "--storage must be one of"),
        (lambda: gpuplan.train("llama-3.1-8b", gpu="h100", assume={"nosuch": 1}), InputError, "NAME one of"),
        (lambda: gpuplan.train("llama-3.1-8b", gpu="h100", tokens=""), QuantityError, "--tokens is empty"),
        (
            lambda: gpuplan.train("llama-3.1-8b", gpu="h100", tokens="1T", offer=OFFER, usd_per_gpu_hour=2),
            InputError,
            "not both",
        ),
        (lambda: gpuplan.serve("llama-3.1-8b", gpu="h100", qps=1, qpm=60), InputError, "--qps or --qpm"),
        (lambda: gpuplan.serve("llama-3.1-8b", gpu="h100", weights="int3"), JobError, "--weights must be one of"),
        (lambda: gpuplan.tco(gpu="h100", utilization=2), QuantityError, "--utilization must be"),
        (lambda: gpuplan.offers(sort="price"), JobError, "--sort must be one of"),
        (lambda: gpuplan.gpu("h1000"), GpuplanError, "did you mean"),
    ],
)
def test_bad_input_raises_one_line(call, error, fragment):
    with pytest.raises(error) as e:
        call()
    assert fragment in str(e.value) and "\n" not in str(e.value)


def _choice_params():
    from gpuplan.cli.main import cli

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])
        else:
            for p in cmd.params:
                if isinstance(p.type, click.Choice):
                    yield " ".join(path), p

    return list(walk(cli, []))


def test_every_choice_list_comes_from_one_enum():
    """No choice list is written twice: every click.Choice is exactly the strings of a spec.choices enum."""
    from enum import StrEnum

    from gpuplan.spec import choices

    enums = {
        choices.values(c)
        for c in vars(choices).values()
        if isinstance(c, type) and issubclass(c, StrEnum) and c is not StrEnum
    }
    params = _choice_params()
    assert len(params) >= 14
    for path, p in params:
        assert tuple(p.type.choices) in enums, f"{path} {p.name}: {p.type.choices}"


def test_cli_defaults_are_the_api_defaults():
    from gpuplan import api
    from gpuplan.cli.main import cli

    for command, fn in (("train", api.train), ("serve", api.serve), ("tco", api.tco)):
        for p in cli.commands[command].params:
            if (
                isinstance(p, click.Option)
                and p.name in (fn.__kwdefaults__ or {})
                and p.default is not None
                and type(p.default).__name__ != "Sentinel"
            ):  # click's "no default"
                want = fn.__kwdefaults__[p.name]
                assert p.default == want, f"{command} --{p.name}: CLI {p.default!r} vs API {want!r}"


def test_api_keywords_are_the_flags():
    """Every flag of train/serve/tco is a keyword of the API function of the same name (dashes -> underscores),
    except what only a terminal has (--json, --plot)."""
    from gpuplan import api
    from gpuplan.cli.main import cli

    for command, fn in (("train", api.train), ("serve", api.serve), ("tco", api.tco)):
        import inspect

        keywords = {n for n, q in inspect.signature(fn).parameters.items() if q.kind is q.KEYWORD_ONLY}
        for p in cli.commands[command].params:
            if isinstance(p, click.Option) and p.expose_value and p.name not in ("as_json", "plot"):
                assert p.name in keywords, f"{command}: --{p.name.replace('_', '-')} is not an API keyword"


def test_shell_completion_offers_the_choices():
    """The README's completion line works: Tab after --precision lists the Precision enum."""
    import os
    import subprocess
    import sys

    from gpuplan.spec.choices import Precision, values

    env = {
        **os.environ,
        "COMP_WORDS": "gpuplan train x --precision ",
        "COMP_CWORD": "4",
        "_GPUPLAN_COMPLETE": "bash_complete",
    }
    out = subprocess.run([sys.executable, "-m", "gpuplan"], env=env, capture_output=True, text=True, timeout=60)
    assert [line.split(",", 1)[1] for line in out.stdout.split()] == list(values(Precision))


def test_local_bench_cli_is_the_api(run, tmp_path):
    """local bench measures, so two runs differ in their numbers: the CLI's record and the API's report
    have the same shape and the same benchmarks."""
    args = ["local", "bench", "disk", "--path", str(tmp_path), "--file-size", "1MiB", "--writers", "1"]
    code, out, err = run(*args, "--json")
    assert code == 0, err
    cli_record = json.loads(out)
    report = gpuplan.local_bench("disk", path=tmp_path, file_size="1MiB", writers=1)
    api_record = report.to_dict()
    assert report.exit_code == 0 and cli_record.keys() == api_record.keys()
    assert [r["name"] for r in cli_record["results"]] == [r["name"] for r in api_record["results"]]


def test_reports_are_frozen_records():
    r = gpuplan.train("llama-3.1-8b", gpu="h100", gpus=8)
    with pytest.raises(AttributeError):
        r.memory = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        type(r)(*range(50))  # more values than fields
    same = gpuplan.train("llama-3.1-8b", gpu="h100", gpus=8)
    assert r == same and r != gpuplan.train("llama-3.1-8b", gpu="h100", gpus=16)
    assert repr(r).startswith("TrainReport(model=")


def test_like_is_checked_even_for_a_catalog_model():
    from gpuplan.errors import ModelConfigError

    with pytest.raises(ModelConfigError, match="--like 'nosuch' is not a model_type"):
        gpuplan.model("llama-3.1-8b", like="nosuch")
    assert gpuplan.model("llama-3.1-8b", like="llama").model.id == "llama-3.1-8b"
