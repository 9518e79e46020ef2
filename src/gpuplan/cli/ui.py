"""``gpuplan ui``: serve the local web page and its JSON API (the ``ui`` extra: fastapi and uvicorn)."""

from __future__ import annotations

import click

from ..errors import GpuplanError


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8321, show_default=True, help="TCP port.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind. Anything but loopback exposes the page to the network (a warning is printed).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default web browser.")
def ui(port: int, host: str, open_browser: bool) -> None:
    """A local web page over the CLI's API: plan, train, serve, compare GPUs, rent vs buy, validate.

    Pages: Plan (opens first), Train, Serve, GPUs, Rent vs buy, Validate, Local.

    JSON API: GET /api/train, /api/serve, /api/plan/train, /api/plan/serve, /api/tco, /api/gpus,
    /api/models, /api/offers, /api/validate, /api/local/detect (query names = the Python API's keywords);
    POST /api/config (a config.json, kept in memory); schema at /openapi.json. See docs/ui.md.
    """
    try:
        import uvicorn

        from ..web.app import LOOPBACK_HOSTS, create_app
    except ImportError as e:
        raise GpuplanError(
            f"gpuplan ui needs the 'ui' extra ({e.name} is missing): pip install 'gpuplan[ui]'"
        ) from None
    if host not in LOOPBACK_HOSTS:
        click.echo(
            f"gpuplan: warning: binding {host}: the page and its API are reachable from the network, "
            "without authentication",
            err=True,
        )
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    click.echo(f"gpuplan ui: {url} (Ctrl+C stops it)", err=True)
    if open_browser:
        import threading
        import webbrowser

        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    uvicorn.run(create_app(host), host=host, port=port, log_level="warning")
