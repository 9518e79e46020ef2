"""``gpuplan ui``: the JSON API answers the CLI's --json, bad input is a 4xx with one line, an uploaded config.json
is held in memory and planned like the same file given to the CLI, the pages are served from the package under a
strict CSP and ask for nothing outside it. The pages in a real browser: tests/test_web_browser.py."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from gpuplan.web.app import CSP, MAX_UPLOAD_BYTES, MAX_UPLOADS, PAGES, STATIC, create_app
from test_watch import gpu


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(), base_url="http://127.0.0.1")


# (endpoint, query, the same inputs as CLI arguments)
SAME = [
    (
        "train",
        {"model": "llama-3.1-8b", "gpu": "h100", "gpus": "8", "zero": "3", "tokens": "1T", "recompute": "full"},
        [
            "train",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--gpus",
            "8",
            "--zero",
            "3",
            "--tokens",
            "1T",
            "--recompute",
            "full",
        ],
    ),
    (
        "train",
        {"model": "llama-3.1-70b", "gpu": "a100-sxm-80gb", "assume": "matmul_efficiency=0.7,hbm_efficiency=0.8"},
        [
            "train",
            "llama-3.1-70b",
            "--gpu",
            "a100-sxm-80gb",
            "--assume",
            "matmul_efficiency=0.7",
            "--assume",
            "hbm_efficiency=0.8",
        ],
    ),
    (
        "train",
        {"model": "7B", "gpu": "h100", "flash_attention": "false"},
        ["train", "7B", "--gpu", "h100", "--no-flash-attention"],
    ),
    (
        "serve",
        {"model": "llama-3.1-8b", "gpu": "h100", "qps": "2"},
        ["serve", "llama-3.1-8b", "--gpu", "h100", "--qps", "2"],
    ),
    (
        "plan/train",
        {"model": "llama-3.1-8b", "tokens": "100B", "gpu": "h100,a100-sxm-80gb", "top": "3"},
        ["plan", "train", "llama-3.1-8b", "--tokens", "100B", "--gpu", "h100,a100-sxm-80gb", "--top", "3"],
    ),
    (
        "plan/serve",
        {"model": "llama-3.1-8b", "qps": "5", "gpu": "h100"},
        ["plan", "serve", "llama-3.1-8b", "--qps", "5", "--gpu", "h100"],
    ),
    (
        "tco",
        {"gpu": "h100", "gpus": "16", "utilization": "0.5"},
        ["tco", "--gpu", "h100", "--gpus", "16", "--utilization", "0.5"],
    ),
    ("gpus", {"min_memory": "80GB", "dtype": "fp8"}, ["gpus", "list", "--min-memory", "80GB", "--dtype", "fp8"]),
    ("models", {"family": "llama"}, ["model", "list", "--family", "llama"]),
    ("offers", {"gpu": "h100", "pricing": "spot"}, ["offers", "list", "--gpu", "h100", "--pricing", "spot"]),
    ("validate", {"category": "inference"}, ["validate", "--category", "inference"]),
    (
        "tco",
        {"gpu": "b200", "gpus": "8", "years": "3", "life_years": "4"},
        ["tco", "--gpu", "b200", "--years", "3", "--life-years", "4"],
    ),
    ("gpus", {"vendor": "amd", "sort": "memory"}, ["gpus", "list", "--vendor", "amd", "--sort", "memory"]),
    (  # the Plan page's "what about my layout?": the same search, with the layout's rank and its losses to #1
        "plan/train",
        {
            "model": "llama-3.1-8b",
            "tokens": "100B",
            "gpu": "h100",
            "top": "3",
            "explain": "tp=2,pp=1,dp=4,micro_batch=1,recompute=full,zero=1",
        },
        [
            "plan",
            "train",
            "llama-3.1-8b",
            "--tokens",
            "100B",
            "--gpu",
            "h100",
            "--top",
            "3",
            "--explain",
            "tp=2,pp=1,dp=4,micro_batch=1,recompute=full,zero=1",
        ],
    ),
    (  # the Serve page's instance checks: serve --offer
        "serve",
        {"model": "llama-3.1-8b", "gpu": "h100", "qps": "5", "offer": "aws-p5.48xlarge-us-east-1-ondemand"},
        ["serve", "llama-3.1-8b", "--gpu", "h100", "--qps", "5", "--offer", "aws-p5.48xlarge-us-east-1-ondemand"],
    ),
]


@pytest.mark.parametrize(("endpoint", "query", "argv"), SAME, ids=[f"{e}-{i}" for i, (e, _, _) in enumerate(SAME)])
def test_body_is_the_cli_json(client, run, endpoint, query, argv):
    code, out, err = run(*argv, "--json")
    assert code in (0, 3), err
    response = client.get(f"/api/{endpoint}?{urlencode(query)}")
    assert response.status_code == 200, response.text
    assert response.json() == json.loads(out)
    assert response.headers["x-gpuplan-exit-code"] == str(code)


@pytest.mark.parametrize(
    ("url", "argv"),
    [
        ("/api/train?model=llama-3.1-8b&gpu=nope", ["train", "llama-3.1-8b", "--gpu", "nope"]),
        ("/api/train?model=llama-3.1-8b&gpu=h100&tp=0", ["train", "llama-3.1-8b", "--gpu", "h100", "--tp", "0"]),
        (
            "/api/train?model=llama-3.1-8b&gpu=h100&mfu=nan&tokens=1T",
            ["train", "llama-3.1-8b", "--gpu", "h100", "--mfu", "nan", "--tokens", "1T"],
        ),
        ("/api/tco?gpu=h100&utilization=inf", ["tco", "--gpu", "h100", "--utilization", "inf"]),
        (
            "/api/train?model=llama-3.1-8b&gpu=h100&assume=mfu",
            ["train", "llama-3.1-8b", "--gpu", "h100", "--assume", "mfu"],
        ),
        (
            "/api/train?model=llama-3.1-8b&gpu=h100&assume=mfu=0.4",
            ["train", "llama-3.1-8b", "--gpu", "h100", "--assume", "mfu=0.4"],
        ),
        ("/api/plan/serve?model=llama-3.1-8b&qps=-1", ["plan", "serve", "llama-3.1-8b", "--qps", "-1"]),
        (
            "/api/plan/train?model=llama-3.1-8b&tokens=100B&gpu=h100&explain=tp%3Dx",
            ["plan", "train", "llama-3.1-8b", "--tokens", "100B", "--gpu", "h100", "--explain", "tp=x"],
        ),
    ],
)
def test_bad_input_is_the_cli_error_line(client, run, url, argv):
    code, _, err = run(*argv, "--json")
    assert code == 2
    response = client.get(url)
    assert response.status_code == 400
    assert response.json() == {"error": err.strip().removeprefix("gpuplan: error: ")}


@pytest.mark.parametrize(
    "url",
    [
        "/api/train?model=/etc/passwd&gpu=h100",
        "/api/train?model=./config.json&gpu=h100",
        "/api/train?model=src&gpu=h100",  # a folder that exists beside the server is still not a model here
        "/api/serve?model=someone/some-model&gpu=h100",  # Hub ids outside the catalog: not in v1
        "/api/train?gpu=h100",  # model missing: FastAPI's validation, in the same shape
        "/api/train?model=llama-3.1-8b&gpu=h100&tp=x",
        "/api/train?model=llama-3.1-8b&gpu=h100&tp=1&tp=2",
        "/api/train?model=llama-3.1-8b&gpu=h100&flash_attention=maybe",
        "/api/train?model=llama-3.1-8b&gpu=h100&calibration=/etc/passwd",  # file keywords are not taken
        "/api/train?model=llama-3.1-8b&gpu=h100&catalog=/etc/passwd",
        "/api/plan/train?model=llama-3.1-8b&tokens=1T&top=x",
        "/api/nope",
    ],
)
def test_bad_input_is_a_4xx_with_one_line(client, url):
    response = client.get(url)
    assert 400 <= response.status_code < 500, response.text
    body = response.json()
    assert list(body) == ["error"] and body["error"] and "\n" not in body["error"]


def test_openapi_lists_every_endpoint_with_the_api_keywords(client):
    schema = client.get("/openapi.json").json()
    for path in (
        "train",
        "serve",
        "plan/train",
        "plan/serve",
        "tco",
        "gpus",
        "models",
        "offers",
        "validate",
        "local/detect",
        "local/profiles",
        "local/runs",
    ):
        assert f"/api/{path}" in schema["paths"]
    names = {p["name"] for p in schema["paths"]["/api/train"]["get"]["parameters"]}
    assert {"model", "gpu", "tp", "zero", "micro_batch", "tokens", "offer", "assume"} <= names
    assert not names & {"catalog", "calibration", "offline", "request"}


def test_only_loopback_names_are_answered(client):
    assert client.get("/api/gpus", headers={"host": "attacker.example"}).status_code == 400


def test_page_and_static_files_carry_the_csp_and_stay_local(client):
    assert "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    files = [*PAGES, *(f"/static/{p.name}" for p in STATIC.iterdir())]
    assert len(files) >= 20
    for url in files:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["content-security-policy"] == CSP
        text = response.text
        assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", text), url
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text, url
    for path, name in PAGES.items():
        page = client.get(path).text
        assert "<script>" not in page and " on" + "click" not in page and "style=" not in page, path
        script = name.replace(".html", ".js")
        assert f'<script type="module" src="/static/{script}"></script>' in page, path
        assert (STATIC / script).is_file() and '<link rel="icon" href="data:,">' in page
    for js in STATIC.glob("*.js"):  # what the CSP forbids, so it never reaches a browser to be refused
        text = js.read_text()
        for banned in (
            "eval(",
            "new Function",
            "innerHTML",
            'setAttribute("style',
            "insertAdjacentHTML",
            "document.write",
        ):
            assert banned not in text, (js.name, banned)


def test_local_detect_is_the_cli_json(client, run):
    code, out, err = run("local", "detect", "--json")
    assert code == 0, err
    body = client.get("/api/local/detect").json()
    cli = json.loads(out)
    for record in (body, cli):  # free space moves while the tests run
        for disk in record["host"]["disks"]:
            disk.pop("free_bytes")
    assert body == cli


# ------------------------------------------------------------------ saved bench profiles and watch traces


def _config_dir() -> Path:
    return Path(os.environ["GPUPLAN_CONFIG_DIR"])  # conftest gives each test its own


PROFILE = {
    "schema_version": 1,
    "kind": "calibration",
    "created": "2026-11-01T10:00:00+0000",
    "host": {"hostname": "node-7"},
    "gpu": {"name": "NVIDIA H100 80GB HBM3", "catalog_id": "h100-sxm-80gb"},
    "versions": {},
    "python": "3.12",
    "results": [
        {
            "name": "matmul bf16",
            "value": 712.0,
            "unit": "TFLOP/s",
            "fraction_of_datasheet": 0.72,
            "detail": {"device": "cuda", "dtype": "bf16"},
        },
        {"name": "memory copy", "value": 2900.0, "unit": "GB/s (read + write)", "fraction_of_datasheet": 0.866},
    ],
}


def _trace_lines(util_percent: float) -> str:
    """A short local.watch trace of one GPU at util_percent busy (the shape gpuplan local watch writes)."""
    header = {"record": "header", "kind": "local.watch", "schema_version": 1, "host": {"cpu_count_logical": 8}}
    records: list[dict] = [header]
    host = {"cpu_percent": 30, "iowait_percent": 25, "mem_used_bytes": 10 << 30, "mem_total_bytes": 64 << 30}
    for i in range(20):
        records.append(
            {
                "record": "sample",
                "t_s": float(i),
                "host": host,
                "proc": {"cpu_percent": 100, "max_thread_cpu_percent": 40, "rss_bytes": 1 << 30, "num_procs": 1},
                "gpus": [gpu(0, util_percent=util_percent, power_w=300.0)],
            }
        )
    records.append({"record": "summary", "t_s": 20.0, "exit_code": 0})
    return "".join(json.dumps(r) + "\n" for r in records)


def test_saved_profiles_are_listed_from_the_user_folder_and_nowhere_else(client, tmp_path):
    empty = client.get("/api/local/profiles")
    assert empty.status_code == 200
    folder = _config_dir() / "profiles"
    assert empty.json()["profiles"] == [] and empty.json()["folder"] == str(folder)
    assert empty.json()["save_with"] == f"gpuplan local bench --save {folder}/NAME.json"
    folder.mkdir()
    (folder / "h100.json").write_text(json.dumps(PROFILE))
    (folder / "broken.json").write_text('{"kind": "something else"}')
    (folder / "notes.txt").write_text("not a profile name")
    (tmp_path / "elsewhere.json").write_text(json.dumps(PROFILE))  # outside the folder: never read
    body = client.get("/api/local/profiles").json()
    assert body["kind"] == "local.profiles" and [p["file"] for p in body["profiles"]] == ["broken.json", "h100.json"]
    broken, h100 = body["profiles"]
    assert "not a gpuplan calibration profile" in broken["error"] and "results" not in broken
    assert h100["gpu_catalog_id"] == "h100-sxm-80gb" and h100["hostname"] == "node-7"
    assert h100["created"] == PROFILE["created"] and h100["modified_utc"].endswith("Z")
    assert h100["results"] == [
        {k: r.get(k) for k in ("name", "value", "unit", "fraction_of_datasheet")} for r in PROFILE["results"]
    ]
    for query in ("path=/etc/passwd", f"folder={tmp_path}", "file=elsewhere.json"):  # no parameter is taken
        response = client.get("/api/local/profiles?" + query)
        assert response.status_code == 400 and "No such option" in response.json()["error"], query


def test_saved_watch_runs_carry_the_cli_diagnosis(client, run):
    folder = _config_dir() / "watch"
    assert client.get("/api/local/runs").json()["runs"] == []
    folder.mkdir()
    (folder / "starved.jsonl").write_text(_trace_lines(20))
    (folder / "junk.jsonl").write_text("hello\n{}\n")
    body = client.get("/api/local/runs").json()
    assert body["kind"] == "local.runs" and body["folder"] == str(folder)
    assert [r["file"] for r in body["runs"]] == ["junk.jsonl", "starved.jsonl"]
    junk, starved = body["runs"]
    assert "is this a gpuplan local watch trace?" in junk["error"] and "\n" not in junk["error"]
    code, out, err = run("local", "diagnose", str(folder / "starved.jsonl"), "--json")
    assert code == 0, err
    assert starved["diagnosis"] == json.loads(out)
    assert starved["diagnosis"]["verdicts"][0]["id"] == "input-bound"
    assert client.get("/api/local/runs?run=/tmp/x.jsonl").status_code == 400


# -------------------------------------------------------------------------------------- POST /api/config

TINY = {
    "model_type": "llama",
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "intermediate_size": 5632,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}


def _upload(client, data, **headers):
    return client.post("/api/config", content=data, headers={"content-type": "application/json", **headers})


def test_an_uploaded_config_plans_like_the_same_file_given_to_the_cli(client, run, tmp_path):
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    response = _upload(client, json.dumps(TINY))
    assert response.status_code == 201, response.text
    record = response.json()
    model_id = record["model"]["id"]
    assert re.fullmatch(r"upload:[0-9a-f]{16}", model_id)
    assert _upload(client, json.dumps(TINY)).json()["model"]["id"] == model_id  # the id is the file's hash

    def same(body, cli_out):
        cli = json.loads(cli_out)
        assert body["model"].pop("id") == model_id and cli["model"].pop("id") == "tiny-llama"
        for key in ("name", "origin"):
            body["model"].pop(key, None)
            cli["model"].pop(key, None)
        assert body == cli

    code, out, err = run("model", "show", str(folder / "config.json"), "--json")
    assert code == 0, err
    same(record, out)
    for endpoint, query, argv in [
        (
            "train",
            {"gpu": "h100", "gpus": "8", "tokens": "1T"},
            ["train", "--gpu", "h100", "--gpus", "8", "--tokens", "1T"],
        ),
        ("serve", {"gpu": "h100", "qps": "2"}, ["serve", "--gpu", "h100", "--qps", "2"]),
    ]:
        code, out, err = run(argv[0], str(folder / "config.json"), *argv[1:], "--json")
        assert code == 0, err
        response = client.get(f"/api/{endpoint}?{urlencode({'model': model_id, **query})}")
        assert response.status_code == 200, response.text
        same(response.json(), out)


@pytest.mark.parametrize(
    ("data", "headers", "status"),
    [
        (b"{", {}, 400),  # not JSON
        (b"[]", {}, 400),  # not an object
        (json.dumps({**TINY, "hidden_size": float("nan")}).encode(), {}, 400),  # NaN is not JSON
        (json.dumps({"model_type": "nope"}).encode(), {}, 400),
        (json.dumps(TINY).encode(), {"content-type": "text/plain"}, 415),  # a form or a no-cors post from a page
        (json.dumps(TINY).encode(), {"content-type": "multipart/form-data; boundary=x"}, 415),
        (json.dumps(TINY).encode(), {"origin": "http://attacker.example"}, 403),
        (b" " * MAX_UPLOAD_BYTES + b"{}", {}, 413),
    ],
)
def test_a_bad_upload_is_a_4xx_with_one_line(client, data, headers, status):
    response = _upload(client, data, **headers)
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"] and body["error"] and "\n" not in body["error"]


def test_an_upload_without_a_declared_length_is_still_capped(client):
    def chunks():
        for _ in range(MAX_UPLOAD_BYTES // 65536 + 2):
            yield b" " * 65536

    response = client.post("/api/config", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_uploads_are_ids_never_paths_and_the_oldest_are_dropped(client):
    response = client.get("/api/train?model=upload:0123456789abcdef&gpu=h100")
    assert response.status_code == 400 and "upload it again" in response.json()["error"]
    app = create_app()
    fresh = TestClient(app, base_url="http://127.0.0.1")
    ids = [
        _upload(fresh, json.dumps({**TINY, "vocab_size": 32000 + i})).json()["model"]["id"]
        for i in range(MAX_UPLOADS + 1)
    ]
    assert fresh.get(f"/api/train?model={ids[0]}&gpu=h100").status_code == 400
    assert fresh.get(f"/api/train?model={ids[-1]}&gpu=h100").status_code == 200
    schema = fresh.get("/openapi.json").json()
    assert "application/json" in schema["paths"]["/api/config"]["post"]["requestBody"]["content"]


def test_ui_command_is_listed_and_imports_no_fastapi_at_startup():
    import subprocess
    import sys

    code = "import sys; from gpuplan.cli.main import main; main(['--help']); print('fastapi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert " ui " in out and out.strip().endswith("False")
