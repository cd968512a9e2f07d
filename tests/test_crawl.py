"""Crawls of small fixture sites on 127.0.0.1, one rule each, run as `scrapy crawl site`."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.conftest import Route, Site, free_port


def write_sites(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sites.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_crawl_stores_indexes_and_searches(site: Site, crawl, db_url: str) -> None:
    site.page(
        "/",
        "Home of the zebra",
        "Welcome to the zebra pages.",
        ["/a.html", "/b.html"],
        head='<meta name="keywords" content="zebra, stripes">'
        '<meta name="description" content="All about zebras">',
    )
    site.page("/a.html", "Giraffe facts", "Giraffes are tall. The zebra is not.", ["/"])
    site.page("/b.html", "Okapi", "The okapi is a relative of the giraffe.", ["/a.html#x"])
    result = crawl("-a", f"seeds={site.url}", database_url=db_url)
    assert result.returncode == 0, result.stderr
    rows = result.rows(
        "SELECT url, title, keywords, description, hops, status, kind, "
        "indexed, content_type, charset FROM documents ORDER BY url"
    )
    by_url = {r.url: r for r in rows}
    assert set(by_url) == {site.url, site.url + "a.html", site.url + "b.html"}
    home = by_url[site.url]
    assert (home.title, home.keywords, home.description) == (
        "Home of the zebra",
        "zebra, stripes",
        "All about zebras",
    )
    assert (home.hops, home.status, home.kind) == (0, 200, "page")
    assert home.content_type == "text/html" and home.charset == "utf-8"
    assert by_url[site.url + "a.html"].hops == 1
    assert all(r.indexed for r in rows), "every page is marked indexed"
    # links are stored with anchors, fragments dropped
    links = result.rows("SELECT to_url, anchor FROM links")
    assert (site.url + "a.html", "link to /a.html#x") in [(x.to_url, x.anchor) for x in links]
    # word records: the stem, its surface form, counts per section and weight
    [zebra] = [p for p in result.postings() if p.stem == "zebra" and p.url == site.url]
    surface, body, title = zebra.surface, zebra.body_count, zebra.title_count
    kw, desc, weight = zebra.keywords_count, zebra.desc_count, zebra.weight
    assert surface == "zebra" and body == 2 and title == 1 and kw == 1 and desc == 1
    assert weight == pytest.approx(body * 1 + title * 4 + kw * 2 + desc * 2)
    # searchable
    found = result.search("giraffe", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert hits[0]["url"] == site.url + "a.html"
    assert {h["url"] for h in hits} == {site.url + "a.html", site.url + "b.html"}
    stats = result.stats
    assert stats["store/documents"] == 3 and stats["index/documents"] == 3


def test_crawl_twice_leaves_no_duplicates(site: Site, crawl, db_url: str) -> None:
    site.page("/", "Root", "alpha beta", ["/x.html", "/y.html"])
    site.page("/x.html", "X", "gamma delta alpha", ["/", "/y.html"])
    site.page("/y.html", "Y", "epsilon", ["/x.html"])
    counts = []
    for _ in range(2):
        result = crawl("-a", f"seeds={site.url}", database_url=db_url)
        assert result.returncode == 0, result.stderr
        counts.append(
            tuple(
                result.scalar(f"SELECT count(*) FROM {t}")
                for t in ("documents", "postings", "links", "words", "servers")
            )
        )
    assert counts[0] == counts[1]
    assert counts[0][0] == 3
    assert result.scalar("SELECT count(*) FROM crawls") == 2
    found = result.search("status", "--json")
    assert found.returncode == 0
    s = result.search("gamma", "--json")
    assert [h["url"] for h in json.loads(s.stdout)["hits"]] == [site.url + "x.html"]


def test_index_max_merge_docs_caps_the_crawls_merges(site: Site, crawl, tmp_path: Path) -> None:
    """``INDEX_MAX_MERGE_DOCS`` reaches the crawl's indexer: commits of at most three pages,
    segments of more than two never merged again, so no segment holds more than a merge
    of four small ones and a commit's own (11 pages); without the cap 60 pages in such
    commits make segments of 16 and more."""
    from search.index import Index

    n = 60
    site.page("/", "Pages", "ocelot index", [f"/p{i}.html" for i in range(n - 1)])
    for i in range(n - 1):
        site.page(f"/p{i}.html", f"Page {i}", f"page number{i} ocelot")
    settings = {"STORE_BATCH_SIZE": 2, "INDEX_BATCH_SIZE": 2, "INDEX_MAX_MERGE_DOCS": 2}
    result = crawl("-a", f"seeds={site.url}", settings=settings)
    assert result.returncode == 0, result.stderr
    index = Index(tmp_path / "data" / "index")
    sizes = sorted(s.doc_count() for s in index.open()._segments())
    assert sum(sizes) == n == index.doc_count(), sizes
    assert max(sizes) <= 11, sizes
    assert max(sizes) > 3, sizes  # merges still happen


def test_robots_disallow_and_userobots(site: Site, crawl, tmp_path: Path) -> None:
    site.add("/robots.txt", "User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    site.page("/", "Public", "hello", ["/private/secret.html", "/open.html"])
    site.page("/open.html", "Open", "open page")
    site.page("/private/secret.html", "Secret", "secret page")
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    assert site.url + "private/secret.html" not in result.urls()
    assert site.url + "open.html" in result.urls()
    assert not site.requested("/private/secret.html")
    assert (site.url + "private/secret.html", "robots") in result.error_kinds()

    sites = write_sites(tmp_path, f'[[server]]\nurl = "{site.url}"\nuserobots = false\n')
    again = crawl("-a", f"sites={sites}")
    assert again.returncode == 0, again.stderr
    assert site.url + "private/secret.html" in again.urls()


def test_robots_applies_to_every_request_waiting_for_it(site: Site, crawl) -> None:
    """Requests that reach the robots.txt middleware while robots.txt is still being
    fetched all wait for it, and robots.txt applies to each of them, not to the first
    alone (Scrapy 2.19's middleware hands the parsed rules to its first waiter only)."""
    site.add(
        "/robots.txt",
        "User-agent: *\nDisallow: /private/\n",
        content_type="text/plain",
        delay=0.5,
    )
    private = [f"/private/{i}.html" for i in range(6)]
    site.page("/", "Public", "hello")
    for path in private:
        site.page(path, "Secret", "secret page")
    seeds = ",".join([site.url, *(site.url + p.lstrip("/") for p in private)])
    result = crawl("-a", f"seeds={seeds}")
    assert result.returncode == 0, result.stderr
    assert [p for p in private if site.requested(p)] == []
    kinds = result.error_kinds()
    assert all((site.url + p.lstrip("/"), "robots") in kinds for p in private), kinds
    assert site.url in result.urls()


def test_redirects_stay_where_links_may_go(site: Site, site2: Site, crawl, tmp_path: Path) -> None:
    """A redirect, HTTP or meta refresh, is followed only to a server of the crawl whose
    allow/deny patterns let its target through, as a link is; the others are logged as
    ``redirect`` failures of the URL redirected, and the other server is never asked."""
    site.page("/", "Home", "start", ["/offsite", "/refresh-off.html", "/todenied", "/moved"])
    site.add("/offsite", "", status=302, headers={"Location": site2.url + "page.html"})
    refresh = f'<meta http-equiv="refresh" content="0; url={site2.url}page2.html">'
    site.page("/refresh-off.html", "Refresh", "away", head=refresh)
    site.add("/todenied", "", status=302, headers={"Location": "/denied/x.html"})
    site.page("/denied/x.html", "Denied", "kept out")
    site.add("/moved", "", status=301, headers={"Location": "/target.html"})
    site.page("/target.html", "Target", "moved here")
    site2.page("/page.html", "Elsewhere", "another server", ["/deeper.html"])
    site2.page("/page2.html", "Elsewhere 2", "another server")
    site2.page("/deeper.html", "Deeper", "further away")
    sites = write_sites(tmp_path, f'[[server]]\nurl = "{site.url}"\ndeny = ["/denied/"]\n')
    result = crawl("-a", f"sites={sites}")
    assert result.returncode == 0, result.stderr
    assert site2.paths() == []
    assert not site.requested("/denied/x.html")
    assert site.url + "target.html" in result.urls()
    kinds = result.error_kinds()
    for path in ("offsite", "refresh-off.html", "todenied"):
        assert (site.url + path, "redirect") in kinds, kinds
    assert [r.url for r in result.rows("SELECT url FROM servers")] == [site.url]
    assert result.stats["servers/redirect_offsite"] == 2
    assert result.stats["servers/redirect_denied"] == 1


def test_meta_refresh_to_itself_is_parsed_and_refresh_loops_are_logged(site: Site, crawl) -> None:
    site.page("/", "Home", "start", ["/reload.html", "/ra.html"])
    site.page(
        "/reload.html",
        "Reloads",
        "pangolin news",
        head='<meta http-equiv="refresh" content="30; url=/reload.html">',
    )
    site.page("/ra.html", "A", "a", head='<meta http-equiv="refresh" content="0; url=/rb.html">')
    site.page("/rb.html", "B", "b", head='<meta http-equiv="refresh" content="0; url=/ra.html">')
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    assert site.url + "reload.html" in result.urls()
    assert "reload.html" in result.search("pangolin").stdout
    assert (site.url + "ra.html", "redirect") in result.error_kinds()
    assert result.stats["redirectloop/refresh_to_itself"] == 1


def test_retry_after_of_a_busy_server_spaces_its_requests(site: Site, crawl) -> None:
    """Scrapy retries a 503 at once; its Retry-After becomes the server's delay first."""
    site.page("/", "Start", "start", ["/busy.html"])
    site.add("/busy.html", "busy", status=503, headers={"Retry-After": "1"})
    result = crawl("-a", f"seeds={site.url}", settings={"RETRY_TIMES": 2})
    assert result.returncode == 0, result.stderr
    times = [h.time for h in site.requested("/busy.html")]
    assert len(times) == 3
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.9, gaps  # a lower bound only
    assert result.stats["crawldelay/retry_after"] == 1


def test_a_file_whose_server_refuses_head_is_recorded_from_a_get(site: Site, crawl) -> None:
    """A server that answers HEAD with 405 or 501: the file's type and size come from a
    GET, stopped once its headers are in."""
    body = b"%PDF-1.4 " + b"x" * 200_000
    site.page("/", "Start", "start", ["/manual.pdf", "/data.zip"])
    site.add("/manual.pdf", body, content_type="application/pdf", head_status=405)
    site.add("/data.zip", body, content_type="application/zip", head_status=501)
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    files = {
        r.url: r
        for r in result.rows("SELECT url, kind, content_type, size FROM documents")
        if r.kind == "file"
    }
    assert files[site.url + "manual.pdf"].content_type == "application/pdf"
    assert files[site.url + "manual.pdf"].size == len(body)
    assert files[site.url + "data.zip"].content_type == "application/zip"
    assert [h.method for h in site.requested("/manual.pdf")] == ["HEAD", "GET"]
    assert result.stats["site/files_head_refused"] == 2
    assert not result.errors()


def test_robots_crawl_delay_is_applied(site: Site, crawl) -> None:
    site.add("/robots.txt", "User-agent: *\nCrawl-delay: 1\n", content_type="text/plain")
    pages = [f"/p{i}.html" for i in range(4)]
    site.page("/", "Start", "start", pages)
    for p in pages:
        site.page(p, p, "page")
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    times = sorted(h.time for h in site.hits if h.path not in ("/robots.txt", "/sitemap.xml"))
    assert len(times) == 5
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # A lower bound only: a Crawl-delay is a minimum between two requests.
    assert min(gaps) >= 0.9, gaps
    assert result.stats["crawldelay/robots_delay"] == 1


def test_per_server_crawl_delay(site: Site, crawl, tmp_path: Path) -> None:
    site.page("/", "Start", "start", ["/a.html", "/b.html"])
    site.page("/a.html", "A", "a")
    site.page("/b.html", "B", "b")
    sites = write_sites(tmp_path, f'[[server]]\nurl = "{site.url}"\ncrawl_delay = 0.7\n')
    result = crawl("-a", f"sites={sites}")
    assert result.returncode == 0, result.stderr
    times = sorted(h.time for h in site.hits if h.path not in ("/robots.txt", "/sitemap.xml"))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) == 3 and min(gaps) >= 0.6, gaps


def test_maxhops(site: Site, crawl, tmp_path: Path) -> None:
    for i in range(6):
        site.page(f"/h{i}.html", f"Hop {i}", f"page {i}", [f"/h{i + 1}.html"])
    sites = write_sites(
        tmp_path, f'[[server]]\nurl = "{site.url}"\nmaxhops = 2\nseeds = ["{site.url}h0.html"]\n'
    )
    result = crawl("-a", f"sites={sites}")
    assert result.returncode == 0, result.stderr
    assert result.urls() == {f"{site.url}h{i}.html" for i in range(3)}
    assert not site.requested("/h3.html")
    assert result.stats["maxhops/dropped"] == 1
    hops = {r.url: r.hops for r in result.rows("SELECT url, hops FROM documents")}
    assert hops[f"{site.url}h2.html"] == 2


def test_read_timeout(site: Site, crawl, tmp_path: Path) -> None:
    site.page("/", "Start", "start", ["/slow.html", "/fast.html"])
    site.page("/slow.html", "Slow", "slow", delay=3)
    site.page("/fast.html", "Fast", "fast")
    sites = write_sites(tmp_path, f'[[server]]\nurl = "{site.url}"\nread_timeout = 1\n')
    result = crawl("-a", f"sites={sites}", settings={"RETRY_TIMES": 0})
    assert result.returncode == 0, result.stderr
    assert site.url + "fast.html" in result.urls()
    assert site.url + "slow.html" not in result.urls()
    assert (site.url + "slow.html", "timeout") in result.error_kinds()


def test_net_error_cut_off(site: Site, crawl, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/"
    site.page("/", "Start", "start", [f"{dead}p{i}.html" for i in range(8)] + ["/ok.html"])
    site.page("/ok.html", "OK", "still crawled")
    sites = write_sites(
        tmp_path,
        f'[[server]]\nurl = "{site.url}"\n\n'
        f'[[server]]\nurl = "{dead}"\nmax_net_errors = 3\n'
        f'seeds = ["{site.url}"]\n',
    )
    # One request at a time: requests already handed to the downloader are attempted; the
    # ones still waiting in the scheduler are those a cut-off drops.  No sitemap requests:
    # the counts below are of the links.
    result = crawl(
        "-a",
        f"sites={sites}",
        settings={"RETRY_TIMES": 0, "CONCURRENT_REQUESTS": 1, "SITEMAP_ENABLED": False},
    )
    assert result.returncode == 0, result.stderr
    assert {site.url, site.url + "ok.html"} <= result.urls()
    server = result.rows(
        "SELECT disabled, net_errors, disabled_reason FROM servers WHERE url = :u", u=dead
    )[0]
    assert server.disabled and server.net_errors == 3
    assert "max_net_errors = 3" in server.disabled_reason
    kinds = [e.kind for e in result.errors() if e.url.startswith(dead)]
    assert kinds.count("refused") == 2 and kinds.count("cut_off") == 6, kinds
    assert result.stats["neterrors/servers_cut_off"] == 1


def test_proxy_and_basic_auth_per_server(site: Site, site2: Site, crawl, tmp_path: Path) -> None:
    # site acts as the proxy for the (unresolvable) host proxied.test.
    site.add(
        "//proxied.test/",
        "<html><head><title>Via proxy</title></head><body>"
        "<a href='/two.html'>two</a></body></html>",
    )
    site.add("//proxied.test/two.html", "<title>Two via proxy</title>")
    # site2 requires a password.
    site2.page("/", "Locked", "behind a password", ["/inner.html"], auth="alice:s3cret")
    site2.page("/inner.html", "Inner", "inner room", auth="alice:s3cret")
    sites = write_sites(
        tmp_path,
        f'''
[[server]]
url = "http://proxied.test/"
proxy = "127.0.0.1:{site.port}"
userobots = false

[[server]]
url = "{site2.url}"
basic_auth = "alice:s3cret"
''',
    )
    result = crawl("-a", f"sites={sites}")
    assert result.returncode == 0, result.stderr
    urls = result.urls()
    assert {"http://proxied.test/", "http://proxied.test/two.html"} <= urls
    assert all(h.proxied for h in site.hits)
    assert {site2.url, site2.url + "inner.html"} <= urls
    assert all("Authorization" in h.headers for h in site2.hits if h.path != "/robots.txt")
    # the password never reaches another server, nor the servers table
    assert not any("Authorization" in h.headers for h in site.hits)
    settings = result.scalar("SELECT settings FROM servers WHERE url = :u", u=site2.url)
    assert "s3cret" not in str(settings)


def test_noindex_nofollow(site: Site, crawl) -> None:
    site.page(
        "/",
        "Start",
        "start",
        ["/noindex.html", "/nofollow.html"],
    )
    site.add(
        "/noindex.html",
        '<html><head><meta name="robots" content="noindex">'
        '<title>Hidden</title></head><body>quokka <a href="/child.html">c</a>'
        '<a href="/skipped.html" rel="nofollow">s</a></body></html>',
    )
    site.add(
        "/nofollow.html",
        '<html><head><meta name="ROBOTS" content="nofollow">'
        '<title>Leaf</title></head><body>wombat <a href="/never.html">n</a></body></html>',
    )
    site.page("/child.html", "Child", "child page")
    site.page("/never.html", "Never", "never fetched")
    site.page("/skipped.html", "Skipped", "never fetched")
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    urls = result.urls()
    assert site.url + "child.html" in urls  # links of a noindex page are followed
    assert site.url + "never.html" not in urls and not site.requested("/never.html")
    assert not site.requested("/skipped.html")
    noindex = result.rows(
        "SELECT noindex, indexed FROM documents WHERE url = :u", u=site.url + "noindex.html"
    )[0]
    assert noindex[0] and not noindex[1]
    assert json.loads(result.search("quokka", "--json").stdout)["hits"] == []
    assert len(json.loads(result.search("wombat", "--json").stdout)["hits"]) == 1


def test_x_robots_tag_header(site: Site, crawl) -> None:
    """X-Robots-Tag counts as <meta name="robots"> does, for HTML and text pages, in its
    plain form and in the form that names an agent (ours: spidersite)."""
    site.page("/", "Start", "start", ["/noindex.html", "/nofollow.html", "/other.html", "/t.txt"])
    site.page(
        "/noindex.html", "Hidden", "quokka", ["/child.html"], headers={"X-Robots-Tag": "noindex"}
    )
    site.page(
        "/nofollow.html",
        "Leaf",
        "wombat",
        ["/never.html"],
        headers={"X-Robots-Tag": "spidersite: nofollow"},
    )
    site.page("/other.html", "Other", "numbat", headers={"X-Robots-Tag": "otherbot: none"})
    site.add("/t.txt", "bilby notes", content_type="text/plain", headers={"X-Robots-Tag": "none"})
    site.page("/child.html", "Child", "child page")
    site.page("/never.html", "Never", "never fetched")
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    assert site.url + "child.html" in result.urls()  # links of a noindex page are followed
    assert not site.requested("/never.html")
    flags = {
        r.url.removeprefix(site.url): (bool(r.noindex), bool(r.nofollow))
        for r in result.rows("SELECT url, noindex, nofollow FROM documents")
    }
    assert flags["noindex.html"] == (True, False)
    assert flags["nofollow.html"] == (False, True)
    assert flags["other.html"] == (False, False)
    assert flags["t.txt"] == (True, True)
    for word, hits in (("quokka", 0), ("bilby", 0), ("wombat", 1), ("numbat", 1)):
        assert len(json.loads(result.search(word, "--json").stdout)["hits"]) == hits, word


def test_files_plain_text_and_errors(site: Site, crawl) -> None:
    site.page(
        "/", "Start", "start", ["/manual.pdf", "/photo.png", "/notes.txt", "/blob", "/missing.html"]
    )
    site.add("/manual.pdf", b"%PDF-1.4 " + b"x" * 5000, content_type="application/pdf")
    site.add("/photo.png", b"\x89PNG" + b"\0" * 300, content_type="image/png")
    site.add("/notes.txt", "capybara notes in plain text", content_type="text/plain")
    site.add("/blob", b"\0\1\2" * 100, content_type="application/octet-stream")
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    files = dict(
        (r.url, (r.content_type, r.size, r.kind))
        for r in result.rows(
            "SELECT url, content_type, size, kind FROM documents WHERE kind = 'file'"
        )
    )
    assert files[site.url + "manual.pdf"] == ("application/pdf", 5009, "file")
    assert files[site.url + "photo.png"] == ("image/png", 304, "file")
    assert files[site.url + "blob"] == ("application/octet-stream", 300, "file")
    assert [h.method for h in site.requested("/manual.pdf")] == ["HEAD"]
    assert site.url + "notes.txt" in result.urls("page")
    hits = json.loads(result.search("capybara", "--json").stdout)["hits"]
    assert [h["url"] for h in hits] == [site.url + "notes.txt"]
    assert (site.url + "missing.html", "http", "HTTP 404") in [
        (e.url, e.kind, e.message) for e in result.errors()
    ]
    assert not result.rows(
        "SELECT 1 FROM postings p JOIN documents d ON d.id = p.document_id WHERE d.kind = 'file'"
    )


def test_stays_on_seed_servers(site: Site, site2: Site, crawl) -> None:
    site.page("/", "Start", "start", [site2.url + "elsewhere.html"])
    site2.page("/elsewhere.html", "Elsewhere", "other server")
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0
    assert result.urls() == {site.url}
    assert not site2.hits


def test_allow_and_deny_patterns(site: Site, crawl, tmp_path: Path) -> None:
    site.page("/", "Start", "start", ["/docs/a.html", "/docs/b.php", "/blog/c.html"])
    for p in ("/docs/a.html", "/docs/b.php", "/blog/c.html"):
        site.page(p, p, "x")
    sites = write_sites(
        tmp_path,
        f'''[[server]]
url = "{site.url}"
allow = ['^{site.url}$', '/docs/']
deny = ['\\.php$']
''',
    )
    result = crawl("-a", f"sites={sites}")
    assert result.returncode == 0, result.stderr
    assert result.urls() == {site.url, site.url + "docs/a.html"}


def test_seeds_file(site: Site, crawl, tmp_path: Path) -> None:
    site.page("/a.html", "A", "a")
    site.page("/b.html", "B", "b")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"# my seeds\n{site.url}a.html\n\n  {site.url}b.html  \n")
    result = crawl("-a", f"seeds_file={seeds}")
    assert result.returncode == 0, result.stderr
    assert result.urls() == {site.url + "a.html", site.url + "b.html"}


@pytest.mark.parametrize("seeds", ["notaurl", "mailto:me@example.org,javascript:void(0)", ""])
def test_bad_seeds_refuse_to_start(crawl, seeds: str) -> None:
    result = crawl("-a", f"seeds={seeds}")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [
        line
        for line in result.stderr.splitlines()
        if "invalid seed" in line or line.startswith("invalid seed")
    ]
    assert len(errors) == max(1, seeds.count(",") + 1), result.stderr
    assert "no valid seed URL" in result.stderr


def test_some_bad_seeds_are_skipped(site: Site, crawl) -> None:
    site.page("/", "Root", "root")
    result = crawl("-a", f"seeds=ftp//broken,{site.url}")
    assert result.returncode == 0, result.stderr
    assert result.urls() == {site.url}
    assert "invalid seed: 'ftp//broken'" in result.log


def test_bad_sites_file_is_refused(crawl, tmp_path: Path) -> None:
    sites = write_sites(
        tmp_path,
        '[[server]]\nurl = "http://127.0.0.1:1/"\n\n[[server]]\n'
        'url = "http://127.0.0.1:2/"\nmaxhops = -1\n',
    )
    result = crawl("-a", f"sites={sites}")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{sites}:6: server 'http://127.0.0.1:2/': field 'maxhops'" in result.stderr
    assert not (tmp_path / "data" / "spidersite.db").exists()


def test_unknown_spider_argument(crawl) -> None:
    result = crawl("-a", "seeds=http://127.0.0.1:1/", "-a", "maxhop=3")
    assert result.returncode == 2
    assert "unknown spider argument(s): maxhop" in result.stderr


ITALIAN = (
    "La città di Roma è la capitale d'Italia. Però il caffè è più buono a Napoli, così "
    "dicono. Perché? Perché l'acqua è diversa. Qualità e novità ogni giorno."
)


def test_undeclared_latin_and_utf16_pages(site: Site, crawl) -> None:
    """An undeclared windows-1252 page is read as such (not cp1250 or cp1257); UTF-16
    pages with a BOM or declared in the header are pages, not binary content; a <meta>
    UTF-16 on an ASCII page means UTF-8."""

    def html(title: str, text: str, head: str = "") -> str:
        return f"<html><head>{head}<title>{title}</title></head><body><p>{text}</p></body></html>"

    site.page("/", "Start", "start", ["/it.html", "/bom.html", "/hdr.html", "/meta.html"])
    site.add(
        "/it.html", html("Pagina italiana", ITALIAN).encode("cp1252"), content_type="text/html"
    )
    site.add(
        "/bom.html",
        b"\xff\xfe" + html("Sixteen with BOM", "bassoon café").encode("utf-16-le"),
        content_type="text/html",
    )
    site.add(
        "/hdr.html",
        html("Sixteen declared", "marimba café").encode("utf-16-le"),
        content_type="text/html; charset=utf-16",
    )
    site.add(
        "/meta.html",
        html("Meta sixteen", "xylophone", '<meta charset="utf-16">'),
        content_type="text/html",
    )
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    assert result.errors() == []
    rows = {
        r.url.removeprefix(site.url): (r.title, r.charset)
        for r in result.rows("SELECT url, title, charset FROM documents")
    }
    assert rows["it.html"] == ("Pagina italiana", "cp1252")
    assert rows["bom.html"][0] == "Sixteen with BOM"
    assert rows["hdr.html"] == ("Sixteen declared", "utf-16-le")
    assert rows["meta.html"] == ("Meta sixteen", "utf-8")
    for word, page in (
        ("città", "it.html"),
        ("bassoon", "bom.html"),
        ("marimba", "hdr.html"),
        ("xylophone", "meta.html"),
    ):
        hits = json.loads(result.search(word, "--json").stdout)["hits"]
        assert [h["url"] for h in hits] == [site.url + page], word


def test_compressed_body_cut_before_its_end_is_a_failure(site: Site, crawl) -> None:
    """A gzip stream cut short (with a Content-Length that matches what was sent) is a
    reset failure, not a page of its first bytes; the whole stream is a page."""
    import gzip

    html = f"<html><head><title>Cut</title></head><body>{'aardvark ' * 200}</body></html>"
    body = gzip.compress(html.encode())
    # ~40 kB that decompress to 4 MB, past the server's max_size: refused as too large,
    # without being decompressed to the end.
    bomb = gzip.compress(b"<html><body>" + b"a " * 2_000_000 + b"</body></html>")
    site.page("/", "Start", "start", ["/whole.html", "/cut.html", "/bomb.html"])
    gz = {"content_type": "text/html", "headers": {"Content-Encoding": "gzip"}}
    site.add("/whole.html", body, **gz)
    site.add("/cut.html", body[:60], **gz)
    site.add("/bomb.html", bomb, **gz)
    # Cut once, then whole: retried, as a connection reset is, and stored.
    site.add("/cut-once.html", body[:60], **gz, then=Route(body, **gz))
    site.page("/more.html", "More", "more", ["/cut-once.html"])
    site.page("/", "Start", "start", ["/whole.html", "/cut.html", "/bomb.html", "/more.html"])
    result = crawl("-a", f"seeds={site.url}", settings={"SERVER_DEFAULTS": '{"max_size": 1000000}'})
    assert result.returncode == 0, result.stderr
    assert site.url + "whole.html" in result.urls("page")
    assert site.url + "cut-once.html" in result.urls("page")
    assert site.url + "cut.html" not in result.urls()
    assert sorted((e.url, e.kind) for e in result.errors()) == [
        (site.url + "bomb.html", "too_large"),
        (site.url + "cut.html", "reset"),
    ]
    # cut.html: the first answer and RETRY_TIMES (2) retries; cut-once.html: one retry.
    assert len([h for h in site.hits if h.path == "/cut.html"]) == 3
    assert result.stats["compression/truncated"] == 4
    assert result.stats["retry/reason_count/truncated compressed body"] == 3
    assert result.stats["httpcompression/response_count"] == 2  # whole.html, cut-once.html
    assert "exceeded DOWNLOAD_MAXSIZE (1000000 B) during decompression" in result.log
