"""The read side of the crawl database (search.crawldb), on SQLite and PostgreSQL; and the
store's retries while the database is unreachable."""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy import text as text_sql
from sqlalchemy.exc import OperationalError

from search import db
from search.analysis import PackedWords, analyze_document
from search.crawldb import CrawlDB
from search.models import Document
from search.rows import DocumentRow, GoneRow
from search.store import DocumentStore
from tests.conftest import ROOT, posting_rows

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def page(
    url: str,
    text: str = "",
    hops: int = 0,
    links: list[tuple[str, str, bool]] | None = None,
    **values: Any,
) -> DocumentRow:
    words = analyze_document({"body": text, "title": "", "url": url, "desc": "", "keywords": ""})
    return DocumentRow(
        url=url,
        server="http://a.example/",
        values={
            "kind": "page",
            "status": 200,
            "hops": hops,
            "crawled_at": NOW,
            "text": text,
            "title": f"title of {url}",
            "noindex": False,
            "nofollow": False,
            "etag": None,
            **values,
        },
        words=words,
        links=links or [],
    )


@pytest.fixture
def engine(db_url: str) -> Iterator[Any]:
    engine = db.connect(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def store(engine: Any) -> DocumentStore:
    store = DocumentStore(engine)
    store.upsert_servers([("http://a.example/", {"titleweight": 4})], NOW)
    return store


def ids_by_url(engine: Any) -> dict[str, int]:
    with engine.connect() as conn:
        return {row.url: row.id for row in conn.execute(Document.__table__.select())}


def test_crawl_to_resume(engine: Any, store: DocumentStore) -> None:
    crawldb = CrawlDB(engine)
    assert crawldb.crawl_to_resume("site", {"seeds": "x"}) is None
    store.start_crawl("site", {"seeds": "x"}, NOW)
    assert crawldb.crawl_to_resume("site", {"seeds": "x"}) is not None
    assert crawldb.crawl_to_resume("site", {"seeds": "y"}) is None
    assert crawldb.crawl_to_resume("other", {"seeds": "x"}) is None
    store.finish_crawl("finished", {}, NOW)
    assert crawldb.crawl_to_resume("site", {"seeds": "x"}) is None
    # Stopped because a batch could not be stored: resumed, so that its pages are fetched.
    store.start_crawl("site", {"seeds": "x"}, NOW)
    store.finish_crawl("store_failed", {}, NOW)
    assert crawldb.crawl_to_resume("site", {"seeds": "x"}) is not None


def test_a_crawl_that_resumes_closes_the_unfinished_row_it_resumes(
    engine: Any, store: DocumentStore
) -> None:
    """A killed crawl's row (or one whose end could not be recorded) is closed by the
    crawl that resumes it: finish reason ``resumed``, finished when that one started, its
    id in the stats.  Left open, it stood for a crawl that may still be writing, and no
    later crawl could skip its link analysis.  A row already finished (``store_failed``,
    ``shutdown``) keeps its own record, and the resuming crawl's row is the one to resume
    while it runs."""
    from search.models import Crawl

    crawldb = CrawlDB(engine)
    killed = store.start_crawl("site", {"seeds": "x"}, NOW)
    assert crawldb.crawl_to_resume("site", {"seeds": "x"}) == killed
    assert not crawldb.links_analyzed(None)
    later = NOW + timedelta(minutes=1)
    resuming = store.start_crawl("site", {"seeds": "x"}, later, resumes=killed)
    assert crawldb.crawl_to_resume("site", {"seeds": "x"}) == resuming

    def row(crawl_id: int) -> Any:
        with engine.connect() as conn:
            return conn.execute(
                select(Crawl.finished_at, Crawl.finish_reason, Crawl.stats).where(
                    Crawl.id == crawl_id
                )
            ).one()

    closed = row(killed)
    assert closed.finish_reason == "resumed"
    assert closed.finished_at.replace(tzinfo=UTC) == later
    assert closed.stats == {"resumed_by": resuming}
    # The resuming crawl's analysis, after its last write, covers the killed one's pages.
    stats = {"store/documents": 2, "store/gone": 0, "store/flushed_at_last": later.timestamp()}
    stats["linkrank/read_at"] = later.timestamp() + 1
    store.finish_crawl("finished", stats, later + timedelta(seconds=2))
    assert crawldb.links_analyzed(None)
    assert crawldb.crawl_to_resume("site", {"seeds": "x"}) is None

    # A stopped crawl's row is finished already: resuming it leaves its record alone.
    stopped = store.start_crawl("site", {"seeds": "x"}, NOW)
    store.finish_crawl("shutdown", {"store/documents": 1}, NOW)
    assert crawldb.crawl_to_resume("site", {"seeds": "x"}) == stopped
    store.start_crawl("site", {"seeds": "x"}, later, resumes=stopped)
    assert row(stopped).finish_reason == "shutdown"
    assert row(stopped).stats == {"store/documents": 1}


#: A crawl's worker, as far as its row goes: it starts a crawl on the database of argv[1]
#: (closing the rows of dead crawls, :meth:`DocumentStore.start_crawl`), prints its id,
#: and runs (holding the crawl's lock) until its input ends or it is killed.
CRAWL_HOLDER = """
import sys
from datetime import UTC, datetime
from search import db
from search.store import DocumentStore
store = DocumentStore(db.connect(sys.argv[1]))
print(store.start_crawl("site", {"seeds": sys.argv[2]}, datetime.now(UTC)), flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def crawl_process(url: str, seeds: str) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """A process that runs crawl *seeds* on the database at *url* (:data:`CRAWL_HOLDER`):
    its id and the process, ended (closing its input: a crawl left unfinished) after."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CRAWL_HOLDER, url, seeds],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline()), proc
    finally:
        proc.kill()
        proc.communicate(timeout=60)


def crawl_rows(engine: Any) -> dict[int, Any]:
    """Each crawl's row by id: finished_at (aware), finish_reason, stats."""
    from search.models import Crawl

    with engine.connect() as conn:
        rows = conn.execute(select(Crawl.id, Crawl.finished_at, Crawl.finish_reason, Crawl.stats))
        return {
            r.id: (
                r.finished_at and r.finished_at.replace(tzinfo=UTC),
                r.finish_reason,
                r.stats,
            )
            for r in rows
        }


def test_a_starting_crawl_closes_the_rows_of_dead_crawls_only(db_url: str, engine: Any) -> None:
    """A crawl killed before it recorded its end (not resumed: a re-crawl, or
    SITE_RESUME off, or another process of a scaled-out crawl) leaves its row unfinished;
    the next crawl that starts on the database closes it: finish reason ``abandoned``,
    finished when it was found, the finder in its stats.  A crawl running in another
    process (its lock held) is left alone, and so is the admin's placeholder of a crawl
    starting; the crawl that resumes one gets ``resumed``, also when another crawl had
    found it abandoned first.  A crawl closed so is resumed as an unfinished one is."""
    from sqlalchemy.orm import Session

    from search.models import Crawl

    crawldb = CrawlDB(engine)
    with crawl_process(db_url, "live") as (live, _), crawl_process(db_url, "dead") as (dead, proc):
        proc.kill()  # kill -9: no end recorded, and the lock goes with the process
        proc.wait(timeout=60)
        with Session(engine) as s, s.begin():  # the admin's row of a crawl starting
            s.add(Crawl(spider="site", args={"placeholder": True}, started_at=NOW, stats={}))
        placeholder = max(crawl_rows(engine))
        assert crawldb.crawl_to_resume("site", {"seeds": "dead"}) == dead

        store = DocumentStore(engine)
        later = NOW + timedelta(minutes=1)
        finder = store.start_crawl("site", {"seeds": "other"}, later)
        rows = crawl_rows(engine)
        assert rows[dead] == (later, "abandoned", {"abandoned_found_by": finder})
        assert rows[live] == (None, None, {})  # running: its lock is held
        assert rows[placeholder][:2] == (None, None)
        assert rows[finder][:2] == (None, None)
        assert store.abandoned == [dead]
        # Killed, it is resumed all the same: then its row says so.
        assert crawldb.crawl_to_resume("site", {"seeds": "dead"}) == dead
        resumer = DocumentStore(engine).start_crawl("site", {"seeds": "dead"}, later, dead)
        assert crawl_rows(engine)[dead][1:] == ("resumed", {"resumed_by": resumer})
        assert crawl_rows(engine)[live] == (None, None, {})
    # The live crawl's process has ended without recording its end (killed), and so has
    # the resumer (its store dropped); the finder records its end.
    store.finish_crawl("finished", {}, later)
    last = DocumentStore(engine)
    third = last.start_crawl("site", {"seeds": "other"}, later + timedelta(minutes=1))
    rows = crawl_rows(engine)
    assert rows[live][1:] == ("abandoned", {"abandoned_found_by": third})
    assert rows[resumer][1:] == ("abandoned", {"abandoned_found_by": third})  # dropped
    assert rows[finder][1] == "finished"
    assert last.abandoned == [live, resumer]


def test_a_crawl_whose_lock_was_lost_takes_it_again(pg_url: str) -> None:
    """PostgreSQL lets go of a crawl's lock when its connection is lost (a restart, a
    connection cut): another crawl starting then takes the running crawl for a dead one.
    The crawl takes its lock again at its next batch and reopens its row."""
    from search.crawllocks import CRAWL_LOCK_SPACE

    engine = db.connect(pg_url)
    try:
        store = DocumentStore(engine)
        running = store.start_crawl("site", {"seeds": "x"}, NOW)
        store.keep_crawl_lock()  # held: nothing to do
        with engine.connect() as conn:
            cut = conn.scalar(
                text_sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = "
                    "'advisory' AND classid = :space AND objid = :id AND objsubid = 2"
                ),
                {"space": CRAWL_LOCK_SPACE, "id": running},
            )
        assert cut
        later = NOW + timedelta(minutes=1)
        DocumentStore(engine).start_crawl("site", {"seeds": "y"}, later)
        assert crawl_rows(engine)[running][1] == "abandoned"
        store.keep_crawl_lock()
        assert crawl_rows(engine)[running] == (None, None, {})
        other = DocumentStore(engine)
        other.start_crawl("site", {"seeds": "z"}, later)
        assert crawl_rows(engine)[running] == (None, None, {})
    finally:
        engine.dispose()


def test_a_dead_crawl_whose_row_could_not_be_closed_is_not_left_locked(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The lock a crawl takes to close a dead crawl's row is let go when closing the row
    fails (the transaction aborted, so that the lock cannot be let go through it): the
    connection is closed, not handed back to the pool with the lock, which would make the
    dead crawl look alive to every other process for as long as it stays there."""
    from sqlalchemy.orm import Session

    from search.crawllocks import CRAWL_LOCK_SPACE, CrawlLocks, close_dead_crawls
    from search.models import Crawl

    engine = db.connect(pg_url)
    other = db.create(pg_url)
    try:
        with Session(engine) as s, s.begin():  # a crawl killed before it recorded its end
            s.add(Crawl(spider="site", args={}, started_at=NOW, stats={}))
        (dead,) = crawl_rows(engine)
        with engine.begin() as conn:
            conn.execute(
                text_sql(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'the update is refused'; END $$"
                )
            )
            conn.execute(
                text_sql(
                    "CREATE TRIGGER refuse BEFORE UPDATE ON crawls "
                    "FOR EACH ROW EXECUTE FUNCTION refuse()"
                )
            )
        locks = CrawlLocks.of(engine)
        assert close_dead_crawls(locks, NOW, "admin", Crawl.id == dead) == []
        assert "the update is refused" in caplog.text  # the cause, not the failed unlock
        assert crawl_rows(engine)[dead][:2] == (None, None)
        key = {"space": CRAWL_LOCK_SPACE, "id": dead}
        free = False
        deadline = time.monotonic() + 10  # the server ends the closed connection's session
        while not free and time.monotonic() < deadline:
            with other.connect() as conn:
                free = conn.scalar(text_sql("SELECT pg_try_advisory_lock(:space, :id)"), key)
                if free:
                    conn.execute(text_sql("SELECT pg_advisory_unlock(:space, :id)"), key)
            time.sleep(0.05)
        assert free, "the dead crawl's lock is still held"
        with engine.begin() as conn:
            conn.execute(text_sql("DROP TRIGGER refuse ON crawls"))
        closer = CrawlLocks.of(other)  # another process: a connection of its own
        assert close_dead_crawls(closer, NOW, "admin", Crawl.id == dead) == [dead]
    finally:
        other.dispose()
        engine.dispose()


def test_no_connection_free_in_time_closes_no_row_and_is_said_in_one_line(
    engine: Any, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A failure that is not the database's but SQLAlchemy's own (here the pool's: no
    connection free within its timeout, as when the admin's requests hold them all) is
    logged in one line and closes nothing, as a database failure is; it does not escape to
    the crawl starting or the admin's page."""
    from sqlalchemy.orm import Session

    from search.crawllocks import CrawlLocks, close_dead_crawls
    from search.models import Crawl

    with Session(engine) as s, s.begin():  # a crawl killed before it recorded its end
        s.add(Crawl(spider="site", args={}, started_at=NOW, stats={}))
    (dead,) = crawl_rows(engine)
    small = db.create(db_url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    try:
        with small.connect():  # the pool's one connection, taken
            closed = close_dead_crawls(CrawlLocks.of(small), NOW, "admin", Crawl.id == dead)
        assert closed == []
        (line,) = [r for r in caplog.records if "could not be closed" in r.getMessage()]
        assert "QueuePool limit" in line.getMessage() and "\n" not in line.getMessage()
        assert crawl_rows(engine)[dead][:2] == (None, None)
        assert close_dead_crawls(CrawlLocks.of(small), NOW, "admin", Crawl.id == dead) == [dead]
    finally:
        small.dispose()


def test_an_admin_crawl_is_resumed_by_the_arguments_that_identify_it(
    engine: Any, store: DocumentStore
) -> None:
    """The admin adds its own arguments to its crawls' rows (servers, runner, process, the
    topic's threshold) and records a placeholder row as a crawl starts: neither keeps the
    same crawl from being resumed, and a placeholder is no crawl to resume."""
    from sqlalchemy.orm import Session

    from search.models import Crawl

    crawldb = CrawlDB(engine)
    spider = {"sites": "data/admin/sites-1234.toml", "topic": "quokka"}
    admin = {**spider, "topic_threshold": "1.0", "servers": ["http://a/"], "pid": 42}
    store.start_crawl("site", admin, NOW)
    store.finish_crawl("shutdown", {}, NOW)
    assert crawldb.crawl_to_resume("site", spider) is not None
    assert crawldb.crawl_to_resume("site", {"sites": spider["sites"]}) is None  # no topic
    store.finish_crawl("finished", {}, NOW)
    with Session(engine) as s, s.begin():  # the admin's row of the next crawl, starting
        s.add(Crawl(spider="site", args={**admin, "placeholder": True}, started_at=NOW))
    assert crawldb.crawl_to_resume("site", spider) is None


def test_links_analyzed_knows_when_no_page_changed_since_the_last_analysis(
    engine: Any,
) -> None:
    """A crawl that changed no page may skip its link analysis only when every other
    crawl finished, and the latest recorded analysis began after the last crawl that
    stored or lost a page finished."""
    crawldb = CrawlDB(engine)

    def crawl(finished: datetime | None, **stats: Any) -> int:
        store = DocumentStore(engine)
        crawl_id = store.start_crawl("site", {}, NOW)
        if finished is not None:
            store.finish_crawl("finished", stats, finished)
        return crawl_id

    changed = {"store/documents": 3, "store/gone": 0}
    unchanged = {"store/documents": 0, "store/gone": 0}
    assert not crawldb.links_analyzed(None)  # no crawl, no analysis recorded
    # A crawl's own analysis reads after its last batch, before the crawl's end.
    first = crawl(
        NOW + timedelta(seconds=2),
        **changed,
        **{"store/flushed_at_last": NOW.timestamp(), "linkrank/read_at": NOW.timestamp() + 1},
    )
    assert crawldb.links_analyzed(None)
    current = crawl(None)  # the crawl asking: unfinished, and left out
    assert crawldb.links_analyzed(current)
    # An unchanged crawl without an analysis of its own changes nothing.
    crawl(NOW + timedelta(minutes=1), **unchanged)
    assert crawldb.links_analyzed(current)
    # Another crawl running (or killed): its writes are not known to be over.
    running = crawl(None)
    assert not crawldb.links_analyzed(current)
    with engine.begin() as conn:
        conn.execute(text_sql("DELETE FROM crawls WHERE id = :i"), {"i": running})
    # A crawl that stored pages after the analysis, and had none of its own (its time
    # of last write is its end when it has none recorded).
    later = crawl(NOW + timedelta(minutes=2), **changed)
    assert not crawldb.links_analyzed(current)
    # ... until a later analysis began after it finished.
    crawl(
        NOW + timedelta(minutes=4),
        **unchanged,
        **{"linkrank/read_at": (NOW + timedelta(minutes=3)).timestamp()},
    )
    assert crawldb.links_analyzed(current)
    # A crawl that lost pages, or recorded no counts, changed the graph too.
    with engine.begin() as conn:
        conn.execute(text_sql("DELETE FROM crawls WHERE id IN (:a, :b)"), {"a": first, "b": later})
    crawl(NOW + timedelta(minutes=5), **{"store/documents": 0, "store/gone": 1})
    assert not crawldb.links_analyzed(current)
    crawl(
        NOW + timedelta(minutes=7), **{"linkrank/read_at": (NOW + timedelta(minutes=6)).timestamp()}
    )
    assert not crawldb.links_analyzed(current)  # a crawl without counts: not known unchanged


def test_links_analyzed_not_when_the_links_by_target_it_wrote_are_gone(engine: Any) -> None:
    """A crash of PostgreSQL empties the links by target (an ``UNLOGGED`` table): an
    analysis that wrote some, with none there now, is not known to hold."""
    crawldb = CrawlDB(engine)
    store = DocumentStore(engine)
    one, two = "http://a.example/1", "http://a.example/2"
    store.write_batch([page(one, links=[(two, "two", False)]), page(two)])
    store.start_crawl("site", {}, NOW)
    stats = {"store/documents": 2, "store/gone": 0, "store/flushed_at_last": NOW.timestamp()}
    stats |= {"linkrank/read_at": NOW.timestamp() + 1, "linkrank/inlinks": 1}
    store.finish_crawl("finished", stats, NOW + timedelta(seconds=2))
    assert crawldb.rebuild_inlinks() == 1
    assert crawldb.links_analyzed(None)
    with engine.begin() as conn:
        conn.execute(text_sql("DELETE FROM inlinks"))
    assert not crawldb.links_analyzed(None)
    # An analysis that found no link to a stored page wrote none: nothing is missing.
    with engine.begin() as conn:
        conn.execute(text_sql("DELETE FROM crawls"))
    store.start_crawl("site", {}, NOW)
    store.finish_crawl("finished", stats | {"linkrank/inlinks": 0}, NOW + timedelta(seconds=2))
    assert crawldb.links_analyzed(None)


def test_crawl_to_resume_without_tables(tmp_path: Any) -> None:
    engine = db.create(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        assert CrawlDB(engine).crawl_to_resume("site", {}) is None
    finally:
        engine.dispose()


def test_stored_urls_and_frontier_pages_by_key(engine: Any, store: DocumentStore) -> None:
    links = [(f"http://a.example/{i}", "", i % 3 == 0) for i in range(12)]
    store.write_batch(
        [
            page("http://a.example/", hops=2, links=links),
            page("http://a.example/x", nofollow=True, links=[("http://a.example/n", "", False)]),
        ]
    )
    store.write_batch([page("http://a.example/gone")])
    gone = ids_by_url(engine)["http://a.example/gone"]
    store.write_batch([], gone=[GoneRow(gone, 404, NOW)])
    crawldb = CrawlDB(engine)
    # A gone page is not "stored" for a re-crawl: seeded or linked again, it is fetched.
    assert set(crawldb.stored_urls()) == {"http://a.example/", "http://a.example/x"}
    # Pages of 5 rows: every followable link of a followable page, once, in id order.
    rows = list(crawldb.frontier(chunk=5))
    assert [row.to_url for row in rows] == [u for u, _, nofollow in links if not nofollow]
    assert {row.hops for row in rows} == {2}


def test_revisits_all_and_due(engine: Any, store: DocumentStore) -> None:
    store.write_batch([page(f"http://a.example/{i}", etag=f'"{i}"') for i in range(7)])
    ids = ids_by_url(engine)
    with engine.begin() as conn:
        conn.execute(
            update(Document)
            .where(Document.id == ids["http://a.example/1"])
            .values(next_index_time=NOW + timedelta(days=30))
        )
        conn.execute(
            update(Document).where(Document.id == ids["http://a.example/2"]).values(gone_at=NOW)
        )
    crawldb = CrawlDB(engine)
    every = list(crawldb.revisits(due_only=False, chunk=2))
    assert len(every) == 6 and "http://a.example/2" not in {r.url for r in every}
    assert {r.etag for r in every} == {'"0"', '"1"', '"3"', '"4"', '"5"', '"6"'}
    due = {r.url for r in crawldb.revisits(due_only=True, now=NOW + timedelta(days=10))}
    assert due == {r.url for r in every} - {"http://a.example/1"}


def test_indexable_postings_counts_and_ids(engine: Any, store: DocumentStore) -> None:
    store.write_batch(
        [
            *(page(f"http://a.example/{i}", f"vacuum word{i}") for i in range(5)),
            page("http://a.example/noindex", "hidden", noindex=True),
            page("http://a.example/missing", "gone", status=404),
        ]
    )
    ids = ids_by_url(engine)
    crawldb = CrawlDB(engine)
    wanted = sorted(ids[f"http://a.example/{i}"] for i in range(5))
    assert sorted(crawldb.indexable_ids()) == wanted
    assert crawldb.count_indexable() == 5
    assert crawldb.count_indexable(before=NOW) == 0
    pages = list(crawldb.indexable_postings(chunk=2))
    assert [i for p in pages for i in p.ids] == wanted
    first = pages[0]
    assert first.urls[0] == "http://a.example/0"
    words = first.word_ids[: first.sizes[0]].tolist()
    stems = crawldb.stems(words)
    assert {"vacuum", "word0", "exampl"} <= set(stems.values())  # body and URL words
    vacuum = words.index(next(w for w, s in stems.items() if s == "vacuum"))
    assert first.counts[vacuum][0] == 1  # the body count comes first (SECTIONS order)
    # Restricted to some ids, over more than one page of rows.
    some = wanted[1:]
    assert [i for p in crawldb.indexable_postings(chunk=2, ids=some) for i in p.ids] == some
    store.mark_indexed(wanted[:2])
    assert crawldb.count_indexable(only_unindexed=True) == 3
    unindexed = crawldb.indexable_postings(chunk=2, only_unindexed=True)
    assert [i for p in unindexed for i in p.ids] == wanted[2:]
    assert crawldb.server_settings() == {first.server_ids[0]: {"titleweight": 4}}


def test_documents_and_section_counts(engine: Any, store: DocumentStore) -> None:
    store.write_batch([page("http://a.example/", "vacuum vacuum bloat")])
    (docid,) = ids_by_url(engine).values()
    crawldb = CrawlDB(engine)
    row = crawldb.documents([docid])[docid]
    assert (row.url, row.title, row.text) == (
        "http://a.example/",
        "title of http://a.example/",
        None,
    )
    assert crawldb.documents([docid], with_text=True)[docid].text == "vacuum vacuum bloat"
    assert crawldb.documents([]) == {}
    counts = crawldb.section_counts([docid], ["vacuum", "nothing"])
    assert counts[docid]["vacuum"]["body"] == 2
    assert counts[docid]["vacuum"]["title"] == 0
    assert "nothing" not in counts[docid]


def test_rows_from_another_process_store_the_same_postings(engine: Any) -> None:
    """A row pickled from another process (the analysis's) carries its records in columns
    (PackedWords); the store writes its postings from the columns: the same rows as from
    the records themselves."""
    text = "Vacuum reclaims storage; vacuuming often keeps tables small. " + "x" * 140
    store = DocumentStore(engine)
    # Two URLs of the same words, so that the two pages have the same stems.
    direct = page("http://a.example/same", text)
    sent = pickle.loads(pickle.dumps(page("http://a.example/same/", text)))
    assert isinstance(sent.words, PackedWords)
    store.write_batch([direct, sent])
    stored = {
        url: [
            (p.stem, p.surface, p.body_count, p.url_count, p.boilerplate_count, p.weight)
            for p in posting_rows(engine)
            if p.url == url
        ]
        for url in ("http://a.example/same", "http://a.example/same/")
    }
    assert len(stored["http://a.example/same"]) == len(direct.words) == 8
    assert stored["http://a.example/same/"] == stored["http://a.example/same"]
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT word_ids, surfaces, counts, weights FROM postings")
        assert len(set(map(tuple, rows))) == 1  # the same two rows, byte for byte


def test_store_retries_while_the_database_is_unreachable(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("search.store.time.sleep", lambda _: None)
    retried: list[Exception] = []
    store = DocumentStore(engine, retry_times=2, on_retry=retried.append)
    failures = iter([OperationalError("x", {}, Exception("down")), None])
    real = store._write_batch

    def flaky(*args: Any) -> Any:
        exc = next(failures)
        if exc is not None:
            raise exc
        return real(*args)

    monkeypatch.setattr(store, "_write_batch", flaky)
    result = store.write_batch([page("http://a.example/")])
    assert len(result.documents) == 1 and len(retried) == 1
    # Past its retries, the failure is the caller's.
    failing = DocumentStore(engine, retry_times=1, on_retry=retried.append)
    monkeypatch.setattr(
        failing, "_mark_indexed", lambda ids: (_ for _ in ()).throw(OperationalError("x", {}, None))
    )
    with pytest.raises(OperationalError):
        failing.mark_indexed([1])
    assert len(retried) == 2


def test_the_indexer_first_indexes_every_page_left_unindexed(
    engine: Any, store: DocumentStore, db_url: str, tmp_path: Any
) -> None:
    from search.index import Index
    from search.worker import IndexConfig, WorkerConfig
    from search.workerprocess import Worker

    later = datetime.now(UTC) + timedelta(hours=1)
    store.write_batch(
        [
            *(page(f"http://a.example/{i}", f"vacuum word{i}") for i in range(3)),
            # Crawl times after the crawl starts: pages a resumed crawl re-visited
            # (found unchanged) before its indexer read them.
            *(
                page(f"http://a.example/r{i}", f"vacuum again{i}", crawled_at=later)
                for i in range(2)
            ),
        ]
    )
    crawldb = CrawlDB(engine)
    left = sorted(crawldb.indexable_ids(only_unindexed=True))
    assert len(left) == 5
    # A crawl's worker starts its indexer, which catches up; the crawl sends nothing.
    index = IndexConfig(index_dir=str(tmp_path / "index"), batch_size=10)
    worker = Worker(WorkerConfig(database_url=db_url, index=index))
    report = worker.close_index()
    worker.store.engine.dispose()
    assert "index/error" not in report.values
    assert crawldb.indexable_ids(only_unindexed=True) == []
    assert Index(tmp_path / "index").docids() == set(left)


def test_the_indexer_removes_what_a_killed_recrawl_left_in_the_index(
    engine: Any, store: DocumentStore, db_url: str, tmp_path: Any
) -> None:
    from sqlalchemy import update

    from search.index import Index
    from search.worker import IndexConfig, WorkerConfig
    from search.workerprocess import Worker

    store.write_batch([page(f"http://a.example/{i}", f"vacuum word{i}") for i in range(3)])
    index = IndexConfig(index_dir=str(tmp_path / "index"), batch_size=10)

    def crawl() -> None:  # a crawl's worker and its indexer, sent nothing
        worker = Worker(WorkerConfig(database_url=db_url, index=index))
        report = worker.close_index()
        worker.store.engine.dispose()
        assert "index/error" not in report.values

    crawl()
    ids = sorted(CrawlDB(engine).indexable_ids())
    assert Index(tmp_path / "index").docids() == set(ids)
    # A re-crawl found a page gone and stored it so, then was killed before its indexer
    # committed the removal: the database says gone, the index still holds the page.
    with engine.begin() as conn:
        conn.execute(
            update(Document)
            .where(Document.id == ids[0])
            .values(status=404, gone_at=NOW, indexed=False)
        )
    assert Index(tmp_path / "index").docids() == set(ids)
    crawl()  # the next crawl's indexer removes it before anything else
    assert Index(tmp_path / "index").docids() == set(ids[1:])


def test_stem_cache_is_bounded_in_bytes(engine: Any) -> None:
    """The store's cache of stem ids stays under its bytes (it starts again empty), and
    every posting still points at its own stem."""
    store = DocumentStore(engine, word_cache_bytes=20_000)
    store.upsert_servers([("http://a.example/", {})], NOW)
    words = [f"zq{i:05d}x" for i in range(3000)]  # distinct stems, 8 letters each
    for n in range(10):
        text = " ".join(words[300 * n : 300 * n + 300])
        store.write_batch([page(f"http://a.example/{n}", text)])
        assert len(store.word_ids) <= 20_000 // 130 + 300
    assert len(store.word_ids) < 3000 // 2
    by_page: dict[str, set[str]] = {}
    for p in posting_rows(engine):
        by_page.setdefault(p.url, set()).add(p.stem)
    for n in range(10):
        assert set(words[300 * n : 300 * n + 300]) <= by_page[f"http://a.example/{n}"]


def test_stem_cache_keeps_the_batchs_own_stems(engine: Any) -> None:
    """The store's cache of stem ids is keyed by the stems the analysis made (which the
    analyzer's stem cache holds too), not by copies read back from the database."""
    store = DocumentStore(engine)
    row = page("http://a.example/1", "zebras graze quietly near the river bank")
    store.write_batch([row])
    assert row.words
    cached = {id(stem) for stem in store.word_ids}
    assert {id(stem) for stem in row.words} <= cached


def test_a_stored_batchs_words_go_as_its_index_documents_are_made(engine: Any) -> None:
    """The indexer's documents copy what the index needs of a stored batch's words; the
    rows' words are dropped as they are made, not kept beside them."""
    from search.workerprocess import index_batch

    store = DocumentStore(engine)
    rows = [page("http://a.example/1", "zebras graze"), page("http://a.example/2", "lions")]
    result = store.write_batch(rows)
    docs, deletes = index_batch(result, None)
    assert deletes == []
    assert docs.docids == [d.id for d in result.documents]
    first, second = docs.docs()
    assert {"zebra", "graze"} <= set(first.weights) and "lion" in second.weights
    assert [r.words for r in rows] == [None, None]


def test_linkranks_are_read_without_the_documents_text(engine: Any, store: DocumentStore) -> None:
    """The searcher's read of every linkrank uses the linkrank index: on SQLite the index
    alone (its entries hold the id), never the rows that hold the pages' text."""
    store.write_batch([page("http://a.example/1"), page("http://a.example/2")])
    ids = ids_by_url(engine)
    with engine.begin() as conn:
        conn.execute(
            update(Document).where(Document.id == ids["http://a.example/1"]).values(linkrank=2.5)
        )
    read, ranks = CrawlDB(engine).linkranks()
    assert (read.tolist(), ranks.tolist()) == ([ids["http://a.example/1"]], [2.5])
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            plan = " ".join(
                str(row[-1])
                for row in conn.execute(
                    text_sql(
                        "EXPLAIN QUERY PLAN SELECT id, linkrank FROM documents "
                        "WHERE linkrank IS NOT NULL"
                    )
                )
            )
        assert "COVERING INDEX ix_documents_linkrank" in plan


def test_links_by_target_are_rebuilt_by_the_link_analysis(engine: Any) -> None:
    """The page-info view's "Pages linking here" reads the links by target, which the
    link analysis rebuilds from the stored links (nofollow links included, links to
    pages not stored left out); a page stored again since drops its old links."""
    from search.linkrank import update_linkrank

    store = DocumentStore(engine)
    a, b, c = "http://a.example/1", "http://a.example/2", "http://a.example/3"
    store.write_batch(
        [
            page(
                a,
                links=[
                    (b, "to two", False),
                    (c, "to three", True),
                    ("http://x.example/", "", False),
                ],
            ),
            page(b, links=[(c, "also three", False)]),
            page(c),
        ]
    )
    crawldb, ids = CrawlDB(engine), ids_by_url(engine)
    assert crawldb.inbound(ids[c]) == []  # not analysed yet
    assert update_linkrank(engine).inlinks == 3
    assert [(r.url, r.anchor) for r in crawldb.inbound(ids[c])] == [
        (a, "to three"),
        (b, "also three"),
    ]
    assert [(r.id, r.title) for r in crawldb.inbound(ids[b])] == [(ids[a], f"title of {a}")]
    assert crawldb.inbound(ids[a]) == []
    store.write_batch([page(b)])  # its link to c is gone
    assert [r.url for r in crawldb.inbound(ids[c])] == [a]
    assert crawldb.rebuild_inlinks() == 2
    assert crawldb.rebuild_inlinks() == 2  # rebuilt whole, not added to
    assert [r.url for r in crawldb.inbound(ids[c], limit=1)] == [a]


def _per_table(engine: Any, select: str) -> dict[str, Any]:
    """*select* (``relname`` and one value, from a catalog with ``relname``) for each of
    the tables a crawl grows."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            f"{select} WHERE relname IN ('documents', 'words', 'postings', 'links')"
        )
        return dict(rows.all())


def _analyzed(engine: Any) -> dict[str, float]:
    """Each crawl table's row count as PostgreSQL's statistics hold it (-1: never analyzed)."""
    counts = _per_table(engine, "SELECT relname, reltuples FROM pg_class")
    return {name: float(n) for name, n in counts.items()}


@pytest.mark.parametrize("autovacuum", [False, True])
def test_the_store_analyzes_its_tables_where_autovacuum_does_not(
    pg_url: str, autovacuum: bool
) -> None:
    """Where PostgreSQL's autovacuum is off the store runs ANALYZE as autovacuum would:
    once 50 documents are stored, then again each time 50 + 10 % more are."""
    from search import store as store_module

    engine = db.connect(pg_url)
    try:
        store = DocumentStore(engine)
        store.autovacuum = autovacuum  # whatever the test server's setting
        batch = [page(f"http://a.example/{i}", f"word{i} vacuum") for i in range(30)]
        store.write_batch(batch)
        assert set(_analyzed(engine).values()) == {-1.0}  # 30 documents: not yet
        store.write_batch([page(f"http://a.example/b{i}", "bloat") for i in range(30)])
        counts = _analyzed(engine)
        if autovacuum:
            assert set(counts.values()) == {-1.0}
            return
        assert counts["documents"] == counts["postings"] == 60 and counts["links"] == 0
        threshold = store_module.ANALYZE_THRESHOLD + store_module.ANALYZE_SCALE * 60
        assert store._analyze_after == threshold
        short = int(threshold) - 1
        store.write_batch([page(f"http://a.example/c{i}", "x") for i in range(short)])
        assert _analyzed(engine)["documents"] == 60  # one short of the threshold
        store.write_batch([page("http://a.example/last", "x")])
        assert _analyzed(engine)["documents"] == 60 + short + 1
    finally:
        engine.dispose()


def _dead_rows(engine: Any, table: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text_sql("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = :t"),
                {"t": table},
            ).scalar_one()
        )


def test_marking_indexed_rewrites_no_row_already_marked(pg_url: str) -> None:
    """A row already marked indexed is not written again (a rebuild marks every document:
    on PostgreSQL an UPDATE that changes nothing still makes a new version of the row)."""
    engine = db.connect(pg_url)
    try:
        store = DocumentStore(engine)
        store.write_batch([page(f"http://a.example/{i}", "vacuum") for i in range(3)])
        ids = sorted(ids_by_url(engine).values())

        def versions() -> list[str]:  # the transaction that wrote each row's version
            with engine.connect() as conn:
                return list(conn.scalars(text_sql("SELECT xmin::text FROM documents ORDER BY id")))

        store.mark_indexed(ids[:1])
        before = versions()
        store.mark_indexed(ids)
        after = versions()
        assert after[0] == before[0] and after[1:] != before[1:]
        with engine.connect() as conn:
            assert conn.scalar(text_sql("SELECT count(*) FROM documents WHERE indexed")) == 3
    finally:
        engine.dispose()


def _vacuumed(engine: Any) -> dict[str, bool]:
    """Whether each crawl table has been vacuumed by hand since it was made."""
    done = _per_table(engine, "SELECT relname, last_vacuum IS NOT NULL FROM pg_stat_user_tables")
    return {name: bool(v) for name, v in done.items()}


def test_the_store_vacuums_during_a_crawl_where_autovacuum_does_not(pg_url: str) -> None:
    """Where autovacuum is off, the store's upkeep during a crawl vacuums a table whose
    dead rows exceed 50 + 20 % of its live ones, and only analyzes the others."""
    engine = db.connect(pg_url)
    try:
        store = DocumentStore(engine)
        store.autovacuum = False  # whatever the test server's setting
        store.write_batch([page(f"http://a.example/{i}", f"word{i}") for i in range(60)])
        assert not any(_vacuumed(engine).values())
        with engine.begin() as conn:  # each row updated three times: 180 dead rows
            for rank in (1.0, 2.0, 3.0):
                conn.execute(update(Document).values(linkrank=rank))
        for _ in range(100):  # the statistics are reported asynchronously
            if _dead_rows(engine, "documents") >= 180:
                break
            time.sleep(0.05)
        assert _dead_rows(engine, "documents") >= 180 > 50 + 0.2 * 60
        threshold = int(store._analyze_after)  # 50 + 10 % of 60 more documents: upkeep
        store.write_batch([page(f"http://a.example/b{i}", "bloat") for i in range(threshold)])
        assert _vacuumed(engine) == {
            "documents": True,
            "words": False,
            "postings": False,
            "links": False,
        }
        assert _analyzed(engine)["postings"] > 60  # analyzed, not vacuumed
    finally:
        engine.dispose()


def test_dead_rows_are_vacuumed_where_autovacuum_is_off(pg_url: str, tmp_path: Any) -> None:
    """Where autovacuum is off, a crawl's or a rebuild's end vacuums the tables whose
    dead rows exceed autovacuum's own threshold (50 + 20 % of the live rows)."""
    from search.store import vacuum_dead_rows

    assert vacuum_dead_rows(db.connect(f"sqlite:///{tmp_path / 'x.db'}")) == []
    engine = db.connect(pg_url)
    try:
        with engine.connect() as conn:
            if conn.exec_driver_sql("SHOW autovacuum").scalar() == "on":
                pytest.skip("autovacuum is on here: the store leaves the tables to it")
        DocumentStore(engine).write_batch(
            [page(f"http://a.example/{i}", f"word{i}") for i in range(40)]
        )
        with engine.begin() as conn:  # each row updated three times: 120 dead rows
            for rank in (1.0, 2.0, 3.0):
                conn.execute(update(Document).values(linkrank=rank))
        engine.dispose()  # its backend reports its counts as it ends
        for _ in range(100):  # the statistics are reported asynchronously
            if _dead_rows(engine, "documents") >= 120:
                break
            time.sleep(0.05)
        assert _dead_rows(engine, "documents") >= 120 > 50 + 0.2 * 40
        assert "documents" in vacuum_dead_rows(engine)
        assert _dead_rows(engine, "documents") == 0
        assert "documents" not in vacuum_dead_rows(engine)  # nothing left to reclaim
    finally:
        engine.dispose()


def test_a_process_storing_the_same_new_stems_waits_not_for_the_others_batch(
    pg_url: str, monkeypatch: Any
) -> None:
    """Two crawl processes storing pages with the same new stem: the second does not wait
    for the first's batch to commit (the stems are committed in a transaction of their
    own, before the batch's postings and links are written)."""
    import threading

    from search import faults

    engine = db.connect(pg_url)
    first, second = DocumentStore(engine), DocumentStore(engine)
    for store in (first, second):  # as each crawl process does as it starts
        store.upsert_servers([("http://a.example/", {})], NOW)
    written, release = threading.Event(), threading.Event()
    original = faults.point

    def hold(name: str) -> None:  # the first batch is written, its transaction open
        if name == "store_commit" and threading.current_thread().name == "first":
            written.set()
            release.wait(30)
        original(name)

    monkeypatch.setattr(faults, "point", hold)
    thread = threading.Thread(
        target=first.write_batch,
        args=([page("http://a.example/1", "okapi quagga zebra")],),
        name="first",
    )
    thread.start()
    try:
        assert written.wait(30)
        stored = threading.Thread(
            target=second.write_batch, args=([page("http://a.example/2", "okapi tapir")],)
        )
        stored.start()
        stored.join(10)
        assert not stored.is_alive(), "the second process waited for the first's batch"
    finally:
        release.set()
        thread.join(30)
        engine.dispose()
    engine = db.connect(pg_url)
    try:
        animals = {"okapi", "quagga", "zebra", "tapir"}
        rows = sorted((p.url, p.stem) for p in posting_rows(engine) if p.stem in animals)
        assert [(u[-1], s) for u, s in rows] == [
            ("1", "okapi"),
            ("1", "quagga"),
            ("1", "zebra"),
            ("2", "okapi"),
            ("2", "tapir"),
        ]
    finally:
        engine.dispose()


def test_linkranks_by_id_are_read_by_primary_key_as_they_are_written(pg_url: str) -> None:
    """In the transaction that writes a crawl's first linkranks, the read of each chunk's
    stored linkranks goes by primary key, not through the index on ``linkrank``: the
    statistics say that no document has one, and through that index each chunk read every
    linkrank written before it (100,000 written in 92 s instead of 7)."""
    import numpy as np

    from search.linkrank import _write_changed

    engine = db.connect(pg_url)
    try:
        DocumentStore(engine).write_batch([page("http://a.example/0")])
        with engine.begin() as conn:  # 5,000 more documents, none with a linkrank
            columns = ", ".join(
                c.name for c in Document.__table__.columns if c.name not in ("id", "url")
            )
            conn.exec_driver_sql(
                f"INSERT INTO documents (url, {columns}) SELECT 'http://a.example/' || n, "
                f"{columns} FROM documents, generate_series(1, 5000) AS n"
            )
            conn.exec_driver_sql("ANALYZE documents")
        crawldb = CrawlDB(engine)
        ids = np.array(sorted(ids_by_url(engine).values()), dtype=np.int64)

        def index_reads(conn: Any) -> int:  # scans of the linkrank index in the transaction
            return int(
                conn.exec_driver_sql(
                    "SELECT pg_stat_get_xact_numscans('ix_documents_linkrank'::regclass)"
                ).scalar_one()
            )

        with engine.begin() as conn:
            assert _write_changed(conn, crawldb, ids[:2500], np.full(2500, 2.0)) == 2500
            before = index_reads(conn)
            read, ranks = crawldb.linkranks(ids[2000:3000], conn)
            assert read.tolist() == ids[2000:2500].tolist() and set(ranks.tolist()) == {2.0}
            assert index_reads(conn) == before
    finally:
        engine.dispose()


def test_a_rebuild_does_not_mark_a_page_that_went_gone_meanwhile(
    engine: Any, store: DocumentStore, tmp_path: Any
) -> None:
    """A re-crawl marks a page gone while a full rebuild reads the database: the rebuild
    indexed the page as it read it, but does not mark it indexed, and ``check`` finds
    it in the index (extra) and removes it."""
    from search.index import Index
    from search.reindex import check, rebuild

    store.write_batch([page(f"http://a.example/{i}", f"vacuum word{i}") for i in range(4)])
    ids = sorted(CrawlDB(engine).indexable_ids())
    index = Index(tmp_path / "index")
    gone = ids[0]

    def recrawl(_: int) -> None:  # the rebuild has read its pages: a re-crawl stores a 404
        store.write_batch([], gone=[GoneRow(gone, 404, NOW)])

    rebuild(engine, index, batch_size=10, progress=recrawl, reader=False)
    with engine.connect() as conn:
        marked = dict(conn.execute(select_indexed()).all())
    assert marked == {gone: False, **{i: True for i in ids[1:]}}
    found = check(engine, index, repair=False)
    assert found.extra == [gone] and not found.consistent
    check(engine, index)
    assert index.docids() == set(ids[1:])


def test_check_reports_marks_of_documents_that_do_not_belong_in_the_index(
    engine: Any, store: DocumentStore, tmp_path: Any
) -> None:
    """A page marked indexed that does not belong in the index (gone, noindex, a clone) is
    an inconsistency a dry run reports (``stale_marks``), and a repair clears it."""
    from search.index import Index
    from search.reindex import check, rebuild

    store.write_batch([page(f"http://a.example/{i}", f"vacuum word{i}") for i in range(3)])
    index = Index(tmp_path / "index")
    rebuild(engine, index, reader=False)
    ids = sorted(CrawlDB(engine).indexable_ids())
    assert check(engine, index, repair=False).consistent
    with engine.begin() as conn:  # gone, removed from the index, still marked
        conn.execute(update(Document).where(Document.id == ids[0]).values(status=404, gone_at=NOW))
    with index.writer() as w:
        w.delete(ids[0])
    found = check(engine, index, repair=False)
    assert found.stale_marks == [ids[0]]
    assert found.missing == found.extra == found.unmarked == []
    assert not found.consistent
    repaired = check(engine, index)
    assert repaired.repaired
    assert check(engine, index, repair=False).consistent
    with engine.connect() as conn:
        assert dict(conn.execute(select_indexed()).all())[ids[0]] is False


def test_check_promotes_duplicates_an_earlier_version_left_without_original(
    engine: Any, store: DocumentStore, tmp_path: Any
) -> None:
    """Duplicates whose original went gone before duplicates were promoted (as an earlier
    version left them): a dry run reports them (``orphaned``), a repair makes the first
    of them the original and indexes it, the other pointing to it."""
    from search.index import Index
    from search.reindex import check, rebuild

    same = dict(checksum="c" * 40)
    store.write_batch([page(f"http://a.example/{i}", "okapi twin", **same) for i in range(3)])
    ids = sorted(CrawlDB(engine).indexable_ids())
    with engine.connect() as conn:
        clones = dict(conn.execute(select(Document.id, Document.clone_of_id)).all())
    original = next(i for i, c in clones.items() if c is None)
    copies = sorted(i for i, c in clones.items() if c is not None)
    assert ids == [original] and len(copies) == 2
    with engine.begin() as conn:  # gone, its duplicates left as they were
        conn.execute(
            update(Document).where(Document.id == original).values(status=404, gone_at=NOW)
        )
    index = Index(tmp_path / "index")
    rebuild(engine, index, reader=False)
    found = check(engine, index, repair=False)
    assert found.orphaned == copies and not found.consistent
    assert check(engine, index).repaired
    assert index.docids() == {copies[0]}
    with engine.connect() as conn:
        clones = dict(conn.execute(select(Document.id, Document.clone_of_id)).all())
    assert clones[copies[0]] is None and clones[copies[1]] == copies[0]
    assert check(engine, index, repair=False).consistent


def select_indexed() -> Any:
    from sqlalchemy import select

    return select(Document.id, Document.indexed)


def test_a_documents_postings_are_read_by_document(engine: Any, store: DocumentStore) -> None:
    """One postings row a page with words (none for a page without): a page's top words
    by weight then stem, with their surface forms and counts, and how many it has; the
    surface forms of a stem in some pages, most frequent first; section counts."""
    store.write_batch(
        [
            page("http://a.example/1", "vacuuming tables vacuum bloat bloat bloat"),
            page("http://a.example/2", "vacuum the tables"),
            page("http://a.example/3", "Vacuum"),
        ]
    )
    pdf = page("http://a.example/f.pdf", kind="file")
    pdf.words = None
    store.write_batch([pdf])
    ids = ids_by_url(engine)
    with engine.connect() as conn:
        assert conn.execute(text_sql("SELECT count(*) FROM postings")).scalar() == 3
    crawldb = CrawlDB(engine)
    words, total = crawldb.top_words(ids["http://a.example/1"], limit=4)
    mine = [p for p in posting_rows(engine) if p.url == "http://a.example/1"]
    assert total == len(mine) > 4
    assert [(w.stem, w.surface, w.body_count, w.url_count, w.weight) for w in words] == [
        (p.stem, p.surface, p.body_count, p.url_count, p.weight)
        for p in sorted(mine, key=lambda p: (-p.weight, p.stem))[:4]
    ]
    assert (words[0].stem, words[0].weight) == ("bloat", 3.0)
    assert ("vacuum", "vacuuming", 2) in [(w.stem, w.surface, w.body_count) for w in words]
    assert crawldb.top_words(ids["http://a.example/f.pdf"]) == ([], 0)
    some = [ids[f"http://a.example/{n}"] for n in (1, 2, 3)]
    assert crawldb.surfaces("vacuum", some) == [("vacuum", 2), ("vacuuming", 1)]
    assert crawldb.surfaces("vacuum", some[:1]) == [("vacuuming", 1)]
    assert crawldb.surfaces("nothing", some) == []
    counts = crawldb.section_counts([*some, ids["http://a.example/f.pdf"]], ["tabl", "bloat"])
    assert {d: sorted(c) for d, c in counts.items()} == {
        some[0]: ["bloat", "tabl"],
        some[1]: ["tabl"],
    }
    assert counts[some[0]]["bloat"]["body"] == 3
