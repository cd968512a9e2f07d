"""A hostile site: every path misbehaves in its own way. The crawl must finish, keep every
good page, log each failure in crawl_errors, and never let a traceback reach its log."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Site

GOOD = [
    "/g1.html",
    "/g2.html",
    "/g3.html",
    "/malformed.html",
    "/badlinks.html",
    "/future.html",
    "/baddate.html",
    "/manylinks.html",
]
HOSTILE = [
    "/binary.html",
    "/huge.html",
    "/slow.html",
    "/reset.html",
    "/loop/0.html",
    "/cycle-a.html",
    "/calendar/0.html",
]


def build(site: Site) -> None:
    site.add("/robots.txt", "oops", status=500, content_type="text/plain")
    site.page("/", "Hostile home", "start here", [*GOOD, *HOSTILE])
    for i, path in enumerate(GOOD[:3], 1):
        site.page(path, f"Good {i}", f"good page number{i} pangolin")
    site.add(
        "/malformed.html",
        "<html><head><title>Broken page<body><p>unclosed pangolin "
        "<div><table><tr><td>cell<a href='/g1.html'>g1<p><b><i>nested</b></i>",
    )
    site.add("/binary.html", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40)
    site.add("/huge.html", b"<html><body>" + b"x" * (50 * 1024 * 1024) + b"</body></html>")
    site.page("/slow.html", "Slow", "too slow", delay=15)
    site.page("/reset.html", "Reset", "the connection breaks " * 500, reset=True)
    for i in range(25):
        site.add(f"/loop/{i}.html", "", status=302, headers={"Location": f"/loop/{i + 1}.html"})
    site.add("/cycle-a.html", "", status=301, headers={"Location": "/cycle-b.html"})
    site.add("/cycle-b.html", "", status=301, headers={"Location": "/cycle-a.html"})
    for i in range(200):  # an endless calendar: each month links to the next
        site.page(f"/calendar/{i}.html", f"Month {i}", "calendar", [f"/calendar/{i + 1}.html"])
    links = "".join(f'<a href="/x/{i}.html">{i}</a>' for i in range(100_000))
    site.add(
        "/manylinks.html",
        f"<html><head><title>Many links</title></head><body>pangolin {links}</body></html>",
    )
    bad = [
        "javascript:alert(1)",
        "mailto:a@b.c",
        "data:text/html,<b>x</b>",
        "http://[::1",
        "http://exa mple.com/",
        "%%%",
        "tel:123",
        "",
        "#top",
        "http://:80/",
        "/caf\xe9.html",
        "/ok%ZZ.html",
    ]
    body = "".join(f'<a href="{h}">b</a>' for h in bad)
    site.add(
        "/badlinks.html",
        f"<html><head><title>Bad links</title></head><body>pangolin {body}</body></html>".encode(
            "latin-1"
        ),
        content_type="text/html; charset=latin-1",
    )
    site.page(
        "/future.html",
        "Future",
        "pangolin from the future",
        headers={"Last-Modified": "Fri, 01 Jan 2100 00:00:00 GMT"},
    )
    site.page(
        "/baddate.html",
        "Bad date",
        "pangolin undated",
        headers={"Last-Modified": "yesterday, around noon"},
    )


def test_hostile_site(site: Site, crawl, tmp_path: Path) -> None:
    # A Python test server and a page of 100,000 links can stall the crawler for seconds;
    # read_timeout is generous so that only /slow.html times out.
    build(site)
    sites = tmp_path / "sites.toml"
    sites.write_text(f'''
[[server]]
url = "{site.url}"
read_timeout = 10
max_size = "5MB"
max_pages = 100
maxhops = 100
deny = ['/x/']
''')
    result = crawl(
        "-a", f"sites={sites}", settings={"RETRY_TIMES": 0, "LOG_LEVEL": "DEBUG"}, timeout=240
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.log
    assert "Traceback" not in result.stderr
    urls = result.urls()
    for path in GOOD:
        assert site.url + path.lstrip("/") in urls, path
    kinds: dict[str, set[str]] = {}
    for error in result.errors():
        url, kind = error.url, error.kind
        kinds.setdefault(url.replace(site.url, "/"), set()).add(kind)
    assert kinds["/binary.html"] == {"parse"}
    assert kinds["/huge.html"] == {"too_large"}
    assert kinds["/slow.html"] == {"timeout"}
    assert kinds["/reset.html"] == {"reset"}
    assert "redirect" in kinds["/loop/0.html"]
    assert "redirect" in kinds["/cycle-a.html"]
    assert kinds["/robots.txt"] == {"robots_txt"}
    assert any("page_cap" in k for k in kinds.values())
    # The calendar trap is bounded: by the page cap, far below its 200 months.  (The cap
    # counts every redirect's hop too: at 60 the calendar, a chain of one request at a
    # time like the redirect loop's, could use it up before the loop's 21 hops were made
    # on a loaded machine, and the loop then ended as page_cap, not redirect.)
    months = [u for u in urls if "/calendar/" in u]
    assert 0 < len(months) < 100
    # Dates: a Last-Modified in the future is kept as sent, one that is not a date is None.
    dates = dict(
        result.rows(
            "SELECT url, last_modified FROM documents WHERE url IN (:a, :b)",
            a=site.url + "future.html",
            b=site.url + "baddate.html",
        )
    )
    assert dates[site.url + "baddate.html"] is None
    assert str(dates[site.url + "future.html"]).startswith("2100-01-01")
    # the page of 100,000 links is stored with its links
    assert (
        result.scalar(
            "SELECT link_count FROM documents WHERE url = :u", u=site.url + "manylinks.html"
        )
        == 100_000
    )
    found = json.loads(result.search("pangolin", "--json", "-n", "20").stdout)["hits"]
    assert len(found) >= 7
    # the crawl's log file has one line per failure
    log_file = Path(result.scalar("SELECT log_file FROM crawls"))
    assert len(log_file.read_text().splitlines()) == len(result.errors())


def _calm_and_failing(tmp_path: Path, site: Site, site2: Site) -> Path:
    """A sites file of a calm server (*site*, the seed) and a failing one (*site2*) cut
    off after 3 network errors, asked one request at a time."""
    sites = tmp_path / "sites.toml"
    sites.write_text(f'''
[[server]]
url = "{site.url}"

[[server]]
url = "{site2.url}"
max_net_errors = 3
concurrency = 1
seeds = ["{site.url}"]
''')
    return sites


def test_500_storm_trips_max_net_errors(site: Site, site2: Site, crawl, tmp_path: Path) -> None:
    """A server answering 500 to everything is cut off after max_net_errors answers; its
    remaining URLs are dropped, and the other server is crawled to the end."""
    for i in range(20):
        site2.add(f"/s{i}.html", "error", status=500, content_type="text/plain", delay=0.2)
    site.page(
        "/", "Calm", "calm server", [f"{site2.url}s{i}.html" for i in range(20)] + ["/ok.html"]
    )
    site.page("/ok.html", "OK", "still crawled")
    sites = _calm_and_failing(tmp_path, site, site2)
    # No sitemap requests: the counts below are of the links.
    result = crawl("-a", f"sites={sites}", settings={"RETRY_TIMES": 0, "SITEMAP_ENABLED": False})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.log
    assert {site.url, site.url + "ok.html"} <= result.urls()
    kinds = [e.kind for e in result.errors() if e.url.startswith(site2.url)]
    assert 3 <= kinds.count("http") <= 5  # the ones answered before the cut-off took effect
    assert kinds.count("cut_off") == 20 - kinds.count("http")
    fetched = [h for h in site2.hits if h.path.startswith("/s")]
    assert len(fetched) == kinds.count("http")
    assert result.scalar("SELECT disabled FROM servers WHERE url = :u", u=site2.url)


#: Links w3lib, urllib or the database would refuse: each is skipped and counted.
INVALID_LINKS = [
    "http://127.0.0.1:99999/",  # port out of range
    "http://127.0.0.1:abc/",  # port not a number
    "http://[::1/",  # broken IPv6 literal
    "http://:80/x.html",  # no host
    "http://ex\x01ample.com/",  # control character in the host
    "/control\x02char.html",  # control character in the path
    "http://a..b/",  # empty host label
    "/" + "x" * 3000 + ".html",  # longer than URLLENGTH_LIMIT
]


def test_malformed_links_are_skipped_and_counted(site: Site, crawl) -> None:
    # The good link comes after the bad ones, on a page with nofollow links too.
    anchors = "".join(f'<a href="{h}">bad</a>' for h in INVALID_LINKS)
    nofollow = '<a rel="nofollow" href="http://127.0.0.1:99999/nf">nf</a>'
    site.add(
        "/",
        f"<html><head><title>Bad links home</title></head><body>pangolin {anchors}"
        f'{nofollow}<a href="/after.html">after</a></body></html>',
    )
    site.page("/after.html", "After", "reached past the bad links", ["/moved.html"])
    site.add("/moved.html", "", status=301, headers={"Location": "http://127.0.0.1:99999/x"})
    result = crawl("-a", f"seeds={site.url}", settings={"RETRY_TIMES": 0})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.log
    assert result.urls() == {site.url, site.url + "after.html"}
    assert result.stats["site/links_invalid"] == len(INVALID_LINKS) + 1
    stored = {row.to_url for row in result.rows("SELECT to_url FROM links")}
    assert stored == {site.url + "after.html", site.url + "moved.html"}
    errors = {row.url: row for row in result.rows("SELECT url, kind, message FROM crawl_errors")}
    moved = errors[site.url + "moved.html"]
    assert moved.kind == "redirect" and "invalid URL" in moved.message


def test_a_crawl_listens_on_no_port(site: Site, tmp_path: Path) -> None:
    """No telnet console, no remote-control server: a crawl opens no listening socket."""
    import subprocess
    import sys
    import time

    import psutil

    from tests.conftest import ROOT, _env

    site.page("/", "Slow home", "wait", ["/slow.html"])
    site.page("/slow.html", "Slow", "slow", delay=3)
    data = tmp_path / "data"
    data.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"seeds={site.url}"],
        cwd=ROOT,
        env=_env(data, None),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    listening: set[int] = set()
    checks, started, watched = 0, time.monotonic(), 0.0
    try:
        while proc.poll() is None:
            try:
                procs = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(True)]
            except psutil.NoSuchProcess:  # the crawl has ended
                break
            for p in procs:
                try:
                    for conn in p.net_connections(kind="inet"):
                        if conn.status == psutil.CONN_LISTEN:
                            listening.add(conn.laddr.port)
                except psutil.NoSuchProcess:  # a child that ended meanwhile: the others still
                    continue
            checks += 1
            watched = time.monotonic() - started
            time.sleep(0.2)
    finally:
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    # The crawl ran long enough to be watched (its slow page takes 3 s), however long each
    # look took on a loaded machine.
    assert checks >= 3 and watched >= 2.0, (checks, watched)
    assert listening == set()
    assert "Remote control HTTP server listening" not in stderr


def test_truncated_compressed_bodies_trip_max_net_errors(
    site: Site, site2: Site, crawl, tmp_path: Path
) -> None:
    """A server whose compressed bodies stop before their end fails as one that resets its
    connections: each is a network error of ``max_net_errors``, and the server is cut off."""
    import gzip

    stream = gzip.compress(b"<html><title>Cut</title><body>" + b"aardvark " * 2000 + b"</body>")
    for i in range(12):
        site2.add(
            f"/z{i}.html",
            stream[: len(stream) // 2],
            content_type="text/html",
            headers={"Content-Encoding": "gzip"},
            delay=0.1,
        )
    site.page("/", "Calm", "calm server", [f"{site2.url}z{i}.html" for i in range(12)])
    sites = _calm_and_failing(tmp_path, site, site2)
    result = crawl("-a", f"sites={sites}", settings={"RETRY_TIMES": 0, "SITEMAP_ENABLED": False})
    assert result.returncode == 0, result.stderr[-3000:]
    kinds = [e.kind for e in result.errors() if e.url.startswith(site2.url + "z")]
    assert 3 <= kinds.count("reset") <= 5  # the ones fetched before the cut-off took effect
    assert kinds.count("cut_off") == 12 - kinds.count("reset")
    assert result.stats["neterrors/count"] >= 3
    assert result.stats["neterrors/servers_cut_off"] == 1
    assert result.scalar("SELECT disabled FROM servers WHERE url = :u", u=site2.url)
