"""The store's retry after a rolled-back transaction: the stem and server ids that
transaction inserted are not kept (they were rolled back with it)."""

from __future__ import annotations

import pickle
import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from search import db
from search.models import Document, Posting
from search.store import DocumentStore
from tests.test_unit_linkrank import BASE, row


def test_a_retried_batch_does_not_reuse_ids_of_the_rolled_back_transaction(
    tmp_path: Path, monkeypatch: Any
) -> None:
    engine = db.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store = DocumentStore(engine, retry_times=2)
    original = store._write_documents
    calls = []

    def fail_once(conn: Any, rows: Any, stems: Any) -> Any:
        written = original(conn, rows, stems)  # stems and the server inserted, then cached
        calls.append(1)
        if len(calls) == 1:  # the database goes away before the commit
            raise OperationalError("COMMIT", {}, Exception("server closed the connection"))
        return written

    monkeypatch.setattr(store, "_write_documents", fail_once)
    monkeypatch.setattr("search.store.time.sleep", lambda seconds: None)
    store.write_batch([row("a", "quagga zebra okapi", []), row("b", "zebra tapir", [])])
    assert len(calls) == 2
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Document)).scalar_one() == 2
        assert conn.execute(select(func.count()).select_from(Posting)).scalar_one() > 0


def test_fingerprints_of_a_rolled_back_transaction_are_forgotten(
    tmp_path: Path, monkeypatch: Any
) -> None:
    engine = db.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store = DocumentStore(engine, retry_times=0)
    words = " ".join(f"word{n}" for n in range(300))
    original = store._write_documents

    def refused(conn: Any, rows: Any, stems: Any) -> Any:
        original(conn, rows, stems)  # fingerprints taken and remembered, then the batch fails
        raise OperationalError("COMMIT", {}, Exception("server closed the connection"))

    monkeypatch.setattr(store, "_write_documents", refused)
    with pytest.raises(OperationalError):
        store.write_batch([row("a", words, [])])
    monkeypatch.setattr(store, "_write_documents", original)
    # "b" takes the id the rolled-back "a" had; "c" is nearly "a": it duplicates nothing
    # that was stored.
    store.write_batch([row("b", "quagga zebra okapi", []), row("c", words + " extra", [])])
    with engine.connect() as conn:
        marks = {
            url: near
            for url, near in conn.execute(select(Document.url, Document.near_duplicate_of_id))
        }
    assert set(marks.values()) == {None}


def _error(cls: Any, orig: BaseException) -> Any:
    return cls("INSERT INTO documents", {}, orig)


@pytest.mark.parametrize(
    ("orig", "retried"),
    [
        # What can pass: the connection or the server comes back, a lock is let go.
        (Exception("server closed the connection unexpectedly"), True),
        (Exception("connection refused"), True),
        # A server host that stopped answering: the connect timed out, or the TCP
        # keepalives or tcp_user_timeout closed the connection (search.db).
        (psycopg.errors.ConnectionTimeout("connection timeout expired"), True),
        (
            psycopg.OperationalError(
                "consuming input failed: could not receive data from server: Connection timed out"
            ),
            True,
        ),
        (sqlite3.OperationalError("database is locked"), True),
        # What cannot: the disk is full, the database is read-only.
        (sqlite3.OperationalError("database or disk is full"), False),
        (sqlite3.OperationalError("attempt to write a readonly database"), False),
        (psycopg.errors.DiskFull("could not extend file: No space left on device"), False),
        (psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT"), False),
    ],
)
def test_only_what_can_pass_is_retried(orig: BaseException, retried: bool) -> None:
    from sqlalchemy.exc import InternalError

    from search.store import refused, unreachable

    cls = InternalError if isinstance(orig, psycopg.errors.InternalError) else OperationalError
    exc = _error(cls, orig)
    assert unreachable(exc) is retried
    assert (refused(exc) is not None) is (not retried)


def test_a_full_disk_fails_the_batch_at_once_with_its_own_message(
    tmp_path: Path, monkeypatch: Any
) -> None:
    engine = db.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    retries: list[Exception] = []
    store = DocumentStore(engine, retry_times=5, on_retry=retries.append)

    def full(conn: Any, rows: Any, stems: Any) -> Any:
        raise _error(OperationalError, sqlite3.OperationalError("database or disk is full"))

    monkeypatch.setattr(store, "_write_documents", full)
    monkeypatch.setattr("search.store.time.sleep", lambda seconds: pytest.fail("retried"))
    with pytest.raises(OperationalError) as info:
        store.write_batch([row("a", "quagga zebra okapi", [])])
    assert retries == []
    from search.store import refused

    assert refused(info.value) == "the database's disk is full"


def test_a_database_error_does_not_carry_the_statements_parameters(tmp_path: Path) -> None:
    """A failed statement's message names it, not its parameters: those of a batch are
    the stored pages' texts and postings, megabytes in a log line."""
    from sqlalchemy import text

    engine = db.create(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)"))
    secret = "pangolin-text-of-a-page"  # a short one: SQLAlchemy cuts long ones in the middle
    with pytest.raises(Exception) as raised, engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1, :b), (1, :b)"), {"b": secret})
    engine.dispose()
    assert "UNIQUE" in str(raised.value) and secret not in str(raised.value)


def test_the_indexers_start_survives_an_unreachable_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The indexer's first reads (the catch-up, the removal of what a killed crawl left in
    the index) are retried while the database is unreachable, as its marks are: a
    PostgreSQL restarted as a crawl started failed the crawl's indexer."""
    import queue

    from search import indexer

    calls = []

    def remove_once_unreachable(*args: Any, **kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("SELECT id FROM documents", {}, Exception("connection is bad"))
        return 0

    monkeypatch.setattr(indexer, "remove_unindexable", remove_once_unreachable)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    db.connect(url).dispose()
    inbox: queue.Queue[Any] = queue.Queue()
    outbox: queue.Queue[Any] = queue.Queue()
    inbox.put(None)  # nothing to index: the crawl ends at once
    indexer._worker(inbox, outbox, str(tmp_path / "index"), url, 10, 64, None, [])
    assert len(calls) == 2
    messages = []
    while not outbox.empty():
        messages.append(outbox.get_nowait())
    # The parent told that the indexer waited on the database (from the first retry: the
    # start-up's work indexes too), then that it no longer does; then the end.
    assert [m[:3:2] for m in messages[:2]] == [("database", True), ("database", False)]
    assert [m[0] for m in messages[2:]] == ["done"]


def _indexer_batches(tmp_path: Path, url: str, *pages: list[str]) -> list[tuple[str, list[int]]]:
    """Each list of *pages* (paths) stored into the database at *url* in a batch of its
    own, and the file of the indexer's batch that adds them, with their ids."""
    from search.indexer import Batch
    from search.workerprocess import index_batch

    engine = db.connect(url)
    store = DocumentStore(engine)
    batches = []
    for n, paths in enumerate(pages):
        result = store.write_batch([row(path, f"quagga page {path}", []) for path in paths])
        docs, deletes = index_batch(result, None)
        message = tmp_path / f"{n}.batch"
        message.write_bytes(pickle.dumps(Batch(docs, deletes)))
        batches.append((str(message), [doc.id for doc in result.documents]))
    engine.dispose()
    return batches


def _marked(url: str) -> list[str]:
    engine = db.create(url)
    try:
        with engine.connect() as conn:
            return sorted(conn.scalars(select(Document.url).where(Document.indexed.is_(True))))
    finally:
        engine.dispose()


def _run_indexer(
    tmp_path: Path, url: str, messages: list[str], failing: threading.Event | None = None
) -> tuple[str, int, dict[str, Any]]:
    """The indexer process's work, in this process, on the batch files *messages* (a
    commit each); its last message."""
    from search import indexer

    inbox: queue.Queue[Any] = queue.Queue()
    outbox: queue.Queue[Any] = queue.Queue()
    for message in [*messages, None]:
        inbox.put(message)
    indexer._worker(inbox, outbox, str(tmp_path / "index"), url, 1, 64, None, [], failing)
    last = outbox.get_nowait()
    while not outbox.empty():
        last = outbox.get_nowait()
    return last


def _unreachable_marks(monkeypatch: pytest.MonkeyPatch, fail: int) -> list[list[int]]:
    """Make the first *fail* marks fail as when the database is down; the ids of each
    attempt."""
    attempts: list[list[int]] = []
    original = DocumentStore._mark_indexed

    def mark(self: DocumentStore, doc_ids: Any) -> None:
        attempts.append(list(doc_ids))
        if len(attempts) <= fail:
            raise OperationalError("UPDATE documents", {}, Exception("connection refused"))
        original(self, doc_ids)

    monkeypatch.setattr(DocumentStore, "_mark_indexed", mark)
    return attempts


def test_the_indexers_marks_are_tried_once_when_the_database_is_known_to_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crawl's worker knows the database fails (its batches are not stored): the
    indexer's marks are then tried once, not retried for minutes, and those that fail
    are reported (their pages are searchable, not marked), not raised."""
    from search.index import Index

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    [(message, ids)] = _indexer_batches(tmp_path, url, ["a", "b"])
    attempts = _unreachable_marks(monkeypatch, fail=1_000)
    monkeypatch.setattr("search.store.time.sleep", lambda seconds: pytest.fail("retried"))
    failing = threading.Event()
    failing.set()
    kind, total, info = _run_indexer(tmp_path, url, [message], failing)
    assert (kind, total) == ("done", 2)
    assert attempts == [ids]
    assert info["unmarked"] == 2 and "connection refused" in info["unmarked_error"]
    assert Index(str(tmp_path / "index")).doc_count() == 2
    assert _marked(url) == []


def test_the_indexers_marks_that_fail_past_their_retries_are_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not known to fail: a mark is retried while the database is unreachable; past the
    retries the indexer goes on (no traceback, no failed indexer), the next marks tried
    once each, and says what it could not mark when it stops."""
    from search import indexer

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    batches = _indexer_batches(tmp_path, url, ["a"], ["b"])
    attempts = _unreachable_marks(monkeypatch, fail=1_000)
    monkeypatch.setattr("search.store.time.sleep", lambda seconds: None)
    kind, total, info = _run_indexer(tmp_path, url, [m for m, _ in batches])
    assert (kind, total) == ("done", 2)
    assert len(attempts) == indexer.MARK_RETRY_TIMES + 2
    assert attempts[-1] == [*batches[0][1], *batches[1][1]]
    assert info["unmarked"] == 2 and info["retries"] == indexer.MARK_RETRY_TIMES


def test_the_indexer_marks_what_it_could_not_once_the_database_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mark that failed is tried again with the next commit's: the database back, every
    page is marked, and nothing is reported unmarked."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    batches = _indexer_batches(tmp_path, url, ["a"], ["b"])
    attempts = _unreachable_marks(monkeypatch, fail=1)
    failing = threading.Event()
    failing.set()
    kind, total, info = _run_indexer(tmp_path, url, [m for m, _ in batches], failing)
    assert (kind, total) == ("done", 2)
    assert attempts == [batches[0][1], [*batches[0][1], *batches[1][1]]]
    assert info["unmarked"] == 0
    assert _marked(url) == [f"{BASE}a", f"{BASE}b"]


def test_a_closing_crawl_retries_its_indexers_marks_for_a_bounded_time(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database goes down after the last batch was stored: no batch failed, so the
    indexer was not told, and its marks would be retried for minutes.  Once the crawl
    has been closing for CLOSE_MARK_WAIT seconds they are tried once, and what they
    could not mark is reported, not raised."""

    from search import indexer
    from search.workerprocess import index_batch

    monkeypatch.setattr(indexer, "CLOSE_MARK_WAIT", 2.0)  # in this process: close()'s
    engine = db.connect(pg_url)
    stored = DocumentStore(engine).write_batch([row(p, f"quagga page {p}", []) for p in "ab"])
    batch = indexer.Batch(*index_batch(stored, None))
    engine.dispose()
    process = _indexed_while_down(tmp_path, pg_url, batch)
    assert process.error is None
    assert process.info["unmarked"] == 2, process.info
    assert 1 <= process.info["retries"] < indexer.MARK_RETRY_TIMES, process.info
    assert "not currently accepting connections" in process.info["unmarked_error"]


def test_a_closing_crawls_long_last_commit_does_not_use_up_its_wait_for_the_marks(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait of a closing crawl for its indexer's marks (CLOSE_MARK_WAIT) is counted
    while the indexer is at work on the database, not while it commits: a last commit
    that lasts longer than the wait (held here, as a large crawl's last commit and the
    batches its inbox still holds can), then a database that goes down as the indexer
    marks and comes back within the wait: the marks are retried, and land."""
    from search import faults, indexer
    from search.workerprocess import index_batch
    from tests.test_unit_pipeline import _admin, _reachable

    monkeypatch.setattr(indexer, "CLOSE_MARK_WAIT", 4.0)  # in this process: close()'s
    gate = tmp_path / "committed"  # the indexer's commit lasts until it exists
    monkeypatch.setenv(faults.HOLD_ENV, "index_committed")
    monkeypatch.setenv(faults.HOLD_UNTIL_ENV, str(gate))
    engine = db.connect(pg_url)
    stored = DocumentStore(engine).write_batch([row(p, f"quagga page {p}", []) for p in "ab"])
    batch = indexer.Batch(*index_batch(stored, None))
    engine.dispose()
    process = indexer.IndexerProcess(str(tmp_path / "index"), pg_url, batch_size=1000)
    process.start()
    admin, name = _admin(pg_url)

    def long_commit_then_a_short_outage() -> None:
        time.sleep(indexer.CLOSE_MARK_WAIT + 1.0)  # longer than the wait, from close()
        gate.touch()
        deadline = time.monotonic() + 60
        while gate.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.0)  # the indexer marks meanwhile: the database refuses it
        _reachable(admin, name, True)

    helper = threading.Thread(target=long_commit_then_a_short_outage, daemon=True)
    try:
        _reachable(admin, name, False)
        process.send(batch)
        helper.start()
        process.close(timeout=120)
        helper.join(60)
    finally:
        gate.touch()
        _reachable(admin, name, True)
        admin.dispose()
    assert process.error is None, process.error
    assert process.info["unmarked"] == 0, process.info
    assert process.info["retries"] >= 1, process.info  # the database was down as it marked
    assert _marked(pg_url) == [f"{BASE}a", f"{BASE}b"]


class _Inbox:
    """An inbox that stays full."""

    def __init__(self) -> None:
        self.puts = 0

    def put(self, item: Any, timeout: float | None = None) -> None:
        self.puts += 1
        if timeout is None:
            raise AssertionError("a put that would wait for ever on a full inbox")
        time.sleep(timeout)
        raise queue.Full


class _Process:
    """An indexer process that reads no message: it dies after *lives* looks, or is stuck
    until terminated."""

    def __init__(self, lives: int | None) -> None:
        self.lives = lives
        self.exitcode: int | None = None
        self.terminated = False

    def is_alive(self) -> bool:
        if self.lives is not None:
            self.lives -= 1
            if self.lives < 0:
                self.exitcode = -9
        return self.exitcode is None

    def terminate(self) -> None:
        self.terminated = True
        self.exitcode = -15

    def join(self, timeout: float | None = None) -> None:
        pass


@pytest.mark.parametrize("dies", [True, False])
def test_closing_an_indexer_whose_inbox_is_full_does_not_wait_for_ever(dies: bool) -> None:
    """The indexer's inbox full, the stop message waits for room only while the indexer
    lives, and as long as close's timeout: an indexer that died, or is stuck, does not
    hold the crawl's close for ever."""
    from search import indexer

    process = indexer.IndexerProcess("unused", "sqlite://")
    process.inbox = _Inbox()
    process.process = stuck = _Process(lives=3 if dies else None)
    started = time.monotonic()
    process.close(timeout=None if dies else 1.0)
    assert time.monotonic() - started < 10
    assert process.inbox.puts >= 1
    assert stuck.terminated is not dies
    assert process.error == ("exit code -9" if dies else "exit code -15")


def test_the_indexers_read_of_promoted_duplicates_survives_an_unreachable_database(
    tmp_path: Path,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A page whose original went gone becomes an original (promoted), and the indexer
    reads it from the database to index it.  The database down then, the read is
    retried as the marks are, and past that left out, not raised: the indexer commits
    the rest of the batch and stops cleanly (no failed indexer, no traceback), and
    reports what it could not read in one line's worth (``unread``, ``unread_error``).
    The promoted page stays stored and not marked indexed: the next crawl's indexer
    indexes it (its catch-up), as it does a page that could not be marked."""
    from datetime import UTC, datetime

    from search import indexer
    from search.index import Index
    from search.rows import GoneRow
    from search.workerprocess import index_batch

    monkeypatch.setattr(indexer, "CLOSE_MARK_WAIT", 2.0)  # in this process: close()'s
    engine = db.connect(pg_url)
    store = DocumentStore(engine)
    same = {"checksum": "one content"}
    [original] = store.write_batch([row("a", "quagga copy", [], **same)]).documents
    [clone] = store.write_batch([row("b", "quagga copy", [], **same)]).documents
    assert clone.clone_of == original.id
    now = datetime.now(UTC)
    result = store.write_batch([row("c", "okapi page", [])], gone=[GoneRow(original.id, 404, now)])
    assert result.promoted == [clone.id]
    batch = indexer.Batch(*index_batch(result, None), result.promoted)
    process = _indexed_while_down(tmp_path, pg_url, batch)
    assert process.error is None, process.error
    assert "Traceback" not in capfd.readouterr().err  # the indexer's own (another process)
    assert process.info["unread"] == 1, process.info
    assert "not currently accepting connections" in process.info["unread_error"]
    assert "\n" not in process.info["unread_error"]
    # The batch's own page is searchable; the promoted one is the next crawl's to index.
    assert Index(str(tmp_path / "index")).docids() == {result.documents[0].id}
    left = indexer.IndexerProcess.left_unindexed(engine).tolist()
    assert sorted(left) == sorted([clone.id, result.documents[0].id])
    engine.dispose()


def test_the_indexers_start_up_reads_failing_past_their_retries_say_so_in_one_line(
    tmp_path: Path, pg_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """The database unreachable as the crawl starts, past the retries of the indexer's
    first reads (the catch-up, the removal of what a killed crawl left in the index): the
    indexer fails (``index/error``: the crawl's pages stay stored, and ``reindex --new``
    makes them searchable), said in one line with the driver's first line, as its marks'
    and reads' failures are; no traceback."""
    from search import indexer
    from tests.test_unit_pipeline import _admin, _reachable

    db.connect(pg_url).dispose()  # the schema
    # A page left unindexed by an earlier crawl: the catch-up reads it.
    index_dir = str(tmp_path / "index")
    process = indexer.IndexerProcess(index_dir, pg_url, batch_size=1000, catch_up=[1])
    process.database_failing(True)  # known to fail: each read is tried once
    admin, name = _admin(pg_url)
    try:
        _reachable(admin, name, False)
        process.start()
        process.close()
    finally:
        _reachable(admin, name, True)
        admin.dispose()
    assert process.error is not None
    assert process.error.startswith("OperationalError: "), process.error
    assert "not currently accepting connections" in process.error
    assert "\n" not in process.error
    assert "Traceback" not in capfd.readouterr().err  # the indexer's own (another process)


def _indexed_while_down(tmp_path: Path, pg_url: str, batch: Any) -> Any:
    """An indexer process on *pg_url* given *batch* and closed while the database refuses
    connections (back up afterwards): the process, for its ``error`` and ``info``."""
    from search import indexer
    from tests.test_unit_pipeline import _admin, _reachable

    process = indexer.IndexerProcess(str(tmp_path / "index"), pg_url, batch_size=1000)
    process.start()
    admin, name = _admin(pg_url)
    try:
        _reachable(admin, name, False)
        process.send(batch)
        process.close()
    finally:
        _reachable(admin, name, True)
        admin.dispose()
    return process
