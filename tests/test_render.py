"""Pages written by JavaScript (``render_js``): crawled through scrapy-playwright and
Debian's chromium, on local sites only.

One crawl with the browser covers every rule that applies to rendered pages (several
servers in one sites file, one browser launch); one crawl of the same site without
``render_js`` shows what a plain crawl misses.  Tests that need the browser skip when
``/usr/bin/chromium`` is missing (``apt-get install chromium``; ``.ci/run`` does it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CrawlResult, Site, _serve_site, free_port, run_crawl
from tests.test_config import refused

CHROMIUM = "/usr/bin/chromium"
needs_browser = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"no browser at {CHROMIUM} (apt-get install chromium) for render_js crawls",
)

# The words and links of the JavaScript pages exist only once their scripts ran: the
# scripts spell them backwards, so neither the HTML nor a link extractor sees them.
SCRIPT = """<script>
function rev(s) {{ return s.split("").reverse().join(""); }}
var p = document.createElement("p");
p.textContent = rev("{text}");
document.getElementById("app").appendChild(p);
{links}
</script>"""
LINK = """var a = document.createElement("a");
a.href = rev("{href}"); a.textContent = "more";
document.getElementById("app").appendChild(a);
"""


def js_page(title: str, text: str, links: list[str] = (), extra: str = "") -> str:  # type: ignore[assignment]
    script = SCRIPT.format(
        text=text[::-1], links="".join(LINK.format(href=href[::-1]) for href in links)
    )
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title></head><body>"
        f'<h1>{title}</h1><div id="app"></div>{extra}{script}</body></html>'
    )


#: The Crawl-delay of the JavaScript site crawled with the browser: longer than the
#: browser takes to render / and reach /made.html without a delay (1.5-1.8 s measured
#: on a loaded 2-core machine), so that the server's log shows the delay.
CRAWL_DELAY = 3


def build_site(site: Site, crawl_delay: int = 1) -> None:
    """The JavaScript site: / writes its article and three links; /made.html (1 hop) is
    plain HTML with a JavaScript link to /deep.html (2 hops); /private.html is forbidden
    by robots.txt; images and fonts are on every page."""
    site.add(
        "/robots.txt",
        f"User-agent: *\nDisallow: /private.html\nCrawl-delay: {crawl_delay}\n",
        content_type="text/plain",
    )
    media = (
        '<img src="/pixel.png" alt="">'
        "<style>@font-face { font-family: f; src: url(/font.woff2); }"
        " body { font-family: f; }</style>"
    )
    site.add(
        "/",
        js_page(
            "Scripted shop",
            "The marmalade quokka sells zeppelins",
            ["/made.html", "/private.html", "/catalog.pdf"],
            extra=media,
        ),
    )
    site.add("/made.html", js_page("Made by script", "a wombat in galoshes", ["/deep.html"]))
    site.add("/deep.html", js_page("Deep", "the narwhal is too deep"))
    site.add("/private.html", js_page("Private", "secret platypus"))
    site.add("/pixel.png", b"\x89PNG\r\n\x1a\n", content_type="image/png")
    site.add("/font.woff2", b"wOF2", content_type="font/woff2")
    site.add("/catalog.pdf", b"%PDF-1.4", content_type="application/pdf")


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[Site, Site, Site]]:
    """The JavaScript site, the site of the other rules (proxy, auth, timeout), and a copy
    of the JavaScript site for the crawl without the browser."""
    generators = [_serve_site() for _ in range(3)]
    js, other, plain = (next(g) for g in generators)
    build_site(js, crawl_delay=CRAWL_DELAY)
    build_site(plain)
    # other acts as the proxy of the (unresolvable) host proxied.test ...
    other.add("//proxied.test/", js_page("Proxied", "the proxied ocelot"))
    # ... and serves pages behind a password, whose script reads a file behind it too.
    other.add(
        "/locked/",
        "<!DOCTYPE html><html><head><title>Locked</title></head><body>"
        '<div id="app"></div><script>var x = new XMLHttpRequest();'
        'x.open("GET", "/locked/data.txt", false); x.send();'
        'var p = document.createElement("p"); p.textContent = x.responseText;'
        'document.getElementById("app").appendChild(p);</script></body></html>',
        auth="alice:s3cret",
    )
    other.add(
        "/locked/data.txt",
        "the authorised armadillo",
        content_type="text/plain",
        auth="alice:s3cret",
    )
    yield js, other, plain
    for g in generators:
        g.close()


def sites_file(folder: Path, text: str) -> str:
    path = folder / "sites.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def rendered(
    sites: tuple[Site, Site, Site], tmp_path_factory: pytest.TempPathFactory
) -> CrawlResult:
    """One crawl through the browser: the JavaScript site (maxhops 1), a server reached
    through a proxy, one behind basic auth, one whose page answers past its read_timeout,
    and one that refuses connections."""
    js, other, _ = sites
    slow_site = _serve_site()
    folder = tmp_path_factory.mktemp("rendered")
    slow = next(slow_site)
    slow.add("/slow/", js_page("Slow", "too slow to wait for"), delay=10)
    refused_port = free_port()
    path = sites_file(
        folder,
        f"""
[defaults]
render_js = true

[[server]]
url = "{js.url}"
maxhops = 1

[[server]]
url = "http://proxied.test/"
proxy = "127.0.0.1:{other.port}"
userobots = false

[[server]]
url = "{other.url}"
seeds = ["{other.url}locked/"]
basic_auth = "alice:s3cret"

[[server]]
url = "{slow.url}"
seeds = ["{slow.url}slow/"]
read_timeout = 2

[[server]]
url = "http://127.0.0.1:{refused_port}/"
""",
    )
    settings = {"RETRY_ENABLED": False, "MEMUSAGE_CHECK_INTERVAL_SECONDS": 1}
    result = run_crawl(folder / "data", "-a", f"sites={path}", settings=settings)
    slow_site.close()
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def plain(sites: tuple[Site, Site, Site], tmp_path_factory: pytest.TempPathFactory) -> CrawlResult:
    """The same JavaScript site crawled without the browser."""
    folder = tmp_path_factory.mktemp("plain")
    path = sites_file(folder, f'[[server]]\nurl = "{sites[2].url}"\nmaxhops = 1\n')
    result = run_crawl(folder / "data", "-a", f"sites={path}")
    assert result.returncode == 0, result.stderr
    return result


def hits(result: CrawlResult, word: str) -> list[str]:
    found = result.search(word, "--json")
    assert found.returncode == 0, found.stderr
    return [h["url"] for h in json.loads(found.stdout)["hits"]]


# -- with the browser -----------------------------------------------------------------


@needs_browser
def test_words_written_by_javascript_are_searchable(
    rendered: CrawlResult, sites: tuple[Site, ...]
) -> None:
    js = sites[0]
    assert hits(rendered, "quokka") == [js.url]
    assert hits(rendered, "zeppelins") == [js.url]
    stats = rendered.stats
    assert stats["render/pages"] >= 3 and stats["playwright/browser_count"] == 1


@needs_browser
def test_links_written_by_javascript_are_followed_within_maxhops(
    rendered: CrawlResult, sites: tuple[Site, ...]
) -> None:
    js = sites[0]
    assert hits(rendered, "wombat") == [js.url + "made.html"]
    # /deep.html is 2 hops away (maxhops = 1); the file is fetched plain, by HEAD.
    assert js.requested("/deep.html") == []
    assert [h.method for h in js.requested("/catalog.pdf")] == ["HEAD"]
    assert js.url + "catalog.pdf" in rendered.urls("file")


@needs_browser
def test_robots_txt_and_crawl_delay_apply(rendered: CrawlResult, sites: tuple[Site, ...]) -> None:
    js = sites[0]
    assert js.requested("/private.html") == []
    assert (js.url + "private.html", "robots") in rendered.error_kinds()
    assert len(js.requested("/robots.txt")) == 1  # fetched plain, once
    assert rendered.stats["crawldelay/robots_delay"] == 1
    # The Crawl-delay spaces the server's three downloads: robots.txt (plain), then the
    # browser's two pages.  Measured from robots.txt, not from the first page: that one
    # reaches the server only once the browser has started, seconds later on a loaded
    # machine, while the slot's delay counts from when Scrapy sent it.
    robots = [h.time for h in js.hits if h.path == "/robots.txt"]
    pages = sorted(h.time for h in js.hits if h.method == "GET" and h.path in ("/", "/made.html"))
    assert len(robots) == 1 and len(pages) == 2, (robots, pages)
    assert pages[0] - robots[0] >= CRAWL_DELAY - 0.1, (robots, pages)
    assert pages[1] - robots[0] >= 2 * CRAWL_DELAY - 0.1, (robots, pages)


@needs_browser
def test_images_media_and_fonts_are_not_fetched(
    rendered: CrawlResult, sites: tuple[Site, ...]
) -> None:
    js = sites[0]
    assert js.requested("/pixel.png") == [] and js.requested("/font.woff2") == []
    assert rendered.stats["render/aborted_requests"] >= 2


@needs_browser
def test_proxy_and_basic_auth_apply(rendered: CrawlResult, sites: tuple[Site, ...]) -> None:
    other = sites[1]
    assert hits(rendered, "ocelot") == ["http://proxied.test/"]
    assert all(h.proxied for h in other.requested("//proxied.test/"))
    # The page and the file its script read, both behind the password.
    assert hits(rendered, "armadillo") == [other.url + "locked/"]
    data = other.requested("/locked/data.txt")
    assert data and any("Authorization" in h.headers for h in data)


@needs_browser
def test_read_timeout_and_failed_renders_are_logged(rendered: CrawlResult) -> None:
    kinds = rendered.error_kinds()
    assert [url for url, kind in kinds if kind == "timeout" and url.endswith("/slow/")]
    failed = [(e.url, e.message) for e in rendered.errors() if e.kind == "render"]
    assert len(failed) == 1 and "ERR_CONNECTION_REFUSED" in failed[0][1], failed
    assert rendered.stats["render/errors"] == 2
    assert "Traceback" not in rendered.log


@needs_browser
def test_pages_are_capped_and_all_closed(rendered: CrawlResult) -> None:
    from spidersite.settings import PLAYWRIGHT_MAX_PAGES_PER_CONTEXT

    stats = rendered.stats
    # Pages open at once (over all contexts: at least the cap of one context).
    assert 1 <= stats["playwright/page_count/max_concurrent"] <= PLAYWRIGHT_MAX_PAGES_PER_CONTEXT
    # Every page opened was closed, those whose download failed too.
    assert stats["playwright/page_count"] >= stats["render/pages"]
    assert stats["playwright/page_count/closed"] == stats["playwright/page_count"]


@needs_browser
def test_the_browser_counts_toward_peak_memory(rendered: CrawlResult) -> None:
    # scrapy-playwright's memory extension replaces Scrapy's: memusage/max adds the RSS
    # of Playwright's driver and chromium's processes to the crawl's.
    log = rendered.log
    assert "spidersite.render.RenderMemoryUsage" in log
    assert (
        "'scrapy.extensions.memusage.MemoryUsage'" not in log.split("Enabled extensions")[1][:2000]
    )
    stats = rendered.stats
    assert stats["render/browser_memory_max"] > 100 * 2**20  # the driver and chromium
    assert stats["memusage/max"] - stats["memusage/startup"] > 100 * 2**20
    assert "memusage.py" not in log  # no error while sampling


# -- without it -----------------------------------------------------------------------


def test_without_render_js_the_javascript_is_not_run(
    plain: CrawlResult, sites: tuple[Site, ...]
) -> None:
    site = sites[2]
    assert hits(plain, "quokka") == [] and hits(plain, "wombat") == []
    assert site.requested("/made.html") == []
    # No browser, no Playwright driver: the handler is Scrapy's, the stats have none.
    assert not any(k.startswith(("playwright/", "render/")) for k in plain.stats)
    assert "scrapy_playwright" not in plain.log


def test_a_missing_browser_is_one_line_at_start(tmp_path: Path) -> None:
    path = sites_file(tmp_path, '[[server]]\nurl = "http://127.0.0.1:1/"\nrender_js = true\n')
    options = json.dumps({"executable_path": str(tmp_path / "no-chromium")})
    result = run_crawl(
        tmp_path / "data", "-a", f"sites={path}", settings={"PLAYWRIGHT_LAUNCH_OPTIONS": options}
    )
    lines = refused(result, "render_js")
    assert [line.split(": error: ", 1)[1] for line in lines] == [
        f"render_js is on for http://127.0.0.1:1/ but the browser "
        f"{tmp_path / 'no-chromium'} is missing (apt-get install chromium, or set "
        f"PLAYWRIGHT_LAUNCH_OPTIONS executable_path)"
    ], result.stderr


def test_too_few_browser_contexts_is_refused_at_start(tmp_path: Path) -> None:
    servers = "".join(
        f'[[server]]\nurl = "http://127.0.0.1:{port}/"\nrender_js = true\nbasic_auth = "u:p"\n\n'
        for port in (1, 2, 3)
    )
    path = sites_file(tmp_path, servers)
    settings: dict[str, Any] = {"PLAYWRIGHT_MAX_CONTEXTS": 2}
    if not Path(CHROMIUM).exists():
        settings["PLAYWRIGHT_LAUNCH_OPTIONS"] = json.dumps({"executable_path": "/bin/sh"})
    result = run_crawl(tmp_path / "data", "-a", f"sites={path}", settings=settings)
    assert len(refused(result, "PLAYWRIGHT_MAX_CONTEXTS: 2 is fewer than the 3")) == 1


# -- the pieces, without a browser ----------------------------------------------------


def test_render_js_is_a_server_field_off_by_default(tmp_path: Path) -> None:
    from search.servers import ConfigError
    from search.sitesfile import ServerRegistry

    registry = ServerRegistry()
    assert registry.ensure("http://a.example/").render_js is False
    path = sites_file(tmp_path, '[[server]]\nurl = "http://b.example/"\nrender_js = true\n')
    registry.load_file(path)
    server = registry.get("http://b.example/x")
    assert server is not None and server.render_js is True
    assert server.as_dict()["render_js"] is True  # the servers table's settings
    bad = sites_file(tmp_path, '[[server]]\nurl = "http://c.example/"\nrender_js = "yes"\n')
    with pytest.raises(ConfigError, match=r"sites.toml:3: .*field 'render_js': must be true or"):
        ServerRegistry().load_file(bad)


def test_the_admin_form_has_render_js() -> None:
    from search.web.forms import ServerForm

    form = ServerForm.from_request({"url": "http://a.example/", "render_js": "on"})
    assert form.errors == {} and form.config["render_js"] is True
    assert ServerForm.from_request({"url": "http://a.example/"}).config["render_js"] is False
    assert ServerForm.from_config("http://a.example/", form.config).raw["render_js"] == "on"


class _Request:
    def __init__(self, resource_type: str) -> None:
        self.resource_type = resource_type


def test_images_media_and_fonts_are_aborted() -> None:
    from spidersite.render import abort_request

    types = ("document", "script", "xhr", "image", "media", "font", "stylesheet")
    assert [t for t in types if abort_request(_Request(t))] == ["image", "media", "font"]


def _middleware(servers: str, tmp_path: Path) -> Any:
    from scrapy.utils.test import get_crawler

    from spidersite.render import RenderMiddleware
    from spidersite.serverstate import server_state

    crawler = get_crawler(settings_dict={"DOWNLOAD_TIMEOUT": 30})
    crawler.stats.open_spider()
    server_state(crawler).registry.load_file(sites_file(tmp_path, servers))
    return RenderMiddleware.from_crawler(crawler)


def test_the_middleware_marks_the_pages_of_render_js_servers(tmp_path: Path) -> None:
    from scrapy import Request

    mw = _middleware(
        '[[server]]\nurl = "http://js.example/"\nrender_js = true\n\n'
        '[[server]]\nurl = "http://auth.example/"\nrender_js = true\nbasic_auth = "u:p"\n'
        'proxy = "127.0.0.1:3128"\n\n'
        '[[server]]\nurl = "http://plain.example/"\n\n'
        '[[server]]\nurl = "http://proxied.example/"\nrender_js = true\n'
        'proxy = "127.0.0.1:3128"\n',
        tmp_path,
    )
    page = Request("http://js.example/a", meta={"download_timeout": 7.5})
    mw.process_request(page)
    assert page.meta["playwright"] is True and page.meta["playwright_context"] == "default"
    assert page.meta["playwright_page_goto_kwargs"] == {"timeout": 7500.0, "wait_until": "load"}
    # robots.txt, files (HEAD), sitemaps and other servers' pages stay plain.
    robots = Request("http://js.example/robots.txt", meta={"dont_obey_robotstxt": True})
    head = Request("http://js.example/f.pdf", method="HEAD")
    sitemap = Request("http://js.example/sitemap.xml", meta={"sitemap": "robots"})
    other = Request("http://plain.example/")
    for request in (robots, head, sitemap, other):
        mw.process_request(request)
        assert "playwright" not in request.meta
    # A server with a proxy or a password gets a browser context of its own that uses them.
    auth = Request("http://auth.example/")
    mw.process_request(auth)
    assert auth.meta["playwright_context"] == "server http://auth.example/"
    assert auth.meta["playwright_context_kwargs"] == {
        "proxy": {"server": "http://127.0.0.1:3128"},
        "http_credentials": {"username": "u", "password": "p", "origin": "http://auth.example"},
    }
    # Servers behind one proxy share its context.
    proxied = Request("http://proxied.example/")
    mw.process_request(proxied)
    assert proxied.meta["playwright_context"] == "proxy http://127.0.0.1:3128"
    assert proxied.meta["playwright_context_kwargs"] == {
        "proxy": {"server": "http://127.0.0.1:3128"}
    }
    assert mw.stats.get_value("render/requests") == 3


def test_no_server_renders_no_middleware(tmp_path: Path) -> None:
    from scrapy.exceptions import NotConfigured

    with pytest.raises(NotConfigured):
        _middleware('[[server]]\nurl = "http://plain.example/"\n', tmp_path)


def test_a_rendered_download_the_watchdog_ends_closes_its_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from scrapy import Request
    from scrapy.exceptions import DownloadTimeoutError
    from scrapy.utils.test import get_crawler
    from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler

    from spidersite.renderhandler import PlaywrightDownloadHandler

    class Page:
        closed = False

        def is_closed(self) -> bool:
            return self.closed

        async def close(self) -> None:
            self.closed = True

    page = Page()

    async def stuck(self: Any, request: Any) -> Any:
        assert request.meta["playwright_include_page"] is True
        request.meta["playwright_page"] = page  # as scrapy-playwright hands it over
        await asyncio.sleep(3600)

    monkeypatch.setattr(ScrapyPlaywrightDownloadHandler, "download_request", stuck)
    crawler = get_crawler(settings_dict={})
    crawler.stats.open_spider()
    handler = PlaywrightDownloadHandler.__new__(PlaywrightDownloadHandler)
    handler.crawler, handler.grace = crawler, 0.1
    request = Request("http://js.example/", meta={"playwright": True, "download_timeout": 0.1})

    async def download() -> Any:
        try:
            return await handler.download_request(request)
        except DownloadTimeoutError as exc:
            return exc

    assert isinstance(asyncio.run(download()), DownloadTimeoutError)
    assert page.closed and "playwright_page" not in request.meta
    assert crawler.stats.get_value("playwright/page_count/closed") == 1
    assert crawler.stats.get_value("watchdog/timeouts/http") == 1
