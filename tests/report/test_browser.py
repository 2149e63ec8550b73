"""The report in a real browser: headless Chromium through Playwright (Debian's chromium).

Checks what a reader sees after the scripts ran: no console errors, the charts drawn, the
names present, an episode opened from the browser by a click, a screenshot that is not
blank — and that no hostile value from the package executes. In CI (CI=true) a missing
browser fails the test instead of skipping it, so the check cannot silently stop running.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from rollout_cards.report import build_report, write_report
from tests.conftest import FIXTURE_CARDS, REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def _browser():
    if os.environ.get("CI") == "true":
        assert CHROMIUM, ".ci/run installs chromium (apt-get install chromium); it is missing"
    elif CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium); the browser test needs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the browser extra (playwright) is not installed")
    return sync_api


def _png_distinct_rows(png: bytes) -> int:
    """How many different pixel rows a PNG has (a blank page has one)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos : pos + 8])
        chunk = png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width = struct.unpack(">I", chunk[:4])[0]
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + width * 4 if len(raw) % (1 + width * 4) == 0 else 1 + width * 3
    return len({raw[i + 1 : i + stride] for i in range(0, len(raw), stride)})


def _open(page, path: Path) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    dialogs: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    page.wait_for_selector("#episode-list tbody tr")
    return problems, dialogs


def test_report_in_chromium(tmp_path: Path) -> None:
    sync_api = _browser()
    rules = REPO / "fixtures" / "rules"
    out = write_report(build_report(FIXTURE_CARDS / "synthetic", [rules / "errors_excluded.yaml", rules / "pass_at_2.yaml",
                                                              rules / "profit_mean.yaml"]), tmp_path / "report.html")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        problems, dialogs = _open(page, out)
        charts = page.locator("svg.chart").count()
        assert charts >= 9, charts
        assert page.locator("svg.forest circle").count() >= 8  # one point per rule and group
        body = page.inner_text("body")
        for name in ("synthetic.success_rate", "synthetic.errors_excluded", "agent=alpha", "agent=beta"):
            assert name in body
        rows = page.locator("#episode-list tbody tr").count()
        assert rows == 120
        page.select_option("#f-status", "error")
        errors = page.locator("#episode-list tbody tr").count()
        assert 0 < errors < rows
        page.locator("#episode-list button.open").first.click()
        detail = page.locator("#episode-detail")
        assert detail.get_attribute("data-open")
        assert page.locator("#episode-detail .step").count() > 0
        assert "error" in page.inner_text("#episode-detail")
        page.evaluate("window.scrollTo(0, 0)")
        shot = page.screenshot(full_page=False)
        browser.close()
    assert problems == [] and dialogs == []
    assert _png_distinct_rows(shot) > 50
    if os.environ.get("RCARD_SCREENSHOT"):
        Path(os.environ["RCARD_SCREENSHOT"]).write_bytes(shot)


def test_hostile_card_runs_nothing(tmp_path: Path, hostile_card: Path) -> None:
    sync_api = _browser()
    out = write_report(build_report(hostile_card, []), tmp_path / "evil.html")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        problems, dialogs = _open(page, out)
        for i in range(page.locator("#episode-list button.open").count()):
            page.locator("#episode-list button.open").nth(i).click()
        pwned = page.evaluate("typeof window.__pwned")
        injected = page.evaluate("document.querySelectorAll('#episode-detail img, #episode-detail script, "
                                 "#episode-detail svg, main a[href^=\"javascript\"]').length")
        text = page.inner_text("#episode-detail")
        browser.close()
    assert pwned == "undefined" and dialogs == [] and injected == 0
    assert "<script>window.__pwned=1</script>" in text  # shown as text
    assert problems == []
