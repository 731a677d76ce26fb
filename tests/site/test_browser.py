"""The built site in headless Chromium: offline, no console errors, charts drawn, links resolve,
filtering and sorting work, and axe-core finds no serious or critical accessibility issue."""

from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from reviewkit.site.build import build_site

ROOT = Path(__file__).parents[2]
CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / ".test-deps" / "node_modules" / "axe-core" / "axe.min.js"
# The flags the engineering notes found necessary on this machine: no sandbox as root, and no
# background networking (connections are refused and would show as errors).
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip

if not CHROMIUM.exists() or not AXE.exists():
    pytest.fail(
        "browser tests need Debian's chromium and axe-core: run "
        "`sh scripts/install-system-deps.sh --test`",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "out"
    result = build_site(ROOT / "site", out, pdf=True)
    assert not result.failed, [(d.slug, d.error) for d in result.failed]
    return out


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield b
        b.close()


def open_page(browser, path: Path):
    """Load a page from file:// recording every request, console error and page error."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    seen = {"requests": [], "errors": []}
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.goto(path.as_uri(), wait_until="load")
    return page, seen


def pages(site: Path) -> list[Path]:
    return (
        sorted(site.glob("*.html"))
        + sorted(site.glob("trends/*.html"))
        + sorted(site.glob("decisions/*/packet.html"))
    )


def test_every_page_offline_without_errors_and_charts_drawn(site, browser):
    checked = 0
    for path in pages(site):
        page, seen = open_page(browser, path)
        holders = page.locator(".vega-chart").count()
        if holders:
            # vega-embed replaces each static SVG with an interactive view.
            page.wait_for_function(
                "document.querySelectorAll('.vega-interactive svg, .vega-interactive canvas')"
                f".length >= {holders}",
                timeout=20000,
            )
            drawn = page.locator(".vega-chart").evaluate_all(
                "els => els.map(e => e.querySelectorAll('svg, canvas').length)"
            )
            assert all(n >= 1 for n in drawn), (path, drawn)
        assert seen["errors"] == [], (path, seen["errors"])
        off = [u for u in seen["requests"] if urlparse(u).scheme not in ("file", "data")]
        assert off == [], (path, off)
        page.close()
        checked += 1
    assert checked >= 4 + 3  # the site's own pages and three decisions


def test_every_internal_link_resolves(site, browser):
    for path in pages(site):
        page, _ = open_page(browser, path)
        links = page.locator("a[href]").evaluate_all("els => els.map(e => e.href)")
        ids = set(page.locator("[id]").evaluate_all("els => els.map(e => e.id)"))
        for link in links:
            url = urlparse(link)
            assert url.scheme == "file", (path, link)
            target = Path(unquote(url.path))
            assert target.exists(), (path, link)
            if url.fragment and target == path:
                assert url.fragment in ids, (path, link)
        page.close()


def test_filter_and_sort_by_clicking_and_typing(site, browser):
    page, seen = open_page(browser, site / "index.html")
    rows = page.locator("#decisions tbody tr")
    assert rows.count() == 3
    page.locator("#filter").click()
    page.keyboard.type("fp16")
    visible = page.locator("#decisions tbody tr:not([hidden])")
    assert visible.count() == 1 and "fp16" in visible.inner_text()
    assert page.locator("#shown-count").inner_text() == "1 of 3 decisions shown"
    page.locator("#filter").fill("")
    page.locator("#status-filter").select_option("no-go")
    assert visible.count() == 1 and "fp16" in visible.inner_text().lower()
    page.locator("#status-filter").select_option("")
    page.get_by_role("button", name="Red flags").click()
    flags = [int(x) for x in page.locator("#decisions tbody tr td.num").all_inner_texts()]
    assert flags == sorted(flags)
    page.get_by_role("button", name="Red flags").click()
    flags = [int(x) for x in page.locator("#decisions tbody tr td.num").all_inner_texts()]
    assert flags == sorted(flags, reverse=True)
    header = page.locator("th", has=page.get_by_role("button", name="Red flags"))
    assert header.get_attribute("aria-sort") == "descending"
    assert seen["errors"] == []


def test_accessibility_has_no_serious_violations(site, browser):
    for path in pages(site)[:6] + sorted(site.glob("decisions/*/packet.html"))[:1]:
        page, _ = open_page(browser, path)
        page.add_script_tag(path=str(AXE))
        result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        serious = [(v["id"], v["impact"], v["help"], len(v["nodes"])) for v in result["violations"]
                   if v["impact"] in ("serious", "critical")]  # fmt: skip
        assert serious == [], (path.name, serious)
        page.close()
