"""The report and the run browser in a real browser: headless Chromium
(tests/browser.py) loads them from file:// and from the test's own
127.0.0.1 server, with no console error, the anomaly sections and plots
visible, nothing from the history executed, and a screenshot that is not
blank."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from matplotlib import image

from history_analysis.report import write_report
from kchaos.serve import serve_in_thread
from tests.browser import Browser

pytestmark = [pytest.mark.spark]

# What the page shows, measured in the browser after layout.
LAYOUT = """JSON.stringify({
  sections: [...document.querySelectorAll("section.anomaly")].map(
      s => [s.id, s.getBoundingClientRect().height]),
  images: [...document.images].map(i => [i.getAttribute("src"), i.complete, i.naturalWidth,
                                          i.getBoundingClientRect().height]),
  scripts: document.scripts.length,
  pwned: typeof window.pwned,
  title: document.title})"""


def not_blank(png: bytes) -> tuple[float, int]:
    """(spread of the pixel values, distinct colours) of a screenshot."""
    pixels = image.imread(io.BytesIO(png), format="png")[..., :3]
    rgb = (pixels * 255).astype(np.uint32)
    # One 24-bit number per pixel, counted in a bin each: a full page is
    # tens of millions of pixels, too many to sort as rows (np.unique's axis=0).
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    colours = np.count_nonzero(np.bincount(packed.ravel(), minlength=1 << 24))
    return float(pixels.std()), int(colours)


@pytest.fixture(scope="module")
def browser():
    with Browser() as browser:
        yield browser


def check_report_page(page, results) -> None:
    assert page.errors == [], page.errors
    shown = json.loads(page.result)
    sections = dict(shown["sections"])
    assert set(sections) == {f"anomaly-{t}" for t in results["counts"]}
    assert all(height > 50 for height in sections.values()), sections
    assert len(shown["images"]) >= 6
    for src, complete, width, height in shown["images"]:
        assert complete and width > 500 and height > 50, (src, width, height)
    assert shown["scripts"] == 0 and shown["pwned"] == "undefined"
    spread, colours = not_blank(page.screenshot)
    assert spread > 0.05 and colours > 50, (spread, colours)


def test_the_report_opens_from_the_run_directory(browser, anomalous_run, tmp_path):
    import shutil
    write_report(anomalous_run)
    copied = tmp_path / "downloaded"            # as from CI artifacts: copied elsewhere
    shutil.copytree(anomalous_run, copied)
    results = json.loads((copied / "results.json").read_text())
    page = browser.visit((copied / "report.html").as_uri(), LAYOUT, full_page=True)
    check_report_page(page, results)
    (tmp_path / "report.png").write_bytes(page.screenshot)


def test_the_run_browser_and_its_reports_in_chromium(browser, anomalous_run, tmp_path):
    import shutil
    store = tmp_path / "store"
    shutil.copytree(anomalous_run, store / "queue" / "20261125T100000")
    write_report(store / "queue" / "20261125T100000")
    server = serve_in_thread(store)
    try:
        listing = browser.visit(server.url, "document.querySelector('td.invalid').textContent")
        assert listing.errors == [] and listing.result == "invalid"
        assert not_blank(listing.screenshot)[1] > 10
        page = browser.visit(server.url + "runs/queue/20261125T100000/report.html", LAYOUT)
        check_report_page(page, json.loads((store / "queue" / "20261125T100000" /
                                            "results.json").read_text()))
    finally:
        server.shutdown()
        server.server_close()
