"""The ``gpuplan ui`` application: ``GET /api/<command>`` over :mod:`gpuplan.api`, ``POST /api/config``, and
the pages.

Each endpoint takes the API function's keyword names as query parameters (lists comma-separated, ``assume`` as
``name=value`` pairs) and answers exactly the record the CLI's ``--json`` prints for the same inputs. Bad input is
a 400 with ``{"error": "<the CLI's one-line message>"}``; FastAPI's own parameter validation and unknown routes
answer in the same shape. What the page may not ask for: a file path (``model`` is a catalog id, a bare count
like ``7B`` or the id ``POST /api/config`` gave for an uploaded config.json; no Hub ids, no ``calibration`` or
``catalog`` files) and the network (``offline`` always).

``POST /api/config`` takes a config.json as the request body (``application/json``, at most 1 MB), keeps the
model it describes in this process's memory (never on disk) and answers the ``model show`` record of it, whose
``model.id`` (``upload:<hash of the file>``) later calls take as ``model=``.

The pages (Plan, Train, Serve, GPUs, Rent vs buy, Validate, Local) are files in ``static/``, served with a strict
Content-Security-Policy (no inline script, no eval, nothing from another origin), so they work offline. They show
the API's numbers only: every figure on a page is a value of an answer of the API.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from .. import __version__, api
from ..cli._common import nonfinite_error
from ..cli.main import _one_line
from ..cli.train import parse_assume
from ..errors import GpuplanError, InputError
from ..units import BOUNDS

STATIC = Path(__file__).resolve().parent / "static"

#: Every response carries it: scripts, styles, images and requests from this origin only; no inline script,
#: no eval, no frames, no plugins.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")

#: API keywords the web never takes: files on the server's disk, the network, a test seam.
HIDDEN = frozenset({"catalog", "calibration", "offline", "like", "progress"})
#: keywords read through another keyword's bound (the CLI's ``--max-gpus`` is ``number("gpus")``)
BOUND_OF = {"max_gpus": "gpus"}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_COUNT = re.compile(r"^\s*[+-]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*[kmbgtp]?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Endpoint:
    path: str  # under /api/
    fn: Callable[..., Any]
    command: str  # the CLI command, for the error line's --help hint


ENDPOINTS = (
    Endpoint("train", api.train, "gpuplan train"),
    Endpoint("serve", api.serve, "gpuplan serve"),
    Endpoint("plan/train", api.plan_train, "gpuplan plan train"),
    Endpoint("plan/serve", api.plan_serve, "gpuplan plan serve"),
    Endpoint("tco", api.tco, "gpuplan tco"),
    Endpoint("gpus", api.gpus, "gpuplan gpus list"),
    Endpoint("models", api.models, "gpuplan model list"),
    Endpoint("offers", api.offers, "gpuplan offers list"),
    Endpoint("validate", api.validate, "gpuplan validate"),
    Endpoint("local/detect", api.local_detect, "gpuplan local detect"),
    Endpoint("local/profiles", api.local_profiles, "gpuplan local bench"),
    Endpoint("local/runs", api.local_runs, "gpuplan local diagnose"),
)

#: The pages: URL path -> file in static/ (each loads /static/<name>.js and /static/app.css).
PAGES = {
    "/": "plan.html",
    "/train": "train.html",
    "/serve": "serve.html",
    "/gpus": "gpus.html",
    "/tco": "tco.html",
    "/validate": "validate.html",
    "/local": "local.html",
}

#: Uploaded config.json files: at most this many bytes each, this many kept (the oldest is dropped first).
MAX_UPLOAD_BYTES = 1_000_000
MAX_UPLOADS = 64
UPLOAD_PREFIX = "upload:"


class Uploads:
    """Models built from uploaded config.json files, by id (``upload:`` + 16 hex digits of the file's SHA-256):
    held in memory only, for the life of the process."""

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}
        self._lock = threading.Lock()

    def add(self, data: bytes) -> Any:
        from ..catalog.hf_config import load_config_json, spec_from_hf_config

        model_id = UPLOAD_PREFIX + hashlib.sha256(data).hexdigest()[:16]
        where = "uploaded config.json"
        config = load_config_json(data, where)  # ModelConfigError: one line naming the key
        name = config.get("_name_or_path") if isinstance(config.get("_name_or_path"), str) else None
        spec = spec_from_hf_config(config, id=model_id, name=name or model_id, where=where, origin="upload")
        with self._lock:
            self._specs.pop(model_id, None)
            self._specs[model_id] = spec
            while len(self._specs) > MAX_UPLOADS:
                self._specs.pop(next(iter(self._specs)))
        return spec

    def get(self, model_id: str) -> Any | None:
        with self._lock:
            return self._specs.get(model_id.strip().lower())


#: What every error answer looks like, for the OpenAPI schema.
ERROR_SCHEMA = {
    "type": "object",
    "properties": {"error": {"type": "string", "description": "the CLI's one-line message"}},
    "required": ["error"],
    "additionalProperties": False,
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {
        code: {"description": "bad input: one line", "content": {"application/json": {"schema": ERROR_SCHEMA}}}
        for code in codes
    }


class BadRequest(Exception):
    """Bad input met by the web layer itself (not by the API): its message is the answer's one line."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """The API function's keywords the web takes, in the function's order."""
    return [p for p in inspect.signature(fn).parameters.values() if p.name not in HIDDEN]


def _convert(param: inspect.Parameter, raw: str) -> Any:
    """A query string value as the CLI's flag parser would hand it to the API (same bounds, same lines)."""
    name, kind = param.name, str(param.annotation).split(" |")[0]
    flag = _flag(name)
    if name == "assume":
        return parse_assume(tuple(p for p in raw.split(",") if p.strip()))
    if kind == "bool":
        low = raw.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise BadRequest(f"Invalid value for '{flag}': {raw!r} is not a valid boolean.")
    if kind in ("int", "float"):
        bound = BOUNDS.get(BOUND_OF.get(name, name))
        if bound is not None:
            return bound.read(raw, flag)
        if kind == "int":
            if not re.fullmatch(r"\s*[+-]?\d{1,30}\s*", raw):
                raise BadRequest(f"Invalid value for '{flag}': {raw!r} is not a valid integer.")
            return int(raw)
    return raw


def check_model(text: str, cat: Any, uploads: Uploads | None = None) -> None:
    """``model=`` is a catalog id or alias, a bare count such as 7B, or the id of an uploaded config.json: never
    a path on this machine, never a Hub id (the page has no business reading the server's files or the
    network). An uploaded model is added to this call's model registry."""
    if text.strip().lower().startswith(UPLOAD_PREFIX):
        spec = uploads.get(text) if uploads is not None else None
        if spec is None:
            raise BadRequest(
                f"unknown model {text!r}: no config.json with that id was uploaded to this server since it "
                "started (uploads are kept in memory only); upload it again with POST /api/config"
            )
        cat.models().add(spec)
        return
    if cat.models().matches(text.strip()) or _COUNT.match(text):
        return
    raise BadRequest(
        f"unknown model {text!r}: the web API takes a built-in model id (see /api/models), a parameter count "
        "like 7B, or the id POST /api/config gives for an uploaded config.json; file paths and Hub ids are "
        "not accepted here"
    )


def cli_message(e: GpuplanError, command: str) -> str:
    """The line the CLI prints after 'gpuplan: error: ' for this error."""
    if isinstance(e, InputError):  # the CLI shows it as click's bad parameter, with the --help hint
        return _one_line(f"Invalid value for {e.flag}: {e.message} (see '{command} --help')")
    return _one_line(str(e))


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": _one_line(message)}, status_code=status)


def call(endpoint: Endpoint, query: dict[str, str], uploads: Uploads | None = None) -> JSONResponse:
    """Run one API call from query values: the CLI's ``--json`` record, or a 400 with the CLI's error line."""
    from ..catalog.session import Catalogs

    params = {p.name: p for p in parameters(endpoint.fn)}
    try:
        unknown = sorted(set(query) - set(params))
        if unknown:
            raise BadRequest(f"No such option: {_flag(unknown[0])} (known: {', '.join(sorted(params))})")
        missing = [n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in query]
        if missing:
            raise BadRequest(f"missing query parameter '{missing[0]}'")
        kwargs = {name: _convert(params[name], raw) for name, raw in query.items()}
        cat = Catalogs(())
        if "model" in kwargs:
            check_model(kwargs["model"], cat, uploads)
        extra: dict[str, Any] = {"offline": True} if "offline" in inspect.signature(endpoint.fn).parameters else {}
        report = endpoint.fn(**kwargs, **extra, catalog=cat)
        record = report.to_dict()
        bad = nonfinite_error(record)
        if bad is not None:
            raise bad
    except BadRequest as e:
        return _error(400, str(e))
    except GpuplanError as e:
        return _error(400, cli_message(e, endpoint.command))
    except click.UsageError as e:  # parse_assume's bad pair, as the CLI words it
        return _error(400, f"{e.format_message()} (see '{endpoint.command} --help')")
    return JSONResponse(record, headers={"X-Gpuplan-Exit-Code": str(report.exit_code)})


def _route(endpoint: Endpoint, uploads: Uploads) -> Callable[..., JSONResponse]:
    """A handler whose signature lists the endpoint's query parameters (for the OpenAPI schema), all read as
    text: the values are checked by the same bounds as the CLI's flags, so the errors are the CLI's."""

    def handler(request: Request, **_: Any) -> JSONResponse:
        query: dict[str, str] = {}
        for key, value in request.query_params.multi_items():
            if key in query:
                return _error(400, f"{key} given twice; give it once (lists are comma-separated)")
            query[key] = value
        return call(endpoint, query, uploads)

    params = [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
    for p in parameters(endpoint.fn):
        required = p.default is inspect.Parameter.empty
        default = p.default.value if hasattr(p.default, "value") else p.default
        shown = default if isinstance(default, (str, int, float, bool)) else None
        query = Query(
            ... if required else None,
            description=f"the API's {p.name} (CLI: {_flag(p.name)})"
            + ("" if required or shown is None else f"; default {shown}"),
        )
        params.append(
            inspect.Parameter(
                p.name, inspect.Parameter.KEYWORD_ONLY, default=query, annotation=str if required else str | None
            )
        )
    handler.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    handler.__name__ = "api_" + endpoint.path.replace("/", "_")
    handler.__doc__ = (endpoint.fn.__doc__ or "").strip().split("\n")[0]
    return handler


def _page(name: str) -> Callable[[], FileResponse]:
    def page() -> FileResponse:
        return FileResponse(STATIC / name, media_type="text/html; charset=utf-8")

    return page


async def _upload(request: Request, uploads: Uploads) -> JSONResponse:
    """``POST /api/config``: the body is a config.json (``application/json``, at most MAX_UPLOAD_BYTES). A form
    post or a cross-site request is refused: the JSON content type makes a browser ask before sending one from
    another origin, and this server never says yes."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return _error(415, f"send the config.json as the request body with Content-Type application/json, not {kind!r}")
    origin = request.headers.get("origin")
    if origin is not None and origin.split("://", 1)[-1] != request.headers.get("host"):
        return _error(403, f"uploads from another origin ({origin}) are refused")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES:
        return _error(413, f"config.json is {int(declared):,} bytes; at most {MAX_UPLOAD_BYTES:,} are taken")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_UPLOAD_BYTES:
            return _error(413, f"config.json is over {MAX_UPLOAD_BYTES:,} bytes; at most that many are taken")
    try:
        spec = uploads.add(bytes(data))
        from ..catalog.session import Catalogs

        cat = Catalogs(())
        cat.models().add(spec)
        record = api.model(spec.id, offline=True, catalog=cat).to_dict()
    except GpuplanError as e:
        return _error(400, cli_message(e, "gpuplan model show"))
    return JSONResponse(record, status_code=201)


def create_app(host: str = "127.0.0.1") -> FastAPI:
    """The application. Bound to loopback (the default), it answers only requests addressed to a loopback name,
    so a web page elsewhere cannot reach it through DNS rebinding."""
    app = FastAPI(
        title="gpuplan",
        version=__version__,
        description=__doc__,
        docs_url=None,  # Swagger UI and ReDoc load scripts from a CDN and inline: not under this CSP
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    if host in LOOPBACK_HOSTS:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS))

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[..., Any]) -> Any:
        response = await call_next(request)
        for key, value in SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        return response

    @app.exception_handler(RequestValidationError)
    async def bad_parameters(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ())[1:]) or "request"
        return _error(400, f"{where}: {first.get('msg', 'invalid')}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    uploads = Uploads()
    app.state.uploads = uploads
    for endpoint in ENDPOINTS:
        app.add_api_route(
            "/api/" + endpoint.path,
            _route(endpoint, uploads),
            methods=["GET"],
            response_class=JSONResponse,
            summary=(endpoint.fn.__doc__ or endpoint.path).strip().split("\n")[0],
            tags=["api"],
            responses=_errors(400),
        )

    @app.post(
        "/api/config",
        tags=["api"],
        summary="Upload a config.json: its model, kept in memory, as the model show record; model.id is the id",
        status_code=201,
        responses=_errors(400, 403, 413, 415),
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object", "description": "a config.json"}}},
            }
        },
    )
    async def upload_config(request: Request) -> JSONResponse:
        return await _upload(request, uploads)

    for path, name in PAGES.items():
        app.add_api_route(path, _page(name), methods=["GET"], include_in_schema=False, name=name)

    made = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's schema, less the 422 answer it lists for every route: bad parameters get a 400 here."""
        schema = made()
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
