"""The store pipeline and its worker process, built with Scrapy's ``get_crawler``: what is
stored, what the stats say, and the back-pressure of a worker that is behind."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from search.analysis import WordRecord
from search.index import Index
from spidersite.extensions import CrawlRecorder, IndexExtension
from spidersite.items import ErrorItem, LinkRecord, PageItem
from spidersite.pipelines import StorePipeline
from tests.conftest import PostingRow, posting_rows


class _Spider:
    name = "site"
    servers = None

    def crawl_args(self) -> dict[str, Any]:
        return {"seeds": ["http://example.org/"]}


def _crawler(tmp_path: Path, **settings: Any) -> Any:
    crawler = get_crawler(
        settings_dict={
            "SPIDERSITE_DATA_DIR": str(tmp_path),
            "INDEX_DIR": str(tmp_path / "index"),
            "EXTENSIONS": {CrawlRecorder: 0},
            **settings,
        }
    )
    crawler.stats.open_spider()
    crawler.spider = _Spider()
    return crawler


def _page(n: int, text: str = "vacuum removes dead rows", **fields: Any) -> PageItem:
    url = f"http://example.org/p{n}.html"
    return PageItem(
        url=url,
        server="http://example.org/",
        status=200,
        title=f"Page {n}",
        text=text,
        links=[LinkRecord(f"http://example.org/p{n + 1}.html", "next")],
        weights={"body": 1.0, "title": 4.0, "url": 2.0, "desc": 2.0, "keywords": 2.0},
        **fields,
    )


def _rows(tmp_path: Path, sql: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(tmp_path / "spidersite.db")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _postings(tmp_path: Path) -> list[PostingRow]:
    return posting_rows(f"sqlite:///{tmp_path / 'spidersite.db'}")


async def _run(pipeline: StorePipeline, items: list[Any]) -> None:
    await pipeline.open_spider()
    for item in items:
        assert await pipeline.process_item(item) is item
    await pipeline.close_spider()
    await pipeline.finish("finished")


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the crawl's database that can hold its write lock."""
    conn = sqlite3.connect(tmp_path / "spidersite.db", isolation_level=None)
    yield conn
    conn.close()


def test_batches_are_analyzed_stored_and_counted(tmp_path: Path) -> None:
    crawler = _crawler(tmp_path, STORE_BATCH_SIZE=2)
    pipeline = StorePipeline.from_crawler(crawler)
    error = ErrorItem("http://example.org/bad", "http://example.org/", "http", "HTTP 500")
    asyncio.run(_run(pipeline, [_page(1), _page(2), error, _page(3, noindex=True)]))

    stats = crawler.stats.get_stats()
    assert stats["store/batches"] == 2
    assert stats["store/documents"] == stats["store/pages"] == 3
    assert stats["store/errors"] == 1
    assert stats["analyze/pages"] == 2  # the noindex page is stored, not analyzed
    assert stats["analyze/skipped_noindex"] == 1
    assert stats["analyze/words"] == 2 * 4  # "vacuum removes dead rows", stop words included
    assert stats["store/flushed_at_last"] > 0
    docs = {r["url"]: r for r in _rows(tmp_path, "SELECT url, word_count FROM documents")}
    assert docs["http://example.org/p1.html"]["word_count"] == 4
    postings = _postings(tmp_path)
    stems = {p.stem for p in postings if p.url.endswith("p1.html")}
    assert stems >= {"vacuum", "remov", "dead", "row", "page"}
    assert not [p for p in postings if p.url.endswith("p3.html")]
    (crawl,) = _rows(tmp_path, "SELECT id, finish_reason, stats, log_file FROM crawls")
    assert crawl["finish_reason"] == "finished"
    assert '"store/documents": 3' in crawl["stats"]
    assert _rows(tmp_path, "SELECT kind, url FROM crawl_errors")[0]["kind"] == "http"
    log = Path(crawl["log_file"]).read_text()
    assert "\thttp\thttp://example.org/bad\tHTTP 500\n" in log


def test_the_workers_processes_have_ended_when_the_engine_has_stopped(tmp_path: Path) -> None:
    """The worker's processes are told to stop as the crawl's end is recorded, without
    waiting for them there, and waited for when the engine has stopped: no executor's
    thread is left running when the interpreter exits, where Python 3.11's exit handler
    could race with it over its wake-up pipe (a "Bad file descriptor" traceback)."""
    crawler = _crawler(tmp_path, STORE_BATCH_SIZE=2)
    pipeline = StorePipeline.from_crawler(crawler)

    async def run() -> None:
        await pipeline.open_spider()
        for item in [_page(1), _page(2), _page(3)]:
            await pipeline.process_item(item)
        await pipeline.close_spider()
        worker = pipeline.worker
        assert worker is not None and worker.analysis is not None
        executors = [worker.executor, worker.analysis.executor]
        # ProcessPoolExecutor's own thread and processes (private: nothing public tells
        # whether they have ended).
        threads = [e._executor_manager_thread for e in executors]  # type: ignore[attr-defined]
        processes = [p for e in executors for p in e._processes.values()]  # type: ignore[attr-defined]
        assert threads and all(t is not None for t in threads) and processes
        await pipeline.finish("finished")
        assert pipeline.worker is None and pipeline.stopping is not None
        await pipeline.engine_stopped()
        assert not [t for t in threads if t.is_alive()]
        assert not [p for p in processes if p.is_alive()]

    asyncio.run(run())
    assert crawler.stats.get_value("store/documents") == 3


def test_an_analysis_shipped_with_the_item_is_stored_as_it_is(tmp_path: Path) -> None:
    # A topic crawl analyzes on the reactor (the gate needs it): the worker does not again.
    crawler = _crawler(tmp_path)
    pipeline = StorePipeline.from_crawler(crawler)
    page = _page(1)
    page.words = {"shipped": WordRecord("shipped", "shipped", [3, 0, 0, 0, 0, 0], 3.0)}
    asyncio.run(_run(pipeline, [page]))
    assert [p.stem for p in _postings(tmp_path)] == ["shipped"]
    assert crawler.stats.get_value("analyze/words") == 3


def test_process_item_waits_while_the_worker_is_behind(
    tmp_path: Path, locked: sqlite3.Connection
) -> None:
    crawler = _crawler(tmp_path, STORE_BATCH_SIZE=1, STORE_QUEUE_BATCHES=1)
    pipeline = StorePipeline.from_crawler(crawler)

    async def scenario() -> None:
        await pipeline.open_spider()
        locked.execute("BEGIN EXCLUSIVE")  # the database stalls the worker's first batch
        await asyncio.wait_for(pipeline.process_item(_page(1)), 5)  # handed on: room for 1
        second = asyncio.ensure_future(pipeline.process_item(_page(2)))
        await asyncio.sleep(1.5)
        assert not second.done(), "process_item returned while the queue was full"
        assert crawler.stats.get_value("store/queue_full") == 1
        assert crawler.stats.get_value("store/batches") is None
        locked.execute("COMMIT")
        await asyncio.wait_for(second, 30)
        # The first one is committed (the second may be too, by now: it was handed on as
        # soon as there was room).
        assert crawler.stats.get_value("store/batches") >= 1
        await pipeline.close_spider()
        await pipeline.finish("finished")

    asyncio.run(scenario())
    assert crawler.stats.get_value("store/batches") == 2
    assert len(_rows(tmp_path, "SELECT id FROM documents")) == 2


def test_a_batch_does_not_grow_while_the_worker_is_behind(
    tmp_path: Path, locked: sqlite3.Connection
) -> None:
    # Scrapy hands on the items of many responses at once; while the worker is behind, they
    # wait before they are added, so a batch holds at most STORE_BATCH_SIZE rows (it grew
    # to every waiting item before: the worker then analyzed 500 pages at once).
    crawler = _crawler(tmp_path, STORE_BATCH_SIZE=2, STORE_QUEUE_BATCHES=1, STORE_FLUSH_SECONDS=0)
    pipeline = StorePipeline.from_crawler(crawler)
    sizes: list[int] = []

    async def scenario() -> None:
        await pipeline.open_spider()
        locked.execute("BEGIN EXCLUSIVE")  # the database stalls the worker's first batch
        waiting = [asyncio.ensure_future(pipeline.process_item(_page(n))) for n in range(12)]
        for _ in range(15):
            await asyncio.sleep(0.1)
            sizes.append(len(pipeline.batch))
        assert sum(w.done() for w in waiting) <= 4, "items were acknowledged while stalled"
        locked.execute("COMMIT")
        await asyncio.wait_for(asyncio.gather(*waiting), 60)
        await pipeline.close_spider()
        await pipeline.finish("finished")

    asyncio.run(scenario())
    assert max(sizes) <= 2
    assert crawler.stats.get_value("store/batches") == 6
    assert crawler.stats.get_value("store/documents") == 12
    assert len(_rows(tmp_path, "SELECT id FROM documents")) == 12


def test_a_page_the_database_refuses_costs_that_page_alone(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    crawler = _crawler(tmp_path, STORE_BATCH_SIZE=3)
    pipeline = StorePipeline.from_crawler(crawler)
    broken = _page(2, kind=None)  # documents.kind is NOT NULL: the transaction fails
    error = ErrorItem("http://example.org/bad", "http://example.org/", "http", "HTTP 500")
    asyncio.run(_run(pipeline, [_page(1), broken, _page(3), error]))
    logged = capfd.readouterr().err  # the worker's log (another process)
    stats = crawler.stats.get_stats()
    assert stats["store/split_batches"] == 1
    assert stats["store/failed_documents"] == 1
    assert "store/failed_batches" not in stats
    assert "storing its pages one by one" in logged
    assert "Page http://example.org/p2.html could not be stored: IntegrityError" in logged
    urls = {r["url"] for r in _rows(tmp_path, "SELECT url FROM documents")}
    assert urls == {"http://example.org/p1.html", "http://example.org/p3.html"}
    errors = {
        r["url"]: (r["kind"], r["message"])
        for r in _rows(tmp_path, "SELECT url, kind, message FROM crawl_errors")
    }
    assert errors["http://example.org/bad"] == ("http", "HTTP 500")
    kind, message = errors["http://example.org/p2.html"]
    assert kind == "store" and message.startswith("IntegrityError")
    # Both stored pages are searchable.
    stored = {r["id"] for r in _rows(tmp_path, "SELECT id FROM documents")}
    assert Index(tmp_path / "index").docids() == stored
    (crawl,) = _rows(tmp_path, "SELECT finish_reason FROM crawls")
    assert crawl["finish_reason"] == "finished"


class _Engine:
    """The crawler's engine, as far as the pipeline stops the crawl."""

    def __init__(self) -> None:
        self.spider = _Spider()
        self.reasons: list[str] = []

    async def close_spider_async(self, reason: str) -> None:
        self.reasons.append(reason)


@pytest.mark.parametrize("reason", ["store_failed", "finished"])
def test_a_batch_that_cannot_be_stored_stops_the_crawl(
    tmp_path: Path, pg_url: str, caplog: pytest.LogCaptureFixture, reason: str
) -> None:
    # The database stays unreachable past the retries: the batch is not stored, so the
    # crawl stops (store_failed) and a resumed crawl fetches its pages again.  A batch that
    # fails while the spider is closing cannot change Scrapy's reason ("finished"): the
    # crawl is recorded as store_failed all the same.
    from sqlalchemy import create_engine, text

    admin, name = _admin(pg_url)

    crawler = _crawler(
        tmp_path,
        STORE_DATABASE_URL=pg_url,
        STORE_BATCH_SIZE=1,
        STORE_RETRY_TIMES=0,
        INDEX_ENABLED=False,
        LINKRANK_ENABLED=False,
    )
    crawler.engine = _Engine()
    pipeline = StorePipeline.from_crawler(crawler)

    async def scenario() -> None:
        await pipeline.open_spider()
        assert pipeline.worker is not None
        await pipeline.process_item(_page(1))
        await pipeline.worker.drain()
        _reachable(admin, name, False)
        try:
            await pipeline.process_item(_page(2))
            await pipeline.worker.drain()
        finally:
            _reachable(admin, name, True)
        await pipeline.close_spider()
        await pipeline.finish(reason)

    try:
        with caplog.at_level(logging.ERROR, logger="spidersite.pipelines"):
            asyncio.run(scenario())
    finally:
        admin.dispose()
    assert crawler.engine.reasons == ["store_failed"]
    assert crawler.stats.get_value("store/failed_batches") == 1
    assert crawler.stats.get_value("store/error").startswith("OperationalError")
    assert "A batch could not be stored: OperationalError" in caplog.text
    assert "stopping the crawl" in caplog.text
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        urls = set(conn.execute(text("SELECT url FROM documents")).scalars())
        crawl = conn.execute(text("SELECT finish_reason, stats FROM crawls")).one()
    engine.dispose()
    assert urls == {"http://example.org/p1.html"}
    assert crawl.finish_reason == "store_failed"
    assert crawl.stats["store/error"].startswith("OperationalError")


def _admin(pg_url: str) -> tuple[Any, str]:
    """An engine on the maintenance database beside *pg_url*'s (autocommit, for
    :func:`_reachable`), and the name of *pg_url*'s database."""
    from sqlalchemy import create_engine

    base, name = pg_url.rsplit("/", 1)
    return create_engine(base + "/postgres", isolation_level="AUTOCOMMIT"), name


def _reachable(admin: Any, name: str, yes: bool) -> None:
    """Let connections into PostgreSQL database *name*, or refuse them and end those open."""
    from sqlalchemy import text

    with admin.connect() as conn:
        conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(yes).lower()}'))
        if not yes:
            conn.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"),
                {"n": name},
            )


#: What the crawl's messages advise for the pages it could not store: the same command
#: resumes a crawl, not a re-crawl, nor any crawl with SITE_RESUME off.
_AGAIN = {
    (None, True): "run the same command again to resume it and fetch what was not stored",
    ("all", True): "a re-crawl is not resumed: the same command re-crawls from the start",
    (None, False): "SITE_RESUME is off, so the same command starts the crawl over",
}


@pytest.mark.parametrize(("recrawl", "site_resume"), list(_AGAIN))
def test_batches_that_fail_while_the_database_is_down_are_logged_once(
    tmp_path: Path,
    pg_url: str,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    recrawl: str | None,
    site_resume: bool,
) -> None:
    """The database goes away with five batches in flight: the crawl's log says once that a
    batch could not be stored and why, then once how many did not (pages too), with no
    traceback; the worker (another process, its own log) says it once as well, and tries
    the batches after the first that failed once each, not with retries again.  Both
    lines say what running the same command again does: it resumes the crawl, unless it
    is a re-crawl or SITE_RESUME is off."""

    admin, name = _admin(pg_url)
    crawler = _crawler(
        tmp_path,
        STORE_DATABASE_URL=pg_url,
        STORE_BATCH_SIZE=1,
        STORE_QUEUE_BATCHES=5,
        STORE_RETRY_TIMES=2,
        ANALYZE_PROCESSES=0,
        SITE_RESUME=site_resume,
    )
    crawler.spider.recrawl = recrawl
    crawler.engine = _Engine()
    pipeline = StorePipeline.from_crawler(crawler)

    async def scenario() -> None:
        await pipeline.open_spider()
        assert pipeline.worker is not None
        await pipeline.process_item(_page(1))
        await pipeline.worker.drain()
        _reachable(admin, name, False)
        try:
            for n in range(2, 7):
                await pipeline.process_item(_page(n))
            await pipeline.worker.drain()
        finally:
            _reachable(admin, name, True)
        await pipeline.close_spider()
        await pipeline.finish("store_failed")

    try:
        with caplog.at_level(logging.INFO, logger="spidersite.pipelines"):
            asyncio.run(scenario())
    finally:
        admin.dispose()
    worker_log = capfd.readouterr().err  # the worker's own log (another process)
    assert crawler.engine.reasons == ["store_failed"]
    assert crawler.stats.get_value("store/failed_batches") == 5
    # The first batch was retried; the others, in the same failure, were tried once.
    assert crawler.stats.get_value("store/retries") == 2
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 2, caplog.text
    assert errors[0].getMessage().startswith("A batch could not be stored: ")
    assert errors[1].getMessage().startswith("5 batches (5 pages) could not be stored ")
    assert "OperationalError" in errors[0].getMessage()
    assert "OperationalError" in errors[1].getMessage()
    again = _AGAIN[recrawl, site_resume]
    assert errors[0].getMessage().endswith(f"; stopping the crawl: {again}")
    assert errors[1].getMessage().endswith(f"; {again}")
    assert not any(r.exc_info for r in errors)
    assert worker_log.count("A batch could not be stored") == 1, worker_log
    assert "Traceback" not in worker_log
    # No link analysis at the end of a crawl that stopped so: its resume makes it.
    assert not [k for k in crawler.stats.get_stats() if k.startswith("linkrank/")]


@pytest.mark.parametrize("recrawl", [None, "all"])
def test_a_crawl_whose_end_cannot_be_recorded_says_so_in_one_line(
    tmp_path: Path, pg_url: str, caplog: pytest.LogCaptureFixture, recrawl: str | None
) -> None:
    """The database goes away as the crawl ends: the crawl says in one line that its end
    could not be recorded, with the driver's first line, and that the same command
    resumes it (its row stays unfinished: CrawlDB.crawl_to_resume), but not of a
    re-crawl, which the same command does not resume; its exit status is 1."""
    from sqlalchemy import create_engine, text

    from spidersite.commands.crawl import exit_status

    admin, name = _admin(pg_url)
    crawler = _crawler(tmp_path, STORE_DATABASE_URL=pg_url, ANALYZE_PROCESSES=0)
    crawler.spider.recrawl = recrawl
    pipeline = StorePipeline.from_crawler(crawler)

    async def scenario() -> None:
        await pipeline.open_spider()
        await pipeline.process_item(_page(1))
        await pipeline.close_spider()
        _reachable(admin, name, False)
        try:
            await pipeline.finish("finished")
        finally:
            _reachable(admin, name, True)

    try:
        with caplog.at_level(logging.INFO, logger="spidersite.pipelines"):
            asyncio.run(scenario())
    finally:
        admin.dispose()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, caplog.text
    said = errors[0].getMessage()
    assert said.startswith("The crawl's end could not be recorded in the database "), said
    assert "OperationalError" in said and "not currently accepting connections" in said
    assert "\n" not in said and errors[0].exc_info is None
    assert said.endswith("running the same command again resumes it") == (recrawl is None)
    # `scrapy crawl` exits with status 1: the database says the crawl never finished.
    unrecorded = crawler.stats.get_value("store/unrecorded")
    assert unrecorded.startswith("OperationalError") and unrecorded in said
    assert exit_status(crawler.stats.get_stats()) == 1
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            finished = conn.scalars(text("SELECT finished_at FROM crawls")).all()
    finally:
        engine.dispose()
    assert finished == [None]


def test_a_worker_that_cannot_open_stops_the_crawl_cleanly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any failure of the worker's start (not only a database it cannot open) stops the
    crawl at once, said once with its traceback; closing the spider then calls no worker
    that was never opened (it failed with "the worker was not opened")."""
    from scrapy.exceptions import CloseSpider

    crawler = _crawler(tmp_path)
    crawler.engine = _Engine()
    pipeline = StorePipeline.from_crawler(crawler)

    async def broken(*args: Any) -> Any:
        raise RuntimeError("the indexer could not start")

    assert pipeline.worker is not None
    monkeypatch.setattr(pipeline.worker, "open", broken)

    async def scenario() -> None:
        with pytest.raises(CloseSpider) as closed:
            await pipeline.open_spider()
        assert closed.value.reason == "store_failed"
        await pipeline.process_item(_page(1))
        await pipeline.close_spider()
        await pipeline.finish("store_failed")

    with caplog.at_level(logging.ERROR):
        asyncio.run(scenario())
    assert pipeline.worker is None
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, caplog.text
    assert "The store could not be opened: RuntimeError: the indexer could not start" in (
        errors[0].getMessage()
    )
    assert errors[0].exc_info is not None
    assert "not opened" not in caplog.text


def test_a_dead_worker_is_reported_not_swallowed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    crawler = _crawler(tmp_path, STORE_BATCH_SIZE=1)
    pipeline = StorePipeline.from_crawler(crawler)

    async def scenario() -> None:
        await pipeline.open_spider()
        assert pipeline.worker is not None
        for process in list(pipeline.worker.executor._processes.values()):
            process.kill()
        await pipeline.process_item(_page(1))
        await pipeline.close_spider()
        await pipeline.finish("finished")

    with caplog.at_level(logging.ERROR, logger="spidersite.pipelines"):
        asyncio.run(scenario())
    assert crawler.stats.get_value("store/failed_batches") >= 1
    assert "BrokenProcessPool" in crawler.stats.get_value("store/worker_error")
    assert "The store worker failed" in caplog.text
    # The worker is gone: the crawler records the crawl's end through its own engine, as
    # stopped (resumed by the same command), with its stats.
    (crawl,) = _rows(tmp_path, "SELECT finish_reason, finished_at, stats FROM crawls")
    assert crawl["finish_reason"] == "store_failed" and crawl["finished_at"] is not None
    assert "BrokenProcessPool" in json.loads(crawl["stats"])["store/worker_error"]


@pytest.mark.parametrize("processes", [0, 1, 2])
def test_pages_are_analyzed_in_the_analysis_processes_or_the_worker(
    tmp_path: Path, processes: int
) -> None:
    crawler = _crawler(
        tmp_path, STORE_BATCH_SIZE=3, ANALYZE_PROCESSES=processes, INDEX_ENABLED=False
    )
    pipeline = StorePipeline.from_crawler(crawler)
    pages = [_page(n, text=f"marker{n} vacuum") for n in range(12)]
    asyncio.run(_run(pipeline, pages))
    stats = crawler.stats.get_stats()
    assert stats["analyze/pages"] == 12
    assert stats["store/batches"] == 4
    # Every page in an analysis process (batches spread over them), or none.
    assert stats.get("analyze/pool_pages", 0) == (12 if processes else 0)
    stems = [p for p in _postings(tmp_path) if p.stem.startswith("marker")]
    assert sorted((p.url, p.stem) for p in stems) == sorted(
        (f"http://example.org/p{n}.html", f"marker{n}") for n in range(12)
    )


def test_a_dead_analysis_process_stops_the_crawl(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    crawler = _crawler(tmp_path, STORE_BATCH_SIZE=2, ANALYZE_PROCESSES=1, INDEX_ENABLED=False)
    pipeline = StorePipeline.from_crawler(crawler)

    async def scenario() -> None:
        await pipeline.open_spider()
        assert pipeline.worker is not None and pipeline.worker.analysis is not None
        await pipeline.process_item(_page(1))
        await pipeline.process_item(_page(2))
        await pipeline.worker.drain()
        assert crawler.stats.get_value("analyze/pool_pages") == 2
        (pid,) = pipeline.worker.analysis.pids()
        os.kill(pid, signal.SIGKILL)
        await pipeline.process_item(_page(3))
        await pipeline.process_item(_page(4))
        await pipeline.close_spider()
        await pipeline.finish("finished")

    with caplog.at_level(logging.ERROR, logger="spidersite.pipelines"):
        asyncio.run(scenario())
    assert crawler.stats.get_value("store/documents") == 2
    error = crawler.stats.get_value("store/worker_error")
    assert error.startswith("AnalysisError: an analysis process died")
    assert "The store worker failed" in caplog.text
    urls = {r["url"] for r in _rows(tmp_path, "SELECT url FROM documents")}
    assert urls == {"http://example.org/p1.html", "http://example.org/p2.html"}
    (crawl,) = _rows(tmp_path, "SELECT finish_reason, finished_at, stats FROM crawls")
    assert crawl["finish_reason"] == "store_failed" and crawl["finished_at"] is not None
    stats = json.loads(crawl["stats"])
    assert stats["store/worker_error"] == error and stats["store/documents"] == 2


def test_stored_pages_are_made_searchable(tmp_path: Path) -> None:
    crawler = _crawler(
        tmp_path,
        STORE_BATCH_SIZE=2,
        EXTENSIONS={CrawlRecorder: 0, IndexExtension: 0},
    )
    assert crawler.get_extension(IndexExtension) is not None
    pipeline = StorePipeline.from_crawler(crawler)
    pages = [_page(n, text=f"marker{n} vacuum") for n in range(5)]
    asyncio.run(_run(pipeline, [*pages, _page(9, noindex=True)]))
    stats = crawler.stats.get_stats()
    assert stats["index/sent"] == 5
    assert stats["index/deleted"] == 1  # the noindex page is kept out
    assert stats["index/documents"] == 5
    assert stats["index/searchable_at"] >= stats["store/flushed_at_last"] - 5
    ids = {r["id"] for r in _rows(tmp_path, "SELECT id FROM documents WHERE noindex = 0")}
    assert Index(tmp_path / "index").docids() == ids
    flags = _rows(tmp_path, "SELECT indexed FROM documents WHERE noindex = 0")
    assert all(r["indexed"] for r in flags)


def test_a_batch_that_does_not_fill_up_is_handed_on_after_flush_seconds(
    tmp_path: Path,
) -> None:
    """A slow crawl's pages are stored (and searchable) while the crawl runs, not when it
    ends: the partial batch goes to the worker after STORE_FLUSH_SECONDS."""
    crawler = _crawler(tmp_path, STORE_BATCH_SIZE=100, STORE_FLUSH_SECONDS=0.2)
    pipeline = StorePipeline.from_crawler(crawler)

    async def run() -> list[sqlite3.Row]:
        await pipeline.open_spider()
        await pipeline.process_item(_page(1))
        await pipeline.process_item(_page(2))
        for _ in range(100):  # the worker commits within a few seconds
            await asyncio.sleep(0.1)
            if crawler.stats.get_value("store/documents"):
                break
        stored = _rows(tmp_path, "SELECT url FROM documents ORDER BY url")
        await pipeline.close_spider()
        await pipeline.finish("finished")
        return stored

    stored = asyncio.run(run())
    assert [row["url"] for row in stored] == [
        "http://example.org/p1.html",
        "http://example.org/p2.html",
    ]
    assert crawler.stats.get_value("store/timed_flushes") == 1


def test_the_link_graph_prior_is_computed_when_the_crawl_ends(tmp_path: Path) -> None:
    crawler = _crawler(tmp_path, STORE_BATCH_SIZE=2)
    pipeline = StorePipeline.from_crawler(crawler)
    asyncio.run(_run(pipeline, [_page(1), _page(2), _page(3)]))  # p1 -> p2 -> p3 -> p4
    assert crawler.stats.get_value("linkrank/documents") == 3
    assert crawler.stats.get_value("linkrank/written") == 3  # none had one
    assert crawler.stats.get_value("linkrank/links") == 2  # p3's link leads to no page
    ranks = {
        row["url"].rsplit("/", 1)[1]: row["linkrank"]
        for row in _rows(tmp_path, "SELECT url, linkrank FROM documents")
    }
    assert ranks["p3.html"] > ranks["p2.html"] > ranks["p1.html"] > 0


def test_linkrank_enabled_off_leaves_it_out(tmp_path: Path) -> None:
    crawler = _crawler(tmp_path, LINKRANK_ENABLED=False)
    pipeline = StorePipeline.from_crawler(crawler)
    asyncio.run(_run(pipeline, [_page(1), _page(2)]))
    assert crawler.stats.get_value("linkrank/documents") is None
    assert [row["linkrank"] for row in _rows(tmp_path, "SELECT linkrank FROM documents")] == [
        None,
        None,
    ]


def test_a_crawl_that_does_not_feed_the_index_leaves_the_prior_to_the_indexer(
    tmp_path: Path,
) -> None:
    """Scale-out nodes (INDEX_ENABLED off) do not each recompute it on the shared database."""
    crawler = _crawler(tmp_path, INDEX_ENABLED=False)
    pipeline = StorePipeline.from_crawler(crawler)
    asyncio.run(_run(pipeline, [_page(1), _page(2)]))
    assert crawler.stats.get_value("store/documents") == 2
    assert crawler.stats.get_value("linkrank/documents") is None


def test_the_indexer_inbox_holds_the_paths_of_spooled_batches() -> None:
    # A batch waiting for the indexer is a file (its documents in columns, pickled), and
    # the inbox carries its path: the worker holds none of the INDEX_QUEUE_BATCHES
    # batches waiting (in the inbox itself, each was ~1.3 MB of the worker's memory).
    import os

    from search.doccolumns import DocColumns
    from search.index import IndexDoc
    from search.indexer import Batch, IndexerProcess, _apply

    class Inbox:
        def __init__(self) -> None:
            self.items: list[Any] = []

        def put(self, item: Any, timeout: float | None = None) -> None:
            self.items.append(item)

    class Alive:
        exitcode = None
        alive = True

        def is_alive(self) -> bool:
            return self.alive

        def terminate(self) -> None:
            self.alive = False

        def join(self, timeout: float | None = None) -> None:
            pass

    class Writer:
        def __init__(self) -> None:
            self.added: list[IndexDoc] = []
            self.deleted: list[int] = []

        def add_columns(self, columns: DocColumns) -> None:
            self.added.extend(columns.docs())

        def delete(self, docid: int) -> None:
            self.deleted.append(docid)

    indexer = IndexerProcess("unused", "sqlite://")
    indexer.inbox, indexer.process = Inbox(), Alive()
    docs = [IndexDoc(n, f"http://a.example/{n}", "a.example", {"stem": 1.5}) for n in range(3)]
    indexer.send(Batch(DocColumns.of_docs(docs), [7]))
    [message] = indexer.inbox.items
    assert isinstance(message, str)
    assert os.path.dirname(message) == indexer.spool and os.path.isfile(message)
    writer = Writer()
    assert _apply(writer, message) == [0, 1, 2]
    assert [(d.docid, d.url, d.weights) for d in writer.added] == [
        (d.docid, d.url, d.weights) for d in docs
    ]
    assert writer.deleted == [7]
    assert not os.path.exists(message)  # read once, then removed
    indexer.send(Batch(DocColumns.of_docs(docs), []))
    indexer.close(timeout=0)
    assert not os.path.exists(indexer.spool)


def test_a_spool_folder_left_by_a_killed_process_is_removed_by_the_next() -> None:
    import os
    import subprocess
    import sys

    from search.process import spool_folder

    # A process that makes its folder, then dies without removing it (as a kill leaves it).
    code = "from search.process import spool_folder; print(spool_folder('testkind'))"
    left = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    mine = spool_folder("testkind")
    try:
        assert os.path.isdir(mine)
        assert not os.path.exists(left)
        again = spool_folder("testkind")  # this process is alive: its folders stay
        assert os.path.isdir(mine) and os.path.isdir(again)
        os.rmdir(again)
    finally:
        os.rmdir(mine)


def test_the_crawler_does_not_import_what_only_other_processes_or_options_use() -> None:
    """The crawler's memory is mostly imports: the worker's modules (the extractor, the
    store's writes, link rank) load in the worker only; Playwright only with render_js
    servers; Redis's client only with a shared frontier."""
    import subprocess
    import sys

    modules = [
        "spidersite.spiders.site",
        "spidersite.pipelines",
        "spidersite.extensions",
        "spidersite.handlers",
        "spidersite.render",
        "spidersite.scaleout",
        "spidersite.frontier",
        "spidersite.errors",
    ]
    unwanted = [
        "trafilatura",
        "search.content",
        "search.analysispool",
        "search.workerprocess",
        "search.linkrank",
        "playwright",
        "scrapy_playwright",
        "redis",
        "scrapy_redis",
    ]
    code = (
        f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
        f"print([m for m in {unwanted!r} if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    ("stats", "status"),
    [
        ({"finish_reason": "finished"}, 0),
        ({"finish_reason": "finished", "linkrank/error": "boom"}, 0),  # not failed for it
        ({"finish_reason": "store_failed"}, 1),
        ({"finish_reason": "database_unusable"}, 1),
        ({"finish_reason": "index_unusable"}, 1),
        # A batch failed while the spider was closing: Scrapy's reason stays "finished".
        ({"finish_reason": "finished", "store/error": "OperationalError: locked"}, 1),
        ({"finish_reason": "finished", "store/worker_error": "BrokenProcessPool: ..."}, 1),
        # Its end not recorded (the database failed as it closed): run it again.
        ({"finish_reason": "finished", "store/unrecorded": "OperationalError: ..."}, 1),
        # Stored, not searchable: `python -m search reindex --new`.
        ({"finish_reason": "finished", "index/error": "LockError"}, 3),
        ({"finish_reason": "store_failed", "index/error": "LockError"}, 1),
    ],
)
def test_the_exit_status_of_scrapy_crawl_says_what_the_crawl_could_not_do(
    stats: dict[str, Any], status: int
) -> None:
    from spidersite.commands.crawl import exit_status

    assert exit_status(stats) == status


def test_what_the_indexer_could_not_mark_or_read_is_said_in_one_line_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The indexer's report as the crawl closes: pages it made searchable and could not
    mark, and promoted duplicates it could not read to index (the database was down),
    each said in one warning line with the database's reason, no traceback."""
    from search.worker import Report

    crawler = _crawler(tmp_path, STORE_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}")
    pipeline = StorePipeline.from_crawler(crawler)
    try:
        report = Report(
            values={
                "index/unmarked": 6,
                "index/unmarked_error": "connection refused",
                "index/unread": 2,
                "index/unread_error": "not currently accepting connections",
            }
        )
        with caplog.at_level(logging.WARNING, logger="spidersite.pipelines"):
            pipeline._say_unmarked(report)
    finally:
        assert pipeline.worker is not None
        pipeline.worker.shutdown()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and not any(r.exc_info for r in caplog.records)
    assert said[0].startswith("6 pages were made searchable but could not be marked")
    assert said[1].startswith("2 pages that became originals ")
    assert "(not currently accepting connections)" in said[1]
    assert "the next crawl into it indexes them" in said[1]
    assert all("\n" not in line for line in said)
