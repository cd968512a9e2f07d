"""Sitemaps: robots.txt Sitemap lines and /sitemap.xml seed the crawl; indexes, gzip,
<lastmod> on re-crawls; the per-server `sitemaps` field; allow/deny, maxhops, robots.txt;
malformed and oversized sitemaps bounded and logged."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from search.servers import ConfigError, build
from search.sitesfile import ServerRegistry
from search.web.forms import ServerForm
from spidersite.sitemaps import parse_lastmod
from tests.conftest import CrawlResult, Site, free_port

XML = "application/xml"


def urlset(*urls: str | tuple[str, str]) -> str:
    """A sitemap of *urls* (a pair is a URL and its lastmod)."""
    entries = []
    for url in urls:
        loc, lastmod = url if isinstance(url, tuple) else (url, None)
        extra = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
        entries.append(f"<url><loc>{loc}</loc>{extra}</url>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(entries)
        + "</urlset>"
    )


def sitemapindex(*urls: str) -> str:
    entries = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in urls)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}'
        "</sitemapindex>"
    )


def sites_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sites.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def crawl_sites(crawl, tmp_path: Path, text: str) -> tuple[CrawlResult, str]:
    """A crawl of the servers of a sites file of *text* (which must succeed), and the file."""
    sites = sites_file(tmp_path, text)
    result = crawl("-a", f"sites={sites}")
    assert result.returncode == 0, result.stderr
    return result, sites


def hits(result: CrawlResult, word: str) -> list[str]:
    proc = result.search(word, "--json")
    assert proc.returncode == 0, proc.stderr
    return [h["url"] for h in json.loads(proc.stdout)["hits"]]


def home(site: Site) -> None:
    """A home page that links to nothing: only a sitemap leads further."""
    site.page("/", "Home", "walrus colony")


# -- the field, lastmod, the admin form ---------------------------------------------------


def test_sitemaps_field() -> None:
    assert build({"url": "http://a.example/"}).sitemaps is True
    assert build({"url": "http://a.example/", "sitemaps": False}).sitemaps is False
    listed = build({"url": "http://a.example/", "sitemaps": ["http://a.example/m.xml"]})
    assert listed.sitemaps == ("http://a.example/m.xml",)
    assert listed.as_dict()["sitemaps"] == ["http://a.example/m.xml"]
    assert build({"url": "http://a.example/", "sitemaps": []}).sitemaps is False
    with pytest.raises(ConfigError, match=r"'sitemaps': http://b\.example/m\.xml is not on"):
        build({"url": "http://a.example/", "sitemaps": ["http://b.example/m.xml"]})
    with pytest.raises(ConfigError, match="'sitemaps': 'ftp:/x' has no host"):
        build({"url": "http://a.example/", "sitemaps": ["ftp:/x"]})
    with pytest.raises(ConfigError, match="must be true, false or a list"):
        build({"url": "http://a.example/", "sitemaps": 3})
    with pytest.raises(ConfigError, match="'sitemaps' belongs to a \\[\\[server\\]\\] table"):
        ServerRegistry({"sitemaps": ["http://a.example/m.xml"]})
    assert ServerRegistry({"sitemaps": False}).defaults["sitemaps"] is False


def test_sitemaps_field_in_the_admin_form() -> None:
    url = "http://a.example/"
    off = ServerForm.from_request({"url": url, "sitemaps": "false"})
    assert off.values["sitemaps"] is False and not off.errors
    listed = ServerForm.from_request({"url": url, "sitemaps": f"{url}m.xml\n{url}n.xml.gz\n"})
    assert listed.config["sitemaps"] == [f"{url}m.xml", f"{url}n.xml.gz"]
    assert "sitemaps" not in ServerForm.from_request({"url": url, "sitemaps": " "}).values
    wrong = ServerForm.from_request({"url": url, "sitemaps": "http://b.example/m.xml"})
    assert wrong.errors == {"sitemaps": f"http://b.example/m.xml is not on the server {url}"}
    assert ServerForm.from_config(url, {"sitemaps": False}).raw["sitemaps"] == "false"
    assert ServerForm.from_config(url, {"sitemaps": True}).raw["sitemaps"] == ""
    shown = ServerForm.from_config(url, {"sitemaps": [f"{url}m.xml", f"{url}n.xml"]})
    assert shown.raw["sitemaps"] == f"{url}m.xml\n{url}n.xml"


def test_parse_lastmod() -> None:
    assert parse_lastmod("2025-01-02") == datetime(2025, 1, 2, tzinfo=UTC)
    assert parse_lastmod("2025-01-02T10:00:00Z") == datetime(2025, 1, 2, 10, tzinfo=UTC)
    assert parse_lastmod(" 2025-01-02T11:00+01:00 ") == datetime(2025, 1, 2, 10, tzinfo=UTC)
    assert parse_lastmod("yesterday") is None
    assert parse_lastmod("") is None and parse_lastmod(None) is None


# -- crawls -------------------------------------------------------------------------------


def test_page_only_in_sitemap_is_crawled_and_searchable(site: Site, crawl, db_url: str) -> None:
    home(site)
    site.add("/sitemap.xml", urlset(f"{site.url}hidden.html"), content_type=XML)
    site.page("/hidden.html", "Hidden", "narwhal tusk", ["/deeper.html"])
    site.page("/deeper.html", "Deeper", "beluga pod")
    result = crawl("-a", f"seeds={site.url}", database_url=db_url)
    assert result.returncode == 0, result.stderr
    assert hits(result, "narwhal") == [site.url + "hidden.html"]
    assert hits(result, "beluga") == [site.url + "deeper.html"]  # its links are followed
    hops = {r.url: r.hops for r in result.rows("SELECT url, hops FROM documents")}
    assert hops == {site.url: 0, site.url + "hidden.html": 1, site.url + "deeper.html": 2}
    stats = result.stats
    assert stats["sitemap/sitemaps"] == 1
    assert stats["sitemap/urls"] == 1
    assert stats["sitemap/requests"] == 1
    assert "sitemap/errors" not in stats
    assert result.errors() == []
    assert site.url + "sitemap.xml" not in result.urls()  # a sitemap is not a document


def test_robots_sitemap_line_index_and_gzip(site: Site, crawl) -> None:
    home(site)
    site.add(
        "/robots.txt",
        f"User-agent: *\nDisallow: /nothing/\nSitemap: /maps/index.xml\n"
        f"Sitemap: {site.url}maps/index.xml\n"
        f"Sitemap: http://127.0.0.1:{free_port()}/elsewhere.xml\n",
        content_type="text/plain",
    )
    site.add(
        "/maps/index.xml",
        sitemapindex(f"{site.url}maps/a.xml.gz", f"{site.url}maps/b.xml"),
        content_type=XML,
    )
    site.add(
        "/maps/a.xml.gz",
        gzip.compress(urlset(f"{site.url}a.html").encode()),
        content_type="application/x-gzip",
    )
    site.add("/maps/b.xml", urlset(f"{site.url}b.html", f"{site.url}a.html"), content_type=XML)
    site.page("/a.html", "Alpha", "aardvark burrow")
    site.page("/b.html", "Beta", "badger sett")
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    assert hits(result, "aardvark") == [site.url + "a.html"]
    assert hits(result, "badger") == [site.url + "b.html"]
    assert len(site.requested("/robots.txt")) == 1  # the robots middleware's, reused
    assert len(site.requested("/maps/index.xml")) == 1  # listed twice, read once
    assert len(site.requested("/a.html")) == 1
    assert site.requested("/sitemap.xml")  # looked for as well: not there
    stats = result.stats
    assert stats["sitemap/robots"] == 3
    assert stats["sitemap/offsite"] == 1  # a sitemap on a server not in the crawl
    assert stats["sitemap/sitemaps"] == 3  # the index and its two sitemaps
    assert stats["sitemap/urls"] == 3
    assert stats["sitemap/requests"] == 2
    assert stats["sitemap/missing"] == 1
    assert result.errors() == []  # a missing /sitemap.xml is not a failure


def test_sitemaps_field_off_or_listed(site: Site, site2: Site, crawl, tmp_path: Path) -> None:
    for s in (site, site2):
        home(s)
        s.add("/sitemap.xml", urlset(f"{s.url}hidden.html"), content_type=XML)
        s.add("/robots.txt", f"Sitemap: {s.url}robots-map.xml\n", content_type="text/plain")
        s.add("/robots-map.xml", urlset(f"{s.url}robots.html"), content_type=XML)
        s.add("/mine.xml", urlset(f"{s.url}mine.html"), content_type=XML)
        for path in ("/hidden.html", "/robots.html", "/mine.html"):
            s.page(path, path, "page")
    result, sites = crawl_sites(
        crawl,
        tmp_path,
        f'[[server]]\nurl = "{site.url}"\nsitemaps = false\n\n'
        f'[[server]]\nurl = "{site2.url}"\nsitemaps = ["{site2.url}mine.xml"]\n',
    )
    assert result.urls() == {site.url, site2.url, site2.url + "mine.html"}
    assert not site.requested("/sitemap.xml") and not site.requested("/robots-map.xml")
    assert not site2.requested("/sitemap.xml") and not site2.requested("/robots-map.xml")
    # SITEMAP_ENABLED = False: no sitemap at all.
    off = crawl("-a", f"sites={sites}", settings={"SITEMAP_ENABLED": False})
    assert off.returncode == 0, off.stderr
    assert len(site2.requested("/mine.xml")) == 1
    assert "sitemap/sitemaps" not in off.stats


def test_allow_deny_maxhops_robots_and_bad_urls(
    site: Site, site2: Site, crawl, tmp_path: Path
) -> None:
    home(site)
    home(site2)
    site.add("/robots.txt", "User-agent: *\nDisallow: /blocked\n", content_type="text/plain")
    offsite = f"http://127.0.0.1:{free_port()}/"
    site.add(
        "/sitemap.xml",
        urlset(
            f"{site.url}ok.html",
            f"{site.url}private/x.html",
            f"{site.url}blocked.html",
            f"{offsite}elsewhere.html",
            f"{site2.url}other.html",
            "javascript:alert(1)",
            f"{site.url}a b.html",
        ),
        content_type=XML,
    )
    site.page("/ok.html", "Ok", "okapi", ["/ok2.html"])
    site.page("/ok2.html", "Ok two", "too deep")
    for path in ("/private/x.html", "/blocked.html"):
        site.page(path, path, "never")
    site2.page("/other.html", "Other", "otter holt")
    result, _ = crawl_sites(
        crawl,
        tmp_path,
        # max_pages 3: /, ok.html and blocked.html (sitemaps do not count toward it)
        f'[[server]]\nurl = "{site.url}"\nmaxhops = 1\ndeny = ["/private/"]\nmax_pages = 3\n\n'
        f'[[server]]\nurl = "{site2.url}"\n',
    )
    assert result.urls() == {
        site.url,
        site.url + "ok.html",
        site2.url,
        site2.url + "other.html",  # a configured server's URL in another's sitemap
    }
    assert not site.requested("/ok2.html")  # 2 hops > maxhops 1
    assert not site.requested("/private/x.html") and not site.requested("/blocked.html")
    assert [e.kind for e in result.errors() if e.url.endswith("blocked.html")] == ["robots"]
    assert "page_cap" not in {e.kind for e in result.errors()}
    stats = result.stats
    assert stats["site/denied_by_pattern"] == 1
    assert stats["site/offsite"] == 1
    assert stats["site/links_invalid"] == 2
    assert stats["maxhops/dropped"] == 1  # ok2.html
    assert stats["sitemap/urls"] == 7


def test_malformed_and_oversized_sitemaps_are_logged(site: Site, crawl) -> None:
    site.page("/", "Home", "walrus colony", ["/page.html"])
    site.page("/page.html", "Page", "linked page")
    maps = ["broken.xml", "html.xml", "big.xml", "bomb.xml.gz", "cut.xml", "many.xml", "extra.xml"]
    site.add(
        "/robots.txt",
        "".join(f"Sitemap: {site.url}{m}\n" for m in maps),
        content_type="text/plain",
    )
    site.add("/sitemap.xml", "<html><body>Soft 404</body></html>", content_type="text/html")
    site.add("/broken.xml", b"\x00\x01 not xml at all <<<", content_type=XML)
    site.add("/html.xml", "<html><body>no sitemap</body></html>", content_type=XML)
    site.add("/big.xml", urlset(*(f"{site.url}big{i}.html" for i in range(200))), content_type=XML)
    site.add(
        "/bomb.xml.gz",
        gzip.compress(b"<urlset>" + b" " * 1_000_000 + b"</urlset>"),
        content_type="application/gzip",
    )
    site.add(
        "/cut.xml",
        urlset(f"{site.url}cut1.html", f"{site.url}cut2.html")[:-30] + "<url><loc>&bad;<<",
        content_type=XML,
    )
    site.add("/many.xml", urlset(*(f"{site.url}m{i}.html" for i in range(10))), content_type=XML)
    site.add("/extra.xml", urlset(f"{site.url}extra.html"), content_type=XML)
    for path in ("/cut1.html", "/m0.html", "/m1.html", "/m2.html"):
        site.page(path, path, "listed page")
    result = crawl(
        "-a",
        f"seeds={site.url}",
        # 7 sitemaps a server: /sitemap.xml and the first 6 of robots.txt, not extra.xml
        settings={"SITEMAP_MAX_BYTES": 8000, "SITEMAP_MAX_URLS": 3, "SITEMAP_MAX_SITEMAPS": 7},
    )
    assert result.returncode == 0, result.stderr
    assert {site.url, site.url + "page.html"} <= result.urls()
    assert site.url + "cut1.html" in result.urls()  # lxml recovers what precedes the break
    assert {u for u in result.urls() if "/m" in u} == {site.url + f"m{i}.html" for i in range(3)}
    assert not any("big" in u for u in result.urls())
    errors = {e.url.rsplit("/", 1)[1]: (e.kind, e.message) for e in result.errors()}
    assert set(errors) == {
        "broken.xml",
        "html.xml",
        "big.xml",
        "bomb.xml.gz",
        "many.xml",
        "extra.xml",
    }
    assert errors["broken.xml"][0] == "parse" and "not a sitemap" in errors["broken.xml"][1]
    assert "<html>" in errors["html.xml"][1]
    assert errors["big.xml"][0] == "too_large"
    assert errors["bomb.xml.gz"][0] == "too_large"
    assert "SITEMAP_MAX_BYTES" in errors["bomb.xml.gz"][1]
    assert "SITEMAP_MAX_URLS" in errors["many.xml"][1]
    assert "SITEMAP_MAX_SITEMAPS (7) reached" in errors["extra.xml"][1]
    assert not site.requested("/extra.xml")
    stats = result.stats
    assert stats["sitemap/errors"] == 5
    assert stats["sitemap/too_large"] == 2
    assert stats["sitemap/truncated"] == 1
    assert stats["sitemap/missing"] == 1  # the soft 404 of /sitemap.xml
    assert stats["sitemap/capped"] == 1
    assert "sitemap:" in result.log


def test_lastmod_newer_than_last_index_makes_a_page_due(site: Site, crawl, db_url: str) -> None:
    old = "2020-01-01T00:00:00+00:00"
    home(site)
    for path, word in (("/a.html", "aardvark"), ("/b.html", "badger")):
        site.page(path, path, word, headers={"ETag": f'"{path}-v1"'})
    site.add(
        "/sitemap.xml",
        urlset((f"{site.url}a.html", old), (f"{site.url}b.html", old)),
        content_type=XML,
    )
    first = crawl("-a", f"seeds={site.url}", database_url=db_url)
    assert first.returncode == 0, first.stderr
    assert first.urls() == {site.url, site.url + "a.html", site.url + "b.html"}
    # a changes after it was indexed, and the sitemap says so; b's lastmod stays.
    changed = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    site.page("/a.html", "/a.html", "aardvark anteater", headers={"ETag": '"a-v2"'})
    site.add(
        "/sitemap.xml",
        urlset((f"{site.url}a.html", changed), (f"{site.url}b.html", old)),
        content_type=XML,
    )
    site.hits.clear()
    again = crawl("-a", "recrawl=due", database_url=db_url)
    assert again.returncode == 0, again.stderr
    fetched = sorted(p for p in site.paths() if p not in ("/robots.txt", "/sitemap.xml"))
    assert fetched == ["/a.html"]  # not due by its interval (7 days), due by its lastmod
    assert site.requested("/a.html")[0].headers.get("If-None-Match") == '"/a.html-v1"'
    stats = again.stats
    assert stats["recrawl/scheduled"] == 0
    assert stats["sitemap/due"] == 1
    assert stats["recrawl/changed"] == 1
    assert hits(again, "anteater") == [site.url + "a.html"]
