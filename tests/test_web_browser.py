"""``gpuplan ui`` in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, through Selenium).

For every page: open it, fill the form, submit, check that the numbers shown are the values of the API's answer
(each shown value carries the exact number in ``data-value``), move a slider or change an input and see the chart
change, reload from the address and get the same state, and check that nothing outside the server was requested
(the browser's network log and performance entries) and that the console has no error (a CSP refusal is one).
Screenshots go to a temporary folder (printed); with UPDATE_UI_SCREENSHOTS=1 docs/img/ui-train.png,
docs/img/ui-plan.png and docs/img/ui-plan-explain.png are rewritten too.

Without chromium, chromedriver, selenium or uvicorn these tests skip with the reason; in CI (GPUPLAN_CI or CI
set) that is a failure instead: .ci/run installs them.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import socket
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from conftest import REPO, in_ci


def _missing() -> str | None:
    try:
        import fastapi  # noqa: F401
        import selenium  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        return f"{e.name} is not installed (pip install -e '.[ui-test]')"
    for binary in ("chromium", "chromedriver"):
        if not (shutil.which(binary) or Path(f"/usr/bin/{binary}").exists()):
            return f"{binary} not found (apt-get install chromium chromium-driver)"
    return None


_WHY = _missing()
if _WHY is not None:
    if in_ci():
        pytest.fail(f"browser tests cannot run in CI: {_WHY}; .ci/run installs them", pytrace=False)
    pytest.skip(f"browser tests need a headless Chromium: {_WHY}", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from test_web import TINY  # noqa: E402

WAIT_S = 90  # a plan/train search over two GPUs takes a few seconds here; shared CI machines are slower
PAGE_PARAMS = {"pick", "launcher", "x", "y", "rental", "ids", "quantity", "by"}  # the page's own, not the API's
LAUNCHER = {"megatron": "megatron", "fsdp2": "torchtitan", "deepspeed": "deepspeed"}  # plan.js's STACK_LAUNCHER
PLAN_QUERY = {"model": "llama-3.1-8b", "tokens": "100B", "deadline": "7d", "gpu": "h100", "top": "50"}  # about 1 s


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def server():
    import uvicorn

    from gpuplan.web.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui-screenshots")
    print(f"\nscreenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def downloads_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("ui-downloads")


@pytest.fixture(scope="module")
def browser(server, downloads_dir):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",  # as root, Chromium's sandbox does not start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",  # a laptop's width
        "--no-first-run",
        "--disable-background-networking",  # no update checks, safe-browsing lists, ... in the network log
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads_dir)})
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(60)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads_dir)})
    driver.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": server, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    yield driver
    driver.quit()


@pytest.fixture
def page(browser, server, shots):
    """The browser, its network and console logs emptied first; after the test, the checks every page passes."""
    browser.get_log("performance")
    browser.get_log("browser")
    yield browser
    _nothing_external(browser, server)


# ------------------------------------------------------------------------------------------------- helpers


def api(server: str, path: str, query: dict | str = "") -> dict:
    text = query if isinstance(query, str) else urlencode(query)
    with urllib.request.urlopen(f"{server}/api/{path}?{text}", timeout=120) as response:
        return json.load(response)


def wait(driver, condition, what: str, timeout: float = WAIT_S):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: condition(d))
    except TimeoutException:
        status = driver.find_element(By.ID, "status").text if driver.find_elements(By.ID, "status") else ""
        raise AssertionError(f"timed out waiting for {what} (status line: {status!r})") from None


def _attrs(driver, css: str, attrs: tuple[str, ...]) -> list[list[str | None]]:
    """The attributes of every element matching css, read in one call (the page may redraw in between calls)."""
    script = (
        "return [...document.querySelectorAll(arguments[0])].map((e) => arguments[1].map((a) => e.getAttribute(a)))"
    )
    return driver.execute_script(script, css, list(attrs))


def shown(driver, css: str) -> float | None:
    """The exact number an element shows (its data-value); None while there is no such element."""
    found = _attrs(driver, css, ("data-value",))
    return float(found[0][0]) if found and found[0][0] is not None else None


def values(driver, css: str, attr: str = "data-value") -> list[float]:
    return [float(v) for (v,) in _attrs(driver, css, (attr,))]


def points(driver, css: str = "#chart svg .pt") -> list[tuple[str, float, float]]:
    return [(i, float(x), float(y)) for i, x, y in _attrs(driver, css, ("data-id", "data-x", "data-y"))]


def address(driver) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(driver.current_url).query).items()}


def api_query(driver) -> dict[str, str]:
    """The page's address less its own parameters: the query it sends the API."""
    return {k: v for k, v in address(driver).items() if k not in PAGE_PARAMS}


def fill(driver, name: str, text: str, form: str = "form") -> None:
    field = driver.find_element(By.CSS_SELECTOR, f"{form} [name={name}]")
    field.clear()
    field.send_keys(text)


def submit(driver) -> None:
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()


def _nothing_external(driver, server: str) -> None:
    requested = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requested.append(message["params"]["request"]["url"])
    requested += driver.execute_script("return performance.getEntriesByType('resource').map((e) => e.name)")
    assert requested, "the network log is empty: the check would pass vacuously"
    outside = [u for u in requested if not u.startswith((server + "/", "data:", "blob:" + server))]
    assert not outside, f"requests outside the server: {outside}"
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"console errors (a CSP refusal is one): {errors}"


def screenshot(driver, shots: Path, name: str, docs: bool = False, at: str | None = None) -> None:
    """The page from its top, at a laptop's width and tall enough for what the README shows; then at 800 px wide
    (``<name>-800.png``, a narrow window), where nothing may stick out sideways: the page must not scroll
    horizontally (a wide table scrolls inside its own box). With ``at`` (a CSS selector) the page is scrolled to
    that element instead of its top."""
    size = driver.get_window_size()
    top = "window.scrollTo(0, 0)" if at is None else f"document.querySelector({json.dumps(at)}).scrollIntoView(true)"
    driver.set_window_size(1280, 1700)
    driver.execute_script(top)
    try:
        driver.save_screenshot(str(shots / f"{name}.png"))
        if docs and os.environ.get("UPDATE_UI_SCREENSHOTS"):
            driver.save_screenshot(str(REPO / "docs" / "img" / f"{name}.png"))
        driver.set_window_size(800, 1700)
        time.sleep(0.2)  # a chart redrawn on resize
        driver.execute_script(top)
        driver.save_screenshot(str(shots / f"{name}-800.png"))
        overflow = driver.execute_script("const e = document.documentElement; return e.scrollWidth - e.clientWidth")
        assert overflow <= 0, f"{name} at 800 px: the page is {overflow} px wider than the window"
    finally:
        driver.set_window_size(size["width"], size["height"])


def download_bytes(driver, folder: Path, button: str) -> bytes:
    """Click a download button; the bytes of the file it saves."""
    name = driver.find_element(By.CSS_SELECTOR, button).get_attribute("data-download")
    target = folder / name
    target.unlink(missing_ok=True)
    driver.find_element(By.CSS_SELECTOR, button).click()
    wait(driver, lambda d: target.exists() and target.stat().st_size > 0, f"the download {name}", 20)
    time.sleep(0.2)
    return target.read_bytes()


def download(driver, folder: Path, button: str) -> str:
    """Click a download button; the text of the file it saves."""
    return download_bytes(driver, folder, button).decode("utf-8")


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GRID_RGB = "#eceff3"  # app.css's svg .grid stroke: in the PNG only if the page's chart styles were carried over
BLUE_RGB = "#0072b2"  # the first Okabe-Ito colour (common.js's PALETTE): the first series or group
_DECODE = """
const [b64, wanted, done] = arguments;
const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
createImageBitmap(new Blob([bytes], { type: "image/png" })).then((bitmap) => {
  const canvas = document.createElement("canvas");
  canvas.width = bitmap.width;
  canvas.height = bitmap.height;
  const ctx = canvas.getContext("2d");
  ctx.drawImage(bitmap, 0, 0);
  const d = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  const seen = new Set();
  for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
  done({ colours: seen.size, found: wanted.filter((h) => seen.has(parseInt(h.slice(1), 16))) });
}, (e) => done({ error: String(e) }));
"""


def png_chart(driver, folder: Path, button: str, chart: str, colours: tuple[str, ...] = (BLUE_RGB,)) -> None:
    """The PNG button of a chart saves a valid PNG of that chart: the signature, well-formed chunks (IHDR first,
    every CRC right, IEND last), twice the chart's viewBox in pixels, and, decoded by the browser, the chart's
    colours (so it is the chart drawn with its styles, not a blank canvas)."""
    import base64
    import struct
    import zlib

    data = download_bytes(driver, folder, button)
    assert data[:8] == PNG_SIGNATURE, data[:16]
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in the {kind!r} chunk"
        chunks.append((kind, body))
        at += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND" and any(k == b"IDAT" for k, _ in chunks)
    width, height = struct.unpack(">II", chunks[0][1][:8])
    box = _attrs(driver, chart, ("viewBox",))[0][0].split()
    assert (width, height) == (2 * round(float(box[2])), 2 * round(float(box[3])))
    got = driver.execute_async_script(_DECODE, base64.b64encode(data).decode(), list(colours))
    assert "error" not in got, got
    assert got["colours"] >= 8 and sorted(got["found"]) == sorted(colours), got


# ------------------------------------------------------------------------------------------------ the pages


def test_plan_page_from_a_model_and_a_deadline_to_a_plan_its_link_and_its_launch_command(
    page, server, shots, downloads_dir
):
    """The issue's done-when: pick a model and a deadline, leave with a chosen plan, its link and its command."""
    page.get(server + "/")
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#model-ids option"), "the model list")
    fill(page, "model", "llama-3.1-8b")
    fill(page, "tokens", "100B")
    fill(page, "deadline", "7d")
    fill(page, "gpu", "h100,a100-sxm-80gb")  # two GPUs keep the search to seconds
    submit(page)
    wait(page, lambda d: d.find_element(By.ID, "chosen").get_attribute("data-bands") == "loaded", "the best plan")
    query = api_query(page)
    assert query["model"] == "llama-3.1-8b" and query["tokens"] == "100B" and query["deadline"] == "7d"
    record = api(server, "plan/train", query)
    best = record["options"][0]
    assert shown(page, "#card-time .big") == best["time_s"]
    assert shown(page, "#card-cost .big") == best["cost_usd"]
    assert shown(page, "#card-mfu .big") == best["mfu"]
    assert shown(page, "#card-memory .big") == best["peak_memory_bytes"]
    # the launch line shown first is the stack the option was estimated for
    assert page.find_element(By.ID, "launch-text").text == best["launch"][LAUNCHER[best["layout"]["stack"]]]
    drawn = points(page)
    assert [(x, y) for _, x, y in sorted(drawn, key=lambda p: int(p[0]))] == [
        (o["time_s"] / 86400, o["cost_usd"]) for o in record["options"]
    ]
    assert page.find_element(By.CSS_SELECTOR, "#chart .pt.selected").get_attribute("data-id") == "0"
    # the bands: gpuplan train with the option's own settings (same time and cost, and the P10-P90 band)
    layout = best["layout"]
    train = api(
        server,
        "train",
        {
            "model": "llama-3.1-8b",
            "gpu": best["gpu"],
            "gpus": best["gpus"],
            **{
                k: layout[k]
                for k in ("tp", "pp", "cp", "ep", "virtual_stages", "zero", "micro_batch", "global_batch", "seq_len")
            },
            "offload": layout["offload"],
            **{k: str(layout[k]).lower() for k in ("fsdp", "sequence_parallel")},
            "recompute": layout["recompute"],
            "stack": layout["stack"],
            "recipe": layout["recipe"],
            "precision": best["precision"],
            "tokens": "100B",
            "offer": best["offer"]["id"],
        },
    )
    # the search and train share the formulas: equal to 1e-9 (tests/test_plan_search.py holds them to 1e-12)
    assert train["time"]["seconds"] == pytest.approx(best["time_s"], rel=1e-9)
    assert train["cost"]["usd"] == pytest.approx(best["cost_usd"], rel=1e-9)
    assert values(page, "#card-time small span") == pytest.approx(
        [train["time"]["seconds_p10"], train["time"]["seconds_p90"]], rel=1e-9
    )
    assert values(page, "#card-cost small span") == pytest.approx(
        [train["cost"]["usd_p10"], train["cost"]["usd_p90"]], rel=1e-9
    )

    # another point: its layout, its command, and the address names it
    # (by keyboard, as the points are buttons: near-equal options can overlap, and a click then hits the one on top)
    page.find_element(By.CSS_SELECTOR, '#chart .pt[data-id="3"]').send_keys(Keys.ENTER)
    wait(page, lambda d: "Option #4" in d.find_element(By.ID, "headline").text, "option #4")
    wait(page, lambda d: d.find_element(By.ID, "chosen").get_attribute("data-bands") == "loaded", "its bands")
    fourth = record["options"][3]
    assert address(page)["pick"] == "3"
    assert shown(page, "#card-time .big") == fourth["time_s"] and shown(page, "#card-cost .big") == fourth["cost_usd"]
    # another launcher than the one shown first: the address keeps it
    tool = next(t for t in ("torchtitan", "megatron", "deepspeed") if t != LAUNCHER[fourth["layout"]["stack"]])
    assert fourth["launch"][tool] is not None
    page.find_element(By.CSS_SELECTOR, f'input[name=launcher][value="{tool}"]').click()
    assert page.find_element(By.ID, "launch-text").text == fourth["launch"][tool]
    page.find_element(By.ID, "copy-launch").click()
    wait(page, lambda d: d.find_element(By.ID, "copied").text == "Copied.", "the copy")
    clipboard = page.execute_async_script(
        "navigator.clipboard.readText().then(arguments[0], (e) => arguments[0]('ERR ' + e))"
    )
    assert clipboard == fourth["launch"][tool]
    link = page.find_element(By.ID, "share-link").get_attribute("value")
    assert link == page.current_url and address(page)["launcher"] == tool
    page.find_element(By.ID, "copy-link").click()
    wait(page, lambda d: d.find_element(By.ID, "copied").text == "Copied.", "the link copy")
    assert page.execute_async_script("navigator.clipboard.readText().then(arguments[0])") == link
    screenshot(page, shots, "ui-plan", docs=True)

    # downloads: the options as CSV (the answer's numbers, units in the column names) and the answer as JSON
    rows = list(csv.DictReader(io.StringIO(download(page, downloads_dir, "#chart-downloads [data-download$=csv]"))))
    assert [float(r["cost_usd"]) for r in rows] == [o["cost_usd"] for o in record["options"]]
    assert json.loads(download(page, downloads_dir, "#chart-downloads [data-download$=json]")) == record
    png_chart(page, downloads_dir, "#chart-downloads [data-download$=png]", "#chart svg", (BLUE_RGB, GRID_RGB))

    # the link, opened afresh, is the same plan
    page.get(link)
    wait(page, lambda d: d.find_element(By.ID, "chosen").get_attribute("data-bands") == "loaded", "the linked plan")
    assert "Option #4" in page.find_element(By.ID, "headline").text
    assert page.find_element(By.ID, "launch-text").text == fourth["launch"][tool]
    assert sorted(points(page)) == sorted(drawn)

    # a tighter deadline: the chart changes to the new answer
    fill(page, "deadline", "3d")
    submit(page)
    wait(page, lambda d: "deadline 3" in d.find_element(By.ID, "chart").text, "the new chart")
    tighter = api(server, "plan/train", api_query(page))
    wait(page, lambda d: len(points(d)) == len(tighter["options"]), "the new points")
    assert sorted(points(page)) != sorted(drawn)
    assert all(x <= 3 for _, x, _ in points(page))
    assert "pick" not in address(page)


def _explained(driver) -> dict:
    """What the explain box shows: the verdict's status and rank, the comparison table's rows (this, best,
    difference, each the exact data-value) and the bars of the step-time terms."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#explain-table tbody tr')].map((tr) => [tr.dataset.key, "
        "[...tr.querySelectorAll('td')].map((td) => Number(td.dataset.value))])"
    )
    bars = _attrs(driver, "#explain-chart rect[data-series]", ("data-series", "data-category", "data-value"))
    verdict = driver.find_element(By.ID, "explain-verdict")
    return {
        "status": verdict.get_attribute("data-status"),
        "rank": verdict.get_attribute("data-rank"),
        "text": verdict.text,
        "rows": dict(rows),
        "bars": {(series, category): float(value) for series, category, value in bars},
    }


def _expected_rows(versus: dict) -> dict:
    keys = ("time_s", "cost_usd", "gpus", "gpu_hours", "usd_per_gpu_hour", "step_s", "mfu", "peak_memory_bytes")
    rows = {k: [versus[k]["this"], versus[k]["best"], versus[k]["difference"]] for k in keys}
    for group, t in versus["memory_bytes"].items():
        rows[f"memory_bytes.{group}"] = [t["this"], t["best"], t["difference"]]
    return rows


def test_plan_page_explains_a_layout_with_the_apis_numbers(page, server, shots):
    """ "What about my layout?": the explain box shows the answer's rank or pruning reason, and its comparison with
    option #1 (the table and the bars of the step-time terms) are the API's numbers; the layout is in the address."""
    page.get(server + "/?" + urlencode(PLAN_QUERY))
    wait(page, lambda d: d.find_element(By.ID, "chosen").get_attribute("data-bands") == "loaded", "the plan")
    assert not page.find_element(By.ID, "explain-result").is_displayed()
    plain = api(server, "plan/train", api_query(page))
    assert "explain" not in plain or plain["explain"] is None

    # start from the first option whose layout differs from every better one (several options are one layout on
    # different offers, and --explain takes a layout's best offer): a row of the table picks it, and its layout
    # ranks where it is drawn
    seen = []
    for i, o in enumerate(plain["options"]):
        key = (o["gpu"], o["gpus"], json.dumps(o["layout"], sort_keys=True))
        if i and key not in seen:
            break
        seen.append(key)
    else:
        pytest.fail("every option drawn is one layout")
    page.find_element(By.CSS_SELECTOR, "#options-box summary").click()
    page.find_element(By.CSS_SELECTOR, f'#options tbody tr[data-id="{i}"] td:nth-child(4)').click()
    wait(page, lambda d: f"Option #{i + 1}" in d.find_element(By.ID, "headline").text, "the option from its row")
    page.find_element(By.ID, "explain-picked").click()
    layout = page.find_element(By.CSS_SELECTOR, "#explain-form [name=explain]").get_attribute("value")
    assert layout.startswith("gpu=h100-sxm-80gb,tp=")
    page.find_element(By.CSS_SELECTOR, "#explain-form button[type=submit]").click()
    wait(page, lambda d: d.find_element(By.ID, "explain-verdict").get_attribute("data-rank"), "the explanation")
    assert address(page)["explain"] == layout and address(page)["pick"] == str(i)
    record = api(server, "plan/train", api_query(page))
    e = record["explain"]
    assert e["status"] == "option" and e["shown"] and e["rank"] == i + 1
    got = _explained(page)
    assert got["status"] == "option" and got["rank"] == str(i + 1) and f"Rank {i + 1} of" in got["text"]
    assert got["rows"] == _expected_rows(e["versus_best"])
    assert got["rows"]["time_s"][0] == pytest.approx(record["options"][i]["time_s"], rel=1e-9)  # the option drawn
    parts = e["versus_best"]["time_by_part_s"]
    assert got["bars"] == {
        **{("your layout", k.replace("_", " ")): t["this"] for k, t in parts.items()},
        **{("option #1", k.replace("_", " ")): t["best"] for k, t in parts.items()},
    }

    # a layout the search prunes (full recompute where none fits: dominated), explained by the API's reason
    field = page.find_element(By.CSS_SELECTOR, "#explain-form [name=explain]")
    field.clear()
    field.send_keys("tp=2,pp=1,dp=16,micro_batch=1,recompute=full,zero=1")
    field.send_keys(Keys.ENTER)
    wait(page, lambda d: d.find_element(By.ID, "explain-verdict").get_attribute("data-status") == "pruned", "pruned")
    record = api(server, "plan/train", api_query(page))
    e = record["explain"]
    got = _explained(page)
    assert e["status"] == "pruned" and e["pruned_why"] in got["text"] and got["rank"] is None
    assert got["rows"] == _expected_rows(e["versus_best"])
    assert got["bars"][("your layout", "recompute")] == e["versus_best"]["time_by_part_s"]["recompute"]["this"] > 0
    # not among the options: drawn as its own point
    assert points(page, '#chart svg .pt[data-id="explain"]') == [
        ("explain", e["estimate"]["time_s"] / 86400, e["estimate"]["cost_usd"])
    ]
    page.execute_script("document.querySelector('#options-box').open = false")
    screenshot(page, shots, "ui-plan-explain-chart", at="#chart")
    screenshot(page, shots, "ui-plan-explain", docs=True, at="#explain-box")

    # the address keeps it: a reload shows the same explanation; Back shows the previous layout's
    page.refresh()
    wait(page, lambda d: d.find_element(By.ID, "explain-verdict").get_attribute("data-status") == "pruned", "reload")
    assert _explained(page) == got
    page.back()
    wait(page, lambda d: d.find_element(By.ID, "explain-verdict").get_attribute("data-rank") == str(i + 1), "back")

    # a layout the API refuses: its one line under the form, and the plan still shown
    field = page.find_element(By.CSS_SELECTOR, "#explain-form [name=explain]")
    field.clear()
    field.send_keys("tp=x")
    field.send_keys(Keys.ENTER)
    wait(page, lambda d: "tp must be a whole number" in d.find_element(By.ID, "explain-status").text, "the error")
    assert page.find_element(By.ID, "explain-status").get_attribute("class") == "error"
    assert not page.find_element(By.ID, "explain-result").is_displayed()
    assert page.find_element(By.ID, "result").is_displayed() and len(points(page)) == len(record["options"])
    # the browser logs the refused request (a 400) as an error: that one, and nothing else
    severe = [e["message"] for e in page.get_log("browser") if e["level"] == "SEVERE"]
    assert severe and all("explain=tp%3Dx" in m and "status of 400" in m for m in severe), severe
    page.find_element(By.ID, "explain-clear").click()
    assert "explain" not in address(page)


def test_plan_chart_brings_the_picked_and_hovered_points_to_the_front_and_reaches_every_option(page, server):
    """Near-equal options overlap: the picked point is drawn last (on top), a hovered one comes to the front, a
    click on a stack that holds the picked option picks the next one in it, and each table row picks its option."""
    from selenium.webdriver.common.action_chains import ActionChains

    page.get(server + "/?" + urlencode(PLAN_QUERY))
    wait(page, lambda d: d.find_element(By.ID, "chosen").get_attribute("data-bands") == "loaded", "the plan")
    record = api(server, "plan/train", api_query(page))
    n = len(record["options"])
    assert n >= 4

    def on_top() -> str:
        return page.execute_script("return document.querySelector('#chart svg .points').lastElementChild.dataset.id")

    assert on_top() == "0"
    page.find_element(By.CSS_SELECTOR, "#options-box summary").click()
    for i in (n - 1, 1):  # every row picks its option: the last one and another
        page.find_element(By.CSS_SELECTOR, f'#options tbody tr[data-id="{i}"]').click()
        wait(page, lambda d, i=i: d.find_element(By.CSS_SELECTOR, "#chart .pt.selected").get_attribute("data-id")
             == str(i), f"option #{i + 1}")  # fmt: skip
        assert on_top() == str(i) and address(page)["pick"] == str(i)
        assert shown(page, "#card-time .big") == record["options"][i]["time_s"]
        picked_rows = page.find_elements(By.CSS_SELECTOR, "#options tbody tr.picked")
        assert [r.get_attribute("data-id") for r in picked_rows] == [str(i)]
    # the row's button is reachable by keyboard
    page.find_element(By.CSS_SELECTOR, '#options tbody tr[data-id="2"] button').send_keys(Keys.ENTER)
    wait(page, lambda d: address(d).get("pick") == "2", "option #3 by keyboard")
    # hovering an unpicked point brings it to the front (one the pointer can reach at its centre)
    reachable = page.execute_script(
        "return [...document.querySelectorAll('#chart svg .pt:not(.selected)')].map((g) => {"
        " const r = g.querySelector('circle, rect, polygon').getBoundingClientRect();"
        " const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);"
        " return hit && hit.closest('.pt') === g ? g.dataset.id : null; }).filter((id) => id !== null)"
    )
    assert reachable
    hovered = reachable[0]
    assert on_top() != hovered
    ActionChains(page).move_to_element(page.find_element(By.CSS_SELECTOR, f'#chart .pt[data-id="{hovered}"]')).perform()
    wait(page, lambda d: on_top() == hovered, "the hovered point on top")

    # a stack of equal points (the chart module itself, with three options drawn on one spot): clicking it again
    # goes round all three, and the picked one is always drawn on top
    script = """
    const done = arguments[0];
    import("/static/chart.js").then(({ scatter }) => {
      const seen = [];
      let selected = "b";
      const draw = () => scatter({ points: [
          { x: 1, y: 1, group: "g", id: "a", label: "a" }, { x: 1, y: 1, group: "g", id: "b", label: "b" },
          { x: 1.0001, y: 1, group: "g", id: "c", label: "c" }, { x: 10, y: 10, group: "g", id: "d", label: "d" }],
        xLog: true, yLog: true, xFormat: String, yFormat: String, xLabel: "x", yLabel: "y", selected,
        onSelect: (id) => { seen.push(id); selected = id; } });
      const tops = [];
      for (let k = 0; k < 4; k++) {
        const svg = draw();
        const layer = svg.querySelector(".points");
        tops.push(layer.lastElementChild.dataset.id);
        layer.lastElementChild.dispatchEvent(new MouseEvent("click", { bubbles: true }));
      }
      const stacks = [...draw().querySelectorAll(".pt")].map((g) => [g.dataset.id, g.dataset.stack || null]);
      done({ seen, tops, stacks });
    }, (e) => done({ error: String(e) }));
    """
    got = page.execute_async_script(script)
    assert "error" not in got, got
    assert got["tops"] == ["b", "c", "a", "b"] and got["seen"] == ["c", "a", "b", "c"]
    assert sorted(got["stacks"]) == [["a", "3"], ["b", "3"], ["c", "3"], ["d", None]]


def test_train_page_sliders_replan_and_the_address_keeps_the_state(page, server, shots):
    query = {
        "model": "llama-3.1-8b",
        "gpu": "h100",
        "gpus": "8",
        "zero": "3",
        "tokens": "1T",
        "recompute": "full",
        "offer": "aws-p5.48xlarge-us-east-1-ondemand",
    }
    page.get(server + "/train?" + urlencode(query))
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#figures tbody tr"), "the plan")
    record = api(server, "train", api_query(page))
    for field, value in query.items():
        assert api_query(page)[field] == value
    t = record["time"]
    assert values(page, "#figures tbody tr:first-child td") == [t["seconds"], t["seconds_p10"], t["seconds_p90"]]
    assert values(page, "#figures tbody tr:last-child td") == [
        record["cost"]["usd"],
        record["cost"]["usd_p10"],
        record["cost"]["usd_p90"],
    ]
    assert shown(page, '#memory rect[data-part="activations"]') == record["memory"]["activations_bytes"]
    screenshot(page, shots, "ui-train", docs=True)
    before = shown(page, '#memory rect[data-part="activations"]')

    slider = page.find_element(By.CSS_SELECTOR, "input[name=micro_batch]")
    slider.send_keys(Keys.ARROW_RIGHT)
    wait(page, lambda d: address(d).get("micro_batch") == "2", "the address to follow the slider")
    bigger = api(server, "train", api_query(page))
    wait(
        page,
        lambda d: shown(d, '#memory rect[data-part="activations"]') == bigger["memory"]["activations_bytes"],
        "bars",
    )
    assert bigger["memory"]["activations_bytes"] > before
    assert page.find_element(By.CSS_SELECTOR, 'output[for="micro_batch"]').text == "2"

    page.refresh()
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#figures tbody tr"), "the reloaded plan")
    assert page.find_element(By.CSS_SELECTOR, "input[name=micro_batch]").get_attribute("value") == "2"
    assert shown(page, '#memory rect[data-part="activations"]') == bigger["memory"]["activations_bytes"]
    assert shown(page, "#figures tbody tr:first-child td") == bigger["time"]["seconds"]


def test_serve_page_options_under_the_slo_and_their_latency_at_load(page, server, shots):
    page.get(server + "/serve")
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#model-ids option"), "the model list")
    fill(page, "model", "llama-3.1-8b")
    fill(page, "qps", "5")
    fill(page, "max_tpot", "50ms")
    fill(page, "gpu", "h100,b200,l40s")
    submit(page)
    wait(page, lambda d: d.find_element(By.ID, "chosen").get_attribute("data-load") == "loaded", "the options")
    record = api(server, "plan/serve", api_query(page))
    best = record["options"][0]
    assert shown(page, "#card-ttft .big") == best["ttft_s"] and shown(page, "#card-tpot .big") == best["tpot_s"]
    assert shown(page, "#card-throughput .big") == best["tokens_per_s"]
    assert shown(page, "#card-cost .big") == best["usd_per_million_output_tokens"]
    # the launch line shown first is the engine the option was estimated for
    assert page.find_element(By.ID, "launch-text").text == best["launch"][best["engine"]]
    assert all(o["tpot_s"] <= 0.05 for o in record["options"])
    drawn = sorted(points(page), key=lambda p: int(p[0]))
    assert [(x, y) for _, x, y in drawn] == [(o["tokens_per_s"], o["tpot_s"]) for o in record["options"]]
    assert "SLO: TPOT 50 ms" in page.find_element(By.ID, "chart").text
    at_load = api(
        server,
        "serve",
        {
            "model": "llama-3.1-8b",
            "gpu": best["gpu"],
            "tp": best["tp"],
            "pp": best["pp"],
            "replicas": best["replicas"],
            "weights": best["weights"],
            "kv_cache": best["kv_cache"],
            "engine": best["engine"],
            "qps": "5",
            "offer": best["offer"]["id"],
            "prompt_tokens": "512",
            "output_tokens": "256",
            "max_tpot": "50ms",
        },
    )
    lat = at_load["latency"]
    assert values(page, "#load-ttft span") == [lat["ttft_s"], lat["ttft_s_p10"], lat["ttft_s_p90"]]
    assert values(page, "#load-tpot span") == [lat["tpot_s"], lat["tpot_s_p10"], lat["tpot_s_p90"]]
    # the offer's instance against one replica (serve --offer): host RAM and local disk, needed and had
    checks = at_load["machine"]["instance_checks"]
    assert page.find_element(By.ID, "instance-box").is_displayed()
    ram, disk = checks["host_ram"], checks["local_disk"]
    assert values(page, '#instance-checks tr[data-check="host_ram"] td[data-value]') == [
        ram["needed_bytes_per_node"],
        ram["host_memory_bytes_per_node"],
    ]
    assert values(page, '#instance-checks tr[data-check="local_disk"] td[data-value]') == [
        disk["needed_bytes_per_node"],
        disk["local_nvme_bytes_per_node"],
    ]
    assert (
        page.find_element(By.CSS_SELECTOR, '#instance-checks tr[data-check="host_ram"] td:last-child').text
        == (ram["status"])
    )
    assert best["offer"]["instance"] in page.find_element(By.ID, "instance-name").text
    screenshot(page, shots, "ui-serve")

    Select(page.find_element(By.ID, "y-axis")).select_by_value("ttft_s")
    wait(page, lambda d: address(d).get("y") == "ttft_s", "the address to keep the axis")
    after = sorted(points(page), key=lambda p: int(p[0]))
    assert [y for _, _, y in after] == [o["ttft_s"] for o in record["options"]] and after != drawn

    page.refresh()
    wait(page, lambda d: d.find_element(By.ID, "chosen").get_attribute("data-load") == "loaded", "the reload")
    assert Select(page.find_element(By.ID, "y-axis")).first_selected_option.get_attribute("value") == "ttft_s"
    assert sorted(points(page), key=lambda p: int(p[0])) == after


def test_gpus_page_compares_side_by_side_with_peak_bars(page, server, shots):
    page.get(server + "/gpus")
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#compare tbody tr"), "the comparison")
    catalog = {a["id"]: a for a in api(server, "gpus")["accelerators"]}
    ids = address(page).get("ids", "").split(",") if "ids" in address(page) else None
    chosen = page.find_element(By.CSS_SELECTOR, "[name=ids]").get_attribute("value").split(",")
    assert ids in (None, chosen)
    memory = values(page, '#compare tr[data-key="memory_bytes"] td')
    assert memory == [catalog[i]["memory_bytes"] for i in chosen]
    bf16 = values(page, '#compare tr[data-key="peak_flops_per_s.bf16"] td')
    assert bf16 == [catalog[i]["peak_flops_per_s"]["bf16"] for i in chosen]
    # integer peaks are tera-operations per second (TOPS), floating-point ones TFLOP/s: the table and the bars
    row = page.find_element(By.CSS_SELECTOR, '#compare tr[data-key="peak_flops_per_s.int8"] th').text
    assert row == "int8 dense peak (TOPS)"
    assert page.find_element(By.CSS_SELECTOR, '#compare tr[data-key="peak_flops_per_s.bf16"] th').text.endswith(
        "(TFLOP/s)"
    )
    labels = page.execute_script(
        "return [...document.querySelectorAll('#chart rect[data-category]')].map((r) => "
        "[r.dataset.category, r.nextElementSibling.textContent])"
    )
    assert {c for c, _ in labels} >= {"int8", "bf16"}
    assert all(text.endswith(" TOPS" if c == "int8" else " TFLOP/s") for c, text in labels), labels
    bars_before = values(page, "#chart rect[data-series]")
    screenshot(page, shots, "ui-gpus")

    page.find_element(By.CSS_SELECTOR, '#picker input[value="l40s"]').click()
    wait(page, lambda d: address(d).get("ids", "").endswith(",l40s"), "the address to keep the ticked GPU")
    l40s = catalog["l40s"]
    drawn = values(page, f'#chart rect[data-series="{l40s["name"]}"]')
    assert drawn == [v for v in l40s["peak_flops_per_s"].values() if v is not None]
    assert values(page, "#chart rect[data-series]") != bars_before

    page.refresh()
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#compare tbody tr"), "the reload")
    assert page.find_element(By.CSS_SELECTOR, '#picker input[value="l40s"]').is_selected()
    assert values(page, '#compare tr[data-key="memory_bytes"] td')[-1] == l40s["memory_bytes"]


def test_rent_vs_buy_page_marks_the_crossover_and_follows_the_utilization_slider(page, server, shots):
    page.get(server + "/tco")
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-util [data-mark]"), "the first comparison")
    Select(page.find_element(By.CSS_SELECTOR, "select[name=gpu]")).select_by_value("h100-sxm-80gb")
    fill(page, "gpus", "16")
    submit(page)
    wait(page, lambda d: address(d).get("gpus") == "16", "the address")
    record = api(server, "tco", api_query(page))
    rental = record["rentals"][0]
    wait(page, lambda d: shown(d, "#card-owned .big") == record["owned"]["total_usd"], "16 GPUs owned")
    assert shown(page, "#card-rent .big") == rental["rent_usd"]
    assert shown(page, "#card-break .big") == rental["break_even_utilization"]
    crossover = page.find_element(By.CSS_SELECTOR, '#chart-util line[data-mark^="crossover"]')
    assert float(crossover.get_attribute("data-x")) == rental["break_even_utilization"]
    owned_line = values(page, "#chart-util [data-y]", "data-y")
    for u in (0.2, 1.0):
        at = api(server, "tco", {**api_query(page), "utilization": u})
        assert at["owned"]["total_usd"] in owned_line
    screenshot(page, shots, "ui-tco")

    page.find_element(By.CSS_SELECTOR, "input[name=utilization]").send_keys(Keys.ARROW_LEFT)
    wait(page, lambda d: address(d).get("utilization") == "0.65", "the address to follow the slider")
    lower = api(server, "tco", api_query(page))
    wait(page, lambda d: shown(d, "#card-owned .big") == lower["owned"]["total_usd"], "the new figures")
    you = page.find_element(By.CSS_SELECTOR, '#chart-util line[data-mark^="you"]')
    assert float(you.get_attribute("data-x")) == 0.65
    assert shown(page, "#card-rent .big") == lower["rentals"][0]["rent_usd"]

    page.refresh()
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-util [data-mark]"), "the reload")
    assert page.find_element(By.CSS_SELECTOR, "input[name=utilization]").get_attribute("value") == "0.65"
    assert shown(page, "#card-owned .big") == lower["owned"]["total_usd"]
    assert page.find_element(By.CSS_SELECTOR, "[name=gpus]").get_attribute("value") == "16"


def test_validate_page_draws_predicted_against_published_by_class(page, server, shots):
    page.get(server + "/validate")
    wait(page, lambda d: points(d), "the first chart")
    Select(page.find_element(By.CSS_SELECTOR, "[name=category]")).select_by_visible_text("training")
    record = api(server, "validate", {"category": "training"})
    quantity = "tokens_per_s_per_gpu"  # the quantity with the most values comes first
    rows = [r for r in record["rows"] if r["quantity"] == quantity and r["published"] > 0 and r["predicted"] > 0]
    expected = [(r["published"], r["predicted"]) for r in rows]
    wait(page, lambda d: [(x, y) for _, x, y in sorted(points(d), key=lambda p: int(p[0]))] == expected, "the chart")
    assert address(page)["category"] == "training" and address(page)["quantity"] == quantity
    drawn = sorted(points(page), key=lambda p: int(p[0]))
    summary = record["summary"]["training"]["gpu_generation"]
    assert values(page, "#summary tbody td:nth-of-type(2)") == [s["mae"] for s in summary.values()]
    legend = page.find_element(By.ID, "chart").text
    screenshot(page, shots, "ui-validate")

    Select(page.find_element(By.CSS_SELECTOR, "[name=by]")).select_by_value("precision")
    wait(page, lambda d: address(d).get("by") == "precision", "the address to keep the class")
    assert page.find_element(By.ID, "chart").text != legend
    assert values(page, "#summary tbody td:nth-of-type(2)") == [
        s["mae"] for s in record["summary"]["training"]["precision"].values()
    ]

    page.refresh()
    wait(page, lambda d: points(d), "the reload")
    assert (
        Select(page.find_element(By.CSS_SELECTOR, "[name=by]")).first_selected_option.get_attribute("value")
        == "precision"
    )
    assert sorted(points(page), key=lambda p: int(p[0])) == drawn


@pytest.mark.parametrize(
    ("address", "ready", "button", "chart", "colours"),
    [
        ("/train?model=llama-3.1-8b&gpu=h100&gpus=8", "#memory svg", "#memory-downloads", "#memory svg", (BLUE_RGB,)),
        ("/gpus", "#chart svg rect", "#chart-downloads", "#chart svg", (BLUE_RGB,)),
        ("/tco", "#chart-util [data-mark]", "#util-downloads", "#chart-util svg", (BLUE_RGB, GRID_RGB)),
        ("/tco", "#chart-time svg path", "#time-downloads", "#chart-time svg", (BLUE_RGB, GRID_RGB)),
        ("/validate", "#chart svg .pt", "#chart-downloads", "#chart svg", (BLUE_RGB, GRID_RGB)),
        (
            "/serve?model=llama-3.1-8b&qps=5&max_tpot=50ms&gpu=h100",
            "#chart svg .pt",
            "#chart-downloads",
            "#chart svg",
            (BLUE_RGB, GRID_RGB),
        ),
    ],
    ids=["train-memory", "gpus-peaks", "tco-utilization", "tco-time", "validate", "serve"],
)
def test_every_chart_downloads_as_a_png(page, server, downloads_dir, address, ready, button, chart, colours):
    """Beside CSV and JSON, each chart's PNG button saves the chart as a PNG (the Plan page's is checked in its own
    test), drawn under the page's CSP: the page fixture fails on any console error, a CSP refusal included."""
    page.get(server + address)
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, ready), "the chart")
    png_chart(page, downloads_dir, f"{button} [data-download$=png]", chart, colours)


def test_local_page_says_plainly_when_no_gpu_is_detected(page, server, shots):
    record = api(server, "local/detect")
    page.get(server + "/local")
    wait(page, lambda d: not d.find_element(By.ID, "result").get_attribute("hidden"), "the detection")
    if record["gpus"]:  # a machine with a GPU: each is listed
        assert len(page.find_elements(By.CSS_SELECTOR, "#gpus tbody tr")) == len(record["gpus"])
    else:
        notice = page.find_element(By.ID, "gpu-notice").text
        assert notice.startswith("No GPU detected.") and record["gpu_status"] in notice
        assert not page.find_element(By.ID, "gpus-box").is_displayed()
    assert shown(page, "#host tbody tr:nth-child(5) td") == record["host"]["memory_bytes"]
    # nothing saved yet: each listing says where a saved file would be listed from and the command that saves it
    profiles, runs = api(server, "local/profiles"), api(server, "local/runs")
    assert profiles["profiles"] == [] and runs["runs"] == []
    assert profiles["save_with"] in page.find_element(By.ID, "profiles-notice").text
    notice = page.find_element(By.ID, "runs-notice").text
    assert runs["watch_with"] in notice and "gpuplan local diagnose FILE" in notice
    assert not any(page.find_element(By.ID, table).is_displayed() for table in ("profiles", "runs"))
    screenshot(page, shots, "ui-local")
    page.refresh()
    wait(page, lambda d: not d.find_element(By.ID, "result").get_attribute("hidden"), "the reload")


def test_local_page_lists_detected_gpus(page, server, monkeypatch):
    from gpuplan.local import suite

    real = suite.detect_report

    def with_a_gpu(accelerators):
        report = real(accelerators)
        gpu = {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "pci_device_id": "0x2330",
            "pci_bus_id": "00000000:18:00.0",
            "memory_total_bytes": 85520809984,
            "memory_free_bytes": 84000000000,
            "compute_capability": [9, 0],
            "power_limit_w": 700.0,
            "pcie_gen": 5,
            "pcie_width": 16,
            "nvlink_active_links": 18,
            "catalog_id": "h100-sxm-80gb",
            "supports_bf16": True,
            "supports_fp8": True,
        }
        record = {
            **report.record,
            "gpus": [gpu],
            "gpu_status": "ok",
            "driver_version": "580.65",
            "cuda_version": "13.0",
        }
        return suite.DetectReport(report.detection, record)

    monkeypatch.setattr(suite, "detect_report", with_a_gpu)
    page.get(server + "/local")
    wait(page, lambda d: not d.find_element(By.ID, "result").get_attribute("hidden"), "the detection")
    assert page.find_element(By.ID, "gpu-notice").text.startswith("1 GPU detected: NVIDIA H100 80GB HBM3.")
    cells = page.find_elements(By.CSS_SELECTOR, "#gpus tbody tr td")
    assert cells[2].text == "h100-sxm-80gb" and float(cells[3].get_attribute("data-value")) == 85520809984


def test_local_page_lists_saved_bench_profiles_and_diagnosed_watch_runs(page, server, shots, downloads_dir):
    from test_web import PROFILE, _trace_lines

    config = Path(os.environ["GPUPLAN_CONFIG_DIR"])
    (config / "profiles").mkdir(parents=True)
    (config / "watch").mkdir()
    (config / "profiles" / "node-7-h100.json").write_text(json.dumps(PROFILE))
    (config / "profiles" / "old.json").write_text('{"kind": "calibration", "schema_version": 0}')
    (config / "watch" / "starved.jsonl").write_text(_trace_lines(20))
    (config / "watch" / "busy.jsonl").write_text(_trace_lines(97))
    page.get(server + "/local")
    wait(page, lambda d: not d.find_element(By.ID, "runs-box").get_attribute("hidden"), "the listings")
    profiles, runs = api(server, "local/profiles"), api(server, "local/runs")
    rows = page.find_elements(By.CSS_SELECTOR, "#profiles tbody tr")
    assert len(rows) == 1 + len(PROFILE["results"])  # the unreadable one on one row, with its reason
    assert rows[0].text.startswith("node-7-h100.json") and "NVIDIA H100 80GB HBM3" in rows[0].text
    assert rows[-1].text.startswith("old.json") and profiles["profiles"][1]["error"] in rows[-1].text
    assert values(page, "#profiles tbody td[data-value]") == [
        x for r in PROFILE["results"] for x in (r["value"], r["fraction_of_datasheet"])
    ]
    assert not page.find_element(By.ID, "profiles-notice").is_displayed()
    cells = page.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    assert [c.find_element(By.TAG_NAME, "th").text for c in cells] == ["busy.jsonl", "starved.jsonl"]
    for row, run in zip(cells, runs["runs"], strict=True):
        d = run["diagnosis"]
        assert values(page, f"#runs tbody tr:nth-child({cells.index(row) + 1}) td strong") == [
            v["confidence"] for v in d["verdicts"]
        ]
        assert [e.text for e in row.find_elements(By.CSS_SELECTOR, "td strong")] == [v["id"] for v in d["verdicts"]]
    assert "input-bound" in cells[1].text and "input-bound" not in cells[0].text
    screenshot(page, shots, "ui-local-saved")
    rows = list(csv.DictReader(io.StringIO(download(page, downloads_dir, "#runs-downloads [data-download$=csv]"))))
    assert [r["file"] for r in rows] == ["busy.jsonl", "starved.jsonl"]
    assert json.loads(download(page, downloads_dir, "#profiles-downloads [data-download$=json]")) == profiles


def test_an_uploaded_config_json_becomes_the_model(page, server, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    page.get(server + "/train")
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#model-ids option"), "the model list")
    page.find_element(By.ID, "config-file").send_keys(str(config))
    wait(page, lambda d: address(d).get("model", "").startswith("upload:"), "the uploaded model in the address")
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, '#memory rect[data-part="weights"]'), "its plan")
    model = page.find_element(By.CSS_SELECTOR, "[name=model]").get_attribute("value")
    assert model.startswith("upload:") and address(page)["model"] == model
    record = api(server, "train", api_query(page))
    assert shown(page, '#memory rect[data-part="weights"]') == record["memory"]["weights_bytes"]
