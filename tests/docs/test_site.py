"""The docs site as a reader meets it: built with `mkdocs build --strict`, served on loopback, and opened
in headless Chromium (Debian's `chromium`; `.ci/run` installs it): the front page, a guide, the state
diagram and the search render, nothing is fetched from outside the site, and a screenshot of each is kept
(under $YUNIPLACE_ARTIFACTS when set, else the test's tmp_path; their paths are recorded)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.docs.browser import Browser, find_chromium
from yuniplace.docsgen import statediagram

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() == "true"
NO_CHROMIUM = (
    "the docs site's browser test needs Debian's chromium (apt-get install chromium), which .ci/run installs; "
    "with CI=true it fails instead of skipping"
)
LOOPBACK = ("http://127.0.0.1:", "data:", "blob:", "about:")


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class names it so
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float]]:
    """The site built as CI builds it, served on loopback: (its URL, seconds the build took)."""
    out = tmp_path_factory.mktemp("site")
    started = time.monotonic()
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    took = time.monotonic() - started
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-4000:]}"
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", took
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    executable = find_chromium()
    if executable is None:
        if IN_CI:
            pytest.fail(NO_CHROMIUM)
        pytest.skip(NO_CHROMIUM)
    opened = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def shots(tmp_path: Path, record_property: Callable[[str, object], None]) -> Callable[[Browser, str], Path]:
    """Keep a screenshot of the page under a name, and record where it is."""
    folder = (
        Path(os.environ["YUNIPLACE_ARTIFACTS"]) / "docs-site" if os.environ.get("YUNIPLACE_ARTIFACTS") else tmp_path
    )
    folder.mkdir(parents=True, exist_ok=True)

    def take(browser: Browser, name: str) -> Path:
        path = browser.screenshot(folder / f"{name}.png")
        assert path.stat().st_size > 10_000, f"{path}: an empty page?"
        record_property(f"screenshot_{name}", str(path))
        print(f"screenshot of the {name}: {path}")
        return path

    return take


def test_the_site_builds_strict_and_its_front_page_renders(
    site: tuple[str, float],
    browser: Browser,
    shots: Callable[[Browser, str], Path],
    record_property: Callable[[str, object], None],
) -> None:
    url, took = site
    record_property("figure", f"mkdocs build --strict took {took:.1f}s")
    browser.open(url)
    assert browser.evaluate("document.querySelector('article h1').textContent.replace('¶', '').trim()") == "yuniplace"
    assert "yuniplace" in browser.evaluate("document.title")
    # The theme's own script ran (the navigation and search are built by it) and the feature table is there.
    browser.wait_for(
        "document.querySelector('.md-search__input') !== null && document.querySelectorAll('.md-nav__link').length > 20"
    )
    headers = browser.evaluate("[...document.querySelectorAll('article table th')].map(th => th.textContent.trim())")
    assert {"yuniplace", "YuniKorn", "Kueue", "Volcano"} <= set(headers), headers
    assert browser.evaluate("document.querySelector('article').getBoundingClientRect().height") > 800
    shots(browser, "front-page")
    outside = [request for request in browser.requests if not request.startswith(LOOPBACK)]
    assert not outside, f"the page fetched from outside the site: {outside}"


def test_a_guide_renders_with_its_navigation(
    site: tuple[str, float], browser: Browser, shots: Callable[[Browser, str], Path]
) -> None:
    url, _ = site
    browser.open(url + "guides/spark/")
    assert browser.evaluate("document.querySelector('article h1').textContent.replace('¶', '').trim()") == "Spark"
    assert browser.evaluate("document.querySelectorAll('article pre code').length") >= 1
    active = browser.evaluate("document.querySelector('.md-nav__link--active')?.textContent.trim()")
    assert active == "Spark", active
    shots(browser, "guide")
    outside = [request for request in browser.requests if not request.startswith(LOOPBACK)]
    assert not outside, f"the page fetched from outside the site: {outside}"


def test_the_state_diagram_is_shown(
    site: tuple[str, float], browser: Browser, shots: Callable[[Browser, str], Path]
) -> None:
    url, _ = site
    browser.open(url + "concepts/lifecycle/")
    browser.evaluate("document.querySelector('svg.state-diagram').scrollIntoView({block: 'center'})")
    box = browser.evaluate(
        "(() => { const r = document.querySelector('svg.state-diagram').getBoundingClientRect();"
        " return {width: r.width, height: r.height, top: r.top, bottom: r.bottom}; })()"
    )
    assert box["width"] > 500 and box["height"] > 200, box
    assert 0 <= box["top"] and box["bottom"] <= browser.evaluate("window.innerHeight"), f"not in view: {box}"
    states = browser.evaluate(
        "[...document.querySelectorAll('svg.state-diagram g.state text')].map(t => t.textContent)"
    )
    assert states == list(statediagram.transitions().states)
    moves = browser.evaluate("document.querySelectorAll('svg.state-diagram g.move path').length")
    assert moves == len(statediagram.table_moves())
    shots(browser, "state-diagram")


def test_the_search_finds_a_setting(
    site: tuple[str, float], browser: Browser, shots: Callable[[Browser, str], Path]
) -> None:
    url, _ = site
    browser.open(url)
    browser.wait_for("document.querySelector('.md-search__input') !== null")
    browser.evaluate("document.querySelector('label[for=\"__search\"]').click(); true")
    browser.evaluate("document.querySelector('.md-search__input').focus(); true")
    browser.type("placeholderTimeoutInSeconds")
    found = browser.wait_for(
        "(() => { const items = [...document.querySelectorAll('.md-search-result__item')];"
        " return items.length && items.map(i => i.textContent).join(' | '); })()",
        timeout_s=30,
    )
    assert "placeholderTimeoutInSeconds" in found, found
    meta = browser.evaluate("document.querySelector('.md-search-result__meta').textContent")
    assert "matching" in meta.lower() or "result" in meta.lower(), meta
    shots(browser, "search")


@pytest.mark.parametrize("page", ["", "getting-started/first-gang/", "getting-started/kind/", "guides/spark/"])
def test_no_command_or_manifest_is_cut_at_the_right_edge(site: tuple[str, float], browser: Browser, page: str) -> None:
    """Commands and manifests keep their lines short enough to show whole; command output (```text)
    wraps instead."""
    url, _ = site
    browser.open(url + page)
    cut = browser.evaluate(
        "[...document.querySelectorAll('article pre > code')]"
        ".filter(c => !c.closest('.language-text') && c.scrollWidth > c.clientWidth + 1)"
        ".map(c => c.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), ''))"
    )
    assert not cut, f"{page or 'the front page'}: code cut at the right edge, its longest lines: {cut}"
    wrapped = browser.evaluate(
        "[...document.querySelectorAll('article .language-text pre > code')]"
        ".filter(c => c.scrollWidth > c.clientWidth + 1).length"
    )
    assert wrapped == 0


def test_event_reasons_are_never_broken_and_the_footer_names_the_licence(
    site: tuple[str, float], browser: Browser, shots: Callable[[Browser, str], Path]
) -> None:
    url, _ = site
    browser.open(url + "reference/events/")
    broken = browser.evaluate(
        "[...document.querySelectorAll('article td:first-child code')]"
        ".filter(c => c.getClientRects().length > 1 || c.scrollWidth > c.clientWidth + 1).map(c => c.textContent)"
    )
    reasons = browser.evaluate("document.querySelectorAll('article td:first-child code').length")
    assert reasons > 20 and not broken, f"event reasons broken across lines: {broken}"
    table = browser.evaluate(
        "(() => { const t = document.querySelector('article table'); return [t.scrollWidth, t.clientWidth]; })()"
    )
    assert table[0] <= table[1] + 1, f"the events table is wider than the page: {table}"
    shots(browser, "events")
    footer = browser.evaluate("document.querySelector('.md-footer-meta').textContent")
    assert "Apache License 2.0" in footer, footer
    links = browser.evaluate("[...document.querySelectorAll('.md-footer-meta a')].map(a => a.href)")
    assert any(link.startswith("https://github.com/") for link in links), links
    assert browser.evaluate("document.querySelector('.md-header .md-logo img') !== null")
