"""Re-crawls: conditional GET, unchanged / changed / gone / moved pages, the adaptive
schedule, `recrawl=due`, `recrawl=reanalyze`, and the crawl log."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import CrawlResult, Site, run_search

LM = "Wed, 01 Jan 2025 00:00:00 GMT"


def build(site: Site, etags: bool = True) -> None:
    """A small site; with etags, pages carry ETag and Last-Modified (conditional GET)."""
    pages = {
        "/": ("Home", "walrus colony", ["/a.html", "/b.html", "/c.html"]),
        "/a.html": ("Alpha", "aardvark burrow", ["/"]),
        "/b.html": ("Beta", "badger sett", ["/"]),
        "/c.html": ("Gamma", "cormorant nest", ["/"]),
    }
    for path, (title, body, links) in pages.items():
        headers = {"ETag": f'"{path}-v1"', "Last-Modified": LM} if etags else {}
        site.page(path, title, body, links, headers=headers)


def urls_hits(result: CrawlResult, word: str) -> list[str]:
    proc = result.search(word, "--json")
    assert proc.returncode == 0, proc.stderr
    return [h["url"] for h in json.loads(proc.stdout)["hits"]]


def sql(result: CrawlResult, statement: str, **params: object) -> None:
    engine = create_engine(result.database_url)
    with engine.begin() as conn:
        conn.execute(text(statement), params)
    engine.dispose()


def test_unchanged_site_answers_304_and_only_times_move(site: Site, crawl, db_url: str) -> None:
    build(site)
    first = crawl("-a", f"seeds={site.url}", database_url=db_url)
    assert first.returncode == 0, first.stderr
    before = {
        r.url: r.next_index_time for r in first.rows("SELECT url, next_index_time FROM documents")
    }
    site.hits.clear()
    again = crawl("-a", "recrawl=all", database_url=db_url)
    assert again.returncode == 0, again.stderr
    stats = again.stats
    assert stats["recrawl/scheduled"] == 4
    assert stats["recrawl/not_modified"] == 4
    assert stats.get("recrawl/changed", 0) == 0
    assert stats["conditional/not_modified"] == 4
    # No page changed since the first crawl's link analysis: not run again.
    assert stats["linkrank/skipped"] == 1 and "linkrank/documents" not in stats
    pages = [h for h in site.hits if h.path not in ("/robots.txt", "/sitemap.xml")]
    assert all(h.headers.get("If-None-Match") for h in pages)
    rows = again.rows("SELECT url, next_index_time, change_interval, indexed FROM documents")
    for r in rows:
        assert r.indexed
        assert r.change_interval == int(7 * 86400 * 1.5)  # unchanged: the interval grows
        assert r.next_index_time > before[r.url]  # (text on SQLite: ISO times sort as times)
    assert urls_hits(again, "badger") == [site.url + "b.html"]


def test_stored_pages_are_analyzed_again_once_their_checksums_are_cleared(
    site: Site, crawl, db_url: str
) -> None:
    """A ``recrawl=all`` re-analyzes only the pages that changed (here none: every answer
    is the same checksum, conditional GET off), so an upgrade that changes the analysis
    needs ``recrawl=reanalyze`` (below); a page whose stored checksum was cleared (what
    README told users to do before that mode) counts as changed, and is analyzed again in
    place."""
    build(site)
    site.page("/a.html", "Alpha", "aardvark burrow in der Straße", ["/"], headers={"ETag": '"a"'})
    first = crawl("-a", f"seeds={site.url}", database_url=db_url)
    assert first.returncode == 0, first.stderr
    ids = {r.url: r.id for r in first.rows("SELECT url, id FROM documents")}
    again = crawl("-a", "recrawl=all", "-s", "CONDITIONAL_ENABLED=False", database_url=db_url)
    assert again.returncode == 0, again.stderr
    assert again.stats["recrawl/unchanged"] == 4 and "recrawl/changed" not in again.stats
    assert "analyze/pages" not in again.stats
    sql(again, "UPDATE documents SET checksum = NULL WHERE kind = 'page'")
    third = crawl("-a", "recrawl=all", "-s", "CONDITIONAL_ENABLED=False", database_url=db_url)
    assert third.returncode == 0, third.stderr
    assert third.stats["recrawl/changed"] == 4 and third.stats["analyze/pages"] == 4
    assert {r.url: r.id for r in third.rows("SELECT url, id FROM documents")} == ids
    assert all(r.checksum for r in third.rows("SELECT checksum FROM documents"))
    assert urls_hits(third, "STRASSE") == [site.url + "a.html"]


def test_recrawl_reanalyze_analyzes_every_page_again_in_place(
    site: Site, crawl, db_url: str
) -> None:
    """``recrawl=reanalyze``, what README's "Words and their forms" tells a user to run
    after an upgrade that changes the analysis: every stored page is fetched whole (no
    conditional request, though the server answers 304 to them) and analyzed again even
    when its content did not change, in place (same document ids, postings and index entry
    replaced); its next visit is planned from whether it really changed.  The rest is
    ``recrawl=all``'s: a changed page, a gone one, a new link followed."""
    build(site)
    site.page("/a.html", "Alpha", "aardvark burrow in der Straße", ["/"], headers={"ETag": '"a"'})
    first = crawl("-a", f"seeds={site.url}", database_url=db_url)
    assert first.returncode == 0, first.stderr
    ids = {r.url: r.id for r in first.rows("SELECT url, id FROM documents")}
    current = {(p.url, p.stem, p.surface, p.weight) for p in first.postings()}
    # The stems an older analysis gave (every stem stored otherwise), and an index of them.
    sql(first, "UPDATE words SET stem = 'old' || stem")
    proc = run_search("reindex", "--quiet", data_dir=first.data_dir, database_url=db_url)
    assert proc.returncode == 0, proc.stderr
    assert urls_hits(first, "badger") == [] and urls_hits(first, "STRASSE") == []
    # b changes (and links to a new page d), c is gone; / and a are the same.
    site.page("/b.html", "Beta", "badger hedgehog", ["/", "/d.html"], headers={"ETag": '"b2"'})
    site.page("/d.html", "Delta", "dolphin pod", ["/"])
    site.add("/c.html", "gone", status=404, content_type="text/plain")
    site.hits.clear()
    again = crawl("-a", "recrawl=reanalyze", database_url=db_url)
    assert again.returncode == 0, again.stderr
    stats = again.stats
    assert stats["recrawl/scheduled"] == 4
    assert stats["recrawl/reanalyzed"] == 2  # / and a: the same content, analyzed again
    assert stats["recrawl/changed"] == 1 and stats["recrawl/gone"] == 1
    assert stats["recrawl/new"] == 1 and stats["analyze/pages"] == 4  # /, a, b, d
    for name in ("recrawl/unchanged", "recrawl/not_modified", "conditional/requests"):
        assert name not in stats, name
    pages = [h for h in site.hits if h.path not in ("/robots.txt", "/sitemap.xml")]
    assert sorted(h.path for h in pages) == ["/", "/a.html", "/b.html", "/c.html", "/d.html"]
    assert not [h for h in pages if {"If-None-Match", "If-Modified-Since"} & set(h.headers)]
    docs = {
        r.url: r
        for r in again.rows(
            "SELECT url, id, change_interval, indexed, gone_at IS NOT NULL AS gone FROM documents"
        )
    }
    assert {url: docs[url].id for url in ids} == ids  # analyzed again in place
    assert docs[site.url + "c.html"].gone and not docs[site.url + "c.html"].indexed
    week = 7 * 86400
    assert docs[site.url].change_interval == int(week * 1.5)  # unchanged: the interval grows
    assert docs[site.url + "a.html"].change_interval == int(week * 1.5)
    assert docs[site.url + "b.html"].change_interval == week // 2  # changed: halved
    # The stored stems are the current analysis again, and the index holds them.
    postings = {(p.url, p.stem, p.surface, p.weight) for p in again.postings()}
    for url in (site.url, site.url + "a.html"):
        assert {p for p in postings if p[0] == url} == {p for p in current if p[0] == url}
    live = {site.url, site.url + "a.html", site.url + "b.html", site.url + "d.html"}
    assert not [p for p in postings if p[0] in live and p[1].startswith("old")]
    assert all(docs[url].indexed for url in live)
    assert urls_hits(again, "walrus") == [site.url]
    assert urls_hits(again, "STRASSE") == [site.url + "a.html"]
    assert urls_hits(again, "hedgehog") == [site.url + "b.html"]
    assert urls_hits(again, "dolphin") == [site.url + "d.html"]
    assert urls_hits(again, "cormorant") == []
    # The next re-crawl is conditional again: the stored ETags were kept.
    site.hits.clear()
    third = crawl("-a", "recrawl=all", database_url=db_url)
    assert third.returncode == 0, third.stderr
    assert third.stats["recrawl/not_modified"] == 3  # /, a, b (d has no ETag)
    assert third.stats["recrawl/unchanged"] == 1 and "analyze/pages" not in third.stats


def test_changed_gone_and_moved_pages(site: Site, crawl, tmp_path: Path) -> None:
    build(site, etags=False)  # a server that ignores conditional requests
    first = crawl("-a", f"seeds={site.url}")
    assert first.returncode == 0, first.stderr
    ids = {r.url: r.id for r in first.rows("SELECT url, id FROM documents")}
    # b changes, c disappears, a moves to a2
    site.page("/b.html", "Beta", "badger hedgehog", ["/"])
    site.add("/c.html", "gone", status=404, content_type="text/plain")
    site.add("/a.html", "", status=301, headers={"Location": "/a2.html"})
    site.page("/a2.html", "Alpha two", "aardvark tunnel", ["/"])
    again = crawl("-a", "recrawl=all")
    assert again.returncode == 0, again.stderr
    stats = again.stats
    assert stats["recrawl/unchanged"] == 1  # the home page: same checksum, no 304
    assert stats["recrawl/changed"] == 1
    assert stats["recrawl/gone"] == 1
    assert stats["recrawl/moved"] == 1
    assert stats["linkrank/documents"] == 3 and "linkrank/skipped" not in stats  # c and a gone
    assert urls_hits(again, "hedgehog") == [site.url + "b.html"]
    assert urls_hits(again, "cormorant") == []  # gone: out of the index
    assert urls_hits(again, "tunnel") == [site.url + "a2.html"]
    assert site.url + "a.html" not in urls_hits(again, "aardvark")
    gone = {
        r.url: r
        for r in again.rows(
            "SELECT url, status, gone_at IS NOT NULL AS gone, indexed FROM documents"
        )
    }
    assert gone[site.url + "c.html"].status == 404 and gone[site.url + "c.html"].gone
    assert gone[site.url + "a.html"].status == 301 and gone[site.url + "a.html"].gone
    # the changed page kept its id, got a shorter interval; its old words are gone
    b = again.rows(
        "SELECT id, change_interval FROM documents WHERE url = :u", u=site.url + "b.html"
    )[0]
    assert b.id == ids[site.url + "b.html"] and b.change_interval == 7 * 86400 // 2
    words = {p.stem for p in again.postings() if p.document_id == b.id}
    assert "hedgehog" in words and "sett" not in words
    assert again.scalar("SELECT count(*) FROM documents WHERE url = :u", u=site.url + "b.html") == 1


def test_a_page_that_now_redirects_off_the_crawl_leaves_the_index(
    site: Site, site2: Site, crawl
) -> None:
    build(site)
    first = crawl("-a", f"seeds={site.url}")
    assert first.returncode == 0, first.stderr
    site.add("/a.html", "", status=302, headers={"Location": site2.url + "elsewhere.html"})
    site2.page("/elsewhere.html", "Elsewhere", "aardvark abroad")
    again = crawl("-a", "recrawl=all")
    assert again.returncode == 0, again.stderr
    assert site2.paths() == []
    assert again.stats["recrawl/moved"] == 1
    assert urls_hits(again, "aardvark") == []
    row = again.rows(
        "SELECT status, gone_at IS NOT NULL AS gone, indexed FROM documents WHERE url = :u",
        u=site.url + "a.html",
    )[0]
    assert row.status == 301 and row.gone and not row.indexed
    assert (site.url + "a.html", "redirect") in again.error_kinds()


def test_a_page_robots_txt_now_forbids_leaves_the_index(site: Site, crawl) -> None:
    """A stored page that robots.txt has come to forbid is not fetched, and leaves the
    index as a gone page does (its status stays what it was). robots.txt that cannot be
    fetched allows everything, so only a robots.txt read as written can take pages out."""
    build(site)
    first = crawl("-a", f"seeds={site.url}")
    assert first.returncode == 0, first.stderr
    assert urls_hits(first, "badger") == [site.url + "b.html"]
    site.add("/robots.txt", "User-agent: *\nDisallow: /b.html\n", content_type="text/plain")
    site.hits.clear()
    again = crawl("-a", "recrawl=all")
    assert again.returncode == 0, again.stderr
    assert not site.requested("/b.html")
    assert again.stats["recrawl/forbidden"] == 1
    assert urls_hits(again, "badger") == []
    assert urls_hits(again, "aardvark") == [site.url + "a.html"]
    row = again.rows(
        "SELECT status, gone_at IS NOT NULL AS gone, indexed FROM documents WHERE url = :u",
        u=site.url + "b.html",
    )[0]
    assert row.status == 200 and row.gone and not row.indexed
    assert (site.url + "b.html", "robots") in again.error_kinds()
    # Allowed again: a gone page is not re-visited, but found again when seeded (or
    # linked from a changed page), it is stored and indexed again.
    site.add("/robots.txt", "User-agent: *\nDisallow:\n", content_type="text/plain")
    third = crawl("-a", f"seeds={site.url}b.html", "-a", "recrawl=all")
    assert third.returncode == 0, third.stderr
    assert urls_hits(third, "badger") == [site.url + "b.html"]


def test_recrawl_due_visits_only_due_pages_and_new_links(site: Site, crawl) -> None:
    build(site)
    first = crawl("-a", f"seeds={site.url}")
    assert first.returncode == 0, first.stderr
    # Only b is due; b now links to a new page d.
    sql(
        first,
        "UPDATE documents SET next_index_time = :t WHERE url = :u",
        t=datetime.now(UTC) - timedelta(hours=1),
        u=site.url + "b.html",
    )
    site.page(
        "/b.html",
        "Beta",
        "badger sett",
        ["/", "/d.html"],
        headers={"ETag": '"b-v2"', "Last-Modified": LM},
    )
    site.page("/d.html", "Delta", "dolphin pod", ["/"])
    site.hits.clear()
    again = crawl("-a", "recrawl=due")
    assert again.returncode == 0, again.stderr
    fetched = sorted(p for p in site.paths() if p not in ("/robots.txt", "/sitemap.xml"))
    assert fetched == ["/b.html", "/d.html"]  # not /, a or c: not due; / is seen
    assert again.stats["recrawl/scheduled"] == 1
    assert again.stats["recrawl/new"] == 1
    assert urls_hits(again, "dolphin") == [site.url + "d.html"]


def test_recrawl_argument_is_checked(crawl) -> None:
    result = crawl("-a", "recrawl=sometimes")
    assert result.returncode == 2
    assert "recrawl: 'sometimes' is not one of: due, all, reanalyze" in result.stderr


def test_crawl_log_file_and_errors_command(site: Site, crawl) -> None:
    site.page("/", "Home", "root", ["/missing.html", "/broken.html"])
    site.add("/broken.html", "oops", status=500, content_type="text/plain")
    result = crawl("-a", f"seeds={site.url}", settings={"RETRY_TIMES": 0})
    assert result.returncode == 0, result.stderr
    log_file = result.scalar("SELECT log_file FROM crawls")
    lines = Path(log_file).read_text().splitlines()
    assert Path(log_file).parent == result.data_dir / "logs"
    kinds = sorted(line.split("\t")[1] for line in lines)
    assert kinds == ["http", "http"]
    assert any(line.endswith("\tHTTP 404") and "/missing.html" in line for line in lines)
    from tests.conftest import run_search

    proc = run_search("errors", "--json", data_dir=result.data_dir)
    assert proc.returncode == 0, proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert {e["url"] for e in errors} == {site.url + "missing.html", site.url + "broken.html"}
    filtered = run_search("errors", "--kind", "robots", "--json", data_dir=result.data_dir)
    assert json.loads(filtered.stdout)["errors"] == []
    by_server = run_search("errors", "--server", site.url, data_dir=result.data_dir)
    assert "missing.html" in by_server.stdout and "HTTP 500" in by_server.stdout


@pytest.mark.parametrize("mode", ["all", "reanalyze"])
def test_recrawl_without_documents_is_harmless(crawl, mode: str) -> None:
    result = crawl("-a", f"recrawl={mode}")
    assert result.returncode == 0, result.stderr
    assert result.stats["recrawl/scheduled"] == 0


def test_page_store_keeps_fetched_pages(site: Site, crawl) -> None:
    from warcio.archiveiterator import ArchiveIterator

    from tests.conftest import run_search

    build(site)
    result = crawl("-a", f"seeds={site.url}", settings={"PAGESTORE_ENABLED": True})
    assert result.returncode == 0, result.stderr
    rows = result.rows("SELECT url, warc_file, warc_offset FROM documents")
    assert all(r.warc_file and r.warc_offset is not None for r in rows)
    warc = Path(rows[0].warc_file)
    assert warc.parent == result.data_dir / "warc"
    with warc.open("rb") as stream:
        uris = {
            r.rec_headers.get_header("WARC-Target-URI")
            for r in ArchiveIterator(stream)
            if r.rec_type == "response"
        }
    assert uris == {r.url for r in rows}
    proc = run_search("cached", site.url + "b.html", data_dir=result.data_dir)
    assert proc.returncode == 0, proc.stderr
    assert "badger sett" in proc.stdout and "<title>Beta</title>" in proc.stdout
    missing = run_search("cached", site.url + "nope.html", data_dir=result.data_dir)
    assert missing.returncode == 1 and "no stored document" in missing.stderr
    # The web app's document page links to the stored copy, served as plain text.
    from tests.test_web import make_app

    client = make_app(result.data_dir).test_client()
    doc_id = result.scalar("SELECT id FROM documents WHERE url = :u", u=site.url + "b.html")
    page = client.get(f"/doc/{doc_id}")
    assert f"/doc/{doc_id}/cached" in page.get_data(as_text=True)
    cached = client.get(f"/doc/{doc_id}/cached")
    assert cached.status_code == 200
    assert cached.headers["Content-Type"].startswith("text/plain")
    assert b"<title>Beta</title>" in cached.data
