"""The packet's decision brief in headless Chromium at 1280 px: it comes first, every link in
it lands on its evidence section, and nothing in it overlaps."""

from pathlib import Path

import pytest
from runfactory import complete_review, write_review

from reviewkit.render.packet import write_packet

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip

if not CHROMIUM.exists():
    pytest.fail(
        "browser tests need Debian's chromium: run `sh scripts/install-system-deps.sh --test`",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    root = tmp_path_factory.mktemp("brief")
    result = write_packet(write_review(root / "review", complete_review()), root / "out",
                          pdf=False)  # fmt: skip
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(result.html.as_uri(), wait_until="load")
        yield tab, errors
        browser.close()


def test_every_brief_link_lands_on_its_section(page):
    tab, errors = page
    hrefs = tab.eval_on_selector_all(
        "#brief a[href^='#']", "els => els.map(e => e.getAttribute('href'))"
    )
    assert len(hrefs) >= 8
    for href in dict.fromkeys(hrefs):
        tab.evaluate("window.scrollTo(0, 0)")
        tab.click(f"#brief a[href='{href}']")
        tab.wait_for_timeout(50)
        top = tab.evaluate(f"document.querySelector('{href}').getBoundingClientRect().top")
        assert -2 <= top <= 300, (href, top)  # scrolled to the section's heading
    assert errors == []


def test_nothing_in_the_brief_overlaps_at_1280_px(page):
    tab, _ = page
    tab.evaluate("window.scrollTo(0, 0)")
    boxes = tab.eval_on_selector_all(
        "#brief .brief-item, #brief dl.facts > div, #brief figure",
        "els => els.map(e => { const r = e.getBoundingClientRect();"
        " return [e.className || e.tagName, r.left, r.top, r.right, r.bottom]; })",
    )
    assert len(boxes) >= 12
    for i, (name_a, *a) in enumerate(boxes):
        for name_b, *b in boxes[i + 1 :]:
            overlap_x = min(a[2], b[2]) - max(a[0], b[0])
            overlap_y = min(a[3], b[3]) - max(a[1], b[1])
            assert overlap_x <= 1 or overlap_y <= 1, (name_a, a, name_b, b)
    # and nothing runs out of the brief sideways
    right = tab.evaluate("document.querySelector('#brief').getBoundingClientRect().right")
    widest = max(b[3] for b in boxes)
    assert widest <= right + 1
    overflowing = tab.eval_on_selector_all(
        "#brief *",
        "els => els.filter(e => e.scrollWidth > e.clientWidth + 1 &&"
        " getComputedStyle(e).overflowX === 'visible' && e.clientWidth > 0).length",
    )
    assert overflowing == 0
