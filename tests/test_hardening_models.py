"""Model arguments that fail fast and truthfully: malformed config.json files, bare parameter counts out of
range, and every way reading a Hub id can fail (unreachable, no such repo, gated, no config.json, offline).

The Hub is never contacted: failures are replayed through huggingface_hub's own code (a fake session hands
real HTTP responses to its ``hf_raise_for_status``, which builds the real exception classes), and the
"can't reach it" cases run for real against this machine's network and a local server that never answers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from gpuplan.catalog import hub as hub_module, load_models, resolve_model
from gpuplan.catalog.hf_config import load_config_json, spec_from_hf_config
from gpuplan.errors import ModelConfigError, QuantityError

REPO = Path(__file__).resolve().parent.parent

LLAMA = {
    "model_type": "llama",
    "vocab_size": 1000,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "max_position_embeddings": 4096,
}
MLA = {"kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8}


def one_error_line(code, out, err) -> str:
    """Exit 2, nothing on stdout, exactly one stderr line and it is the error (no traceback, no log chatter)."""
    assert code == 2, (code, out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(("error:", "gpuplan: error:")), err
    return lines[0]


def with_(**changes):
    return json.dumps({**LLAMA, **changes})


# ------------------------------------------------------------------------------ malformed config.json

MALFORMED = [
    # text of the file, a fragment of the one error line (the key it names, or what is wrong)
    pytest.param('{"model_type": "llama", "hidden_size": NaN}', "'hidden_size' is NaN", id="nan"),
    pytest.param(with_()[:-1] + ', "rope_theta": Infinity}', "'rope_theta' is Infinity", id="infinity"),
    pytest.param(
        with_().replace('"hidden_size": 64', '"hidden_size": -Infinity'),
        "'hidden_size' is -Infinity",
        id="minus-infinity",
    ),
    pytest.param(
        with_().replace('"hidden_size": 64', '"hidden_size": 1e400'), "'hidden_size' is a number too large", id="1e400"
    ),
    pytest.param(
        with_().replace('"vocab_size": 1000', '"vocab_size": ' + "9" * 5000), "thousands of digits", id="5000-digit-int"
    ),
    pytest.param("[" * 100_000 + "]" * 100_000, "nested too deeply", id="deep-list"),
    pytest.param('{"model_type": "llama", "x": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply", id="deep-field"),
    pytest.param("[1, 2]", "JSON object", id="top-level-list"),
    pytest.param('"llama"', "JSON object", id="top-level-string"),
    pytest.param("{not json", "not valid JSON", id="not-json"),
    pytest.param(with_(model_type=["llama"]), "'model_type'", id="model-type-list"),
    pytest.param(with_(model_type={"a": 1}), "'model_type'", id="model-type-dict"),
    pytest.param(with_(hidden_size="64"), "'hidden_size' must be an integer", id="size-string"),
    pytest.param(with_(hidden_size=[64]), "'hidden_size' must be an integer", id="size-list"),
    pytest.param(with_(hidden_size={"value": 64}), "'hidden_size' must be an integer", id="size-dict"),
    pytest.param(with_(hidden_size=64.5), "'hidden_size' must be an integer", id="size-fraction"),
    pytest.param(with_(hidden_size=True), "'hidden_size' must be an integer", id="size-bool"),
    pytest.param(with_(vocab_size=0), "'vocab_size' must be >= 1", id="vocab-zero"),
    pytest.param(with_(intermediate_size=-128), "'intermediate_size' must be >= 1", id="ffn-negative"),
    pytest.param(with_(head_dim=0), "'head_dim' must be >= 1", id="head-dim-zero"),
    pytest.param(with_(num_hidden_layers=10**9), "'num_hidden_layers' must be <=", id="layers-huge"),
    pytest.param(with_(max_position_embeddings=10**20), "'max_position_embeddings' must be <=", id="context-huge"),
    pytest.param(with_(hidden_size=2**39, num_key_value_heads=4), "1e15", id="sizes-multiply-past-1e15"),
    pytest.param(with_(num_key_value_heads=3), "num_key_value_heads", id="kv-not-dividing"),
    pytest.param(with_(num_attention_heads=3, num_key_value_heads=3), "not divisible", id="hidden-not-dividing"),
    pytest.param(with_(tie_word_embeddings="false"), "'tie_word_embeddings' must be true or false", id="bool-string"),
    pytest.param(with_(attention_bias=1), "'attention_bias' must be true or false", id="bool-int"),
    pytest.param(with_(model_type="phi3", partial_rotary_factor=2), "'partial_rotary_factor'", id="fraction-above-1"),
    pytest.param(
        with_(model_type="phi3", partial_rotary_factor="half"), "'partial_rotary_factor'", id="fraction-string"
    ),
    pytest.param(with_(model_type="mistral", sliding_window="4096"), "'sliding_window'", id="window-string"),
    pytest.param(
        with_(model_type="gemma2", sliding_window=16, layer_types="sliding"), "'layer_types'", id="layer-types-string"
    ),
    pytest.param(
        with_(model_type="mixtral", num_local_experts=8, num_experts_per_tok=9),
        "'num_experts_per_tok' (9) is more than num_local_experts (8)",
        id="mixtral-k-above-experts",
    ),
    pytest.param(
        with_(model_type="qwen2_moe", num_experts=4, num_experts_per_tok=5, moe_intermediate_size=32),
        "'num_experts_per_tok' (5) is more than num_experts (4)",
        id="qwen-moe-k-above-experts",
    ),
    pytest.param(
        with_(
            model_type="qwen3_moe",
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            mlp_only_layers="0,1",
        ),
        "'mlp_only_layers' must be a list",
        id="mlp-only-layers-string",
    ),
    pytest.param(
        with_(
            model_type="qwen3_moe",
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            mlp_only_layers=[0, "1"],
        ),
        "'mlp_only_layers[1]'",
        id="mlp-only-layers-item",
    ),
    pytest.param(
        with_(model_type="deepseek_v3", n_routed_experts=4, num_experts_per_tok=8, moe_intermediate_size=32, **MLA),
        "'num_experts_per_tok' (8) is more than n_routed_experts (4)",
        id="deepseek-k",
    ),
    pytest.param(
        with_(model_type="deepseek_v3", q_lora_rank=0, **MLA), "'q_lora_rank' must be >= 1", id="q-lora-rank-zero"
    ),
    pytest.param(
        with_(model_type="deepseek_v3", q_lora_rank=0.5, **MLA),
        "'q_lora_rank' must be an integer",
        id="q-lora-rank-fraction",
    ),
    pytest.param(
        with_(model_type="deepseek_v3", q_lora_rank="big", **MLA),
        "'q_lora_rank' must be an integer",
        id="q-lora-rank-string",
    ),
    pytest.param(
        json.dumps(
            {
                "model_type": "falcon",
                "vocab_size": 100,
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "new_decoder_architecture": True,
                "num_kv_heads": 3,
            }
        ),
        "num_kv_heads",
        id="falcon-kv-not-dividing",
    ),
    pytest.param(
        json.dumps(
            {
                "model_type": "falcon",
                "vocab_size": 100,
                "hidden_size": 66,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
            }
        ),
        "not divisible",
        id="falcon-hidden-not-dividing",
    ),
    pytest.param(
        json.dumps(
            {
                "model_type": "falcon",
                "vocab_size": 100,
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_ln_in_parallel_attn": "two",
            }
        ),
        "'num_ln_in_parallel_attn'",
        id="falcon-norms-string",
    ),
    pytest.param(
        json.dumps({"model_type": "llava", "text_config": [1, 2]}),
        "'text_config' must be an object",
        id="text-config-list",
    ),
    pytest.param(
        json.dumps({"model_type": "llava", "text_config": "llama"}),
        "'text_config' must be an object",
        id="text-config-string",
    ),
    pytest.param(
        json.dumps(
            {
                "model_type": "llava",
                "text_config": {"model_type": "llava", "text_config": {"model_type": "llava", "text_config": {}}},
            }
        ),
        "not supported",
        id="text-config-nested",
    ),
    pytest.param(
        json.dumps({"model_type": "llava", "text_config": {**LLAMA, "hidden_size": "wide"}}),
        "'hidden_size'",
        id="text-config-bad-field",
    ),
]


@pytest.mark.parametrize("text,fragment", MALFORMED)
def test_malformed_config_json_is_one_error_line_naming_the_key(run, tmp_path, text, fragment):
    path = tmp_path / "config.json"
    path.write_text(text)
    line = one_error_line(*run("model", "show", str(path)))
    assert fragment in line, line
    assert str(path) in line, line  # names the file


def test_binary_and_special_files_are_refused(run, tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe\x00\x80garbage")
    assert "config.json" in one_error_line(*run("model", "show", str(path)))
    if Path("/dev/null").exists():
        assert "not a regular file" in one_error_line(*run("model", "show", "/dev/null"))


def test_malformed_config_through_train_and_serve(run, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(with_(model_type="mixtral", num_local_experts=2, num_experts_per_tok=3))
    for args in (("train", str(path), "--gpu", "h100"), ("serve", str(path), "--gpu", "h100")):
        assert "num_experts_per_tok" in one_error_line(*run(*args))


def test_library_dicts_with_non_finite_numbers_name_the_key():
    with pytest.raises(ModelConfigError, match="'hidden_size' must be a finite integer"):
        spec_from_hf_config({**LLAMA, "hidden_size": float("nan")}, id="x")
    with pytest.raises(ModelConfigError, match="'rotary_pct' must be a finite number"):
        spec_from_hf_config({**LLAMA, "model_type": "gpt_neox", "rotary_pct": float("inf")}, id="x")


def test_a_self_referencing_text_config_is_an_error_not_a_recursion():
    cfg: dict = {"model_type": "llava"}
    cfg["text_config"] = cfg
    with pytest.raises(ModelConfigError, match="not supported"):
        spec_from_hf_config(cfg, id="loop")


def test_an_unforeseen_shape_still_names_the_field(monkeypatch):
    from gpuplan.catalog import hf_config

    def reader(r):
        r.raw("hidden_size")
        raise TypeError("unsupported operand type(s)")

    monkeypatch.setitem(hf_config._READERS, "llama", reader)
    with pytest.raises(ModelConfigError, match="field 'hidden_size' can't be read"):
        spec_from_hf_config(dict(LLAMA), id="x", where="cfg.json")


def test_valid_configs_still_read():
    spec = spec_from_hf_config(
        json.loads(with_(model_type="mixtral", num_local_experts=8, num_experts_per_tok=8)), id="x"
    )
    assert spec.moe.experts_per_token == 8
    spec = spec_from_hf_config({**LLAMA, "model_type": "deepseek_v3", "q_lora_rank": None, **MLA}, id="x")
    assert spec.mla.q_lora_rank is None
    assert load_config_json(b'{"a": 1.5, "b": [1, {"c": 2}]}', "x") == {"a": 1.5, "b": [1, {"c": 2}]}


# ------------------------------------------------------------------------------------ bare parameter counts


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("0.5", "at least 1,000"),
        ("0", "more than zero"),
        ("1e-9B", "at least 1,000"),
        ("7", "did you mean 7B?"),
        ("1e-7B", "at least 1,000"),
        ("1e296B", "1e15"),
        ("2000T", "1e15"),
        ("1e400B", "finite"),
    ],
)
def test_bare_counts_out_of_range_are_refused(run, text, fragment):
    assert fragment in one_error_line(*run("model", "show", text))
    with pytest.raises(QuantityError):
        resolve_model(text, load_models(), fetch=None)


def test_bare_counts_in_range_still_work(run):
    for text, params in (("7B", 7_000_000_000), ("1.5e9", 1_500_000_000), ("1000", 1000), ("1000T", 10**15)):
        assert resolve_model(text, load_models(), fetch=None).params == params
    code, out, _ = run("model", "show", "7B", "--json")
    assert code == 0 and json.loads(out)["model"]["params"] == 7_000_000_000


def test_a_hub_id_that_starts_with_digits_is_not_a_count():
    calls = []

    def fetch(repo_id):
        calls.append(repo_id)
        return dict(LLAMA)

    assert resolve_model("01-ai/Yi-tiny", load_models(), fetch=fetch).hf_id == "01-ai/Yi-tiny"
    assert calls == ["01-ai/Yi-tiny"]


# ------------------------------------------------------------------------------------------- Hub failures


@pytest.fixture
def online(monkeypatch):
    """The Hub allowed (conftest sets HF_HUB_OFFLINE=1 for every test)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)


class FakeSession:
    """Stands in for huggingface_hub's HTTP session: answers one canned response (or raises, or hangs)."""

    def __init__(self, status=200, headers=None, body=b"", error=None, hang_s=0.0):
        self.status, self.headers, self.body, self.error, self.hang_s = status, headers or {}, body, error, hang_s
        self.calls = []

    def get(self, url, headers=None, timeout=None):
        httpx2 = pytest.importorskip("httpx2")
        self.calls.append((url, timeout))
        if self.hang_s:
            time.sleep(self.hang_s)
        if self.error is not None:
            raise self.error
        return httpx2.Response(self.status, headers=self.headers, content=self.body, request=httpx2.Request("GET", url))


@pytest.fixture
def session(monkeypatch, online):
    """Install a FakeSession: session(status=404, headers={...}) -> the fake, now the Hub's answer."""
    import huggingface_hub.utils

    def install(**kwargs):
        fake = FakeSession(**kwargs)
        monkeypatch.setattr(huggingface_hub.utils, "get_session", lambda: fake)
        return fake

    return install


@pytest.mark.parametrize(
    "status,headers,fragments",
    [
        (404, {"X-Error-Code": "RepoNotFound"}, ["no model repository 'acme/x'", "huggingface-cli login"]),
        (401, {"X-Error-Code": "RepoNotFound"}, ["no model repository 'acme/x'", "private"]),
        (403, {"X-Error-Code": "GatedRepo"}, ["is gated", "huggingface-cli login", "HF_TOKEN", "accept its licence"]),
        (401, {"X-Error-Code": "GatedRepo"}, ["is gated", "HF_TOKEN"]),
        (404, {"X-Error-Code": "EntryNotFound"}, ["has no config.json"]),
        (404, {"X-Error-Code": "RevisionNotFound"}, ["no 'main' branch"]),
        (401, {"X-Error-Message": "Invalid credentials in Authorization header"}, ["rejected your token", "HF_TOKEN"]),
        (403, {}, ["denied access", "huggingface-cli login"]),
        (429, {}, ["rate-limiting", "try again later"]),
        (503, {}, ["HTTP 503", "try again later"]),
    ],
)
def test_hub_refusals_are_told_apart(run, session, status, headers, fragments):
    fake = session(status=status, headers=headers)
    line = one_error_line(*run("model", "show", "acme/x"))
    for fragment in fragments:
        assert fragment in line, line
    assert "local config.json" in line, line
    assert len(fake.calls) == 1  # no retries
    assert fake.calls[0][1] is not None and fake.calls[0][1] <= 10  # a timeout is always set


@pytest.mark.parametrize(
    "cls_name,fragment",
    [
        ("RepositoryNotFoundError", "no model repository"),
        ("GatedRepoError", "is gated"),
        ("RemoteEntryNotFoundError", "has no config.json"),
        ("EntryNotFoundError", "has no config.json"),
        ("RevisionNotFoundError", "no 'main' branch"),
        ("DisabledRepoError", "disabled"),
    ],
)
def test_hub_error_classes_raised_directly(run, session, monkeypatch, cls_name, fragment):
    """huggingface_hub's own exception classes, built the way its hf_raise_for_status builds them."""
    import huggingface_hub.errors as hf_errors
    import huggingface_hub.utils

    httpx2 = pytest.importorskip("httpx2")

    cls = getattr(hf_errors, cls_name, None)
    if cls is None:
        pytest.skip(f"huggingface_hub has no {cls_name}")
    session(status=404)

    def raise_for_status(response, endpoint_name=None):
        if issubclass(cls, hf_errors.HfHubHTTPError):
            raise cls(f"{response.status_code} Client Error.", response=response)
        raise cls(f"{response.status_code} Client Error.")

    monkeypatch.setattr(huggingface_hub.utils, "hf_raise_for_status", raise_for_status)
    assert httpx2  # the fake session's responses are httpx2 ones
    line = one_error_line(*run("model", "show", "acme/x"))
    assert fragment in line and "local config.json" in line, line


@pytest.mark.parametrize(
    "error_name,fragment",
    [
        ("ConnectError", "the request failed"),
        ("ConnectTimeout", "the request timed out"),
        ("ReadTimeout", "the request timed out"),
        ("ProxyError", "the request failed"),
    ],
)
def test_unreachable_hub_is_not_a_missing_config(run, session, error_name, fragment):
    httpx2 = pytest.importorskip("httpx2")
    session(error=getattr(httpx2, error_name)("no route"))
    line = one_error_line(*run("model", "show", "acme/x"))
    assert "can't reach the Hugging Face Hub" in line and fragment in line, line
    assert "no config.json" not in line and "local config.json" in line, line


def test_a_hub_that_never_answers_costs_the_deadline_only(run, session, monkeypatch):
    monkeypatch.setattr(hub_module, "HUB_DEADLINE_S", 0.5)
    session(hang_s=30)
    started = time.monotonic()
    line = one_error_line(*run("model", "show", "acme/x"))
    assert time.monotonic() - started < 10
    assert "did not answer within 0.5 s" in line and "local config.json" in line, line


def test_a_bug_below_the_hub_call_is_not_hidden(session):
    session(error=RuntimeError("a bug, not the network"))
    with pytest.raises(RuntimeError):
        hub_module.fetch_hub_config("acme/x")


def test_hub_answers_are_read_strictly(run, session):
    session(status=200, body=b'{"model_type": "llama", "hidden_size": NaN}')
    line = one_error_line(*run("model", "show", "acme/x"))
    assert "acme/x" in line and "'hidden_size' is NaN" in line
    session(status=200, body=json.dumps(LLAMA).encode())
    code, out, err = run("model", "show", "acme/x", "--json")
    assert code == 0 and json.loads(out)["model"]["hidden_size"] == 64, err


def test_an_invalid_repo_id_is_refused_before_the_network(run, session):
    fake = session(status=200)
    line = one_error_line(*run("model", "show", "acme--x/model"))
    assert "not a valid Hugging Face Hub repository id" in line and "local config.json" in line
    assert fake.calls == []


# --------------------------------------------------------------------------------------- offline and cache


def _plant_cache(repo_id: str, config: dict) -> Path:
    """A config.json in the Hugging Face cache layout ($HF_HOME/hub/models--owner--name/...)."""
    commit = "0" * 40
    root = Path(os.environ["HF_HOME"]) / "hub" / ("models--" + repo_id.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    return snapshot / "config.json"


def _cache_dir_is_read_at_call_time(monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(Path(os.environ["HF_HOME"]) / "hub"))


def test_hf_hub_offline_never_touches_the_network(run, monkeypatch):
    import huggingface_hub.utils

    def no_network():
        raise AssertionError("the network was used while HF_HUB_OFFLINE=1")

    monkeypatch.setattr(huggingface_hub.utils, "get_session", no_network)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    line = one_error_line(*run("model", "show", "acme/not-cached"))
    assert "not in the local Hugging Face Hub cache" in line and "HF_HUB_OFFLINE" in line
    assert "local config.json" in line


def test_offline_reads_the_cache(run, monkeypatch):
    _cache_dir_is_read_at_call_time(monkeypatch)
    _plant_cache("acme/cached", LLAMA)
    code, out, err = run("model", "show", "acme/cached", "--offline", "--json")
    assert code == 0 and json.loads(out)["model"]["hidden_size"] == 64, err


def test_unreachable_hub_falls_back_to_the_cache(run, session, monkeypatch):
    httpx2 = pytest.importorskip("httpx2")
    _cache_dir_is_read_at_call_time(monkeypatch)
    _plant_cache("acme/cached", LLAMA)
    session(error=httpx2.ConnectError("down"))
    code, out, err = run("model", "show", "acme/cached", "--json")
    assert code == 0 and json.loads(out)["model"]["hidden_size"] == 64, err


def test_unknown_hub_id_offline_for_real_is_fast_and_one_line():
    """This machine's real network (no Hub here; elsewhere the Hub may answer 'no such repository')."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["PYTHONPATH"] = str(REPO / "src")
    started = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "gpuplan", "model", "show", "nosuch-owner/nosuch-model"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    line = one_error_line(r.returncode, r.stdout, r.stderr)
    assert "nosuch-owner/nosuch-model" in line and "local config.json" in line, line
    assert "Retry" not in r.stderr
    assert elapsed < 10, f"took {elapsed:.1f} s"


def test_a_hub_that_accepts_but_never_answers_for_real():
    """A local server that accepts the connection and never replies: the read timeout ends it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env.update(PYTHONPATH=str(REPO / "src"), HF_ENDPOINT=f"http://127.0.0.1:{server.getsockname()[1]}")
        started = time.monotonic()
        r = subprocess.run(
            [sys.executable, "-m", "gpuplan", "model", "show", "acme/silent"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        elapsed = time.monotonic() - started
    finally:
        server.close()
    line = one_error_line(r.returncode, r.stdout, r.stderr)
    assert "Hugging Face Hub" in line and ("timed out" in line or "did not answer" in line), line
    assert elapsed < 10 + hub_module.HUB_DEADLINE_S, f"took {elapsed:.1f} s"


# ----------------------------------------------------------------------------------------- did you mean


def test_a_bare_name_is_never_a_hub_id():
    def fetch(repo_id):
        raise AssertionError("a bare name went to the Hub")

    with pytest.raises(Exception, match=r"did you mean 'llama-3\.1-8b'"):
        resolve_model("llama-3.1-8bb", load_models(), fetch=fetch)


def test_a_near_miss_of_a_catalog_hub_id_gets_the_suggestion_offline(run):
    line = one_error_line(*run("model", "show", "meta-llama/Llama-3.1-8BB", "--offline"))
    assert "did you mean" in line and "'meta-llama/Llama-3.1-8B'" in line, line


def test_a_near_miss_gets_the_suggestion_when_the_hub_fails(session, run):
    session(status=404, headers={"X-Error-Code": "RepoNotFound"})
    line = one_error_line(*run("model", "show", "meta-llama/Llama-3.1-8BB"))
    assert "no model repository" in line and "'meta-llama/Llama-3.1-8B'" in line, line


def test_a_near_miss_that_exists_on_the_hub_is_read():
    cfg = dict(LLAMA)
    spec = resolve_model("meta-llama/Llama-3.1-8BB", load_models(), fetch=lambda repo_id: cfg)
    assert spec.hf_id == "meta-llama/Llama-3.1-8BB"


def test_no_suggestion_for_an_unrelated_id(run):
    line = one_error_line(*run("model", "show", "nosuch-owner/nosuch-model", "--offline"))
    assert "did you mean" not in line


# --------------------------------------------------------------------------------------------- --offline


def _commands_taking_a_model():
    from gpuplan.cli.main import cli

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])
        elif any(p.name in ("model_name", "model") for p in cmd.params):
            yield path, cmd

    return list(walk(cli, []))


def test_every_command_taking_a_model_has_the_same_offline_flag():
    found = {" ".join(path): cmd for path, cmd in _commands_taking_a_model()}
    assert {"model show", "train", "serve", "local bench"} <= set(found)
    helps = set()
    for name, cmd in found.items():
        options = [p for p in cmd.params if "--offline" in getattr(p, "opts", ())]
        assert len(options) == 1, name
        helps.add(options[0].help)
    assert len(helps) == 1


@pytest.mark.parametrize(
    "args",
    [
        ("model", "show", "acme/not-cached", "--offline"),
        ("train", "acme/not-cached", "--gpu", "h100", "--offline"),
        ("serve", "acme/not-cached", "--gpu", "h100", "--offline"),
        ("local", "bench", "matmul", "--model", "acme/not-cached", "--offline"),
    ],
)
def test_offline_is_accepted_and_obeyed_by_every_model_command(run, online, monkeypatch, args):
    import huggingface_hub.utils

    def no_network():
        raise AssertionError("--offline used the network")

    monkeypatch.setattr(huggingface_hub.utils, "get_session", no_network)
    line = one_error_line(*run(*args))
    assert "--offline" in line and "not in the local Hugging Face Hub cache" in line, line
