"""End to end in a real browser: Playwright for Python driving Debian's chromium, headless.

    apt-get install -y chromium        # .ci/run does it when it is missing

Set ``SPIDERSITE_SCREENSHOTS=docs/screenshots`` to refresh the README's screenshots.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, CrawlResult, Site, _serve_site, run_crawl

CHROMIUM = os.environ.get("SPIDERSITE_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "browser-admin-pw"

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"no chromium at {CHROMIUM} (apt-get install chromium)"
)

ANIMALS = [
    ("aardvark", "The aardvark digs burrows and eats ants at night."),
    ("badger", "A badger digs setts; badgers eat worms and ants."),
    ("cheetah", "The cheetah runs fast and hunts antelopes; it rarely eats ants."),
    ("dingo", "The dingo is a wild dog; dingoes do not eat ants."),
    ("echidna", "The echidna eats ants and termites with a long tongue."),
]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrawlResult]:
    gen = _serve_site()
    site: Site = next(gen)
    links = [f"/{name}.html" for name, _ in ANIMALS] + ["/xss.html"]
    site.page("/", "Animals that eat ants", "A list of animals and whether they eat ants.", links)
    for name, body in ANIMALS:
        site.page(f"/{name}.html", name.capitalize(), body, ["/"])
    site.add(
        "/xss.html",
        "<html><head><title>&lt;script&gt;alert(1)&lt;/script&gt;</title></head>"
        "<body>an injection attempt <img src=x onerror=alert(2)></body></html>",
    )
    result = run_crawl(tmp_path_factory.mktemp("browser"), "-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    yield result
    gen.close()


@pytest.fixture(scope="module")
def server(crawled: CrawlResult) -> Iterator[tuple[str, Any]]:
    from werkzeug.serving import make_server

    from search.web import create_app
    from search.web.settings import WebSettings

    settings = WebSettings.from_env(
        str(crawled.data_dir),
        crawled.database_url,
        env={"SPIDERSITE_ADMIN_PASSWORD": PASSWORD},
    )
    app = create_app(settings)
    http = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{http.server_port}", app
    finally:
        http.shutdown()
        http.server_close()
        app.extensions["spidersite.runner"].wait(60)
        app.extensions["spidersite.engine"].dispose()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.dialogs = dialogs
    try:
        yield page
    finally:
        context.close()


def screenshot(page: Any, name: str) -> None:
    folder = os.environ.get("SPIDERSITE_SCREENSHOTS")
    if folder:
        path = Path(folder)
        path = path if path.is_absolute() else ROOT / path
        path.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path / name), full_page=False)


def follow(page: Any, selector: str) -> None:
    """Click what loads a new page, and wait until it has loaded.

    Reading the page right after a bare click (``count()`` does not wait) can read the
    page being left: the search form's result count once read 0 hits that way.
    """
    with page.expect_navigation():
        page.click(selector)


def login(page: Any, base: str) -> None:
    page.goto(base + "/admin/")
    assert "/admin/login" in page.url
    page.fill("input[name=password]", PASSWORD)
    follow(page, "button:has-text('Log in')")
    page.wait_for_url(re.compile(r".*/admin/$"))


def test_search_and_paging(page: Any, server: tuple[str, Any]) -> None:
    base, _ = server
    page.goto(base + "/")
    page.fill("input[name=q]", "eat ants")
    page.select_option("select[name=n]", "10")
    follow(page, "button:has-text('Search')")
    summary = page.inner_text("#summary")
    assert re.match(r"Results 1–\d+ of \d+ for", summary), summary
    assert page.locator("li.hit mark").count() > 0
    screenshot(page, "search.png")
    page.goto(base + "/?q=ants&n=2")
    assert page.inner_text("#summary").startswith("Results 1–2 of")
    follow(page, "a[rel=next]")
    assert page.inner_text("#summary").startswith("Results 3–4 of")
    follow(page, "a[rel=prev]")
    assert page.inner_text("#summary").startswith("Results 1–2 of")
    page.select_option("select[name=mode]", "all")
    page.fill("input[name=q]", "ants termites")
    follow(page, "button:has-text('Search')")
    assert page.locator("li.hit").count() == 1
    assert "echidna" in page.inner_text("li.hit .url")


def test_document_page(page: Any, server: tuple[str, Any]) -> None:
    base, _ = server
    page.goto(base + "/?q=echidna")
    follow(page, "li.hit >> text=page info")
    assert page.inner_text("h1") == "Echidna"
    assert "echidna" in page.inner_text("#words")
    assert "/" in page.inner_text("#outgoing")
    assert "Animals that eat ants" in page.inner_text("#incoming")


def test_xss_page_renders_as_text(page: Any, server: tuple[str, Any]) -> None:
    base, _ = server
    page.goto(base + "/?q=injection")
    assert page.inner_text("li.hit a.title") == "<script>alert(1)</script>"
    follow(page, "li.hit >> text=page info")
    assert page.inner_text("h1") == "<script>alert(1)</script>"
    time.sleep(0.3)
    assert page.dialogs == []


def test_admin_redirects_to_login_when_logged_out(page: Any, server: tuple[str, Any]) -> None:
    base, _ = server
    for path in ("/admin/", "/admin/servers", "/admin/crawls", "/admin/log"):
        page.goto(base + path)
        assert "/admin/login" in page.url, path
        assert page.locator("input[name=password]").count() == 1


def test_admin_add_server_seed_crawl_and_search(
    page: Any, server: tuple[str, Any], site2: Site
) -> None:
    base, _ = server
    site2.page("/", "Platypus home", "The platypus lays eggs", ["/more.html"])
    site2.page("/more.html", "Platypus facts", "A platypus hunts underwater with its bill", [])
    login(page, base)
    follow(page, "a:has-text('Servers')")
    follow(page, "text=Add a server")
    page.fill("#f-url", site2.url)
    page.fill("#f-maxhops", "-2")
    follow(page, "button:has-text('Save')")
    assert "must be ≥ 0" in page.inner_text("#error-maxhops")
    assert "field 'maxhops'" in page.inner_text("#form-errors")
    page.fill("#f-maxhops", "2")
    follow(page, "button:has-text('Save')")
    assert "added" in page.inner_text(".flash")
    page.fill("input[name=url][aria-label='Seed URL']", site2.url)
    follow(page, "button:has-text('Add seed')")
    assert site2.url in page.inner_text("#seeds")
    follow(page, "a:has-text('Crawls')")
    follow(page, "button:has-text('Start crawl')")
    assert "Crawl started" in page.inner_text(".flash")
    # the page refreshes itself while a crawl runs
    from playwright.sync_api import expect

    expect(page.locator("#running")).to_contain_text("No crawl running.", timeout=90_000)
    assert "finished" in page.inner_text("#finished")
    page.goto(base + "/?q=platypus")
    urls = page.locator("li.hit .url").all_inner_texts()
    assert any(site2.url in u for u in urls), urls
    page.goto(base + "/admin/")
    assert page.locator("#chart rect").count() >= 1
    screenshot(page, "admin-overview.png")
