"""Kill -9 at any moment: the crawl's whole process group (crawler, worker, indexer) is
killed with SIGKILL at a named moment (:mod:`search.faults`, ``SPIDERSITE_KILL_AT``), then
the same command is run again to its end.  Every page is then stored exactly once, marked
indexed and in the index once, ``python -m search check`` finds the database and the
index in agreement, and no search hit comes twice.  On SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from search.index import Index
from tests.conftest import CrawlResult, Site, run_crawl, run_search, start_crawl

#: The word every page holds (a search for it must find each page once).
COMMON = "kestrel"

#: Settings of both runs: small batches, so that a small site makes many commits; no
#: request held in memory, so that every request of a small site waits on disk.
BASE = {
    "LOG_LEVEL": "INFO",
    "CONCURRENT_REQUESTS": 8,
    "LINKRANK_ENABLED": False,
    "FRONTIER_MEMORY_REQUESTS": 0,
}

#: moment -> (SPIDERSITE_KILL_AT, pages of the site, settings of both runs).
MOMENTS: dict[str, tuple[str, int, dict[str, Any]]] = {
    # The 40th response reaches the spider: pages in flight, batches being gathered.
    "download": ("download:40", 60, {"STORE_BATCH_SIZE": 10, "INDEX_BATCH_SIZE": 20}),
    # The third batch written in its transaction, not committed.
    "store_commit": ("store_commit:3", 60, {"STORE_BATCH_SIZE": 10, "INDEX_BATCH_SIZE": 20}),
    # The first Whoosh commit has written its segment's files, not its table of
    # contents: its 210 pages (more than the indexer reads from the database at once,
    # 200: the catch-up of a resumed crawl once indexed only the first 200, issue 14
    # item 5) are stored and not searchable.
    "index_commit": (
        "index_commit:1",
        220,
        {"STORE_BATCH_SIZE": 210, "STORE_FLUSH_SECONDS": 0, "INDEX_BATCH_SIZE": 210},
    ),
    # A Whoosh commit is complete, its pages not yet marked indexed in the database.
    "index_committed": (
        "index_committed:2",
        60,
        {"STORE_BATCH_SIZE": 10, "INDEX_BATCH_SIZE": 20},
    ),
    # A Whoosh commit is merging older segments into the one it writes.
    "merge": (
        "merge:1",
        60,
        {"STORE_BATCH_SIZE": 5, "STORE_FLUSH_SECONDS": 0, "INDEX_BATCH_SIZE": 5},
    ),
}


def word(n: int) -> str:
    """A word of letters only, distinct for every *n* (a marker of page *n*)."""
    letters = "bcdfghjklmnpstvz"
    out = ""
    while True:
        out += letters[n % 16] + "a"
        n //= 16
        if not n:
            return "zu" + out


def build_site(site: Site, pages: int) -> list[str]:
    """A tree of *pages* distinct pages, ten links each; returns their URLs."""
    for i in range(pages):
        children = [f"/p{c}.html" for c in range(10 * i + 1, 10 * i + 11) if c < pages]
        site.page(
            f"/p{i}.html",
            f"Page {word(i)}",
            f"{COMMON} {word(i)} page of the tree, {word(i + 7)} and {word(3 * i)}",
            children,
        )
    return [f"{site.url}p{i}.html" for i in range(pages)]


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_killed_at_any_moment_the_same_command_resumes(
    moment: str, site: Site, db_url: str, tmp_path: Path
) -> None:
    kill_at, pages, settings = MOMENTS[moment]
    urls = build_site(site, pages)
    data = tmp_path / "data"
    args = ("-a", f"seeds={site.url}p0.html")
    settings = {**BASE, **settings}

    killed = start_crawl(
        data, *args, settings=settings, database_url=db_url, env={"SPIDERSITE_KILL_AT": kill_at}
    )
    _, err = killed.communicate(timeout=180)
    assert killed.returncode == -signal.SIGKILL, f"the crawl was not killed at {kill_at}\n{err}"
    first = CrawlResult(0, "", "", data, db_url)
    if moment in ("download", "store_commit"):
        stored = first.scalar("SELECT count(*) FROM documents")
        assert stored < pages, "the crawl was killed before its end"
    else:
        unindexed = first.scalar("SELECT count(*) FROM documents WHERE NOT indexed")
        assert unindexed > 0, "the kill left pages stored and not marked indexed"
    if moment == "index_commit":
        assert unindexed > 200
    # The killed crawl's frontier (its requests waiting on disk) is left behind ...
    assert len(list((data / "frontier").glob("crawl-*"))) == 1

    result = run_crawl(data, *args, settings=settings, database_url=db_url, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resume/requests" in result.stats  # it resumed the killed crawl
    # ... and removed by the next crawl, which removes its own when it finishes: the
    # resumed crawl's frontier comes from the database, not from the dead one's queue.
    assert list((data / "frontier").iterdir()) == []
    assert result.stats["scheduler/enqueued/disk"] > 0

    # Every page stored exactly once, and marked indexed.
    rows = result.rows("SELECT url, indexed FROM documents")
    assert sorted(r.url for r in rows) == sorted(urls)
    assert all(r.indexed for r in rows), [r.url for r in rows if not r.indexed]
    # The database and the index agree (without repair: --dry-run exits 1 otherwise).
    check = run_search("check", "--dry-run", "--json", data_dir=data, database_url=db_url)
    assert check.returncode == 0, check.stdout + check.stderr
    report = json.loads(check.stdout)
    assert report["in_index"] == pages and report["consistent"]
    # Each page once in the index: live documents, and the hits of a word of every page.
    assert Index(data / "index").doc_count() == pages
    found = run_search(COMMON, "-n", str(2 * pages), "--json", data_dir=data, database_url=db_url)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    ids = [h["docid"] for h in hits["hits"]]
    assert hits["total"] == pages and len(ids) == pages and len(set(ids)) == pages
    assert {h["url"] for h in hits["hits"]} == set(urls)
