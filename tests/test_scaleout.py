"""Scale-out: crawl processes sharing one frontier in Redis (spidersite.scaleout).

Needs the local Redis on 127.0.0.1:6379 (``SPIDERSITE_TEST_REDIS`` for another URL); each
test uses its own key prefix and deletes its keys.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.request import request_from_dict

from spidersite.spiders.site import SiteSpider
from tests.conftest import ROOT, CrawlResult, Site, free_port, run_search, start_crawl

REDIS_URL = os.environ.get("SPIDERSITE_TEST_REDIS", "redis://127.0.0.1:6379/0")


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is not reachable at {REDIS_URL} ({exc}); set SPIDERSITE_TEST_REDIS")
    prefix = f"spidersite-test-{uuid.uuid4().hex[:8]}"
    try:
        yield prefix
    finally:
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
        client.close()


def redis_keys(prefix: str) -> list[str]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        return sorted(client.scan_iter(f"{prefix}:*"))
    finally:
        client.close()


def shared_site(site: Site, pages: int = 60, delay: float = 0.0) -> None:
    """A site of *pages* pages: the home page, 9 sections, and the rest spread over the
    sections; every page links back home and to its section (links both processes find)."""
    sections = [f"/s{i}/" for i in range(9)]
    leaves: dict[str, list[str]] = {s: [] for s in sections}
    for n in range(pages - 1 - len(sections)):
        section = sections[n % len(sections)]
        leaves[section].append(f"{section}p{n}.html")
    site.page("/", "Home", "okapi home", sections)
    for i, section in enumerate(sections):
        site.page(
            section,
            f"Section {i}",
            "okapi section",
            [*leaves[section], "/", sections[(i + 1) % len(sections)]],
            delay=delay,
        )
        for path in leaves[section]:
            site.page(path, f"Page {path}", "okapi leaf", ["/", section], delay=delay)


def scaleout_settings(prefix: str, **extra: Any) -> dict[str, Any]:
    return {
        "SCALEOUT_REDIS_URL": REDIS_URL,
        "SCALEOUT_KEY_PREFIX": prefix,
        "SCALEOUT_IDLE_TIMEOUT": 1,
        "INDEX_ENABLED": False,
        **extra,
    }


def crawl_rows(result: CrawlResult) -> list[dict[str, Any]]:
    rows = result.rows("SELECT stats, started_at, finished_at, finish_reason FROM crawls")
    out = []
    for r in rows:
        stats = json.loads(r.stats) if isinstance(r.stats, str) else r.stats
        out.append(
            {
                "stats": stats,
                "started": r.started_at,
                "finished": r.finished_at,
                "reason": r.finish_reason,
            }
        )
    return out


def as_datetime(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


@pytest.mark.postgres
def test_two_processes_share_one_frontier(
    site: Site, pg_url: str, tmp_path: Path, redis_prefix: str
) -> None:
    """Two crawl processes (two data dirs, as on two machines), one Redis, one PostgreSQL:
    every page fetched once and stored once, both processes at work, both exit 0, and one
    indexer makes the pages searchable."""
    # 60 pages of 0.6 s, 4 at a time: 9 s for one process; a waiting process looks at the
    # shared queue every 5 s (Scrapy's engine heartbeat), so both get pages.
    shared_site(site, 60, delay=0.6)
    settings = scaleout_settings(redis_prefix, CONCURRENT_REQUESTS=4, SCALEOUT_IDLE_TIMEOUT=0)
    procs = [
        start_crawl(
            tmp_path / f"node{n}",
            "-a",
            f"seeds={site.url}",
            settings=settings,
            database_url=pg_url,
        )
        for n in range(2)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr
        assert "Traceback" not in stderr

    result = CrawlResult(0, "", "", tmp_path / "node0", pg_url)
    fetched = Counter(p for p in site.paths() if p not in ("/robots.txt", "/sitemap.xml"))
    assert len(fetched) == 60
    assert [path for path, n in fetched.items() if n > 1] == []
    assert result.scalar("SELECT count(*) FROM documents") == 60
    assert result.urls() == {site.url.rstrip("/") + path for path in fetched}
    # Request meta (hops) crossed Redis intact: breadth-first depths.
    hops = {r.url: r.hops for r in result.rows("SELECT url, hops FROM documents")}
    assert hops[site.url] == 0
    assert {hops[f"{site.url}s{i}/"] for i in range(9)} == {1}
    assert set(hops.values()) == {0, 1, 2}

    crawls = crawl_rows(result)
    assert len(crawls) == 2
    stats = [c["stats"] for c in crawls]
    assert all(s.get("site/pages", 0) > 0 for s in stats), stats  # both did some work
    assert sum(s["site/pages"] for s in stats) == 60
    assert sorted(s["scaleout/seeder"] for s in stats) == [0, 1]  # seeds pushed once
    assert all(s["scaleout/popped"] > 0 for s in stats)
    assert all(c["reason"] == "finished" for c in crawls)
    # No process left while the other could still give it work.
    last_page = as_datetime(result.scalar("SELECT max(crawled_at) FROM documents"))
    assert all(as_datetime(c["finished"]) >= last_page for c in crawls)
    # The crawl is done: its keys are gone, so the same command would start a new crawl.
    assert redis_keys(redis_prefix) == []

    indexer = tmp_path / "indexer"
    proc = run_search("reindex", "--quiet", data_dir=indexer, database_url=pg_url)
    assert proc.returncode == 0, proc.stderr
    found = run_search("--json", "-n", "100", "okapi", data_dir=indexer, database_url=pg_url)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["total"] == 60


def test_an_interrupted_crawl_goes_on_from_the_shared_queue(
    site: Site, tmp_path: Path, redis_prefix: str
) -> None:
    """A crawl stopped early keeps its queue and seen-set; the same command takes it up
    from Redis without pushing the seeds again or fetching a page twice."""
    shared_site(site, 60)
    data_dir = tmp_path / "data"
    db = f"sqlite:///{data_dir / 'spidersite.db'}"
    args = ("-a", f"seeds={site.url}")
    first = start_crawl(
        data_dir,
        *args,
        settings=scaleout_settings(
            redis_prefix, CLOSESPIDER_PAGECOUNT=8, CONCURRENT_REQUESTS=2, LOG_FILE=data_dir / "1"
        ),
        database_url=db,
    )
    _, stderr = first.communicate(timeout=60)
    assert first.returncode == 0, stderr
    result = CrawlResult(0, "", "", data_dir, db)
    stored_first = result.scalar("SELECT count(*) FROM documents")
    assert 0 < stored_first < 60
    keys = redis_keys(redis_prefix)
    assert any(k.endswith(":requests") for k in keys) and any(k.endswith(":seeded") for k in keys)

    second = start_crawl(
        data_dir,
        *args,
        settings=scaleout_settings(redis_prefix, SCALEOUT_IDLE_TIMEOUT=0),
        database_url=db,
    )
    _, stderr = second.communicate(timeout=60)
    assert second.returncode == 0, stderr
    fetched = Counter(p for p in site.paths() if p not in ("/robots.txt", "/sitemap.xml"))
    assert len(fetched) == 60 and max(fetched.values()) == 1, fetched
    assert result.scalar("SELECT count(*) FROM documents") == 60
    stats = result.stats
    assert stats["scaleout/seeder"] == 0
    assert stats["site/pages"] == 60 - stored_first
    assert "resume/requests" not in stats  # Redis had the frontier: no resume from the database
    assert redis_keys(redis_prefix) == []


def test_a_process_with_nothing_to_do_waits_then_stops(
    site: Site, crawl, redis_prefix: str
) -> None:
    """A process that finds the seeds claimed and the queue empty stays up for
    SCALEOUT_IDLE_TIMEOUT (the seeds may be on their way), then stops cleanly."""
    import redis

    site.page("/", "Home", "home")
    client = redis.Redis.from_url(REDIS_URL)
    client.set(f"{redis_prefix}:waiting:seeded", "another process")
    client.close()
    result = crawl(
        "-a",
        f"seeds={site.url}",
        "-a",
        "crawl_key=waiting",
        settings=scaleout_settings(redis_prefix, SCALEOUT_IDLE_TIMEOUT=3),
    )
    assert result.returncode == 0, result.stderr
    assert site.paths() == []
    stats = result.stats
    assert stats["scaleout/seeder"] == 0 and stats["scaleout/idle_waits"] >= 1
    assert stats["scaleout/key"] == f"{redis_prefix}:waiting"
    (row,) = crawl_rows(result)
    assert (as_datetime(row["finished"]) - as_datetime(row["started"])).total_seconds() >= 3


@pytest.mark.parametrize(
    ("args", "settings", "message"),
    [
        ((), {"SCALEOUT_REDIS_URL": "redis://127.0.0.1:{port}/0"}, "cannot reach Redis at"),
        ((), {"SCALEOUT_REDIS_URL": "http://127.0.0.1:6379/"}, "is not a Redis URL"),
        (("-a", "crawl_key=x"), {}, "crawl_key: only used with a shared frontier"),
        (("-a", "crawl_key=a b"), {"SCALEOUT_REDIS_URL": REDIS_URL}, "crawl_key: 'a b' must"),
        ((), {"SCALEOUT_REDIS_URL": REDIS_URL, "SCALEOUT_IDLE_TIMEOUT": "soon"}, "IDLE_TIMEOUT"),
    ],
)
def test_bad_scaleout_configuration_is_refused(
    crawl, tmp_path: Path, args: tuple[str, ...], settings: dict[str, str], message: str
) -> None:
    settings = {k: v.format(port=free_port()) for k, v in settings.items()}
    result = crawl("-a", "seeds=http://127.0.0.1:1/", *args, settings=settings)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if message in line]
    assert len(errors) == 1, result.stderr
    assert not (tmp_path / "data" / "spidersite.db").exists()


def test_crawl_keys_and_requests_for_redis() -> None:
    """The crawl key follows the arguments (same arguments, same shared crawl), and the
    spider's requests survive scrapy-redis's serialisation (callbacks are spider methods,
    meta is picklable)."""
    a = SiteSpider(seeds="http://127.0.0.1:1/")
    assert a.frontier_key == SiteSpider(seeds="http://127.0.0.1:1/").frontier_key
    assert a.frontier_key.startswith("site-")
    assert a.frontier_key != SiteSpider(seeds="http://127.0.0.1:2/").frontier_key
    assert SiteSpider(seeds="http://127.0.0.1:1/", crawl_key="docs").frontier_key == "docs"

    for request in (
        a.requests.page("http://127.0.0.1:1/page.html", 3, "http://127.0.0.1:1/"),
        a.requests.page("http://127.0.0.1:1/file.pdf", 2),
    ):
        request.meta["stored"] = {"id": 1, "last_modified": datetime(2024, 1, 2), "etag": "x"}
        again = request_from_dict(pickle.loads(pickle.dumps(request.to_dict(spider=a))), spider=a)
        assert again.callback == request.callback and again.errback == a.on_error
        assert again.meta == request.meta and again.priority == request.priority
        assert again.method == request.method


@pytest.mark.postgres
def test_processes_opening_a_new_database_at_once_migrate_it_once(pg_url: str) -> None:
    """The crawlers of a scaled-out crawl start together on a new PostgreSQL database:
    the schema is created once, the others wait for it (no duplicate-table error)."""
    code = "import sys; from search import db; db.connect(sys.argv[1]).dispose()"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, pg_url],
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    for proc in procs:
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr


def test_a_recrawl_goes_through_the_shared_frontier(site: Site, crawl, redis_prefix: str) -> None:
    """Re-visits (conditional requests carrying the stored document in their meta) travel
    through Redis like the rest, each stored page once; a finished crawl left no keys, so the
    next command is a new crawl."""
    shared_site(site, 20)
    first = crawl(
        "-a", f"seeds={site.url}", settings=scaleout_settings(redis_prefix, SCALEOUT_IDLE_TIMEOUT=0)
    )
    assert first.returncode == 0, first.stderr
    assert redis_keys(redis_prefix) == []
    again = crawl(
        "-a", "recrawl=all", settings=scaleout_settings(redis_prefix, SCALEOUT_IDLE_TIMEOUT=0)
    )
    assert again.returncode == 0, again.stderr
    fetched = Counter(p for p in site.paths() if p not in ("/robots.txt", "/sitemap.xml"))
    assert len(fetched) == 20 and set(fetched.values()) == {2}, fetched
    stats = again.stats
    assert stats["recrawl/scheduled"] == 20 and stats["recrawl/unchanged"] == 20
    # the 20 re-visits and the server's /sitemap.xml
    assert stats["scaleout/seeder"] == 1 and stats["scaleout/popped"] == 21
