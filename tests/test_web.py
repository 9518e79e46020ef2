"""``gpuplan ui``: the JSON API answers the CLI's --json, bad input is a 4xx with one line, the page is served
from the package under a strict CSP and asks for nothing outside it. (Browser tests are not here yet.)"""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from gpuplan.web.app import CSP, STATIC, create_app


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
    for path in ("train", "serve", "plan/train", "plan/serve", "tco", "gpus", "models", "offers", "validate"):
        assert f"/api/{path}" in schema["paths"]
    names = {p["name"] for p in schema["paths"]["/api/train"]["get"]["parameters"]}
    assert {"model", "gpu", "tp", "zero", "micro_batch", "tokens", "offer", "assume"} <= names
    assert not names & {"catalog", "calibration", "offline", "request"}


def test_only_loopback_names_are_answered(client):
    assert client.get("/api/gpus", headers={"host": "attacker.example"}).status_code == 400


def test_page_and_static_files_carry_the_csp_and_stay_local(client):
    assert "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    files = ["/", *(f"/static/{p.name}" for p in STATIC.iterdir())]
    assert len(files) >= 4
    for url in files:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["content-security-policy"] == CSP
        text = response.text
        assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", text), url
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text, url
    page = client.get("/").text
    assert "<script>" not in page and "onclick" not in page and "style=" not in page
    assert '<script src="/static/app.js"' in page


def test_ui_command_is_listed_and_imports_no_fastapi_at_startup():
    import subprocess
    import sys

    code = "import sys; from gpuplan.cli.main import main; main(['--help']); print('fastapi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert " ui " in out and out.strip().endswith("False")
