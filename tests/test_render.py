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


def build_site(site: Site) -> None:
    """The JavaScript site: / writes its article and three links; /made.html (1 hop) is
    plain HTML with a JavaScript link to /deep.html (2 hops); /private.html is forbidden
    by robots.txt; images and fonts are on every page."""
    site.add(
        "/robots.txt",
        "User-agent: *\nDisallow: /private.html\nCrawl-delay: 1\n",
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
    build_site(js)
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
    through a proxy, one behind basic auth, a slow page past its read_timeout, and a
    server that refuses connections."""
    js, other, _ = sites
    folder = tmp_path_factory.mktemp("rendered")
    other.add("/slow/", js_page("Slow", "too slow to wait for"), delay=10)
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
seeds = ["{other.url}locked/", "{other.url}slow/"]
basic_auth = "alice:s3cret"
read_timeout = 4

[[server]]
url = "http://127.0.0.1:{refused_port}/"
""",
    )
    result = run_crawl(folder / "data", "-a", f"sites={path}", settings={"RETRY_ENABLED": False})
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
    assert (js.url + "private.html", "robots") in {(u, k) for u, k, _ in rendered.errors()}
    assert len(js.requested("/robots.txt")) == 1  # fetched plain, once
    assert rendered.stats["crawldelay/robots_delay"] == 1


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
def test_read_timeout_and_failed_renders_are_logged(
    rendered: CrawlResult, sites: tuple[Site, ...]
) -> None:
    other = sites[1]
    kinds = {(url, kind) for url, kind, _ in rendered.errors()}
    assert (other.url + "slow/", "timeout") in kinds
    failed = [(url, message) for url, kind, message in rendered.errors() if kind == "render"]
    assert len(failed) == 1 and "ERR_CONNECTION_REFUSED" in failed[0][1], failed
    assert rendered.stats["render/errors"] == 2
    assert "Traceback" not in rendered.log


@needs_browser
def test_the_browser_counts_toward_peak_memory(rendered: CrawlResult) -> None:
    # scrapy-playwright's memory extension replaces Scrapy's: memusage/max adds the RSS
    # of Playwright's driver and chromium's processes to the crawl's.
    log = rendered.log
    assert "scrapy_playwright.memusage.ScrapyPlaywrightMemoryUsageExtension" in log
    assert (
        "'scrapy.extensions.memusage.MemoryUsage'" not in log.split("Enabled extensions")[1][:2000]
    )
    assert rendered.stats["memusage/max"] > 0


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
